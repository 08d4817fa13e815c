/* KernelBench export of a candidate: the C++ launcher of its plan and the Python file
 * around it (see export_kernelbench.h). One concept, a little longer than 800 lines: the
 * launcher and the Python text share the tensor tables they are generated from. */
#include "handlers/export_kernelbench.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 1024
#define MAX_LAUNCHES 16
#define MAX_BUFFERS 16
#define MAX_ARGS 64
#define MAX_DIM 2147483647LL
#define MAX_NESTING 8
#define DEFAULT_SHARED_LIMIT 49152 /* dynamic shared bytes a launch gets without opting in */
#define DEFINE_VALUE_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-"

/* How one profile dtype appears in C++ and in Python. accessor is the type data_ptr<>
 * knows; ctype is the pointer type the launcher declares (they differ only for int64,
 * whose kernels take long long, while ATen's int64_t is long on Linux). */
struct dtype_info {
  const char *name;
  const char *ctype;
  const char *accessor;
  const char *torch;
};

static const struct dtype_info dtypes[] = {
  {"float32", "float", "float", "torch.float32"},
  {"float64", "double", "double", "torch.float64"},
  {"float16", "at::Half", "at::Half", "torch.float16"},
  {"bfloat16", "at::BFloat16", "at::BFloat16", "torch.bfloat16"},
  {"int64", "long long", "int64_t", "torch.int64"},
  {"int32", "int", "int", "torch.int32"},
  {"int16", "int16_t", "int16_t", "torch.int16"},
  {"int8", "int8_t", "int8_t", "torch.int8"},
  {"uint8", "uint8_t", "uint8_t", "torch.uint8"},
  {"bool", "bool", "bool", "torch.bool"},
};

enum tensor_kind { TENSOR_INPUT, TENSOR_PARAM, TENSOR_OUTPUT };

/* One launcher tensor; the strings and shape are borrowed from the profile. */
struct xtensor {
  const char *name;
  const struct dtype_info *dtype;
  const json_t *shape;
  enum tensor_kind kind;
  long position; /* inputs: the index in forward's arguments */
};

/* The launcher's tensors in launcher order (inputs, params, outputs). */
struct xtensors {
  struct xtensor items[MAX_TENSORS];
  size_t n;
  size_t n_outputs;
};

/* Writes the reason into err and returns -1, for `return fail(...)`. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

static const struct dtype_info *dtype_find(const char *name) {
  for (size_t i = 0; name && i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(dtypes[i].name, name) == 0)
      return &dtypes[i];
  return NULL;
}

static bool is_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return false;
  for (const char *c = s + 1; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_')
      return false;
  return true;
}

/* N of "input:N" (a non-negative decimal), or -1. */
static long input_position(const char *name) {
  if (strncmp(name, "input:", 6) != 0 || !isdigit((unsigned char)name[6]))
    return -1;
  errno = 0;
  char *end = NULL;
  long v = strtol(name + 6, &end, 10);
  return errno || *end || v > 100000 ? -1 : v;
}

/* ---- the profile's tensors ------------------------------------------------------------ */

static bool shape_ok(const json_t *shape) {
  size_t i;
  const json_t *d;
  if (!json_is_array(shape) || json_array_size(shape) > 16)
    return false;
  json_array_foreach(shape, i, d) if (!json_is_integer(d) || json_integer_value(d) < 0) return false;
  return true;
}

/* Appends the entries of profile[key] to ts, checking each one's name for its kind. */
static int add_tensors(struct xtensors *ts, const json_t *profile, const char *key,
                       enum tensor_kind kind, char *err, size_t errlen) {
  static const char *const prefix[] = {"input:", "param:", "output:"};
  const json_t *list = json_object_get(profile, key), *t;
  size_t i;
  if (!json_is_array(list))
    return fail(err, errlen, "profile: '%s' must be an array", key);
  json_array_foreach(list, i, t) {
    const char *name = json_string_value(json_object_get(t, "name"));
    const char *dtype = json_string_value(json_object_get(t, "dtype"));
    const json_t *shape = json_object_get(t, "shape");
    if (!name || strncmp(name, prefix[kind], strlen(prefix[kind])) != 0 ||
        !name[strlen(prefix[kind])])
      return fail(err, errlen, "profile: %s[%zu] needs a name starting with '%s'", key, i,
                  prefix[kind]);
    if (!dtype_find(dtype))
      return fail(err, errlen, "profile: %s has dtype '%s', which the export does not support",
                  name, dtype ? dtype : "(none)");
    if (!shape_ok(shape))
      return fail(err, errlen, "profile: %s needs a shape of non-negative integers", name);
    long position = kind == TENSOR_INPUT ? input_position(name) : 0;
    if (position < 0)
      return fail(err, errlen, "profile: input name '%s' is not input:<index>", name);
    for (size_t j = 0; j < ts->n; j++)
      if (strcmp(ts->items[j].name, name) == 0)
        return fail(err, errlen, "profile: tensor '%s' appears twice", name);
    if (ts->n == MAX_TENSORS)
      return fail(err, errlen, "profile: more than %d tensors", MAX_TENSORS);
    ts->items[ts->n++] = (struct xtensor){name, dtype_find(dtype), shape, kind, position};
  }
  return 0;
}

