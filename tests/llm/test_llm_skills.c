/* The skill memory's prompts: golden files pin the extraction and the dedup prompt
 * (OPFORGE_UPDATE_GOLDEN=1 rewrites them); the reading of their answers ("You cannot ..."
 * or "no guidance"; the dedup JSON); and the LLM proposer's reflect operation against the
 * scripted endpoint: one call for a new rule, a dedup call when rules exist, none when
 * the text repeats a rule, the calls' tokens added to the request's usage, no guidance,
 * a failing endpoint, and a budget too small to ask. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proposers/llm/skills.h"
#include "tests/llm/llm_testlib.h"

#define SOURCE "extern \"C\" __global__ void k(const float* x, float* y) {\n  y[0] = x[0];\n}\n"
#define FAILURE "stage: compile\nclass: compile/identifier_undefined\n" \
                "kernel.cu(3): error: identifier \"tile\" is undefined"

static void compare_golden(const char *text, const char *golden) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/tests/llm/golden/%s", getenv("OPFORGE_SOURCE_ROOT"), golden);
  const char *update = getenv("OPFORGE_UPDATE_GOLDEN");
  if (update && *update) {
    llm_write_file(path, text);
    return;
  }
  char *want = llm_read_file(path);
  if (!want)
    fail_msg("no golden file %s (run with OPFORGE_UPDATE_GOLDEN=1 to write it)", path);
  if (strcmp(want, text) != 0) {
    size_t i = 0;
    while (want[i] && want[i] == text[i])
      i++;
    fail_msg("%s differs from the golden file at byte %zu:\n--- golden\n%.240s\n--- got\n%.240s",
             golden, i, want + (i > 80 ? i - 80 : 0), text + (i > 80 ? i - 80 : 0));
  }
  free(want);
}

static void test_prompts_golden(void **state) {
  (void)state;
  struct skill_reflection req = {.family = "softmax", .source = SOURCE, .failure = FAILURE};
  char *user = NULL, err[256];
  assert_int_equal(llm_skill_extract_prompt(&req, &user, err, sizeof err), 0);
  compare_golden(user, "skill_extract.txt");
  assert_non_null(strstr(user, "\"You cannot \""));
  assert_non_null(strstr(user, "no guidance"));
  assert_non_null(strstr(user, "identifier \"tile\" is undefined"));
  free(user);
  json_t *rules = json_pack("[{s:i, s:s, s:i}, {s:i, s:s, s:i}]", "id", 4, "rule",
                            "You cannot use VEC=4 in softmax kernels.", "score", 5, "id", 9,
                            "rule", "You cannot call __syncthreads() in divergent code.",
                            "score", 1);
  assert_int_equal(llm_skill_dedup_prompt("You cannot read past the end of a row.", rules, &user,
                                          err, sizeof err), 0);
  compare_golden(user, "skill_dedup.txt");
  assert_non_null(strstr(user, "1. You cannot use VEC=4 in softmax kernels.\n2. You cannot call"));
  free(user);
  json_decref(rules);
  /* A long source and log are cut, and say so. */
  char *big = malloc(20000);
  memset(big, 'x', 19999);
  big[19999] = '\0';
  req.source = big;
  req.failure = big;
  assert_int_equal(llm_skill_extract_prompt(&req, &user, err, sizeof err), 0);
  assert_non_null(strstr(user, "more bytes)"));
  assert_true(strlen(user) < LLM_SKILL_SOURCE_MAX + LLM_SKILL_FAILURE_MAX + 4096);
  free(user);
  free(big);
}

static void expect_rule(const char *answer, const char *want) {
  char got[PROPOSAL_RULE_MAX + 1] = "";
  int found = llm_skill_parse_rule(answer, got);
  if (want ? (!found || strcmp(got, want) != 0) : found != 0)
    fail_msg("answer '%s': got %d '%s', want '%s'", answer ? answer : "(null)", found, got,
             want ? want : "(none)");
}

