/* Unit tests of the builtin pointwise family and its expression translator: matching of
 * every public task (one evaluator process on the meta device), the IR and the CUDA text
 * of chains (broadcast offsets, constants, refusals), refusals of knob moves with their
 * reasons, hand-checked plans, the defaults under the SM count a profile carries, NVRTC
 * compiles under every seed-memory move, and a CPU emulation of generated candidates checked
 * against PyTorch. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/pointwise.h"
#include "gpu/nvrtc_compile.h"

#define BUILTIN_TESTLIB_EMULATOR
#include "builtin_testlib.h"

static const struct builtin_family *const pw = &builtin_family_pointwise;


/* Applies the moves of a variant "KNOB=value KNOB=value MODE=name" to *k; returns 0, or
 * -1 with why when a move is refused by knob_apply_move. */
static int apply_variant(struct knob_set *k, const char *variant, char *why, size_t whylen) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", variant);
  for (char *tok = buf; *tok;) {
    char *sp = strchr(tok, ' '), *next = sp ? sp + 1 : tok + strlen(tok);
    if (sp)
      *sp = 0;
    char *eq = strchr(tok, '=');
    assert_non_null(eq);
    *eq = 0;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    json_t *m = *end || end == eq + 1
                    ? json_pack("{s:s,s:s,s:s}", "knob", tok, "op", "set", "value", eq + 1)
                    : json_pack("{s:s,s:s,s:I}", "knob", tok, "op", "set", "value",
                                (json_int_t)v);
    int rc = knob_apply_move(k, m, why, whylen);
    json_decref(m);
    if (rc != 0)
      return -1;
    tok = next;
  }
  return 0;
}

/* The match of a profile by the pointwise family (caller owns). */
static json_t *match_of(json_t *profile) {
  json_t *m = NULL;
  char why[512] = "";
  if (pw->match(profile, &m, why, sizeof why) != 1)
    fail_msg("pointwise does not match: %s", why);
  return m;
}

/* ---- (1) every public task: op and element count ---- */

static const struct expected {
  const char *file, *op, *ops;
  long long numel;
} expected[] = {
    {"level1/19_ReLU.py", "relu", "relu", 1610612736},
    {"level1/21_Sigmoid.py", "sigmoid", "sigmoid", 1610612736},
    {"level1/22_Tanh.py", "tanh", "tanh", 1610612736},
    {"level1/26_GELU_.py", "gelu", "gelu", 1610612736},
    {"level1/28_HardSigmoid.py", "hardsigmoid", "hardsigmoid", 1610612736},
    {"level1/30_Softsign.py", "chain", "abs,add,div", 1610612736},
    {"level1/31_ELU.py", "elu", "elu", 1610612736},
    {"level1/32_HardTanh.py", "hardtanh", "hardtanh", 1610612736},
    {"level1/5_Matrix_scalar_multiplication.py", "mul", "mul", 1073741824},
    /* diag(A) @ B written as A.unsqueeze(1) * B: the GEMM family comes first. */
    {"level1/12_Matmul_with_diagonal_matrices_.py", "mul", "mul", 16777216},
};

/* Checks one public task: the expected match, or no match at all. */
static void check_public_task(const char *file, void *ret_matched) {
  json_t *profile = public_profile(file);
  json_t *m = NULL;
  char why[512] = "";
  int rc = pw->match(profile, &m, why, sizeof why);
  const struct expected *e = NULL;
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
    if (strcmp(expected[i].file, file) == 0)
      e = &expected[i];
  if (rc < 0)
    assert_true(why[0] != '\0');
  if (!e) {
    if (rc == 1)
      fail_msg("%s: unexpected match: %s", file, json_string_value(json_object_get(m, "summary")));
    return;
  }
  if (rc != 1)
    fail_msg("%s: no match: %s", file, why);
  char ops[256] = "";
  size_t i, used = 0;
  json_t *o;
  json_array_foreach(json_object_get(m, "ops"), i, o) used +=
      (size_t)snprintf(ops + used, sizeof ops - used, "%s%s", i ? "," : "", json_string_value(o));
  printf("  %-46s %-12s %-12s %lld\n", file, json_string_value(json_object_get(m, "op")), ops,
         (long long)json_integer_value(json_object_get(m, "numel")));
  assert_string_equal(json_string_value(json_object_get(m, "family")), "pointwise");
  assert_string_equal(json_string_value(json_object_get(m, "op")), e->op);
  assert_string_equal(ops, e->ops);
  assert_int_equal(json_integer_value(json_object_get(m, "numel")), e->numel);
  (*(int *)ret_matched)++;
  json_decref(m);
}

/* Every level 1 file, through the evaluator process. */
static void test_public_tasks(void **state) {
  (void)state;
  const char *kb = kernelbench_dir();
  if (!kb || !g_have_ev) {
    printf("needs KernelBench and the python venv\n");
    skip();
    return;
  }
  int matched = 0;
  /* Level 2 holds only GEMM and convolution tasks: none is in these families, and the
   * matchers refuse any graph with a Linear or Conv first thing. */
  int seen = (int)for_each_public_task("level1", check_public_task, &matched);
  printf("  %d of %d public tasks matched by pointwise\n", matched, seen);
  assert_int_equal(matched, (int)(sizeof expected / sizeof expected[0]));
}

/* ---- the expression translator, on hand-written graphs ---- */

/* A profile with one float32 input x of shape, extra (inputs/params/scalar_inputs JSON
 * fragments) and the call nodes; the last node is the output. */