/* Fills ts from the profile: inputs, then params, then outputs. */
static int collect_tensors(struct xtensors *ts, const json_t *profile, char *err,
                           size_t errlen) {
  ts->n = 0;
  if (!json_is_object(profile))
    return fail(err, errlen, "profile: must be an object");
  if (add_tensors(ts, profile, "inputs", TENSOR_INPUT, err, errlen) != 0 ||
      add_tensors(ts, profile, "params", TENSOR_PARAM, err, errlen) != 0)
    return -1;
  size_t before = ts->n;
  if (add_tensors(ts, profile, "outputs", TENSOR_OUTPUT, err, errlen) != 0)
    return -1;
  ts->n_outputs = ts->n - before;
  if (ts->n_outputs == 0)
    return fail(err, errlen, "profile: the task has no output tensor");
  return 0;
}

static long tensor_index(const struct xtensors *ts, const char *name) {
  for (size_t i = 0; name && i < ts->n; i++)
    if (strcmp(ts->items[i].name, name) == 0)
      return (long)i;
  return -1;
}

/* ---- the launcher ---------------------------------------------------------------------- */

/* Writes a floating literal that reads back as exactly x, always with a '.' or exponent so
 * that C++ (and Python) take it as floating. */
static void put_real(FILE *f, double x, bool single) {
  char text[64];
  snprintf(text, sizeof text, single ? "%.9g" : "%.17g", x);
  fputs(text, f);
  if (!strpbrk(text, ".e"))
    fputs(".0", f);
  if (single)
    fputc('f', f);
}

/* Declares launch argument ai's literal, or fails on a value the kind cannot hold. */
static int put_literal(FILE *f, const char *kind, const json_t *v, size_t li, size_t ai,
                       char *err, size_t errlen) {
  bool integral = strcmp(kind, "i32") == 0 || strcmp(kind, "i64") == 0;
  if (integral ? !json_is_integer(v) : !json_is_number(v))
    return fail(err, errlen, "launch %zu arg %zu: value is not a valid %s", li, ai, kind);
  json_int_t i = json_integer_value(v);
  double x = json_number_value(v);
  if (strcmp(kind, "i32") == 0) {
    if (i < INT32_MIN || i > INT32_MAX)
      return fail(err, errlen, "launch %zu arg %zu: value is not a valid i32", li, ai);
    /* The most negative values are spelled so that no literal overflows. */
    if (i == INT32_MIN)
      fprintf(f, "    int ofg_a%zu = (-2147483647 - 1)", ai);
    else
      fprintf(f, "    int ofg_a%zu = %lld", ai, (long long)i);
  } else if (strcmp(kind, "i64") == 0) {
    if (i == INT64_MIN)
      fprintf(f, "    long long ofg_a%zu = (-9223372036854775807LL - 1)", ai);
    else
      fprintf(f, "    long long ofg_a%zu = %lldLL", ai, (long long)i);
  } else {
    bool single = strcmp(kind, "f32") == 0;
    if (!isfinite(x) || (single && fabs(x) > FLT_MAX))
      return fail(err, errlen, "launch %zu arg %zu: value is not a valid %s", li, ai, kind);
    fprintf(f, "    %s ofg_a%zu = ", single ? "float" : "double", ai);
    put_real(f, single ? (double)(float)x : x, single);
  }
  fputs(";\n", f);
  return 0;
}

/* Reads grid or block: 1..3 integers in 1..2^31-1 (missing ones are 1). */
static int read_dims(const json_t *arr, const char *what, size_t li, long long out[3],
                     char *err, size_t errlen) {
  out[0] = out[1] = out[2] = 1;
  if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > 3)
    return fail(err, errlen, "launch %zu: %s must be an array of 1 to 3 integers", li, what);
  for (size_t d = 0; d < json_array_size(arr); d++) {
    const json_t *v = json_array_get(arr, d);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MAX_DIM)
      return fail(err, errlen, "launch %zu: %s[%zu] must be an integer from 1 to %lld", li,
                  what, d, MAX_DIM);
    out[d] = (long long)json_integer_value(v);
  }
  return 0;
}

/* The index of buffer name in plan's buffers, or -1. */
static long buffer_index(const json_t *buffers, const char *name) {
  for (size_t i = 0; name && i < json_array_size(buffers); i++) {
    const char *have = json_string_value(json_object_get(json_array_get(buffers, i), "name"));
    if (have && strcmp(have, name) == 0)
      return (long)i;
  }
  return -1;
}

