/* NVRTC compile stage (no GPU needed): good and broken kernels, signatures, the option
 * allow-list, the cubin cache, cubin metadata, the compile-only ABI and the CLI. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu/compile_signature.h"
#include "gpu/cubin_cache.h"
#include "cli/kernel.h"
#include "gpu/nvrtc_compile.h"
#include "gpu/opforge_gpu.h"

static const char relu_src[] =
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "relu(const float* __restrict__ x, float* __restrict__ y, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = fmaxf(x[i], 0.0f);\n"
    "}\n";

/* Compiles src for sm_90a with opts; the caller clears *r. */
static void compile(const char *src, const char *const *opts, size_t n, enum gpu_precision p,
                    struct cubin_cache *cache, struct compile_result *r) {
  struct compile_request req = {src, opts, n, "sm_90a", p, cache};
  assert_int_equal(nvrtc_compile(&req, r), 0);
  assert_non_null(r->log);
}

static void test_good_kernel(void **state) {
  (void)state;
  struct compile_result r;
  compile(relu_src, NULL, 0, GPU_PREC_FP32, NULL, &r);
  assert_true(r.ok);
  assert_false(r.failure.set);
  assert_string_equal(r.cache, "off");
  assert_true(r.registers > 0);
  assert_true(r.registers <= 255);
  assert_int_equal(r.spills, 0);
  assert_true(r.cubin_bytes > 0);
  assert_memory_equal(r.cubin, "\177ELF", 4);
  assert_true(r.ms > 0.0);
  /* The ptxas report is part of the log. */
  assert_non_null(strstr(r.log, "Compiling entry function 'relu' for 'sm_90a'"));
  assert_int_equal(r.info->n_kernels, 1);
  const struct cubin_kernel *k = cubin_info_find(r.info, "relu");
  assert_non_null(k);
  assert_int_equal(k->registers, r.registers);
  assert_int_equal(k->n_params, 3);
  assert_int_equal(k->param_size[0], 8);
  assert_int_equal(k->param_size[1], 8);
  assert_int_equal(k->param_size[2], 8);
  assert_int_equal(k->max_threads[0], 256);
  assert_int_equal(k->max_threads[1], 1);
  assert_int_equal(k->spill_stores, 0);
  assert_int_equal(k->spill_loads, 0);
  assert_int_equal(k->static_shared, 0);
  compile_result_clear(&r);
}

static void test_kernel_metadata(void **state) {
  (void)state;
  static const char src[] =
      "__device__ int g_count;\n"
      "__device__ float g_table[4] = {1.0f, 2.0f, 3.0f, 4.0f};\n"
      "extern \"C\" __global__ void mixed(int a, char b, double c, float* d, short e) {\n"
      "  __shared__ float s[1000];\n"
      "  s[threadIdx.x] = a + b + c + e + g_table[g_count & 3];\n"
      "  __syncthreads();\n"
      "  d[threadIdx.x] = s[999 - threadIdx.x];\n"
      "  g_count = 1;\n"
      "}\n"
      "extern \"C\" __global__ void empty() {}\n";
  struct compile_result r;
  compile(src, NULL, 0, GPU_PREC_FP32, NULL, &r);
  assert_true(r.ok);
  assert_int_equal(r.info->n_kernels, 2);
  const struct cubin_kernel *k = cubin_info_find(r.info, "mixed");
  assert_non_null(k);
  assert_int_equal(k->n_params, 5);
  static const uint16_t sizes[] = {4, 1, 8, 8, 2};
  for (int i = 0; i < 5; i++)
    assert_int_equal(k->param_size[i], sizes[i]);
  assert_int_equal(k->max_threads[0], 0);
  assert_int_equal(k->static_shared, 4000);
  k = cubin_info_find(r.info, "empty");
  assert_non_null(k);
  assert_int_equal(k->n_params, 0);
  assert_int_equal(r.info->n_globals, 2);
  for (size_t i = 0; i < r.info->n_globals; i++) {
    const struct cubin_global *g = &r.info->globals[i];
    if (strcmp(g->name, "g_count") == 0) {
      assert_int_equal(g->size, 4);
      assert_null(g->init);
    } else {
      static const float want[4] = {1.0f, 2.0f, 3.0f, 4.0f};
      assert_string_equal(g->name, "g_table");
      assert_int_equal(g->size, 16);
      assert_non_null(g->init);
      assert_memory_equal(g->init, want, sizeof want);
    }
  }
  compile_result_clear(&r);
}

