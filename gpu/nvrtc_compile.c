/* NVRTC compile of one candidate: allow-listed options, cubin cache, capped log,
 * normalized signature, and per-kernel statistics from the cubin and the ptxas log. */
#include "gpu/nvrtc_compile.h"

#include <ctype.h>
#include <errno.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gpu/compile_signature.h"
#include "gpu/gpu_config.h"
#include "base/utf8.h"

#define PROGRAM_NAME "cand.cu"
#define MAX_FIXED_OPTIONS 8

int gpu_precision_parse(const char *s, enum gpu_precision *ret_prec) {
  static const struct {
    const char *name;
    enum gpu_precision prec;
  } names[] = {{"fp32", GPU_PREC_FP32}, {"tf32", GPU_PREC_TF32}, {"bf16", GPU_PREC_BF16}};
  for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++) {
    if (strcmp(s, names[i].name) == 0) {
      *ret_prec = names[i].prec;
      return 0;
    }
  }
  return -1;
}

void nvrtc_arch_for_cc(int major, int minor, char *ret, size_t retlen) {
  snprintf(ret, retlen, "sm_%d%d%s", major, minor, major >= 9 ? "a" : "");
}

bool nvrtc_arch_valid(const char *arch) {
  if (!arch || strncmp(arch, "sm_", 3) != 0)
    return false;
  size_t digits = strspn(arch + 3, "0123456789");
  const char *rest = arch + 3 + digits;
  return digits >= 2 && digits <= 3 &&
         (*rest == '\0' || ((*rest == 'a' || *rest == 'f') && rest[1] == '\0'));
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* -D<NAME>[=<value>] with the charsets documented in the header. */
static bool define_ok(const char *opt) {
  const char *name = opt + 2, *eq = strchr(name, '=');
  size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
  if (nlen == 0 || nlen > 64 || isdigit((unsigned char)name[0]) ||
      (name[0] == '_' && (name[1] == '_' || isupper((unsigned char)name[1]))))
    return false;
  for (size_t i = 0; i < nlen; i++)
    if (!isalnum((unsigned char)name[i]) && name[i] != '_')
      return false;
  if (!eq)
    return true;
  const char *value = eq + 1;
  size_t vlen = strlen(value);
  return vlen <= 64 &&
         strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-") ==
             vlen;
}

/* Returns N for "-maxrregcount=N" / "--maxrregcount=N" with 16 <= N <= 255, else -1;
 * 0 when opt is not a maxrregcount option at all. */
static long maxrreg_value(const char *opt) {
  const char *v = NULL;
  if (strncmp(opt, "-maxrregcount=", 14) == 0)
    v = opt + 14;
  else if (strncmp(opt, "--maxrregcount=", 15) == 0)
    v = opt + 15;
  if (!v)
    return 0;
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || end == v || *end || !isdigit((unsigned char)*v) || n < 16 || n > 255)
    return -1;
  return n;
}

int nvrtc_check_options(const char *const *opts, size_t n, enum gpu_precision prec,
                        const char **ret_norm, struct gpu_failure *f) {
  static const char fast_math[] = "--use_fast_math";
  bool seen_maxrreg = false;
  if (n > NVRTC_MAX_OPTIONS) {
    gpu_failure_set(f, "compile", "compile/option_not_allowed",
                    "%zu options given; at most %d are allowed", n, NVRTC_MAX_OPTIONS);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    const char *o = opts[i];
    const char *why = NULL;
    if (!o || strlen(o) > NVRTC_MAX_OPTION_LEN) {
      why = "too long";
    } else if (strncmp(o, "-D", 2) == 0) {
      why = define_ok(o) ? NULL : "macro name or value outside the allowed characters";
    } else if (maxrreg_value(o) != 0) {
      why = maxrreg_value(o) < 0 ? "maxrregcount must be an integer in 16..255"
            : seen_maxrreg       ? "maxrregcount given twice"
                                 : NULL;
      seen_maxrreg = true;
    } else if (strcmp(o, fast_math) == 0 || strcmp(o, fast_math + 1) == 0) {
      why = prec == GPU_PREC_FP32 ? "--use_fast_math is not allowed for fp32 tasks" : NULL;
    } else {
      why = "allowed: -D<NAME>[=value], -maxrregcount=N, --use_fast_math (tf32/bf16)";
    }
    if (why) {
      char shown[NVRTC_MAX_OPTION_LEN + 1];
      snprintf(shown, sizeof shown, "%s", o ? o : "(null)");
      gpu_failure_set(f, "compile", "compile/option_not_allowed",
                      "option %zu not allowed: '%s' (%s)", i, shown, why);
      return -1;
    }
    if (ret_norm)
      ret_norm[i] = strcmp(o, fast_math + 1) == 0 ? fast_math : o;
  }
  return 0;
}

