/* Unit tests of the GEMM family's Hopper kernel (MODE wgmma_tf32x3,
 * proposers/builtin/templates/gemm_wgmma.cu), on the CPU only: it has never run on a GPU.
 * Its candidates compile with NVRTC for sm_90a without spills and with nvcc; their PTX
 * holds the Hopper instructions (and their SASS HGMMA, where a disassembler is found);
 * the knob check refuses what the kernel cannot do with exact reasons; the proposer never
 * starts from it; and a CPU model of its 3xTF32 arithmetic stays within the fp32 tasks'
 * accuracy budget where plain TF32 does not. */
#include <glob.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <nvrtc.h>

#include "gpu/nvrtc_compile.h"
#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm.h"
#include "proposers/builtin/propose.h"
#include "proposers/builtin/space.h"

#include "builtin_testlib.h"

/* ---- synthetic profiles ---- */

static json_t *shape2(long long a, long long b) {
  return json_pack("[I,I]", (json_int_t)a, (json_int_t)b);
}

static json_t *tensor_spec(const char *name, long long a, long long b) {
  return json_pack("{s:s,s:s,s:o,s:I}", "name", name, "dtype", "float32", "shape", shape2(a, b),
                   "numel", (json_int_t)(a * b));
}

static json_t *placeholder(const char *name, const char *tensor, long long a, long long b) {
  return json_pack("{s:s,s:s,s:s,s:s,s:[],s:{},s:o,s:s}", "name", name, "op", "placeholder",
                   "target", name, "tensor", tensor, "args", "kwargs", "shape", shape2(a, b),
                   "dtype", "float32");
}

/* A graph node; args stolen. */
static json_t *call(const char *name, const char *target, json_t *args, long long a, long long b) {
  return json_pack("{s:s,s:s,s:s,s:o,s:{},s:o,s:s}", "name", name, "op",
                   strcmp(name, "output") == 0 ? "output" : "call_function", "target", target,
                   "args", args, "kwargs", "shape", shape2(a, b), "dtype", "float32");
}

/* The profile (caller owns) of A [M, K] (or [K, M] read as A.T) @ B [K, N] (or [N, K]
 * read as B.T), on a device of compute capability cap ("9.0"; NULL: no "gpu" facts) with
 * smem_optin bytes of shared memory per block (0: not said). */
static json_t *mm_profile(long long M, long long K, long long N, bool ta, bool tb, const char *cap,
                          long long smem_optin) {
  long long a0 = ta ? K : M, a1 = ta ? M : K, b0 = tb ? N : K, b1 = tb ? K : N;
  json_t *graph = json_array();
  json_array_append_new(graph, placeholder("a", "input:0", a0, a1));
  json_array_append_new(graph, placeholder("b", "input:1", b0, b1));
  if (ta)
    json_array_append_new(graph,
                          call("at", "getattr", json_pack("[{s:s},s]", "node", "a", "T"), M, K));
  if (tb)
    json_array_append_new(graph,
                          call("bt", "getattr", json_pack("[{s:s},s]", "node", "b", "T"), K, N));
  json_array_append_new(graph, call("matmul", "torch.matmul",
                                    json_pack("[{s:s},{s:s}]", "node", ta ? "at" : "a", "node",
                                              tb ? "bt" : "b"),
                                    M, N));
  json_array_append_new(graph,
                        call("output", "output", json_pack("[{s:s}]", "node", "matmul"), M, N));
  json_t *p = json_pack("{s:[o,o],s:[],s:[o],s:o,s:s,s:s,s:i}", "inputs",
                        tensor_spec("input:0", a0, a1), tensor_spec("input:1", b0, b1), "params",
                        "outputs", tensor_spec("output:0", M, N), "graph", graph,
                        "graph_source", "fx", "precision", "fp32", "sm_count", 132);
  if (cap) {
    json_t *gpu =
        json_pack("{s:s,s:s,s:i}", "name", "test GPU", "capability", cap, "sm_count", 132);
    if (smem_optin)
      json_object_set_new(gpu, "max_shared_optin", json_integer(smem_optin));
    json_object_set_new(p, "gpu", gpu);
  }
  return p;
}

/* The profile (caller owns) of nn.Linear(K, N) with bias on x [M, K], then torch.<op>
 * ("relu": fused into the store; "softmax" over the features: the row tail, a second
 * launch). B is the weight [N, K] read transposed. */
