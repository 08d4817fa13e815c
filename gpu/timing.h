/* Plan timing: CUDA events around the whole plan, an L2 flush before every rep,
 * warm-ups, and reps until the relative standard error is small enough. */
#ifndef OPFORGE_GPU_TIMING_H
#define OPFORGE_GPU_TIMING_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpu/cuda_api.h"
#include "gpu/failure.h"
#include "gpu/launch.h"

#define TIMING_MAX_REPS 10000
#define TIMING_MAX_FLUSH (4ull << 30)

struct timing_params {
  int warmup;          /* default 3 */
  int min_reps;        /* default 10 */
  int max_reps;        /* default 200 */
  double target_rse;   /* default 0.01 */
  size_t flush_bytes;  /* default 256 MiB */
};

struct timing_result {
  double median_ms;
  double mean_ms;
  double rse;          /* standard error of the mean / mean */
  int reps;
};

/* The defaults of docs/architecture.md, "Evaluation rules": 3 warm-ups, 10..200 reps, 1%
 * RSE, 256 MiB flush. */
void gpu_timing_defaults(struct timing_params *ret_params);
/* Reads the keys of the timing_json (each optional; borrowed) over the
 * defaults. Returns 0, or -1 with f set (protocol/bad_timing) naming the key. */
int gpu_timing_params_parse(const json_t *o, struct timing_params *ret_params,
                            struct gpu_failure *f);

/* Median, mean and relative standard error of n >= 1 samples (ms is not modified). */
void gpu_timing_stats(const double *ms, size_t n, double *ret_median, double *ret_mean,
                      double *ret_rse);
/* True when sampling may stop after n samples with relative standard error rse. */
bool gpu_timing_done(const struct timing_params *p, size_t n, double rse);

/* Times the plan of l on stream with tensor_ptrs. flush is a device buffer of at least
 * p->flush_bytes (borrowed). Each rep: outputs poisoned, flush memset, reset of scratch
 * and globals, event, the plan, event. Returns 0 with *ret_result filled, or -1 with f
 * set (f->sticky: the context is unusable). */
int gpu_timing_run(const struct cuda_api *api, struct gpu_launch *l,
                   const CUdeviceptr *tensor_ptrs, CUstream stream, CUdeviceptr flush,
                   const struct timing_params *p, struct timing_result *ret_result,
                   struct gpu_failure *f);

#endif