/* The include directory offered to candidates (cuda_fp16.h, cuda_bf16.h, mma.h):
 * $OPFORGE_CUDA_INCLUDE, else the toolkit's, and only if it exists. */
static const char *include_dir(void) {
  const char *env = getenv("OPFORGE_CUDA_INCLUDE");
  const char *dir = env && *env ? env : OFG_CUDA_INCLUDE_DIR;
  struct stat st;
  return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? dir : NULL;
}

/* Copies log into a new capped, valid UTF-8 string (never NULL unless out of memory). */
static char *cap_log(const char *log) {
  size_t len = log ? strlen(log) : 0;
  if (len <= NVRTC_LOG_CAP)
    return utf8_sanitize(log ? log : "", len);
  char note[64];
  int nn = snprintf(note, sizeof note, "\n[log truncated: %zu bytes in all]\n", len);
  size_t keep = utf8_cut(log, NVRTC_LOG_CAP - (size_t)nn);
  char *out = utf8_sanitize(log, keep);
  char *grown = out ? realloc(out, keep + (size_t)nn + 1) : NULL;
  if (!grown) {
    free(out);
    return NULL;
  }
  memcpy(grown + keep, note, (size_t)nn + 1);
  return grown;
}

/* One NVRTC run. Sets *ret_log (malloc'd, raw) always and *ret_cubin on success;
 * returns the nvrtcResult of the compile (or of the first call that failed). */
static nvrtcResult run_nvrtc(const char *source, const char *const *opts, size_t n,
                             char **ret_log, void **ret_cubin, size_t *ret_bytes) {
  nvrtcProgram prog;
  size_t log_size = 0, bytes = 0;
  *ret_log = NULL;
  nvrtcResult rc = nvrtcCreateProgram(&prog, source, PROGRAM_NAME, 0, NULL, NULL);
  if (rc != NVRTC_SUCCESS)
    return rc;
  nvrtcResult crc = nvrtcCompileProgram(prog, (int)n, opts);
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0 &&
      (*ret_log = malloc(log_size)) && nvrtcGetProgramLog(prog, *ret_log) != NVRTC_SUCCESS)
    (*ret_log)[0] = '\0';
  if (crc == NVRTC_SUCCESS) {
    void *cubin = NULL;
    crc = nvrtcGetCUBINSize(prog, &bytes);
    if (crc == NVRTC_SUCCESS && (bytes == 0 || !(cubin = malloc(bytes))))
      crc = NVRTC_ERROR_OUT_OF_MEMORY;
    if (crc == NVRTC_SUCCESS)
      crc = nvrtcGetCUBIN(prog, cubin);
    if (crc == NVRTC_SUCCESS) {
      *ret_cubin = cubin;
      *ret_bytes = bytes;
    } else {
      free(cubin);
    }
  }
  nvrtcDestroyProgram(&prog);
  return crc;
}

/* Number written just before needle in [line, end), or -1. */
static long number_before(const char *line, const char *end, const char *needle) {
  size_t nl = strlen(needle);
  for (const char *p = line; p + nl <= end; p++) {
    if (strncmp(p, needle, nl) != 0)
      continue;
    const char *q = p;
    while (q > line && q[-1] == ' ')
      q--;
    const char *digits_end = q;
    while (q > line && isdigit((unsigned char)q[-1]))
      q--;
    if (q == digits_end)
      return -1;
    return strtol(q, NULL, 10);
  }
  return -1;
}

/* Copies the text of [p, end) up to the first quote or blank into name. */
static void take_name(const char *p, const char *end, char *name, size_t len) {
  size_t n = 0;
  while (p < end && *p != '\'' && *p != ' ' && *p != '\r' && n + 1 < len)
    name[n++] = *p++;
  name[n] = '\0';
}

long nvrtc_apply_ptxas_log(const char *log, struct cubin_info *info) {
  char entry[256] = "", func[256] = "";
  long total = 0;
  for (const char *line = log; line && *line;) {
    const char *end = strchr(line, '\n');
    if (!end)
      end = line + strlen(line);
    const char *m;
    struct cubin_kernel *k;
    if ((m = memmem(line, (size_t)(end - line), "Compiling entry function '", 26))) {
      take_name(m + 26, end, entry, sizeof entry);
    } else if ((m = memmem(line, (size_t)(end - line), "Function properties for ", 24))) {
      take_name(m + 24, end, func, sizeof func);
    } else if (number_before(line, end, "bytes spill stores") >= 0) {
      long st = number_before(line, end, "bytes spill stores");
      long ld = number_before(line, end, "bytes spill loads");
      total += st + (ld > 0 ? ld : 0);
      if (info && (k = cubin_info_find_mut(info, func))) {
        k->spill_stores = st;
        k->spill_loads = ld;
        k->stack_frame = number_before(line, end, "bytes stack frame");
      }
    } else if (memmem(line, (size_t)(end - line), "Used ", 5) && info &&
               (k = cubin_info_find_mut(info, entry))) {
      long smem = number_before(line, end, "bytes smem");
      k->static_shared = smem < 0 ? 0 : smem;
    }
    line = *end ? end + 1 : end;
  }
  return total;
}

