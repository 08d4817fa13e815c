/* Unit tests of engine/submission.c: defaults, bounds, error codes and fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/submission.h"

#define REF                                                                              \
  "import torch\n"                                                                       \
  "class Model(torch.nn.Module):\n"                                                      \
  "    def forward(self, x):\n"                                                          \
  "        return x * 2\n"                                                               \
  "def get_inputs():\n"                                                                  \
  "    return [torch.randn(16)]\n"                                                       \
  "def get_init_inputs():\n"                                                             \
  "    return []\n"

/* Parses a JSON text that must be an object; the caller decrefs. */
static json_t *load(const char *text) {
  json_error_t jerr;
  json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  if (!v)
    fail_msg("test JSON does not parse: %s: %s", jerr.text, text);
  return v;
}

/* Returns {"reference": REF} plus the members of extra (a JSON object text). */
static json_t *with_ref(const char *extra) {
  json_t *body = load(extra);
  assert_int_equal(json_object_set_new(body, "reference", json_string(REF)), 0);
  return body;
}

/* Validates body (taken over); asserts the refusal has exactly code and field. */
static void expect_refused(json_t *body, enum api_error code, const char *field) {
  struct submission sub;
  memset(&sub, 0, sizeof sub);
  struct validation_error err;
  memset(&err, 0, sizeof err);
  int rc = submission_parse(body, &sub, &err);
  char *text = json_dumps(body, JSON_COMPACT);
  if (rc != -1) {
    char *opts = json_dumps(sub.options, JSON_COMPACT);
    print_message("accepted %.200s -> %s\n", text, opts ? opts : "(null)");
    free(opts);
    submission_clear(&sub);
  } else if (err.code != code || strcmp(err.field, field) != 0) {
    print_message("body %.200s: got code %d field '%s' (%s)\n", text, (int)err.code,
                  err.field, err.message);
  }
  free(text);
  json_decref(body);
  assert_int_equal(rc, -1);
  assert_int_equal(err.code, code);
  assert_string_equal(err.field, field);
  assert_true(strlen(err.message) > 0);
  assert_null(sub.options);
}

/* Validates body (borrowed); asserts success and returns the submission. */
static void expect_ok(json_t *body, struct submission *sub) {
  memset(sub, 0, sizeof *sub);
  struct validation_error err;
  memset(&err, 0, sizeof err);
  if (submission_parse(body, sub, &err) != 0)
    fail_msg("refused: code %d field '%s': %s", (int)err.code, err.field, err.message);
  assert_non_null(sub->options);
}

/* Asserts options equals the JSON text want (exact numbers, every key). */
static void assert_options(const json_t *options, const char *want) {
  json_t *w = load(want);
  if (!json_equal(options, w)) {
    char *got = json_dumps(options, JSON_COMPACT | JSON_SORT_KEYS);
    char *exp = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
    print_message("options %s\n   want %s\n", got, exp);
    free(got);
    free(exp);
    json_decref(w);
    fail();
  }
  json_decref(w);
}

static const char *const DEFAULT_OPTIONS =
    "{\"proposer\":\"builtin\",\"policy\":\"htam+tree\","
    "\"budget\":{\"steps\":20,\"seconds\":900,\"llm_usd\":0.5,\"stop_at_floor\":0.97},"
    "\"precision\":\"fp32\",\"tolerance\":{\"atol\":0.0001,\"rtol\":0.0001},"
    "\"trials\":5,\"seed\":42,\"llm\":{\"model\":null}}";

