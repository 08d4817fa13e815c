/* Unit tests of the builtin GEMM family: matching of every public GEMM task (through one
 * evaluator process on the meta device), the epilogue translator, refusals of invalid
 * knob moves, generated plans, NVRTC compiles of the templates under every seed-memory
 * move, and a CPU emulation of generated candidates checked against PyTorch. */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm.h"
#include "proposers/builtin/gemm_epilogue.h"
#include "gpu/nvrtc_compile.h"

#include "builtin_testlib.h"

/* ---- environment: source tree, KernelBench, the venv's python ---- */

static const char *source_root(void) {
  const char *r = getenv("OPFORGE_SOURCE_ROOT");
  return r && r[0] ? r : NULL;
}

/* ---- one evaluator process speaking JSON lines (docs/architecture.md, "Evaluator protocol") ---- */

/* The evaluator the tests share (started on first use, stopped by the group teardown). */
static struct evaluator shared_ev;
static bool shared_ev_started;

static struct evaluator *shared_evaluator(void) {
  if (!shared_ev_started)
    shared_ev_started = evaluator_start(&shared_ev);
  return shared_ev_started ? &shared_ev : NULL;
}

/* ---- knob helpers ---- */

/* Applies the move {knob, op, text} to *k: text is an integer, or a MODE name. MODE ""
 * returns to the SIMT kernel: knob_apply_move refuses it (MODE moves set a name), but the
 * defaults of op gemm are the tf32x3 kernel, and the SIMT kernel's refusals, plans and
 * emulations are only reachable from them this way. */
static int move(struct knob_set *k, const char *knob, const char *op, const char *text, char *why,
                size_t whylen) {
  if (strcmp(knob, "MODE") == 0 && strcmp(op, "set") == 0 && text[0] == 0) {
    k->mode[0] = 0;
    return 0;
  }
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  bool is_num = end != text && *end == 0 && errno == 0;
  json_t *m = is_num ? json_pack("{s:s,s:s,s:I}", "knob", knob, "op", op, "value", (json_int_t)v)
                     : json_pack("{s:s,s:s,s:s}", "knob", knob, "op", op, "value", text);
  int rc = knob_apply_move(k, m, why, whylen);
  json_decref(m);
  return rc;
}

/* The comma-joined "ops" of a match stage, "" when the stage is null. */
static void joined_ops(json_t *match, const char *stage, char *buf, size_t len) {
  json_t *ops = json_object_get(json_object_get(match, stage), "ops");
  size_t used = 0, i;
  json_t *o;
  buf[0] = 0;
  json_array_foreach(ops, i, o) {
    int n = snprintf(buf + used, len - used, "%s%s", i ? "," : "", json_string_value(o));
    if (n > 0 && (size_t)n < len - used)
      used += (size_t)n;
  }
}

/* ---- matching every public GEMM task ---- */

struct expect {
  const char *file; /* under kernelbench/ */
  int rc;           /* gemm_match's result */
  const char *op;
  long long batch, m, n, k;
  int ta, tb;
  const char *epi, *tail, *expand; /* comma-joined ops ("" = none) */
  int colstats;
  const char *why; /* rc != 1: a substring of the reason */
};

