/* Plan timing (docs/architecture.md, "Evaluation rules"): events around the whole plan only,
 * so that the
 * flush and the resets before each rep are not counted. */
#include "gpu/timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gpu_timing_defaults(struct timing_params *ret_params) {
  *ret_params = (struct timing_params){.warmup = 3, .min_reps = 10, .max_reps = 200,
                                .target_rse = 0.01, .flush_bytes = 256u << 20};
}

static int int_key(const json_t *o, const char *key, int lo, int hi, int *out,
                   struct gpu_failure *f) {
  const json_t *v = json_object_get(o, key);
  if (!v)
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
    gpu_failure_set(f, "protocol", "protocol/bad_timing", "timing: '%s' must be an integer in "
                    "%d..%d", key, lo, hi);
    return -1;
  }
  *out = (int)json_integer_value(v);
  return 0;
}

int gpu_timing_params_parse(const json_t *o, struct timing_params *ret_params,
                            struct gpu_failure *f) {
  struct timing_params p;
  gpu_timing_defaults(&p);
  if (o && !json_is_object(o)) {
    gpu_failure_set(f, "protocol", "protocol/bad_timing", "timing must be a JSON object");
    return -1;
  }
  if (o) {
    const json_t *rse = json_object_get(o, "target_rse"), *fb = json_object_get(o, "flush_bytes");
    if (int_key(o, "warmup", 0, 1000, &p.warmup, f) < 0 ||
        int_key(o, "min_reps", 1, TIMING_MAX_REPS, &p.min_reps, f) < 0 ||
        int_key(o, "max_reps", 1, TIMING_MAX_REPS, &p.max_reps, f) < 0)
      return -1;
    if (rse && (!json_is_number(rse) || !(json_number_value(rse) > 0.0))) {
      gpu_failure_set(f, "protocol", "protocol/bad_timing", "timing: 'target_rse' must be > 0");
      return -1;
    }
    if (fb && (!json_is_integer(fb) || json_integer_value(fb) < 0 ||
               (unsigned long long)json_integer_value(fb) > TIMING_MAX_FLUSH)) {
      gpu_failure_set(f, "protocol", "protocol/bad_timing",
                      "timing: 'flush_bytes' must be an integer in 0..%llu",
                      (unsigned long long)TIMING_MAX_FLUSH);
      return -1;
    }
    if (rse)
      p.target_rse = json_number_value(rse);
    if (fb)
      p.flush_bytes = (size_t)json_integer_value(fb);
  }
  if (p.min_reps > p.max_reps) {
    gpu_failure_set(f, "protocol", "protocol/bad_timing", "timing: min_reps > max_reps");
    return -1;
  }
  *ret_params = p;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void gpu_timing_stats(const double *ms, size_t n, double *ret_median, double *ret_mean,
                      double *ret_rse) {
  double sum = 0.0, sq = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += ms[i];
  double mean = sum / (double)n;
  for (size_t i = 0; i < n; i++)
    sq += (ms[i] - mean) * (ms[i] - mean);
  double sd = n > 1 ? sqrt(sq / (double)(n - 1)) : 0.0;
  double *sorted = malloc(n * sizeof *sorted);
  double median = mean;
  if (sorted) {
    memcpy(sorted, ms, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    free(sorted);
  }
  *ret_median = median;
  *ret_mean = mean;
  *ret_rse = mean > 0.0 && n > 1 ? sd / sqrt((double)n) / mean : INFINITY;
}

bool gpu_timing_done(const struct timing_params *p, size_t n, double rse) {
  if (n >= (size_t)p->max_reps)
    return true;
  return n >= (size_t)p->min_reps && rse < p->target_rse;
}

struct rep_ctx {
  const struct cuda_api *api;
  struct gpu_launch *l;
  const CUdeviceptr *ptrs;
  CUstream stream;
  CUdeviceptr flush;
  size_t flush_bytes;
  CUevent start, stop;
  struct gpu_failure *f;
};

/* One rep; when timed, returns the plan's milliseconds in *ret_ms. */
static int one_rep(struct rep_ctx *c, int rep, bool timed, double *ret_ms) {
  const struct cuda_api *api = c->api;
  size_t failed = 0;
  CUresult rc = CUDA_SUCCESS;
  const char *what = "timing: poison, flush and reset";
  /* Outputs first, so that the flush also evicts the poisoned output lines. */
  rc = gpu_launch_poison_outputs(c->l, c->ptrs, c->stream);
  if (rc == CUDA_SUCCESS && c->flush_bytes)
    rc = api->memset_d8_async(c->flush, (unsigned char)(rep & 0xff), c->flush_bytes, c->stream);
  if (rc == CUDA_SUCCESS)
    rc = gpu_launch_reset(c->l, c->stream);
  if (rc == CUDA_SUCCESS && timed)
    rc = api->event_record(c->start, c->stream);
  if (rc == CUDA_SUCCESS) {
    what = "timing: the plan";
    rc = gpu_launch_enqueue_all(c->l, c->ptrs, c->stream, &failed);
  }
  if (rc == CUDA_SUCCESS && timed)
    rc = api->event_record(c->stop, c->stream);
  if (rc == CUDA_SUCCESS)
    rc = timed ? api->event_synchronize(c->stop) : api->stream_synchronize(c->stream);
  float ms = 0.0f;
  if (rc == CUDA_SUCCESS && timed)
    rc = api->event_elapsed_time(&ms, c->start, c->stop);
  if (rc != CUDA_SUCCESS) {
    gpu_launch_set_failure(api, rc, what, c->f);
    return -1;
  }
  *ret_ms = ms;
  return 0;
}

int gpu_timing_run(const struct cuda_api *api, struct gpu_launch *l,
                   const CUdeviceptr *tensor_ptrs, CUstream stream, CUdeviceptr flush,
                   const struct timing_params *p, struct timing_result *ret_result,
                   struct gpu_failure *f) {
  struct rep_ctx c = {api, l, tensor_ptrs, stream, flush, p->flush_bytes, NULL, NULL, f};
  double *samples = malloc((size_t)p->max_reps * sizeof *samples);
  double median = 0, mean = 0, rse = INFINITY, ms = 0;
  size_t n = 0;
  int rc = -1;
  if (!samples) {
    gpu_failure_set(f, "launch", "timing/out_of_memory", "out of host memory");
    return -1;
  }
  CUresult erc = api->event_create(&c.start, CU_EVENT_DEFAULT);
  if (erc == CUDA_SUCCESS)
    erc = api->event_create(&c.stop, CU_EVENT_DEFAULT);
  if (erc != CUDA_SUCCESS) {
    gpu_launch_set_failure(api, erc, "timing: creating events", f);
    goto out;
  }
  for (int w = 0; w < p->warmup; w++)
    if (one_rep(&c, w, false, &ms) < 0)
      goto out;
  do {
    if (one_rep(&c, (int)n, true, &samples[n]) < 0)
      goto out;
    n++;
    gpu_timing_stats(samples, n, &median, &mean, &rse);
  } while (!gpu_timing_done(p, n, rse));
  *ret_result = (struct timing_result){median, mean, rse, (int)n};
  rc = 0;
out:
  if (c.start)
    api->event_destroy(c.start);
  if (c.stop)
    api->event_destroy(c.stop);
  free(samples);
  return rc;
}