static json_t *linear_profile(long long M, long long K, long long N, const char *op) {
  json_t *graph = json_array();
  json_array_append_new(graph, placeholder("x", "input:0", M, K));
  json_t *lin = call("fc", "Linear", json_pack("[{s:s}]", "node", "x"), M, N);
  json_object_set_new(lin, "op", json_string("call_module"));
  json_object_set_new(lin, "attrs", json_pack("{s:I,s:I,s:b}", "in_features", (json_int_t)K,
                                              "out_features", (json_int_t)N, "bias", 1));
  json_object_set_new(lin, "params", json_pack("[s,s]", "param:fc.weight", "param:fc.bias"));
  json_array_append_new(graph, lin);
  char target[32];
  snprintf(target, sizeof target, "torch.%s", op);
  json_t *tail = call("tail", target, json_pack("[{s:s}]", "node", "fc"), M, N);
  if (strcmp(op, "softmax") == 0)
    json_object_set_new(tail, "kwargs", json_pack("{s:i}", "dim", 1));
  json_array_append_new(graph, tail);
  json_array_append_new(graph,
                        call("output", "output", json_pack("[{s:s}]", "node", "tail"), M, N));
  json_t *bias = json_pack("{s:s,s:s,s:[I],s:I}", "name", "param:fc.bias", "dtype", "float32",
                           "shape", (json_int_t)N, "numel", (json_int_t)N);
  return json_pack("{s:[o],s:[o,o],s:[o],s:o,s:s,s:s,s:i}", "inputs",
                   tensor_spec("input:0", M, K), "params", tensor_spec("param:fc.weight", N, K),
                   bias, "outputs", tensor_spec("output:0", M, N), "graph", graph,
                   "graph_source", "fx", "precision", "fp32", "sm_count", 132);
}

/* The profile (caller owns) of torch.bmm(a [batch, M, K], b [batch, K, N]). */
static json_t *bmm_profile(long long batch, long long M, long long K, long long N) {
  json_t *graph = json_array();
  json_array_append_new(graph, json_pack("{s:s,s:s,s:s,s:s,s:[],s:{},s:[I,I,I],s:s}", "name",
                                         "a", "op", "placeholder", "target", "a", "tensor",
                                         "input:0", "args", "kwargs", "shape", (json_int_t)batch,
                                         (json_int_t)M, (json_int_t)K, "dtype", "float32"));
  json_array_append_new(graph, json_pack("{s:s,s:s,s:s,s:s,s:[],s:{},s:[I,I,I],s:s}", "name",
                                         "b", "op", "placeholder", "target", "b", "tensor",
                                         "input:1", "args", "kwargs", "shape", (json_int_t)batch,
                                         (json_int_t)K, (json_int_t)N, "dtype", "float32"));
  json_array_append_new(graph, json_pack("{s:s,s:s,s:s,s:[{s:s},{s:s}],s:{},s:[I,I,I],s:s}",
                                         "name", "bmm", "op", "call_function", "target",
                                         "torch.bmm", "args", "node", "a", "node", "b", "kwargs",
                                         "shape", (json_int_t)batch, (json_int_t)M, (json_int_t)N,
                                         "dtype", "float32"));
  json_array_append_new(graph, json_pack("{s:s,s:s,s:s,s:[{s:s}],s:{},s:[I,I,I],s:s}", "name",
                                         "output", "op", "output", "target", "output", "args",
                                         "node", "bmm", "kwargs", "shape", (json_int_t)batch,
                                         (json_int_t)M, (json_int_t)N, "dtype", "float32"));
  json_t *in[3];
  const long long dims[3][3] = {{batch, M, K}, {batch, K, N}, {batch, M, N}};
  const char *names[3] = {"input:0", "input:1", "output:0"};
  for (int i = 0; i < 3; i++)
    in[i] = json_pack("{s:s,s:s,s:[I,I,I],s:I}", "name", names[i], "dtype", "float32", "shape",
                      (json_int_t)dims[i][0], (json_int_t)dims[i][1], (json_int_t)dims[i][2],
                      "numel", (json_int_t)(dims[i][0] * dims[i][1] * dims[i][2]));
  return json_pack("{s:[o,o],s:[],s:[o],s:o,s:s,s:s,s:i}", "inputs", in[0], in[1], "params",
                   "outputs", in[2], "graph", graph, "graph_source", "fx", "precision", "fp32",
                   "sm_count", 132);
}