/* Declares launch li's literals, then the array of argument addresses for the launch. */
static int put_args(FILE *f, const json_t *launch, const struct xtensors *ts,
                    const json_t *buffers, size_t li, char *err, size_t errlen) {
  const json_t *args = json_object_get(launch, "args"), *arg;
  size_t ai;
  if (!json_is_array(args) || json_array_size(args) > MAX_ARGS)
    return fail(err, errlen, "launch %zu: args must be an array of at most %d", li, MAX_ARGS);
  json_array_foreach(args, ai, arg) {
    if (!json_is_object(arg) || json_object_size(arg) != 1)
      return fail(err, errlen, "launch %zu arg %zu: must be an object with one key", li, ai);
    const char *kind = json_object_iter_key(json_object_iter((json_t *)arg));
    const json_t *v = json_object_iter_value(json_object_iter((json_t *)arg));
    if (strcmp(kind, "tensor") == 0) {
      if (tensor_index(ts, json_string_value(v)) < 0)
        return fail(err, errlen, "launch %zu arg %zu: unknown tensor '%.64s'", li, ai,
                    json_is_string(v) ? json_string_value(v) : "(not a string)");
    } else if (strcmp(kind, "buffer") == 0) {
      if (buffer_index(buffers, json_string_value(v)) < 0)
        return fail(err, errlen, "launch %zu arg %zu: unknown buffer '%.64s'", li, ai,
                    json_is_string(v) ? json_string_value(v) : "(not a string)");
    } else if (strcmp(kind, "i32") && strcmp(kind, "i64") && strcmp(kind, "f32") &&
               strcmp(kind, "f64")) {
      return fail(err, errlen, "launch %zu arg %zu: unknown argument type '%.32s'", li, ai, kind);
    } else if (put_literal(f, kind, v, li, ai, err, errlen) != 0) {
      return -1;
    }
  }
  if (json_array_size(args) == 0) {
    fputs("    void** ofg_args = nullptr;\n", f);
    return 0;
  }
  fputs("    void* ofg_args[] = {", f);
  json_array_foreach(args, ai, arg) {
    const char *kind = json_object_iter_key(json_object_iter((json_t *)arg));
    const char *name = json_string_value(json_object_iter_value(json_object_iter((json_t *)arg)));
    fputs(ai ? ", " : "", f);
    if (strcmp(kind, "tensor") == 0)
      fprintf(f, "&ofg_t%ld", tensor_index(ts, name));
    else if (strcmp(kind, "buffer") == 0)
      fprintf(f, "&ofg_b%ld", buffer_index(buffers, name));
    else
      fprintf(f, "&ofg_a%zu", ai);
  }
  fputs("};\n", f);
  return 0;
}

/* Writes launch li: its literals, the shared-memory opt-in, the launch and its check. */
static int put_launch(FILE *f, const json_t *launch, const struct xtensors *ts,
                      const json_t *buffers, size_t li, char *err, size_t errlen) {
  const char *kernel = json_string_value(json_object_get(launch, "kernel"));
  const json_t *shared = json_object_get(launch, "shared_bytes");
  long long grid[3], block[3];
  if (!json_is_object(launch) || !is_identifier(kernel))
    return fail(err, errlen, "launch %zu: kernel must name an extern \"C\" function", li);
  if (read_dims(json_object_get(launch, "grid"), "grid", li, grid, err, errlen) != 0 ||
      read_dims(json_object_get(launch, "block"), "block", li, block, err, errlen) != 0)
    return -1;
  if (shared && (!json_is_integer(shared) || json_integer_value(shared) < 0 ||
                 json_integer_value(shared) > INT32_MAX))
    return fail(err, errlen, "launch %zu: shared_bytes must be an integer >= 0", li);
  long long bytes = shared ? (long long)json_integer_value(shared) : 0;
  fprintf(f, "  {  // launch %zu\n", li);
  if (put_args(f, launch, ts, buffers, li, err, errlen) != 0)
    return -1;
  if (bytes > DEFAULT_SHARED_LIMIT)
    fprintf(f,
            "    ofg_err = cudaFuncSetAttribute((const void*)%s, "
            "cudaFuncAttributeMaxDynamicSharedMemorySize, %lld);\n"
            "    TORCH_CHECK(ofg_err == cudaSuccess, \"opforge launch %zu (kernel %s): cannot "
            "raise dynamic shared memory to %lld bytes: \", cudaGetErrorString(ofg_err));\n",
            kernel, bytes, li, kernel, bytes);
  fprintf(f,
          "    ofg_err = cudaLaunchKernel((const void*)%s, dim3(%lld, %lld, %lld), "
          "dim3(%lld, %lld, %lld), ofg_args, %lld, ofg_stream);\n"
          "    if (ofg_err == cudaSuccess) ofg_err = cudaGetLastError();\n"
          "    TORCH_CHECK(ofg_err == cudaSuccess, \"opforge launch %zu (kernel %s) failed: \", "
          "cudaGetErrorString(ofg_err));\n  }\n",
          kernel, grid[0], grid[1], grid[2], block[0], block[1], block[2], bytes, li, kernel);
  return 0;
}