static json_t *mk_profile(const char *shape, const char *extra_inputs, const char *params,
                          const char *scalars, const char *nodes, const char *out_shape) {
  char buf[8192];
  snprintf(buf, sizeof buf,
           "{\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":%s}%s],"
           "\"params\":[%s],\"scalar_inputs\":[%s],"
           "\"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\",\"shape\":%s,"
           "\"numel\":0}],\"graph\":[{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\","
           "\"tensor\":\"input:0\",\"args\":[],\"kwargs\":{},\"shape\":%s,"
           "\"dtype\":\"float32\"},%s]}",
           shape, extra_inputs, params, scalars, out_shape, shape, nodes);
  json_error_t err;
  json_t *p = json_loads(buf, 0, &err);
  if (!p)
    fail_msg("bad test profile: %s", err.text);
  json_t *out = json_array_get(json_object_get(p, "outputs"), 0);
  json_object_set_new(out, "numel", json_integer(expr_numel(json_object_get(out, "shape"))));
  /* The output node, named "output", returns the last call node. */
  json_t *graph = json_object_get(p, "graph");
  const char *last = json_string_value(
      json_object_get(json_array_get(graph, json_array_size(graph) - 1), "name"));
  json_array_append_new(graph, json_pack("{s:s, s:s, s:s, s:[{s:s}], s:{}}", "name", "output",
                                         "op", "output", "target", "output", "args", "node",
                                         last, "kwargs"));
  return p;
}

/* A call_function node text. */
#define CALL(name, target, args, kwargs, shape)                                           \
  "{\"name\":\"" name "\",\"op\":\"call_function\",\"target\":\"" target "\",\"args\":" args \
  ",\"kwargs\":" kwargs ",\"shape\":" shape ",\"dtype\":\"float32\"}"

/* The chain's IR for a profile's output node (caller owns), or NULL with why. */
static json_t *ir_of(json_t *profile, char *why, size_t whylen) {
  json_t *ir = NULL;
  if (expr_build(profile, expr_output_node(profile), NULL, &ir, why, whylen) != 0)
    return NULL;
  return ir;
}

/* The emitted body of a profile's chain (caller frees). */
static char *body_of(json_t *profile, bool fast) {
  char why[256] = "";
  json_t *ir = ir_of(profile, why, sizeof why);
  if (!ir)
    fail_msg("expr_build: %s", why);
  struct cg_buf b = {0};
  assert_int_equal(expr_emit(ir, "f", NULL, 0, fast, &b), 0);
  json_decref(ir);
  char *s = cg_take(&b);
  assert_non_null(s);
  return s;
}

