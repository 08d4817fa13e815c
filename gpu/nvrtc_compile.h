/* NVRTC compile of a candidate: option allow-list, cubin cache, log, signature, and the
 * registers / spills / cubin size of the result. Needs no GPU. */
#ifndef OPFORGE_GPU_NVRTC_COMPILE_H
#define OPFORGE_GPU_NVRTC_COMPILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpu/cubin_cache.h"
#include "gpu/cubin_info.h"
#include "gpu/failure.h"

#define NVRTC_MAX_SOURCE (1u << 20)   /* bytes of candidate source */
#define NVRTC_MAX_OPTIONS 32
#define NVRTC_MAX_OPTION_LEN 160
#define NVRTC_LOG_CAP (64u * 1024u)   /* bytes of log returned */

/* The task's precision; it decides which options are allowed. */
enum gpu_precision { GPU_PREC_FP32, GPU_PREC_TF32, GPU_PREC_BF16 };

/* Parses "fp32" | "tf32" | "bf16". Returns 0 and sets *ret_prec, or -1. */
int gpu_precision_parse(const char *s, enum gpu_precision *ret_prec);

/* Writes the NVRTC architecture for compute capability major.minor into ret
 * ("sm_90a" for 9.0: the "a" targets allow wgmma and setmaxnreg; "sm_86" below 9.0). */
void nvrtc_arch_for_cc(int major, int minor, char *ret, size_t retlen);
/* True when arch is "sm_<2-3 digits>" with an optional "a" or "f" suffix. */
bool nvrtc_arch_valid(const char *arch);

/* Checks the candidate's options against the allow-list:
 *   -D<NAME> or -D<NAME>=<value>  NAME [A-Za-z_][A-Za-z0-9_]* (not reserved: no leading
 *                                 "__" or "_<upper>"), value [A-Za-z0-9_.+-]*, 64 max each
 *   -maxrregcount=N / --maxrregcount=N   16 <= N <= 255, at most once
 *   --use_fast_math / -use_fast_math     only when precision is not fp32
 * On success returns 0 and, when ret_norm is not NULL, writes the normalized spellings
 * (pointers to static strings or into opts) to ret_norm[0..n-1]. On the first violation
 * returns -1 with f set to compile/option_not_allowed naming the option. */
int nvrtc_check_options(const char *const *opts, size_t n, enum gpu_precision prec,
                        const char **ret_norm, struct gpu_failure *f);

struct compile_request {
  const char *source;
  const char *const *options;
  size_t n_options;
  const char *arch;
  enum gpu_precision precision;
  struct cubin_cache *cache;   /* borrowed; NULL: no caching */
};

struct compile_result {
  bool ok;
  double ms;
  char *log;                   /* capped at NVRTC_LOG_CAP, valid UTF-8; never NULL */
  const char *cache;           /* "hit" | "miss" | "off" (static strings) */
  void *cubin;                 /* NULL unless ok */
  size_t cubin_bytes;
  struct cubin_info *info;     /* NULL unless ok; per-kernel stats */
  int registers;               /* max over kernels; -1 when unknown */
  long spills;                 /* spill store + load bytes over all functions */
  struct gpu_failure failure;  /* set unless ok; class is the signature */
};

/* Compiles req->source (borrowed) into ret, which the caller clears with
 * compile_result_clear. Always fills ret (ok or a failure); returns 0, or -1 only when
 * out of memory (then ret holds nothing to free). */
int nvrtc_compile(const struct compile_request *req, struct compile_result *ret);
/* Frees what ret owns and zeroes it; accepts a zeroed result. */
void compile_result_clear(struct compile_result *r);
/* JSON of the compile object: {"ok","ms","log","signature","registers",
 * "spills","cubin_bytes","cache","kernels":[...]}; the caller owns the reference. */
json_t *compile_result_to_json(const struct compile_result *r);

/* Reads per-function stats from a ptxas -v log into info's kernels (spills, stack,
 * static shared) and returns the total spill bytes over every function. */
long nvrtc_apply_ptxas_log(const char *log, struct cubin_info *info);

#endif