/* Checks plan's buffers and declares one zeroed byte tensor per buffer. */
static int put_buffers(FILE *f, const json_t *buffers, char *err, size_t errlen) {
  const json_t *b;
  size_t i;
  if (!json_is_array(buffers) || json_array_size(buffers) > MAX_BUFFERS)
    return fail(err, errlen, "plan: buffers must be an array of at most %d", MAX_BUFFERS);
  json_array_foreach(buffers, i, b) {
    const char *name = json_string_value(json_object_get(b, "name"));
    const json_t *bytes = json_object_get(b, "bytes");
    if (!name || !*name || strpbrk(name, "\r\n") || !json_is_integer(bytes) ||
        json_integer_value(bytes) <= 0)
      return fail(err, errlen, "buffer %zu: needs a name and bytes > 0", i);
    if (buffer_index(buffers, name) != (long)i)
      return fail(err, errlen, "buffer %zu: duplicate name", i);
    fprintf(f,
            "  torch::Tensor ofg_buffer%zu = torch::zeros({%lld}, "
            "tensors[0].options().dtype(torch::kUInt8));  // %s\n"
            "  void* ofg_b%zu = ofg_buffer%zu.data_ptr();\n",
            i, (long long)json_integer_value(bytes), name, i, i);
  }
  return 0;
}

/* The launcher's head: the signature, the tensor count check and the typed pointers. */
static void put_launcher_head(FILE *f, const struct xtensors *ts) {
  fputs("// opforge launcher: tensors are the profile's inputs, then its params, then its\n"
        "// outputs, each in profile order; launches run in plan order on stream.\n"
        "void " EXPORT_LAUNCHER_NAME "(std::vector<torch::Tensor> tensors, int64_t stream) {\n",
        f);
  fprintf(f,
          "  TORCH_CHECK(tensors.size() == %zu, \"" EXPORT_LAUNCHER_NAME ": expected %zu "
          "tensors, got \", tensors.size());\n"
          "  cudaStream_t ofg_stream = reinterpret_cast<cudaStream_t>(stream);\n"
          "  cudaError_t ofg_err;\n",
          ts->n, ts->n);
  for (size_t i = 0; i < ts->n; i++) {
    const struct dtype_info *d = ts->items[i].dtype;
    if (strcmp(d->ctype, d->accessor) == 0)
      fprintf(f, "  %s* ofg_t%zu = tensors[%zu].data_ptr<%s>();  // %s\n", d->ctype, i, i,
              d->accessor, ts->items[i].name);
    else
      fprintf(f, "  %s* ofg_t%zu = reinterpret_cast<%s*>(tensors[%zu].data_ptr<%s>());  // %s\n",
              d->ctype, i, d->ctype, i, d->accessor, ts->items[i].name);
  }
}

/* Writes the launcher for the collected tensors into f. */
static int put_launcher(FILE *f, const struct xtensors *ts, const json_t *plan, char *err,
                        size_t errlen) {
  const json_t *launches = json_object_get(plan, "launches");
  const json_t *buffers = json_object_get(plan, "buffers");
  json_t *empty = NULL;
  if (!json_is_object(plan))
    return fail(err, errlen, "plan: must be an object");
  if (!json_is_array(launches) || json_array_size(launches) == 0 ||
      json_array_size(launches) > MAX_LAUNCHES)
    return fail(err, errlen, "plan: launches must be an array of 1 to %d", MAX_LAUNCHES);
  if (!buffers || json_is_null(buffers))
    buffers = empty = json_array();
  put_launcher_head(f, ts);
  int rc = buffers ? put_buffers(f, buffers, err, errlen) : fail(err, errlen, "out of memory");
  for (size_t li = 0; rc == 0 && li < json_array_size(launches); li++)
    rc = put_launch(f, json_array_get(launches, li), ts, buffers, li, err, errlen);
  if (rc == 0)
    fputs("}\n", f);
  json_decref(empty);
  return rc;
}

/* ---- text buffers ---------------------------------------------------------------------- */

/* A memstream and its buffer: text_open, write with stdio, text_close. */
struct text {
  FILE *f;
  char *data;
  size_t len;
};

static int text_open(struct text *t, char *err, size_t errlen) {
  t->data = NULL;
  t->len = 0;
  t->f = open_memstream(&t->data, &t->len);
  return t->f ? 0 : fail(err, errlen, "out of memory");
}

/* Closes the stream; on success (ok and no write error) hands the text to *ret_text,
 * else frees it and returns -1 (err says "out of memory" unless ok was already false). */
static int text_close(struct text *t, bool ok, char **ret_text, char *err, size_t errlen) {
  bool write_failed = ferror(t->f) != 0;
  bool close_failed = fclose(t->f) != 0;
  if (!ok || write_failed || close_failed || !t->data) {
    free(t->data);
    return ok ? fail(err, errlen, "out of memory") : -1;
  }
  *ret_text = t->data;
  return 0;
}

int export_kernelbench_launcher(const json_t *profile, const json_t *plan, char **ret_text,
                                char *err, size_t errlen) {
  struct xtensors *ts = malloc(sizeof *ts);
  struct text t;
  if (!ts)
    return fail(err, errlen, "out of memory");
  int rc = collect_tensors(ts, profile, err, errlen);
  if (rc == 0 && (rc = text_open(&t, err, errlen)) == 0)
    rc = text_close(&t, put_launcher(t.f, ts, plan, err, errlen) == 0, ret_text, err, errlen);
  free(ts);
  return rc;
}

/* ---- the Python file ------------------------------------------------------------------- */

/* Writes s as a Python string literal: triple-quoted for multi-line text. Backslashes and
 * control characters are escaped, and so is every quote that could close the literal. */