static void test_defaults(void **state) {
  (void)state;
  json_t *body = with_ref("{}");
  struct submission sub;
  expect_ok(body, &sub);
  assert_string_equal(sub.name, "task");
  assert_string_equal(sub.reference, REF);
  assert_int_equal(sub.reference_bytes, strlen(REF));
  json_t *o = sub.options;
  assert_int_equal(json_object_size(o), 8);
  assert_string_equal(json_string_value(json_object_get(o, "proposer")), "builtin");
  assert_string_equal(json_string_value(json_object_get(o, "policy")), "htam+tree");
  json_t *budget = json_object_get(o, "budget");
  assert_int_equal(json_object_size(budget), 4);
  assert_true(json_is_integer(json_object_get(budget, "steps")));
  assert_int_equal(json_integer_value(json_object_get(budget, "steps")), 20);
  assert_true(json_is_integer(json_object_get(budget, "seconds")));
  assert_int_equal(json_integer_value(json_object_get(budget, "seconds")), 900);
  assert_true(json_number_value(json_object_get(budget, "llm_usd")) == 0.5);
  assert_true(json_number_value(json_object_get(budget, "stop_at_floor")) == 0.97);
  assert_string_equal(json_string_value(json_object_get(o, "precision")), "fp32");
  json_t *tol = json_object_get(o, "tolerance");
  assert_int_equal(json_object_size(tol), 2);
  assert_true(json_number_value(json_object_get(tol, "atol")) == 1e-4);
  assert_true(json_number_value(json_object_get(tol, "rtol")) == 1e-4);
  assert_true(json_is_integer(json_object_get(o, "trials")));
  assert_int_equal(json_integer_value(json_object_get(o, "trials")), 5);
  assert_true(json_is_integer(json_object_get(o, "seed")));
  assert_int_equal(json_integer_value(json_object_get(o, "seed")), 42);
  json_t *llm = json_object_get(o, "llm");
  assert_int_equal(json_object_size(llm), 1);
  assert_true(json_is_null(json_object_get(llm, "model")));
  assert_null(json_object_get(o, "name"));
  assert_null(json_object_get(o, "reference"));
  assert_options(o, DEFAULT_OPTIONS);
  submission_clear(&sub);
  assert_null(sub.options);
  submission_clear(&sub);  /* twice: a cleared struct is a valid argument */
  json_decref(body);
}

static void test_precision_tolerance_defaults(void **state) {
  (void)state;
  static const char *const loose[] = {"tf32", "bf16"};
  for (size_t i = 0; i < 2; i++) {
    char text[64];
    snprintf(text, sizeof text, "{\"precision\":\"%s\"}", loose[i]);
    json_t *body = with_ref(text);
    struct submission sub;
    expect_ok(body, &sub);
    assert_string_equal(json_string_value(json_object_get(sub.options, "precision")),
                        loose[i]);
    json_t *tol = json_object_get(sub.options, "tolerance");
    assert_true(json_number_value(json_object_get(tol, "atol")) == 1e-2);
    assert_true(json_number_value(json_object_get(tol, "rtol")) == 1e-2);
    submission_clear(&sub);
    json_decref(body);
  }
  /* A given tolerance wins over the precision's default, key by key. */
  json_t *body = with_ref("{\"precision\":\"tf32\",\"tolerance\":{\"atol\":0.5}}");
  struct submission sub;
  expect_ok(body, &sub);
  json_t *tol = json_object_get(sub.options, "tolerance");
  assert_true(json_number_value(json_object_get(tol, "atol")) == 0.5);
  assert_true(json_number_value(json_object_get(tol, "rtol")) == 1e-2);
  submission_clear(&sub);
  json_decref(body);
}