static void expect_compile_error(const char *src, const char *cls, const char *in_message) {
  struct compile_result r;
  compile(src, NULL, 0, GPU_PREC_FP32, NULL, &r);
  assert_false(r.ok);
  assert_true(r.failure.set);
  assert_string_equal(r.failure.stage, "compile");
  assert_string_equal(r.failure.cls, cls);
  if (!strstr(r.failure.message, in_message))
    fail_msg("message '%s' lacks '%s'", r.failure.message, in_message);
  assert_null(r.cubin);
  assert_int_equal(r.cubin_bytes, 0);
  assert_int_equal(r.registers, -1);
  compile_result_clear(&r);
}

static void test_broken_kernels(void **state) {
  (void)state;
  expect_compile_error("extern \"C\" __global__ void k(float* x) {\n  x[0] = foo;\n}\n",
                       "compile/identifier_undefined",
                       "cand.cu(2): error: identifier \"foo\" is undefined");
  expect_compile_error("extern \"C\" __global__ void k(float* x) {\n  x[0] = 1\n}\n",
                       "compile/syntax_error", "cand.cu(3): error: expected a \";\"");
  expect_compile_error("extern \"C\" __global__ void k(float* x) { float y = \"s\"; x[0] = y; }",
                       "compile/type_mismatch",
                       "error: a value of type \"const char *\" cannot be used to initialize");
  expect_compile_error("#include <no_such_header.h>\nextern \"C\" __global__ void k() {}\n",
                       "compile/include_not_found", "no_such_header.h");
  /* A ptxas error: NVRTC hides it when -v is on, so the compile is retried without. */
  expect_compile_error("extern \"C\" __global__ void k(float* x) {\n"
                       "  __shared__ float s[70000]; s[threadIdx.x] = 1; x[0] = s[5];\n}\n",
                       "compile/too_much_shared",
                       "ptxas error   : Entry function 'k' uses too much shared data");
}

static void test_signature_normalization(void **state) {
  (void)state;
  static const struct {
    const char *log, *want;
  } cases[] = {
    {"cand.cu(12): error: identifier \"blockDimx\" is undefined\n", "compile/identifier_undefined"},
    {"cand.cu(3): warning #177-D: variable \"t\" was declared but never referenced\n"
     "cand.cu(4): error: identifier \"q\" is undefined\n",
     "compile/identifier_undefined"},
    {"cand.cu(1): error: expected an expression\n", "compile/syntax_error"},
    {"cand.cu(9): error: expression must be a modifiable lvalue\n",
     "compile/expression_must_modifiable_lvalue"},
    {"cand.cu(2): error: too few arguments in function call\n", "compile/wrong_argument_count"},
    {"cand.cu(2): error: argument of type \"int *\" is incompatible with parameter of type "
     "\"float *\"\n",
     "compile/type_mismatch"},
    {"cand.cu(7): error: no instance of overloaded function \"atomicAdd\" matches the argument "
     "list\n",
     "compile/no_matching_overload"},
    {"ptxas error   : Entry function 'k' uses too much shared data (0x445c0 bytes, 0x38c00 max)\n",
     "compile/too_much_shared"},
    {"ptxas application ptx input, line 25; error   : Not a name of any known instruction: "
     "'bogus'\nptxas fatal   : Ptx assembly aborted due to errors\n",
     "compile/not_name_any_known_instruction"},
    {"ptxas fatal   : Unresolved extern function 'helper'\n", "compile/unresolved_extern_function"},
    {"ptxas info    : 0 bytes gmem\n", "compile/failed"},
    {"", "compile/failed"},
  };
  char sig[96];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_string_equal(compile_signature(cases[i].log, sig, sizeof sig), cases[i].want);
  assert_string_equal(compile_signature(NULL, sig, sizeof sig), "compile/failed");
  size_t len = 0;
  const char *line = compile_first_error_line("a\nb.cu(1): error: x\nc\n", &len);
  assert_non_null(line);
  assert_int_equal(len, 17);
  assert_memory_equal(line, "b.cu(1): error: x", 17);
}

static void expect_option_refused(const char *opt, enum gpu_precision p, const char *message) {
  struct compile_result r;
  const char *opts[] = {"-DOK=1", opt};
  compile(relu_src, opts, 2, p, NULL, &r);
  assert_false(r.ok);
  assert_string_equal(r.failure.stage, "compile");
  assert_string_equal(r.failure.cls, "compile/option_not_allowed");
  assert_string_equal(r.failure.message, message);
  compile_result_clear(&r);
}