/* Fills the success half of ret from a cubin (taken over) and its log (borrowed). */
static int finish_ok(struct compile_result *ret, void *cubin, size_t bytes, const char *log) {
  char err[256];
  struct cubin_info *info = NULL;
  if (cubin_info_parse(cubin, bytes, &info, err, sizeof err) < 0) {
    free(cubin);
    gpu_failure_set(&ret->failure, "compile", "compile/bad_cubin",
                    "NVRTC produced an unreadable cubin: %s", err);
    return 0;
  }
  ret->spills = nvrtc_apply_ptxas_log(log, info);
  for (size_t i = 0; i < info->n_kernels; i++)
    if (info->kernels[i].registers > ret->registers)
      ret->registers = info->kernels[i].registers;
  ret->ok = true;
  ret->cubin = cubin;
  ret->cubin_bytes = bytes;
  ret->info = info;
  return 0;
}

/* Sets the failure of a compile that NVRTC rejected, from its log. */
static void finish_failed(struct compile_result *ret, nvrtcResult rc, const char *log) {
  char sig[96];
  size_t len = 0;
  const char *line = compile_first_error_line(log, &len);
  if (rc != NVRTC_ERROR_COMPILATION && !line) {
    char name[64];
    snprintf(name, sizeof name, "%s", nvrtcGetErrorString(rc));
    for (char *p = name; *p; p++)
      *p = (char)tolower((unsigned char)*p);
    gpu_failure_set(&ret->failure, "compile", "compile/nvrtc", "NVRTC failed: %s", name);
    return;
  }
  compile_signature(log, sig, sizeof sig);
  if (line)
    gpu_failure_set(&ret->failure, "compile", sig, "%.*s", (int)(len > 400 ? 400 : len), line);
  else
    gpu_failure_set(&ret->failure, "compile", sig, "compilation failed without an error line");
}

/* Builds the full option list: fixed flags first, then the candidate's. */
static size_t build_options(const struct compile_request *req, const char **norm,
                            char *arch_opt, size_t arch_len, char *inc_opt, size_t inc_len,
                            const char **out) {
  size_t n = 0;
  snprintf(arch_opt, arch_len, "--gpu-architecture=%s", req->arch);
  out[n++] = arch_opt;
  out[n++] = "-std=c++17";
  out[n++] = "-lineinfo";
  out[n++] = "--ptxas-options=-v";
  const char *inc = include_dir();
  if (inc && (size_t)snprintf(inc_opt, inc_len, "--include-path=%s", inc) < inc_len)
    out[n++] = inc_opt;
  for (size_t i = 0; i < req->n_options; i++)
    out[n++] = norm[i];
  return n;
}

/* Validates the request; returns false with ret->failure set when it is refused. */
static bool request_ok(const struct compile_request *req, const char **norm,
                       struct compile_result *ret) {
  size_t len = req->source ? strlen(req->source) : 0;
  if (len == 0)
    gpu_failure_set(&ret->failure, "compile", "compile/empty_source", "source is empty");
  else if (len > NVRTC_MAX_SOURCE)
    gpu_failure_set(&ret->failure, "compile", "compile/source_too_large",
                    "source is %zu bytes; the limit is %u", len, NVRTC_MAX_SOURCE);
  else if (!nvrtc_arch_valid(req->arch))
    gpu_failure_set(&ret->failure, "compile", "compile/bad_arch",
                    "architecture '%.32s' is not of the form sm_90a", req->arch ? req->arch : "");
  else
    nvrtc_check_options(req->options, req->n_options, req->precision, norm, &ret->failure);
  return !ret->failure.set;
}

/* The compile proper, after validation: cache lookup, NVRTC, cache store. Sets
 * *ret_log to the raw log (malloc'd). Returns -1 only when out of memory. */
