/* Launch-plan parsing and validation. Every violation is reported once, with the launch
 * and argument it concerns, before any launch happens. */
#include "gpu/plan.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE "launch"

void gpu_limits_hopper(struct device_limits *ret) {
  *ret = (struct device_limits){
    .max_threads_per_block = 1024,
    .max_block = {1024, 1024, 64},
    .max_grid = {2147483647u, 65535, 65535},
    .max_shared_optin = 232448,  /* 227 KiB */
    .regs_per_block = 65536,
    .warp_size = 32,
  };
}

size_t plan_arg_size(enum plan_arg_kind kind) {
  return kind == PLAN_ARG_I32 || kind == PLAN_ARG_F32 ? 4 : 8;
}

static const char *const arg_kind_names[] = {"tensor", "buffer", "i32", "i64", "f32", "f64"};

/* ---- tensors ---------------------------------------------------------------------- */

void plan_tensors_free(struct plan_tensors *t) {
  if (!t)
    return;
  for (size_t i = 0; i < t->n; i++) {
    free(t->items[i].name);
    free(t->items[i].dtype);
  }
  free(t->items);
  free(t);
}

static int tensor_parse(const json_t *o, size_t i, struct plan_tensor *t,
                        struct gpu_failure *f) {
  const json_t *name = json_object_get(o, "name"), *bytes = json_object_get(o, "bytes");
  const json_t *numel = json_object_get(o, "numel"), *dtype = json_object_get(o, "dtype");
  const json_t *output = json_object_get(o, "output");
  if (output && !json_is_boolean(output)) {
    gpu_failure_set(f, "protocol", "protocol/bad_tensors", "tensors[%zu]: output must be true "
                    "or false", i);
    return -1;
  }
  if (!json_is_object(o) || !json_is_string(name) || !json_is_integer(bytes) ||
      json_integer_value(bytes) < 0 || (numel && !json_is_integer(numel)) ||
      (dtype && !json_is_string(dtype)) || json_string_length(name) == 0 ||
      json_string_length(name) > PLAN_MAX_NAME) {
    gpu_failure_set(f, "protocol", "protocol/bad_tensors",
                    "tensors[%zu] needs a name (1..%d chars) and bytes >= 0", i, PLAN_MAX_NAME);
    return -1;
  }
  t->name = strdup(json_string_value(name));
  t->dtype = strdup(dtype ? json_string_value(dtype) : "");
  t->bytes = (uint64_t)json_integer_value(bytes);
  t->numel = numel ? (uint64_t)json_integer_value(numel) : 0;
  /* "output" decides when given: a region of a program writes node values (output:
   * true) and may read a task output an earlier step made (output: false). */
  t->is_output = output ? json_is_true(output)
                        : strncmp(json_string_value(name), "output:", 7) == 0;
  if (!t->name || !t->dtype) {
    gpu_failure_set(f, "protocol", "protocol/out_of_memory", "out of memory");
    return -1;
  }
  return 0;
}

