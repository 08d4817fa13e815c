/* Unit tests of the builtin attention family (proposers/builtin/attention.c): what it
 * matches and refuses, with the exact reasons, its knob checks, and the launch plan of a
 * MultiheadAttention checked by hand. The kernels run in test_builtin_regions' CPU
 * emulator against PyTorch; tests/gpu/run times them on a GPU. Profiles come from one
 * evaluator process on the meta device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "proposers/builtin/attention.h"
#include "proposers/builtin/builtin.h"

#include "builtin_testlib.h"


#define TASK(init, fwd, inputs)                                                          \
  "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"               \
  "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" init  \
  "    def forward(self, q, k, v):\n" fwd                                               \
  "def get_inputs():\n    return " inputs "\ndef get_init_inputs():\n    return []\n"
#define QKV(b, l, d) "[torch.randn(" b ", " l ", " d "), torch.randn(" b ", " l ", " d "), " \
                     "torch.randn(" b ", " l ", " d ")]"

/* Graphs the family matches (rc 1, its summary) or refuses (the reason). */
static const struct match_case cases[] = {
    {"sdpa", TASK("        pass\n",
                  "        return F.scaled_dot_product_attention(q, k, v)\n",
                  QKV("2, 3", "50", "32")),
     1, "attention 6x50x50 d32 dv32"},
    {"spelled", TASK("        pass\n",
                     "        s = q @ k.transpose(-2, -1) * 0.125\n"
                     "        return torch.softmax(s, dim=-1) @ v\n",
                     QKV("2, 3", "50", "32")),
     1, "attention 6x50x50 d32 dv32 (matmul, softmax, matmul)"},
    {"spelled_dim3", TASK("        pass\n",
                          "        s = q @ k.transpose(-2, -1) * 0.125\n"
                          "        return torch.softmax(s, dim=3) @ v\n",
                          QKV("2, 3", "50", "32")),
     1, "attention 6x50x50 d32 dv32 (matmul, softmax, matmul)"},
    {"spelled_softmax_dim2", TASK("        pass\n",
                                  "        s = q @ k.transpose(-2, -1)\n"
                                  "        return torch.softmax(s, dim=2) @ v\n",
                                  QKV("2, 3", "50", "32")),
     0, "no attention in the graph"},
    {"spelled_wide_head", TASK("        pass\n",
                               "        return (q @ k.transpose(1, 2)).softmax(-1) @ v\n",
                               QKV("2", "50", "256")),
     -1, "attention with head sizes 256 and 256"},
    {"sdpa_mask", TASK("        self.register_buffer('m', torch.ones(50, 50).tril().bool())\n",
                       "        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.m)\n",
                       QKV("2, 3", "50", "32")),
     1, "attention 6x50x50 d32 dv32 masked"},
    {"sdpa_mask_rank5",
     TASK("        self.register_buffer('m', torch.ones(50, 50).bool())\n",
          "        return F.scaled_dot_product_attention(q, k, v, self.m)\n",
          QKV("2, 2, 3", "50", "32")),
     -1, "attn_mask with q of rank 5 and a mask of rank 2 is unsupported"},
    {"sdpa_dropout", TASK("        pass\n",
                          "        return F.scaled_dot_product_attention(q, k, v, "
                          "dropout_p=0.1)\n",
                          QKV("2", "50", "32")),
     -1, "scaled_dot_product_attention with dropout is a random op"},
    {"sdpa_wide_head", TASK("        pass\n",
                            "        return F.scaled_dot_product_attention(q, k, v)\n",
                            QKV("2", "50", "1024")),
     -1, "attention with head sizes 1024 and 1024: the generated kernel needs both at most "
         "128 and an even value size"},
    {"sdpa_grid", TASK("        pass\n",
                       "        return F.scaled_dot_product_attention(q, k, v)\n",
                       QKV("70000", "4", "8")),
     -1, "attention over 70000 (batch, head) pairs and 0 projected rows exceeds the grid"},
    {"sdpa_then_relu", TASK("        pass\n",
                            "        return F.scaled_dot_product_attention(q, k, v).relu()\n",
                            QKV("2", "50", "32")),
     -1, "relu is not attention"},
    {"mha_weights_used",
     TASK("        self.a = nn.MultiheadAttention(32, 4)\n",
          "        o, w = self.a(q, k, v)\n        return o.sum() + w.sum()\n",
          QKV("7", "2", "32")),
     -1, "sum is not attention"},
    {"mha_weights_out", TASK("        self.a = nn.MultiheadAttention(32, 4)\n",
                             "        return self.a(q, k, v)[1]\n", QKV("7", "2", "32")),
     -1, "MultiheadAttention must end the graph with its output [0]"},
    {"mha_train_dropout",
     TASK("        self.a = nn.MultiheadAttention(32, 4, dropout=0.2)\n        self.train()\n",
          "        return self.a(q, k, v)[0]\n", QKV("7", "2", "32")),
     -1, "MultiheadAttention with dropout in training mode is a random op"},
    {"mha_kdim", TASK("        self.a = nn.MultiheadAttention(32, 4, kdim=16, vdim=16)\n",
                      "        return self.a(q, k, v)[0]\n",
                      "[torch.randn(7, 2, 32), torch.randn(7, 2, 16), torch.randn(7, 2, 16)]"),
     -1, "MultiheadAttention with separate kdim/vdim projections is unsupported"},
    {"mha_cross", TASK("        self.a = nn.MultiheadAttention(32, 4, batch_first=True)\n",
                       "        return self.a(q, k, v, need_weights=False)[0]\n",
                       "[torch.randn(2, 7, 32), torch.randn(2, 9, 32), torch.randn(2, 9, 32)]"),
     1, "multihead attention 2x7x9 heads 4 d8"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static void test_matches_and_refusals(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  expect_match_cases(attention_match, cases, N_CASES, false);

}

/* The match of the case named name (caller owns); fails the test unless it matches. */
static json_t *case_match(const char *name) {
  return match_case_named(attention_match, cases, N_CASES, name);
}

#define ATT_KNOBS \
  "attention's knobs are BM, BN, TM, TN, UNROLL and MINB (threads are BM/TM x BN/TN)"

static void test_knob_checks(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  json_t *m = case_match("mha_cross");
  const struct builtin_family *f = &builtin_family_attention;
  struct knob_set k0;
  f->defaults(m, &k0);
  /* 2 batches x 4 heads x 1 tile of 128 queries is fewer than 2 blocks per SM (2 x 132):
   * 64-query tiles, 4 rows per thread. */
  assert_int_equal(k0.bm, 64);
  assert_int_equal(k0.tm, 4);
  assert_int_equal(k0.bn, 32); /* Dv = 8: 8 threads per row, 4 keys each */
  assert_int_equal(k0.tn, 4);
  char why[256];
  assert_int_equal(f->check(m, &k0, why, sizeof why), 0);
  static const struct knob_refusal refused[] = {
      {"BLOCK", 256, ATT_KNOBS},
      {"TM", 2, "TM (score rows per thread) must be 4 or 8"},
      {"TN", 1, "the value head size must be a multiple of BN/TN"},
      {"STAGES", 2, ATT_KNOBS},
      {"MINB", 32, "MINB blocks of this size do not fit an SM (2048 threads)"},
  };
  expect_knob_refusals(f, m, &k0, refused, sizeof refused / sizeof refused[0]);
  struct knob_set k = k0;
  snprintf(k.mode, sizeof k.mode, "3xtf32");
  assert_int_equal(f->check(m, &k, why, sizeof why), -1);
  assert_string_equal(why, "attention has no MODE: it is one fp32 SIMT kernel with an online "
                           "softmax");
  json_decref(m);
}

/* The plan of the batch-first cross attention: three projections into q, k and v (the
 * first scaled by 1/sqrt(8)), the attention, and the output projection. */
static void test_mha_plan(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  json_t *m = case_match("mha_cross"), *cand = NULL;
  struct knob_set k;
  char why[256];
  builtin_family_attention.defaults(m, &k);
  assert_int_equal(builtin_family_attention.generate(m, &k, &cand, why, sizeof why), 0);
  json_t *plan = json_object_get(cand, "plan");
  json_t *launches = json_object_get(plan, "launches");
  assert_int_equal(json_array_size(launches), 5);
  static const char *const kernels[] = {"ofg_attn_proj_bias", "ofg_attn_proj_bias",
                                        "ofg_attn_proj_bias", "ofg_attention",
                                        "ofg_attn_proj_bias"};
  for (size_t i = 0; i < 5; i++)
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(launches, i), "kernel")), kernels[i]);
  /* buffers: q is 2x7 rows of 32 floats, k and v 2x9, attn_out 2x7 */
  static const long long bytes[] = {2 * 7 * 32 * 4, 2 * 9 * 32 * 4, 2 * 9 * 32 * 4,
                                    2 * 7 * 32 * 4};
  json_t *buffers = json_object_get(plan, "buffers");
  assert_int_equal(json_array_size(buffers), 4);
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(json_integer_value(json_object_get(json_array_get(buffers, i), "bytes")),
                     bytes[i]);
  /* the key projection: x = input:1, rows 18, cols 32, inner 32, W rows from 32, no scale */
  json_t *args = json_object_get(json_array_get(launches, 1), "args");
  assert_string_equal(json_string_value(json_object_get(json_array_get(args, 0), "tensor")),
                      "input:1");
  assert_string_equal(json_string_value(json_object_get(json_array_get(args, 3), "buffer")),
                      "k");
  static const long long ints[] = {18, 32, 32, 32, 0};
  for (size_t i = 0; i < 5; i++)
    assert_int_equal(json_integer_value(json_object_get(json_array_get(args, 4 + i), "i32")),
                     ints[i]);
  /* the query projection's scale: 1/sqrt(8) on its 32 columns */
  args = json_object_get(json_array_get(launches, 0), "args");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(args, 8), "i32")), 32);
  assert_float_equal(json_real_value(json_object_get(json_array_get(args, 9), "f32")),
                     0.35355339059327373, 1e-15);
  /* the attention: one 64-query tile per (batch, head), 8 x 16 threads */
  json_t *att = json_array_get(launches, 3);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(att, "grid"), 0)), 1);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(att, "grid"), 1)), 8);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(att, "block"), 0)), 128);
  /* shared memory: Q^T 8x68, K^T 8x33 (264), V 32x8, P^T 32x68 floats */
  assert_int_equal(json_integer_value(json_object_get(att, "shared_bytes")),
                   4 * (8 * 68 + 264 + 256 + 32 * 68));
  const char *src = json_string_value(json_object_get(cand, "source"));
  /* batch first: head h of batch n at n*7*32 + h*8 + l*32 in q */
  assert_non_null(strstr(src, "#define OFG_Q_N 224LL\n#define OFG_Q_H 8LL\n#define OFG_Q_L 32LL"));
  json_decref(cand);
  json_decref(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_and_refusals),
      cmocka_unit_test(test_knob_checks),
      cmocka_unit_test(test_mha_plan),
  };
  return cmocka_run_group_tests(tests, builtin_group_setup, builtin_group_teardown);
}