static void put_py_string(FILE *f, const char *s, bool triple) {
  fputs(triple ? "\"\"\"" : "\"", f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '\\')
      fputs("\\\\", f);
    else if (*c == '"' && (!triple || c[1] == '"' || c[1] == '\0'))
      fputs("\\\"", f);
    else if (*c == '\n' && triple)
      fputc('\n', f);
    else if (*c == '\t' && triple)
      fputc('\t', f);
    else if (*c < 0x20 || *c == 0x7f)
      fprintf(f, "\\x%02x", *c);
    else
      fputc(*c, f);
  }
  fputs(triple ? "\"\"\"" : "\"", f);
}

/* Writes s with anything outside [A-Za-z0-9_.:-] shown as '?', for comments. */
static void put_safe(FILE *f, const char *s) {
  for (const char *c = s ? s : "?"; *c; c++)
    fputc(isalnum((unsigned char)*c) || strchr("_.:-", *c) ? *c : '?', f);
}

static void put_py_shape(FILE *f, const json_t *shape) {
  size_t i;
  const json_t *d;
  fputc('(', f);
  json_array_foreach(shape, i, d) fprintf(f, "%s%lld", i ? ", " : "", (long long)json_integer_value(d));
  fputs(json_array_size(shape) == 1 ? ",)" : ")", f);
}

/* Splits the candidate's options: -D macros become #define lines (in defines, with their
 * #undef in undefs) and the rest nvcc flags (in flags, as Python list items). Only what
 * the evaluator accepts. The macros stay out of nvcc's command line because there they
 * would also reach the PyTorch and CUDA headers that load_inline includes first (a knob
 * named N or BLOCK can break those); under NVRTC they reached only the candidate. */
static int split_options(const json_t *options, FILE *defines, FILE *undefs, FILE *flags,
                         char *err, size_t errlen) {
  const json_t *o;
  size_t i;
  if (options && !json_is_null(options) && !json_is_array(options))
    return fail(err, errlen, "candidate: options must be an array of strings");
  json_array_foreach(options, i, o) {
    const char *s = json_string_value(o);
    if (!s)
      return fail(err, errlen, "candidate: option %zu is not a string", i);
    if (strncmp(s, "-D", 2) == 0) {
      const char *eq = strchr(s, '=');
      size_t name_len = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
      char name[65];
      if (name_len == 0 || name_len >= sizeof name ||
          (eq && (strlen(eq + 1) > 64 || strspn(eq + 1, DEFINE_VALUE_CHARS) != strlen(eq + 1))))
        return fail(err, errlen, "candidate: option %zu ('%.80s') is not -DNAME[=VALUE]", i, s);
      memcpy(name, s + 2, name_len);
      name[name_len] = '\0';
      if (!is_identifier(name))
        return fail(err, errlen, "candidate: option %zu ('%.80s') is not -DNAME[=VALUE]", i, s);
      /* -DNAME means 1, as for any C compiler. */
      fprintf(defines, "#define %s %s\n", name, eq ? eq + 1 : "1");
      fprintf(undefs, "#undef %s\n", name);
    } else if (strncmp(s, "-maxrregcount=", 14) == 0 || strncmp(s, "--maxrregcount=", 15) == 0) {
      const char *v = strchr(s, '=') + 1;
      if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 3)
        return fail(err, errlen, "candidate: option %zu ('%.80s') is malformed", i, s);
      fprintf(flags, ", \"-maxrregcount=%s\"", v);
    } else if (strcmp(s, "--use_fast_math") == 0 || strcmp(s, "-use_fast_math") == 0) {
      fputs(", \"--use_fast_math\"", flags);
    } else {
      return fail(err, errlen, "candidate: option %zu ('%.80s') is not one the evaluator accepts",
                  i, s);
    }
  }
  return 0;
}

/* Counts the graph nodes in v, a return value as encode_arg wrote it (a node or nested
 * lists of nodes); false for anything else. */
static bool count_leaves(const json_t *v, size_t *n, int depth) {
  if (json_is_object(v) && json_is_string(json_object_get(v, "node")) && json_object_size(v) == 1) {
    (*n)++;
    return true;
  }
  if (!json_is_array(v) || depth > MAX_NESTING)
    return false;
  size_t i;
  const json_t *item;
  json_array_foreach(v, i, item) if (!count_leaves(item, n, depth + 1)) return false;
  return true;
}

static void put_structure(FILE *f, const json_t *v, size_t *next) {
  if (json_is_object(v)) {
    fprintf(f, "outputs[%zu]", (*next)++);
    return;
  }
  size_t i;
  const json_t *item;
  fputc('(', f);
  json_array_foreach(v, i, item) {
    fputs(i ? ", " : "", f);
    put_structure(f, item, next);
  }
  fputs(json_array_size(v) == 1 ? ",)" : ")", f);
}

/* Writes what forward returns: the structure of Model's return value when the FX graph
 * shows it (tensor, tuple, nested tuples) and it holds exactly the profile's outputs;
 * else the one output, or a tuple of them. torch.export graphs always return a flat
 * tuple, so only "fx" graphs are read. */
