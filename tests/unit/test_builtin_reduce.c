/* Unit tests of the builtin reduction, softmax and norm families: matching of every public
 * task (one evaluator process on the meta device), refusals of knob moves with their
 * reasons, hand-checked plans, NVRTC compiles under every seed-memory move, and a CPU
 * emulation of generated candidates (CUDA threads as ucontext fibers, clusters as OS
 * threads) checked against PyTorch with the evaluator's accuracy rules. */
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
#include "proposers/builtin/norm.h"
#include "proposers/builtin/reduction.h"
#include "proposers/builtin/softmax.h"
#include "gpu/nvrtc_compile.h"

#define BUILTIN_TESTLIB_EMULATOR
#include "builtin_testlib.h"

/* The families under test, in the registry's order. */
static const struct builtin_family *const families[] = {
    &builtin_family_softmax, &builtin_family_norm, &builtin_family_reduction, NULL};

/* ---- the evaluator process of this test run (client in builtin_testlib.c) ---- */

/* ---- matching helpers ---- */

/* The first family of ours that matches (rc 1), with its match (caller owns); NULL when
 * none does. */
static const struct builtin_family *first_match(json_t *profile, json_t **ret_match) {
  for (size_t i = 0; families[i]; i++) {
    char why[512] = "";
    json_t *m = NULL;
    int rc = families[i]->match(profile, &m, why, sizeof why);
    assert_true(rc >= -1 && rc <= 1);
    if (rc < 0)
      assert_true(why[0] != '\0');
    if (rc == 1) {
      assert_non_null(m);
      *ret_match = m;
      return families[i];
    }
  }
  return NULL;
}

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

/* ---- (1) every public task: family, op and canonical shape ---- */

static const struct expected {
  const char *file, *family, *op;
  long long c[3];
} expected[] = {
    {"level1/23_Softmax.py", "softmax", "softmax", {4096, 393216, 1}},
    {"level1/33_BatchNorm.py", "norm", "batch_norm", {64, 64, 262144}},
    {"level1/36_RMSNorm_.py", "norm", "rms_norm", {112, 64, 262144}},
    {"level1/38_L1Norm_.py", "norm", "l1_norm", {32768, 65535, 1}},
    {"level1/39_L2Norm_.py", "norm", "l2_norm", {32768, 65535, 1}},
    {"level1/40_LayerNorm.py", "norm", "layer_norm", {16, 4194304, 1}},
    {"level1/47_Sum_reduction_over_a_dimension.py", "reduction", "sum", {128, 4096, 4095}},
    {"level1/49_Max_reduction_over_a_dimension.py", "reduction", "max", {128, 4096, 4095}},
    {"level1/51_Argmax_over_a_dimension.py", "reduction", "argmax", {128, 4096, 4095}},
    {"level1/52_Argmin_over_a_dimension.py", "reduction", "argmin", {128, 4096, 4095}},
    /* The loss family comes first in the registry; the reduction computes it exactly. */
    {"level1/94_MSELoss.py", "reduction", "mean", {1, 1073741824, 1}},
};

static const struct expected *expected_for(const char *file) {
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
    if (strcmp(expected[i].file, file) == 0)
      return &expected[i];
  return NULL;
}

/* Checks one public task against the table: the expected match, or no match at all. */
static void check_public_task(const char *file, void *ret_matched) {
  json_t *profile = public_profile(file);
  json_t *m = NULL;
  const struct builtin_family *fam = first_match(profile, &m);
  const struct expected *e = expected_for(file);
  if (!e) {
    if (fam)
      fail_msg("%s: unexpected match by %s: %s", file, fam->name,
               json_string_value(json_object_get(m, "summary")));
    return;
  }
  if (!fam)
    fail_msg("%s: no match", file);
  printf("  %-48s %-9s %-10s [%lld, %lld, %lld]\n", file, fam->name,
         json_string_value(json_object_get(m, "op")), e->c[0], e->c[1], e->c[2]);
  assert_string_equal(fam->name, e->family);
  assert_string_equal(json_string_value(json_object_get(m, "family")), e->family);
  assert_string_equal(json_string_value(json_object_get(m, "op")), e->op);
  json_t *c = json_object_get(m, "canonical");
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(json_integer_value(json_array_get(c, i)), e->c[i]);
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
  printf("  %d of %d public tasks matched by reduction/softmax/norm\n", matched, seen);
  assert_int_equal(matched, (int)(sizeof expected / sizeof expected[0]));
}

/* ---- profiles of public tasks (full size) and of small tasks (emulation) ---- */

/* The match of a profile by the named family (caller owns). */
static json_t *match_of(const struct builtin_family *fam, json_t *profile) {
  json_t *m = NULL;
  char why[512] = "";
  if (fam->match(profile, &m, why, sizeof why) != 1)
    fail_msg("%s does not match: %s", fam->name, why);
  return m;
}

