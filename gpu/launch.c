/* Plan execution with the Driver API. Kept small: everything checkable without a GPU
 * was checked by plan.c before this runs. */
#include "gpu/launch.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SHARED_LIMIT (48 * 1024)

struct launch_global {
  CUdeviceptr ptr;
  const struct cubin_global *g;  /* borrowed from the cubin_info */
  CUdeviceptr init_dev;          /* owned: g->init on the device (0 when g->init is NULL) */
};

struct gpu_launch {
  const struct cuda_api *api;
  const struct gpu_plan *plan;
  const struct plan_tensors *tensors;
  CUmodule module;
  CUfunction *funcs;             /* one per launch */
  CUdeviceptr *buffers;          /* one per plan buffer */
  struct launch_global *globals;
  size_t n_globals;
};

void gpu_launch_set_failure(const struct cuda_api *api, CUresult rc, const char *what,
                            struct gpu_failure *f) {
  const char *desc = NULL;
  if (!api->get_error_string || api->get_error_string(rc, &desc) != CUDA_SUCCESS || !desc)
    desc = "no description";
  const char *name = cuda_api_error_name(api, rc);
  char cls[96];
  snprintf(cls, sizeof cls, "cuda/%s", name);
  gpu_failure_set(f, "launch", cls, "%s: %s: %s", what, name, desc);
  f->sticky = cuda_api_error_is_sticky(rc);
}

/* load/no_kernel_image for a cubin of the wrong architecture, else load/<short name>. */
static void set_load_failure(const struct cuda_api *api, CUresult rc, struct gpu_failure *f) {
  char cls[96] = "load/no_kernel_image";
  const char *name = cuda_api_error_name(api, rc);
  if (rc != CUDA_ERROR_NO_BINARY_FOR_GPU) {
    const char *s = strncmp(name, "CUDA_ERROR_", 11) == 0 ? name + 11 : name;
    size_t n = (size_t)snprintf(cls, sizeof cls, "load/%s", s);
    for (size_t i = 5; i < n && i < sizeof cls; i++)
      cls[i] = (char)tolower((unsigned char)cls[i]);
  }
  gpu_failure_set(f, "load", cls, "cuModuleLoadData: %s", name);
  f->sticky = cuda_api_error_is_sticky(rc);
}

/* Largest dynamic shared memory any launch of kernel name asks for. */
static unsigned max_shared_for(const struct gpu_plan *plan, const char *name) {
  unsigned m = 0;
  for (size_t i = 0; i < plan->n_launches; i++)
    if (strcmp(plan->launches[i].kernel, name) == 0 && plan->launches[i].shared_bytes > m)
      m = plan->launches[i].shared_bytes;
  return m;
}

/* Resolves launch i's function and sets its shared-memory limits. */
static int prepare_function(struct gpu_launch *l, size_t i, const struct device_limits *limits,
                            struct gpu_failure *f) {
  const struct cuda_api *api = l->api;
  const struct plan_launch *pl = &l->plan->launches[i];
  char what[192];
  CUresult rc = api->module_get_function(&l->funcs[i], l->module, pl->kernel);
  if (rc != CUDA_SUCCESS) {
    gpu_failure_set(f, "load", "load/function_not_found", "launch %zu: kernel '%s': %s", i,
                    pl->kernel, cuda_api_error_name(api, rc));
    f->sticky = cuda_api_error_is_sticky(rc);
    return -1;
  }
  int static_shared = 0;
  if (api->func_get_attribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                              l->funcs[i]) == CUDA_SUCCESS &&
      gpu_plan_check_shared(l->plan, i, static_shared, limits, f) < 0)
    return -1;
  unsigned need = max_shared_for(l->plan, pl->kernel);
  if (need > DEFAULT_SHARED_LIMIT) {
    rc = api->func_set_attribute(l->funcs[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 (int)need);
    if (rc != CUDA_SUCCESS) {
      snprintf(what, sizeof what, "launch %zu: raising kernel '%s' to %u bytes of dynamic "
               "shared memory", i, pl->kernel, need);
      gpu_launch_set_failure(api, rc, what, f);
      snprintf(f->cls, sizeof f->cls, "plan/shared_too_large");
      return -1;
    }
  }
  return 0;
}

/* Copies a global's initial bytes to the device once, so that
 * gpu_launch_reset_on_device restores it with a device-to-device copy: a copy from
 * pageable host memory cannot be captured into a CUDA graph. */
static int prepare_global_init(struct gpu_launch *l, struct launch_global *lg,
                               struct gpu_failure *f) {
  char what[192];
  const struct cubin_global *g = lg->g;
  CUdeviceptr dev = 0;
  CUresult rc = l->api->mem_alloc(&dev, g->size);
  if (rc == CUDA_SUCCESS) {
    lg->init_dev = dev; /* freed by gpu_launch_free, also when the copy fails */
    rc = l->api->memcpy_htod(dev, g->init, g->size);
  }
  if (rc != CUDA_SUCCESS) {
    snprintf(what, sizeof what, "initial value of module global '%.64s' (%llu bytes)",
             g->name, (unsigned long long)g->size);
    gpu_launch_set_failure(l->api, rc, what, f);
    return -1;
  }
  return 0;
}