static void test_full_submission(void **state) {
  (void)state;
  json_t *body = with_ref(
      "{\"name\":\"36_RMSNorm.v2-x\",\"proposer\":\"llm\",\"policy\":\"refine\","
      "\"budget\":{\"steps\":1000,\"seconds\":86400,\"llm_usd\":1000},"
      "\"precision\":\"bf16\",\"tolerance\":{\"atol\":1,\"rtol\":1e-9},"
      "\"trials\":50,\"seed\":2147483647,\"llm\":{\"model\":\"deepseek-reasoner\"}}");
  struct submission sub;
  expect_ok(body, &sub);
  assert_string_equal(sub.name, "36_RMSNorm.v2-x");
  assert_options(sub.options,
                 "{\"proposer\":\"llm\",\"policy\":\"refine\","
                 "\"budget\":{\"steps\":1000,\"seconds\":86400,\"llm_usd\":1000,"
                 "\"stop_at_floor\":0.97},"
                 "\"precision\":\"bf16\",\"tolerance\":{\"atol\":1,\"rtol\":1e-9},"
                 "\"trials\":50,\"seed\":2147483647,"
                 "\"llm\":{\"model\":\"deepseek-reasoner\"}}");
  submission_clear(&sub);
  json_decref(body);

  /* Lower bounds. */
  body = with_ref("{\"name\":\"a\",\"budget\":{\"steps\":1,\"seconds\":1,\"llm_usd\":0},"
                  "\"trials\":1,\"seed\":0,\"tolerance\":{\"atol\":1e-300,\"rtol\":1e-300}}");
  expect_ok(body, &sub);
  assert_string_equal(sub.name, "a");
  json_t *b = json_object_get(sub.options, "budget");
  assert_int_equal(json_integer_value(json_object_get(b, "steps")), 1);
  assert_int_equal(json_integer_value(json_object_get(b, "seconds")), 1);
  assert_true(json_number_value(json_object_get(b, "llm_usd")) == 0.0);
  assert_int_equal(json_integer_value(json_object_get(sub.options, "seed")), 0);
  submission_clear(&sub);
  json_decref(body);

  /* Every enum value is accepted. */
  static const char *const accepted[] = {
    "{\"proposer\":\"builtin\"}", "{\"proposer\":\"test\"}", "{\"policy\":\"single\"}",
    "{\"policy\":\"flat\"}",      "{\"policy\":\"htam\"}",   "{\"policy\":\"tree\"}",
    "{\"policy\":\"htam+tree\"}", "{\"precision\":\"fp32\"}",
  };
  for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
    body = with_ref(accepted[i]);
    expect_ok(body, &sub);
    submission_clear(&sub);
    json_decref(body);
  }
}

static void test_nested_merge(void **state) {
  (void)state;
  json_t *body = with_ref("{\"budget\":{\"steps\":3}}");
  struct submission sub;
  expect_ok(body, &sub);
  json_t *b = json_object_get(sub.options, "budget");
  assert_int_equal(json_object_size(b), 4);
  assert_int_equal(json_integer_value(json_object_get(b, "steps")), 3);
  assert_int_equal(json_integer_value(json_object_get(b, "seconds")), 900);
  assert_true(json_number_value(json_object_get(b, "llm_usd")) == 0.5);
  submission_clear(&sub);
  /* The body is not changed by the merge. */
  assert_int_equal(json_object_size(json_object_get(body, "budget")), 1);
  json_decref(body);

  body = with_ref("{\"budget\":{}, \"llm\":{}, \"tolerance\":{}}");
  expect_ok(body, &sub);
  assert_options(sub.options, DEFAULT_OPTIONS);
  submission_clear(&sub);
  json_decref(body);

  body = with_ref("{\"llm\":{\"model\":null}}");
  expect_ok(body, &sub);
  assert_true(json_is_null(json_object_get(json_object_get(sub.options, "llm"), "model")));
  submission_clear(&sub);
  json_decref(body);
}

static void test_unknown_fields(void **state) {
  (void)state;
  expect_refused(with_ref("{\"foo\":1}"), API_ERR_UNKNOWN_FIELD, "foo");
  expect_refused(with_ref("{\"Name\":\"x\"}"), API_ERR_UNKNOWN_FIELD, "Name");
  expect_refused(with_ref("{\"budget\":{\"foo\":1}}"), API_ERR_UNKNOWN_FIELD, "budget.foo");
  expect_refused(with_ref("{\"tolerance\":{\"atol\":0.1,\"xtol\":1}}"), API_ERR_UNKNOWN_FIELD,
                 "tolerance.xtol");
  expect_refused(with_ref("{\"llm\":{\"provider\":\"x\"}}"), API_ERR_UNKNOWN_FIELD,
                 "llm.provider");
  /* An unknown key is reported even when reference is missing. */
  expect_refused(load("{\"foo\":1}"), API_ERR_UNKNOWN_FIELD, "foo");
}