static void test_expr_constants(void **state) {
  (void)state;
  static const struct {
    double v;
    const char *text;
  } cases[] = {
      {1.0, "1.0f"},
      {-2.0, "(-2.0f)"},
      {3.14, "3.1400001f"},
      {1e-5, "9.99999975e-06f"},
      {0.5, "0.5f"},
      {INFINITY, "__int_as_float(0x7f800000)"},
      {-INFINITY, "__int_as_float((int)0xff800000)"},
      {NAN, "__int_as_float(0x7fc00000)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[64];
    cg_float(cases[i].v, out, sizeof out);
    assert_string_equal(out, cases[i].text);
  }
}

static void test_expr_broadcast(void **state) {
  (void)state;
  /* x [4, 3, 5] + b [3, 1]: b's element for output index e is (e / 5) % 3. */
  json_t *p = mk_profile("[4,3,5]", "",
                         "{\"name\":\"param:b\",\"dtype\":\"float32\",\"shape\":[3,1]}", "",
                         "{\"name\":\"b\",\"op\":\"get_attr\",\"target\":\"b\",\"tensor\":"
                         "\"param:b\",\"args\":[],\"kwargs\":{},\"shape\":[3,1],\"dtype\":"
                         "\"float32\"}," CALL("add", "operator.add", "[{\"node\":\"x\"},"
                                                                      "{\"node\":\"b\"}]",
                                              "{}", "[4,3,5]"),
                         "[4,3,5]");
  char why[256] = "", off[256];
  json_t *ir = ir_of(p, why, sizeof why);
  assert_non_null(ir);
  assert_int_equal(json_array_size(json_object_get(ir, "leaves")), 2);
  assert_int_equal(expr_leaf_offset(ir, 0, "e", off, sizeof off), 1);
  assert_string_equal(off, "e");
  assert_int_equal(expr_leaf_offset(ir, 1, "e", off, sizeof off), 0);
  assert_string_equal(off, "((e / 5 % 3))");
  json_decref(ir);
  json_decref(p);
  /* A [N] viewed as [N, 1] (unsqueeze) times B [N, M]: A at e / M; the unviewed leaf of
   * A is pruned. */
  p = mk_profile("[64,48]", ",{\"name\":\"input:1\",\"dtype\":\"float32\",\"shape\":[64]}", "",
                 "",
                 "{\"name\":\"a\",\"op\":\"placeholder\",\"target\":\"a\",\"tensor\":"
                 "\"input:1\",\"args\":[],\"kwargs\":{},\"shape\":[64],\"dtype\":\"float32\"},"
                 "{\"name\":\"u\",\"op\":\"call_method\",\"target\":\"unsqueeze\",\"args\":"
                 "[{\"node\":\"a\"},1],\"kwargs\":{},\"shape\":[64,1],\"dtype\":\"float32\"},"
                 CALL("mul", "operator.mul", "[{\"node\":\"u\"},{\"node\":\"x\"}]", "{}",
                      "[64,48]"),
                 "[64,48]");
  ir = ir_of(p, why, sizeof why);
  assert_non_null(ir);
  assert_int_equal(json_array_size(json_object_get(ir, "leaves")), 2);
  assert_int_equal(expr_leaf_offset(ir, 0, "e", off, sizeof off), 0);
  assert_string_equal(off, "((e / 48))");
  assert_string_equal(json_string_value(json_object_get(
                          json_array_get(json_object_get(ir, "leaves"), 1), "tensor")),
                      "input:0");
  json_decref(ir);
  json_decref(p);
}

/* One unary op on x: the emitted step, accurate and fast. */
static const struct emit_case {
  const char *target, *args, *kwargs, *text, *fast;
} emit_cases[] = {
    {"torch.nn.functional.elu", "[{\"node\":\"x\"}]", "{\"alpha\":0.5}",
     "(L0 <= 0.0f ? expm1f(L0 * 1.0f) * 0.5f : L0 * 1.0f)", NULL},
    {"torch.nn.functional.hardtanh", "[{\"node\":\"x\"}]", "{\"min_val\":-2.0,\"max_val\":2.0}",
     "ofg_clamp(L0, (-2.0f), 2.0f)", NULL},
    {"torch.nn.functional.leaky_relu", "[{\"node\":\"x\"},0.2]", "{}",
     "(L0 > 0.0f ? L0 : L0 * 0.200000003f)", NULL},
    {"torch.sigmoid", "[{\"node\":\"x\"}]", "{}", "1.0f / (1.0f + expf(-L0))",
     "__fdividef(1.0f, 1.0f + __expf(-L0))"},
    {"torch.nn.functional.gelu", "[{\"node\":\"x\"}]", "{\"approximate\":\"tanh\"}",
     "0.5f * L0 * (1.0f + tanhf(0.797884560802865356f * (L0 + 0.044715f * (L0 * L0 * L0))))",
     NULL},
    {"torch.nn.functional.hardsigmoid", "[{\"node\":\"x\"}]", "{\"inplace\":false}",
     "ofg_clamp(L0 + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f)", NULL},
    {"torch.clamp", "[{\"node\":\"x\"}]", "{\"min\":-0.5}", "ofg_clamp_min(L0, (-0.5f))", NULL},
    {"operator.pow", "[{\"node\":\"x\"},2]", "{}", "L0 * L0", NULL},
    {"operator.pow", "[{\"node\":\"x\"},0.5]", "{}", "sqrtf(L0)", NULL},
    {"operator.pow", "[{\"node\":\"x\"},3.3]", "{}", "powf(L0, 3.29999995f)", NULL},
    {"torch.nn.functional.softplus", "[{\"node\":\"x\"}]", "{\"beta\":2,\"threshold\":10}",
     "(L0 * 2.0f > 10.0f ? L0 : log1pf(expf(L0 * 2.0f)) / 2.0f)", NULL},
    {"torch.threshold", "[{\"node\":\"x\"},0.1,20.0]", "{}", "(L0 > 0.100000001f ? L0 : 20.0f)",
     NULL},
    {"torch.nn.functional.selu", "[{\"node\":\"x\"}]", "{}",
     "(L0 <= 0.0f ? expm1f(L0 * 1.0f) * 1.75809932f : L0 * 1.05070102f)", NULL},
};

static void test_expr_emit(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof emit_cases / sizeof emit_cases[0]; i++) {
    const struct emit_case *c = &emit_cases[i];
    char node[1024];
    snprintf(node, sizeof node,
             "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"%s\",\"args\":%s,"
             "\"kwargs\":%s,\"shape\":[8],\"dtype\":\"float32\"}",
             c->target, c->args, c->kwargs);
    json_t *p = mk_profile("[8]", "", "", "", node, "[8]");
    for (int fast = 0; fast < 2; fast++) {
      char *body = body_of(p, fast);
      char want[512];
      snprintf(want, sizeof want, "  const float t0 = %s;\n  return t0;\n",
               fast && c->fast ? c->fast : c->text);
      if (!strstr(body, want))
        fail_msg("%s (fast %d): got\n%s", c->target, fast, strstr(body, "float f("));
      free(body);
    }
    json_decref(p);
  }
  /* A scalar input becomes a constant; softsign's chain keeps x as one leaf. */
  json_t *p = mk_profile("[8]", "", "", "{\"name\":\"input:1\",\"value\":3.14}",
                         "{\"name\":\"s\",\"op\":\"placeholder\",\"target\":\"s\",\"tensor\":"
                         "\"input:1\",\"args\":[],\"kwargs\":{},\"shape\":null,\"dtype\":null},"
                         CALL("mul", "operator.mul", "[{\"node\":\"x\"},{\"node\":\"s\"}]", "{}",
                              "[8]"),
                         "[8]");
  char *body = body_of(p, false);
  assert_non_null(strstr(body, "float f(float L0) {\n  const float t0 = L0 * 3.1400001f;\n"));
  free(body);
  json_decref(p);
}

/* In-place spellings read as their out-of-place ops when nothing else reads the operand. */
static void test_expr_in_place(void **state) {
  (void)state;
  json_t *p = mk_profile("[8]", "", "", "",
                         CALL("e", "torch.exp", "[{\"node\":\"x\"}]", "{}", "[8]")
                         ",{\"name\":\"r\",\"op\":\"call_module\",\"target\":\"ReLU\","
                         "\"attrs\":{\"inplace\":true},\"args\":[{\"node\":\"e\"}],"
                         "\"kwargs\":{},\"shape\":[8],\"dtype\":\"float32\"},"
                         CALL("a", "operator.iadd", "[{\"node\":\"r\"},2.0]", "{}", "[8]")
                         ",{\"name\":\"m\",\"op\":\"call_method\",\"target\":\"mul_\","
                         "\"args\":[{\"node\":\"a\"},{\"node\":\"x\"}],\"kwargs\":{},"
                         "\"shape\":[8],\"dtype\":\"float32\"}",
                         "[8]");
  char why[256] = "";
  json_t *ir = ir_of(p, why, sizeof why);
  if (!ir)
    fail_msg("in-place chain refused: %s", why);
  char *ops = json_dumps(json_object_get(ir, "ops"), JSON_COMPACT);
  assert_string_equal(ops, "[\"exp\",\"relu\",\"add\",\"mul\"]");
  free(ops);
  json_decref(ir);
  json_decref(p);
}

