/* Unit tests of the LLM answer parser: fenced blocks, the plan's shape against the
 * region's tensors and the source's kernels, old/new edits, and every refused shape of
 * answer with its exact class. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proposers/llm/answer.h"
#include "tests/llm/llm_testlib.h"

#define KERNEL                                                                                \
  "extern \"C\" __global__ void bias_relu(const float* x, const float* b, float* y, int n) {\n" \
  "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"                                        \
  "  if (i < n) { float v = x[i] + b[i % 256]; y[i] = v > 0.0f ? v : 0.0f; }\n"                \
  "}\n"

#define PLAN                                                                               \
  "{\"launches\": [{\"kernel\": \"bias_relu\", \"grid\": [128], \"block\": [256],\n"        \
  "  \"args\": [{\"tensor\": \"input:0\"}, {\"tensor\": \"param:bias\"},\n"                 \
  "             {\"tensor\": \"output:0\"}, {\"i32\": 32768}]}], \"options\": [\"-DVEC=4\"]}"

static json_t *g_profile;

static int setup(void **state) {
  (void)state;
  g_profile = llm_fixture("profile_region.json");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  json_decref(g_profile);
  return 0;
}

/* Parses a large answer that must fail with class cls. */
static void large_fails(const char *answer, const char *cls, const char *needle) {
  struct answer_error err = {0};
  json_t *cand = answer_parse_large(answer, g_profile, &err);
  if (cand) {
    json_decref(cand);
    fail_msg("accepted: %s", answer);
  }
  if (strcmp(err.cls, cls) != 0)
    fail_msg("class %s (%s), want %s", err.cls, err.message, cls);
  if (needle && !strstr(err.message, needle))
    fail_msg("message '%s' lacks '%s'", err.message, needle);
}

static void test_large_ok(void **state) {
  (void)state;
  struct answer_error err = {0};
  json_t *cand = answer_parse_large("Here it is.\n\n```cuda\n" KERNEL "```\n\nPlan:\n```json\n" PLAN
                                    "\n```\nDone.\n", g_profile, &err);
  if (!cand)
    fail_msg("%s: %s", err.cls, err.message);
  assert_string_equal(json_string_value(json_object_get(cand, "source")), KERNEL);
  json_t *plan = json_object_get(cand, "plan");
  assert_int_equal(json_object_size(plan), 2);
  assert_int_equal(json_array_size(json_object_get(plan, "buffers")), 0);
  assert_int_equal(json_array_size(json_object_get(plan, "launches")), 1);
  assert_string_equal(json_string_value(json_array_get(json_object_get(cand, "options"), 0)),
                      "-DVEC=4");
  json_decref(cand);
}

/* The first CUDA block counts; an untagged block is sniffed; ~~~ is not a fence. */
static void test_large_first_cuda_block_and_untagged(void **state) {
  (void)state;
  struct answer_error err = {0};
  json_t *cand = answer_parse_large("```\n" KERNEL "```\n```cpp\n// a usage example\n```\n```\n"
                                    PLAN "\n```\n", g_profile, &err);
  if (!cand)
    fail_msg("%s: %s", err.cls, err.message);
  assert_string_equal(json_string_value(json_object_get(cand, "source")), KERNEL);
  json_decref(cand);
}

static void test_large_refusals(void **state) {
  (void)state;
  large_fails("I would write a kernel that fuses the add and the relu.", "parse/no_source", NULL);
  large_fails("```python\nprint(1)\n```\n", "parse/no_source", NULL);
  large_fails("```cuda\n" KERNEL "```\n", "parse/no_plan", NULL);
  large_fails("```cuda\n" KERNEL "```\n```json\n" PLAN "\n```\n```json\n" PLAN "\n```\n",
              "parse/two_plans", "2 JSON plans");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [}\n```\n", "parse/bad_json",
              "not valid JSON");
  large_fails("```cuda\n" KERNEL, "parse/unclosed_block", "never closed");
  /* A plan naming a tensor the region does not have. */
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [1], \"block\": [32], \"args\": [{\"tensor\": \"input:1\"}, {\"tensor\": "
              "\"output:0\"}]}]}\n```\n", "parse/unknown_tensor", "'input:1'");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [1], \"block\": [32], \"args\": [{\"tensor\": \"node:add\"}, {\"tensor\": "
              "\"output:0\"}]}]}\n```\n", "parse/unknown_tensor", "input:0, param:bias, output:0");
  /* A kernel the source does not define, or defines without extern "C". */
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"fused\", "
              "\"grid\": [1], \"block\": [32], \"args\": [{\"tensor\": \"output:0\"}]}]}\n```\n",
              "parse/kernel_missing", "it has: bias_relu");
  large_fails("```cuda\n__global__ void k(float* y) { y[0] = 0; }\n```\n```json\n{\"launches\": "
              "[{\"kernel\": \"k\", \"grid\": [1], \"block\": [1], \"args\": [{\"tensor\": "
              "\"output:0\"}]}]}\n```\n", "parse/kernel_missing", "extern \"C\"");
  /* An undeclared buffer, an unwritten output, a block too large, an unknown key. */
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [1], \"block\": [32], \"args\": [{\"buffer\": \"tmp\"}, {\"tensor\": "
              "\"output:0\"}]}]}\n```\n", "parse/unknown_buffer", "'tmp'");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [1], \"block\": [32], \"args\": [{\"tensor\": \"input:0\"}]}]}\n```\n",
              "parse/output_not_written", "'output:0'");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [1], \"block\": [64, 32], \"args\": [{\"tensor\": \"output:0\"}]}]}\n```\n",
              "parse/bad_plan", "2048 threads");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [1], \"block\": [1], \"stream\": 2, \"args\": []}]}\n```\n",
              "parse/bad_plan", "'stream'");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": []}\n```\n", "parse/bad_plan",
              "1 to 16");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [0], \"block\": [1], \"args\": [{\"tensor\": \"output:0\"}]}]}\n```\n",
              "parse/bad_plan", "grid[0]");
  large_fails("```cuda\n" KERNEL "```\n```json\n{\"launches\": [{\"kernel\": \"bias_relu\", "
              "\"grid\": [1], \"block\": [1], \"args\": [{\"i32\": 3000000000}, {\"tensor\": "
              "\"output:0\"}]}]}\n```\n", "parse/bad_plan", "i32");
}