/* The gemm match (caller owns) of a profile (borrowed); fails the test unless it matches. */
static json_t *must_match(json_t *profile) {
  json_t *m = NULL;
  char why[512] = "";
  int rc = gemm_match(profile, &m, why, sizeof why);
  if (rc != 1)
    printf("match: %d %s\n", rc, why);
  assert_int_equal(rc, 1);
  return m;
}

/* The family defaults of match (borrowed) with MODE wgmma_tf32x3 and the given tiles (0:
 * keep). */
static struct knob_set wgmma_knobs(json_t *match, int bm, int bn, int bk, int stages, int split) {
  struct knob_set k;
  gemm_defaults(match, &k);
  snprintf(k.mode, sizeof k.mode, "wgmma_tf32x3");
  k.bm = bm ? bm : k.bm;
  k.bn = bn ? bn : k.bn;
  k.bk = bk ? bk : k.bk;
  k.stages = stages ? stages : k.stages;
  k.split = split ? split : k.split;
  return k;
}

/* ---- compiling ---- */

/* The candidate's -D options as strings borrowed from cand, into ov (NVRTC_MAX_OPTIONS). */
static size_t candidate_options(json_t *cand, const char **ov) {
  json_t *opts = json_object_get(cand, "options");
  size_t n = json_array_size(opts);
  assert_true(n <= NVRTC_MAX_OPTIONS);
  for (size_t i = 0; i < n; i++)
    ov[i] = json_string_value(json_array_get(opts, i));
  return n;
}

/* The PTX of cand for compute_90a from NVRTC directly (caller frees); fails the test on
 * an error. */
static char *candidate_ptx(json_t *cand) {
  const char *ov[NVRTC_MAX_OPTIONS + 2];
  size_t n = candidate_options(cand, ov);
  ov[n++] = "--gpu-architecture=compute_90a";
  ov[n++] = "-std=c++17";
  nvrtcProgram prog;
  const char *src = json_string_value(json_object_get(cand, "source"));
  assert_int_equal(nvrtcCreateProgram(&prog, src, "gemm_wgmma.cu", 0, NULL, NULL), NVRTC_SUCCESS);
  nvrtcResult rc = nvrtcCompileProgram(prog, (int)n, ov);
  if (rc != NVRTC_SUCCESS) {
    size_t len = 0;
    nvrtcGetProgramLogSize(prog, &len);
    char *log = malloc(len + 1);
    nvrtcGetProgramLog(prog, log);
    printf("PTX compile failed:\n%s\n", log);
    free(log);
  }
  assert_int_equal(rc, NVRTC_SUCCESS);
  size_t len = 0;
  assert_int_equal(nvrtcGetPTXSize(prog, &len), NVRTC_SUCCESS);
  char *ptx = malloc(len + 1);
  assert_non_null(ptx);
  assert_int_equal(nvrtcGetPTX(prog, ptx), NVRTC_SUCCESS);
  ptx[len] = '\0';
  nvrtcDestroyProgram(&prog);
  return ptx;
}

/* Asserts the PTX of cand (borrowed) holds the kernel's Hopper instructions for its BN. */
static void check_ptx(json_t *cand, int bn) {
  char *ptx = candidate_ptx(cand);
  char mma[96];
  snprintf(mma, sizeof mma, "wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32", bn);
  const char *const want[] = {mma,
                              "wgmma.fence.sync.aligned",
                              "wgmma.commit_group.sync.aligned",
                              "wgmma.wait_group.sync.aligned",
                              "setmaxnreg.dec.sync.aligned.u32",
                              "setmaxnreg.inc.sync.aligned.u32",
                              "mbarrier.init.shared",
                              "mbarrier.try_wait.parity",
                              "mbarrier.arrive",
                              "fence.proxy.async.shared::cta",
                              "cp.async",
                              "cvt.rna.tf32.f32"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (!strstr(ptx, want[i]))
      fail_msg("the PTX lacks %s", want[i]);
  }
  free(ptx);
}

/* Compiles cand (borrowed) with the project's NVRTC path for sm_90a: no error, no spill, no warning
 * that setmaxnreg was ignored (C7508) or that wgmma was serialized. */