int plan_tensors_parse(const json_t *spec, struct plan_tensors **ret_tensors,
                       struct gpu_failure *f) {
  const json_t *arr = json_object_get(spec, "tensors"), *prec = json_object_get(spec, "precision");
  struct plan_tensors *t = calloc(1, sizeof *t);
  if (!t) {
    gpu_failure_set(f, "protocol", "protocol/out_of_memory", "out of memory");
    return -1;
  }
  if (!json_is_array(arr) || json_array_size(arr) > PLAN_MAX_TENSORS ||
      (prec && gpu_precision_parse(json_string_value(prec), &t->precision) < 0)) {
    gpu_failure_set(f, "protocol", "protocol/bad_tensors",
                    "need {\"tensors\":[...] (at most %d), \"precision\":fp32|tf32|bf16}",
                    PLAN_MAX_TENSORS);
    goto fail;
  }
  t->items = calloc(json_array_size(arr) + 1, sizeof *t->items);
  if (!t->items) {
    gpu_failure_set(f, "protocol", "protocol/out_of_memory", "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < json_array_size(arr); i++) {
    t->n = i + 1;
    if (tensor_parse(json_array_get(arr, i), i, &t->items[i], f) < 0)
      goto fail;
    for (size_t j = 0; j < i; j++)
      if (strcmp(t->items[j].name, t->items[i].name) == 0) {
        gpu_failure_set(f, "protocol", "protocol/bad_tensors",
                        "tensors[%zu]: duplicate name '%s'", i, t->items[i].name);
        goto fail;
      }
  }
  *ret_tensors = t;
  return 0;
fail:
  plan_tensors_free(t);
  return -1;
}

/* ---- helpers ---------------------------------------------------------------------- */

static int oom(struct gpu_failure *f) {
  gpu_failure_set(f, STAGE, "plan/out_of_memory", "out of memory");
  return -1;
}

/* Appends up to 8 names to buf as "a, b, c" (or "none"). */
static void name_list(char *buf, size_t len, const char *(*get)(const void *, size_t),
                      const void *ctx, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && i < 8 && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%.48s", i ? ", " : "", get(ctx, i));
  if (n > 8 && used < len)
    snprintf(buf + used, len - used, ", ...");
  if (n == 0)
    snprintf(buf, len, "none");
}

static const char *tensor_name_at(const void *ctx, size_t i) {
  return ((const struct plan_tensors *)ctx)->items[i].name;
}

static const char *buffer_name_at(const void *ctx, size_t i) {
  return ((const struct gpu_plan *)ctx)->buffers[i].name;
}

static const char *kernel_name_at(const void *ctx, size_t i) {
  return ((const struct cubin_info *)ctx)->kernels[i].name;
}

/* Fails with plan/malformed on the first key of o not in allowed (NULL-terminated). */
static int only_keys(const json_t *o, const char *const *allowed, const char *where,
                     struct gpu_failure *f) {
  const char *key;
  const json_t *val;
  json_object_foreach((json_t *)o, key, val) {
    size_t i = 0;
    while (allowed[i] && strcmp(allowed[i], key) != 0)
      i++;
    if (!allowed[i]) {
      gpu_failure_set(f, STAGE, "plan/malformed", "%s: unknown key '%.48s'", where, key);
      return -1;
    }
  }
  return 0;
}

/* ---- buffers ---------------------------------------------------------------------- */

static bool buffer_name_ok(const char *s, size_t len) {
  return len >= 1 && len <= 64 &&
         strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.-") == len;
}

static int parse_buffer(const json_t *o, size_t i, struct gpu_plan *p, uint64_t *total,
                        struct gpu_failure *f) {
  static const char *const keys[] = {"name", "bytes", NULL};
  char where[32];
  snprintf(where, sizeof where, "buffer %zu", i);
  if (!json_is_object(o)) {
    gpu_failure_set(f, STAGE, "plan/bad_buffer", "%s: must be an object {name, bytes}", where);
    return -1;
  }
  if (only_keys(o, keys, where, f) < 0) {
    snprintf(f->cls, sizeof f->cls, "plan/bad_buffer");
    return -1;
  }
  const json_t *name = json_object_get(o, "name"), *bytes = json_object_get(o, "bytes");
  if (!json_is_string(name) || !buffer_name_ok(json_string_value(name), json_string_length(name))) {
    gpu_failure_set(f, STAGE, "plan/bad_buffer",
                    "%s: name must be a string of 1..64 characters [A-Za-z0-9_:.-]", where);
    return -1;
  }
  const char *n = json_string_value(name);
  if (!json_is_integer(bytes) || json_integer_value(bytes) <= 0 ||
      (uint64_t)json_integer_value(bytes) > PLAN_MAX_BUFFER_TOTAL - *total) {
    gpu_failure_set(f, STAGE, "plan/bad_buffer",
                    "%s ('%s'): bytes must be an integer > 0, all buffers together at most "
                    "%llu",
                    where, n, (unsigned long long)PLAN_MAX_BUFFER_TOTAL);
    return -1;
  }
  for (size_t j = 0; j < i; j++)
    if (strcmp(p->buffers[j].name, n) == 0) {
      gpu_failure_set(f, STAGE, "plan/bad_buffer", "%s: duplicate name '%s' (also buffer %zu)",
                      where, n, j);
      return -1;
    }
  if (!(p->buffers[i].name = strdup(n)))
    return oom(f);
  p->buffers[i].bytes = (uint64_t)json_integer_value(bytes);
  *total += p->buffers[i].bytes;
  p->n_buffers = i + 1;
  return 0;
}

static int parse_buffers(const json_t *arr, struct gpu_plan *p, struct gpu_failure *f) {
  uint64_t total = 0;
  if (!arr)
    return 0;
  if (!json_is_array(arr)) {
    gpu_failure_set(f, STAGE, "plan/malformed", "plan: 'buffers' must be an array");
    return -1;
  }
  if (json_array_size(arr) > PLAN_MAX_BUFFERS) {
    gpu_failure_set(f, STAGE, "plan/bad_buffer", "plan declares %zu buffers; at most %d",
                    json_array_size(arr), PLAN_MAX_BUFFERS);
    return -1;
  }
  if (!(p->buffers = calloc(json_array_size(arr) + 1, sizeof *p->buffers)))
    return oom(f);
  for (size_t i = 0; i < json_array_size(arr); i++)
    if (parse_buffer(json_array_get(arr, i), i, p, &total, f) < 0)
      return -1;
  return 0;
}

/* ---- launch geometry -------------------------------------------------------------- */

/* Reads "grid" or "block": an array of 1..3 integers >= 1 (missing ones are 1). */
static int parse_dims(const json_t *arr, const char *what, size_t li, unsigned out[3],
                      struct gpu_failure *f) {
  out[0] = out[1] = out[2] = 1;
  if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > 3) {
    gpu_failure_set(f, STAGE, "plan/malformed",
                    "launch %zu: %s must be an array of 1 to 3 integers", li, what);
    return -1;
  }
  for (size_t d = 0; d < json_array_size(arr); d++) {
    const json_t *v = json_array_get(arr, d);
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
    if (!json_is_integer(v) || x < 1) {
      gpu_failure_set(f, STAGE, "plan/malformed", "launch %zu: %s[%zu] must be an integer >= 1",
                      li, what, d);
      return -1;
    }
    /* Clamp so that the limit checks below see a too-large value, not a wrapped one. */
    out[d] = x > 0xffffffffLL ? 0xffffffffu : (unsigned)x;
  }
  return 0;
}