static void test_forbidden_options(void **state) {
  (void)state;
  const char *other = "allowed: -D<NAME>[=value], -maxrregcount=N, --use_fast_math (tf32/bf16)";
  const char *charset = "macro name or value outside the allowed characters";
  const char *range = "maxrregcount must be an integer in 16..255";
  char msg[512];
  static const char *const others[] = {"-I/etc", "--gpu-architecture=sm_80", "-G", "-lineinfo",
                                       "--include-path=/", "-default-device", "", "-Xptxas"};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    snprintf(msg, sizeof msg, "option 1 not allowed: '%s' (%s)", others[i], other);
    expect_option_refused(others[i], GPU_PREC_FP32, msg);
  }
  static const char *const bad_defines[] = {"-D", "-DX;rm", "-D__CUDA_ARCH__=1", "-D_Reserved",
                                            "-D1X", "-DX=a b", "-DX=$(id)", "-DX=\"s\""};
  for (size_t i = 0; i < sizeof bad_defines / sizeof bad_defines[0]; i++) {
    snprintf(msg, sizeof msg, "option 1 not allowed: '%s' (%s)", bad_defines[i], charset);
    expect_option_refused(bad_defines[i], GPU_PREC_FP32, msg);
  }
  static const char *const bad_regs[] = {"-maxrregcount=8", "-maxrregcount=300",
                                         "-maxrregcount=abc", "--maxrregcount=", "-maxrregcount=+32"};
  for (size_t i = 0; i < sizeof bad_regs / sizeof bad_regs[0]; i++) {
    snprintf(msg, sizeof msg, "option 1 not allowed: '%s' (%s)", bad_regs[i], range);
    expect_option_refused(bad_regs[i], GPU_PREC_FP32, msg);
  }
  struct compile_result r;
  const char *twice[] = {"-maxrregcount=32", "--maxrregcount=64"};
  compile(relu_src, twice, 2, GPU_PREC_FP32, NULL, &r);
  assert_string_equal(r.failure.cls, "compile/option_not_allowed");
  assert_string_equal(r.failure.message,
                      "option 1 not allowed: '--maxrregcount=64' (maxrregcount given twice)");
  compile_result_clear(&r);
  const char *many[NVRTC_MAX_OPTIONS + 1];
  for (size_t i = 0; i <= NVRTC_MAX_OPTIONS; i++)
    many[i] = "-DX=1";
  compile(relu_src, many, NVRTC_MAX_OPTIONS + 1, GPU_PREC_FP32, NULL, &r);
  assert_string_equal(r.failure.cls, "compile/option_not_allowed");
  assert_string_equal(r.failure.message, "33 options given; at most 32 are allowed");
  compile_result_clear(&r);
}

static void test_allowed_options(void **state) {
  (void)state;
  static const char src[] =
      "extern \"C\" __global__ void k(float* x) {\n"
      "#if VEC != 4 || !defined(USE_X)\n"
      "  x[0] = undefined_unless_macros_arrive;\n"
      "#endif\n"
      "  x[threadIdx.x] *= VEC * SCALE_NEG;\n"
      "}\n";
  const char *opts[] = {"-DVEC=4", "-DUSE_X", "-DSCALE_NEG=-1.5e-3", "-maxrregcount=16"};
  struct compile_result r;
  compile(src, opts, 4, GPU_PREC_FP32, NULL, &r);
  if (!r.ok)
    fail_msg("%s: %s", r.failure.cls, r.failure.message);
  assert_true(r.registers <= 16);
  compile_result_clear(&r);
}

static void test_fast_math_by_precision(void **state) {
  (void)state;
  const char *fm[] = {"--use_fast_math"};
  const char *fm1[] = {"-use_fast_math"};
  struct compile_result r;
  compile(relu_src, fm, 1, GPU_PREC_TF32, NULL, &r);
  assert_true(r.ok);
  compile_result_clear(&r);
  compile(relu_src, fm1, 1, GPU_PREC_BF16, NULL, &r);
  assert_true(r.ok);
  compile_result_clear(&r);
  compile(relu_src, fm, 1, GPU_PREC_FP32, NULL, &r);
  assert_false(r.ok);
  assert_string_equal(r.failure.cls, "compile/option_not_allowed");
  assert_string_equal(r.failure.message, "option 0 not allowed: '--use_fast_math' "
                                         "(--use_fast_math is not allowed for fp32 tasks)");
  compile_result_clear(&r);
  assert_int_equal(gpu_precision_parse("tf32", &(enum gpu_precision){0}), 0);
  assert_int_equal(gpu_precision_parse("fp16", &(enum gpu_precision){0}), -1);
  assert_int_equal(gpu_precision_parse(NULL, &(enum gpu_precision){0}), -1);
}