/* Finds each module global's device address; ones the driver cannot name are skipped
 * (their state could then survive between runs, which the evaluator's re-check after
 * timing still catches). Returns 0, or -1 with f set. */
static int prepare_globals(struct gpu_launch *l, const struct cubin_info *info,
                           struct gpu_failure *f) {
  l->globals = calloc(info->n_globals + 1, sizeof *l->globals);
  if (!l->globals) {
    gpu_failure_set(f, "load", "load/out_of_memory", "out of host memory");
    return -1;
  }
  for (size_t i = 0; i < info->n_globals; i++) {
    CUdeviceptr ptr = 0;
    size_t size = 0;
    if (l->api->module_get_global(&ptr, &size, l->module, info->globals[i].name) !=
            CUDA_SUCCESS ||
        !ptr || size != info->globals[i].size)
      continue;
    struct launch_global *lg = &l->globals[l->n_globals++];
    *lg = (struct launch_global){ptr, &info->globals[i], 0};
    if (lg->g->init && lg->g->size > 0 && prepare_global_init(l, lg, f) < 0)
      return -1;
  }
  return 0;
}

static int prepare_buffers(struct gpu_launch *l, struct gpu_failure *f) {
  for (size_t i = 0; i < l->plan->n_buffers; i++) {
    CUresult rc = l->api->mem_alloc(&l->buffers[i], l->plan->buffers[i].bytes);
    if (rc != CUDA_SUCCESS) {
      char what[160];
      l->buffers[i] = 0;
      snprintf(what, sizeof what, "buffer %zu ('%s', %llu bytes)", i, l->plan->buffers[i].name,
               (unsigned long long)l->plan->buffers[i].bytes);
      gpu_launch_set_failure(l->api, rc, what, f);
      return -1;
    }
  }
  return 0;
}

int gpu_launch_prepare(const struct cuda_api *api, const void *cubin,
                       const struct gpu_plan *plan, const struct plan_tensors *tensors,
                       const struct cubin_info *info,
                       const struct device_limits *limits, struct gpu_launch **ret_launch,
                       struct gpu_failure *f) {
  struct gpu_launch *l = calloc(1, sizeof *l);
  if (l) {
    l->funcs = calloc(plan->n_launches + 1, sizeof *l->funcs);
    l->buffers = calloc(plan->n_buffers + 1, sizeof *l->buffers);
  }
  if (!l || !l->funcs || !l->buffers) {
    gpu_launch_free(l);
    gpu_failure_set(f, "load", "load/out_of_memory", "out of host memory");
    return -1;
  }
  l->api = api;
  l->plan = plan;
  l->tensors = tensors;
  CUresult rc = api->module_load_data(&l->module, cubin);
  if (rc != CUDA_SUCCESS) {
    l->module = NULL;
    set_load_failure(api, rc, f);
    goto fail;
  }
  for (size_t i = 0; i < plan->n_launches; i++)
    if (prepare_function(l, i, limits, f) < 0)
      goto fail;
  if (prepare_globals(l, info, f) < 0)
    goto fail;
  if (prepare_buffers(l, f) < 0)
    goto fail;
  *ret_launch = l;
  return 0;
fail:
  gpu_launch_free(l);
  return -1;
}

void gpu_launch_free(struct gpu_launch *l) {
  if (!l)
    return;
  for (size_t i = 0; l->buffers && l->plan && i < l->plan->n_buffers; i++)
    if (l->buffers[i])
      l->api->mem_free(l->buffers[i]);
  for (size_t i = 0; l->globals && i < l->n_globals; i++)
    if (l->globals[i].init_dev)
      l->api->mem_free(l->globals[i].init_dev);
  if (l->module)
    l->api->module_unload(l->module);
  free(l->funcs);
  free(l->buffers);
  free(l->globals);
  free(l);
}

size_t gpu_launch_globals_resolved(const struct gpu_launch *l) {
  return l->n_globals;
}

CUresult gpu_launch_reset(struct gpu_launch *l, CUstream stream) {
  CUresult rc = CUDA_SUCCESS;
  for (size_t i = 0; rc == CUDA_SUCCESS && i < l->plan->n_buffers; i++)
    rc = l->api->memset_d8_async(l->buffers[i], 0, l->plan->buffers[i].bytes, stream);
  for (size_t i = 0; rc == CUDA_SUCCESS && i < l->n_globals; i++) {
    const struct cubin_global *g = l->globals[i].g;
    rc = g->init ? l->api->memcpy_htod_async(l->globals[i].ptr, g->init, g->size, stream)
                 : l->api->memset_d8_async(l->globals[i].ptr, 0, g->size, stream);
  }
  return rc;
}