/* ---- (3) refusals of invalid moves, with the exact reason ---- */

static const struct refusal {
  const char *file;
  const struct builtin_family *fam;
  const char *variant, *why; /* why NULL: the move is valid */
} refusals[] = {
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction, "VEC=4",
     "VEC=4: inner length 4095 is not a multiple of 4"},
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction,
     "MODE=warp_per_row",
     "MODE warp_per_row: inner > 1: the column kernel gives each thread its own output "
     "columns"},
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction,
     "MODE=inner_coalesced",
     "MODE inner_coalesced: threads already walk the contiguous inner axis when inner > 1"},
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction, "ITEMS=2",
     "ITEMS=2: the column kernel batches UNROLL rows per thread; use UNROLL"},
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction, "ROWS=2",
     "ROWS=2: the column kernel has no rows per block"},
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction, "MODE=shuffle",
     "MODE shuffle: partials are already combined with warp shuffles"},
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction, "MODE=idx32",
     NULL},
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction, "SPLIT=16",
     NULL},
    {"level1/51_Argmax_over_a_dimension.py", &builtin_family_reduction, "UNROLL=32",
     "UNROLL would become 32, outside [1, 16]"},
    {"level1/94_MSELoss.py", &builtin_family_reduction, "MODE=idx32", NULL},
    {"level1/94_MSELoss.py", &builtin_family_reduction, "MODE=inner_coalesced",
     "MODE inner_coalesced: inner is 1: rows are contiguous, use warp_per_row or "
     "block_per_row"},
    {"level1/94_MSELoss.py", &builtin_family_reduction, "ROWS=2",
     "ROWS=2: a block reduces one row; ROWS applies to warp_per_row"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "MODE=two_pass",
     "MODE two_pass: statistics over a cached row are already two-pass"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "MODE=stable_lse",
     "MODE stable_lse: the row max is already subtracted before exp"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "MODE=single_kernel",
     "MODE single_kernel: statistics and output are already one kernel"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "MODE=warp_per_row",
     "SPLIT=8 splits a row over blocks: use block_per_row"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "ITEMS=2",
     "ITEMS=2 batches loads of a streamed row; this row is cached (use VEC or BLOCK)"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "ROWS=2",
     "ROWS=2: a block handles one row (chunk); ROWS applies to warp_per_row"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "SPLIT=4", NULL},
    {"level1/23_Softmax.py", &builtin_family_softmax, "SPLIT=4 MODE=smem_row",
     "393216 bytes of shared memory per block exceed 230400: raise SPLIT"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "MODE=cached_row",
     "a row chunk of 49152 floats needs 48 floats per thread in registers and about 72 "
     "registers; 1024 threads per block allow 64"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "BLOCK=2048",
     "BLOCK would become 2048, outside [32, 1024]"},
    {"level1/23_Softmax.py", &builtin_family_softmax, "MODE=online", NULL},
    {"level1/23_Softmax.py", &builtin_family_softmax, "MODE=recip_mul", NULL},
    {"level1/23_Softmax.py", &builtin_family_softmax, "UNROLL=8", NULL},
    {"level1/40_LayerNorm.py", &builtin_family_norm, "MODE=welford",
     "MODE welford: rows split over launches merge Welford partials"},
    {"level1/40_LayerNorm.py", &builtin_family_norm, "MODE=single_kernel",
     "MODE single_kernel: the row is split over launches because it does not fit one "
     "block or cluster on chip"},
    {"level1/40_LayerNorm.py", &builtin_family_norm, "MODE=recip_mul",
     "MODE recip_mul: the output already multiplies by 1/sqrt(var + eps)"},
    {"level1/40_LayerNorm.py", &builtin_family_norm, "MODE=smem_row",
     "SPLIT=256 > 8 splits rows over separate launches, which stream the row; cached rows "
     "split over clusters of at most 8"},
    {"level1/33_BatchNorm.py", &builtin_family_norm, "MODE=welford",
     "MODE welford: batch statistics are already per-slice Welford partials"},
    {"level1/33_BatchNorm.py", &builtin_family_norm, "MODE=warp_per_row",
     "MODE warp_per_row: batch norm uses its own partial, finalize and apply launches"},
    {"level1/33_BatchNorm.py", &builtin_family_norm, "ROWS=2",
     "ROWS=2: batch norm has no rows per block"},
    {"level1/33_BatchNorm.py", &builtin_family_norm, "MODE=ldg", NULL},
    {"level1/36_RMSNorm_.py", &builtin_family_norm, "UNROLL=4",
     "UNROLL=4: the cached column's loops are fully unrolled"},
    {"level1/36_RMSNorm_.py", &builtin_family_norm, "SPLIT=8",
     "ROWS, SPLIT and ITEMS apply to rows (inner == 1); the column kernel uses UNROLL"},
    {"level1/36_RMSNorm_.py", &builtin_family_norm, "MODE=welford",
     "MODE welford: this norm has one statistic, no mean and variance"},
    {"level1/36_RMSNorm_.py", &builtin_family_norm, "MODE=smem_row",
     "MODE smem_row: the column kernel keeps its column in registers or re-reads it; "
     "nothing to stage in shared memory"},
    {"level1/36_RMSNorm_.py", &builtin_family_norm, "VEC=4", NULL},
    {"level1/38_L1Norm_.py", &builtin_family_norm, "VEC=4",
     "VEC=4: rows of 65535 floats are not 16-byte aligned"},
    {"level1/38_L1Norm_.py", &builtin_family_norm, "MODE=recip_mul", NULL},
    {"level1/38_L1Norm_.py", &builtin_family_norm, "MODE=fast_math", NULL},
    {"level1/38_L1Norm_.py", &builtin_family_norm, "MINB=8",
     "MINB=8: 8 blocks of 512 threads exceed 2048 threads per SM"},
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
    json_t *m = match_of(r->fam, public_profile(r->file));
    struct knob_set k;
    r->fam->defaults(m, &k);
    assert_int_equal(r->fam->check(m, &k, NULL, 0) == 0 ? 0 : 1, 0);
    char why[512] = "";
    int rc = apply_variant(&k, r->variant, why, sizeof why);
    bool by_check = rc == 0;
    if (rc == 0)
      rc = r->fam->check(m, &k, why, sizeof why);
    printf("  %-36s %-22s %s\n", r->file + 7, r->variant, rc ? why : "(valid)");
    if (r->why) {
      assert_int_equal(rc, -1);
      assert_string_equal(why, r->why);
      json_t *cand = NULL;
      char why2[512] = "";
      /* generate() refuses the same knobs, with the same reason. */
      if (by_check) {
        assert_int_equal(r->fam->generate(m, &k, &cand, why2, sizeof why2), -1);
        assert_string_equal(why2, r->why);
      }
      assert_null(cand);
    } else {
      if (rc != 0)
        fail_msg("%s %s refused: %s", r->file, r->variant, why);
    }
    json_decref(m);
  }
}