static void test_invalid_numbers(void **state) {
  (void)state;
  expect_refused(with_ref("{\"budget\":{\"steps\":0}}"), API_ERR_INVALID_FIELD, "budget.steps");
  expect_refused(with_ref("{\"budget\":{\"steps\":1001}}"), API_ERR_INVALID_FIELD,
                 "budget.steps");
  expect_refused(with_ref("{\"budget\":{\"steps\":1.5}}"), API_ERR_INVALID_FIELD,
                 "budget.steps");
  expect_refused(with_ref("{\"budget\":{\"steps\":\"3\"}}"), API_ERR_INVALID_FIELD,
                 "budget.steps");
  expect_refused(with_ref("{\"budget\":{\"steps\":null}}"), API_ERR_INVALID_FIELD,
                 "budget.steps");
  expect_refused(with_ref("{\"budget\":{\"seconds\":86401}}"), API_ERR_INVALID_FIELD,
                 "budget.seconds");
  expect_refused(with_ref("{\"budget\":{\"seconds\":0}}"), API_ERR_INVALID_FIELD,
                 "budget.seconds");
  expect_refused(with_ref("{\"budget\":{\"llm_usd\":-0.01}}"), API_ERR_INVALID_FIELD,
                 "budget.llm_usd");
  expect_refused(with_ref("{\"budget\":{\"llm_usd\":1000.5}}"), API_ERR_INVALID_FIELD,
                 "budget.llm_usd");
  expect_refused(with_ref("{\"budget\":{\"llm_usd\":true}}"), API_ERR_INVALID_FIELD,
                 "budget.llm_usd");
  expect_refused(with_ref("{\"budget\":{\"stop_at_floor\":1.5}}"), API_ERR_INVALID_FIELD,
                 "budget.stop_at_floor");
  expect_refused(with_ref("{\"budget\":{\"stop_at_floor\":-0.1}}"), API_ERR_INVALID_FIELD,
                 "budget.stop_at_floor");
  expect_refused(with_ref("{\"budget\":5}"), API_ERR_INVALID_FIELD, "budget");
  expect_refused(with_ref("{\"budget\":null}"), API_ERR_INVALID_FIELD, "budget");
  expect_refused(with_ref("{\"tolerance\":{\"atol\":0}}"), API_ERR_INVALID_FIELD,
                 "tolerance.atol");
  expect_refused(with_ref("{\"tolerance\":{\"atol\":2}}"), API_ERR_INVALID_FIELD,
                 "tolerance.atol");
  expect_refused(with_ref("{\"tolerance\":{\"rtol\":-1e-5}}"), API_ERR_INVALID_FIELD,
                 "tolerance.rtol");
  expect_refused(with_ref("{\"tolerance\":{\"rtol\":1.0000001}}"), API_ERR_INVALID_FIELD,
                 "tolerance.rtol");
  expect_refused(with_ref("{\"tolerance\":[0.1]}"), API_ERR_INVALID_FIELD, "tolerance");
  expect_refused(with_ref("{\"trials\":51}"), API_ERR_INVALID_FIELD, "trials");
  expect_refused(with_ref("{\"trials\":0}"), API_ERR_INVALID_FIELD, "trials");
  expect_refused(with_ref("{\"seed\":-1}"), API_ERR_INVALID_FIELD, "seed");
  expect_refused(with_ref("{\"seed\":2147483648}"), API_ERR_INVALID_FIELD, "seed");
  expect_refused(with_ref("{\"seed\":9223372036854775807}"), API_ERR_INVALID_FIELD, "seed");
}