CUresult gpu_launch_reset_on_device(struct gpu_launch *l, CUstream stream) {
  CUresult rc = CUDA_SUCCESS;
  for (size_t i = 0; rc == CUDA_SUCCESS && i < l->plan->n_buffers; i++)
    rc = l->api->memset_d8_async(l->buffers[i], 0, l->plan->buffers[i].bytes, stream);
  for (size_t i = 0; rc == CUDA_SUCCESS && i < l->n_globals; i++) {
    const struct launch_global *lg = &l->globals[i];
    rc = lg->init_dev ? l->api->memcpy_dtod_async(lg->ptr, lg->init_dev, lg->g->size, stream)
                      : l->api->memset_d8_async(lg->ptr, 0, lg->g->size, stream);
  }
  return rc;
}

/* True when output o's bytes overlap those of any non-output tensor. */
static bool overlaps_input(const struct gpu_launch *l, const CUdeviceptr *ptrs, size_t o) {
  CUdeviceptr lo = ptrs[o], hi = ptrs[o] + l->tensors->items[o].bytes;
  for (size_t t = 0; t < l->tensors->n; t++) {
    CUdeviceptr tlo = ptrs[t], thi = ptrs[t] + l->tensors->items[t].bytes;
    if (!l->tensors->items[t].is_output && tlo && tlo < hi && lo < thi)
      return true;
  }
  return false;
}

CUresult gpu_launch_poison_outputs(struct gpu_launch *l, const CUdeviceptr *tensor_ptrs,
                                   CUstream stream) {
  CUresult rc = CUDA_SUCCESS;
  for (size_t t = 0; rc == CUDA_SUCCESS && t < l->tensors->n; t++) {
    const struct plan_tensor *pt = &l->tensors->items[t];
    if (pt->is_output && pt->bytes > 0 && tensor_ptrs[t] && !overlaps_input(l, tensor_ptrs, t))
      rc = l->api->memset_d8_async(tensor_ptrs[t], 0xff, pt->bytes, stream);
  }
  return rc;
}

CUresult gpu_launch_enqueue_one(struct gpu_launch *l, size_t i, const CUdeviceptr *tensor_ptrs,
                                CUstream stream) {
  const struct plan_launch *pl = &l->plan->launches[i];
  union {
    CUdeviceptr ptr;
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
  } values[PLAN_MAX_ARGS];
  void *params[PLAN_MAX_ARGS + 1];
  for (size_t a = 0; a < pl->n_args; a++) {
    const struct plan_arg *arg = &pl->args[a];
    switch (arg->kind) {
    case PLAN_ARG_TENSOR: values[a].ptr = tensor_ptrs[arg->ref]; break;
    case PLAN_ARG_BUFFER: values[a].ptr = l->buffers[arg->ref]; break;
    case PLAN_ARG_I32: values[a].i32 = arg->v.i32; break;
    case PLAN_ARG_I64: values[a].i64 = arg->v.i64; break;
    case PLAN_ARG_F32: values[a].f32 = arg->v.f32; break;
    case PLAN_ARG_F64: values[a].f64 = arg->v.f64; break;
    }
    params[a] = &values[a];
  }
  params[pl->n_args] = NULL;
  return l->api->launch_kernel(l->funcs[i], pl->grid[0], pl->grid[1], pl->grid[2],
                               pl->block[0], pl->block[1], pl->block[2], pl->shared_bytes,
                               stream, params, NULL);
}

CUresult gpu_launch_enqueue_all(struct gpu_launch *l, const CUdeviceptr *tensor_ptrs,
                                CUstream stream, size_t *ret_failed) {
  for (size_t i = 0; i < l->plan->n_launches; i++) {
    CUresult rc = gpu_launch_enqueue_one(l, i, tensor_ptrs, stream);
    if (rc != CUDA_SUCCESS) {
      *ret_failed = i;
      return rc;
    }
  }
  return CUDA_SUCCESS;
}

int gpu_launch_run(struct gpu_launch *l, const CUdeviceptr *tensor_ptrs, CUstream stream,
                   bool reset_state, struct gpu_failure *f) {
  char what[192];
  CUresult rc = gpu_launch_poison_outputs(l, tensor_ptrs, stream);
  if (rc == CUDA_SUCCESS && reset_state)
    rc = gpu_launch_reset(l, stream);
  if (rc == CUDA_SUCCESS)
    rc = l->api->stream_synchronize(stream);
  if (rc != CUDA_SUCCESS) {
    gpu_launch_set_failure(l->api, rc, "poisoning outputs, resetting buffers and globals", f);
    return -1;
  }
  for (size_t i = 0; i < l->plan->n_launches; i++) {
    rc = gpu_launch_enqueue_one(l, i, tensor_ptrs, stream);
    if (rc == CUDA_SUCCESS)
      rc = l->api->stream_synchronize(stream);
    if (rc != CUDA_SUCCESS) {
      snprintf(what, sizeof what, "launch %zu (kernel '%s')", i, l->plan->launches[i].kernel);
      gpu_launch_set_failure(l->api, rc, what, f);
      return -1;
    }
  }
  return 0;
}