/* ---- (4) generated plans, checked by hand ---- */

static const struct plan_case {
  const char *file;
  const struct builtin_family *fam;
  const char *variant;
  const char *plan;      /* the whole expected plan */
  const char *contains;  /* a line the source must contain, or NULL */
} plan_cases[] = {
    /* 128 x 4095 outputs, one thread each: 524160 / 256 = 2047.5 -> 2048 blocks. */
    {"level1/47_Sum_reduction_over_a_dimension.py", &builtin_family_reduction, "",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_reduce_cols\",\"grid\":[2048,1,1],"
     "\"block\":[256,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     "#define OFG_KIND_SUM 1"},
    /* Argmax split over 3 slices of R: partial values and indices of 3 x 524160 outputs;
     * too many outputs for a warp each, so the finish kernel has a thread per output. */
    {"level1/51_Argmax_over_a_dimension.py", &builtin_family_reduction, "SPLIT=3",
     "{\"buffers\":[{\"name\":\"pv\",\"bytes\":6289920},{\"name\":\"pi\",\"bytes\":6289920}],"
     "\"launches\":[{\"kernel\":\"ofg_reduce_cols\",\"grid\":[2048,3,1],\"block\":[256,1,1],"
     "\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},"
     "{\"buffer\":\"pv\"},{\"buffer\":\"pi\"}]},{\"kernel\":\"ofg_reduce_finish\","
     "\"grid\":[2048,1,1],\"block\":[256,1,1],\"shared_bytes\":0,\"args\":[{\"buffer\":\"pv\"},"
     "{\"buffer\":\"pi\"},{\"tensor\":\"output:0\"}]}]}",
     "#define OFG_OUT_T long long"},
    /* One row of 2^30 squared differences: ceil(264 / 1) slices, a warp finishes them. */
    {"level1/94_MSELoss.py", &builtin_family_reduction, "",
     "{\"buffers\":[{\"name\":\"pv\",\"bytes\":1056}],\"launches\":[{\"kernel\":"
     "\"ofg_reduce_rows\",\"grid\":[264,1,1],\"block\":[512,1,1],\"shared_bytes\":0,"
     "\"args\":[{\"tensor\":\"input:0\"},{\"tensor\":\"input:1\"},{\"tensor\":\"output:0\"},"
     "{\"buffer\":\"pv\"}]},{\"kernel\":\"ofg_reduce_finish\",\"grid\":[1,1,1],"
     "\"block\":[512,1,1],\"shared_bytes\":0,\"args\":[{\"buffer\":\"pv\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     "#define OFG_MEAN 1"},
    /* Rows of 393216 floats: clusters of 8 blocks, each staging 12288 float4 = 196608 B. */
    {"level1/23_Softmax.py", &builtin_family_softmax, "",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_softmax_rows\",\"grid\":[32768,1,1],"
     "\"block\":[1024,1,1],\"shared_bytes\":196608,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     "#define OFG_CLUSTER __cluster_dims__(8, 1, 1)"},
    /* 16 rows of 4M: 256 chunks of 16384 floats each, two launches. */
    {"level1/40_LayerNorm.py", &builtin_family_norm, "",
     "{\"buffers\":[{\"name\":\"p0\",\"bytes\":16384},{\"name\":\"p1\",\"bytes\":16384},"
     "{\"name\":\"p2\",\"bytes\":16384}],\"launches\":[{\"kernel\":\"ofg_norm_part\","
     "\"grid\":[4096,1,1],\"block\":[512,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":"
     "\"input:0\"},{\"buffer\":\"p0\"},{\"buffer\":\"p1\"},{\"buffer\":\"p2\"}]},{\"kernel\":"
     "\"ofg_norm_apply\",\"grid\":[4096,1,1],\"block\":[512,1,1],\"shared_bytes\":0,\"args\":"
     "[{\"tensor\":\"input:0\"},{\"buffer\":\"p0\"},{\"buffer\":\"p1\"},{\"buffer\":\"p2\"},"
     "{\"tensor\":\"output:0\"},{\"tensor\":\"param:ln.weight\"},{\"tensor\":"
     "\"param:ln.bias\"}]}]}",
     "#define OFG_STAT_MEANVAR 1"},
    /* 64 channels x 33 slices for the statistics and again for the output pass. */
    {"level1/33_BatchNorm.py", &builtin_family_norm, "",
     "{\"buffers\":[{\"name\":\"p0\",\"bytes\":8448},{\"name\":\"p1\",\"bytes\":8448},"
     "{\"name\":\"p2\",\"bytes\":8448},{\"name\":\"stats\",\"bytes\":512}],\"launches\":["
     "{\"kernel\":\"ofg_bn_part\",\"grid\":[2112,1,1],\"block\":[512,1,1],\"shared_bytes\":0,"
     "\"args\":[{\"tensor\":\"input:0\"},{\"buffer\":\"p0\"},{\"buffer\":\"p1\"},{\"buffer\":"
     "\"p2\"}]},{\"kernel\":\"ofg_bn_finalize\",\"grid\":[64,1,1],\"block\":[512,1,1],"
     "\"shared_bytes\":0,\"args\":[{\"buffer\":\"p0\"},{\"buffer\":\"p1\"},{\"buffer\":\"p2\"},"
     "{\"buffer\":\"stats\"}]},{\"kernel\":\"ofg_bn_apply\",\"grid\":[2112,1,1],\"block\":"
     "[512,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},{\"buffer\":\"stats\"},"
     "{\"tensor\":\"output:0\"},{\"tensor\":\"param:bn.weight\"},{\"tensor\":"
     "\"param:bn.bias\"}]}]}",
     "#define OFG_BATCH_NORM 1"},
    /* 112 x 262144 columns, each thread caching its 64 values: 114688 blocks of 256. */
    {"level1/36_RMSNorm_.py", &builtin_family_norm, "",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_norm_cols\",\"grid\":[114688,1,1],"
     "\"block\":[256,1,1],\"shared_bytes\":0,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     "#define OFG_PATH_REG 1"},
    /* Rows of 65535 floats over clusters of 4 blocks of 16384 floats = 65536 B each. */
    {"level1/38_L1Norm_.py", &builtin_family_norm, "",
     "{\"buffers\":[],\"launches\":[{\"kernel\":\"ofg_norm_rows\",\"grid\":[131072,1,1],"
     "\"block\":[512,1,1],\"shared_bytes\":65536,\"args\":[{\"tensor\":\"input:0\"},"
     "{\"tensor\":\"output:0\"}]}]}",
     "#define OFG_CLUSTER __cluster_dims__(4, 1, 1)"},
};

static void test_plans(void **state) {
  (void)state;
  if (!g_have_ev) {
    printf("needs KernelBench and the python venv\n");
    skip();
    return;
  }
  for (size_t i = 0; i < sizeof plan_cases / sizeof plan_cases[0]; i++) {
    const struct plan_case *p = &plan_cases[i];
    json_t *m = match_of(p->fam, public_profile(p->file)), *cand = NULL;
    struct knob_set k;
    char why[512] = "";
    p->fam->defaults(m, &k);
    assert_int_equal(apply_variant(&k, p->variant, why, sizeof why), 0);
    if (p->fam->generate(m, &k, &cand, why, sizeof why) != 0)
      fail_msg("%s: %s", p->file, why);
    json_t *want = json_loads(p->plan, 0, NULL);
    assert_non_null(want);
    json_t *plan = json_object_get(cand, "plan");
    if (!json_equal(plan, want)) {
      char *got = json_dumps(plan, JSON_COMPACT);
      fail_msg("%s [%s]: plan %s", p->file, p->variant, got);
    }
    const char *src = json_string_value(json_object_get(cand, "source"));
    if (p->contains && !strstr(src, p->contains))
      fail_msg("%s: source lacks %s", p->file, p->contains);
    /* Every kernel the plan launches is defined in the source. */
    size_t j;
    json_t *l;
    json_array_foreach(json_object_get(plan, "launches"), j, l) {
      char decl[128];
      snprintf(decl, sizeof decl, " %s(", json_string_value(json_object_get(l, "kernel")));
      assert_non_null(strstr(src, decl));
    }
    printf("  %-44s %-8s ok\n", p->file, p->variant);
    json_decref(want);
    json_decref(cand);
    json_decref(m);
  }
}

/* ---- (2) NVRTC compiles under every seed-memory move ---- */


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

/* Applies every seed move of the family to the defaults of one profile: each is refused
 * with a reason or changes the candidate; the distinct candidates go to cands. */
static void sweep_profile(const struct builtin_family *fam, json_t *profile, const char *tag,
                          json_t *locals, json_t *cands, json_t *seen) {
  json_t *m = match_of(fam, profile), *base = NULL;
  struct knob_set k0;
  char why[512] = "";
  fam->defaults(m, &k0);
  assert_int_equal(fam->generate(m, &k0, &base, why, sizeof why), 0);
  char *base_text = candidate_text(base);
  int moves = 0, refused = 0, changed = 0;
  size_t i;
  json_t *local;
  json_array_foreach(locals, i, local) {
    if (!strategy_applies(local, fam->name))
      continue;
    moves++;
    struct knob_set k = k0;
    json_t *cand = NULL;
    why[0] = 0;
    if (knob_apply_move(&k, json_object_get(local, "knob_move"), why, sizeof why) != 0 ||
        fam->check(m, &k, why, sizeof why) != 0) {
      assert_true(why[0] != 0);
      refused++;
      continue;
    }
    assert_int_equal(fam->generate(m, &k, &cand, why, sizeof why), 0);
    char *text = candidate_text(cand);
    bool same_knobs = memcmp(&k, &k0, sizeof k) == 0;
    if (!same_knobs && strcmp(text, base_text) == 0)
      fail_msg("%s %s: move %s changes the knobs but not the candidate", fam->name, tag,
               json_string_value(json_object_get(local, "id")));
    if (!same_knobs)
      changed++;
    char *key = compile_key(cand);
    if (!json_object_get(seen, key)) {
      json_object_set_new(seen, key, json_true());
      char t[256];
      snprintf(t, sizeof t, "%s %s %s", fam->name, tag,
               json_string_value(json_object_get(local, "id")));
      json_object_set_new(cand, "tag", json_string(t));
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
  printf("  %-9s %-44s %2d moves: %2d change the code, %2d refused\n", fam->name, tag, moves,
         changed, refused);
  free(base_key);
  free(base_text);
  json_decref(base);
  json_decref(m);
}

/* ---- small tasks: the sweep's extra shapes and the emulation's cases ---- */

#define TASK(init, fwd, inputs)                                                          \
  "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"               \
  "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" init  \
  "    def forward(self, x):\n        return " fwd "\n"                                  \
  "def get_inputs():\n    return " inputs "\ndef get_init_inputs():\n    return []\n"
#define NOINIT "        pass\n"

/* A task (a source, or a public file with its sizes overridden), the family expected to
 * match it, and the knob variants ("KNOB=value ...") to emulate ("" = defaults). */
static const struct small_task {
  const char *name, *source, *file, *sizes;
  const struct builtin_family *fam;
  const char *variants[7];
} small_tasks[] = {
    {"sum_cols", TASK(NOINIT, "torch.sum(x, dim=1, keepdim=True)", "[torch.rand(4, 33, 7)]"),
     NULL, NULL, &builtin_family_reduction, {"", "UNROLL=3", "SPLIT=4", "MODE=idx32"}},
    {"mean_rows", TASK(NOINIT, "x.mean(dim=-1)", "[torch.rand(37, 1000)]"), NULL, NULL,
     &builtin_family_reduction,
     {"", "MODE=warp_per_row", "SPLIT=3", "ITEMS=2 UNROLL=3", "MODE=grid_stride",
      "VEC=1 ROWS=1 MODE=block_per_row BLOCK=64"}},
    {"sum_warp", TASK(NOINIT, "torch.sum(x, dim=-1)", "[torch.rand(300, 10)]"), NULL, NULL,
     &builtin_family_reduction, {"", "ROWS=1", "MODE=persistent"}},
    {"argmax_cols", TASK(NOINIT, "torch.argmax(x, dim=1)", "[torch.rand(8, 300, 16)]"), NULL,
     NULL, &builtin_family_reduction, {"", "SPLIT=5", "VEC=2 UNROLL=5"}},
    {"argmin_ties",
     TASK(NOINIT, "torch.argmin(x, dim=-1)", "[torch.randint(0, 4, (50, 77)).float()]"), NULL,
     NULL, &builtin_family_reduction, {"", "MODE=block_per_row", "SPLIT=4", "ROWS=4"}},
    {"amax_all", TASK(NOINIT, "torch.amax(x)", "[torch.rand(300, 301)]"), NULL, NULL,
     &builtin_family_reduction, {"", "SPLIT=1"}},
    {"max_dim", TASK(NOINIT, "torch.max(x, dim=1)[0]", "[torch.randn(5, 40, 3)]"), NULL, NULL,
     &builtin_family_reduction, {""}},
    {"norm_fro", TASK(NOINIT, "torch.norm(x, p='fro', dim=(1, 2))", "[torch.rand(6, 20, 30)]"),
     NULL, NULL, &builtin_family_reduction, {"", "MODE=warp_per_row"}},
    {"prod_rows", TASK(NOINIT, "torch.prod(x, dim=1)", "[0.9 + 0.2 * torch.rand(16, 10)]"),
     NULL, NULL, &builtin_family_reduction, {""}},
    {"sum_epi", TASK(NOINIT, "torch.sqrt(x.abs().sum(dim=1) + 1.0)", "[torch.randn(64, 500)]"),
     NULL, NULL, &builtin_family_reduction, {""}},
    {"mse", TASK(NOINIT, "torch.mean((x - 0.5) ** 2)", "[torch.rand(100, 1000)]"), NULL, NULL,
     &builtin_family_reduction, {""}},
    {"p47", NULL, "level1/47_Sum_reduction_over_a_dimension.py",
     "batch_size = 3\ndim1 = 100\ndim2 = 63\n", &builtin_family_reduction, {""}},
    {"p49", NULL, "level1/49_Max_reduction_over_a_dimension.py",
     "batch_size = 3\ndim1 = 100\ndim2 = 63\n", &builtin_family_reduction, {""}},
    {"p51", NULL, "level1/51_Argmax_over_a_dimension.py",
     "batch_size = 3\ndim1 = 100\ndim2 = 63\n", &builtin_family_reduction, {""}},
    {"p52", NULL, "level1/52_Argmin_over_a_dimension.py",
     "batch_size = 3\ndim1 = 100\ndim2 = 63\n", &builtin_family_reduction, {""}},
    {"sm_warp", TASK(NOINIT, "torch.softmax(x, dim=-1)", "[torch.randn(64, 100)]"), NULL, NULL,
     &builtin_family_softmax, {"", "MODE=online", "ROWS=2"}},
    {"sm_tiny", TASK(NOINIT, "F.log_softmax(x, dim=1)", "[torch.randn(40, 10)]"), NULL, NULL,
     &builtin_family_softmax, {"", "MODE=smem_row"}},
    {"sm_block", TASK(NOINIT, "torch.softmax(x, dim=1)", "[4 * torch.randn(6, 3000)]"), NULL,
     NULL, &builtin_family_softmax,
     {"SPLIT=1 ITEMS=1", "SPLIT=1 ITEMS=1 MODE=online", "SPLIT=1 ITEMS=1 MODE=smem_row UNROLL=2",
      "SPLIT=3 ITEMS=1", "SPLIT=3 ITEMS=1 MODE=smem_row", "SPLIT=12",
      "SPLIT=1 ITEMS=1 MODE=recip_mul"}},
    {"sm_stream", TASK(NOINIT, "torch.softmax(x, dim=1)", "[torch.randn(2, 60000)]"), NULL,
     NULL, &builtin_family_softmax, {"SPLIT=12", "SPLIT=1", "SPLIT=1 MODE=two_pass ITEMS=2"}},
    {"lsm_block", TASK(NOINIT, "torch.log_softmax(x, dim=-1)", "[torch.randn(5, 2500)]"), NULL,
     NULL, &builtin_family_softmax, {"SPLIT=10", "SPLIT=2 ITEMS=1", "SPLIT=10 MODE=fast_math"}},
    {"sm_cols", TASK("        self.s = nn.Softmax(dim=1)\n", "self.s(x)",
                     "[torch.randn(4, 20, 33)]"),
     NULL, NULL, &builtin_family_softmax, {"", "MODE=online"}},
    {"sm_colstream", TASK(NOINIT, "torch.softmax(x, dim=0)", "[torch.randn(100, 18)]"), NULL,
     NULL, &builtin_family_softmax, {"", "MODE=two_pass", "VEC=1 UNROLL=3"}},
    {"p23", NULL, "level1/23_Softmax.py", "batch_size = 4\ndim = 20000\n",
     &builtin_family_softmax,
     {"SPLIT=8 ITEMS=1 BLOCK=256", "SPLIT=8 ITEMS=1 BLOCK=256 MODE=smem_row"}},
    {"ln", TASK("        self.ln = nn.LayerNorm(768)\n", "self.ln(x)", "[torch.randn(16, 768)]"),
     NULL, NULL, &builtin_family_norm,
     {"", "MODE=welford", "MODE=smem_row", "SPLIT=2", "SPLIT=16", "ROWS=2 BLOCK=64",
      "MODE=block_per_row"}},
    {"p40", NULL, "level1/40_LayerNorm.py", "batch_size = 3\nfeatures = 4\ndim1 = 8\ndim2 = 8\n",
     &builtin_family_norm, {"", "SPLIT=9"}},
    {"ln_stream", TASK("        self.ln = nn.LayerNorm(60000)\n", "self.ln(x)",
                       "[3.0 + torch.randn(2, 60000)]"),
     NULL, NULL, &builtin_family_norm,
     {"SPLIT=9", "SPLIT=1 ITEMS=1", "SPLIT=1 ITEMS=2 MODE=two_pass", "SPLIT=3 ITEMS=1"}},
    {"gn", TASK("        self.gn = nn.GroupNorm(4, 16)\n", "self.gn(x)",
                "[torch.randn(4, 16, 5, 6)]"),
     NULL, NULL, &builtin_family_norm, {"", "SPLIT=2", "MODE=welford"}},
    {"in", TASK("        self.n = nn.InstanceNorm2d(5, affine=True)\n", "self.n(x)",
                "[torch.randn(3, 5, 7, 9)]"),
     NULL, NULL, &builtin_family_norm, {"", "MODE=block_per_row"}},
    {"p33", NULL, "level1/33_BatchNorm.py", "batch_size = 4\nfeatures = 3\ndim1 = 8\ndim2 = 8\n",
     &builtin_family_norm, {"", "SPLIT=3", "VEC=1 ITEMS=3", "MODE=fast_math"}},
    {"bn1d", TASK("        self.n = nn.BatchNorm1d(10)\n", "self.n(x)",
                  "[torch.randn(64, 10) + 3.0]"),
     NULL, NULL, &builtin_family_norm, {""}},
    {"p36", NULL, "level1/36_RMSNorm_.py", "batch_size = 2\nfeatures = 8\ndim1 = 16\ndim2 = 16\n",
     &builtin_family_norm, {"", "VEC=2", "VEC=4", "MODE=recip_mul"}},
    {"p38", NULL, "level1/38_L1Norm_.py", "batch_size = 16\ndim = 1001\n", &builtin_family_norm,
     {"", "SPLIT=2", "MODE=recip_mul", "MODE=warp_per_row"}},
    {"p39", NULL, "level1/39_L2Norm_.py", "batch_size = 16\ndim = 999\n", &builtin_family_norm,
     {"", "SPLIT=12", "SPLIT=3 MODE=smem_row"}},
    {"rms_mod", TASK("        self.n = nn.RMSNorm(100)\n", "self.n(x)", "[torch.randn(32, 100)]"),
     NULL, NULL, &builtin_family_norm, {"", "MODE=fast_math"}},
    {"normalize", TASK(NOINIT, "F.normalize(x, p=2.0, dim=1)", "[torch.randn(10, 300)]"), NULL,
     NULL, &builtin_family_norm, {"", "MODE=recip_mul"}},
    {"linf", TASK(NOINIT, "x / torch.amax(x.abs(), dim=(2, 3), keepdim=True)",
                  "[torch.randn(2, 3, 8, 8)]"),
     NULL, NULL, &builtin_family_norm, {""}},
    {"centered", TASK(NOINIT, "x - x.mean(dim=1, keepdim=True)", "[torch.rand(20, 50)]"), NULL,
     NULL, &builtin_family_norm, {""}},
    {"rms_w", TASK("        self.w = nn.Parameter(torch.randn(128))\n",
                   "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w",
                   "[torch.randn(64, 128)]"),
     NULL, NULL, &builtin_family_norm, {""}},
    {"l2_cols", TASK(NOINIT, "x / torch.linalg.vector_norm(x, ord=2, dim=0, keepdim=True)",
                     "[torch.randn(300, 70)]"),
     NULL, NULL, &builtin_family_norm, {"", "UNROLL=4"}},
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

static size_t small_index(const char *name) {
  for (size_t i = 0; i < N_SMALL; i++)
    if (strcmp(small_tasks[i].name, name) == 0)
      return i;
  fail_msg("no small task %s", name);
  return 0;
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
  static const struct {
    const struct builtin_family *fam;
    const char *file, *small;
  } shapes[] = {
      {&builtin_family_reduction, "level1/47_Sum_reduction_over_a_dimension.py", NULL},
      {&builtin_family_reduction, "level1/94_MSELoss.py", NULL},
      {&builtin_family_reduction, NULL, "argmin_ties"},
      {&builtin_family_softmax, "level1/23_Softmax.py", NULL},
      {&builtin_family_softmax, NULL, "sm_warp"},
      {&builtin_family_softmax, NULL, "sm_colstream"},
      {&builtin_family_norm, "level1/33_BatchNorm.py", NULL},
      {&builtin_family_norm, "level1/36_RMSNorm_.py", NULL},
      {&builtin_family_norm, "level1/38_L1Norm_.py", NULL},
      {&builtin_family_norm, "level1/40_LayerNorm.py", NULL},
      {&builtin_family_norm, NULL, "gn"},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    json_t *p = shapes[i].file ? public_profile(shapes[i].file)
                               : small_profile(small_index(shapes[i].small));
    sweep_profile(shapes[i].fam, p, shapes[i].file ? shapes[i].file + 7 : shapes[i].small,
                  locals, cands, seen);
  }
  size_t failed = compile_all(cands);
  printf("  %zu distinct candidates compiled with NVRTC, %zu failed\n", json_array_size(cands),
         failed);
  assert_int_equal(failed, 0);
  json_decref(cands);
  json_decref(seen);
  json_decref(seed);
}

/* ---- CPU emulation of generated candidates against PyTorch ---- */


/* Generates the candidate of every variant of every small task into one C++ program,
 * builds it, runs it, and compares every result. */
static void test_emulated_tasks(void **state) {
  (void)state;
  if (!g_have_ev || system("c++ --version > /dev/null 2>&1") != 0) {
    printf("needs KernelBench, the python venv and a C++ compiler\n");
    skip();
    return;
  }
  char tmp[] = "/tmp/opforge-reduce-emu-XXXXXX";
  assert_non_null(mkdtemp(tmp));
  prepare_tasks(tmp, N_SMALL, small_task);
  char prog[1100];
  snprintf(prog, sizeof prog, "%s/emu.cpp", tmp);
  FILE *f = fopen(prog, "w");
  assert_non_null(f);
  for (size_t i = 0; emu_cuda_prelude[i]; i++)
    fprintf(f, "%s\n", emu_cuda_prelude[i]);
  json_t *runs = json_array();
  for (size_t i = 0; i < N_SMALL; i++) {
    const struct small_task *t = &small_tasks[i];
    json_t *profile = small_profile(i), *m = match_of(t->fam, profile);
    json_t *first = NULL;
    assert_ptr_equal(first_match(profile, &first), t->fam);
    json_decref(first);
    for (size_t v = 0; v < 7 && t->variants[v]; v++) {
      struct knob_set k;
      char why[512] = "", ns[64], dir[1100], result[1200];
      t->fam->defaults(m, &k);
      if (apply_variant(&k, t->variants[v], why, sizeof why) != 0)
        fail_msg("%s [%s]: %s", t->name, t->variants[v], why);
      json_t *cand = NULL;
      if (t->fam->generate(m, &k, &cand, why, sizeof why) != 0)
        fail_msg("%s [%s]: %s", t->name, t->variants[v], why);
      snprintf(ns, sizeof ns, "c%zu", json_array_size(runs));
      snprintf(dir, sizeof dir, "%s/%s", tmp, t->name);
      snprintf(result, sizeof result, "%s/result_%zu.bin", dir, v);
      write_candidate(f, ns, profile, cand, dir, result);
      json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
      json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:s, s:O, s:O}", "ns", ns, "dir",
                                            dir, "result", result, "what", t->variants[v],
                                            "dtype", json_object_get(out, "dtype"), "summary",
                                            json_object_get(m, "summary")));
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
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -w -pthread -o %s/emu %s && %s/emu", cxx, tmp,
           prog, tmp);
  assert_int_equal(system(cmd), 0);
  check_runs(runs, 13, 38);
  json_decref(runs);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_public_tasks),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_plans),
      cmocka_unit_test(test_nvrtc_sweep),
      cmocka_unit_test(test_emulated_tasks),
  };
  int rc = cmocka_run_group_tests(tests, builtin_group_setup, builtin_group_teardown);
  return rc;
}
