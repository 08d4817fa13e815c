/* Unit tests of the builtin convolution family (proposers/builtin/conv.c, conv_match.c):
 * what it matches and refuses, with the exact summaries and reasons, its default knobs and
 * knob checks, and the launch plan and macros of a grouped transposed convolution checked
 * by hand. The kernel runs in test_builtin_regions' CPU emulator against PyTorch;
 * tests/gpu/run runs it on a GPU. Profiles come from one evaluator on the meta device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/conv.h"

#include "builtin_testlib.h"

#define TASK(init, fwd, inputs)                                                          \
  "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"               \
  "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" init  \
  "    def forward(self, x):\n" fwd                                                     \
  "def get_inputs():\n    return " inputs "\ndef get_init_inputs():\n    return []\n"

/* Graphs the family matches (rc 1, its summary), refuses (-1, the reason) or leaves to
 * others (0). */
static const struct match_case cases[] = {
    {"conv2d",
     TASK("        self.c = nn.Conv2d(3, 8, 3, padding=1)\n", "        return self.c(x)\n",
          "[torch.randn(2, 3, 10, 12)]"),
     1, "conv2d 3->8 kernel 3x3 stride 1x1 padding 1x1 dilation 1x1 groups 1, bias, batch 2"},
    {"conv1d_dilated",
     TASK("        self.c = nn.Conv1d(4, 6, 3, stride=3, dilation=4, bias=False)\n",
          "        return self.c(x)\n", "[torch.randn(2, 4, 40)]"),
     1, "conv1d 4->6 kernel 3 stride 3 padding 0 dilation 4 groups 1, batch 2"},
    /* 'same': total padding d*(k-1) = (2, 3), the smaller half before */
    {"conv2d_same",
     TASK("        self.c = nn.Conv2d(3, 4, (3, 4), padding='same')\n",
          "        return self.c(x)\n", "[torch.randn(2, 3, 9, 10)]"),
     1, "conv2d 3->4 kernel 3x4 stride 1x1 padding 1x1 dilation 1x1 groups 1, bias, batch 2"},
    {"convt1d_fn",
     TASK("        self.w = nn.Parameter(torch.randn(4, 3, 3))\n"
          "        self.b = nn.Parameter(torch.randn(6))\n",
          "        return F.conv_transpose1d(x, self.w, self.b, stride=2, padding=1, "
          "output_padding=1, groups=2, dilation=2)\n",
          "[torch.randn(2, 4, 9)]"),
     1, "conv_transpose1d 4->6 kernel 3 stride 2 padding 1 dilation 2 groups 2, bias, batch 2"},
    {"conv3d_grouped",
     TASK("        self.c = nn.Conv3d(4, 6, (2, 3, 3), stride=(1, 2, 1), padding=(1, 0, 1), "
          "groups=2)\n",
          "        return self.c(x)\n", "[torch.randn(2, 4, 5, 7, 6)]"),
     1, "conv3d 4->6 kernel 2x3x3 stride 1x2x1 padding 1x0x1 dilation 1x1x1 groups 2, bias, "
        "batch 2"},
    {"unbatched",
     TASK("        self.c = nn.ConvTranspose2d(3, 5, 2, stride=2)\n", "        return self.c(x)\n",
          "[torch.randn(3, 4, 6)]"),
     1, "conv_transpose2d 3->5 kernel 2x2 stride 2x2 padding 0x0 dilation 1x1 groups 1, bias, "
        "batch 1"},
    {"reflect",
     TASK("        self.c = nn.Conv2d(3, 4, 3, padding=1, padding_mode='reflect')\n",
          "        return self.c(x)\n", "[torch.randn(2, 3, 8, 8)]"),
     -1, "Conv2d: padding_mode other than 'zeros'"},
    {"double", TASK("        self.c = nn.Conv2d(3, 4, 3).double()\n",
                    "        return self.c(x)\n", "[torch.randn(2, 3, 8, 8, dtype=torch.float64)]"),
     -1, "conv2d must make one float32 output"},
    {"conv_relu",
     TASK("        self.c = nn.Conv2d(3, 4, 3)\n", "        return torch.relu(self.c(x))\n",
          "[torch.randn(2, 3, 8, 8)]"),
     0, "not a single convolution"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static void test_matches_and_refusals(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  expect_match_cases(conv_match, cases, N_CASES, true);

}

/* The match of the case named name (caller owns); fails the test unless it matches. */
static json_t *case_match(const char *name) {
  return match_case_named(conv_match, cases, N_CASES, name);
}

static void test_knob_checks(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  json_t *m = case_match("conv3d_grouped");
  const struct builtin_family *f = &builtin_family_conv;
  assert_string_equal(f->name, "gemm");
  struct knob_set k0;
  f->defaults(m, &k0);
  /* 3 output channels per group: the 16-channel tile, 4x4 outputs per thread, 256 threads
   * (4 channel rows x 64 position columns of 4), 8 reduction rows per step. */
  assert_int_equal(k0.bm, 16);
  assert_int_equal(k0.bn, 256);
  assert_int_equal(k0.bk, 8);
  assert_int_equal(k0.tm, 4);
  assert_int_equal(k0.tn, 4);
  char why[256];
  assert_int_equal(f->check(m, &k0, why, sizeof why), 0);
  static const struct knob_refusal refused[] = {
      {"BLOCK", 256, "the convolution's knobs are BM, BN, BK, TM, TN, UNROLL and MINB"},
      {"TM", 2, "TM and TN (outputs per thread) must be 4 or 8"},
      {"TN", 8, "BM must be a multiple of TM x TN (every thread loads one position column) "
                "and BN of TN"},
      {"BM", 256, "BM/TM x BN/TN threads must be a multiple of 32 in [32, 1024]"},
      {"BK", 128, "BK (reduction rows per step) must be in [1, 64]"},
      {"STAGES", 2, "the convolution's knobs are BM, BN, BK, TM, TN, UNROLL and MINB"},
      {"MINB", 16, "MINB blocks of this size do not fit an SM (2048 threads)"},
  };
  expect_knob_refusals(f, m, &k0, refused, sizeof refused / sizeof refused[0]);

  /* BK 32 with a 16 x 256 tile: 4 x 32 x (16 + 4 + 256) bytes = 35328, within 48 KiB;
   * BK 48 makes 52992, beyond it. */
  struct knob_set k = k0;
  k.bk = 32;
  assert_int_equal(f->check(m, &k, why, sizeof why), 0);
  k.bk = 48;
  assert_int_equal(f->check(m, &k, why, sizeof why), -1);
  assert_string_equal(why, "the tiles do not fit 48 KiB of static shared memory");
  k = k0;
  snprintf(k.mode, sizeof k.mode, "tf32x3");
  assert_int_equal(f->check(m, &k, why, sizeof why), -1);
  assert_string_equal(why, "the convolution's MODEs are tf32_rna (operands rounded to TF32 as "
                           "cuDNN rounds them) and none (strict fp32)");
  json_decref(m);
}

/* The profile's "conv_math" (how eager ran the convolution on the GPU) picks the default
 * MODE: tf32_rna (rounded operands, -DMODE_TF32_RNA=1) after a TF32 run, strict fp32 after
 * a strict one, where tf32_rna is refused; a CPU profile says nothing and both are open. */
static void test_eager_math_picks_the_mode(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  const struct builtin_family *f = &builtin_family_conv;
  json_t *m = case_match("conv2d");
  assert_true(json_is_null(json_object_get(m, "math")));
  struct knob_set k;
  char why[256];
  f->defaults(m, &k);
  assert_string_equal(k.mode, "");
  snprintf(k.mode, sizeof k.mode, "tf32_rna");
  assert_int_equal(f->check(m, &k, why, sizeof why), 0);
  json_decref(m);

  /* The same graph as a GPU profile tells it: its one convolution node gets conv_math. */
  static const char *const maths[] = {"tf32", "fp32"};
  for (size_t i = 0; i < 2; i++) {
    json_t *p = evaluator_profile(&g_ev, "conv2d", cases[0].src), *node;
    assert_non_null(p);
    size_t n;
    json_array_foreach(json_object_get(p, "graph"), n, node)
        if (strcmp(json_string_value(json_object_get(node, "op")), "call_module") == 0)
            json_object_set_new(node, "conv_math", json_string(maths[i]));
    json_t *mm = NULL;
    assert_int_equal(conv_match(p, &mm, why, sizeof why), 1);
    assert_string_equal(json_string_value(json_object_get(mm, "math")), maths[i]);
    f->defaults(mm, &k);
    if (i == 0) {
      assert_string_equal(k.mode, "tf32_rna");
      assert_int_equal(f->check(mm, &k, why, sizeof why), 0);
      json_t *cand = NULL;
      assert_int_equal(f->generate(mm, &k, &cand, why, sizeof why), 0);
      json_t *opts = json_object_get(cand, "options"), *o;
      size_t j;
      bool rna = false;
      json_array_foreach(opts, j, o) rna =
          rna || strcmp(json_string_value(o), "-DMODE_TF32_RNA=1") == 0;
      assert_true(rna);
      json_decref(cand);
    } else {
      assert_string_equal(k.mode, "");
      snprintf(k.mode, sizeof k.mode, "tf32_rna");
      assert_int_equal(f->check(mm, &k, why, sizeof why), -1);
      assert_string_equal(why, "MODE tf32_rna: eager runs this convolution in strict fp32 on "
                               "this GPU, so operands rounded to TF32 would fail its accuracy "
                               "budget");
    }
    json_decref(mm);
    json_decref(p);
  }
}

/* The plan of F.conv_transpose1d(x [2, 4, 9], w [4, 3, 3], b [6], stride 2, padding 1,
 * output_padding 1, groups 2, dilation 2): output length (9-1)*2 - 2*1 + 2*(3-1) + 1 + 1 =
 * 20, so 2 x 20 = 40 output positions; 3 channels per group. */
static void test_transposed_plan(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  json_t *m = case_match("convt1d_fn"), *cand = NULL;
  assert_int_equal(json_integer_value(json_array_get(json_object_get(m, "out"), 2)), 20);
  struct knob_set k;
  char why[256];
  builtin_family_conv.defaults(m, &k);
  assert_int_equal(builtin_family_conv.generate(m, &k, &cand, why, sizeof why), 0);
  json_t *launches = json_object_get(json_object_get(cand, "plan"), "launches");
  assert_int_equal(json_array_size(launches), 1);
  json_t *l = json_array_get(launches, 0);
  assert_string_equal(json_string_value(json_object_get(l, "kernel")), "ofg_conv");
  /* grid: ceil(40 / 256) position tiles, ceil(3 / 16) channel tiles, 2 groups */
  static const long long grid[3] = {1, 1, 2};
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(json_integer_value(json_array_get(json_object_get(l, "grid"), i)), grid[i]);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(l, "block"), 0)), 256);
  static const char *const args[4] = {"input:0", "param:w", "param:b", "output:0"};
  json_t *a = json_object_get(l, "args");
  assert_int_equal(json_array_size(a), 4);
  for (size_t i = 0; i < 4; i++)
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, i), "tensor")),
                        args[i]);
  const char *src = json_string_value(json_object_get(cand, "source"));
  static const char *const macros[] = {
      "#define OFG_CG 2\n#define OFG_OCG 3\n", "#define OFG_IW 9\n#define OFG_OW 20\n",
      "#define OFG_KW 3\n", "#define OFG_SW 2\n", "#define OFG_PW 1\n", "#define OFG_DW 2\n",
      "#define OFG_TRANSPOSED 1\n#define OFG_BIAS 1\n"};
  for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++)
    if (!strstr(src, macros[i]))
      fail_msg("no \"%s\" in the source", macros[i]);
  json_decref(cand);
  json_decref(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_and_refusals),
      cmocka_unit_test(test_knob_checks),
      cmocka_unit_test(test_eager_math_picks_the_mode),
      cmocka_unit_test(test_transposed_plan),
  };
  return cmocka_run_group_tests(tests, builtin_group_setup, builtin_group_teardown);
}