static void test_request_limits(void **state) {
  (void)state;
  struct compile_result r;
  compile("", NULL, 0, GPU_PREC_FP32, NULL, &r);
  assert_string_equal(r.failure.cls, "compile/empty_source");
  compile_result_clear(&r);
  char *big = malloc(NVRTC_MAX_SOURCE + 2);
  assert_non_null(big);
  memset(big, ' ', NVRTC_MAX_SOURCE + 1);
  big[NVRTC_MAX_SOURCE + 1] = '\0';
  compile(big, NULL, 0, GPU_PREC_FP32, NULL, &r);
  assert_string_equal(r.failure.cls, "compile/source_too_large");
  compile_result_clear(&r);
  free(big);
  struct compile_request req = {relu_src, NULL, 0, "sm_90; rm", GPU_PREC_FP32, NULL};
  assert_int_equal(nvrtc_compile(&req, &r), 0);
  assert_string_equal(r.failure.cls, "compile/bad_arch");
  compile_result_clear(&r);
}

static void test_arch(void **state) {
  (void)state;
  char arch[16];
  nvrtc_arch_for_cc(9, 0, arch, sizeof arch);
  assert_string_equal(arch, "sm_90a");
  nvrtc_arch_for_cc(10, 0, arch, sizeof arch);
  assert_string_equal(arch, "sm_100a");
  nvrtc_arch_for_cc(8, 6, arch, sizeof arch);
  assert_string_equal(arch, "sm_86");
  assert_true(nvrtc_arch_valid("sm_90a"));
  assert_true(nvrtc_arch_valid("sm_90"));
  assert_true(nvrtc_arch_valid("sm_100f"));
  assert_false(nvrtc_arch_valid("sm_9"));
  assert_false(nvrtc_arch_valid("compute_90"));
  assert_false(nvrtc_arch_valid("sm_90ab"));
  assert_false(nvrtc_arch_valid(NULL));
  /* A plain sm_90 compile works too (the CLI's --arch sm_90). */
  struct compile_request req = {relu_src, NULL, 0, "sm_90", GPU_PREC_FP32, NULL};
  struct compile_result r;
  assert_int_equal(nvrtc_compile(&req, &r), 0);
  assert_true(r.ok);
  compile_result_clear(&r);
}

/* ~2 KB per error line, and NVRTC reports up to 100 errors: far past the 64 KiB cap. */
static void test_log_cap(void **state) {
  (void)state;
  size_t len = 0, cap = 400 * 1024;
  char *src = malloc(cap);
  assert_non_null(src);
  len += (size_t)snprintf(src + len, cap - len, "extern \"C\" __global__ void k(float* x) {\n");
  for (int i = 0; i < 150; i++) {
    len += (size_t)snprintf(src + len, cap - len, "  x[%d] = u%d_", i, i);
    for (int j = 0; j < 1000; j++)
      src[len++] = 'q';
    len += (size_t)snprintf(src + len, cap - len, ";\n");
  }
  snprintf(src + len, cap - len, "}\n");
  struct compile_result r;
  compile(src, NULL, 0, GPU_PREC_FP32, NULL, &r);
  assert_false(r.ok);
  assert_string_equal(r.failure.cls, "compile/identifier_undefined");
  assert_true(strlen(r.log) <= NVRTC_LOG_CAP);
  assert_true(strlen(r.log) > NVRTC_LOG_CAP - 100);
  assert_non_null(strstr(r.log, "\n[log truncated: "));
  assert_int_equal(strncmp(r.log, "cand.cu(2): error: identifier \"u0_", 34), 0);
  compile_result_clear(&r);
  free(src);
}

/* A fresh temporary directory, removed (with its files) by remove_dir. */
static char *make_dir(void) {
  char *dir = strdup("/tmp/ofg-test-XXXXXX");
  assert_non_null(dir);
  assert_non_null(mkdtemp(dir));
  return dir;
}

