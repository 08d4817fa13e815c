/* The CUDA Driver API, opened at run time with dlopen("libcuda.so.1"): the library
 * never links libcuda, so it loads (and compiles) on machines without a driver. */
#ifndef OPFORGE_GPU_CUDA_API_H
#define OPFORGE_GPU_CUDA_API_H

#include <cuda.h>
#include <stddef.h>

/* Each entry: the Driver API name (as in cuda.h, which may map it to a _v2 symbol) and
 * the table member. Types come from cuda.h's own prototypes. */
#define CUDA_API_FUNCTIONS(X)                                                          \
  X(cuInit, init)                                                                      \
  X(cuDriverGetVersion, driver_get_version)                                            \
  X(cuGetErrorName, get_error_name)                                                    \
  X(cuGetErrorString, get_error_string)                                                \
  X(cuDeviceGet, device_get)                                                           \
  X(cuDeviceGetCount, device_get_count)                                                \
  X(cuDeviceGetName, device_get_name)                                                  \
  X(cuDeviceGetAttribute, device_get_attribute)                                        \
  X(cuDeviceTotalMem, device_total_mem)                                                \
  X(cuDevicePrimaryCtxRetain, primary_ctx_retain)                                      \
  X(cuDevicePrimaryCtxRelease, primary_ctx_release)                                    \
  X(cuCtxSetCurrent, ctx_set_current)                                                  \
  X(cuModuleLoadData, module_load_data)                                                \
  X(cuModuleUnload, module_unload)                                                     \
  X(cuModuleGetFunction, module_get_function)                                          \
  X(cuModuleGetGlobal, module_get_global)                                              \
  X(cuFuncGetAttribute, func_get_attribute)                                            \
  X(cuFuncSetAttribute, func_set_attribute)                                            \
  X(cuLaunchKernel, launch_kernel)                                                     \
  X(cuMemAlloc, mem_alloc)                                                             \
  X(cuMemFree, mem_free)                                                               \
  X(cuMemsetD8Async, memset_d8_async)                                                  \
  X(cuMemcpyHtoD, memcpy_htod)                                                         \
  X(cuMemcpyHtoDAsync, memcpy_htod_async)                                              \
  X(cuMemcpyDtoDAsync, memcpy_dtod_async)                                              \
  X(cuStreamSynchronize, stream_synchronize)                                           \
  X(cuEventCreate, event_create)                                                       \
  X(cuEventDestroy, event_destroy)                                                     \
  X(cuEventRecord, event_record)                                                       \
  X(cuEventSynchronize, event_synchronize)                                             \
  X(cuEventElapsedTime, event_elapsed_time)

#define CUDA_API_MEMBER(sym, member) __typeof__(sym) *member;

struct cuda_api {
  void *handle;
  CUDA_API_FUNCTIONS(CUDA_API_MEMBER)
};

/* Opens libcuda.so.1 (or $OPFORGE_LIBCUDA) and resolves every function, through
 * cuGetProcAddress for the versions matching this cuda.h. Returns a new table the
 * caller frees with cuda_api_free, or NULL with err filled (e.g. "libcuda.so.1 not
 * found: no NVIDIA driver on this machine"). Does not call cuInit. */
struct cuda_api *cuda_api_open(char *err, size_t errlen);
/* dlcloses the driver and frees the table; accepts NULL. */
void cuda_api_free(struct cuda_api *api);

/* "CUDA_ERROR_ILLEGAL_ADDRESS" for rc (static storage; "CUDA_ERROR_<n>" if unknown). */
const char *cuda_api_error_name(const struct cuda_api *api, CUresult rc);

/* True for errors that leave the context unusable (illegal address, misaligned
 * address, launch failure, illegal instruction, ...): the process must exit. */
int cuda_api_error_is_sticky(CUresult rc);

#endif