static void check_nvrtc(json_t *cand, const char *what) {
  const char *ov[NVRTC_MAX_OPTIONS];
  size_t n = candidate_options(cand, ov);
  const char *src = json_string_value(json_object_get(cand, "source"));
  struct compile_request req = {src, ov, n, "sm_90a", GPU_PREC_FP32, NULL};
  struct compile_result r;
  assert_int_equal(nvrtc_compile(&req, &r), 0);
  if (!r.ok || strstr(r.log, "warning"))
    printf("%s: NVRTC log:\n%s\n", what, r.log);
  assert_true(r.ok);
  printf("  %-46s NVRTC sm_90a %7.0f ms, registers %3d, spills %ld, cubin %zu bytes\n", what,
         r.ms, r.registers, r.spills, r.cubin_bytes);
  assert_int_equal(r.spills, 0);
  assert_null(strstr(r.log, "C7508"));
  assert_null(strstr(r.log, "C7510"));
  assert_null(strstr(r.log, "serialized"));
  compile_result_clear(&r);
}

/* A disassembler that reads sm_90a cubins (static storage), or NULL: cuobjdump in
 * OPFORGE_CUOBJDUMP, CUDA's bin, or the one Triton (a dependency of torch) ships in the
 * venv of the evaluator's python. */
static const char *find_cuobjdump(void) {
  static char path[1024];
  const char *env = getenv("OPFORGE_CUOBJDUMP");
  const char *fixed[] = {env, "/usr/local/cuda/bin/cuobjdump"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
    if (fixed[i] && *fixed[i] && access(fixed[i], X_OK) == 0) {
      snprintf(path, sizeof path, "%s", fixed[i]);
      return path;
    }
  }
  const char *py = python_path(); /* <venv>/bin/python */
  char venv[1024];
  snprintf(venv, sizeof venv, "%s", py ? py : "");
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(venv, '/');
    if (!slash)
      return NULL;
    *slash = '\0';
  }
  char pattern[1200];
  snprintf(pattern, sizeof pattern,
           "%s/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump", venv);
  glob_t g;
  bool found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0 &&
               access(g.gl_pathv[0], X_OK) == 0;
  if (found)
    snprintf(path, sizeof path, "%s", g.gl_pathv[0]);
  globfree(&g);
  return found ? path : NULL;
}