static size_t count_files(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t n = 0;
  assert_non_null(d);
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name), s = strlen(suffix);
    if (e->d_name[0] != '.' && l >= s && strcmp(e->d_name + l - s, suffix) == 0)
      n++;
  }
  closedir(d);
  return n;
}

static void remove_dir(char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[4200];
  while (d && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d)
    closedir(d);
  rmdir(dir);
  free(dir);
}

static void test_cache_miss_then_hit(void **state) {
  (void)state;
  char *dir = make_dir();
  char sub[4200], err[256];
  struct cubin_cache *cache = NULL;
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  assert_int_equal(cubin_cache_open(sub, &cache, err, sizeof err), 0);
  struct compile_result r1, r2, r3;
  compile(relu_src, NULL, 0, GPU_PREC_FP32, cache, &r1);
  assert_true(r1.ok);
  assert_string_equal(r1.cache, "miss");
  assert_int_equal(cubin_cache_hits(cache), 0);
  assert_int_equal(cubin_cache_misses(cache), 1);
  assert_int_equal(count_files(sub, ".cubin"), 1);
  compile(relu_src, NULL, 0, GPU_PREC_FP32, cache, &r2);
  assert_true(r2.ok);
  assert_string_equal(r2.cache, "hit");
  assert_int_equal(cubin_cache_hits(cache), 1);
  assert_int_equal(cubin_cache_misses(cache), 1);
  /* A hit returns what the miss returned. */
  assert_int_equal(r2.cubin_bytes, r1.cubin_bytes);
  assert_memory_equal(r2.cubin, r1.cubin, r1.cubin_bytes);
  assert_string_equal(r2.log, r1.log);
  assert_int_equal(r2.registers, r1.registers);
  assert_int_equal(r2.spills, r1.spills);
  assert_int_equal(cubin_info_find(r2.info, "relu")->static_shared, 0);
  /* Other options: another entry. */
  const char *opts[] = {"-DX=1"};
  compile(relu_src, opts, 1, GPU_PREC_FP32, cache, &r3);
  assert_string_equal(r3.cache, "miss");
  assert_int_equal(cubin_cache_hits(cache), 1);
  assert_int_equal(cubin_cache_misses(cache), 2);
  assert_int_equal(count_files(sub, ".cubin"), 2);
  compile_result_clear(&r3);
  /* Refused options and failed compiles are not cached and not counted. */
  const char *bad[] = {"-G"};
  compile(relu_src, bad, 1, GPU_PREC_FP32, cache, &r3);
  assert_string_equal(r3.cache, "off");
  compile_result_clear(&r3);
  compile("extern \"C\" __global__ void k() { nope; }", NULL, 0, GPU_PREC_FP32, cache, &r3);
  assert_false(r3.ok);
  assert_string_equal(r3.cache, "miss");
  assert_int_equal(cubin_cache_misses(cache), 3);
  assert_int_equal(count_files(sub, ".cubin"), 2);
  compile_result_clear(&r3);
  compile_result_clear(&r1);
  compile_result_clear(&r2);
  cubin_cache_free(cache);
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  char *leaf = strdup(sub);
  remove_dir(leaf);
  snprintf(sub, sizeof sub, "%s/a", dir);
  rmdir(sub);
  remove_dir(dir);
}

static void test_cache_key(void **state) {
  (void)state;
  char k1[SHA256_HEX_BYTES], k2[SHA256_HEX_BYTES], k3[SHA256_HEX_BYTES], k4[SHA256_HEX_BYTES];
  char k5[SHA256_HEX_BYTES];
  const char *a[] = {"-DX=1"}, *b[] = {"-DX=2"}, *ab[] = {"-DA", "-DB"}, *joined[] = {"-DA\n-DB"};
  cubin_cache_key("src", NULL, 0, "sm_90a", k1);
  cubin_cache_key("src", a, 1, "sm_90a", k2);
  cubin_cache_key("src", b, 1, "sm_90a", k3);
  cubin_cache_key("src", a, 1, "sm_80", k4);
  cubin_cache_key("src2", NULL, 0, "sm_90a", k5);
  assert_int_equal(strlen(k1), 64);
  assert_string_not_equal(k1, k2);
  assert_string_not_equal(k2, k3);
  assert_string_not_equal(k2, k4);
  assert_string_not_equal(k1, k5);
  /* The key is exactly sha256(source \0 options each + \n \0 arch). */
  char want[SHA256_HEX_BYTES];
  sha256_hex("src\0-DX=1\n\0sm_80", 16, want);
  assert_string_equal(k4, want);
  cubin_cache_key("src", ab, 2, "sm_90a", k1);
  cubin_cache_key("src", joined, 1, "sm_90a", k2);
  assert_string_equal(k1, k2); /* why options must not contain newlines */
  cubin_cache_key("src", a, 1, "sm_90a", k3);
  assert_string_not_equal(k1, k3);
}