static int check_grid(const unsigned g[3], size_t li, const struct device_limits *lim,
                      struct gpu_failure *f) {
  for (int d = 0; d < 3; d++)
    if (g[d] > lim->max_grid[d]) {
      gpu_failure_set(f, STAGE, "plan/grid_too_large", "launch %zu: grid[%d] = %u exceeds %u",
                      li, d, g[d], lim->max_grid[d]);
      return -1;
    }
  return 0;
}

/* Block limits: per dimension, per block, the kernel's launch bounds, and registers. */
static int check_block(const unsigned b[3], size_t li, const struct cubin_kernel *k,
                       const struct device_limits *lim, struct gpu_failure *f) {
  for (int d = 0; d < 3; d++)
    if (b[d] > lim->max_block[d]) {
      gpu_failure_set(f, STAGE, "plan/block_too_large", "launch %zu: block[%d] = %u exceeds %u",
                      li, d, b[d], lim->max_block[d]);
      return -1;
    }
  uint64_t threads = (uint64_t)b[0] * b[1] * b[2];
  if (threads > lim->max_threads_per_block) {
    gpu_failure_set(f, STAGE, "plan/block_too_large",
                    "launch %zu: block has %llu threads; the device allows %u", li,
                    (unsigned long long)threads, lim->max_threads_per_block);
    return -1;
  }
  uint64_t bound = (uint64_t)k->max_threads[0] * k->max_threads[1] * k->max_threads[2];
  if (bound > 0 && threads > bound) {
    gpu_failure_set(f, STAGE, "plan/block_too_large",
                    "launch %zu: block has %llu threads; kernel '%s' was compiled for at "
                    "most %llu (__launch_bounds__)",
                    li, (unsigned long long)threads, k->name, (unsigned long long)bound);
    return -1;
  }
  if (k->registers > 0 && lim->warp_size > 0) {
    /* Registers are allocated per warp in units of 256. */
    uint64_t warps = (threads + lim->warp_size - 1) / lim->warp_size;
    uint64_t per_warp = ((uint64_t)k->registers * lim->warp_size + 255) / 256 * 256;
    if (warps * per_warp > lim->regs_per_block) {
      gpu_failure_set(f, STAGE, "plan/block_too_large",
                      "launch %zu: a block of %llu threads needs %llu registers (%d per "
                      "thread); the device has %u per block",
                      li, (unsigned long long)threads, (unsigned long long)(warps * per_warp),
                      k->registers, lim->regs_per_block);
      return -1;
    }
  }
  return 0;
}