/* Chains the translator refuses, with the reason. */
static void test_expr_refusals(void **state) {
  (void)state;
  static const struct {
    const char *nodes, *why;
  } cases[] = {
      {CALL("w", "torch.where", "[{\"node\":\"x\"},{\"node\":\"x\"},0.0]", "{}", "[8]"),
       "unsupported op where"},
      /* In place is out of place unless another node reads what the op overwrites. */
      {"{\"name\":\"r\",\"op\":\"call_method\",\"target\":\"relu_\",\"args\":[{\"node\":\"x\"}],"
       "\"kwargs\":{},\"shape\":[8],\"dtype\":\"float32\"},"
       CALL("a", "operator.add", "[{\"node\":\"r\"},{\"node\":\"x\"}]", "{}", "[8]"),
       "in-place op relu_ on a value that other nodes read is unsupported"},
      {CALL("r", "torch.nn.functional.relu", "[{\"node\":\"x\"}]", "{\"inplace\":true}", "[8]")
       "," CALL("a", "operator.add", "[{\"node\":\"x\"},{\"node\":\"r\"}]", "{}", "[8]"),
       "in-place op relu on a value that other nodes read is unsupported"},
      {CALL("d", "torch.nn.functional.dropout", "[{\"node\":\"x\"}]", "{\"p\":0.5}", "[8]"),
       "dropout with p=0.5 in training mode is random"},
      {CALL("g", "torch.nn.functional.gelu", "[{\"node\":\"x\"}]", "{\"approximate\":\"fast\"}",
            "[8]"),
       "gelu: approximate=fast is unsupported"},
      {CALL("m", "torch.matmul", "[{\"node\":\"x\"},{\"node\":\"x\"}]", "{}", "[8]"),
       "foreign op matmul"},
      {CALL("e", "torch.exp", "[{\"node\":\"x\"}]", "{}", "[2,4]")
       ",{\"name\":\"v\",\"op\":\"call_method\",\"target\":\"view\",\"args\":[{\"node\":\"e\"},"
       "8],\"kwargs\":{},\"shape\":[8],\"dtype\":\"float32\"}",
       "view of a computed value (not of an input tensor) is unsupported"},
      {CALL("c", "torch.gt", "[{\"node\":\"x\"},0]", "{}", "[8]"),
       "op gt produces float32; only float32 chains are supported"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *p = mk_profile(i == 6 ? "[2,4]" : "[8]", "", "", "", cases[i].nodes, "[8]");
    if (i == 7) /* a comparison produces bool */
      json_object_set_new(json_array_get(json_object_get(p, "graph"), 1), "dtype",
                          json_string("bool"));
    char why[256] = "";
    json_t *ir = ir_of(p, why, sizeof why);
    assert_null(ir);
    if (i == 7)
      assert_string_equal(why, "op gt produces bool; only float32 chains are supported");
    else
      assert_string_equal(why, cases[i].why);
    json_t *m = NULL;
    int rc = pw->match(p, &m, why, sizeof why);
    assert_int_equal(rc, i == 5 ? 0 : -1);
    assert_null(m);
    json_decref(p);
  }
}

/* ---- refusals of invalid moves, with the exact reason ---- */

static const struct refusal {
  const char *file, *variant, *why; /* why NULL: valid */
} refusals[] = {
    {"level1/19_ReLU.py", "ROWS=2", "ROWS=2: a pointwise chain has no rows"},
    {"level1/19_ReLU.py", "SPLIT=8", "SPLIT=8: a pointwise chain has no reduction to split"},
    {"level1/19_ReLU.py", "UNROLL=8",
     "UNROLL=8: only MODE grid_stride or persistent has a tile loop to unroll; the default "
     "maps one tile per block"},
    {"level1/19_ReLU.py", "MODE=fused", "MODE fused: the whole chain is already one fused kernel"},
    {"level1/19_ReLU.py", "MODE=idx64",
     "MODE idx64: indices are already 64-bit unless MODE idx32 is set"},
    {"level1/19_ReLU.py", "MODE=predicated_tail",
     "MODE predicated_tail: the elements past the last whole vector already take a "
     "bounds-checked scalar path"},
    {"level1/19_ReLU.py", "MODE=fast_math",
     "MODE fast_math: the chain has no exp, log, division or sigmoid with a faster intrinsic"},
    {"level1/19_ReLU.py", "ITEMS=32",
     "ITEMS=32: 1 to 16 vectors per thread keep the loads in registers"},
    {"level1/19_ReLU.py", "MODE=warp_per_row",
     "MODE warp_per_row: this MODE does not apply to a pointwise chain"},
    {"level1/19_ReLU.py", "MINB=16", "MINB=16: 16 blocks of 256 threads exceed 2048 threads per SM"},
    {"level1/19_ReLU.py", "BLOCK=48", "BLOCK=48: must be a multiple of 32 in [64, 1024]"},
    {"level1/19_ReLU.py", "VEC=8", "VEC=8: vector accesses are 1, 2 or 4 floats"},
    {"level1/19_ReLU.py", "MODE=idx32", NULL},
    {"level1/19_ReLU.py", "MODE=grid_stride UNROLL=8", NULL},
    {"level1/19_ReLU.py", "MODE=ldg", NULL},
    {"level1/19_ReLU.py", "MODE=stream_store", NULL},
    {"level1/21_Sigmoid.py", "MODE=fast_math", NULL},
    {"level1/30_Softsign.py", "MODE=fast_math", NULL},
};

static void test_refusals(void **state) {
  (void)state;
  if (!g_have_ev) {
    printf("needs KernelBench and the python venv\n");
    skip();
    return;
  }
  for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
    const struct refusal *r = &refusals[i];
    json_t *m = match_of(public_profile(r->file));
    struct knob_set k;
    char why[512] = "";
    pw->defaults(m, &k);
    assert_int_equal(pw->check(m, &k, why, sizeof why), 0);
    int rc = apply_variant(&k, r->variant, why, sizeof why);
    bool by_check = rc == 0;
    if (rc == 0)
      rc = pw->check(m, &k, why, sizeof why);
    printf("  %-24s %-26s %s\n", r->file + 7, r->variant, rc ? why : "(valid)");
    if (r->why) {
      assert_int_equal(rc, -1);
      assert_string_equal(why, r->why);
      json_t *cand = NULL;
      char why2[512] = "";
      if (by_check) {
        assert_int_equal(pw->generate(m, &k, &cand, why2, sizeof why2), -1);
        assert_string_equal(why2, r->why);
      }
      assert_null(cand);
    } else if (rc != 0) {
      fail_msg("%s %s refused: %s", r->file, r->variant, why);
    }
    json_decref(m);
  }
  /* More than 2^31 elements need 64-bit indices. */
  json_t *p = mk_profile("[3000000000]", "", "", "",
                         CALL("r", "torch.relu", "[{\"node\":\"x\"}]", "{}", "[3000000000]"),
                         "[3000000000]");
  json_t *m = match_of(p);
  struct knob_set k;
  char why[256] = "";
  pw->defaults(m, &k);
  assert_int_equal(apply_variant(&k, "MODE=idx32", why, sizeof why), 0);
  assert_int_equal(pw->check(m, &k, why, sizeof why), -1);
  assert_string_equal(why, "MODE idx32: 3000000000 elements need 64-bit indices");
  json_decref(m);
  json_decref(p);
}