static void test_cache_corruption(void **state) {
  (void)state;
  char *dir = make_dir();
  char err[256], key[SHA256_HEX_BYTES], path[4300];
  struct cubin_cache *cache = NULL;
  assert_int_equal(cubin_cache_open(dir, &cache, err, sizeof err), 0);
  sha256_hex("k", 1, key);
  assert_int_equal(cubin_cache_put(cache, key, "\177ELFdata", 8, "the log"), 0);
  void *cubin = NULL;
  size_t bytes = 0;
  char *log = NULL;
  assert_int_equal(cubin_cache_get(cache, key, &cubin, &bytes, &log), 1);
  assert_int_equal(bytes, 8);
  assert_memory_equal(cubin, "\177ELFdata", 8);
  assert_string_equal(log, "the log");
  free(cubin);
  free(log);
  /* Flip the last byte: the digest no longer matches, so it is a miss. */
  snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, -1, SEEK_END), 0);
  fputc('X', fp);
  fclose(fp);
  cubin = NULL;
  assert_int_equal(cubin_cache_get(cache, key, &cubin, &bytes, &log), 0);
  assert_null(cubin);
  /* Truncated to its header: a miss too. */
  assert_int_equal(truncate(path, 20), 0);
  assert_int_equal(cubin_cache_get(cache, key, &cubin, &bytes, &log), 0);
  /* A key that is not a digest never becomes a path. */
  assert_int_equal(cubin_cache_get(cache, "../../etc/passwd", &cubin, &bytes, &log), 0);
  assert_int_equal(cubin_cache_put(cache, "../x", "\177ELF", 4, ""), -1);
  assert_int_equal(cubin_cache_hits(cache), 1);
  assert_int_equal(cubin_cache_misses(cache), 3);
  assert_int_equal(count_files(dir, ".tmp"), 0);
  cubin_cache_free(cache);
  remove_dir(dir);
  assert_int_equal(cubin_cache_open("/proc/no/such", &cache, err, sizeof err), -1);
  assert_non_null(strstr(err, "cannot create cache directory /proc/no/such"));
}

/* Reads a whole text file into a new string (caller frees). */
static char *slurp(const char *path) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, 0, SEEK_END), 0);
  long n = ftell(fp);
  assert_true(n >= 0);
  rewind(fp);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
  buf[n] = '\0';
  fclose(fp);
  return buf;
}

/* Every hand-written kernel for the GPU run compiles for sm_90a, and each plan's kernels
 * exist in its module with matching argument counts. */
static void test_gpu_run_kernels_compile(void **state) {
  (void)state;
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  char dir[4096];
  if (!root) {
    printf("SKIP: OPFORGE_SOURCE_ROOT is not set\n");
    skip();
  }
  snprintf(dir, sizeof dir, "%s/tests/gpu/kernels", root);
  DIR *d = opendir(dir);
  if (!d) {
    printf("SKIP: %s is absent\n", dir);
    skip();
  }
  struct dirent *e;
  size_t n = 0;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 4 || strcmp(e->d_name + l - 3, ".cu") != 0)
      continue;
    char path[4400], plan_path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    snprintf(plan_path, sizeof plan_path, "%s/%.*s.plan.json", dir, (int)(l - 3), e->d_name);
    char *src = slurp(path);
    struct compile_result r;
    compile(src, NULL, 0, GPU_PREC_FP32, NULL, &r);
    if (!r.ok)
      fail_msg("%s: %s: %s", e->d_name, r.failure.cls, r.failure.message);
    assert_int_equal(r.spills, 0);
    json_t *plan = json_load_file(plan_path, 0, NULL);
    if (!plan)
      fail_msg("%s has no readable plan %s", e->d_name, plan_path);
    json_t *launches = json_object_get(plan, "launches");
    for (size_t i = 0; i < json_array_size(launches); i++) {
      json_t *launch = json_array_get(launches, i);
      const struct cubin_kernel *k =
          cubin_info_find(r.info, json_string_value(json_object_get(launch, "kernel")));
      if (!k)
        fail_msg("%s: plan launch %zu names a kernel the module lacks", e->d_name, i);
      assert_int_equal((size_t)k->n_params, json_array_size(json_object_get(launch, "args")));
    }
    json_decref(plan);
    compile_result_clear(&r);
    free(src);
    n++;
  }
  closedir(d);
  assert_true(n >= 10);
}