int gpu_plan_check_shared(const struct gpu_plan *plan, size_t i, long static_shared,
                          const struct device_limits *limits, struct gpu_failure *f) {
  uint64_t dyn = plan->launches[i].shared_bytes;
  uint64_t stat = static_shared > 0 ? (uint64_t)static_shared : 0;
  if (dyn + stat > limits->max_shared_optin) {
    gpu_failure_set(f, STAGE, "plan/shared_too_large",
                    "launch %zu: shared_bytes %llu + static %llu exceeds the device's %u per "
                    "block",
                    i, (unsigned long long)dyn, (unsigned long long)stat,
                    limits->max_shared_optin);
    return -1;
  }
  return 0;
}

/* ---- arguments -------------------------------------------------------------------- */

struct arg_ctx {
  const struct plan_tensors *tensors;
  const struct gpu_plan *plan;
  size_t li, ai;
};

static int parse_ref_arg(const struct arg_ctx *c, enum plan_arg_kind kind, const json_t *v,
                         struct plan_arg *out, struct gpu_failure *f) {
  char known[512];
  if (!json_is_string(v)) {
    gpu_failure_set(f, STAGE, "plan/bad_arg", "launch %zu arg %zu: %s must name a string", c->li,
                    c->ai, arg_kind_names[kind]);
    return -1;
  }
  const char *name = json_string_value(v);
  size_t n = kind == PLAN_ARG_TENSOR ? c->tensors->n : c->plan->n_buffers;
  for (size_t i = 0; i < n; i++) {
    const char *have =
        kind == PLAN_ARG_TENSOR ? c->tensors->items[i].name : c->plan->buffers[i].name;
    if (strcmp(have, name) == 0) {
      out->ref = i;
      return 0;
    }
  }
  if (kind == PLAN_ARG_TENSOR) {
    name_list(known, sizeof known, tensor_name_at, c->tensors, n);
    gpu_failure_set(f, STAGE, "plan/unknown_tensor",
                    "launch %zu arg %zu: unknown tensor '%.64s' (known: %s)", c->li, c->ai, name,
                    known);
  } else {
    name_list(known, sizeof known, buffer_name_at, c->plan, n);
    gpu_failure_set(f, STAGE, "plan/unknown_buffer",
                    "launch %zu arg %zu: unknown buffer '%.64s' (declared: %s)", c->li, c->ai,
                    name, known);
  }
  return -1;
}

static int parse_scalar_arg(const struct arg_ctx *c, enum plan_arg_kind kind, const json_t *v,
                            struct plan_arg *out, struct gpu_failure *f) {
  bool integral = kind == PLAN_ARG_I32 || kind == PLAN_ARG_I64;
  bool ok = integral ? json_is_integer(v) : json_is_number(v);
  if (ok && kind == PLAN_ARG_I32) {
    json_int_t x = json_integer_value(v);
    ok = x >= INT32_MIN && x <= INT32_MAX;
    out->v.i32 = (int32_t)x;
  } else if (ok && kind == PLAN_ARG_I64) {
    out->v.i64 = (int64_t)json_integer_value(v);
  } else if (ok && kind == PLAN_ARG_F32) {
    double x = json_number_value(v);
    ok = isfinite(x) && fabs(x) <= FLT_MAX;
    out->v.f32 = (float)x;
  } else if (ok) {
    out->v.f64 = json_number_value(v);
  }
  if (!ok) {
    gpu_failure_set(f, STAGE, "plan/bad_arg", "launch %zu arg %zu: value is not a valid %s",
                    c->li, c->ai, arg_kind_names[kind]);
    return -1;
  }
  return 0;
}