/* ---- generated plans, checked by hand ---- */

static const struct plan_case {
  const char *file, *variant, *plan, *contains;
} plan_cases[] = {
    /* 1610612736 floats = 402653184 float4; 256 threads x 4 float4 per block. */
    {"level1/19_ReLU.py", "",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_pointwise\",\"grid\":[393216,1,1],"
     "\"block\":[256,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     "  const float t0 = (L0 < 0.0f ? 0.0f : L0);"},
    /* A capped grid: 132 SMs x 8 blocks of 256 x 4 waves; persistent: one wave. */
    {"level1/19_ReLU.py", "MODE=grid_stride",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_pointwise\",\"grid\":[4224,1,1],"
     "\"block\":[256,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     NULL},
    {"level1/19_ReLU.py", "MODE=persistent BLOCK=512",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_pointwise\",\"grid\":[528,1,1],"
     "\"block\":[512,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     NULL},
    /* The scalar s = 3.14 is a constant of the kernel; 2^30 floats / 4096 per block. */
    {"level1/5_Matrix_scalar_multiplication.py", "",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_pointwise\",\"grid\":[262144,1,1],"
     "\"block\":[256,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     "  const float t0 = L0 * 3.1400001f;"},
    /* A.unsqueeze(1) * B: A read at e / 4096; 4096 x 4096 floats / 4096 per block. */
    {"level1/12_Matmul_with_diagonal_matrices_.py", "",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_pointwise\",\"grid\":[4096,1,1],"
     "\"block\":[256,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"input:1\"},{\"tensor\":\"output:0\"}]}]}",
     "(float)OFG_LD(p0 + ((e / 4096)))"},
};

static void test_plans(void **state) {
  (void)state;
  if (!g_have_ev) {
    printf("needs KernelBench and the python venv\n");
    skip();
    return;
  }
  for (size_t i = 0; i < sizeof plan_cases / sizeof plan_cases[0]; i++) {
    const struct plan_case *c = &plan_cases[i];
    json_t *m = match_of(public_profile(c->file)), *cand = NULL;
    struct knob_set k;
    char why[512] = "";
    pw->defaults(m, &k);
    assert_int_equal(apply_variant(&k, c->variant, why, sizeof why), 0);
    if (pw->generate(m, &k, &cand, why, sizeof why) != 0)
      fail_msg("%s: %s", c->file, why);
    json_t *want = json_loads(c->plan, 0, NULL);
    assert_non_null(want);
    json_t *plan = json_object_get(cand, "plan");
    if (!json_equal(plan, want))
      fail_msg("%s [%s]: plan %s", c->file, c->variant, json_dumps(plan, JSON_COMPACT));
    const char *src = json_string_value(json_object_get(cand, "source"));
    if (c->contains && !strstr(src, c->contains))
      fail_msg("%s: source lacks %s", c->file, c->contains);
    assert_non_null(strstr(src, " ofg_pointwise("));
    printf("  %-46s %-26s ok\n", c->file, c->variant);
    json_decref(want);
    json_decref(cand);
    json_decref(m);
  }
}

/* ---- the device's SM count ---- */

/* The match records the profile's "sm_count" (the fallback 132 when it is absent, null or
 * not a positive integer up to 1024), and the defaults and the grid follow it. By hand:
 * relu over 2457600 floats is 614400 float4; at BLOCK 256 a tile of ITEMS=4 float4 per
 * thread covers 1024 of them, 600 tiles. The defaults halve ITEMS while there are fewer
 * than 8 tiles per SM: with 132 SMs 600 < 1056, so ITEMS=2 (1200 tiles >= 1056); with 66
 * SMs 600 >= 528 and ITEMS stays 4. MODE persistent caps the grid at one wave of 2048 / 256
 * = 8 blocks per SM: min(1200, 132 * 8) = 1056 blocks, and min(600, 66 * 8) = 528. */
static void test_sm_count(void **state) {
  (void)state;
  static const struct {
    const char *sm_count; /* the profile's value as JSON; NULL: no key */
    int recorded, items;
    long long persistent_grid;
  } cases[] = {
      {NULL, 132, 2, 1056},   {"null", 132, 2, 1056}, {"0", 132, 2, 1056},
      {"5000", 132, 2, 1056}, {"\"66\"", 132, 2, 1056}, {"66", 66, 4, 528},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *p = mk_profile("[2457600]", "", "", "",
                           CALL("r", "torch.relu", "[{\"node\":\"x\"}]", "{}", "[2457600]"),
                           "[2457600]");
    if (cases[i].sm_count)
      json_object_set_new(p, "sm_count", json_loads(cases[i].sm_count, JSON_DECODE_ANY, NULL));
    json_t *m = match_of(p), *cand = NULL;
    assert_int_equal(json_integer_value(json_object_get(m, "sm_count")), cases[i].recorded);
    struct knob_set k;
    char why[256] = "";
    pw->defaults(m, &k);
    assert_int_equal(k.items, cases[i].items);
    assert_int_equal(apply_variant(&k, "MODE=persistent", why, sizeof why), 0);
    if (pw->generate(m, &k, &cand, why, sizeof why) != 0)
      fail_msg("sm_count %s: %s", cases[i].sm_count ? cases[i].sm_count : "absent", why);
    json_t *launch = json_array_get(json_object_get(json_object_get(cand, "plan"), "launches"), 0);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(launch, "grid"), 0)),
                     cases[i].persistent_grid);
    printf("  sm_count %-6s -> recorded %3d, ITEMS=%d, persistent grid %lld\n",
           cases[i].sm_count ? cases[i].sm_count : "absent", cases[i].recorded, k.items,
           cases[i].persistent_grid);
    json_decref(cand);
    json_decref(m);
    json_decref(p);
  }
}

/* ---- small tasks: the sweep's extra shapes and the emulation's cases ---- */

#define TASKA(init, args, fwd, inputs)                                                   \
  "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"               \
  "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" init  \
  "    def forward(self, " args "):\n        return " fwd "\n"                           \
  "def get_inputs():\n    return " inputs "\ndef get_init_inputs():\n    return []\n"
#define TASK(init, fwd, inputs) TASKA(init, "x", fwd, inputs)
#define NOINIT "        pass\n"
#define SMALL "batch_size = 16\ndim = 1001\n"

static const struct small_task {
  const char *name, *source, *file, *sizes;
  const char *variants[8];
} small_tasks[] = {
    {"relu_odd", TASK(NOINIT, "torch.relu(x)", "[torch.randn(7, 13)]"), NULL, NULL,
     {"", "VEC=2", "VEC=1 ITEMS=3", "MODE=grid_stride UNROLL=2", "MODE=persistent BLOCK=64",
      "MODE=idx32", "MODE=ldg", "MODE=stream_store"}},
    {"p19", NULL, "level1/19_ReLU.py", SMALL, {""}},
    {"p21", NULL, "level1/21_Sigmoid.py", SMALL, {"", "MODE=fast_math"}},
    {"p22", NULL, "level1/22_Tanh.py", SMALL, {""}},
    {"p26", NULL, "level1/26_GELU_.py", SMALL, {""}},
    {"p28", NULL, "level1/28_HardSigmoid.py", SMALL, {""}},
    {"p30", NULL, "level1/30_Softsign.py", SMALL, {"", "MODE=fast_math"}},
    {"p31", NULL, "level1/31_ELU.py", SMALL, {""}},
    {"p32", NULL, "level1/32_HardTanh.py", SMALL, {""}},
    {"p5", NULL, "level1/5_Matrix_scalar_multiplication.py", "M = 64\nN = 48\n", {""}},
    {"p12", NULL, "level1/12_Matmul_with_diagonal_matrices_.py", "M = 40\nN = 64\n",
     {"", "VEC=1"}},
    {"bias", TASK("        self.b = nn.Parameter(torch.randn(6, 1, 1))\n",
                  "F.gelu(x + self.b, approximate='tanh') * 2.0 - torch.sigmoid(x)",
                  "[torch.randn(4, 6, 5, 7)]"),
     NULL, NULL, {"", "MODE=fast_math"}},
    {"acts", TASK("        self.l = nn.LeakyReLU(0.2)\n",
                  "self.l(F.softplus(x, beta=2.0, threshold=10.0)) + F.selu(x) + F.hardswish(x)"
                  " + F.mish(x) + torch.clamp(x, min=-0.5, max=0.5) + F.silu(x)"
                  " + torch.rsqrt(x.abs() + 1) + x ** 3 + x.abs() ** 0.5 + F.relu6(x)"
                  " + F.celu(x, 0.5) + F.logsigmoid(x) + torch.threshold(x, 0.1, 20.0)"
                  " + torch.maximum(x, -x * 0.5) + 2 ** x",
                  "[3 * torch.randn(100, 99)]"),
     NULL, NULL, {""}},
    {"mask", TASKA(NOINIT, "x, m, b", "x * m + b.unsqueeze(0)",
                  "[torch.randn(33, 10), torch.rand(33, 10) > 0.5, torch.randn(10)]"),
     NULL, NULL, {"", "VEC=1"}},
    {"expand", TASKA(NOINIT, "x, y", "x + y.view(1, -1, 1).expand(8, 5, 6)",
                    "[torch.randn(8, 5, 6), torch.randn(5)]"),
     NULL, NULL, {""}},
    /* In-place spellings whose operand nothing else reads: computed out of place. */
    {"inplace", TASK("        self.r = nn.ReLU(inplace=True)\n",
                     "self.r(x * 2.0).add_(1.0).clamp_(max=2.5)", "[torch.randn(9, 11)]"),
     NULL, NULL, {""}},
};

#define N_SMALL (sizeof small_tasks / sizeof small_tasks[0])

/* The small task's source (caller frees): its own, or the public file plus sizes. */
static char *small_source(const struct small_task *t) {
  return task_source(t->source, t->file, t->sizes);
}

/* Small task i as prepare_tasks reads it: its name (static storage) into *ret_name, and its
 * source, which the caller frees. */
static char *small_task(size_t i, const char **ret_name) {
  *ret_name = small_tasks[i].name;
  return small_source(&small_tasks[i]);
}

/* The profile of small task i (cached). */
static json_t *small_profile(size_t i) {
  static json_t *cache[N_SMALL];
  if (!cache[i]) {
    char *src = small_source(&small_tasks[i]);
    cache[i] = evaluator_profile(&g_ev, small_tasks[i].name, src);
    free(src);
    assert_non_null(cache[i]);
  }
  return cache[i];
}
/* The candidate's source and options: what NVRTC compiles (caller frees). */
static char *compile_key(json_t *cand) {
  json_t *c = json_pack("{s:O, s:O}", "source", json_object_get(cand, "source"), "options",
                        json_object_get(cand, "options"));
  char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(c);
  return s;
}

/* The whole candidate (source, options, plan) as text: for comparing (caller frees). */
static char *candidate_text(json_t *cand) {
  json_t *c = json_pack("{s:O, s:O, s:O}", "source", json_object_get(cand, "source"),
                        "options", json_object_get(cand, "options"), "plan",
                        json_object_get(cand, "plan"));
  char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(c);
  return s;
}

/* True when the seed-memory strategy applies to family name. */
static bool strategy_applies(json_t *local, const char *name) {
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(local, "families"), i, f) {
    if (strcmp(json_string_value(f), name) == 0)
      return true;
  }
  return false;
}

