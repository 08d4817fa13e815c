/* Executes a validated plan on the GPU: module load, per-candidate scratch buffers,
 * cuLaunchKernel in plan order on one stream, CUresult -> failure classification. */
#ifndef OPFORGE_GPU_LAUNCH_H
#define OPFORGE_GPU_LAUNCH_H

#include <stdbool.h>

#include "gpu/cubin_info.h"
#include "gpu/cuda_api.h"
#include "gpu/failure.h"
#include "gpu/plan.h"

struct gpu_launch;

/* Loads cubin into the current context (cuModuleLoadData), resolves every launch's
 * function, raises the dynamic shared-memory limit where a launch needs more than 48 KiB,
 * checks static + dynamic shared memory, resolves module globals (copying the initial
 * values of those that have one to the device) and allocates the plan's buffers. api, plan, tensors and info are borrowed and must outlive the result;
 * cubin is only read during the call. Returns 0 and a new gpu_launch (free with gpu_launch_free),
 * or -1 with f set (stage load or launch; f->sticky tells whether the context is now
 * unusable). */
int gpu_launch_prepare(const struct cuda_api *api, const void *cubin,
                       const struct gpu_plan *plan, const struct plan_tensors *tensors,
                       const struct cubin_info *info,
                       const struct device_limits *limits, struct gpu_launch **ret_launch,
                       struct gpu_failure *f);
/* Unloads the module and frees the buffers; accepts NULL. The context must be current. */
void gpu_launch_free(struct gpu_launch *l);

/* How many module globals prepare could resolve, and will reset before every run. */
size_t gpu_launch_globals_resolved(const struct gpu_launch *l);

/* Enqueues, on stream, the zeroing of every scratch buffer and the reset of every
 * module global to its initial value, so no state survives from one run to the next. */
CUresult gpu_launch_reset(struct gpu_launch *l, CUstream stream);
/* The same reset from device memory only (memsets, and device-to-device copies of the
 * globals' initial values made at prepare), so that it can be captured into a CUDA
 * graph: no host memory is read when the work runs. */
CUresult gpu_launch_reset_on_device(struct gpu_launch *l, CUstream stream);
/* Enqueues, on stream, filling every output tensor with 0xff bytes (NaN for float
 * types), so that an output the plan does not write, or a kernel that skips work when the
 * output already holds the answer, cannot pass on a previous run's result. Outputs that
 * overlap an input or parameter tensor are left alone. */
CUresult gpu_launch_poison_outputs(struct gpu_launch *l, const CUdeviceptr *tensor_ptrs,
                                   CUstream stream);
/* Enqueues launch i with tensor_ptrs (indexed like the plan's plan_tensors). */
CUresult gpu_launch_enqueue_one(struct gpu_launch *l, size_t i, const CUdeviceptr *tensor_ptrs,
                                CUstream stream);
/* Enqueues every launch in order; on an error sets *ret_failed to its index. */
CUresult gpu_launch_enqueue_all(struct gpu_launch *l, const CUdeviceptr *tensor_ptrs,
                                CUstream stream, size_t *ret_failed);

/* One checked run: outputs poisoned, buffers and globals reset (unless reset_state is
 * false), then each launch followed by a stream synchronize (so a fault
 * is attributed to its launch). Returns 0, or -1 with f set (stage launch, class
 * cuda/<CUresult name>, f->sticky). */
int gpu_launch_run(struct gpu_launch *l, const CUdeviceptr *tensor_ptrs, CUstream stream,
                   bool reset_state, struct gpu_failure *f);

/* Fills f for a CUresult: stage launch, class "cuda/<name>", message "<what>: <name>:
 * <description>", and f->sticky from cuda_api_error_is_sticky. */
void gpu_launch_set_failure(const struct cuda_api *api, CUresult rc, const char *what,
                            struct gpu_failure *f);

#endif