static int parse_arg(const struct arg_ctx *c, const json_t *o, struct plan_arg *out,
                     struct gpu_failure *f) {
  if (!json_is_object(o) || json_object_size(o) != 1) {
    gpu_failure_set(f, STAGE, "plan/bad_arg",
                    "launch %zu arg %zu: must be an object with exactly one of tensor, buffer, "
                    "i32, i64, f32, f64",
                    c->li, c->ai);
    return -1;
  }
  const char *key = json_object_iter_key(json_object_iter((json_t *)o));
  const json_t *v = json_object_iter_value(json_object_iter((json_t *)o));
  size_t k = 0;
  while (k < 6 && strcmp(arg_kind_names[k], key) != 0)
    k++;
  if (k == 6) {
    gpu_failure_set(f, STAGE, "plan/bad_arg", "launch %zu arg %zu: unknown argument type '%.32s'",
                    c->li, c->ai, key);
    return -1;
  }
  out->kind = (enum plan_arg_kind)k;
  if (out->kind == PLAN_ARG_TENSOR || out->kind == PLAN_ARG_BUFFER)
    return parse_ref_arg(c, out->kind, v, out, f);
  return parse_scalar_arg(c, out->kind, v, out, f);
}

/* The arguments must match the kernel's parameters in number and size. */
static int check_signature(const struct plan_launch *l, size_t li, const struct cubin_kernel *k,
                           struct gpu_failure *f) {
  if (k->n_params < 0)
    return 0;
  size_t np = (size_t)k->n_params;
  if (l->n_args != np) {
    size_t ai = l->n_args < np ? l->n_args : np;
    gpu_failure_set(f, STAGE, "plan/bad_arg",
                    "launch %zu arg %zu: %s; kernel '%s' takes %zu parameters, the plan gives %zu",
                    li, ai, l->n_args < np ? "missing" : "extra", k->name, np, l->n_args);
    return -1;
  }
  for (size_t i = 0; i < np && i < CUBIN_MAX_PARAMS; i++) {
    size_t want = k->param_size[i], have = plan_arg_size(l->args[i].kind);
    if (want != have) {
      gpu_failure_set(f, STAGE, "plan/bad_arg",
                      "launch %zu arg %zu: kernel '%s' parameter %zu is %zu bytes; a%s %s is %zu",
                      li, i, k->name, i, want, l->args[i].kind >= PLAN_ARG_I32 ? "n" : "",
                      arg_kind_names[l->args[i].kind], have);
      return -1;
    }
  }
  return 0;
}

static int parse_args(const json_t *arr, size_t li, struct gpu_plan *p,
                      const struct plan_tensors *t, struct plan_launch *l,
                      struct gpu_failure *f) {
  if (!arr)
    return 0;
  if (!json_is_array(arr)) {
    gpu_failure_set(f, STAGE, "plan/malformed", "launch %zu: args must be an array", li);
    return -1;
  }
  if (json_array_size(arr) > PLAN_MAX_ARGS) {
    gpu_failure_set(f, STAGE, "plan/bad_arg", "launch %zu arg %d: too many args (%zu; at most %d)",
                    li, PLAN_MAX_ARGS, json_array_size(arr), PLAN_MAX_ARGS);
    return -1;
  }
  if (!(l->args = calloc(json_array_size(arr) + 1, sizeof *l->args)))
    return oom(f);
  for (size_t ai = 0; ai < json_array_size(arr); ai++) {
    struct arg_ctx c = {t, p, li, ai};
    if (parse_arg(&c, json_array_get(arr, ai), &l->args[ai], f) < 0)
      return -1;
    l->n_args = ai + 1;
  }
  return 0;
}

