/* Launch plans (docs/architecture.md, "Formats"): parsing and validation against the
 * task's tensors,
 * the module's kernels and the device's limits, before anything is launched. */
#ifndef OPFORGE_GPU_PLAN_H
#define OPFORGE_GPU_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/cubin_info.h"
#include "gpu/failure.h"
#include "gpu/nvrtc_compile.h"

#define PLAN_MAX_LAUNCHES 16
#define PLAN_MAX_ARGS 64
#define PLAN_MAX_BUFFERS 16
#define PLAN_MAX_BUFFER_TOTAL (4ull << 30) /* bytes of scratch per candidate */
#define PLAN_MAX_TENSORS 1024
#define PLAN_MAX_NAME 128

/* What the device allows; filled from device attributes, or gpu_limits_hopper(). */
struct device_limits {
  unsigned max_threads_per_block;
  unsigned max_block[3];
  unsigned max_grid[3];
  unsigned max_shared_optin;   /* dynamic + static shared bytes per block, opted in */
  unsigned regs_per_block;
  unsigned warp_size;
};

/* The H100/H200 values (compute capability 9.0), for tests and the CLI. */
void gpu_limits_hopper(struct device_limits *ret);

/* One tensor the task provides: input:i, param:<key>, output:i, or node:<name> (a value
 * of a program, docs/architecture.md "Programs"). Outputs are poisoned before each
 * checked run and must be passed to some launch. */
struct plan_tensor {
  char *name;
  char *dtype;
  uint64_t numel;
  uint64_t bytes;
  bool is_output;
};

struct plan_tensors {
  struct plan_tensor *items;
  size_t n;
  enum gpu_precision precision;
};

/* Parses {"tensors":[{"name","dtype","numel","bytes","output"}...],"precision":"fp32"}
 * (borrowed) into a new plan_tensors that the caller frees with plan_tensors_free. A
 * tensor is an output when "output" is true, or, without "output", when its name starts
 * with "output:". Returns 0, or -1 with f set (stage protocol, class
 * protocol/bad_tensors). */
int plan_tensors_parse(const json_t *spec, struct plan_tensors **ret_tensors,
                       struct gpu_failure *f);
/* Frees t and its names; accepts NULL. */
void plan_tensors_free(struct plan_tensors *t);

enum plan_arg_kind {
  PLAN_ARG_TENSOR, PLAN_ARG_BUFFER, PLAN_ARG_I32, PLAN_ARG_I64, PLAN_ARG_F32, PLAN_ARG_F64
};

struct plan_arg {
  enum plan_arg_kind kind;
  size_t ref;                  /* tensor index (plan_tensors) or buffer index */
  union {
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
  } v;
};

struct plan_launch {
  char *kernel;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  struct plan_arg *args;
  size_t n_args;
};

struct plan_buffer {
  char *name;
  uint64_t bytes;
};

struct gpu_plan {
  struct plan_buffer *buffers;
  size_t n_buffers;
  struct plan_launch *launches;
  size_t n_launches;
};

/* Parses and validates plan (borrowed) against tensors, the module's kernels and
 * limits. On success returns 0 and a new plan the caller frees with gpu_plan_free. On
 * the first violation returns -1 with f set: stage "launch", a plan/ class (gpu/opforge_gpu.h
 * C, plus plan/malformed for wrong structure and plan/output_not_named), and a message
 * that starts with "launch N", "launch N arg M" or "buffer N" (0-based indices). */
int gpu_plan_parse(const json_t *plan, const struct plan_tensors *tensors,
                   const struct cubin_info *kernels, const struct device_limits *limits,
                   struct gpu_plan **ret_plan, struct gpu_failure *f);
/* Frees plan, its launches, arguments and buffer names; accepts NULL. */
void gpu_plan_free(struct gpu_plan *plan);

/* Checks launch i's dynamic shared memory plus the kernel's static shared memory
 * (known exactly only once the module is loaded). Returns 0, or -1 with f set to
 * plan/shared_too_large. */
int gpu_plan_check_shared(const struct gpu_plan *plan, size_t i, long static_shared,
                          const struct device_limits *limits, struct gpu_failure *f);

/* Bytes a value of this kind occupies as a kernel parameter. */
size_t plan_arg_size(enum plan_arg_kind kind);

#endif
