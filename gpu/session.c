/* GPU session: driver, primary context, device limits, cache, flush buffer, handles. */
#include "gpu/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int attr(const struct gpu_session *s, CUdevice_attribute a) {
  int v = 0;
  if (s->api->device_get_attribute(&v, a, s->dev) != CUDA_SUCCESS)
    return 0;
  return v;
}

static void read_limits(struct gpu_session *s) {
  struct device_limits *l = &s->limits;
  gpu_limits_hopper(l);
  /* Attributes the driver does not report keep the Hopper values. */
  int v;
#define TAKE(field, a)                                                                 \
  if ((v = attr(s, a)) > 0)                                                            \
    field = (unsigned)v;
  TAKE(l->max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
  TAKE(l->max_block[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)
  TAKE(l->max_block[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)
  TAKE(l->max_block[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)
  TAKE(l->max_grid[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)
  TAKE(l->max_grid[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)
  TAKE(l->max_grid[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)
  TAKE(l->max_shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
  TAKE(l->regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)
  TAKE(l->warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE)
#undef TAKE
}

/* cuInit, device lookup, primary context retained and made current. */
static int open_device(struct gpu_session *s, int index, char *err, size_t errlen) {
  const struct cuda_api *api = s->api;
  int count = 0;
  CUresult rc = api->init(0);
  if (rc == CUDA_SUCCESS)
    rc = api->device_get_count(&count);
  if (rc != CUDA_SUCCESS) {
    snprintf(err, errlen, "cuInit: %s", cuda_api_error_name(api, rc));
    return -1;
  }
  if (index < 0 || index >= count) {
    snprintf(err, errlen, "device %d does not exist (%d visible)", index, count);
    return -1;
  }
  if ((rc = api->device_get(&s->dev, index)) != CUDA_SUCCESS ||
      (rc = api->primary_ctx_retain(&s->ctx, s->dev)) != CUDA_SUCCESS) {
    snprintf(err, errlen, "device %d: %s", index, cuda_api_error_name(api, rc));
    return -1;
  }
  if ((rc = api->ctx_set_current(s->ctx)) != CUDA_SUCCESS) {
    snprintf(err, errlen, "cuCtxSetCurrent: %s", cuda_api_error_name(api, rc));
    return -1;
  }
  s->index = index;
  s->cc_major = attr(s, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  s->cc_minor = attr(s, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  nvrtc_arch_for_cc(s->cc_major, s->cc_minor, s->arch, sizeof s->arch);
  if (api->device_get_name(s->name, (int)sizeof s->name, s->dev) != CUDA_SUCCESS)
    snprintf(s->name, sizeof s->name, "unknown");
  read_limits(s);
  return 0;
}

int gpu_session_open(int index, const char *cache_dir, struct gpu_session **ret_session,
                     char *err, size_t errlen) {
  struct gpu_session *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  s->next_handle = 1;
  if (!(s->api = cuda_api_open(err, errlen)) || open_device(s, index, err, errlen) < 0 ||
      (cache_dir && *cache_dir && cubin_cache_open(cache_dir, &s->cache, err, errlen) < 0)) {
    gpu_session_free(s);
    return -1;
  }
  *ret_session = s;
  return 0;
}

void gpu_session_free(struct gpu_session *s) {
  if (!s)
    return;
  if (s->ctx) {
    gpu_session_make_current(s);
    for (int i = 0; i < SESSION_MAX_CANDIDATES; i++)
      gpu_candidate_free(s->cands[i]);
    if (s->flush)
      s->api->mem_free(s->flush);
    s->api->primary_ctx_release(s->dev);
  }
  cubin_cache_free(s->cache);
  cuda_api_free(s->api);
  free(s);
}

CUresult gpu_session_make_current(struct gpu_session *s) {
  return s->api->ctx_set_current(s->ctx);
}

json_t *gpu_session_device_info(struct gpu_session *s) {
  char cap[16];
  size_t mem = 0;
  int driver = 0;
  snprintf(cap, sizeof cap, "%d.%d", s->cc_major, s->cc_minor);
  s->api->device_total_mem(&mem, s->dev);
  s->api->driver_get_version(&driver);
  int clock_khz = attr(s, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  int bus_bits = attr(s, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  /* Double data rate: two transfers per clock over bus_bits / 8 bytes. */
  json_t *peak = clock_khz > 0 && bus_bits > 0
                     ? json_real(2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9)
                     : json_null();
  json_t *cache = s->cache ? json_pack("{s:s, s:I, s:I}", "dir", cubin_cache_dir(s->cache),
                                       "hits", (json_int_t)cubin_cache_hits(s->cache),
                                       "misses", (json_int_t)cubin_cache_misses(s->cache))
                           : json_null();
  return json_pack("{s:s, s:s, s:i, s:s, s:s, s:i, s:I, s:o, s:i, s:i, s:i, s:i, s:o}",
                   "type", "cuda", "name", s->name, "index", s->index, "capability", cap,
                   "arch", s->arch, "sm_count",
                   attr(s, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), "memory_bytes",
                   (json_int_t)mem, "hbm_peak_GBps", peak, "l2_bytes",
                   attr(s, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), "max_shared_optin",
                   (int)s->limits.max_shared_optin, "max_threads_per_block",
                   (int)s->limits.max_threads_per_block, "driver_version", driver, "cache",
                   cache);
}

int gpu_session_add(struct gpu_session *s, struct gpu_candidate *c) {
  for (int i = 0; i < SESSION_MAX_CANDIDATES; i++) {
    if (s->cands[i])
      continue;
    c->handle = s->next_handle++;
    if (s->next_handle <= 0)
      s->next_handle = 1;
    s->cands[i] = c;
    return c->handle;
  }
  return -1;
}

struct gpu_candidate *gpu_session_find(struct gpu_session *s, int handle) {
  for (int i = 0; handle > 0 && i < SESSION_MAX_CANDIDATES; i++)
    if (s->cands[i] && s->cands[i]->handle == handle)
      return s->cands[i];
  return NULL;
}

void gpu_session_remove(struct gpu_session *s, int handle) {
  for (int i = 0; handle > 0 && i < SESSION_MAX_CANDIDATES; i++)
    if (s->cands[i] && s->cands[i]->handle == handle) {
      gpu_candidate_free(s->cands[i]);
      s->cands[i] = NULL;
    }
}

void gpu_candidate_free(struct gpu_candidate *c) {
  if (!c)
    return;
  gpu_launch_free(c->launch);
  free(c->bound);
  gpu_plan_free(c->plan);
  plan_tensors_free(c->tensors);
  compile_result_clear(&c->compile);
  free(c);
}

int gpu_session_flush_buffer(struct gpu_session *s, size_t bytes, CUdeviceptr *ret_ptr,
                             struct gpu_failure *f) {
  if (bytes > s->flush_bytes) {
    if (s->flush)
      s->api->mem_free(s->flush);
    s->flush = 0;
    s->flush_bytes = 0;
    CUresult rc = s->api->mem_alloc(&s->flush, bytes);
    if (rc != CUDA_SUCCESS) {
      s->flush = 0;
      gpu_launch_set_failure(s->api, rc, "allocating the L2 flush buffer", f);
      return -1;
    }
    s->flush_bytes = bytes;
  }
  *ret_ptr = s->flush;
  return 0;
}