// clang-format off
static const struct expect expects[] = {
    {"level1/1_Square_matrix_multiplication_.py", 1, "gemm", 1, 4096, 4096, 4096, 0, 0, "", "", "", 0, NULL},
    {"level1/3_Batched_matrix_multiplication.py", 1, "gemm", 128, 512, 2048, 1024, 0, 0, "", "", "", 0, NULL},
    {"level1/4_Matrix_vector_multiplication_.py", 1, "gemv", 1, 2048, 1, 1048576, 0, 0, "", "", "", 0, NULL},
    {"level1/6_Matmul_with_large_K_dimension_.py", 1, "gemm", 1, 256, 256, 524288, 0, 0, "", "", "", 0, NULL},
    {"level1/7_Matmul_with_small_K_dimension_.py", 1, "gemm", 1, 32768, 32768, 64, 0, 0, "", "", "", 0, NULL},
    {"level1/8_Matmul_with_irregular_shapes_.py", 1, "gemm", 1, 8205, 5921, 2949, 0, 0, "", "", "", 0, NULL},
    {"level1/12_Matmul_with_diagonal_matrices_.py", 1, "row_scale", 1, 4096, 4096, 0, 0, 0, "", "", "", 0, NULL},
    {"level1/14_Matmul_for_upper_triangular_matrices.py", 1, "gemm", 1, 4096, 4096, 4096, 0, 0, "triu", "", "", 0, NULL},
    {"level1/15_Matmul_for_lower_triangular_matrices.py", 1, "gemm", 1, 4096, 4096, 4096, 0, 0, "tril", "", "", 0, NULL},
    {"level1/17_Matmul_with_transposed_B.py", 1, "gemm", 1, 2048, 4096, 8192, 0, 1, "", "", "", 0, NULL},
    {"level1/18_Matmul_with_transposed_both.py", 1, "gemm", 1, 2048, 4096, 8192, 1, 1, "", "", "", 0, NULL},
    {"level2/9_Matmul_Subtract_Multiply_ReLU.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,sub,mul,relu", "", "", 0, NULL},
    {"level2/12_Gemm_Multiply_LeakyReLU.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,mul,leaky_relu", "", "", 0, NULL},
    {"level2/14_Gemm_Divide_Sum_Scaling.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "truediv", "sum,mul", "", 0, NULL},
    {"level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "sum", "", 0, NULL},
    {"level2/22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,mul,add,clamp", "lse,mish,mul", "", 0, NULL},
    {"level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "instance_norm,add,mul", "", 0, NULL},
    {"level2/29_Matmul_Mish_Mish.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,mish,mish", "", "", 0, NULL},
    {"level2/33_Gemm_Scale_BatchNorm.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,mul", "batch_norm", "", 1, NULL},
    {"level2/39_Gemm_Scale_BatchNorm.py", 1, "gemm", 1, 16384, 4096, 4096, 0, 1, "bias,mul", "batch_norm", "", 1, NULL},
    {"level2/51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd.py", 1, "gemm", 1, 2048, 8192, 8192, 0, 1, "bias,sub", "mean,gelu", "add", 0, NULL},
    {"level2/53_Gemm_Scaling_Hardtanh_GELU.py", 1, "gemm", 1, 2048, 8192, 8192, 0, 1, "bias,mul,hardtanh,gelu", "", "", 0, NULL},
    {"level2/56_Matmul_Sigmoid_Sum.py", 1, "gemm", 1, 128, 32768, 32768, 0, 1, "bias,sigmoid", "sum", "", 0, NULL},
    {"level2/59_Matmul_Swish_Scaling.py", 1, "gemm", 1, 128, 32768, 32768, 0, 1, "bias,sigmoid,mul,mul", "", "", 0, NULL},
    {"level2/63_Gemm_ReLU_Divide.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,relu,truediv", "", "", 0, NULL},
    {"level2/64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "lse,leaky_relu,leaky_relu,gelu,gelu", "", 0, NULL},
    {"level2/68_Matmul_Min_Subtract.py", 1, "gemm", 1, 128, 16384, 16384, 0, 1, "bias,min,sub", "", "", 0, NULL},
    {"level2/70_Gemm_Sigmoid_Scaling_ResidualAdd.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,sigmoid,mul,add", "", "", 0, NULL},
    {"level2/75_Gemm_GroupNorm_Min_BiasAdd.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "group_norm,min", "add", 0, NULL},
    {"level2/80_Gemm_Max_Subtract_GELU.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "max,sub,gelu", "", 0, NULL},
    {"level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,sigmoid,mul,truediv,clamp,tanh,clamp", "", "", 0, NULL},
    {"level2/84_Gemm_BatchNorm_Scaling_Softmax.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "batch_norm,mul,softmax", "", 1, NULL},
    {"level2/86_Matmul_Divide_GELU.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,truediv,gelu", "", "", 0, NULL},
    {"level2/88_Gemm_GroupNorm_Swish_Multiply_Swish.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "group_norm,sigmoid,mul,mul,sigmoid,mul", "", 0, NULL},
    {"level2/94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias,add,hardtanh,mish", "group_norm", "", 0, NULL},
    {"level2/98_Matmul_AvgPool_GELU_Scale_Max.py", 1, "gemm", 1, 1024, 8192, 8192, 0, 1, "bias", "avg_pool1d,gelu,mul,max", "", 0, NULL},
    /* other families' tasks: not GEMM */
    {"level1/19_ReLU.py", 0, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, "no matmul"},
    {"level1/23_Softmax.py", 0, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, "no matmul"},
    {"level1/97_ScaledDotProductAttention.py", 0, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, "no matmul"},
    {"level2/1_Conv2D_ReLU_BiasAdd.py", 0, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, "convolution"},
    /* level 3: unsupported by the builtin proposer */
    {"level3/1_MLP.py", -1, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, "more than one matmul"},
    {"level3/10_ResNet101.py", 0, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, "convolution"},
};
// clang-format on

/* Checks one public task's match against its expectation; defaults must pass check and
 * generate. */
static void check_expect(const struct expect *e, json_t *profile) {
  json_t *match = NULL;
  char why[512] = "";
  int rc = gemm_match(profile, &match, why, sizeof why);
  printf("%-70s %2d %s\n", e->file, rc,
         rc == 1 ? json_string_value(json_object_get(match, "summary")) : why);
  assert_int_equal(rc, e->rc);
  if (rc != 1) {
    assert_non_null(strstr(why, e->why));
    return;
  }
  assert_string_equal(json_string_value(json_object_get(match, "family")), "gemm");
  assert_string_equal(json_string_value(json_object_get(match, "op")), e->op);
  assert_int_equal(json_integer_value(json_object_get(match, "batch")), e->batch);
  assert_int_equal(json_integer_value(json_object_get(match, "m")), e->m);
  assert_int_equal(json_integer_value(json_object_get(match, "n")), e->n);
  assert_int_equal(json_integer_value(json_object_get(match, "k")), e->k);
  assert_int_equal(json_is_true(json_object_get(match, "trans_a")), e->ta);
  assert_int_equal(json_is_true(json_object_get(match, "trans_b")), e->tb);
  char ops[512];
  joined_ops(match, "epilogue", ops, sizeof ops);
  assert_string_equal(ops, e->epi);
  joined_ops(match, "tail", ops, sizeof ops);
  assert_string_equal(ops, e->tail);
  joined_ops(match, "expand", ops, sizeof ops);
  assert_string_equal(ops, e->expand);
  assert_int_equal(json_is_object(json_object_get(match, "colstats")), e->colstats);
  struct knob_set k;
  gemm_defaults(match, &k);
  assert_int_equal(gemm_check(match, &k, why, sizeof why), 0);
  json_t *cand = NULL;
  assert_int_equal(gemm_generate(match, &k, &cand, why, sizeof why), 0);
  json_decref(cand);
  json_decref(match);
}

static void test_match_public_tasks(void **state) {
  (void)state;
  const char *kb = kernelbench_dir();
  struct evaluator *ev = kb ? shared_evaluator() : NULL;
  if (!ev) {
    skip();
    return;
  }
  for (size_t i = 0; i < sizeof expects / sizeof expects[0]; i++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", kb, expects[i].file);
    char *src = read_file(path);
    if (!src && strncmp(expects[i].file, "level3/", 7) == 0) {
      printf("%s: absent, skipped\n", expects[i].file);
      continue;
    }
    assert_non_null(src);
    json_t *profile = evaluator_profile(ev, expects[i].file, src);
    free(src);
    assert_non_null(profile);
    check_expect(&expects[i], profile);
    json_decref(profile);
  }
}

/* ---- synthetic profiles (no python needed) ---- */

static json_t *tensor_spec(const char *name, int rank, const long long *shape) {
  json_t *s = json_array();
  long long n = 1;
  for (int i = 0; i < rank; i++) {
    json_array_append_new(s, json_integer(shape[i]));
    n *= shape[i];
  }
  return json_pack("{s:s,s:s,s:o,s:I}", "name", name, "dtype", "float32", "shape", s, "numel",
                   (json_int_t)n);
}

static json_t *shape2(long long a, long long b) {
  return json_pack("[I,I]", (json_int_t)a, (json_int_t)b);
}

/* A graph node; args and kwargs stolen, shape stolen (NULL: null). */
static json_t *gnode(const char *name, const char *op, const char *target, json_t *args,
                     json_t *kwargs, json_t *shape) {
  return json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:s}", "name", name, "op", op, "target", target,
                   "args", args, "kwargs", kwargs ? kwargs : json_object(), "shape",
                   shape ? shape : json_null(), "dtype", "float32");
}

static json_t *ref(const char *name) {
  return json_pack("{s:s}", "node", name);
}

/* x [M, K] -> nn.Linear(K, N) (module "gemm") -> body nodes (stolen, may be NULL) ->
 * output = the last node. Out is the output's shape. */
static json_t *linear_profile(long long M, long long K, long long N, json_t *body,
                              const long long *out, int out_rank) {
  long long xs[2] = {M, K}, ws[2] = {N, K}, bs[1] = {N};
  json_t *graph = json_array();
  json_array_append_new(graph, json_pack("{s:s,s:s,s:s,s:s,s:[],s:{},s:o,s:s}", "name", "x", "op",
                                         "placeholder", "target", "x", "tensor", "input:0", "args",
                                         "kwargs", "shape", shape2(M, K), "dtype", "float32"));
  json_t *lin =
      gnode("gemm", "call_module", "Linear", json_pack("[o]", ref("x")), NULL, shape2(M, N));
  json_object_set_new(lin, "attrs",
                      json_pack("{s:I,s:I,s:b}", "in_features", (json_int_t)K, "out_features",
                                (json_int_t)N, "bias", 1));
  json_object_set_new(lin, "params", json_pack("[s,s]", "param:gemm.weight", "param:gemm.bias"));
  json_array_append_new(graph, lin);
  const char *last = "gemm";
  size_t i;
  json_t *n;
  json_array_foreach(body, i, n) {
    json_array_append(graph, n);
    last = json_string_value(json_object_get(n, "name"));
  }
  json_t *o = json_array();
  for (int d = 0; d < out_rank; d++)
    json_array_append_new(o, json_integer(out[d]));
  json_array_append_new(graph, gnode("output", "output", "output", json_pack("[o]", ref(last)),
                                     NULL, json_deep_copy(o)));
  json_t *p = json_pack(
      "{s:[o],s:[o,o],s:[o],s:o,s:s}", "inputs", tensor_spec("input:0", 2, xs), "params",
      tensor_spec("param:gemm.weight", 2, ws), tensor_spec("param:gemm.bias", 1, bs), "outputs",
      tensor_spec("output:0", out_rank, out), "graph", graph, "graph_source", "fx");
  json_decref(o);
  json_decref(body);
  return p;
}

/* Linear(K, N), * 2.0, LeakyReLU(0.1): level 2 task 12's chain. */
static json_t *leaky_profile(long long M, long long K, long long N) {
  json_t *leaky = gnode("leaky_relu", "call_module", "LeakyReLU", json_pack("[o]", ref("mul")),
                        NULL, shape2(M, N));
  json_object_set_new(leaky, "attrs", json_pack("{s:f,s:b}", "negative_slope", 0.1, "inplace", 0));
  json_t *body = json_pack("[o,o]",
                           gnode("mul", "call_function", "operator.mul",
                                 json_pack("[o,f]", ref("gemm"), 2.0), NULL, shape2(M, N)),
                           leaky);
  long long out[2] = {M, N};
  return linear_profile(M, K, N, body, out, 2);
}

/* Linear(K, N), mean over the features, GELU, + x (level 2 task 51's tail and broadcast). */
static json_t *mean_expand_profile(long long M, long long K, long long N) {
  json_t *body =
      json_pack("[o,o,o]",
                gnode("mean", "call_function", "torch.mean", json_pack("[o]", ref("gemm")),
                      json_pack("{s:i,s:b}", "dim", 1, "keepdim", 1), shape2(M, 1)),
                gnode("gelu", "call_function", "torch.nn.functional.gelu",
                      json_pack("[o]", ref("mean")), NULL, shape2(M, 1)),
                gnode("add", "call_function", "operator.add",
                      json_pack("[o,o]", ref("gelu"), ref("x")), NULL, shape2(M, K)));
  long long out[2] = {M, K};
  return linear_profile(M, K, N, body, out, 2);
}

/* A [M, K] (or [K, M] used as A.T) @ B [K, N] (or [N, K] used as B.T). */
static json_t *mm_profile(long long M, long long K, long long N, bool ta, bool tb) {
  long long as[2] = {ta ? K : M, ta ? M : K}, bs[2] = {tb ? N : K, tb ? K : N}, os[2] = {M, N};
  json_t *graph = json_array();
  json_array_append_new(graph,
                        json_pack("{s:s,s:s,s:s,s:s,s:[],s:{},s:o,s:s}", "name", "a", "op",
                                  "placeholder", "target", "A", "tensor", "input:0", "args",
                                  "kwargs", "shape", shape2(as[0], as[1]), "dtype", "float32"));
  json_array_append_new(graph,
                        json_pack("{s:s,s:s,s:s,s:s,s:[],s:{},s:o,s:s}", "name", "b", "op",
                                  "placeholder", "target", "B", "tensor", "input:1", "args",
                                  "kwargs", "shape", shape2(bs[0], bs[1]), "dtype", "float32"));
  if (ta)
    json_array_append_new(graph, gnode("at", "call_function", "getattr",
                                       json_pack("[o,s]", ref("a"), "T"), NULL, shape2(M, K)));
  if (tb)
    json_array_append_new(graph, gnode("bt", "call_function", "getattr",
                                       json_pack("[o,s]", ref("b"), "T"), NULL, shape2(K, N)));
  json_array_append_new(graph, gnode("matmul", "call_function", "torch.matmul",
                                     json_pack("[o,o]", ref(ta ? "at" : "a"), ref(tb ? "bt" : "b")),
                                     NULL, shape2(M, N)));
  json_array_append_new(graph, gnode("output", "output", "output", json_pack("[o]", ref("matmul")),
                                     NULL, shape2(M, N)));
  return json_pack("{s:[o,o],s:[],s:[o],s:o,s:s}", "inputs", tensor_spec("input:0", 2, as),
                   tensor_spec("input:1", 2, bs), "params", "outputs",
                   tensor_spec("output:0", 2, os), "graph", graph, "graph_source", "fx");
}

/* The match of a profile (stolen); fails the test unless it matches. */
static json_t *must_match(json_t *profile) {
  json_t *m = NULL;
  char why[512] = "";
  int rc = gemm_match(profile, &m, why, sizeof why);
  if (rc != 1)
    printf("match: %d %s\n", rc, why);
  assert_int_equal(rc, 1);
  json_decref(profile);
  return m;
}

/* ---- the epilogue translator ---- */

/* Resolves "x" to v0, "bias" to a [64] tensor, "row" to a [32, 1] tensor, constants as
 * themselves. */
static int test_resolve(void *ctx, json_t *arg, struct epi_value *ret, char *why, size_t whylen) {
  (void)ctx;
  const char *n = json_string_value(json_object_get(arg, "node"));
  struct epi_value v = {0};
  if (!n) {
    if (!json_is_number(arg)) {
      snprintf(why, whylen, "bad constant");
      return -1;
    }
    v.kind = EPI_CONST;
    v.c = json_number_value(arg);
  } else if (strcmp(n, "x") == 0) {
    v.kind = EPI_VAR;
  } else if (strcmp(n, "bias") == 0) {
    v = (struct epi_value){.kind = EPI_TENSOR, .tensor = "param:bias", .rank = 1, .shape = {64}};
  } else if (strcmp(n, "row") == 0) {
    v = (struct epi_value){.kind = EPI_TENSOR, .tensor = "input:1", .rank = 2, .shape = {32, 1}};
  } else {
    snprintf(why, whylen, "unknown node %s", n);
    return -1;
  }
  *ret = v;
  return 0;
}

/* Translates one node (stolen) over a 32 x 64 stage; returns its statement or the error. */
static void translate(json_t *node, int expect_rc, const char *expect) {
  struct epi_prog p;
  assert_int_equal(epi_prog_init(&p, 32, 64), 0);
  int var = -1;
  char why[256] = "";
  int rc = epi_translate(&p, node, test_resolve, NULL, &var, why, sizeof why);
  assert_int_equal(rc, expect_rc);
  if (rc == 0) {
    assert_int_equal(var, 1);
    assert_string_equal(json_string_value(json_array_get(p.stmts, 0)), expect);
  } else {
    assert_string_equal(why, expect);
    assert_int_equal(json_array_size(p.stmts), 0);
  }
  epi_prog_clear(&p);
  json_decref(node);
}

static json_t *pw(const char *op, const char *target, json_t *args, json_t *kwargs) {
  return gnode("y", op, target, args, kwargs, shape2(32, 64));
}

static void test_epilogue_ops(void **state) {
  (void)state;
  translate(pw("call_function", "torch.nn.functional.leaky_relu", json_pack("[o]", ref("x")),
               json_pack("{s:f}", "negative_slope", 0.2)),
            0, "float v1 = v0 > 0.0f ? v0 : v0 * 0.200000003f;");
  translate(pw("call_function", "torch.nn.functional.gelu", json_pack("[o]", ref("x")),
               json_pack("{s:s}", "approximate", "tanh")),
            0, "float v1 = ofg_gelu_tanhf(v0);");
  translate(pw("call_function", "operator.add", json_pack("[o,o]", ref("x"), ref("bias")), NULL), 0,
            "float v1 = v0 + OFG_LDG(e0 + col);");
  translate(pw("call_function", "operator.mul", json_pack("[o,o]", ref("row"), ref("x")), NULL), 0,
            "float v1 = OFG_LDG(e0 + row) * v0;");
  translate(pw("call_function", "torch.add", json_pack("[o,o]", ref("x"), ref("bias")),
               json_pack("{s:f}", "alpha", 2.0)),
            0, "float v1 = v0 + 2.0f * OFG_LDG(e0 + col);");
  translate(pw("call_function", "torch.rsub", json_pack("[o,f]", ref("x"), 1.0), NULL), 0,
            "float v1 = 1.0f - v0;");
  translate(pw("call_function", "torch.clamp", json_pack("[o]", ref("x")),
               json_pack("{s:f}", "min", -1.0)),
            0, "float v1 = ofg_maxf(v0, (-1.0f));");
  translate(pw("call_method", "clamp", json_pack("[o,f,f]", ref("x"), -2.5, 2.5), NULL), 0,
            "float v1 = ofg_minf(ofg_maxf(v0, (-2.5f)), 2.5f);");
  translate(pw("call_function", "torch.triu", json_pack("[o,i]", ref("x"), 1), NULL), 0,
            "float v1 = (col - row >= 1LL) ? v0 : 0.0f;");
  json_t *ht = pw("call_module", "Hardtanh", json_pack("[o]", ref("x")), NULL);
  json_object_set_new(ht, "attrs", json_pack("{s:f,s:f}", "min_val", -3.0, "max_val", 3.0));
  translate(ht, 0, "float v1 = ofg_minf(ofg_maxf(v0, (-3.0f)), 3.0f);");
  translate(pw("call_function", "torch.pow", json_pack("[o,f]", ref("x"), 2.0), NULL), 0,
            "float v1 = v0 * v0;");
}

static void test_epilogue_refusals(void **state) {
  (void)state;
  json_t *where =
      pw("call_function", "torch.where", json_pack("[o,o,o]", ref("x"), ref("x"), ref("x")), NULL);
  assert_false(epi_is_pointwise(where));
  translate(where, -1, "unsupported op torch.where");
  translate(
      pw("call_function", "torch.nn.functional.dropout", json_pack("[o,f]", ref("x"), 0.5), NULL),
      -1, "dropout with p=0.5 in training mode is random");
  translate(pw("call_function", "torch.div", json_pack("[o,f]", ref("x"), 2.0),
               json_pack("{s:s}", "rounding_mode", "floor")),
            -1, "torch.div: unsupported rounding_mode");
  translate(pw("call_function", "torch.nn.functional.gelu", json_pack("[o]", ref("x")),
               json_pack("{s:s}", "approximate", "fast")),
            -1, "torch.nn.functional.gelu: unsupported approximate");
  json_t *wrong = gnode("y", "call_function", "operator.add",
                        json_pack("[o,o]", ref("x"), ref("bias")), NULL, shape2(64, 32));
  translate(wrong, -1, "operand param:bias does not broadcast to the result's shape");
  json_t *big = gnode("y", "call_function", "operator.add", json_pack("[o,o]", ref("x"), ref("x")),
                      NULL, shape2(64, 64));
  translate(big, -1, "operator.add: result shape is not a view of the 32 x 64 stage");
  json_t *cmp = pw("call_function", "operator.gt", json_pack("[o,f]", ref("x"), 0.0), NULL);
  json_object_set_new(cmp, "dtype", json_string("bool"));
  translate(cmp, -1, "operator.gt: result is not float32");
  /* torch.max with a dim is a reduction, not the elementwise maximum. */
  json_t *mx = pw("call_function", "torch.max", json_pack("[o,i]", ref("x"), 1), NULL);
  assert_false(epi_is_pointwise(mx));
  json_decref(mx);
}

static void test_epilogue_emit(void **state) {
  (void)state;
  struct epi_prog p;
  assert_int_equal(epi_prog_init(&p, 32, 64), 0);
  int v1, v2;
  char why[128];
  json_t *n1 = pw("call_function", "operator.add", json_pack("[o,o]", ref("x"), ref("bias")), NULL);
  assert_int_equal(epi_translate(&p, n1, test_resolve, NULL, &v1, why, sizeof why), 0);
  json_t *n2 = pw("call_function", "torch.sigmoid", json_pack("[o]", ref("x")), NULL);
  assert_int_equal(epi_translate(&p, n2, test_resolve, NULL, &v2, why, sizeof why), 0);
  char *fn = epi_emit_function(&p, "ofg_epi", v2);
  assert_string_equal(fn, "__device__ __forceinline__ float ofg_epi(float v0, i64 row, i64 col, "
                          "const float* __restrict__ e0) {\n"
                          "  (void)row; (void)col;\n"
                          "  float v1 = v0 + OFG_LDG(e0 + col);\n"
                          "  float v2 = ofg_sigmoidf(v0);\n"
                          "  return v2;\n}\n");
  const char *args[] = {"t7"};
  char *call = epi_emit_call(&p, "ofg_epi", "x", "r", "c", args);
  assert_string_equal(call, "ofg_epi(x, r, c, t7)");
  free(fn);
  free(call);
  json_decref(n1);
  json_decref(n2);
  epi_prog_clear(&p);
  epi_prog_clear(NULL);
}

/* ---- refusals of invalid moves ---- */

/* Applies moves (NULL-terminated triples knob, op, value-or-mode) to the defaults and
 * expects check() to refuse with exactly want. */
static void expect_refusal(json_t *match, const char *want, const char *const *moves) {
  struct knob_set k;
  gemm_defaults(match, &k);
  char why[512] = "";
  for (size_t i = 0; moves[i]; i += 3) {
    if (move(&k, moves[i], moves[i + 1], moves[i + 2], why, sizeof why) != 0) {
      assert_string_equal(why, want);
      return;
    }
  }
  assert_int_equal(gemm_check(match, &k, why, sizeof why), -1);
  assert_string_equal(why, want);
  json_t *cand = NULL;
  assert_int_equal(gemm_generate(match, &k, &cand, why, sizeof why), -1);
  assert_null(cand);
}

#define MOVES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Back to the SIMT kernel at its own defaults (8-deep K steps, double-buffered, its own
 * MINB). The defaults of the two linear shapes below are the tf32x3 kernel (16-deep steps,
 * 3 or 4 stages, MINB 2); BM, BN, TM, TN and SPLIT are the same for both kernels there. */
#define SIMT "MODE", "set", "", "BK", "set", "8", "STAGES", "set", "2", "MINB", "set", "0"

static void test_refusals(void **state) {
  (void)state;
  json_t *lin = must_match(leaky_profile(1024, 8192, 8192));
  /* The tf32x3 defaults: knobs only the SIMT kernel reads are refused by name. */
  expect_refusal(lin, "BLOCK is not used by gemm tf32x3", MOVES("BLOCK", "set", "256"));
  expect_refusal(lin, "VEC is not used by gemm tf32x3", MOVES("VEC", "set", "4"));
  expect_refusal(lin, "ITEMS is not used by gemm tf32x3", MOVES("ITEMS", "mul", "2"));
  expect_refusal(lin, "BN would become 512, outside [8, 256]",
                 MOVES("BN", "mul", "2", "BN", "mul", "2"));
  /* 6 stages x 2 k-contiguous tiles of 128 x (128+4) floats x 4 bytes = 811008. */
  expect_refusal(lin, "shared memory 811008 bytes exceeds 227 KiB",
                 MOVES("BK", "set", "128", "STAGES", "set", "6"));
  /* 16 x 16 outputs: 256 accumulators + 2*16 + 16 fragment registers + 40 = 344, over
   * the 255 a thread can have (64 threads x MINB 2 would leave each 512). */
  expect_refusal(lin,
                 "registers: TM*TN=256 outputs per thread need about 344 registers with "
                 "3xTF32, above the cap of 255 (MINB=2)",
                 MOVES("TM", "set", "16", "TN", "set", "16"));
  /* 8 x 8 outputs need 64 + 16 + 8 + 40 = 128 registers: two blocks of 256 threads fit
   * (the defaults), four leave 65536 / (256 x 4) = 64. */
  expect_refusal(lin,
                 "registers: TM*TN=64 outputs per thread need about 128 registers with "
                 "3xTF32, above the cap of 64 (MINB=4)",
                 MOVES("MINB", "set", "4"));
  expect_refusal(lin, "tf32x3: BK=4 must be a multiple of 8 (the mma k)",
                 MOVES("BK", "set", "4"));
  expect_refusal(lin, "tf32x3 pipelines with cp.async: STAGES must be >= 2",
                 MOVES("MODE", "set", "3xtf32", "STAGES", "set", "1"));
  /* A MODE move replaces tf32x3: these are refused whichever kernel they leave. */
  expect_refusal(lin,
                 "fused_epilogue: the epilogue is always fused into the GEMM's store (or the "
                 "split-K reduction)",
                 MOVES("MODE", "set", "fused_epilogue"));
  expect_refusal(lin,
                 "epilogue_partials: the row tail reads the GEMM output in a second launch "
                 "(under 1% of the GEMM's time here)",
                 MOVES("MODE", "set", "epilogue_partials"));
  expect_refusal(lin, "MODE grid_stride does not apply to gemm",
                 MOVES("MODE", "set", "grid_stride"));
  /* The SIMT kernel. */
  expect_refusal(lin,
                 "BLOCK: gemm derives its threads from the tiles, (BM/TM)*(BN/TN); move BM, "
                 "BN, TM or TN instead",
                 MOVES(SIMT, "BLOCK", "set", "256"));
  expect_refusal(lin, "ITEMS is not used by gemm", MOVES(SIMT, "ITEMS", "mul", "2"));
  /* 6 stages x 128 x (128+4 + 128+4) floats x 4 bytes = 811008 again. */
  expect_refusal(lin,
                 "shared memory 811008 bytes (STAGES x BK x (BM+BN+pads) x 4) exceeds 227 KiB",
                 MOVES(SIMT, "BK", "set", "128", "STAGES", "set", "6"));
  expect_refusal(lin,
                 "VEC=4 applies to no operand: k-contiguous operands are copied one float at a "
                 "time by cp.async (STAGES>1), and no M/N-contiguous operand has an extent "
                 "divisible by it",
                 MOVES(SIMT, "VEC", "set", "4"));
  /* 256 accumulators + 16 + 16 + 40 = 328. */
  expect_refusal(lin,
                 "registers: TM*TN=256 accumulators need about 328 registers, above the cap "
                 "of 255 (MINB=0)",
                 MOVES(SIMT, "TM", "set", "16", "TN", "set", "16"));
  expect_refusal(lin, "UNROLL=16: must divide BK=8 and be smaller (the default unrolls BK fully)",
                 MOVES(SIMT, "UNROLL", "set", "16"));
  expect_refusal(lin, "MINB=2 is already the SIMT kernel's default for 256 threads of 8x8 outputs",
                 MOVES(SIMT, "MINB", "set", "2"));
  json_decref(lin);

  /* 33 x 72 outputs, K = 48: tf32x3 with BK 16 and 3 stages (the 3 K steps). */
  json_t *small = must_match(leaky_profile(33, 48, 72));
  /* SPLIT=4 slices K into ceil(48 / 4) = 12, one BK=16 step: fewer than the 3 stages. */
  expect_refusal(small, "STAGES=3 exceeds the 1 K steps of BK=16", MOVES("SPLIT", "set", "4"));
  /* At BK 8 the 12 round up to 16 per slice, and the fourth starts at 3 x 16 = K. */
  expect_refusal(small, "SPLIT=4 leaves empty K slices (K=48, BK=8)",
                 MOVES("BK", "set", "8", "STAGES", "set", "2", "SPLIT", "set", "4"));
  expect_refusal(small, "SPLIT=4 leaves empty K slices (K=48, BK=8)",
                 MOVES(SIMT, "SPLIT", "set", "4"));
  expect_refusal(small, "persistent: the 1 tiles already fit one wave",
                 MOVES("MODE", "set", "persistent"));
  expect_refusal(small,
                 "predicated_tail: the shape already uses the predicated path (M, N or K not "
                 "divisible by the tile)",
                 MOVES("MODE", "set", "predicated_tail"));
  expect_refusal(small, "STAGES=6 exceeds the 3 K steps of BK=16",
                 MOVES("BK", "set", "16", "STAGES", "set", "6"));
  expect_refusal(small, "STAGES=6 exceeds the 3 K steps of BK=16",
                 MOVES(SIMT, "BK", "set", "16", "STAGES", "set", "6"));
  json_decref(small);

  json_t *gemv = must_match(mm_profile(2048, 4097, 1, false, false));
  expect_refusal(gemv, "BM is not used by gemv", MOVES("BM", "set", "128"));
  expect_refusal(gemv, "VEC=4 does not divide the contiguous length 4097",
                 MOVES("VEC", "set", "4"));
  expect_refusal(gemv, "MODE persistent does not apply to gemv",
                 MOVES("MODE", "set", "persistent"));
  json_decref(gemv);

  json_t *huge = must_match(mm_profile(65536, 64, 32768, false, false));
  expect_refusal(huge, "idx64: the operands already need 64-bit indexing",
                 MOVES("MODE", "set", "idx64"));
  json_decref(huge);
}

/* ---- generated plans, computed by hand ---- */

static json_t *launch_at(json_t *cand, size_t i) {
  return json_array_get(json_object_get(json_object_get(cand, "plan"), "launches"), i);
}

static void assert_launch(json_t *l, const char *kernel, long long gx, long long gy, long long gz,
                          int bx, long long shared, const char *args) {
  assert_string_equal(json_string_value(json_object_get(l, "kernel")), kernel);
  json_t *g = json_object_get(l, "grid"), *b = json_object_get(l, "block");
  assert_int_equal(json_integer_value(json_array_get(g, 0)), gx);
  assert_int_equal(json_integer_value(json_array_get(g, 1)), gy);
  assert_int_equal(json_integer_value(json_array_get(g, 2)), gz);
  assert_int_equal(json_integer_value(json_array_get(b, 0)), bx);
  assert_int_equal(json_integer_value(json_object_get(l, "shared_bytes")), shared);
  char *a = json_dumps(json_object_get(l, "args"), JSON_COMPACT);
  assert_string_equal(a, args);
  free(a);
}

static json_t *generate_with(json_t *match, const char *const *moves) {
  struct knob_set k;
  gemm_defaults(match, &k);
  char why[512] = "";
  for (size_t i = 0; moves && moves[i]; i += 3) {
    if (move(&k, moves[i], moves[i + 1], moves[i + 2], why, sizeof why) != 0)
      fail_msg("%s %s %s: %s", moves[i], moves[i + 1], moves[i + 2], why);
  }
  json_t *cand = NULL;
  if (gemm_generate(match, &k, &cand, why, sizeof why) != 0)
    printf("generate: %s\n", why);
  assert_non_null(cand);
  return cand;
}

static void test_plan_linear(void **state) {
  (void)state;
  const char *args = "[{\"tensor\":\"input:0\"},{\"tensor\":\"param:gemm.weight\"},"
                     "{\"tensor\":\"output:0\"},{\"tensor\":\"param:gemm.bias\"}]";
  json_t *m = must_match(leaky_profile(1024, 8192, 8192));
  json_t *c = generate_with(m, NULL);
  /* The default is tf32x3: 8 x 64 tiles of 128 x 128; 4 stages of two k-contiguous
   * [128][16+4] tiles: 4 x (128*20 + 128*20) x 4 bytes = 81920; two blocks per SM. */
  assert_launch(launch_at(c, 0), "gemm_main", 512, 1, 1, 256, 81920, args);
  char *opts = json_dumps(json_object_get(c, "options"), JSON_COMPACT);
  assert_string_equal(opts, "[\"-DBM=128\",\"-DBN=128\",\"-DBK=16\",\"-DTM=8\",\"-DTN=8\","
                            "\"-DSTAGES=4\",\"-DMINB=2\",\"-DSPLIT=1\",\"-DMODE_TF32X3=1\"]");
  free(opts);
  const char *src = json_string_value(json_object_get(c, "source"));
  assert_non_null(strstr(src, "#define OFG_TF32X3 1\n"));
  assert_non_null(strstr(src, "#define OFG_MIN_BLOCKS 2\n"));
  assert_non_null(strstr(src, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
  assert_non_null(strstr(src, "#define OFG_TRANS_B 1\n"));
  /* K = 8192 is a multiple of 4: both k-contiguous operands load 16 bytes per cp.async. */
  assert_non_null(strstr(src, "#define OFG_VEC_A 4\n#define OFG_VEC_B 4\n"));
  assert_non_null(strstr(src, "float v2 = v1 * 2.0f;"));
  assert_non_null(strstr(src, "float v3 = v2 > 0.0f ? v2 : v2 * 0.100000001f;"));
  assert_int_equal(json_array_size(json_object_get(json_object_get(c, "plan"), "buffers")), 0);
  json_decref(c);

  /* tf32x3 at BK 8, 2 stages: 2 x (128*12 + 128*12) x 4 bytes = 24576. */
  c = generate_with(m, MOVES("BK", "set", "8", "STAGES", "set", "2"));
  assert_launch(launch_at(c, 0), "gemm_main", 512, 1, 1, 256, 24576, args);
  json_decref(c);

  /* The SIMT kernel: 2 stages x 8 x (128+4 + 128+4) floats x 4 bytes = 16896 (both
   * operands are k-contiguous, so both tiles are padded for the transposing copies), and
   * two blocks per SM by default. */
  c = generate_with(m, MOVES(SIMT));
  assert_launch(launch_at(c, 0), "gemm_main", 512, 1, 1, 256, 16896, args);
  opts = json_dumps(json_object_get(c, "options"), JSON_COMPACT);
  assert_string_equal(opts, "[\"-DBM=128\",\"-DBN=128\",\"-DBK=8\",\"-DTM=8\",\"-DTN=8\","
                            "\"-DSTAGES=2\",\"-DSPLIT=1\"]");
  free(opts);
  src = json_string_value(json_object_get(c, "source"));
  assert_null(strstr(src, "#define OFG_TF32X3 1\n"));
  assert_non_null(strstr(src, "#define OFG_MIN_BLOCKS 2\n"));
  assert_non_null(strstr(src, "#define OFG_PAD_A 4\n#define OFG_PAD_B 4\n"));
  json_decref(c);

  /* SPLIT=4 on the tf32x3 defaults, with MINB back to 0 (split-K does not fit two
   * blocks' 128 registers): 4 K slices in grid z into 4 x 1024 x 8192 floats of
   * partials (134217728 bytes), reduced by 1024 x 8192 / 4 floats per thread / 256 =
   * 8192 blocks. */
  c = generate_with(m, MOVES("MINB", "set", "0", "SPLIT", "set", "4"));
  assert_launch(launch_at(c, 0), "gemm_main", 512, 1, 4, 256, 81920,
                "[{\"tensor\":\"input:0\"},{\"tensor\":\"param:gemm.weight\"},"
                "{\"buffer\":\"partials\"},{\"tensor\":\"param:gemm.bias\"}]");
  assert_launch(launch_at(c, 1), "gemm_splitk", 8192, 1, 1, 256, 0,
                "[{\"buffer\":\"partials\"},{\"tensor\":\"output:0\"},"
                "{\"tensor\":\"param:gemm.bias\"}]");
  char *bufs = json_dumps(json_object_get(json_object_get(c, "plan"), "buffers"), JSON_COMPACT);
  assert_string_equal(bufs, "[{\"name\":\"partials\",\"bytes\":134217728}]");
  free(bufs);
  json_decref(c);

  /* Persistent on the SIMT kernel: 132 SMs x its default 2 blocks per SM. */
  c = generate_with(m, MOVES(SIMT, "MODE", "set", "persistent"));
  assert_launch(launch_at(c, 0), "gemm_main", 264, 1, 1, 256, 16896, args);
  json_decref(c);
  /* MODE persistent replaces tf32x3 on the defaults: a SIMT kernel at BK 16, 4 stages
   * (4 x 16 x 264 floats x 4 = 67584 bytes). Keeping MINB 2 is refused (the SIMT kernel
   * spills under 128 registers with 16-deep, 4-stage K steps); with MINB 0 its occupancy
   * is min(2048 / 256, 233472 / (67584 + 1024), 65536 / (256 x 120 estimated
   * registers)) = min(8, 3, 2) = 2 blocks per SM: 264 blocks again. */
  expect_refusal(m,
                 "MINB=2 caps the SIMT kernel at 128 registers, and with BK=16, STAGES=4, "
                 "batched, split or 64-bit addressing it spills under that cap",
                 MOVES("MODE", "set", "persistent"));
  c = generate_with(m, MOVES("MINB", "set", "0", "MODE", "set", "persistent"));
  assert_launch(launch_at(c, 0), "gemm_main", 264, 1, 1, 256, 67584, args);
  assert_non_null(strstr(json_string_value(json_object_get(c, "source")),
                         "#define OFG_MIN_BLOCKS 0\n"));
  json_decref(c);
  json_decref(m);
}

static void test_plan_tail_expand(void **state) {
  (void)state;
  json_t *m = must_match(mean_expand_profile(2048, 8192, 8192));
  json_t *c = generate_with(m, NULL);
  /* tf32x3: 16 x 64 tiles of 128 x 128, 4 stages x (128*(16+4) + 128*(16+4)) x 4 bytes. */
  assert_launch(launch_at(c, 0), "gemm_main", 1024, 1, 1, 256, 81920,
                "[{\"tensor\":\"input:0\"},{\"tensor\":\"param:gemm.weight\"},"
                "{\"buffer\":\"gemm_out\"},{\"tensor\":\"param:gemm.bias\"}]");
  /* One block per row, the 8192-float row plus 32 floats of reduction scratch. */
  assert_launch(launch_at(c, 1), "gemm_tail", 2048, 1, 1, 256, 32896,
                "[{\"buffer\":\"gemm_out\"},{\"buffer\":\"tail_out\"}]");
  assert_launch(launch_at(c, 2), "gemm_expand", 65536, 1, 1, 256, 0,
                "[{\"tensor\":\"output:0\"},{\"buffer\":\"tail_out\"},{\"tensor\":\"input:0\"}]");
  char *bufs = json_dumps(json_object_get(json_object_get(c, "plan"), "buffers"), JSON_COMPACT);
  assert_string_equal(bufs, "[{\"name\":\"gemm_out\",\"bytes\":67108864},"
                            "{\"name\":\"tail_out\",\"bytes\":8192}]");
  free(bufs);
  const char *src = json_string_value(json_object_get(c, "source"));
  assert_non_null(strstr(src, "  s = ofg_tail_sum(row, n, red) / (float)n;\n"));
  assert_non_null(strstr(src, "float v1 = OFG_LDG(e0 + row) + OFG_LDG(e1 + row * 8192LL + col);"));
  json_decref(c);
  json_decref(m);

  m = must_match(mm_profile(2048, 4096, 1, false, false));
  c = generate_with(m, NULL);
  assert_launch(launch_at(c, 0), "gemv_main", 2048, 1, 1, 256, 0,
                "[{\"tensor\":\"input:0\"},{\"tensor\":\"input:1\"},{\"tensor\":\"output:0\"}]");
  char *opts = json_dumps(json_object_get(c, "options"), JSON_COMPACT);
  assert_string_equal(opts, "[\"-DBLOCK=256\",\"-DVEC=4\",\"-DUNROLL=4\"]");
  free(opts);
  json_decref(c);
  json_decref(m);
}

/* ---- NVRTC compiles under every seed-memory move ---- */

/* Linear(K, N) then BatchNorm1d (training) and softmax: colstats and the row tail. */
static json_t *bn_softmax_profile(long long M, long long K, long long N) {
  json_t *bn =
      gnode("bn", "call_module", "BatchNorm1d", json_pack("[o]", ref("gemm")), NULL, shape2(M, N));
  json_object_set_new(bn, "attrs", json_pack("{s:f,s:b}", "eps", 1e-5, "affine", 1));
  json_object_set_new(bn, "params", json_pack("[s,s]", "param:bn.weight", "param:bn.bias"));
  json_t *body =
      json_pack("[o,o]", bn,
                gnode("softmax", "call_function", "torch.softmax", json_pack("[o]", ref("bn")),
                      json_pack("{s:i}", "dim", 1), shape2(M, N)));
  long long out[2] = {M, N}, ws[1] = {N};
  json_t *p = linear_profile(M, K, N, body, out, 2);
  json_array_append_new(json_object_get(p, "params"), tensor_spec("param:bn.weight", 1, ws));
  json_array_append_new(json_object_get(p, "params"), tensor_spec("param:bn.bias", 1, ws));
  return p;
}

/* a.unsqueeze(1) * B: diag(a) @ B as KernelBench writes it. */
static json_t *row_scale_profile(long long N, long long M) {
  long long as[1] = {N}, bs[2] = {N, M};
  json_t *graph = json_pack(
      "[{s:s,s:s,s:s,s:s,s:[],s:{},s:[I],s:s},{s:s,s:s,s:s,s:s,s:[],s:{},s:o,s:s},o,o,o]", "name",
      "a", "op", "placeholder", "target", "A", "tensor", "input:0", "args", "kwargs", "shape",
      (json_int_t)N, "dtype", "float32", "name", "b", "op", "placeholder", "target", "B", "tensor",
      "input:1", "args", "kwargs", "shape", shape2(N, M), "dtype", "float32",
      gnode("unsqueeze", "call_method", "unsqueeze", json_pack("[o,i]", ref("a"), 1), NULL,
            shape2(N, 1)),
      gnode("mul", "call_function", "operator.mul", json_pack("[o,o]", ref("unsqueeze"), ref("b")),
            NULL, shape2(N, M)),
      gnode("output", "output", "output", json_pack("[o]", ref("mul")), NULL, shape2(N, M)));
  return json_pack("{s:[o,o],s:[],s:[o],s:o,s:s}", "inputs", tensor_spec("input:0", 1, as),
                   tensor_spec("input:1", 2, bs), "params", "outputs",
                   tensor_spec("output:0", 2, bs), "graph", graph, "graph_source", "fx");
}

/* Knob sets compiled (or sharing a compiled source), refused, and over the spill budget. */
struct tally {
  int ok, refused, over;
};

/* Compiles cand with NVRTC for sm_90a; the test fails on any error, and counts a spill
 * over the budget in t (the test fails after listing them all). Skips sources already
 * compiled (many moves leave the code unchanged for some shapes). */
static void compile_candidate(json_t *cand, json_t *seen, const char *what, struct tally *t) {
  json_t *opts = json_object_get(cand, "options");
  char *key_opts = json_dumps(opts, JSON_COMPACT);
  const char *src = json_string_value(json_object_get(cand, "source"));
  size_t klen = strlen(src) + strlen(key_opts) + 1;
  char *key = malloc(klen + 1);
  snprintf(key, klen + 1, "%s%s", key_opts, src);
  free(key_opts);
  bool dup = json_object_get(seen, key) != NULL;
  json_object_set_new(seen, key, json_true());
  free(key);
  if (dup)
    return;
  const char *ov[NVRTC_MAX_OPTIONS];
  size_t n = json_array_size(opts);
  assert_true(n <= NVRTC_MAX_OPTIONS);
  for (size_t i = 0; i < n; i++)
    ov[i] = json_string_value(json_array_get(opts, i));
  struct compile_request req = {src, ov, n, "sm_90a", GPU_PREC_FP32, NULL};
  struct compile_result r;
  assert_int_equal(nvrtc_compile(&req, &r), 0);
  if (!r.ok)
    printf("%s: compile failed:\n%s\n", what, r.log);
  assert_true(r.ok);
  /* A knob set the seed memory can reach must not spill on these shapes, except a little
   * for tf32x3: its defaults cap it at 128 registers (MINB 2) so that two blocks fit an
   * SM, the fastest configuration measured on the H200, where ptxas may spill a few
   * bytes (8-16 seen on the 1024x8192x8192 linear default, 16 on A^T B^T at 2 stages). */
  bool tf32 = strstr(src, "#define OFG_TF32X3 1\n") != NULL;
  bool over = r.spills > (tf32 ? 16 : 0);
  printf("  %-48s registers %3d spills %ld%s\n", what, r.registers, r.spills,
         over ? "  OVER BUDGET" : "");
  t->over += over;
  compile_result_clear(&r);
}

/* The seed memory's knob moves for the gemm family (caller owns), or NULL. */
static json_t *gemm_moves(void) {
  const char *root = source_root();
  if (!root)
    return NULL;
  char path[1024];
  snprintf(path, sizeof path, "%s/schema/seed_memory.json", root);
  json_t *seed = json_load_file(path, 0, NULL);
  if (!seed)
    return NULL;
  json_t *moves = json_array();
  size_t i, j;
  json_t *l, *f;
  json_array_foreach(json_object_get(seed, "locals"), i, l) {
    json_array_foreach(json_object_get(l, "families"), j, f) {
      if (strcmp(json_string_value(f), "gemm") != 0)
        continue;
      json_t *mv = json_deep_copy(json_object_get(l, "knob_move"));
      json_object_set_new(mv, "id", json_incref(json_object_get(l, "id")));
      json_array_append_new(moves, mv);
    }
  }
  json_decref(seed);
  return moves;
}

/* Defaults, then (optionally) the moves first (NULL-terminated triples), then each move:
 * every accepted knob set compiles, counted in t. */
static void compile_moves(json_t *match, const char *name, json_t *moves,
                          const char *const *first, json_t *seen, struct tally *t) {
  size_t i;
  json_t *mv;
  for (i = 0; i <= json_array_size(moves); i++) {
    mv = i < json_array_size(moves) ? json_array_get(moves, i) : NULL;
    struct knob_set k;
    gemm_defaults(match, &k);
    char why[512], what[160];
    for (size_t f = 0; first && first[f]; f += 3)
      if (move(&k, first[f], first[f + 1], first[f + 2], why, sizeof why) != 0)
        fail_msg("%s", why);
    if (mv && knob_apply_move(&k, mv, why, sizeof why) != 0) {
      t->refused++;
      continue;
    }
    snprintf(what, sizeof what, "%s %s%s", name, first ? "simt + " : "",
             mv ? json_string_value(json_object_get(mv, "id")) : "defaults");
    if (gemm_check(match, &k, why, sizeof why) != 0) {
      assert_true(strlen(why) > 0);
      t->refused++;
      continue;
    }
    json_t *cand = NULL;
    assert_int_equal(gemm_generate(match, &k, &cand, why, sizeof why), 0);
    compile_candidate(cand, seen, what, t);
    json_decref(cand);
    t->ok++;
  }
}

static void test_nvrtc_seed_moves(void **state) {
  (void)state;
  json_t *moves = gemm_moves();
  if (!moves) {
    printf("seed memory not found (OPFORGE_SOURCE_ROOT)\n");
    skip();
    return;
  }
  assert_true(json_array_size(moves) >= 15);
  /* Every move on the GEMM shapes, from their tf32x3 defaults and from the SIMT kernel;
   * the tail and GEMV shapes compile their defaults and, for the GEMV, its moves. */
  struct {
    const char *name;
    json_t *match;
    bool moves, simt;
  } shapes[] = {
      {"linear 1024x8192x8192", must_match(leaky_profile(1024, 8192, 8192)), true, true},
      {"mm 4096^3", must_match(mm_profile(4096, 4096, 4096, false, false)), false, false},
      {"mm 8205x5921x2949", must_match(mm_profile(8205, 2949, 5921, false, false)), true, true},
      {"mm A^T B^T 2048x4096x8192", must_match(mm_profile(2048, 8192, 4096, true, true)), true,
       true},
      {"tail+expand 2048x8192x8192", must_match(mean_expand_profile(2048, 8192, 8192)), false,
       false},
      {"bn+softmax 1024x8192x8192", must_match(bn_softmax_profile(1024, 8192, 8192)), false, false},
      {"gemv 2048x1048576", must_match(mm_profile(2048, 1048576, 1, false, false)), true, false},
      {"row_scale 4096x4096", must_match(row_scale_profile(4096, 4096)), true, false},
  };
  json_t *none = json_array();
  json_t *seen = json_object();
  struct tally t = {0};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    json_t *mv = shapes[s].moves ? moves : none;
    compile_moves(shapes[s].match, shapes[s].name, mv, NULL, seen, &t);
    if (shapes[s].simt)
      compile_moves(shapes[s].match, shapes[s].name, mv, MOVES(SIMT), seen, &t);
    json_decref(shapes[s].match);
  }
  json_decref(none);
  printf("%d knob sets compiled or shared a compiled source, %d refused; %zu distinct sources, "
         "%d over the spill budget\n",
         t.ok, t.refused, json_object_size(seen), t.over);
  json_decref(seen);
  json_decref(moves);
  assert_true(t.ok > 50);
  assert_int_equal(t.over, 0);
}

/* ---- CPU emulation of generated candidates against PyTorch ---- */

/* A C++ prelude, one line per string, that runs CUDA kernels on the CPU: threads are
 * ucontext fibers, __syncthreads a block barrier, shuffles and mma.sync warp barriers
 * (mma.sync m16n8k8 with the PTX fragment layout, its fp32 sum truncated like the tensor
 * cores'). */
// clang-format off
static const char *const emu_prelude[] = {
    "// CPU emulator of the GEMM family's CUDA kernels (tests only): threads are ucontext",
    "// fibers, __syncthreads a block barrier, warp shuffles and mma.sync warp barriers.",
    "#include <math.h>",
    "#include <stdio.h>",
    "#include <stdlib.h>",
    "#include <string.h>",
    "#include <ucontext.h>",
    "#define OFG_EMU 1",
    "#define __global__",
    "#define __device__",
    "#define __forceinline__ inline",
    "#define __shared__ static",
    "#define __restrict__",
    "#define __launch_bounds__(...)",
    "struct float4 { float x, y, z, w; };",
    "struct float2 { float x, y; };",
    "static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }",
    "static inline float2 make_float2(float a, float b) { return {a, b}; }",
    "struct ofg_u3 { unsigned x, y, z; };",
    "struct ofg_fiber { ucontext_t ctx; ofg_u3 tid; int lin; int state; };",
    "static ofg_fiber* ofg_emu_cur;",
    "static ofg_u3 ofg_emu_block, ofg_emu_bdim, ofg_emu_gdim;",
    "#define threadIdx (ofg_emu_cur->tid)",
    "#define blockIdx ofg_emu_block",
    "#define blockDim ofg_emu_bdim",
    "#define gridDim ofg_emu_gdim",
    "static ucontext_t ofg_emu_sched;",
    "static float ofg_emu_warpvals[1024];",
    "static unsigned ofg_emu_mma_slots[32 * 32 * 6];",
    "static unsigned char* ofg_emu_smem;",
    "static void (*ofg_emu_fn)(void*);",
    "static void* ofg_emu_ctx;",
    "static inline void* ofg_emu_dyn_smem() { return ofg_emu_smem; }",
    "static inline void ofg_emu_wait(int st) {",
    "  ofg_emu_cur->state = st;",
    "  swapcontext(&ofg_emu_cur->ctx, &ofg_emu_sched);",
    "}",
    "static inline void __syncthreads() { ofg_emu_wait(1); }",
    "static inline float __shfl_xor_sync(unsigned, float v, int o) {",
    "  int lane = ofg_emu_cur->lin & 31, w = ofg_emu_cur->lin >> 5;",
    "  ofg_emu_warpvals[w * 32 + lane] = v;",
    "  ofg_emu_wait(2);",
    "  float r = ofg_emu_warpvals[w * 32 + (lane ^ o)];",
    "  ofg_emu_wait(2);",
    "  return r;",
    "}",
    "template <class T> static inline T __ldg(const T* p) { return *p; }",
    "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }",
    "static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }",
    "// mma.sync.m16n8k8 tf32 with the PTX fragment layout; the fp32 sum is truncated",
    "// (rounded toward zero) like the tensor cores'.",
    "static inline void ofg_emu_mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {",
    "  const int lane = ofg_emu_cur->lin & 31, w = ofg_emu_cur->lin >> 5;",
    "  unsigned* s = ofg_emu_mma_slots + w * 32 * 6;",
    "  for (int i = 0; i < 4; i++) s[lane * 6 + i] = a[i];",
    "  for (int i = 0; i < 2; i++) s[lane * 6 + 4 + i] = b[i];",
    "  ofg_emu_wait(2);",
    "  const int g = lane >> 2, t = lane & 3;",
    "  for (int c = 0; c < 4; c++) {",
    "    const int r = g + (c >= 2 ? 8 : 0), col = 2 * t + (c & 1);",
    "    double sum = 0;",
    "    for (int k = 0; k < 8; k++) {",
    "      const int al = (r & 7) * 4 + (k & 3), ai = (r >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0);",
    "      const int bl = col * 4 + (k & 3), bi = k >= 4 ? 1 : 0;",
    "      sum += (double)__int_as_float((int)s[al * 6 + ai]) *",
    "             (double)__int_as_float((int)s[bl * 6 + 4 + bi]);",
    "    }",
    "    const double exact = (double)d[c] + sum;",
    "    float f = (float)exact;",
    "    if (fabs((double)f) > fabs(exact)) f = nextafterf(f, 0.0f);",
    "    d[c] = f;",
    "  }",
    "  ofg_emu_wait(2);",
    "}",
    "static void ofg_emu_entry() {",
    "  ofg_emu_fn(ofg_emu_ctx);",
    "  ofg_emu_cur->state = 3;",
    "  swapcontext(&ofg_emu_cur->ctx, &ofg_emu_sched);",
    "}",
    "static void ofg_emu_fail(const char* why) {",
    "  fprintf(stderr, \"emu: %s\\n\", why);",
    "  exit(90);",
    "}",
    "// Runs every block of the grid in turn; the block's threads as fibers until all exit.",
    "static void ofg_emu_run(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,",
    "                        unsigned bz, size_t shared) {",
    "  const unsigned nt = bx * by * bz, stack = 256 * 1024;",
    "  if (nt > 1024) ofg_emu_fail(\"block too large\");",
    "  ofg_fiber* f = (ofg_fiber*)calloc(nt, sizeof *f);",
    "  char* stacks = (char*)malloc((size_t)nt * stack);",
    "  ofg_emu_smem = (unsigned char*)aligned_alloc(256, (shared + 16 + 255) / 256 * 256);",
    "  ofg_emu_bdim = {bx, by, bz};",
    "  ofg_emu_gdim = {gx, gy, gz};",
    "  for (unsigned z = 0; z < gz; z++)",
    "    for (unsigned y = 0; y < gy; y++)",
    "      for (unsigned x = 0; x < gx; x++) {",
    "        ofg_emu_block = {x, y, z};",
    "        memset(ofg_emu_smem, 0xff, shared + 16);  // NaN garbage",
    "        for (unsigned t = 0; t < nt; t++) {",
    "          getcontext(&f[t].ctx);",
    "          f[t].ctx.uc_stack.ss_sp = stacks + (size_t)t * stack;",
    "          f[t].ctx.uc_stack.ss_size = stack;",
    "          f[t].ctx.uc_link = nullptr;",
    "          makecontext(&f[t].ctx, ofg_emu_entry, 0);",
    "          f[t].tid = {t % bx, (t / bx) % by, t / (bx * by)};",
    "          f[t].lin = (int)t;",
    "          f[t].state = 0;",
    "        }",
    "        for (;;) {",
    "          for (unsigned t = 0; t < nt; t++)",
    "            if (f[t].state == 0) {",
    "              ofg_emu_cur = &f[t];",
    "              swapcontext(&ofg_emu_sched, &f[t].ctx);",
    "            }",
    "          bool released = false, all_done = true, all_block = true, some_done = false;",
    "          for (unsigned w = 0; w < (nt + 31) / 32; w++) {",
    "            bool any2 = false, any1 = false;",
    "            for (unsigned t = w * 32; t < nt && t < w * 32 + 32; t++) {",
    "              any2 |= f[t].state == 2;",
    "              any1 |= f[t].state == 1;",
    "            }",
    "            if (any2 && any1) ofg_emu_fail(\"divergent warp (shuffle vs barrier)\");",
    "            for (unsigned t = w * 32; any2 && t < nt && t < w * 32 + 32; t++)",
    "              if (f[t].state == 2) f[t].state = 0;",
    "            released |= any2;",
    "          }",
    "          if (released) continue;",
    "          for (unsigned t = 0; t < nt; t++) {",
    "            all_done &= f[t].state == 3;",
    "            all_block &= f[t].state == 1 || f[t].state == 3;",
    "            some_done |= f[t].state == 3;",
    "          }",
    "          if (all_done) break;",
    "          if (!all_block) ofg_emu_fail(\"deadlock\");",
    "          if (some_done) ofg_emu_fail(\"barrier after some threads exited\");",
    "          for (unsigned t = 0; t < nt; t++) f[t].state = 0;",
    "        }",
    "      }",
    "  free(f);",
    "  free(stacks);",
    "  free(ofg_emu_smem);",
    "}",
    "template <class F> static void ofg_emu_tramp(void* p) { (*(F*)p)(); }",
    "template <class F>",
    "static void ofg_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,",
    "                           unsigned bz, size_t shared, F k) {",
    "  ofg_emu_fn = ofg_emu_tramp<F>;",
    "  ofg_emu_ctx = &k;",
    "  ofg_emu_run(gx, gy, gz, bx, by, bz, shared);",
    "}",
    "static float* ofg_emu_load(const char* dir, const char* name, size_t n) {",
    "  char path[1024];",
    "  snprintf(path, sizeof path, \"%s/%s.bin\", dir, name);",
    "  float* p = (float*)aligned_alloc(256, (n * 4 + 255) / 256 * 256 + 256);",
    "  FILE* fp = fopen(path, \"rb\");",
    "  if (!fp || fread(p, 4, n, fp) != n) ofg_emu_fail(\"cannot read an input\");",
    "  fclose(fp);",
    "  return p;",
    "}",
    "static float* ofg_emu_nan(size_t n) {",
    "  float* p = (float*)aligned_alloc(256, (n * 4 + 255) / 256 * 256 + 256);",
    "  memset(p, 0xff, n * 4);",
    "  return p;",
    "}",
    "static void ofg_emu_save(const char* dir, const char* name, const float* p, size_t n) {",
    "  char path[1024];",
    "  snprintf(path, sizeof path, \"%s/%s.bin\", dir, name);",
    "  FILE* fp = fopen(path, \"wb\");",
    "  if (!fp || fwrite(p, 4, n, fp) != n) ofg_emu_fail(\"cannot write the output\");",
    "  fclose(fp);",
    "}",
    NULL,
};
// clang-format on

/* Python, one line per string: every task's inputs, parameters, eager output and float64
 * output as raw files. */
// clang-format off
static const char *const ref_script[] = {
    "# For each (task, dir): inputs, parameters, eager output and float64 output as raw files.",
    "import os, sys, types, torch",
    "seed = int(sys.argv[1])",
    "def name(n): return \"\".join(c if c.isalnum() else \"_\" for c in n)",
    "for src, out in zip(sys.argv[2::2], sys.argv[3::2]):",
    "    mod = types.ModuleType(\"task\")",
    "    exec(compile(open(src).read(), src, \"exec\"), mod.__dict__)",
    "    torch.manual_seed(seed)",
    "    model = mod.Model(*mod.get_init_inputs())",
    "    torch.manual_seed(seed + 1)",
    "    inputs = mod.get_inputs()",
    "    os.makedirs(out, exist_ok=True)",
    "    for i, t in enumerate(inputs):",
    "        t.detach().contiguous().float().numpy().tofile(os.path.join(out, name(\"input:%d\" % i) + \".bin\"))",
    "    state = {k: v.clone() for k, v in model.state_dict().items()}",
    "    for k, t in state.items():",
    "        t.detach().contiguous().float().numpy().tofile(os.path.join(out, name(\"param:\" + k) + \".bin\"))",
    "    with torch.no_grad():",
    "        y = model(*[t.clone() for t in inputs])",
    "    y.detach().contiguous().float().numpy().tofile(os.path.join(out, \"expected.bin\"))",
    "    m64 = mod.Model(*mod.get_init_inputs())",
    "    m64.load_state_dict(state)",
    "    m64 = m64.double()",
    "    with torch.no_grad():",
    "        y64 = m64(*[t.clone().double() for t in inputs])",
    "    y64.detach().contiguous().double().numpy().tofile(os.path.join(out, \"expected64.bin\"))",
    NULL,
};
// clang-format on

#define MM_TASK(fwd, inputs)                                                                       \
  "import torch\nimport torch.nn as nn\n"                                                          \
  "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"                 \
  "    def forward(self, A, B):\n        return " fwd "\n"                                         \
  "def get_inputs():\n    return " inputs "\ndef get_init_inputs():\n    return []\n"

/* Small tasks (sources, or public KernelBench files with their sizes overridden), the MODE
 * of their defaults, and the knob moves ("KNOB=value ...") each is emulated under; the
 * first variant is always the defaults. "MODE= MINB=0" returns to the SIMT kernel
 * (MINB 0: its own default), and "MODE= MINB=0 BK=8 STAGES=2" is its defaults here. The
 * GEMMs default to tf32x3 but tril_persistent, whose K = 8 is a single BK step (tf32x3
 * needs 2 stages of them). */
// clang-format off
static const struct emu_task {
  const char *name, *source, *file, *extra, *mode;
  const char *variants[4];
} emu_tasks[] = {
    {"mm_irr", MM_TASK("torch.matmul(A, B)", "[torch.rand(70, 45), torch.rand(45, 83)]"), NULL,
     NULL, "tf32x3", {"", "MODE= MINB=0 BK=8 STAGES=2", "MODE= MINB=0 STAGES=1 BK=4", NULL}},
    {"mm_tt", MM_TASK("torch.matmul(A.T, B.T)", "[torch.rand(45, 70), torch.rand(83, 45)]"), NULL,
     NULL, "tf32x3", {"", "MODE= MINB=0 BK=8 STAGES=2", "MODE= MINB=0 BK=8 STAGES=1 VEC=2 TM=2 TN=2 BM=32 BN=32", NULL}},
    /* K = 29: tf32x3 at BK 8 with 4 stages (the 4 K steps). */
    {"bmm", MM_TASK("torch.bmm(A, B)", "[torch.rand(3, 37, 29), torch.rand(3, 29, 41)]"), NULL,
     NULL, "tf32x3", {"", "MODE= MINB=0 BK=8 STAGES=2", "MODE= MINB=0 BK=8 STAGES=3", NULL}},
    {"gemv", MM_TASK("torch.matmul(A, B)", "[torch.rand(50, 3000), torch.rand(3000, 1)]"), NULL,
     NULL, "", {"", "VEC=2 UNROLL=1", NULL, NULL}},
    {"row_scale", MM_TASK("A.unsqueeze(1) * B", "[torch.rand(64), torch.rand(64, 96)]"), NULL, NULL,
     "", {"", NULL, NULL, NULL}},
    /* One 32 x 32 tile: the defaults split K = 4096 into 16 slices of 256 (16 BK=16 steps
     * each); the SIMT kernel's default is 32 slices of 128 (16 BK=8 steps). */
    {"split_k", MM_TASK("torch.matmul(A, B)", "[torch.rand(16, 4096), torch.rand(4096, 20)]"), NULL,
     NULL, "tf32x3", {"", "SPLIT=3", "MODE= MINB=0 BK=8 STAGES=2 SPLIT=32", "MODE= MINB=0 BK=8 STAGES=2 SPLIT=3"}},
    {"triu", MM_TASK("torch.triu(torch.matmul(A, B))",
                     "[torch.triu(torch.rand(300, 300)), torch.triu(torch.rand(300, 300))]"),
     NULL, NULL, "tf32x3", {"", "MODE= MINB=0 BK=8 STAGES=2", NULL, NULL}},
    {"tril_persistent", MM_TASK("torch.tril(torch.matmul(A, B), -3)",
                                "[torch.rand(1040, 8), torch.rand(8, 1040)]"),
     NULL, NULL, "", {"", "BM=16 BN=16 TM=1 TN=8 MODE=persistent", NULL, NULL}},
    {"l2_12", NULL, "level2/12_Gemm_Multiply_LeakyReLU.py", "", "tf32x3", {"", "MODE= MINB=0 BK=8 STAGES=2", NULL, NULL}},
    {"l2_14", NULL, "level2/14_Gemm_Divide_Sum_Scaling.py", "", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_22", NULL, "level2/22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py", "", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_28", NULL, "level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py", "", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_33", NULL, "level2/33_Gemm_Scale_BatchNorm.py", "scale_shape = (out_features,)\n", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_51", NULL, "level2/51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd.py", "", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_68", NULL, "level2/68_Matmul_Min_Subtract.py", "", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_75", NULL, "level2/75_Gemm_GroupNorm_Min_BiasAdd.py", "num_groups = 8\nbias_shape = (1, out_features, 1, 1)\n", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_80", NULL, "level2/80_Gemm_Max_Subtract_GELU.py", "", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_84", NULL, "level2/84_Gemm_BatchNorm_Scaling_Softmax.py", "", "tf32x3", {"", "MODE= MINB=0 BK=8 STAGES=2", NULL, NULL}},
    {"l2_94", NULL, "level2/94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm.py", "num_groups = 8\nbias_shape = (out_features,)\n", "tf32x3", {"", NULL, NULL, NULL}},
    {"l2_98", NULL, "level2/98_Matmul_AvgPool_GELU_Scale_Max.py", "pool_kernel_size = 4\n", "tf32x3", {"", NULL, NULL, NULL}},
};
// clang-format on

/* Sizes appended to the public level 2 tasks: their functions read these globals. */
static const char small_sizes[] = "\nbatch_size = 33\nin_features = 48\ninput_size = 48\n"
                                  "out_features = 72\nhidden_size = 72\noutput_size = 72\n";

static void sanitize(const char *n, char *out, size_t len) {
  size_t i = 0;
  for (; n[i] && i + 1 < len; i++)
    out[i] =
        (n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') || (n[i] >= '0' && n[i] <= '9')
            ? n[i]
            : '_';
  out[i] = 0;
}

/* The launch's arguments as C++ expressions. */
static void emu_args(FILE *f, json_t *args) {
  size_t j;
  json_t *a;
  json_array_foreach(args, j, a) {
    char s[256];
    const char *t = json_string_value(json_object_get(a, "tensor"));
    const char *b = json_string_value(json_object_get(a, "buffer"));
    assert_true(t || b);
    sanitize(t ? t : b, s, sizeof s);
    fprintf(f, "%s%s%s", j ? ", " : "", t ? "" : "buf_", s);
  }
}

/* The emulation program of a candidate: prelude, source, and a main() that loads the
 * tensors from dir, runs the plan's launches in order and saves output:0. */
static void write_emu(const char *path, json_t *profile, json_t *cand) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (size_t i = 0; emu_prelude[i]; i++)
    fprintf(f, "%s\n", emu_prelude[i]);
  fprintf(f, "%s\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n",
          json_string_value(json_object_get(cand, "source")));
  static const char *const lists[] = {"inputs", "params", "outputs"};
  for (int l = 0; l < 3; l++) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(profile, lists[l]), i, t) {
      char s[256];
      sanitize(json_string_value(json_object_get(t, "name")), s, sizeof s);
      long long n = json_integer_value(json_object_get(t, "numel"));
      if (l < 2)
        fprintf(f, "  float* %s = ofg_emu_load(dir, \"%s\", %lld);\n", s, s, n);
      else
        fprintf(f, "  float* %s = ofg_emu_nan(%lld);\n", s, n);
    }
  }
  json_t *plan = json_object_get(cand, "plan"), *x;
  size_t i;
  json_array_foreach(json_object_get(plan, "buffers"), i, x) {
    char s[256];
    sanitize(json_string_value(json_object_get(x, "name")), s, sizeof s);
    fprintf(f, "  float* buf_%s = ofg_emu_nan(%lld);\n", s,
            (long long)(json_integer_value(json_object_get(x, "bytes")) + 3) / 4);
  }
  json_array_foreach(json_object_get(plan, "launches"), i, x) {
    json_t *g = json_object_get(x, "grid"), *b = json_object_get(x, "block");
    fprintf(f, "  ofg_emu_launch(%lld, %lld, %lld, %lld, %lld, %lld, %lld, [&] { %s(",
            (long long)json_integer_value(json_array_get(g, 0)),
            (long long)json_integer_value(json_array_get(g, 1)),
            (long long)json_integer_value(json_array_get(g, 2)),
            (long long)json_integer_value(json_array_get(b, 0)),
            (long long)json_integer_value(json_array_get(b, 1)),
            (long long)json_integer_value(json_array_get(b, 2)),
            (long long)json_integer_value(json_object_get(x, "shared_bytes")),
            json_string_value(json_object_get(x, "kernel")));
    emu_args(f, json_object_get(x, "args"));
    fprintf(f, "); });\n");
  }
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  fprintf(f, "  ofg_emu_save(dir, \"result\", output_0, %lld);\n  return 0;\n}\n",
          (long long)json_integer_value(json_object_get(out, "numel")));
  assert_int_equal(fclose(f), 0);
}

/* n elements of size elem from dir/name.bin (caller frees). */
static void *read_raw(const char *dir, const char *name, size_t elem, size_t *ret_n) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  rewind(f);
  void *p = malloc((size_t)bytes + 8);
  assert_non_null(p);
  *ret_n = fread(p, elem, (size_t)bytes / elem, f);
  fclose(f);
  return p;
}

/* The evaluator's rules: allclose(1e-4, 1e-4) against eager fp32, and at most 8 times
 * eager's own error against float64 (plus a tiny floor). */
static bool compare_outputs(const char *dir, char *msg, size_t len) {
  size_t n1, n2, n3;
  float *res = read_raw(dir, "result", 4, &n1), *eager = read_raw(dir, "expected", 4, &n2);
  double *ref64 = read_raw(dir, "expected64", 8, &n3);
  bool ok = n1 == n2 && n2 == n3;
  double err_c = 0, err_e = 0;
  size_t bad = 0;
  for (size_t i = 0; ok && i < n1; i++) {
    double d = fabs((double)res[i] - eager[i]);
    if (!(d <= 1e-4 + 1e-4 * fabs(eager[i])))
      bad++;
    double dc = fabs(res[i] - ref64[i]), de = fabs(eager[i] - ref64[i]);
    err_c = dc > err_c || isnan(dc) ? dc : err_c;
    err_e = de > err_e ? de : err_e;
  }
  ok = ok && bad == 0 && err_c <= 8 * err_e + 1e-6;
  snprintf(msg, len, "n=%zu mismatches=%zu err64 %.3g (eager %.3g)", n1, bad, err_c, err_e);
  free(res);
  free(eager);
  free(ref64);
  return ok;
}

/* Generates the candidate of variant ("KNOB=value ...") on the defaults, whose MODE must
 * be mode, builds its emulation with c++, runs it in dir and compares. */
static void run_variant(const char *dir, json_t *profile, const char *mode, const char *variant) {
  json_t *match = NULL;
  char why[512] = "";
  assert_int_equal(gemm_match(profile, &match, why, sizeof why), 1);
  struct knob_set k;
  gemm_defaults(match, &k);
  assert_string_equal(k.mode, mode);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", variant);
  for (char *tok = buf; *tok;) {
    char *sp = strchr(tok, ' '), *next = sp ? sp + 1 : tok + strlen(tok);
    if (sp)
      *sp = 0;
    char *eq = strchr(tok, '=');
    assert_non_null(eq);
    *eq = 0;
    if (move(&k, tok, "set", eq + 1, why, sizeof why) != 0)
      fail_msg("%s [%s]: %s=%s: %s", dir, variant, tok, eq + 1, why);
    tok = next;
  }
  json_t *cand = NULL;
  if (gemm_generate(match, &k, &cand, why, sizeof why) != 0)
    fail_msg("%s [%s]: %s", dir, variant, why);
  char path[1200], cmd[4096];
  snprintf(path, sizeof path, "%s/emu.cpp", dir);
  write_emu(path, profile, cand);
  const char *cxx = getenv("CXX") && getenv("CXX")[0] ? getenv("CXX") : "c++";
  int used = snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -w -o %s/emu %s", cxx, dir, path);
  size_t i;
  json_t *o;
  json_array_foreach(json_object_get(cand, "options"), i, o) used +=
      snprintf(cmd + used, sizeof cmd - (size_t)used, " '%s'", json_string_value(o));
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/emu %s", dir, dir);
  assert_int_equal(system(cmd), 0);
  char msg[256];
  bool ok = compare_outputs(dir, msg, sizeof msg);
  printf("  %-10s %-48s %-8s %s %s\n", ok ? "ok" : "MISMATCH", variant[0] ? variant : "defaults",
         k.mode[0] ? k.mode : "simt", msg, json_string_value(json_object_get(match, "summary")));
  assert_true(ok);
  json_decref(cand);
  json_decref(match);
}

/* The task's source: embedded, or the public file with small sizes (caller frees). */
static char *emu_task_source(const struct emu_task *t, const char *kb) {
  if (t->source)
    return strdup(t->source);
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", kb, t->file);
  char *src = read_file(path);
  assert_non_null(src);
  size_t n = strlen(src) + strlen(small_sizes) + strlen(t->extra) + 1;
  char *all = malloc(n);
  assert_non_null(all);
  snprintf(all, n, "%s%s%s", src, small_sizes, t->extra);
  free(src);
  return all;
}

/* Writes the reference data of every task (one python process). */
static void write_references(const char *tmp, const char *py, size_t ntasks) {
  char script[1100];
  snprintf(script, sizeof script, "%s/ref.py", tmp);
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  for (size_t i = 0; ref_script[i]; i++)
    fprintf(f, "%s\n", ref_script[i]);
  assert_int_equal(fclose(f), 0);
  size_t cap = 1 << 16;
  char *cmd = malloc(cap);
  assert_non_null(cmd);
  int used = snprintf(cmd, cap, "%s %s 42", py, script);
  for (size_t i = 0; i < ntasks; i++)
    used += snprintf(cmd + used, cap - (size_t)used, " %s/%s/task.py %s/%s", tmp, emu_tasks[i].name,
                     tmp, emu_tasks[i].name);
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

static void test_emulated_tasks(void **state) {
  (void)state;
  const char *kb = kernelbench_dir(), *py = python_path();
  if (!kb || !py || system("c++ --version > /dev/null 2>&1") != 0) {
    printf("needs KernelBench, the python venv and a C++ compiler\n");
    skip();
    return;
  }
  struct evaluator *ev = shared_evaluator();
  if (!ev) {
    skip();
    return;
  }
  char tmp[] = "/tmp/opforge-gemm-emu-XXXXXX";
  assert_non_null(mkdtemp(tmp));
  size_t n = sizeof emu_tasks / sizeof emu_tasks[0];
  json_t *profiles[sizeof emu_tasks / sizeof emu_tasks[0]];
  for (size_t i = 0; i < n; i++) {
    char dir[1100], path[1200];
    snprintf(dir, sizeof dir, "%s/%s", tmp, emu_tasks[i].name);
    assert_int_equal(mkdir(dir, 0700), 0);
    char *src = emu_task_source(&emu_tasks[i], kb);
    snprintf(path, sizeof path, "%s/task.py", dir);
    write_file(path, src);
    profiles[i] = evaluator_profile(ev, emu_tasks[i].name, src);
    free(src);
    assert_non_null(profiles[i]);
  }
  write_references(tmp, py, n);
  for (size_t i = 0; i < n; i++) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/%s", tmp, emu_tasks[i].name);
    printf("%s\n", emu_tasks[i].name);
    for (size_t v = 0; v < 4 && emu_tasks[i].variants[v]; v++)
      run_variant(dir, profiles[i], emu_tasks[i].mode, emu_tasks[i].variants[v]);
    json_decref(profiles[i]);
  }
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  assert_int_equal(system(cmd), 0);
}

static int stop_shared_evaluator(void **state) {
  (void)state;
  if (shared_ev_started)
    evaluator_stop(&shared_ev);
  shared_ev_started = false;
  return 0;
}

int main(void) {
  /* meson sets MALLOC_PERTURB_ for tests; the NVRTC compiles in this process and the
   * python, evaluator and c++ children it starts run far slower with it. */
  mallopt(M_PERTURB, 0);
  unsetenv("MALLOC_PERTURB_");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_epilogue_ops),       cmocka_unit_test(test_epilogue_refusals),
      cmocka_unit_test(test_epilogue_emit),      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_plan_linear),        cmocka_unit_test(test_plan_tail_expand),
      cmocka_unit_test(test_match_public_tasks), cmocka_unit_test(test_nvrtc_seed_moves),
      cmocka_unit_test(test_emulated_tasks),
  };
  return cmocka_run_group_tests(tests, NULL, stop_shared_evaluator);
}