/* Runs cmd (the caller's) through the shell; its exit status (-1 when it could not run). */
static int run(const char *cmd) {
  int rc = system(cmd);
  return rc == -1 ? -1 : (WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
}

/* Occurrences of needle in text (both the caller's). */
static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

/* Compiles cand (borrowed) with nvcc for sm_90a into a cubin in dir (skipped, with the
 * reason, when nvcc is absent), then reads its SASS with cuobjdump where one is found:
 * both setmaxnreg forms (USETMAXREG), no local memory. Returns the count of
 * HGMMA.64xBNx8 TF32 instructions, or -1 when the SASS could not be read. */
static int check_nvcc(json_t *cand, int bn, const char *what, const char *dir) {
  const char *nvcc = "/usr/local/cuda/bin/nvcc";
  if (access(nvcc, X_OK) != 0) {
    printf("  %-46s nvcc: skipped, %s is absent\n", what, nvcc);
    return -1;
  }
  char src[512], cubin[512], cmd[8192];
  snprintf(src, sizeof src, "%s/k.cu", dir);
  snprintf(cubin, sizeof cubin, "%s/k.cubin", dir);
  write_file(src, json_string_value(json_object_get(cand, "source")));
  /* The -gencode form: HOPPER.md notes that -arch=sm_90a also ran a plain sm_90 pass. */
  int len = snprintf(cmd, sizeof cmd,
                     "%s -gencode=arch=compute_90a,code=sm_90a -cubin -std=c++17 -o %s %s", nvcc,
                     cubin, src);
  const char *ov[NVRTC_MAX_OPTIONS];
  size_t n = candidate_options(cand, ov);
  for (size_t i = 0; i < n; i++)
    len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s'", ov[i]);
  snprintf(cmd + len, sizeof cmd - (size_t)len, " > %s/nvcc.log 2>&1", dir);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = run(cmd);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  if (rc != 0) {
    snprintf(cmd, sizeof cmd, "%s/nvcc.log", dir);
    char *log = read_file(cmd);
    printf("%s: nvcc failed:\n%s\n", what, log ? log : "");
    free(log);
  }
  assert_int_equal(rc, 0);
  const char *dump = find_cuobjdump();
  if (!dump) {
    printf("  %-46s nvcc %6.0f ms; SASS: skipped, no cuobjdump (OPFORGE_CUOBJDUMP names one)\n",
           what, ms);
    return -1;
  }
  snprintf(cmd, sizeof cmd, "%s -sass %s > %s/k.sass 2>&1", dump, cubin, dir);
  if (run(cmd) != 0) {
    printf("  %-46s nvcc %6.0f ms; SASS: skipped, %s cannot read the cubin\n", what, ms, dump);
    return -1;
  }
  snprintf(cmd, sizeof cmd, "%s/k.sass", dir);
  char *sass = read_file(cmd);
  assert_non_null(sass);
  char op[48];
  snprintf(op, sizeof op, "HGMMA.64x%dx8.F32.TF32", bn);
  int hgmma = count(sass, op), local = count(sass, "STL") + count(sass, "LDL");
  printf("  %-46s nvcc %6.0f ms; SASS: %d HGMMA, %d USETMAXREG, %d local-memory accesses\n",
         what, ms, hgmma, count(sass, "USETMAXREG"), local);
  assert_non_null(strstr(sass, "USETMAXREG.DEALLOC"));
  assert_non_null(strstr(sass, "USETMAXREG.TRY_ALLOC"));
  assert_int_equal(local, 0);
  free(sass);
  return hgmma;
}

/* ---- the shapes compiled ---- */

static const struct shape {
  const char *name;
  long long m, k, n;
  bool ta, tb;
  int bm, bn, bk, stages, split; /* 0: the family default's */
} shapes[] = {
    {"square 4096", 4096, 4096, 4096, false, false, 128, 128, 32, 3, 1},
    {"square 4096 B^T, BK 16, 4 stages", 4096, 4096, 4096, false, true, 128, 128, 16, 4, 1},
    {"irregular 1000x1500x777", 1000, 777, 1500, false, false, 128, 128, 16, 4, 1},
    {"irregular A^T B^T, one consumer 64x128x32", 1000, 777, 1500, true, true, 64, 128, 32, 4, 1},
    {"tall-skinny 65536x64x1024 B^T", 65536, 1024, 64, false, true, 128, 64, 32, 4, 1},
    {"one consumer 64x32, 300x40x1000", 300, 1000, 40, false, false, 64, 32, 8, 6, 1},
    {"K=131072, 256x256, split 64", 256, 131072, 256, false, false, 128, 128, 32, 3, 64},
    {"K=131072 A^T, 128x64, split 32", 128, 131072, 64, true, false, 64, 64, 32, 3, 32},
};

static void test_compiles(void **state) {
  (void)state;
  char dir[] = "/tmp/opforge-wgmma-XXXXXX";
  assert_non_null(mkdtemp(dir));
  int sass_seen = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const struct shape *s = &shapes[i];
    json_t *p = mm_profile(s->m, s->k, s->n, s->ta, s->tb, "9.0", 232448);
    json_t *m = must_match(p);
    struct knob_set k = wgmma_knobs(m, s->bm, s->bn, s->bk, s->stages, s->split);
    char why[512] = "";
    json_t *cand = NULL;
    if (gemm_generate(m, &k, &cand, why, sizeof why) != 0)
      fail_msg("%s: %s", s->name, why);
    check_nvrtc(cand, s->name);
    check_ptx(cand, k.bn);
    /* One K step's 3 x BK/8 wgmmas, unrolled, each an HGMMA of the tile's N. */
    int hgmma = check_nvcc(cand, k.bn, s->name, dir);
    if (hgmma >= 0) {
      assert_int_equal(hgmma, 3 * k.bk / 8);
      sass_seen++;
    }
    json_decref(cand);
    json_decref(m);
    json_decref(p);
  }
  printf("  SASS read for %d of %zu candidates\n", sass_seen,
         sizeof shapes / sizeof shapes[0]);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(run(cmd), 0);
}

/* The other stages around the GEMM compile with the kernel: a linear layer's bias and
 * ReLU fused into its store, a softmax row tail (a second launch reading the GEMM's
 * output buffer), and a batched GEMM (blockIdx.z over the batch). */
