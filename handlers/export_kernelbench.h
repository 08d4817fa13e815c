/* Export of a task's best candidate as a KernelBench file: Python text defining ModelNew,
 * a drop-in for the task's Model that runs the candidate. The file does not repeat the
 * task's reference program: it is exec'd after it, in the same namespace, as KernelBench's
 * eval does, and raises NameError at import when Model is not defined. Pure: no I/O. */
#ifndef OPFORGE_EXPORT_KERNELBENCH_H
#define OPFORGE_EXPORT_KERNELBENCH_H

#include <jansson.h>
#include <stddef.h>

/* Name of the single-kernel candidate's C++ launcher, bound into Python by load_inline. */
#define EXPORT_LAUNCHER_NAME "ofg_launch"

/* The C++ launcher of plan (docs/architecture.md, Formats) for the tensors of profile
 * (both borrowed):
 *   void ofg_launch(std::vector<torch::Tensor> tensors, int64_t stream)
 * tensors holds the profile's "inputs", then its "params", then its "outputs", each list
 * in profile order. Every launch is made in plan order on that stream, with its buffers
 * as zeroed scratch tensors allocated per call; the launcher throws naming the launch
 * when one fails. On success returns 0 and *ret_text (caller frees with free); when the
 * profile or plan cannot be expressed (unknown dtype or tensor, malformed launch) returns
 * -1 with the reason in err. */
int export_kernelbench_launcher(const json_t *profile, const json_t *plan, char **ret_text,
                                char *err, size_t errlen);

/* The whole KernelBench file for candidate (borrowed) of a task with this profile
 * (borrowed). A candidate {"id","task_id","source","options","plan"} gives its CUDA source
 * and launcher as strings, compiled by load_inline, then ModelNew. A candidate with
 * "program" (docs/architecture.md, "Programs: regions, library steps, composition") gives
 * one CUDA translation unit per region (its -D options as #defines, its kernels renamed
 * r<id>_<name>), compiled together by torch.utils.cpp_extension.load, and a ModelNew that
 * runs the steps in order: library steps through the traced graph of self.ref, regions
 * through their launchers, the whole forward as one CUDA graph when the program asks for
 * it. On success returns 0 and *ret_text (caller frees with free); otherwise -1 with the
 * reason in err. */
int export_kernelbench(const json_t *profile, const json_t *candidate, char **ret_text,
                       char *err, size_t errlen);

/* The number of library steps in candidate's program (borrowed; 0 for a single-kernel
 * candidate or a program without any), and in ret_list (caller's buffer of list_len bytes,
 * always NUL-terminated when list_len > 0) their "target node" pairs, comma-separated, cut
 * with "..." when they do not fit. */
int export_library_steps(const json_t *candidate, char *ret_list, size_t list_len);

#endif