static void put_return(FILE *f, const json_t *profile, size_t n_outputs) {
  const json_t *graph = json_object_get(profile, "graph"), *node, *ret = NULL;
  const char *source = json_string_value(json_object_get(profile, "graph_source"));
  size_t i, leaves = 0;
  if (source && strcmp(source, "fx") == 0) {
    json_array_foreach(graph, i, node) {
      const char *op = json_string_value(json_object_get(node, "op"));
      if (op && strcmp(op, "output") == 0)
        ret = json_array_get(json_object_get(node, "args"), 0);
    }
  }
  fputs("        return ", f);
  if (ret && count_leaves(ret, &leaves, 0) && leaves == n_outputs) {
    size_t next = 0;
    put_structure(f, ret, &next);
  } else if (n_outputs == 1) {
    fputs("outputs[0]", f);
  } else {
    fputs("tuple(outputs)", f);
  }
  fputc('\n', f);
}

/* Writes the tensor tables _OFG_INPUTS, _OFG_PARAMS and _OFG_OUTPUTS. */
static void put_tensor_tables(FILE *f, const struct xtensors *ts) {
  static const char *const heads[] = {
      "# (position in forward's arguments, dtype, shape) of each tensor input.\n_OFG_INPUTS = [\n",
      "]\n# (key in Model's state_dict, dtype, shape) of each parameter and buffer.\n"
      "_OFG_PARAMS = [\n",
      "]\n# (dtype, shape) of each output.\n_OFG_OUTPUTS = [\n"};
  for (int kind = TENSOR_INPUT; kind <= TENSOR_OUTPUT; kind++) {
    fputs(heads[kind], f);
    for (size_t i = 0; i < ts->n; i++) {
      const struct xtensor *t = &ts->items[i];
      if (t->kind != (enum tensor_kind)kind)
        continue;
      fputs("    (", f);
      if (kind == TENSOR_INPUT)
        fprintf(f, "%ld, ", t->position);
      if (kind == TENSOR_PARAM) {
        put_py_string(f, t->name + strlen("param:"), false);
        fputs(", ", f);
      }
      fprintf(f, "%s, ", t->dtype->torch);
      put_py_shape(f, t->shape);
      fputs("),\n", f);
    }
  }
  fputs("]\n", f);
}

/* Writes _OFG_SCALARS (the numeric and boolean non-tensor arguments, whose values the
 * plan has built in) and _OFG_NARGS (how many arguments forward takes). */
static void put_scalars(FILE *f, const json_t *profile, const struct xtensors *ts) {
  const json_t *scalars = json_object_get(profile, "scalar_inputs"), *s;
  long nargs = 0;
  size_t i;
  for (i = 0; i < ts->n; i++)
    if (ts->items[i].kind == TENSOR_INPUT && ts->items[i].position + 1 > nargs)
      nargs = ts->items[i].position + 1;
  fputs("# (position, value) of the non-tensor arguments that the plan has built in.\n"
        "_OFG_SCALARS = [\n", f);
  json_array_foreach(scalars, i, s) {
    const char *name = json_string_value(json_object_get(s, "name"));
    long position = name ? input_position(name) : -1;
    const json_t *v = json_object_get(s, "value");
    if (position < 0)
      continue;
    if (position + 1 > nargs)
      nargs = position + 1;
    if (json_is_integer(v))
      fprintf(f, "    (%ld, %lld),\n", position, (long long)json_integer_value(v));
    else if (json_is_real(v) && isfinite(json_real_value(v))) {
      fprintf(f, "    (%ld, ", position);
      put_real(f, json_real_value(v), false);
      fputs("),\n", f);
    } else if (json_is_boolean(v))
      fprintf(f, "    (%ld, %s),\n", position, json_is_true(v) ? "True" : "False");
  }
  fprintf(f, "]\n_OFG_NARGS = %ld\n", nargs);
}