static void test_stages(void **state) {
  (void)state;
  const struct {
    const char *what;
    json_t *profile;
    size_t main_args, launches;
  } cases[] = {
      {"linear 1024x3000x4096 + bias + relu", linear_profile(1024, 4096, 3000, "relu"), 4, 1},
      {"linear 1024x3000x4096 + bias, softmax", linear_profile(1024, 4096, 3000, "softmax"), 4,
       2},
      {"bmm 16 x 512x384x256", bmm_profile(16, 512, 256, 384), 3, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *m = must_match(cases[i].profile);
    printf("  match: %s\n", json_string_value(json_object_get(m, "summary")));
    struct knob_set k = wgmma_knobs(m, 128, 128, 32, 3, 1);
    json_t *cand = NULL;
    char why[512] = "";
    if (gemm_generate(m, &k, &cand, why, sizeof why) != 0)
      fail_msg("%s: %s", cases[i].what, why);
    json_t *launches = json_object_get(json_object_get(cand, "plan"), "launches");
    assert_int_equal(json_array_size(launches), cases[i].launches);
    json_t *main = json_array_get(launches, 0);
    assert_int_equal(json_array_size(json_object_get(main, "args")), cases[i].main_args);
    check_nvrtc(cand, cases[i].what);
    check_ptx(cand, 128);
    json_decref(cand);
    json_decref(m);
    json_decref(cases[i].profile);
  }
}

/* `opforge propose --knobs MODE=wgmma_tf32x3` reaches the kernel: the family defaults with
 * that one knob set generate, and compile. */
static void test_named_knob(void **state) {
  (void)state;
  json_t *p = mm_profile(4096, 4096, 4096, false, false, "9.0", 232448);
  json_t *opts = json_pack("[s]", "-DMODE_WGMMA_TF32X3=1");
  json_t *cand = NULL;
  char why[512] = "";
  bool unsupported = false;
  if (builtin_propose_knobs(p, NULL, opts, &cand, why, sizeof why, &unsupported) != 0)
    fail_msg("%s", why);
  char *o = json_dumps(json_object_get(cand, "options"), JSON_COMPACT);
  printf("  named: %s\n", o);
  assert_non_null(strstr(o, "\"-DMODE_WGMMA_TF32X3=1\""));
  free(o);
  check_nvrtc(cand, "4096 defaults + MODE=wgmma_tf32x3");
  json_decref(cand);
  json_decref(opts);
  json_decref(p);
}

/* ---- the knob check ---- */

/* Asserts that gemm_check refuses k on match (both borrowed) with exactly want. */
static void expect_refusal(json_t *match, const struct knob_set *k, const char *want) {
  char why[512] = "";
  assert_int_equal(gemm_check(match, k, why, sizeof why), -1);
  if (strcmp(why, want) != 0)
    fail_msg("refusal\n  got:  %s\n  want: %s", why, want);
  printf("  refused: %s\n", why);
}

static void test_refusals(void **state) {
  (void)state;
  /* Another device. */
  json_t *p = mm_profile(4096, 4096, 4096, false, false, "8.0", 166912);
  json_t *m = must_match(p);
  struct knob_set k = wgmma_knobs(m, 128, 128, 32, 3, 1);
  expect_refusal(m, &k,
                 "wgmma_tf32x3 needs compute capability 9.0 (sm_90a: wgmma, setmaxnreg); the "
                 "profile's device is 8.0");
  json_decref(m);
  json_decref(p);
  /* A profile that names no device (CPU, meta, a region's) is taken as the H200. */
  p = mm_profile(4096, 4096, 4096, false, false, NULL, 0);
  m = must_match(p);
  char why[512] = "";
  if (gemm_check(m, &k, why, sizeof why) != 0)
    fail_msg("no device named: %s", why);
  /* Too many stages for shared memory: the H200's 227 KiB, then a smaller device limit. */
  k = wgmma_knobs(m, 128, 128, 32, 4, 1);
  expect_refusal(m, &k,
                 "wgmma_tf32x3: shared memory 239680 bytes (STAGES=4 stages of A's tile and B's "
                 "two parts, two raw B tiles, mbarriers) exceeds the device's 232448");
  json_decref(m);
  json_decref(p);
  p = mm_profile(4096, 4096, 4096, false, false, "9.0", 101376);
  m = must_match(p);
  k = wgmma_knobs(m, 128, 128, 16, 4, 1);
  expect_refusal(m, &k,
                 "wgmma_tf32x3: shared memory 123968 bytes (STAGES=4 stages of A's tile and B's "
                 "two parts, two raw B tiles, mbarriers) exceeds the device's 101376");
  /* Tiles outside the warpgroup shapes. */
  k = wgmma_knobs(m, 256, 128, 16, 2, 1);
  expect_refusal(m, &k,
                 "wgmma_tf32x3: BM=256 must be 64 or 128 (64 rows per consumer warpgroup, one or "
                 "two consumers)");
  k = wgmma_knobs(m, 128, 256, 16, 2, 1);
  expect_refusal(m, &k,
                 "wgmma_tf32x3: BN=256 must be 32, 64 or 128 (the wgmma N; each consumer thread "
                 "holds BN/2 accumulators and BN/2 partials)");
  k = wgmma_knobs(m, 128, 128, 64, 2, 1);
  expect_refusal(m, &k, "wgmma_tf32x3: BK=64 must be 8, 16 or 32");
  k = wgmma_knobs(m, 128, 128, 16, 1, 1);
  expect_refusal(m, &k, "wgmma_tf32x3: STAGES=1 must be >= 2");
  json_decref(m);
  json_decref(p);
  /* A shape the tile does not fit: N = 32 leaves most of a 128-wide tile empty. */
  p = mm_profile(65536, 1024, 32, false, true, "9.0", 232448);
  m = must_match(p);
  k = wgmma_knobs(m, 128, 128, 16, 4, 1);
  expect_refusal(m, &k,
                 "wgmma_tf32x3: the 65536x32 output leaves half of a 128x128 tile empty; take "
                 "BM=64 (M <= 64) or a BN under N");
  json_decref(m);
  json_decref(p);
}

/* The proposer never starts from the kernel, and neither the space's grid nor the seed
 * memory's moves name it. */
static void test_never_default(void **state) {
  (void)state;
  const long long sizes[][3] = {{4096, 4096, 4096}, {1000, 777, 1500}, {256, 131072, 256}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    json_t *p = mm_profile(sizes[i][0], sizes[i][1], sizes[i][2], false, false, "9.0", 232448);
    json_t *cand = NULL;
    char why[512] = "";
    bool unsupported = false;
    if (builtin_propose_knobs(p, NULL, NULL, &cand, why, sizeof why, &unsupported) != 0)
      fail_msg("%s", why);
    char *o = json_dumps(json_object_get(cand, "options"), JSON_COMPACT);
    printf("  default %lldx%lldx%lld: %s\n", sizes[i][0], sizes[i][2], sizes[i][1], o);
    assert_null(strstr(o, "WGMMA"));
    free(o);
    json_decref(cand);
    struct builtin_space sp;
    assert_int_equal(space_open(&sp, p, why, sizeof why), 0);
    for (int d = 0; d < sp.ndims; d++)
      for (int v = 0; strcmp(sp.dims[d].knob, "MODE") == 0 && v < sp.dims[d].n; v++)
        assert_string_not_equal(sp.dims[d].modes[v], "wgmma_tf32x3");
    assert_null(strstr(sp.defaults.mode, "wgmma"));
    space_clear(&sp);
    json_decref(p);
  }
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  if (!root || !*root) {
    printf("  seed memory: skipped, OPFORGE_SOURCE_ROOT is not set\n");
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/schema/seed_memory.json", root);
  char *seed = read_file(path);
  assert_non_null(seed);
  assert_null(strstr(seed, "wgmma"));
  free(seed);
}

/* ---- a CPU model of the kernel's 3xTF32 arithmetic ---- */

/* Round to nearest TF32, ties away from zero (cvt.rna.tf32.f32), as a float. */
static float tf32_rna(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u)
    u = (u + 0x1000u) & 0xffffe000u;
  float r;
  memcpy(&r, &u, 4);
  return r;
}

/* The tensor cores' accumulation into an fp32 register, modelled as the exact sum
 * truncated toward zero (they do not round to nearest; this is the pessimistic case). */
static float add_rz(float acc, double s) {
  double e = (double)acc + s;
  float f = (float)e;
  if (fabs((double)f) > fabs(e))
    f = nextafterf(f, 0.0f);
  return f;
}

/* One output of the kernel: per K step of bk (a multiple of 8), for each k8 slice in
 * order the products small*big, big*small, big*big (only big*big when plain) are summed
 * exactly and added into a partial that starts at 0 each step (scale-d 0); the partial is
 * added to the fp32 accumulator with a round-to-nearest add. a and b hold k values each. */
static float kernel_dot(const float *a, const float *b, long long k, int bk, bool plain) {
  float acc = 0.0f;
  for (long long k0 = 0; k0 < k; k0 += bk) {
    float part = 0.0f;
    for (long long s = k0; s < k0 + bk && s < k; s += 8) {
      double prod[3] = {0, 0, 0};
      for (long long kk = s; kk < s + 8 && kk < k; kk++) {
        float ab = tf32_rna(a[kk]), as = tf32_rna(a[kk] - ab);
        float bb = tf32_rna(b[kk]), bs = tf32_rna(b[kk] - bb);
        prod[0] += (double)as * bb;
        prod[1] += (double)ab * bs;
        prod[2] += (double)ab * bb;
      }
      for (int p = plain ? 2 : 0; p < 3; p++)
        part = add_rz(part, prod[p]);
    }
    acc += part;
  }
  return acc;
}

/* Deterministic inputs: uniform [0, 1) or standard normal (Box-Muller). */
static uint64_t rng_state;

static double uniform01(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static float sample(bool normal) {
  if (!normal)
    return (float)uniform01();
  double u = uniform01(), v = uniform01();
  return (float)(sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v));
}

/* Max errors against float64 over an M x N output (rows of A and columns of B as k-long
 * vectors): the kernel's 3xTF32 model, plain TF32, and fp32 eager (sequential FMAs), and
 * the largest |reference|. */
struct errors {
  double x3, plain, eager, ref;
};

/* The errors of the M = N = 4 output over k (inputs drawn here, freed before return). */
static struct errors emulate(long long k, bool normal, int bk) {
  enum { M = 4, N = 4 };
  float *a = malloc(sizeof(float) * (size_t)(M * k)), *b = malloc(sizeof(float) * (size_t)(N * k));
  assert_non_null(a);
  assert_non_null(b);
  rng_state = 0x5eed0000ULL + (uint64_t)k * 2 + normal;
  for (long long i = 0; i < M * k; i++)
    a[i] = sample(normal);
  for (long long i = 0; i < N * k; i++)
    b[i] = sample(normal);
  struct errors e = {0, 0, 0, 0};
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      const float *x = a + i * k, *y = b + j * k;
      double ref = 0;
      float eager = 0.0f;
      for (long long kk = 0; kk < k; kk++) {
        ref += (double)x[kk] * y[kk];
        eager = fmaf(x[kk], y[kk], eager);
      }
      double x3 = kernel_dot(x, y, k, bk, false), plain = kernel_dot(x, y, k, bk, true);
      e.x3 = fmax(e.x3, fabs(x3 - ref));
      e.plain = fmax(e.plain, fabs(plain - ref));
      e.eager = fmax(e.eager, fabs((double)eager - ref));
      e.ref = fmax(e.ref, fabs(ref));
    }
  free(a);
  free(b);
  return e;
}