/* ---- launches --------------------------------------------------------------------- */

static const struct cubin_kernel *find_kernel(const json_t *name, size_t li,
                                              const struct cubin_info *kernels,
                                              struct gpu_failure *f) {
  char known[512];
  if (!json_is_string(name) || json_string_length(name) == 0) {
    gpu_failure_set(f, STAGE, "plan/malformed", "launch %zu: 'kernel' must be a non-empty string",
                    li);
    return NULL;
  }
  const struct cubin_kernel *k = cubin_info_find(kernels, json_string_value(name));
  if (!k) {
    name_list(known, sizeof known, kernel_name_at, kernels, kernels->n_kernels);
    gpu_failure_set(f, STAGE, "plan/unknown_kernel",
                    "launch %zu: unknown kernel '%.64s' (the module has: %s; kernels need "
                    "extern \"C\")",
                    li, json_string_value(name), known);
  }
  return k;
}

static int parse_shared(const json_t *v, size_t li, unsigned *out, struct gpu_failure *f) {
  *out = 0;
  if (!v)
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 0) {
    gpu_failure_set(f, STAGE, "plan/malformed",
                    "launch %zu: shared_bytes must be an integer >= 0", li);
    return -1;
  }
  json_int_t x = json_integer_value(v);
  *out = x > 0xffffffffLL ? 0xffffffffu : (unsigned)x;
  return 0;
}

struct plan_ctx {
  const struct plan_tensors *tensors;
  const struct cubin_info *kernels;
  const struct device_limits *limits;
};

static int parse_launch(const struct plan_ctx *c, const json_t *o, size_t li,
                        struct gpu_plan *p, struct gpu_failure *f) {
  static const char *const keys[] = {"kernel", "grid", "block", "shared_bytes", "args", NULL};
  char where[32];
  struct plan_launch *l = &p->launches[li];
  snprintf(where, sizeof where, "launch %zu", li);
  p->n_launches = li + 1;
  if (!json_is_object(o)) {
    gpu_failure_set(f, STAGE, "plan/malformed", "%s: must be an object", where);
    return -1;
  }
  if (only_keys(o, keys, where, f) < 0)
    return -1;
  const struct cubin_kernel *k = find_kernel(json_object_get(o, "kernel"), li, c->kernels, f);
  if (!k)
    return -1;
  if (!(l->kernel = strdup(k->name)))
    return oom(f);
  if (parse_dims(json_object_get(o, "grid"), "grid", li, l->grid, f) < 0 ||
      parse_dims(json_object_get(o, "block"), "block", li, l->block, f) < 0 ||
      parse_shared(json_object_get(o, "shared_bytes"), li, &l->shared_bytes, f) < 0 ||
      check_grid(l->grid, li, c->limits, f) < 0 ||
      check_block(l->block, li, k, c->limits, f) < 0 ||
      gpu_plan_check_shared(p, li, k->static_shared, c->limits, f) < 0 ||
      parse_args(json_object_get(o, "args"), li, p, c->tensors, l, f) < 0 ||
      check_signature(l, li, k, f) < 0)
    return -1;
  return 0;
}

/* Every output tensor must be passed to some launch, or nothing could write it. */
static int check_outputs(const struct gpu_plan *p, const struct plan_tensors *t,
                         struct gpu_failure *f) {
  for (size_t ti = 0; ti < t->n; ti++) {
    if (!t->items[ti].is_output)
      continue;
    bool named = false;
    for (size_t li = 0; li < p->n_launches && !named; li++)
      for (size_t ai = 0; ai < p->launches[li].n_args && !named; ai++)
        named = p->launches[li].args[ai].kind == PLAN_ARG_TENSOR &&
                p->launches[li].args[ai].ref == ti;
    if (!named) {
      gpu_failure_set(f, STAGE, "plan/output_not_named", "plan: no launch passes tensor '%s'",
                      t->items[ti].name);
      return -1;
    }
  }
  return 0;
}