static void test_parse_answers(void **state) {
  (void)state;
  expect_rule("You cannot use tile before declaring it.", "You cannot use tile before declaring it.");
  expect_rule("Thinking...\n\n  You cannot use tile before declaring it  \n",
              "You cannot use tile before declaring it.");
  expect_rule("- \"You cannot index shared memory past its size.\"",
              "You cannot index shared memory past its size.");
  expect_rule("`You cannot pass a float4* where float* is expected.`",
              "You cannot pass a float4* where float* is expected.");
  expect_rule("no guidance", NULL);
  expect_rule("No guidance.", NULL);
  expect_rule("You cannot do that. But really, no guidance.", NULL);
  expect_rule("Avoid using tile.", NULL);
  expect_rule("", NULL);
  expect_rule(NULL, NULL);
  char long_rule[400] = "You cannot ";
  memset(long_rule + 11, 'a', 320);
  long_rule[331] = '.';
  long_rule[332] = '\0';
  expect_rule(long_rule, NULL);
  assert_int_equal(llm_skill_parse_dedup("{\"duplicate\": true, \"match\": 2, \"confidence\": 0.9}", 3), 2);
  assert_int_equal(llm_skill_parse_dedup("Sure: {\"duplicate\": true, \"match\": 1}", 3), 1);
  assert_int_equal(llm_skill_parse_dedup("{\"duplicate\": true, \"match\": 1, \"confidence\": 0.3}", 3), 0);
  assert_int_equal(llm_skill_parse_dedup("{\"duplicate\": false, \"match\": null}", 3), 0);
  assert_int_equal(llm_skill_parse_dedup("{\"duplicate\": true, \"match\": 4}", 3), 0);
  assert_int_equal(llm_skill_parse_dedup("{\"duplicate\": true, \"match\": 0}", 3), 0);
  assert_int_equal(llm_skill_parse_dedup("duplicate of 2", 3), 0);
  assert_int_equal(llm_skill_parse_dedup(NULL, 3), 0);
  json_t *rules = json_pack("[{s:s}, {s:s}]", "rule", "You cannot x.", "rule", "You cannot Y.");
  assert_int_equal(llm_skill_same_text("you cannot y.", rules), 1);
  assert_int_equal(llm_skill_same_text("You cannot z.", rules), -1);
  json_decref(rules);
}

#define EXTRACT "Your one sentence:"
#define DEDUP "Kept rules:"

/* A reflect request against the scripted endpoint; rules may be NULL. */
static int reflect(struct proposer *p, json_t *rules, struct proposal_usage *usage,
                   struct proposal_limit *limit, struct skill_verdict *v, char *why,
                   size_t whylen) {
  struct skill_reflection req = {.task_id = "t", .family = "softmax", .source = SOURCE,
                                 .failure = FAILURE, .rules = rules, .usage = usage,
                                 .limit = limit};
  return p->reflect(p->self, &req, v, why, whylen);
}