static void test_invalid_strings(void **state) {
  (void)state;
  expect_refused(with_ref("{\"precision\":\"fp16\"}"), API_ERR_INVALID_FIELD, "precision");
  expect_refused(with_ref("{\"precision\":\"FP32\"}"), API_ERR_INVALID_FIELD, "precision");
  expect_refused(with_ref("{\"precision\":32}"), API_ERR_INVALID_FIELD, "precision");
  expect_refused(with_ref("{\"policy\":\"greedy\"}"), API_ERR_INVALID_FIELD, "policy");
  expect_refused(with_ref("{\"policy\":\"htam+\"}"), API_ERR_INVALID_FIELD, "policy");
  expect_refused(with_ref("{\"proposer\":\"openai\"}"), API_ERR_INVALID_FIELD, "proposer");
  expect_refused(with_ref("{\"proposer\":null}"), API_ERR_INVALID_FIELD, "proposer");
  expect_refused(with_ref("{\"name\":\"has space\"}"), API_ERR_INVALID_FIELD, "name");
  expect_refused(with_ref("{\"name\":\"\"}"), API_ERR_INVALID_FIELD, "name");
  expect_refused(with_ref("{\"name\":\"a/b\"}"), API_ERR_INVALID_FIELD, "name");
  expect_refused(with_ref("{\"name\":\"caf\\u00e9\"}"), API_ERR_INVALID_FIELD, "name");
  json_t *nul_name = with_ref("{}");
  json_object_set_new(nul_name, "name", json_stringn("a\0b", 3));
  expect_refused(nul_name, API_ERR_INVALID_FIELD, "name");
  expect_refused(with_ref("{\"name\":7}"), API_ERR_INVALID_FIELD, "name");
  expect_refused(with_ref("{\"name\":null}"), API_ERR_INVALID_FIELD, "name");

  char name[130];
  memset(name, 'n', 129);
  name[129] = '\0';
  json_t *body = with_ref("{}");
  json_object_set_new(body, "name", json_string(name));
  expect_refused(body, API_ERR_INVALID_FIELD, "name");
  /* 128 characters is the maximum and is kept whole. */
  name[128] = '\0';
  body = with_ref("{}");
  json_object_set_new(body, "name", json_string(name));
  struct submission sub;
  expect_ok(body, &sub);
  assert_string_equal(sub.name, name);
  submission_clear(&sub);
  json_decref(body);

  expect_refused(with_ref("{\"llm\":{\"model\":\"\"}}"), API_ERR_INVALID_FIELD, "llm.model");
  expect_refused(with_ref("{\"llm\":{\"model\":5}}"), API_ERR_INVALID_FIELD, "llm.model");
  char model[140];
  memset(model, 'm', 129);
  model[129] = '\0';
  body = with_ref("{}");
  json_object_set_new(body, "llm", json_pack("{s:s}", "model", model));
  expect_refused(body, API_ERR_INVALID_FIELD, "llm.model");
  expect_refused(with_ref("{\"llm\":\"x\"}"), API_ERR_INVALID_FIELD, "llm");
}

/* Returns a malloc'd reference of exactly len bytes (REF padded with a comment). */
static char *reference_of(size_t len) {
  size_t base = strlen(REF);
  assert_true(len > base + 2);
  char *s = malloc(len + 1);
  assert_non_null(s);
  memcpy(s, REF, base);
  s[base] = '#';
  memset(s + base + 1, 'p', len - base - 2);
  s[len - 1] = '\n';
  s[len] = '\0';
  return s;
}