/* The Python after the tables: load_inline, the argument checks and ModelNew. */
static const char py_body[] =
    "_OFG_MODULES = {}\n"
    "\n"
    "\n"
    "def _ofg_module(device):\n"
    "    \"\"\"The compiled kernels and launcher for device's architecture (sm_90a for\n"
    "    capability 9.0, as the evaluator compiled them), built once per process; the module\n"
    "    name is a hash of sources and flags, so several exports can coexist.\"\"\"\n"
    "    major, minor = torch.cuda.get_device_capability(device)\n"
    "    module = _OFG_MODULES.get((major, minor))\n"
    "    if module is None:\n"
    "        arch = \"%d%d%s\" % (major, minor, \"a\" if major >= 9 else \"\")\n"
    "        flags = _OFG_FLAGS + [\"-gencode\", \"arch=compute_%s,code=sm_%s\" % (arch, arch)]\n"
    "        digest = hashlib.sha256(\"\\0\".join([_OFG_CUDA_SOURCE, _OFG_LAUNCHER] + flags)\n"
    "                                .encode(\"utf-8\")).hexdigest()[:16]\n"
    "        module = torch.utils.cpp_extension.load_inline(\n"
    "            name=\"opforge_\" + digest, cpp_sources=[_OFG_DECLARATION],\n"
    "            cuda_sources=[_OFG_CUDA_SOURCE, _OFG_LAUNCHER], functions=[\"" EXPORT_LAUNCHER_NAME "\"],\n"
    "            extra_cuda_cflags=flags)\n"
    "        _OFG_MODULES[(major, minor)] = module\n"
    "    return module\n"
    "\n"
    "\n"
    "def _ofg_check(name, tensor, dtype, shape, device):\n"
    "    \"\"\"tensor, contiguous, once it is checked to be what the kernels were built for:\n"
    "    the plan has its sizes built in.\"\"\"\n"
    "    if (not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype\n"
    "            or tuple(tensor.shape) != shape or tensor.device != device):\n"
    "        got = (\"%s %s on %s\" % (tensor.dtype, tuple(tensor.shape), tensor.device)\n"
    "               if isinstance(tensor, torch.Tensor) else type(tensor).__name__)\n"
    "        raise ValueError(\"ModelNew: %s must be %s %s on %s, as the kernels were built \"\n"
    "                         \"for; got %s\" % (name, dtype, shape, device, got))\n"
    "    return tensor.detach().contiguous()\n"
    "\n"
    "\n"
    "class ModelNew(torch.nn.Module):\n"
    "    \"\"\"Drop-in for Model running opforge's kernels; the parameters live in self.ref.\"\"\"\n"
    "\n"
    "    def __init__(self, *init_inputs):\n"
    "        super().__init__()\n"
    "        # First, so that it draws the same random numbers as Model(*init_inputs) would\n"
    "        # under the same seed: the parameters are then equal.\n"
    "        self.ref = Model(*init_inputs)\n"
    "        if torch.cuda.is_available():\n"
    "            _ofg_module(torch.device(\"cuda\", torch.cuda.current_device()))\n"
    "\n"
    "    def forward(self, *inputs):\n"
    "        if len(inputs) != _OFG_NARGS:\n"
    "            raise TypeError(\"ModelNew.forward takes %d arguments, got %d\"\n"
    "                            % (_OFG_NARGS, len(inputs)))\n"
    "        for position, value in _OFG_SCALARS:\n"
    "            if inputs[position] != value:\n"
    "                raise ValueError(\"ModelNew: argument %d must be %r, as the plan has it \"\n"
    "                                 \"built in; got %r\" % (position, value, inputs[position]))\n"
    "        state = dict(self.ref.named_parameters())\n"
    "        state.update(self.ref.named_buffers())\n"
    "        named = ([(\"input:%d\" % p, inputs[p], d, s) for p, d, s in _OFG_INPUTS]\n"
    "                 + [(\"param:\" + k, state.get(k), d, s) for k, d, s in _OFG_PARAMS])\n"
    "        first = named[0][1] if named else None\n"
    "        device = (first.device if isinstance(first, torch.Tensor)\n"
    "                  else torch.device(\"cuda\", torch.cuda.current_device()))\n"
    "        if device.type != \"cuda\":\n"
    "            raise RuntimeError(\"ModelNew runs CUDA kernels: %s is on %s, move the model \"\n"
    "                               \"and inputs to a GPU\" % (named[0][0], device))\n"
    "        tensors = [_ofg_check(n, t, d, s, device) for n, t, d, s in named]\n"
    "        outputs = [torch.empty(s, dtype=d, device=device) for d, s in _OFG_OUTPUTS]\n"
    "        with torch.cuda.device(device):\n"
    "            _ofg_module(device)." EXPORT_LAUNCHER_NAME "(\n"
    "                tensors + outputs, torch.cuda.current_stream(device).cuda_stream)\n";

/* Writes the file head: the reference, the banner and the imports. */
static void put_head(FILE *f, const char *reference, const json_t *candidate) {
  size_t len = strlen(reference);
  fputs(reference, f);
  if (len > 0 && reference[len - 1] != '\n')
    fputc('\n', f);
  fputs("\n\n# ---- opforge export ", f);
  fputs("-------------------------------------------------------------\n# Candidate ", f);
  put_safe(f, json_string_value(json_object_get(candidate, "id")));
  fputs(" of task ", f);
  put_safe(f, json_string_value(json_object_get(candidate, "task_id")));
  fputs(".\n"
        "# Everything above this section is the task's reference program, unchanged.\n"
        "# ModelNew is a drop-in for Model: it builds Model(*init_inputs) as self.ref, so\n"
        "# that its parameters are Model's, compiles the candidate's CUDA source with\n"
        "# torch.utils.cpp_extension.load_inline, and runs the candidate's launch plan\n"
        "# through the C++ launcher below.\n"
        "import hashlib\n\nimport torch\nimport torch.utils.cpp_extension\n\n", f);
}

/* Writes the CUDA source string: the candidate's macros, its source, their #undefs.
 * Returns -1 when out of memory. */