/* Applies every pointwise seed move to the defaults of one profile: each is refused with a
 * reason or changes the candidate; the distinct candidates go to cands. */
static void sweep_profile(json_t *profile, const char *tag, json_t *locals, json_t *cands,
                          json_t *seen) {
  json_t *m = match_of(profile), *base = NULL;
  struct knob_set k0;
  char why[512] = "";
  pw->defaults(m, &k0);
  assert_int_equal(pw->generate(m, &k0, &base, why, sizeof why), 0);
  char *base_text = candidate_text(base);
  int moves = 0, refused = 0, changed = 0;
  size_t i;
  json_t *local;
  json_array_foreach(locals, i, local) {
    if (!strategy_applies(local, "pointwise"))
      continue;
    moves++;
    struct knob_set k = k0;
    json_t *cand = NULL;
    why[0] = 0;
    if (knob_apply_move(&k, json_object_get(local, "knob_move"), why, sizeof why) != 0 ||
        pw->check(m, &k, why, sizeof why) != 0) {
      assert_true(why[0] != 0);
      refused++;
      continue;
    }
    assert_int_equal(pw->generate(m, &k, &cand, why, sizeof why), 0);
    char *text = candidate_text(cand);
    bool same_knobs = memcmp(&k, &k0, sizeof k) == 0;
    if (!same_knobs && strcmp(text, base_text) == 0)
      fail_msg("%s: move %s changes the knobs but not the candidate", tag,
               json_string_value(json_object_get(local, "id")));
    changed += !same_knobs;
    char *key = compile_key(cand);
    if (!json_object_get(seen, key)) {
      json_object_set_new(seen, key, json_true());
      json_object_set_new(cand, "tag", json_string(tag));
      json_array_append(cands, cand);
    }
    free(key);
    free(text);
    json_decref(cand);
  }
  char *base_key = compile_key(base);
  if (!json_object_get(seen, base_key)) {
    json_object_set_new(seen, base_key, json_true());
    json_object_set_new(base, "tag", json_string(tag));
    json_array_append(cands, base);
  }
  printf("  %-44s %2d moves: %2d change the code, %2d refused\n", tag, moves, changed, refused);
  free(base_key);
  free(base_text);
  json_decref(base);
  json_decref(m);
}