/* Buffers are declared and then named; __launch_bounds__ does not hide the kernel name. */
static void test_plan_buffers_and_launch_bounds(void **state) {
  (void)state;
  const char *answer =
      "```cuda\nextern \"C\" {\n__global__ void __launch_bounds__(256) part(const float* x, float* "
      "t) {}\n__global__ void finish(const float* t, float* y) {}\n}\n```\n```json\n{\"buffers\": "
      "[{\"name\": \"partials\", \"bytes\": 4096}], \"launches\": [{\"kernel\": \"part\", "
      "\"grid\": [16], \"block\": [256], \"args\": [{\"tensor\": \"input:0\"}, {\"buffer\": "
      "\"partials\"}]}, {\"kernel\": \"finish\", \"grid\": [1], \"block\": [32], \"shared_bytes\": "
      "1024, \"args\": [{\"buffer\": \"partials\"}, {\"tensor\": \"output:0\"}]}]}\n```\n";
  struct answer_error err = {0};
  json_t *cand = answer_parse_large(answer, g_profile, &err);
  if (!cand)
    fail_msg("%s: %s", err.cls, err.message);
  json_decref(cand);
  json_t *names = answer_kernel_names("extern \"C\" __global__ void a(){}\n__device__ void "
                                      "b(){}\nextern \"C\" __global__ __launch_bounds__(128, 2) "
                                      "void c(int){}\n");
  assert_int_equal(json_array_size(names), 2);
  assert_string_equal(json_string_value(json_array_get(names, 0)), "a");
  assert_string_equal(json_string_value(json_array_get(names, 1)), "c");
  json_decref(names);
}

/* ---- edits ---- */

static void test_edits_read(void **state) {
  (void)state;
  struct answer_edit *edits = NULL;
  struct answer_error err = {0};
  long n = answer_edits("Reasoning first.\n<old_str_1>\n  a = 1;\n</old_str_1>\n<new_str_1>\n"
                        "  a = 2;\n</new_str_1>\ntext <old_str_2>b</old_str_2> <new_str_2>"
                        "</new_str_2>", &edits, &err);
  assert_int_equal(n, 2);
  assert_string_equal(edits[0].old_text, "  a = 1;");
  assert_string_equal(edits[0].new_text, "  a = 2;");
  assert_string_equal(edits[1].old_text, "b");
  assert_string_equal(edits[1].new_text, "");
  answer_edits_free(edits, (size_t)n);
  assert_int_equal(answer_edits("no edits here", &edits, &err), -1);
  assert_string_equal(err.cls, "parse/no_edits");
  assert_int_equal(answer_edits("<old_str_1>x</old_str_1> and no new", &edits, &err), -1);
  assert_string_equal(err.cls, "parse/bad_edit");
  assert_int_equal(answer_edits("<old_str_1>x</old_str_1><new_str_2>y</new_str_2>", &edits, &err),
                   -1);
  assert_string_equal(err.cls, "parse/bad_edit");
  assert_int_equal(answer_edits("<old_str_1></old_str_1><new_str_1>y</new_str_1>", &edits, &err),
                   -1);
  assert_string_equal(err.cls, "parse/bad_edit");
  assert_non_null(strstr(err.message, "empty"));
}

