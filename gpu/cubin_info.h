/* What a cubin says about itself: its kernels (registers, parameters, launch bounds)
 * and its module globals, read from the ELF without a GPU. */
#ifndef OPFORGE_GPU_CUBIN_INFO_H
#define OPFORGE_GPU_CUBIN_INFO_H

#include <stddef.h>
#include <stdint.h>

#define CUBIN_MAX_PARAMS 64

struct cubin_kernel {
  char *name;
  int registers;            /* per thread; -1 when the cubin does not say */
  int n_params;             /* -1 when the cubin does not say */
  uint16_t param_size[CUBIN_MAX_PARAMS]; /* bytes of each parameter, by ordinal */
  unsigned max_threads[3];  /* __launch_bounds__ / reqntid; all 0 when none */
  /* From the ptxas -v log (nvrtc_compile fills them); -1 when unknown. */
  long static_shared;
  long spill_stores;
  long spill_loads;
  long stack_frame;
};

/* A __device__ variable of the module: reset to its initial bytes before every run so
 * that no state survives from one run to the next. */
struct cubin_global {
  char *name;
  uint64_t size;
  uint8_t *init;            /* size bytes of initial value; NULL means all zero */
};

struct cubin_info {
  struct cubin_kernel *kernels;
  size_t n_kernels;
  struct cubin_global *globals;
  size_t n_globals;
};

/* Parses the ELF image (len bytes; the caller keeps ownership) into a new cubin_info
 * that the caller frees with cubin_info_free. Returns 0, or -1 with err filled when the
 * image is not a well-formed 64-bit little-endian cubin. */
int cubin_info_parse(const void *image, size_t len, struct cubin_info **ret_info,
                     char *err, size_t errlen);
/* Frees info and every name and initial value in it; accepts NULL. */
void cubin_info_free(struct cubin_info *info);
/* Returns the kernel named name, or NULL; the pointer lives as long as info. */
const struct cubin_kernel *cubin_info_find(const struct cubin_info *info,
                                           const char *name);
/* The same, writable, for filling in statistics from the ptxas log. */
struct cubin_kernel *cubin_info_find_mut(struct cubin_info *info, const char *name);

#endif