static int compile_or_fetch(const struct compile_request *req, const char *const *opts,
                            size_t n, struct compile_result *ret, char **ret_log) {
  char key[SHA256_HEX_BYTES];
  void *cubin = NULL;
  size_t bytes = 0;
  if (req->cache) {
    /* The NVRTC version is part of what determines the cubin. */
    int major = 0, minor = 0;
    char ver[32];
    nvrtcVersion(&major, &minor);
    snprintf(ver, sizeof ver, "%s/nvrtc-%d.%d", req->arch, major, minor);
    cubin_cache_key(req->source, opts, n, ver, key);
    if (cubin_cache_get(req->cache, key, &cubin, &bytes, ret_log)) {
      ret->cache = "hit";
      return finish_ok(ret, cubin, bytes, *ret_log);
    }
    ret->cache = "miss";
  }
  nvrtcResult rc = run_nvrtc(req->source, opts, n, ret_log, &cubin, &bytes);
  if (rc != NVRTC_SUCCESS && !compile_first_error_line(*ret_log, &(size_t){0})) {
    /* ptxas -v hides ptxas's own error lines in NVRTC 13: ask again without it. */
    const char *quiet[MAX_FIXED_OPTIONS + NVRTC_MAX_OPTIONS];
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (strcmp(opts[i], "--ptxas-options=-v") != 0)
        quiet[m++] = opts[i];
    free(*ret_log);
    rc = run_nvrtc(req->source, quiet, m, ret_log, &cubin, &bytes);
  }
  if (!*ret_log && !(*ret_log = strdup("")))
    return -1;
  if (rc == NVRTC_ERROR_OUT_OF_MEMORY)
    return -1;
  if (rc != NVRTC_SUCCESS) {
    finish_failed(ret, rc, *ret_log);
    return 0;
  }
  if (req->cache) {
    /* Store the capped log: a hit must return exactly what the miss returned. */
    char *capped = cap_log(*ret_log);
    if (!capped) {
      free(cubin);
      return -1;
    }
    free(*ret_log);
    *ret_log = capped;
    (void)cubin_cache_put(req->cache, key, cubin, bytes, capped);
  }
  return finish_ok(ret, cubin, bytes, *ret_log);
}

int nvrtc_compile(const struct compile_request *req, struct compile_result *ret) {
  const char *norm[NVRTC_MAX_OPTIONS];
  const char *opts[MAX_FIXED_OPTIONS + NVRTC_MAX_OPTIONS];
  char arch_opt[64], inc_opt[4200];
  char *raw_log = NULL;
  double t0 = now_ms();
  memset(ret, 0, sizeof *ret);
  ret->cache = "off";
  ret->registers = -1;
  ret->spills = -1;
  if (request_ok(req, norm, ret)) {
    size_t n = build_options(req, norm, arch_opt, sizeof arch_opt, inc_opt, sizeof inc_opt,
                             opts);
    if (compile_or_fetch(req, opts, n, ret, &raw_log) < 0) {
      free(raw_log);
      compile_result_clear(ret);
      return -1;
    }
  }
  ret->log = cap_log(raw_log);
  free(raw_log);
  if (!ret->log) {
    compile_result_clear(ret);
    return -1;
  }
  ret->ms = now_ms() - t0;
  return 0;
}

void compile_result_clear(struct compile_result *r) {
  if (!r)
    return;
  free(r->log);
  free(r->cubin);
  cubin_info_free(r->info);
  memset(r, 0, sizeof *r);
}

static json_t *kernel_json(const struct cubin_kernel *k) {
  json_t *mt = k->max_threads[0] ? json_pack("[I,I,I]", (json_int_t)k->max_threads[0],
                                             (json_int_t)k->max_threads[1],
                                             (json_int_t)k->max_threads[2])
                                 : json_null();
  return json_pack("{s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:o}", "name", k->name, "registers",
                   k->registers, "params", k->n_params, "spill_stores",
                   (json_int_t)k->spill_stores, "spill_loads", (json_int_t)k->spill_loads,
                   "stack_frame", (json_int_t)k->stack_frame, "static_shared",
                   (json_int_t)k->static_shared, "max_threads", mt);
}

json_t *compile_result_to_json(const struct compile_result *r) {
  json_t *kernels = json_array();
  for (size_t i = 0; kernels && r->info && i < r->info->n_kernels; i++)
    if (json_array_append_new(kernels, kernel_json(&r->info->kernels[i])) < 0) {
      json_decref(kernels);
      return NULL;
    }
  json_t *sig = r->ok ? json_null() : json_string(r->failure.cls);
  return json_pack("{s:b, s:f, s:s, s:o, s:i, s:I, s:I, s:s, s:o}", "ok", r->ok, "ms",
                   (double)(long long)(r->ms * 1000.0) / 1000.0, "log", r->log ? r->log : "",
                   "signature", sig, "registers", r->registers, "spills", (json_int_t)r->spills,
                   "cubin_bytes", (json_int_t)r->cubin_bytes, "cache", r->cache, "kernels",
                   kernels);
}