static void test_edits_apply(void **state) {
  (void)state;
  struct answer_error err = {0};
  struct answer_edit one[] = {{"x = 1;", "x = 10;"}, {"y", "z"}};
  char *out = answer_apply_edits("int x = 1;\nint y;\n", one, 2, &err);
  assert_string_equal(out, "int x = 10;\nint z;\n");
  free(out);
  /* Later edits see the text earlier ones left. */
  struct answer_edit chain[] = {{"a", "bb"}, {"bbc", "X"}};
  out = answer_apply_edits("ac", chain, 2, &err);
  assert_string_equal(out, "X");
  free(out);
  struct answer_edit twice[] = {{"float", "double"}};
  assert_null(answer_apply_edits("float a; float b;", twice, 1, &err));
  assert_string_equal(err.cls, "parse/edit_not_unique");
  assert_non_null(strstr(err.message, "edit 1"));
  struct answer_edit missing[] = {{"x = 1;", "x = 2;"}, {"nothing", "x"}};
  assert_null(answer_apply_edits("x = 1;", missing, 2, &err));
  assert_string_equal(err.cls, "parse/edit_not_found");
  assert_non_null(strstr(err.message, "edit 2"));
  assert_non_null(strstr(err.message, "'nothing'"));
}

static json_t *parent(void) {
  struct answer_error err = {0};
  json_t *cand = answer_parse_large("```cuda\n" KERNEL "```\n```json\n" PLAN "\n```\n", g_profile,
                                    &err);
  assert_non_null(cand);
  return cand;
}

static void test_small_ok_keeps_plan_and_options(void **state) {
  (void)state;
  json_t *p = parent();
  struct answer_error err = {0};
  json_t *cand = answer_parse_small("<old_str_1>\n  if (i <= n) {\n</old_str_1>\n<new_str_1>\n"
                                    "  if (i < n) {\n</new_str_1>\n", p, g_profile, &err);
  assert_null(cand);
  assert_string_equal(err.cls, "parse/edit_not_found");
  cand = answer_parse_small("<old_str_1>b[i % 256]</old_str_1>\n<new_str_1>__ldg(&b[i & 255])"
                            "</new_str_1>", p, g_profile, &err);
  if (!cand)
    fail_msg("%s: %s", err.cls, err.message);
  assert_non_null(strstr(json_string_value(json_object_get(cand, "source")), "__ldg(&b[i & 255])"));
  assert_true(json_equal(json_object_get(cand, "plan"), json_object_get(p, "plan")));
  assert_true(json_equal(json_object_get(cand, "options"), json_object_get(p, "options")));
  json_decref(cand);
  json_decref(p);
}

static void test_small_with_plan_and_refusals(void **state) {
  (void)state;
  json_t *p = parent();
  struct answer_error err = {0};
  json_t *cand = answer_parse_small(
      "<old_str_1>bias_relu(</old_str_1><new_str_1>bias_relu2(</new_str_1>\n```json\n"
      "{\"launches\": [{\"kernel\": \"bias_relu2\", \"grid\": [64], \"block\": [512], \"args\": "
      "[{\"tensor\": \"input:0\"}, {\"tensor\": \"param:bias\"}, {\"tensor\": \"output:0\"}, "
      "{\"i32\": 32768}]}]}\n```\n", p, g_profile, &err);
  if (!cand)
    fail_msg("%s: %s", err.cls, err.message);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(json_array_get(
                       json_object_get(json_object_get(cand, "plan"), "launches"), 0), "grid"), 0)),
                   64);
  json_decref(cand);
  /* Renaming the kernel without a new plan leaves the old plan naming a missing kernel. */
  assert_null(answer_parse_small("<old_str_1>bias_relu(</old_str_1><new_str_1>k2(</new_str_1>", p,
                                 g_profile, &err));
  assert_string_equal(err.cls, "parse/kernel_missing");
  assert_null(answer_parse_small("Sure, here is the whole kernel again:\n```cuda\n" KERNEL "```\n",
                                 p, g_profile, &err));
  assert_string_equal(err.cls, "parse/no_edits");
  assert_null(answer_parse_small("<old_str_1>float</old_str_1><new_str_1>double</new_str_1>", p,
                                 g_profile, &err));
  assert_string_equal(err.cls, "parse/edit_not_unique");
  assert_null(answer_parse_small("<old_str_1>int i</old_str_1><new_str_1>int i</new_str_1>", p,
                                 g_profile, &err));
  assert_string_equal(err.cls, "parse/no_change");
  json_decref(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_large_ok),
    cmocka_unit_test(test_large_first_cuda_block_and_untagged),
    cmocka_unit_test(test_large_refusals),
    cmocka_unit_test(test_plan_buffers_and_launch_bounds),
    cmocka_unit_test(test_edits_read),
    cmocka_unit_test(test_edits_apply),
    cmocka_unit_test(test_small_ok_keeps_plan_and_options),
    cmocka_unit_test(test_small_with_plan_and_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
