/* What the KernelBench export's files share (export_common.c, export_launcher.c,
 * export_rename.c, export_layout.c, export_kernelbench.c, export_program.c); not an API
 * outside them. */
#ifndef OPFORGE_HANDLERS_EXPORT_INTERNAL_H
#define OPFORGE_HANDLERS_EXPORT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define EXPORT_MAX_TENSORS 1024

/* How one profile dtype appears in C++ and in Python. accessor is the type data_ptr<>
 * knows; ctype is the pointer type the launcher declares (they differ only for int64,
 * whose kernels take long long, while ATen's int64_t is long on Linux). */
struct export_dtype {
  const char *name;
  const char *ctype;
  const char *accessor;
  const char *torch;
};

enum export_tensor_kind { TENSOR_INPUT, TENSOR_PARAM, TENSOR_OUTPUT, TENSOR_NODE };

/* One launcher tensor; the strings and shape are borrowed from the profile (or, for a
 * region's tensors, from the candidate's plan and the profile). */
struct xtensor {
  const char *name;
  const struct export_dtype *dtype;
  const json_t *shape;
  enum export_tensor_kind kind;
  long position;      /* inputs: the index in forward's arguments */
  bool written;       /* region tensors: allocated by the step, not read */
  bool channels_last; /* listed in the plan's channels_last (export_read_channels_last) */
};

/* A launcher's tensors in launcher order. */
struct xtensors {
  struct xtensor items[EXPORT_MAX_TENSORS];
  size_t n;
  size_t n_outputs;
};

/* A memstream and its buffer: export_text_open, write with stdio, export_text_close. */
struct export_text {
  FILE *f;
  char *data;
  size_t len;
};

/* The candidate's (or a region's) options as text: #define lines, their #undef lines and
 * nvcc flags as Python list items (", \"-maxrregcount=64\""). All owned by the struct. */
struct export_options {
  char *defines, *undefs, *flags;
};

/* ---- export_common.c ---- */

/* Writes the reason into err and returns -1, for `return export_fail(...)`. */
int export_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The dtype called name in profiles (static storage), or NULL. */
const struct export_dtype *export_dtype_find(const char *name);

bool export_is_identifier(const char *s);

/* N of "input:N" (a non-negative decimal), or -1. */
long export_input_position(const char *name);

/* Checks a profile shape: an array of at most 16 non-negative integers. */
bool export_shape_ok(const json_t *shape);

/* Fills ts (caller-owned) from the profile (borrowed): inputs, then params, then outputs;
 * 0, or -1 with the reason in err. */
int export_collect_tensors(struct xtensors *ts, const json_t *profile, char *err,
                           size_t errlen);

/* The index of name in ts, or -1. */
long export_tensor_index(const struct xtensors *ts, const char *name);

/* Opens t; 0, or -1 ("out of memory") with the reason in err. */
int export_text_open(struct export_text *t, char *err, size_t errlen);

/* Closes the stream; on success (ok and no write error) hands the text to *ret_text (the
 * caller frees it), else frees it and returns -1 (err says "out of memory" unless ok was
 * already false, when err already holds the reason). */
int export_text_close(struct export_text *t, bool ok, char **ret_text, char *err,
                      size_t errlen);

/* Writes s as a Python string literal: triple-quoted for multi-line text. Backslashes and
 * control characters are escaped, and so is every quote that could close the literal. */
void export_put_py_string(FILE *f, const char *s, bool triple);

/* Writes s with anything outside [A-Za-z0-9_.:-] shown as '?', for comments. */
void export_put_safe(FILE *f, const char *s);

/* Writes a JSON shape as a Python tuple. */
void export_put_py_shape(FILE *f, const json_t *shape);

/* Writes a floating literal that reads back as exactly x in C++ and Python. */
void export_put_real(FILE *f, double x, bool single);

/* Splits options (borrowed; an array of strings, or absent) into *ret (the caller clears
 * it with export_options_clear): -D macros become #define lines and their #undefs, the
 * rest nvcc flags. Only what the evaluator accepts; 0, or -1 with the reason in err. */
int export_options_build(const json_t *options, struct export_options *ret, char *err,
                         size_t errlen);
void export_options_clear(struct export_options *o);

/* Writes the Python head every export starts with: the banner naming candidate
 * (borrowed), what (a comment paragraph, each line starting with "# "), the imports (with
 * those of the program runner when program is set) and the check that Model is defined. */
void export_put_head(FILE *f, const json_t *candidate, const char *what, bool program);

/* Writes _OFG_SCALARS (the numeric and boolean non-tensor arguments, whose values the
 * plan has built in) and _OFG_NARGS (how many arguments forward takes). */
void export_put_scalars(FILE *f, const json_t *profile, const struct xtensors *ts);

/* Writes the expression forward returns, over a list named outputs: the structure of
 * Model's return value when the FX graph shows it and it holds exactly the profile's
 * n_outputs outputs; else the one output, or a tuple of them. */
void export_put_structure(FILE *f, const json_t *profile, size_t n_outputs);

/* ---- export_launcher.c ---- */

/* The comment of the single-kernel launcher (EXPORT_LAUNCHER_NAME). */
#define EXPORT_LAUNCHER_COMMENT                                                           \
  "// opforge launcher: tensors are the profile's inputs, then its params, then its\n"     \
  "// outputs, each in profile order; launches run in plan order on stream.\n"

/* Writes into f the C++ launcher called name for plan (borrowed) over ts: comment (lines
 * starting with "// ") first, then
 *   void NAME(std::vector<torch::Tensor> tensors, int64_t stream)
 * taking the tensors of ts in order. 0, or -1 with the reason in err. */
int export_put_launcher(FILE *f, const struct xtensors *ts, const json_t *plan,
                        const char *name, const char *comment, char *err, size_t errlen);

/* ---- export_rename.c ---- */

/* source with every kernel renamed to prefix + name (the caller frees it): the
 * __global__ functions it defines and the names in extra (a JSON array of strings,
 * borrowed; may be NULL). Whole identifiers are renamed wherever they occur outside
 * comments and string literals, so references stay consistent. NULL when out of memory. */
char *export_rename_kernels(const char *source, const char *prefix, const json_t *extra);

/* ---- export_layout.c ---- */

/* Checks plan's optional "channels_last" (borrowed): an array of distinct names of
 * tensors of ts that its launches pass, each of rank 4 or 5; marks them channels_last in
 * ts. 0, or -1 with the reason, naming the tensor, in err. */
int export_read_channels_last(const json_t *plan, struct xtensors *ts, char *err,
                              size_t errlen);

/* Whether a profile graph node (borrowed) is a convolution that runs on a channels-last
 * input when a region reads its value channels-last: the partition's rule
 * (engine/partition.h, partition_is_conv_2d_3d). */
bool export_is_convolution(const json_t *node);

/* Writes the names of ts's channels-last tensors as a Python list, in ts order. */
void export_put_channels_last(FILE *f, const struct xtensors *ts);

/* ---- export_program.c ---- */

/* The KernelBench file of a candidate holding "program" (see export_kernelbench.h). */
int export_program(const json_t *profile, const json_t *candidate, char **ret_text, char *err,
                   size_t errlen);

#endif