static void test_reflect_against_endpoint(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(
      "{\"rules\": ["
      "{\"match\": \"" DEDUP "\", \"replies\": ["
      "  {\"content\": \"{\\\"duplicate\\\": true, \\\"match\\\": 2, \\\"confidence\\\": 0.8}\","
      "   \"usage\": {\"prompt_tokens\": 40, \"completion_tokens\": 7}},"
      "  {\"content\": \"{\\\"duplicate\\\": false, \\\"match\\\": null}\"}]},"
      "{\"match\": \"" EXTRACT "\", \"replies\": ["
      "  {\"content\": \"You cannot use tile before it is declared.\","
      "   \"usage\": {\"prompt_tokens\": 300, \"completion_tokens\": 12}},"
      "  {\"content\": \"You cannot use tile before it is declared.\"},"
      "  {\"content\": \"You cannot use tile before it is declared.\"},"
      "  {\"content\": \"You cannot use tile before it is declared.\"},"
      "  {\"content\": \"no guidance\"},"
      "  {\"status\": 500, \"error\": \"down\"}]}]}",
      &llm);
  struct llm_settings settings;
  scripted_llm_settings(&llm, &settings);
  settings.retries = 0;
  struct proposer p;
  char why[512];
  assert_int_equal(proposer_llm_new(&settings, &p, why, sizeof why), 0);
  assert_non_null(p.reflect);
  struct proposal_usage usage = {0};
  struct skill_verdict v;
  /* No rules yet: a new rule, one call, its tokens counted. */
  assert_int_equal(reflect(&p, NULL, &usage, NULL, &v, why, sizeof why), 0);
  assert_int_equal(v.kind, SKILL_VERDICT_NEW);
  assert_string_equal(v.rule, "You cannot use tile before it is declared.");
  assert_int_equal(usage.prompt_tokens, 300);
  assert_int_equal(usage.completion_tokens, 12);
  /* With rules: the dedup prompt matches rule 2 (id 9). */
  json_t *rules = json_pack("[{s:i, s:s, s:i}, {s:i, s:s, s:i}]", "id", 4, "rule",
                            "You cannot use VEC=4 in softmax kernels.", "score", 5, "id", 9,
                            "rule", "You cannot read tile before declaring it.", "score", 2);
  assert_int_equal(reflect(&p, rules, &usage, NULL, &v, why, sizeof why), 0);
  assert_int_equal(v.kind, SKILL_VERDICT_DUPLICATE);
  assert_int_equal(v.match_id, 9);
  assert_int_equal(usage.prompt_tokens, 300 + 100 + 40);
  assert_int_equal(usage.completion_tokens, 12 + 50 + 7);
  /* The dedup prompt says new. */
  assert_int_equal(reflect(&p, rules, &usage, NULL, &v, why, sizeof why), 0);
  assert_int_equal(v.kind, SKILL_VERDICT_NEW);
  /* The same text as a kept rule: a duplicate without a dedup call. */
  json_t *same = json_pack("[{s:i, s:s, s:i}]", "id", 12, "rule",
                           "you cannot use tile before it is declared.", "score", 1);
  json_t *before = scripted_llm_requests(&llm);
  assert_int_equal(reflect(&p, same, &usage, NULL, &v, why, sizeof why), 0);
  json_t *after = scripted_llm_requests(&llm);
  assert_int_equal(v.kind, SKILL_VERDICT_DUPLICATE);
  assert_int_equal(v.match_id, 12);
  assert_int_equal(json_array_size(after), json_array_size(before) + 1);
  json_decref(before);
  json_decref(after);
  /* No guidance; then the endpoint fails (nothing learned, the reason given). */
  assert_int_equal(reflect(&p, rules, &usage, NULL, &v, why, sizeof why), 0);
  assert_int_equal(v.kind, SKILL_VERDICT_NONE);
  assert_int_equal(reflect(&p, rules, &usage, NULL, &v, why, sizeof why), -1);
  assert_non_null(strstr(why, "parse/llm_"));
  /* A budget too small to ask: no call at all. */
  struct proposal_limit tiny = {.tokens = 10, .cost_usd = 1e9, .calls = 4};
  json_t *n0 = scripted_llm_requests(&llm);
  assert_int_equal(reflect(&p, rules, &usage, &tiny, &v, why, sizeof why), -1);
  assert_non_null(strstr(why, "budget"));
  json_t *n1 = scripted_llm_requests(&llm);
  assert_int_equal(json_array_size(n0), json_array_size(n1));
  json_decref(n0);
  json_decref(n1);
  /* Every call was the extraction or the dedup prompt, with the configured model. */
  json_t *reqs = scripted_llm_requests(&llm);
  size_t i, extract = 0, dedup = 0;
  json_t *q;
  json_array_foreach(reqs, i, q) {
    json_t *msgs = json_object_get(q, "messages");
    const char *user = json_string_value(json_object_get(json_array_get(msgs, 1), "content"));
    extract += user && strstr(user, EXTRACT) != NULL;
    dedup += user && strstr(user, DEDUP) != NULL;
    assert_string_equal(json_string_value(json_object_get(q, "model")), "scripted-model");
    assert_true(json_integer_value(json_object_get(q, "max_tokens")) <= LLM_SKILL_MAX_TOKENS);
  }
  assert_int_equal(extract, 6);
  assert_int_equal(dedup, 2);
  json_decref(reqs);
  json_decref(rules);
  json_decref(same);
  proposer_clear(&p);
  scripted_llm_stop(&llm);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_prompts_golden),
    cmocka_unit_test(test_parse_answers),
    cmocka_unit_test(test_reflect_against_endpoint),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