static int put_cuda_source(FILE *f, const char *source, const char *defines,
                           const char *undefs) {
  static const char note[] = "// The candidate's -D options.\n";
  size_t len = strlen(source), dlen = strlen(defines), ulen = strlen(undefs);
  bool newline = len > 0 && source[len - 1] != '\n';
  char *text = malloc(sizeof note + dlen + len + 1 + ulen + 1);
  if (!text)
    return -1;
  char *w = text;
  if (dlen) {
    memcpy(w, note, sizeof note - 1);
    w += sizeof note - 1;
  }
  memcpy(w, defines, dlen);
  memcpy(w + dlen, source, len);
  w += dlen + len;
  if (newline)
    *w++ = '\n';
  memcpy(w, undefs, ulen + 1);
  fputs("# The candidate's CUDA source (the evaluator verified it compiled with NVRTC).\n"
        "_OFG_CUDA_SOURCE = ", f);
  put_py_string(f, text, true);
  fputc('\n', f);
  free(text);
  return 0;
}

/* The candidate's options as text: #defines, #undefs and nvcc flags (Python list items). */
struct option_texts {
  char *defines, *undefs, *flags;
};

static void option_texts_clear(struct option_texts *o) {
  free(o->defines);
  free(o->undefs);
  free(o->flags);
}

static int option_texts_build(const json_t *options, struct option_texts *ret, char *err,
                              size_t errlen) {
  struct text d, u, fl;
  if (text_open(&d, err, errlen) != 0)
    return -1;
  if (text_open(&u, err, errlen) != 0)
    return text_close(&d, false, NULL, err, errlen);
  if (text_open(&fl, err, errlen) != 0) {
    text_close(&d, false, NULL, err, errlen);
    return text_close(&u, false, NULL, err, errlen);
  }
  bool ok = split_options(options, d.f, u.f, fl.f, err, errlen) == 0;
  struct option_texts o = {NULL, NULL, NULL};
  int rd = text_close(&d, ok, &o.defines, err, errlen);
  int ru = text_close(&u, ok && rd == 0, &o.undefs, err, errlen);
  int rf = text_close(&fl, ok && rd == 0 && ru == 0, &o.flags, err, errlen);
  if (rd || ru || rf) {
    option_texts_clear(&o);
    return -1;
  }
  *ret = o;
  return 0;
}

/* Writes the whole Python file into f. */
static int put_python(FILE *f, const char *reference, const json_t *profile,
                      const json_t *candidate, const struct xtensors *ts, const char *launcher,
                      const struct option_texts *o) {
  put_head(f, reference, candidate);
  if (put_cuda_source(f, json_string_value(json_object_get(candidate, "source")), o->defines,
                      o->undefs) != 0)
    return -1;
  fputs("# The launcher: its tensors are those of _OFG_INPUTS, _OFG_PARAMS and _OFG_OUTPUTS,\n"
        "# in that order.\n_OFG_LAUNCHER = ", f);
  put_py_string(f, launcher, true);
  fputs("\n_OFG_DECLARATION = \"void " EXPORT_LAUNCHER_NAME
        "(std::vector<torch::Tensor> tensors, int64_t stream);\"\n"
        "# nvcc flags: optimize; lift PyTorch's half-precision restrictions, which NVRTC\n"
        "# (where the evaluator compiled the candidate) does not have; the candidate's flags.\n"
        "_OFG_FLAGS = [\"-O3\", \"-U__CUDA_NO_HALF_OPERATORS__\", "
        "\"-U__CUDA_NO_HALF_CONVERSIONS__\",\n"
        "              \"-U__CUDA_NO_BFLOAT16_CONVERSIONS__\", "
        "\"-U__CUDA_NO_HALF2_OPERATORS__\"", f);
  fputs(o->flags, f);
  fputs("]\n", f);
  put_tensor_tables(f, ts);
  put_scalars(f, profile, ts);
  fputs(py_body, f);
  put_return(f, profile, ts->n_outputs);
  return 0;
}

int export_kernelbench(const char *reference, const json_t *profile, const json_t *candidate,
                       char **ret_text, char *err, size_t errlen) {
  const char *source = json_string_value(json_object_get(candidate, "source"));
  if (!reference || !*reference)
    return fail(err, errlen, "the task has no reference source");
  if (!source || !*source)
    return fail(err, errlen, "candidate: source is empty");
  struct xtensors *ts = malloc(sizeof *ts);
  if (!ts)
    return fail(err, errlen, "out of memory");
  char *launcher = NULL;
  struct option_texts o = {NULL, NULL, NULL};
  struct text t;
  int rc = collect_tensors(ts, profile, err, errlen);
  if (rc == 0 && (rc = text_open(&t, err, errlen)) == 0)
    rc = text_close(&t, put_launcher(t.f, ts, json_object_get(candidate, "plan"), err,
                                     errlen) == 0,
                    &launcher, err, errlen);
  if (rc == 0)
    rc = option_texts_build(json_object_get(candidate, "options"), &o, err, errlen);
  if (rc == 0 && (rc = text_open(&t, err, errlen)) == 0) {
    bool ok = put_python(t.f, reference, profile, candidate, ts, launcher, &o) == 0;
    rc = text_close(&t, ok, ret_text, err, errlen);
    if (!ok)
      fail(err, errlen, "out of memory");
  }
  option_texts_clear(&o);
  free(launcher);
  free(ts);
  return rc;
}
