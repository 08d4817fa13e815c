/* Export of a task's best candidate as a KernelBench file: Python text defining ModelNew,
 * a drop-in for the task's Model that runs the candidate's launch plan. Pure: no I/O. */
#ifndef OPFORGE_EXPORT_KERNELBENCH_H
#define OPFORGE_EXPORT_KERNELBENCH_H

#include <jansson.h>
#include <stddef.h>

/* Name of the generated C++ launcher, bound into Python by load_inline. */
#define EXPORT_LAUNCHER_NAME "ofg_launch"

/* The C++ launcher of plan (docs/architecture.md, "Formats") for the tensors of profile
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

/* The whole KernelBench file for candidate ({"id","task_id","source","options","plan"},
 * borrowed) of a task with this reference source and profile (borrowed): the reference
 * verbatim, then the CUDA source and the launcher as strings, then ModelNew. On success
 * returns 0 and *ret_text (caller frees with free); otherwise -1 with the reason in err. */
int export_kernelbench(const char *reference, const json_t *profile, const json_t *candidate,
                       char **ret_text, char *err, size_t errlen);

#endif