static json_t *call_compile_only(void *session, const char *request) {
  char *out = ofg_compile_only(session, request);
  assert_non_null(out);
  json_error_t e;
  json_t *o = json_loads(out, 0, &e);
  if (!o)
    fail_msg("reply is not JSON: %s: %s", e.text, out);
  ofg_string_free(out);
  return o;
}

static void test_abi_compile_only(void **state) {
  (void)state;
  json_t *req = json_pack("{s:s, s:[s], s:s}", "source", relu_src, "options", "-DX=1",
                          "precision", "fp32");
  char *text = json_dumps(req, 0);
  json_t *o = call_compile_only(NULL, text);
  free(text);
  json_decref(req);
  assert_true(json_is_true(json_object_get(o, "ok")));
  assert_true(json_is_null(json_object_get(o, "signature")));
  assert_true(json_is_null(json_object_get(o, "failure")));
  assert_string_equal(json_string_value(json_object_get(o, "cache")), "off");
  assert_true(json_integer_value(json_object_get(o, "registers")) > 0);
  assert_int_equal(json_integer_value(json_object_get(o, "spills")), 0);
  assert_true(json_integer_value(json_object_get(o, "cubin_bytes")) > 0);
  assert_true(json_is_string(json_object_get(o, "log")));
  assert_true(json_is_real(json_object_get(o, "ms")));
  json_t *k = json_array_get(json_object_get(o, "kernels"), 0);
  assert_string_equal(json_string_value(json_object_get(k, "name")), "relu");
  assert_int_equal(json_integer_value(json_object_get(k, "params")), 3);
  json_decref(o);

  o = call_compile_only(NULL, "{\"source\":\"extern \\\"C\\\" __global__ void k(){ x; }\","
                              "\"arch\":\"sm_90a\"}");
  assert_true(json_is_false(json_object_get(o, "ok")));
  assert_string_equal(json_string_value(json_object_get(o, "signature")),
                      "compile/identifier_undefined");
  json_t *f = json_object_get(o, "failure");
  assert_string_equal(json_string_value(json_object_get(f, "stage")), "compile");
  assert_string_equal(json_string_value(json_object_get(f, "class")),
                      "compile/identifier_undefined");
  json_decref(o);

  o = call_compile_only(NULL, "{\"source\":\"x\",\"options\":[\"-G\"]}");
  assert_string_equal(json_string_value(json_object_get(o, "signature")),
                      "compile/option_not_allowed");
  json_decref(o);
  o = call_compile_only(NULL, "{\"source\":\"x\",\"options\":[7]}");
  assert_string_equal(json_string_value(json_object_get(json_object_get(o, "failure"), "message")),
                      "option 0 is not a string");
  json_decref(o);
  /* Jansson refuses \u0000 unless asked, so a NUL never reaches NVRTC. */
  o = call_compile_only(NULL, "{\"source\":\"x\\u0000y\"}");
  assert_string_equal(json_string_value(json_object_get(json_object_get(o, "failure"), "class")),
                      "protocol/bad_json");
  json_decref(o);
  o = call_compile_only(NULL, "{\"source\":\"x\",\"precision\":\"fp16\"}");
  assert_string_equal(json_string_value(json_object_get(json_object_get(o, "failure"), "class")),
                      "protocol/bad_request");
  json_decref(o);
  o = call_compile_only(NULL, "not json");
  assert_true(json_is_false(json_object_get(o, "ok")));
  assert_string_equal(json_string_value(json_object_get(json_object_get(o, "failure"), "class")),
                      "protocol/bad_json");
  json_decref(o);
}

static void test_abi_compile_only_cache_dir(void **state) {
  (void)state;
  char *dir = make_dir();
  json_t *req = json_pack("{s:s, s:s}", "source", relu_src, "cache_dir", dir);
  char *text = json_dumps(req, 0);
  json_t *o = call_compile_only(NULL, text);
  assert_string_equal(json_string_value(json_object_get(o, "cache")), "miss");
  json_decref(o);
  o = call_compile_only(NULL, text);
  assert_string_equal(json_string_value(json_object_get(o, "cache")), "hit");
  assert_true(json_is_true(json_object_get(o, "ok")));
  json_decref(o);
  free(text);
  json_decref(req);
  remove_dir(dir);
}