static void test_reference(void **state) {
  (void)state;
  expect_refused(load("{}"), API_ERR_MISSING_FIELD, "reference");
  expect_refused(load("{\"name\":\"x\",\"trials\":3}"), API_ERR_MISSING_FIELD, "reference");
  expect_refused(load("{\"reference\":42}"), API_ERR_INVALID_FIELD, "reference");
  expect_refused(load("{\"reference\":null}"), API_ERR_INVALID_FIELD, "reference");
  expect_refused(load("{\"reference\":[\"class Model(\"]}"), API_ERR_INVALID_FIELD,
                 "reference");
  expect_refused(load("{\"reference\":\"\"}"), API_ERR_INVALID_REFERENCE, "reference");
  expect_refused(load("{\"reference\":\"class Model(x):\\n  pass\\n"
                      "def get_inputs():\\n  return []\\n\"}"),
                 API_ERR_INVALID_REFERENCE, "reference");
  expect_refused(load("{\"reference\":\"def get_inputs():\\n  return []\\n"
                      "def get_init_inputs():\\n  return []\\n\"}"),
                 API_ERR_INVALID_REFERENCE, "reference");
  expect_refused(load("{\"reference\":\"class Model(x):\\n  pass\\n"
                      "def get_init_inputs():\\n  return []\\n\"}"),
                 API_ERR_INVALID_REFERENCE, "reference");
  /* A NUL inside the source would hide the rest from the textual checks. */
  static const char nul_src[] = "class Model(x):\n  pass\n\0"
                                "def get_inputs():\n  return []\n"
                                "def get_init_inputs():\n  return []\n";
  json_t *nul_body = json_object();
  json_object_set_new(nul_body, "reference", json_stringn(nul_src, sizeof nul_src - 1));
  expect_refused(nul_body, API_ERR_INVALID_REFERENCE, "reference");

  assert_null(submission_check_reference(REF, strlen(REF)));
  assert_non_null(submission_check_reference("class Model:\n", 13));

  /* Exactly 262144 bytes is accepted; one more is refused. */
  char *src = reference_of(SUBMISSION_MAX_REFERENCE);
  json_t *body = json_pack("{s:s}", "reference", src);
  struct submission sub;
  expect_ok(body, &sub);
  assert_int_equal(sub.reference_bytes, 262144);
  submission_clear(&sub);
  json_decref(body);
  free(src);

  src = reference_of(SUBMISSION_MAX_REFERENCE + 1);
  expect_refused(json_pack("{s:s}", "reference", src), API_ERR_INVALID_REFERENCE,
                 "reference");
  free(src);
}

/* A real KernelBench program is accepted, when the shared tree is present. */
static void test_kernelbench_reference(void **state) {
  (void)state;
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  char path[4096];
  snprintf(path, sizeof path, "%s/../shared/kernelbench/level1/36_RMSNorm_.py",
           root ? root : ".");
  FILE *f = fopen(path, "rb");
  if (!f) {
    print_message("skipped: %s not found (set OPFORGE_SOURCE_ROOT)\n", path);
    skip();
  }
  char *src = calloc(1, SUBMISSION_MAX_REFERENCE + 1);
  assert_non_null(src);
  size_t n = fread(src, 1, SUBMISSION_MAX_REFERENCE, f);
  fclose(f);
  assert_true(n > 0);
  json_t *body = json_pack("{s:s, s:s}", "reference", src, "name", "36_RMSNorm");
  struct submission sub;
  expect_ok(body, &sub);
  assert_string_equal(sub.name, "36_RMSNorm");
  assert_int_equal(sub.reference_bytes, n);
  assert_options(sub.options, DEFAULT_OPTIONS);
  submission_clear(&sub);
  json_decref(body);
  free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_precision_tolerance_defaults),
    cmocka_unit_test(test_full_submission),
    cmocka_unit_test(test_nested_merge),
    cmocka_unit_test(test_unknown_fields),
    cmocka_unit_test(test_invalid_numbers),
    cmocka_unit_test(test_invalid_strings),
    cmocka_unit_test(test_reference),
    cmocka_unit_test(test_kernelbench_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