/* The fp32 tasks' accuracy budget (gpu/evaluator/numerics.py, accuracy_budget, with the
 * default accuracy_factor 8): 8 x eager's error + 1e-6 x the largest |reference|. */
static double budget(const struct errors *e) {
  return 8.0 * e->eager + 1e-6 * e->ref;
}

static void test_emulated_accuracy(void **state) {
  (void)state;
  const long long ks[] = {8, 1024, 131072};
  const int bks[] = {8, 32};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    for (int normal = 0; normal <= 1; normal++)
      for (size_t b = 0; b < sizeof bks / sizeof bks[0]; b++) {
        struct errors e = emulate(ks[i], normal, bks[b]);
        printf("  K=%-6lld %-5s BK=%-2d max|ref| %9.3g  errors: 3xTF32 %9.3g  TF32 %9.3g  fp32 "
               "eager %9.3g  budget %9.3g\n",
               ks[i], normal ? "randn" : "rand", bks[b], e.ref, e.x3, e.plain, e.eager,
               budget(&e));
        assert_true(e.x3 <= budget(&e));
        if (ks[i] == 131072 && normal)
          assert_true(e.plain > budget(&e)); /* the test can fail: plain TF32 does */
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_never_default),
      cmocka_unit_test(test_emulated_accuracy),
      cmocka_unit_test(test_named_knob),
      cmocka_unit_test(test_stages),
      cmocka_unit_test(test_compiles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