/* On a machine without a GPU a session cannot open, and says why. */
static void test_session_without_gpu(void **state) {
  (void)state;
  void *s = NULL;
  char err[512] = "";
  if (ofg_session_open(0, NULL, &s, err, sizeof err) == 0) {
    ofg_session_free(s);
    printf("SKIP: a GPU is present; this test checks the no-GPU failure path\n");
    skip();
  }
  assert_null(s);
  assert_true(strlen(err) > 10);
  printf("session_open without a GPU: %s\n", err);
  char *out = ofg_candidate_prepare(NULL, "{}", "{}");
  assert_non_null(out);
  assert_non_null(strstr(out, "\"protocol/no_session\""));
  ofg_string_free(out);
  out = ofg_candidate_run(NULL, 1, "{}", 0);
  assert_non_null(strstr(out, "\"protocol/no_session\""));
  ofg_string_free(out);
  ofg_session_free(NULL);
  ofg_candidate_free(NULL, 1);
}

static int run_cli(const char *const *args, int n) {
  char *argv[16];
  for (int i = 0; i < n; i++)
    argv[i] = (char *)args[i];
  argv[n] = NULL;
  return cli_kernel_main(n, argv);
}

static void test_cli(void **state) {
  (void)state;
  char *dir = make_dir();
  char good[4200], bad[4200];
  snprintf(good, sizeof good, "%s/good.cu", dir);
  snprintf(bad, sizeof bad, "%s/bad.cu", dir);
  FILE *fp = fopen(good, "w");
  assert_non_null(fp);
  fputs(relu_src, fp);
  fclose(fp);
  fp = fopen(bad, "w");
  assert_non_null(fp);
  fputs("extern \"C\" __global__ void k() { y; }\n", fp);
  fclose(fp);
  const char *ok1[] = {"kernel", "compile", good};
  assert_int_equal(run_cli(ok1, 3), 0);
  const char *ok2[] = {"kernel", "compile", good, "--arch", "sm_90", "-DX=Y", "--maxrregcount",
                       "32", "--json"};
  assert_int_equal(run_cli(ok2, 9), 0);
  const char *fail1[] = {"kernel", "compile", bad};
  assert_int_equal(run_cli(fail1, 3), 1);
  const char *fail2[] = {"kernel", "compile", good, "--maxrregcount=4"};
  assert_int_equal(run_cli(fail2, 4), 1);
  const char *fail3[] = {"kernel", "compile", good, "--use_fast_math"};
  assert_int_equal(run_cli(fail3, 4), 1);
  const char *ok3[] = {"kernel", "compile", good, "--use_fast_math", "--precision", "tf32"};
  assert_int_equal(run_cli(ok3, 6), 0);
  const char *missing[] = {"kernel", "compile", "/no/such/file.cu"};
  assert_int_equal(run_cli(missing, 3), 1);
  const char *usage1[] = {"kernel"};
  assert_int_equal(run_cli(usage1, 1), 2);
  const char *usage2[] = {"kernel", "link", good};
  assert_int_equal(run_cli(usage2, 3), 2);
  const char *usage3[] = {"kernel", "compile", good, "--bogus"};
  assert_int_equal(run_cli(usage3, 4), 2);
  const char *usage4[] = {"kernel", "compile", good, "--precision", "fp16"};
  assert_int_equal(run_cli(usage4, 5), 2);
  remove_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_good_kernel),
    cmocka_unit_test(test_kernel_metadata),
    cmocka_unit_test(test_broken_kernels),
    cmocka_unit_test(test_signature_normalization),
    cmocka_unit_test(test_forbidden_options),
    cmocka_unit_test(test_allowed_options),
    cmocka_unit_test(test_fast_math_by_precision),
    cmocka_unit_test(test_request_limits),
    cmocka_unit_test(test_arch),
    cmocka_unit_test(test_log_cap),
    cmocka_unit_test(test_cache_miss_then_hit),
    cmocka_unit_test(test_cache_key),
    cmocka_unit_test(test_cache_corruption),
    cmocka_unit_test(test_gpu_run_kernels_compile),
    cmocka_unit_test(test_abi_compile_only),
    cmocka_unit_test(test_abi_compile_only_cache_dir),
    cmocka_unit_test(test_session_without_gpu),
    cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
