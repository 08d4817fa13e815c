/* The C++ launcher of a launch plan (docs/architecture.md, Formats): typed pointers to
 * the tensors, literals, zeroed scratch buffers, and one cudaLaunchKernel per launch. */
#include "handlers/export_internal.h"
#include "handlers/export_kernelbench.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAUNCHES 16
#define MAX_BUFFERS 16
#define MAX_ARGS 64
#define MAX_DIM 2147483647LL
#define DEFAULT_SHARED_LIMIT 49152 /* dynamic shared bytes a launch gets without opting in */

/* Declares launch argument ai's literal, or fails on a value the kind cannot hold. */
static int put_literal(FILE *f, const char *kind, const json_t *v, size_t li, size_t ai,
                       char *err, size_t errlen) {
  bool integral = strcmp(kind, "i32") == 0 || strcmp(kind, "i64") == 0;
  if (integral ? !json_is_integer(v) : !json_is_number(v))
    return export_fail(err, errlen, "launch %zu arg %zu: value is not a valid %s", li, ai, kind);
  json_int_t i = json_integer_value(v);
  double x = json_number_value(v);
  if (strcmp(kind, "i32") == 0) {
    if (i < INT32_MIN || i > INT32_MAX)
      return export_fail(err, errlen, "launch %zu arg %zu: value is not a valid i32", li, ai);
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
      return export_fail(err, errlen, "launch %zu arg %zu: value is not a valid %s", li, ai, kind);
    fprintf(f, "    %s ofg_a%zu = ", single ? "float" : "double", ai);
    export_put_real(f, single ? (double)(float)x : x, single);
  }
  fputs(";\n", f);
  return 0;
}