static int parse_launches(const struct plan_ctx *c, const json_t *arr, struct gpu_plan *p,
                          struct gpu_failure *f) {
  if (!arr) {
    gpu_failure_set(f, STAGE, "plan/malformed", "plan: 'launches' is required");
    return -1;
  }
  if (!json_is_array(arr)) {
    gpu_failure_set(f, STAGE, "plan/malformed", "plan: 'launches' must be an array");
    return -1;
  }
  if (json_array_size(arr) == 0) {
    gpu_failure_set(f, STAGE, "plan/malformed", "plan: 'launches' is empty");
    return -1;
  }
  if (json_array_size(arr) > PLAN_MAX_LAUNCHES) {
    gpu_failure_set(f, STAGE, "plan/too_many_launches", "plan has %zu launches; at most %d",
                    json_array_size(arr), PLAN_MAX_LAUNCHES);
    return -1;
  }
  if (!(p->launches = calloc(json_array_size(arr), sizeof *p->launches)))
    return oom(f);
  for (size_t li = 0; li < json_array_size(arr); li++)
    if (parse_launch(c, json_array_get(arr, li), li, p, f) < 0)
      return -1;
  return 0;
}

/* The optional "channels_last" list: distinct names of tensors the plan knows, which the
 * caller passes in channels-last memory order (docs/architecture.md, "Channels-last
 * convolutions"). The library only checks it: it addresses the pointers it is given. */
static int check_channels_last(const json_t *names, const struct plan_tensors *t,
                               struct gpu_failure *f) {
  if (!names)
    return 0;
  if (!json_is_array(names)) {
    gpu_failure_set(f, STAGE, "plan/malformed", "plan: 'channels_last' must be an array");
    return -1;
  }
  for (size_t i = 0; i < json_array_size(names); i++) {
    const char *name = json_string_value(json_array_get(names, i));
    size_t k = 0;
    while (name && k < t->n && strcmp(t->items[k].name, name) != 0)
      k++;
    bool repeated = false;
    for (size_t j = 0; name && j < i; j++)
      repeated = repeated || strcmp(json_string_value(json_array_get(names, j)), name) == 0;
    if (!name || k == t->n || repeated) {
      gpu_failure_set(f, STAGE, "plan/unknown_tensor",
                      "plan: channels_last entry %zu must name a tensor of the plan once", i);
      return -1;
    }
  }
  return 0;
}

int gpu_plan_parse(const json_t *plan, const struct plan_tensors *tensors,
                   const struct cubin_info *kernels, const struct device_limits *limits,
                   struct gpu_plan **ret_plan, struct gpu_failure *f) {
  static const char *const keys[] = {"buffers", "launches", "channels_last", NULL};
  struct plan_ctx c = {tensors, kernels, limits};
  if (!json_is_object(plan)) {
    gpu_failure_set(f, STAGE, "plan/malformed", "plan: must be a JSON object");
    return -1;
  }
  if (only_keys(plan, keys, "plan", f) < 0 ||
      check_channels_last(json_object_get(plan, "channels_last"), tensors, f) < 0)
    return -1;
  struct gpu_plan *p = calloc(1, sizeof *p);
  if (!p)
    return oom(f);
  if (parse_buffers(json_object_get(plan, "buffers"), p, f) < 0 ||
      parse_launches(&c, json_object_get(plan, "launches"), p, f) < 0 ||
      check_outputs(p, tensors, f) < 0) {
    gpu_plan_free(p);
    return -1;
  }
  *ret_plan = p;
  return 0;
}

void gpu_plan_free(struct gpu_plan *plan) {
  if (!plan)
    return;
  for (size_t i = 0; i < plan->n_buffers; i++)
    free(plan->buffers[i].name);
  for (size_t i = 0; i < plan->n_launches; i++) {
    free(plan->launches[i].kernel);
    free(plan->launches[i].args);
  }
  free(plan->buffers);
  free(plan->launches);
  free(plan);
}
