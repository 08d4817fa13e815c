/* A GPU session: the driver table, the device's primary context, its limits, the cubin
 * cache, the L2-flush buffer and the table of prepared candidates. */
#ifndef OPFORGE_GPU_SESSION_H
#define OPFORGE_GPU_SESSION_H

#include <jansson.h>
#include <stdbool.h>

#include "gpu/cubin_cache.h"
#include "gpu/cuda_api.h"
#include "gpu/launch.h"
#include "gpu/nvrtc_compile.h"
#include "gpu/opforge_gpu.h"
#include "gpu/plan.h"

#define SESSION_MAX_CANDIDATES OFG_MAX_PREPARED_CANDIDATES

/* A prepared candidate: everything needed to run its plan again and again. */
struct gpu_candidate {
  int handle;
  struct compile_result compile;  /* owns the cubin and its cubin_info */
  struct plan_tensors *tensors;
  struct gpu_plan *plan;
  struct gpu_launch *launch;
  CUdeviceptr *bound;             /* owned: ofg_candidate_bind's pointers, indexed like
                                     tensors; NULL until bound */
};

struct gpu_session {
  struct cuda_api *api;
  int index;
  CUdevice dev;
  CUcontext ctx;                  /* the primary context, retained */
  int cc_major, cc_minor;
  char arch[16];
  char name[256];
  struct device_limits limits;
  struct cubin_cache *cache;      /* NULL: no cache */
  struct gpu_candidate *cands[SESSION_MAX_CANDIDATES];
  int next_handle;
  CUdeviceptr flush;
  size_t flush_bytes;
};

/* Opens device index (see ofg_session_open). Returns 0 and a new session (free with
 * gpu_session_free), or -1 with err filled. */
int gpu_session_open(int index, const char *cache_dir, struct gpu_session **ret_session,
                     char *err, size_t errlen);
/* Frees every candidate and the flush buffer, releases the primary context, closes the
 * cache and the driver; accepts NULL. */
void gpu_session_free(struct gpu_session *s);
/* Makes the session's context current on the calling thread (ctypes may call from any
 * thread). Returns the CUresult. */
CUresult gpu_session_make_current(struct gpu_session *s);
/* New reference to the device-info object (docs/architecture.md, "Evaluator protocol");
 * NULL when out of memory. */
json_t *gpu_session_device_info(struct gpu_session *s);

/* Takes over c and gives it a handle (> 0); returns the handle, or -1 when the table is
 * full (c is then still the caller's). */
int gpu_session_add(struct gpu_session *s, struct gpu_candidate *c);
/* Returns the candidate of handle (borrowed) or NULL. */
struct gpu_candidate *gpu_session_find(struct gpu_session *s, int handle);
/* Frees the candidate of handle, if any. */
void gpu_session_remove(struct gpu_session *s, int handle);
/* Frees c (its launch first, which needs the session's context current); accepts NULL. */
void gpu_candidate_free(struct gpu_candidate *c);

/* Returns, in *ret_ptr, a device buffer of at least bytes for L2 flushes, (re)allocating
 * it when needed. Returns 0, or -1 with f set. */
int gpu_session_flush_buffer(struct gpu_session *s, size_t bytes, CUdeviceptr *ret_ptr,
                             struct gpu_failure *f);

#endif