/* Reads grid or block: 1..3 integers in 1..2^31-1 (missing ones are 1). */
static int read_dims(const json_t *arr, const char *what, size_t li, long long out[3],
                     char *err, size_t errlen) {
  out[0] = out[1] = out[2] = 1;
  if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > 3)
    return export_fail(err, errlen, "launch %zu: %s must be an array of 1 to 3 integers", li, what);
  for (size_t d = 0; d < json_array_size(arr); d++) {
    const json_t *v = json_array_get(arr, d);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MAX_DIM)
      return export_fail(err, errlen, "launch %zu: %s[%zu] must be an integer from 1 to %lld", li,
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
    return export_fail(err, errlen, "launch %zu: args must be an array of at most %d", li, MAX_ARGS);
  json_array_foreach(args, ai, arg) {
    if (!json_is_object(arg) || json_object_size(arg) != 1)
      return export_fail(err, errlen, "launch %zu arg %zu: must be an object with one key", li, ai);
    const char *kind = json_object_iter_key(json_object_iter((json_t *)arg));
    const json_t *v = json_object_iter_value(json_object_iter((json_t *)arg));
    if (strcmp(kind, "tensor") == 0) {
      if (export_tensor_index(ts, json_string_value(v)) < 0)
        return export_fail(err, errlen, "launch %zu arg %zu: unknown tensor '%.64s'", li, ai,
                    json_is_string(v) ? json_string_value(v) : "(not a string)");
    } else if (strcmp(kind, "buffer") == 0) {
      if (buffer_index(buffers, json_string_value(v)) < 0)
        return export_fail(err, errlen, "launch %zu arg %zu: unknown buffer '%.64s'", li, ai,
                    json_is_string(v) ? json_string_value(v) : "(not a string)");
    } else if (strcmp(kind, "i32") && strcmp(kind, "i64") && strcmp(kind, "f32") &&
               strcmp(kind, "f64")) {
      return export_fail(err, errlen, "launch %zu arg %zu: unknown argument type '%.32s'", li, ai, kind);
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
      fprintf(f, "&ofg_t%ld", export_tensor_index(ts, name));
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
  if (!json_is_object(launch) || !export_is_identifier(kernel))
    return export_fail(err, errlen, "launch %zu: kernel must name an extern \"C\" function", li);
  if (read_dims(json_object_get(launch, "grid"), "grid", li, grid, err, errlen) != 0 ||
      read_dims(json_object_get(launch, "block"), "block", li, block, err, errlen) != 0)
    return -1;
  if (shared && (!json_is_integer(shared) || json_integer_value(shared) < 0 ||
                 json_integer_value(shared) > INT32_MAX))
    return export_fail(err, errlen, "launch %zu: shared_bytes must be an integer >= 0", li);
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
    return export_fail(err, errlen, "plan: buffers must be an array of at most %d", MAX_BUFFERS);
  json_array_foreach(buffers, i, b) {
    const char *name = json_string_value(json_object_get(b, "name"));
    const json_t *bytes = json_object_get(b, "bytes");
    if (!name || !*name || strpbrk(name, "\r\n") || !json_is_integer(bytes) ||
        json_integer_value(bytes) <= 0)
      return export_fail(err, errlen, "buffer %zu: needs a name and bytes > 0", i);
    if (buffer_index(buffers, name) != (long)i)
      return export_fail(err, errlen, "buffer %zu: duplicate name", i);
    fprintf(f,
            "  torch::Tensor ofg_buffer%zu = torch::zeros({%lld}, "
            "tensors[0].options().dtype(torch::kUInt8));  // %s\n"
            "  void* ofg_b%zu = ofg_buffer%zu.data_ptr();\n",
            i, (long long)json_integer_value(bytes), name, i, i);
  }
  return 0;
}

/* The launcher's head: the comment, the signature, the tensor count check and the typed
 * pointers. */
static void put_launcher_head(FILE *f, const struct xtensors *ts, const char *name,
                              const char *comment) {
  fputs(comment, f);
  fprintf(f,
          "void %s(std::vector<torch::Tensor> tensors, int64_t stream) {\n"
          "  TORCH_CHECK(tensors.size() == %zu, \"%s: expected %zu tensors, got \", "
          "tensors.size());\n"
          "  cudaStream_t ofg_stream = reinterpret_cast<cudaStream_t>(stream);\n"
          "  cudaError_t ofg_err;\n",
          name, ts->n, name, ts->n);
  for (size_t i = 0; i < ts->n; i++) {
    const struct export_dtype *d = ts->items[i].dtype;
    if (strcmp(d->ctype, d->accessor) == 0)
      fprintf(f, "  %s* ofg_t%zu = tensors[%zu].data_ptr<%s>();  // %s\n", d->ctype, i, i,
              d->accessor, ts->items[i].name);
    else
      fprintf(f, "  %s* ofg_t%zu = reinterpret_cast<%s*>(tensors[%zu].data_ptr<%s>());  // %s\n",
              d->ctype, i, d->ctype, i, d->accessor, ts->items[i].name);
  }
}

int export_put_launcher(FILE *f, const struct xtensors *ts, const json_t *plan,
                        const char *name, const char *comment, char *err, size_t errlen) {
  const json_t *launches = json_object_get(plan, "launches");
  const json_t *buffers = json_object_get(plan, "buffers");
  json_t *empty = NULL;
  if (!json_is_object(plan))
    return export_fail(err, errlen, "plan: must be an object");
  if (!json_is_array(launches) || json_array_size(launches) == 0 ||
      json_array_size(launches) > MAX_LAUNCHES)
    return export_fail(err, errlen, "plan: launches must be an array of 1 to %d", MAX_LAUNCHES);
  if (!buffers || json_is_null(buffers))
    buffers = empty = json_array();
  if (ts->n == 0)
    return export_fail(err, errlen, "plan: names no tensor");
  put_launcher_head(f, ts, name, comment);
  int rc = buffers ? put_buffers(f, buffers, err, errlen) : export_fail(err, errlen, "out of memory");
  for (size_t li = 0; rc == 0 && li < json_array_size(launches); li++)
    rc = put_launch(f, json_array_get(launches, li), ts, buffers, li, err, errlen);
  if (rc == 0)
    fputs("}\n", f);
  json_decref(empty);
  return rc;
}

int export_kernelbench_launcher(const json_t *profile, const json_t *plan, char **ret_text,
                                char *err, size_t errlen) {
  struct xtensors *ts = malloc(sizeof *ts);
  struct export_text t;
  if (!ts)
    return export_fail(err, errlen, "out of memory");
  int rc = export_collect_tensors(ts, profile, err, errlen);
  if (rc == 0 && (rc = export_text_open(&t, err, errlen)) == 0)
    rc = export_text_close(&t,
                           export_put_launcher(t.f, ts, plan, EXPORT_LAUNCHER_NAME,
                                               EXPORT_LAUNCHER_COMMENT, err, errlen) == 0,
                           ret_text, err, errlen);
  free(ts);
  return rc;
}

