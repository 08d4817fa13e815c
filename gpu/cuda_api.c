/* Driver API table: dlopen + cuGetProcAddress, so that nothing links libcuda. */
#include "gpu/cuda_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

static int resolve(struct cuda_api *api, get_proc_fn get_proc, const char *name,
                   void **slot, char *err, size_t errlen) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult rc = get_proc(name, slot, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (rc != CUDA_SUCCESS || !*slot || status != CU_GET_PROC_ADDRESS_SUCCESS) {
    snprintf(err, errlen, "the NVIDIA driver lacks %s for CUDA %d (driver too old?)", name,
             CUDA_VERSION);
    return -1;
  }
  (void)api;
  return 0;
}

struct cuda_api *cuda_api_open(char *err, size_t errlen) {
  const char *path = getenv("OPFORGE_LIBCUDA");
  if (!path || !*path)
    path = "libcuda.so.1";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(err, errlen, "%s not found: no NVIDIA driver on this machine (%s)", path,
             dlerror());
    return NULL;
  }
  get_proc_fn get_proc = NULL;
  /* POSIX's way to store dlsym's object pointer into a function pointer. */
  void *sym = dlsym(h, "cuGetProcAddress_v2");
  memcpy(&get_proc, &sym, sizeof get_proc);
  if (!get_proc) {
    snprintf(err, errlen, "%s has no cuGetProcAddress_v2: driver older than CUDA 12", path);
    dlclose(h);
    return NULL;
  }
  struct cuda_api *api = calloc(1, sizeof *api);
  if (!api) {
    snprintf(err, errlen, "out of memory");
    dlclose(h);
    return NULL;
  }
  api->handle = h;
#define CUDA_API_RESOLVE(sym, member)                                                  \
  if (resolve(api, get_proc, #sym, (void **)&api->member, err, errlen) < 0) {          \
    cuda_api_free(api);                                                                \
    return NULL;                                                                       \
  }
  CUDA_API_FUNCTIONS(CUDA_API_RESOLVE)
#undef CUDA_API_RESOLVE
  return api;
}

void cuda_api_free(struct cuda_api *api) {
  if (!api)
    return;
  if (api->handle)
    dlclose(api->handle);
  free(api);
}

const char *cuda_api_error_name(const struct cuda_api *api, CUresult rc) {
  static _Thread_local char unknown[32];
  const char *name = NULL;
  if (api && api->get_error_name && api->get_error_name(rc, &name) == CUDA_SUCCESS && name)
    return name;
  snprintf(unknown, sizeof unknown, "CUDA_ERROR_%d", (int)rc);
  return unknown;
}

int cuda_api_error_is_sticky(CUresult rc) {
  switch (rc) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_CONTEXT_IS_DESTROYED:
  case CUDA_ERROR_UNKNOWN:
    return 1;
  default:
    return 0;
  }
}