static void test_nvrtc_sweep(void **state) {
  (void)state;
  if (!g_have_ev) {
    printf("needs KernelBench and the python venv\n");
    skip();
    return;
  }
  char path[1100];
  snprintf(path, sizeof path, "%s/schema/seed_memory.json", getenv("OPFORGE_SOURCE_ROOT"));
  json_t *seed = json_load_file(path, 0, NULL);
  assert_non_null(seed);
  json_t *locals = json_object_get(seed, "locals"), *cands = json_array(), *seen = json_object();
  static const char *const files[] = {"level1/19_ReLU.py", "level1/30_Softsign.py",
                                      "level1/5_Matrix_scalar_multiplication.py",
                                      "level1/12_Matmul_with_diagonal_matrices_.py"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
    sweep_profile(public_profile(files[i]), files[i] + 7, locals, cands, seen);
  static const char *const smalls[] = {"acts", "mask", "relu_odd"};
  for (size_t i = 0; i < sizeof smalls / sizeof smalls[0]; i++)
    for (size_t j = 0; j < N_SMALL; j++)
      if (strcmp(small_tasks[j].name, smalls[i]) == 0)
        sweep_profile(small_profile(j), smalls[i], locals, cands, seen);
  size_t failed = compile_all(cands);
  printf("  %zu distinct candidates compiled with NVRTC, %zu failed\n", json_array_size(cands),
         failed);
  assert_int_equal(failed, 0);
  json_decref(cands);
  json_decref(seen);
  json_decref(seed);
}

/* ---- CPU emulation of generated candidates against PyTorch ---- */

/* A C++ prelude, one line per string, that runs the pointwise kernel on the CPU: it has
 * no barriers or shuffles, so the threads of a block simply run one after another. */
static const char *const emu_prelude[] = {
    "// CPU emulator of the pointwise family's CUDA kernel (tests only).",
    "#include <math.h>",
    "#include <cmath>",
    "#include <cstdio>",
    "#include <cstdlib>",
    "#include <cstring>",
    "#include <functional>",
    "#define OFG_EMU 1",
    "#define __global__",
    "#define __device__",
    "#define __forceinline__ inline",
    "#define __restrict__",
    "#define __launch_bounds__(...)",
    "#define __expf(x) expf(x)",
    "#define __logf(x) logf(x)",
    "struct float4 { float x, y, z, w; };",
    "struct float2 { float x, y; };",
    "static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }",
    "static inline float2 make_float2(float a, float b) { return {a, b}; }",
    "struct ofg_u3 { unsigned x, y, z; };",
    "static ofg_u3 threadIdx, blockIdx, blockDim, gridDim;",
    "template <class T> static inline T __ldg(const T* p) { return *p; }",
    "template <class T> static inline void __stcs(T* p, T v) { *p = v; }",
    "template <class T> static inline void __stwb(T* p, T v) { *p = v; }",
    "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }",
    "static inline float __fdividef(float a, float b) { return a / b; }",
    "static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }",
    "static void ofg_emu_fail(const char* what) { fprintf(stderr, \"emu: %s\\n\", what); exit(90); }",
    "// common.cuh's block reductions need these; the pointwise kernel never calls them.",
    "static inline void __syncthreads() { ofg_emu_fail(\"__syncthreads in a pointwise kernel\"); }",
    "template <class T> static inline T __shfl_xor_sync(unsigned, T v, int) {",
    "  ofg_emu_fail(\"shuffle in a pointwise kernel\");",
    "  return v;",
    "}",
    "static void ofg_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,",
    "                           unsigned bz, size_t, unsigned, std::function<void()> k) {",
    "  blockDim = {bx, by, bz};",
    "  gridDim = {gx, gy, gz};",
    "  for (unsigned z = 0; z < gz; z++)",
    "    for (unsigned y = 0; y < gy; y++)",
    "      for (unsigned x = 0; x < gx; x++)",
    "        for (unsigned t = 0; t < bx * by * bz; t++) {",
    "          blockIdx = {x, y, z};",
    "          threadIdx = {t % bx, t / bx % by, t / (bx * by)};",
    "          k();",
    "        }",
    "}",
    "struct ofg_emu_ptr {",
    "  void* p;",
    "  template <class T> operator T*() const { return (T*)p; }",
    "};",
    "static void* ofg_emu_alloc(size_t bytes, int fill) {",
    "  void* p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);",
    "  memset(p, fill, bytes + 16);",
    "  return p;",
    "}",
    "static void* ofg_emu_load(const char* dir, const char* name, size_t bytes) {",
    "  char path[1024];",
    "  snprintf(path, sizeof path, \"%s/%s.bin\", dir, name);",
    "  void* p = ofg_emu_alloc(bytes, 0);",
    "  FILE* fp = fopen(path, \"rb\");",
    "  if (!fp || fread(p, 1, bytes, fp) != bytes) ofg_emu_fail(path);",
    "  fclose(fp);",
    "  return p;",
    "}",
    "static void ofg_emu_save(const char* path, const void* p, size_t bytes) {",
    "  FILE* fp = fopen(path, \"wb\");",
    "  if (!fp || fwrite(p, 1, bytes, fp) != bytes) ofg_emu_fail(path);",
    "  fclose(fp);",
    "}",
    NULL,
};

/* Generates every variant of every small task into one C++ program, builds and runs it,
 * and compares every result. */
static void test_emulated_tasks(void **state) {
  (void)state;
  if (!g_have_ev || system("c++ --version > /dev/null 2>&1") != 0) {
    printf("needs KernelBench, the python venv and a C++ compiler\n");
    skip();
    return;
  }
  char tmp[] = "/tmp/opforge-pointwise-emu-XXXXXX";
  assert_non_null(mkdtemp(tmp));
  prepare_tasks(tmp, N_SMALL, small_task);
  char prog[1100];
  snprintf(prog, sizeof prog, "%s/emu.cpp", tmp);
  FILE *f = fopen(prog, "w");
  assert_non_null(f);
  for (size_t i = 0; emu_prelude[i]; i++)
    fprintf(f, "%s\n", emu_prelude[i]);
  json_t *runs = json_array();
  for (size_t i = 0; i < N_SMALL; i++) {
    const struct small_task *t = &small_tasks[i];
    json_t *profile = small_profile(i), *m = match_of(profile);
    for (size_t v = 0; v < 8 && t->variants[v]; v++) {
      struct knob_set k;
      char why[512] = "", ns[64], dir[1100], result[1200];
      pw->defaults(m, &k);
      if (apply_variant(&k, t->variants[v], why, sizeof why) != 0)
        fail_msg("%s [%s]: %s", t->name, t->variants[v], why);
      json_t *cand = NULL;
      if (pw->generate(m, &k, &cand, why, sizeof why) != 0)
        fail_msg("%s [%s]: %s", t->name, t->variants[v], why);
      snprintf(ns, sizeof ns, "c%zu", json_array_size(runs));
      snprintf(dir, sizeof dir, "%s/%s", tmp, t->name);
      snprintf(result, sizeof result, "%s/result_%zu.bin", dir, v);
      write_candidate(f, ns, profile, cand, dir, result);
      json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
      json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:s, s:O}", "ns", ns, "dir", dir,
                                            "result", result, "what", t->variants[v], "dtype",
                                            json_object_get(out, "dtype")));
      json_decref(cand);
    }
    json_decref(m);
  }
  fprintf(f, "int main() {\n");
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) fprintf(f, "  %s::run();\n", json_string_value(json_object_get(r, "ns")));
  fprintf(f, "  return 0;\n}\n");
  assert_int_equal(fclose(f), 0);
  char cmd[4096];
  const char *cxx = getenv("CXX") && getenv("CXX")[0] ? getenv("CXX") : "c++";
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -w -o %s/emu %s && %s/emu", cxx, tmp, prog, tmp);
  assert_int_equal(system(cmd), 0);
  check_runs(runs, 9, 28);
  json_decref(runs);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expr_constants),
      cmocka_unit_test(test_expr_broadcast),
      cmocka_unit_test(test_expr_emit),
      cmocka_unit_test(test_expr_in_place),
      cmocka_unit_test(test_expr_refusals),
      cmocka_unit_test(test_public_tasks),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_plans),
      cmocka_unit_test(test_sm_count),
      cmocka_unit_test(test_nvrtc_sweep),
      cmocka_unit_test(test_emulated_tasks),
  };
  int rc = cmocka_run_group_tests(tests, builtin_group_setup, builtin_group_teardown);
  return rc;
}
