/* Unit tests of the skill memory's pure parts: failure signatures from hand-made logs, which
 * failures count, the constraint and sentence a group becomes, the validation of rules,
 * constraints and import documents (exact fields), the vocabulary shared by the store and
 * the proposers, and the builtin proposer's refusal of a move a rule forbids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/skills.h"
#include "engine/skills_rule.h"
#include "proposers/proposer.h"
#include "proposers/skill_constraint.h"
#include "store/skills_validate.h"

/* Parses JSON text (a test literal); caller owns the result. */
static json_t *J(const char *text) {
  json_error_t jerr;
  json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
  if (!v)
    fail_msg("bad test JSON: %s: %s", jerr.text, text);
  return v;
}

static void expect_signature(const char *stage, const char *cls, const char *message,
                             const char *want) {
  char got[SKILL_SIGNATURE_MAX + 1];
  skills_signature(stage, cls, message, got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("signature of %s / %s / %s:\n  got  '%s'\n  want '%s'", stage, cls,
             message ? message : "(null)", got, want);
}

/* ---- signatures ---- */

static void test_signature_compile_logs(void **state) {
  (void)state;
  /* Identifiers, file names and line numbers go; the wording stays. */
  expect_signature("compile", "compile/identifier_undefined",
                   "kernel.cu(57): error: identifier \"vec4_load_a\" is undefined\n\n"
                   "1 error detected in the compilation of \"kernel.cu\".\n",
                   "compile/identifier_undefined: identifier <id> is undefined");
  expect_signature("compile", "compile/identifier_undefined",
                   "/tmp/x/region_3.cu(112): error: identifier \"ofg_tile_B\" is undefined\n",
                   "compile/identifier_undefined: identifier <id> is undefined");
  /* The first error line, after warnings. */
  expect_signature("compile", "compile/syntax_error",
                   "kernel.cu(3): warning #177-D: variable \"t\" was declared but never "
                   "referenced\nkernel.cu(12): error: expected a \";\"\n",
                   "compile/syntax_error: expected a <id>");
  /* ptxas: numbers (hex too) become <n>, unquoted identifiers <id>. */
  expect_signature("compile", "compile/too_much_shared",
                   "ptxas error   : Entry function 'ofg_softmax_rows' uses too much shared "
                   "data (0x12000 bytes, 0xc000 max)",
                   "compile/too_much_shared: entry function <id> uses too much shared data "
                   "(<n> bytes, <n> max)");
  expect_signature("compile", "compile/type_mismatch",
                   "k.cu(9): error: a value of type \"float4 *\" cannot be used to initialize "
                   "an entity of type \"float *\"",
                   "compile/type_mismatch: a value of type <id> cannot be used to initialize "
                   "an entity of type <id>");
  /* No error line: the first line; no message: the class alone. */
  expect_signature("compile", "compile/failed", "nvrtc: something odd 42\nmore",
                   "compile/failed: nvrtc: something odd <n>");
  expect_signature("compile", "compile/failed", NULL, "compile/failed");
  expect_signature("compile", "", "", "compile");
}

static void test_signature_runtime_and_mismatch(void **state) {
  (void)state;
  /* CUDA error names stay; a program's "step i (region k): " goes; kernel names go. */
  expect_signature("launch", "cuda/CUDA_ERROR_ILLEGAL_ADDRESS",
                   "step 2 (region 1): launch 0 (ofg_softmax_rows): CUDA_ERROR_ILLEGAL_ADDRESS: "
                   "an illegal memory access was encountered",
                   "cuda/CUDA_ERROR_ILLEGAL_ADDRESS: launch <n> (<id>): CUDA_ERROR_ILLEGAL_ADDRESS: "
                   "an illegal memory access was encountered");
  expect_signature("launch", "cuda/CUDA_ERROR_ILLEGAL_ADDRESS",
                   "launch 3 (k2): CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
                   "encountered",
                   "cuda/CUDA_ERROR_ILLEGAL_ADDRESS: launch <n> (<id>): CUDA_ERROR_ILLEGAL_ADDRESS: "
                   "an illegal memory access was encountered");
  expect_signature("launch", "launch/plan",
                   "launch 1 (myKernel): block [2048,1,1] exceeds cudaErrorInvalidValue",
                   "launch/plan: launch <n> (<id>): block [<n>,<n>,<n>] exceeds cudaErrorInvalidValue");
  /* Mismatch classes, timeouts and crashes are their class. */
  expect_signature("correctness", "correctness/mismatch",
                   "output:0: 12 of 131072 elements outside tolerance, first at [3, 7]",
                   "correctness/mismatch");
  expect_signature("correctness", "correctness/nan_output", "output:0: 5 NaN elements",
                   "correctness/nan_output");
  expect_signature("timeout", "timeout/evaluate", "no reply in 60 s", "timeout/evaluate");
  expect_signature("crash", "crash/signal_6", "the evaluator died", "crash/signal_6");
  /* Plain words lower-cased, numbers in any form as <n>. */
  expect_signature("check", "check/no_script", "the source holds no SCRIPT directive",
                   "check/no_script: the source holds no script directive");
  expect_signature("check", "check/below_floor", "median 0.0012 ms is below 1e-3 ms (3.5x)",
                   "check/below_floor: median <n> ms is below <n> ms (<n>)");
  /* Capped at SKILL_SIGNATURE_MAX. */
  char long_msg[2048];
  memset(long_msg, 'a', sizeof long_msg - 1);
  long_msg[sizeof long_msg - 1] = '\0';
  for (size_t i = 5; i < sizeof long_msg - 1; i += 6)
    long_msg[i] = ' ';
  char got[SKILL_SIGNATURE_MAX + 1];
  skills_signature("load", "load/bad_program", long_msg, got, sizeof got);
  assert_true(strlen(got) <= SKILL_SIGNATURE_MAX);
  assert_true(strncmp(got, "load/bad_program: aaaaa aaaaa", 29) == 0);
  /* A small buffer is respected. */
  char small[12];
  skills_signature("load", "load/bad_program", "x", small, sizeof small);
  assert_string_equal(small, "load/bad_pr");
}

static void test_which_failures_count(void **state) {
  (void)state;
  assert_true(skills_numeric_mismatch("correctness/mismatch"));
  assert_true(skills_numeric_mismatch("correctness/robust_mismatch"));
  assert_true(skills_numeric_mismatch("correctness/accuracy_budget"));
  assert_false(skills_numeric_mismatch("correctness/nan_output"));
  assert_false(skills_numeric_mismatch("compile/syntax_error"));
  assert_false(skills_numeric_mismatch(NULL));
  assert_true(skills_learns_from("compile"));
  assert_true(skills_learns_from("launch"));
  assert_true(skills_learns_from("correctness"));
  assert_true(skills_learns_from("crash"));
  assert_false(skills_learns_from("parse"));
  assert_false(skills_learns_from("protocol"));
  assert_false(skills_learns_from("profile"));
  assert_false(skills_learns_from(NULL));
  json_t *on = J("{\"search\": {\"skills\": true}}"), *off = J("{\"search\": {\"skills\": false}}");
  json_t *none = J("{\"seed\": 7}");
  assert_true(skills_enabled(on));
  assert_false(skills_enabled(off));
  assert_true(skills_enabled(none));
  assert_true(skills_enabled(NULL));
  struct skill_run sr;
  skills_run_init(&sr, off);
  assert_false(sr.on);
  assert_null(skills_for(&sr, "softmax"));
  skills_run_clear(&sr);
  json_decref(on);
  json_decref(off);
  json_decref(none);
}

/* ---- the rule of a group ---- */

static void expect_constraint(const char *examples, const char *contrast, const char *family,
                              const char *want) {
  json_t *ex = J(examples), *co = contrast ? J(contrast) : NULL;
  json_t *got = skills_group_constraint(ex, co, family);
  json_t *w = want ? J(want) : NULL;
  if (!(w ? json_equal(got, w) : got == NULL)) {
    char *text = got ? json_dumps(got, JSON_SORT_KEYS) : strdup("null");
    fail_msg("constraint of %s:\n  got  %s\n  want %s", examples, text, want ? want : "null");
  }
  json_decref(ex);
  json_decref(co);
  json_decref(got);
  json_decref(w);
}

static void test_group_constraint(void **state) {
  (void)state;
  /* VEC=4 is in every failure and in no correct candidate; inner 510 is no multiple of 4. */
  expect_constraint(
      "[{\"knobs\":{\"VEC\":4,\"BLOCK\":256},\"features\":{\"inner\":510}},"
      " {\"knobs\":{\"VEC\":4,\"BLOCK\":128},\"features\":{\"inner\":1022}},"
      " {\"knobs\":{\"VEC\":4,\"BLOCK\":256},\"features\":{\"inner\":66}}]",
      "[{\"VEC\":1,\"BLOCK\":256}]", "softmax",
      "{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,"
      " \"when\":{\"family\":\"softmax\",\"inner_not_multiple_of\":4}}");
  /* The same without a contrast: BLOCK differs, so VEC alone is shared; an inner that is a
   * multiple of 4 drops the shape condition. */
  expect_constraint(
      "[{\"knobs\":{\"VEC\":4,\"BLOCK\":256},\"features\":{\"inner\":512}},"
      " {\"knobs\":{\"VEC\":4,\"BLOCK\":128},\"features\":{\"inner\":510}}]",
      NULL, "norm", "{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,\"when\":{\"family\":\"norm\"}}");
  /* Two shared settings: ambiguous, unless the strategies moved one of them. */
  expect_constraint("[{\"knobs\":{\"VEC\":4,\"MODE\":\"online\"}},"
                    " {\"knobs\":{\"VEC\":4,\"MODE\":\"online\"}}]",
                    NULL, "softmax", NULL);
  expect_constraint("[{\"knobs\":{\"VEC\":4,\"MODE\":\"online\"},\"moved\":\"MODE\"},"
                    " {\"knobs\":{\"VEC\":4,\"MODE\":\"online\"}}]",
                    NULL, "softmax",
                    "{\"knob\":\"MODE\",\"op\":\"eq\",\"value\":\"online\",\"when\":{\"family\":\"softmax\"}}");
  /* The contrast settles it too: a correct candidate had MODE online. */
  expect_constraint("[{\"knobs\":{\"VEC\":4,\"MODE\":\"online\"}},"
                    " {\"knobs\":{\"VEC\":4,\"MODE\":\"online\"}}]",
                    "[{\"VEC\":2,\"MODE\":\"online\"}]", "softmax",
                    "{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,\"when\":{\"family\":\"softmax\"}}");
  /* Nothing shared, no knobs at all, unset values and unknown knobs tie to nothing. */
  expect_constraint("[{\"knobs\":{\"VEC\":4}}, {\"knobs\":{\"VEC\":2}}]", NULL, "softmax", NULL);
  expect_constraint("[{\"knobs\":{}}, {\"knobs\":{}}]", NULL, "softmax", NULL);
  expect_constraint("[{}, {\"knobs\":{\"VEC\":4}}]", NULL, "softmax", NULL);
  expect_constraint("[{\"knobs\":{\"VEC\":0,\"MODE\":\"\",\"FOO\":3}}]", NULL, "softmax", NULL);
  /* Every failure's setting also passed somewhere: nothing to forbid. */
  expect_constraint("[{\"knobs\":{\"VEC\":4}}]", "[{\"VEC\":4}]", "softmax", NULL);
}

static void expect_sentence(const char *constraint, const char *signature, const char *family,
                            const char *want) {
  json_t *c = constraint ? J(constraint) : NULL;
  char got[SKILL_RULE_MAX + 1];
  skills_rule_sentence(c, signature, family, got);
  if (strcmp(got, want) != 0)
    fail_msg("sentence:\n  got  '%s'\n  want '%s'", got, want);
  assert_true(skill_rule_valid(got));
  json_decref(c);
}

static void test_rule_sentences(void **state) {
  (void)state;
  expect_sentence("{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,"
                  " \"when\":{\"family\":\"softmax\",\"inner_not_multiple_of\":4}}",
                  "compile/x", "softmax",
                  "You cannot use VEC=4 in softmax kernels when the inner size is not a "
                  "multiple of 4.");
  expect_sentence("{\"knob\":\"MODE\",\"op\":\"eq\",\"value\":\"online\"}", NULL, "norm",
                  "You cannot use MODE=online in norm kernels.");
  expect_sentence("{\"knob\":\"BLOCK\",\"op\":\"gt\",\"value\":512,"
                  " \"when\":{\"numel_lt\":4096}}", NULL, NULL,
                  "You cannot use BLOCK>512 in CUDA kernels when the element count is below "
                  "4096.");
  expect_sentence(NULL, "compile/identifier_undefined: identifier <id> is undefined", "softmax",
                  "You cannot write a softmax kernel that fails to compile with \"identifier "
                  "<id> is undefined\".");
  expect_sentence(NULL, "cuda/CUDA_ERROR_ILLEGAL_ADDRESS: launch <n> (<id>): ...", "gemm",
                  "You cannot write a gemm kernel whose launch fails with "
                  "CUDA_ERROR_ILLEGAL_ADDRESS.");
  expect_sentence(NULL, "correctness/nan_output", "pointwise",
                  "You cannot write a pointwise kernel whose outputs fail the correctness "
                  "check (correctness/nan_output).");
  expect_sentence(NULL, "timeout/evaluate", "scan",
                  "You cannot write a scan kernel that runs past its time limit.");
  expect_sentence(NULL, "crash/signal_6", "loss",
                  "You cannot write a loss kernel that crashes the evaluator (crash/signal_6).");
  expect_sentence(NULL, "check/no_script: the source holds no script directive", "reduction",
                  "You cannot write a reduction kernel that fails with \"check/no_script: the "
                  "source holds no script directive\".");
  /* A long signature is cut, and the sentence still ends with a period. */
  char sig[SKILL_SIGNATURE_MAX + 1];
  memset(sig, 'x', sizeof sig - 1);
  memcpy(sig, "compile/failed: ", 16);
  sig[sizeof sig - 1] = '\0';
  char got[SKILL_RULE_MAX + 1];
  skills_rule_sentence(NULL, sig, "softmax", got);
  assert_true(skill_rule_valid(got));
}

/* ---- validation ---- */

static void expect_invalid(const char *body, enum memory_mode mode, enum memory_problem problem,
                           const char *field) {
  json_t *b = J(body);
  struct memory_invalid why;
  memset(&why, 0, sizeof why);
  if (skill_check(b, mode, "", &why) == 0)
    fail_msg("accepted: %s", body);
  if (why.problem != problem || strcmp(why.field, field) != 0)
    fail_msg("%s: problem %d field '%s' (%s), want %d '%s'", body, why.problem, why.field,
             why.message, problem, field);
  json_decref(b);
}

static void expect_valid(const char *body, enum memory_mode mode) {
  json_t *b = J(body);
  struct memory_invalid why;
  if (skill_check(b, mode, "", &why) != 0)
    fail_msg("refused %s: %s", body, why.message);
  json_decref(b);
}

static void test_rule_validation(void **state) {
  (void)state;
  assert_true(skill_rule_valid("You cannot x."));
  assert_false(skill_rule_valid("You cannot x"));
  assert_false(skill_rule_valid("you cannot use VEC=4."));
  assert_false(skill_rule_valid("You cannot\nuse it."));
  assert_false(skill_rule_valid("You cannot use \xc3\x97 here."));  /* not ASCII */
  assert_false(skill_rule_valid("You cannot use \x7f here."));
  assert_false(skill_rule_valid("You cannot."));
  assert_false(skill_rule_valid(NULL));
  expect_valid("{\"rule\":\"You cannot use VEC=4 in softmax kernels.\"}", MEMORY_CREATE);
  expect_valid("{\"rule\":\"You cannot x.\",\"score\":3,\"family\":null,\"enabled\":false,"
               "\"constraint\":null}", MEMORY_CREATE);
  expect_valid("{}", MEMORY_PATCH);
  expect_valid("{\"enabled\":true}", MEMORY_PATCH);
  expect_invalid("{}", MEMORY_CREATE, MEMORY_PROBLEM_MISSING, "rule");
  expect_invalid("{\"rule\":\"Do not use VEC=4.\"}", MEMORY_CREATE, MEMORY_PROBLEM_INVALID, "rule");
  expect_invalid("{\"rule\":\"You cannot x.\",\"colour\":1}", MEMORY_CREATE,
                 MEMORY_PROBLEM_UNKNOWN, "colour");
  expect_invalid("{\"rule\":\"You cannot x.\",\"id\":3}", MEMORY_CREATE, MEMORY_PROBLEM_INVALID, "id");
  expect_invalid("{\"refusals\":3}", MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "refusals");
  expect_invalid("{\"origin\":\"user\"}", MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "origin");
  expect_invalid("{\"example_count\":1}", MEMORY_IMPORT, MEMORY_PROBLEM_UNKNOWN, "example_count");
  expect_invalid("{\"score\":-1}", MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "score");
  expect_invalid("{\"score\":1.5}", MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "score");
  expect_invalid("{\"family\":\"conv\"}", MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "family");
  expect_invalid("{\"enabled\":1}", MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "enabled");
  /* The constraint vocabulary, field by field. */
  expect_invalid("{\"constraint\":[]}", MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint");
  expect_invalid("{\"constraint\":{\"op\":\"eq\",\"value\":1}}", MEMORY_PATCH,
                 MEMORY_PROBLEM_MISSING, "constraint.knob");
  expect_invalid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":1,\"x\":1}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_UNKNOWN, "constraint.x");
  expect_invalid("{\"constraint\":{\"knob\":\"WARPS\",\"op\":\"eq\",\"value\":1}}", MEMORY_PATCH,
                 MEMORY_PROBLEM_INVALID, "constraint.knob");
  expect_invalid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"approx\",\"value\":1}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint.op");
  expect_invalid("{\"constraint\":{\"knob\":\"MODE\",\"op\":\"gt\",\"value\":\"online\"}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint.op");
  expect_invalid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":2048}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint.value");
  expect_invalid("{\"constraint\":{\"knob\":\"MODE\",\"op\":\"eq\",\"value\":\"Online\"}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint.value");
  expect_invalid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,\"when\":[]}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint.when");
  expect_invalid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,"
                 "\"when\":{\"inner_not_multiple_of\":1}}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint.when.inner_not_multiple_of");
  expect_invalid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,"
                 "\"when\":{\"outer_lt\":3}}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_UNKNOWN, "constraint.when.outer_lt");
  expect_invalid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,"
                 "\"when\":{\"family\":\"conv\"}}}",
                 MEMORY_PATCH, MEMORY_PROBLEM_INVALID, "constraint.when.family");
  expect_valid("{\"constraint\":{\"knob\":\"VEC\",\"op\":\"gt\",\"value\":1,"
               "\"when\":{\"family\":\"softmax\",\"inner_not_multiple_of\":4,\"numel_ge\":1024}}}",
               MEMORY_PATCH);
  /* Import records: origin, signature, examples. */
  expect_valid("{\"id\":4,\"rule\":\"You cannot x.\",\"origin\":\"grouping\",\"signature\":"
               "\"compile/x\",\"refusals\":2,\"examples\":[{\"class\":\"compile/x\",\"signature\":"
               "\"compile/x\",\"task_id\":null,\"created_at\":\"2026-11-29T07:42:04.123Z\"}]}",
               MEMORY_IMPORT);
  expect_invalid("{\"rule\":\"You cannot x.\",\"origin\":\"magic\"}", MEMORY_IMPORT,
                 MEMORY_PROBLEM_INVALID, "origin");
  expect_invalid("{\"rule\":\"You cannot x.\",\"examples\":[{\"class\":\"c\"}]}", MEMORY_IMPORT,
                 MEMORY_PROBLEM_MISSING, "examples[0].signature");
  expect_invalid("{\"rule\":\"You cannot x.\",\"examples\":[{\"class\":\"c\",\"signature\":null}]}",
                 MEMORY_IMPORT, MEMORY_PROBLEM_INVALID, "examples[0].signature");
}

static void expect_document(const char *doc, int want_rc, enum memory_problem problem,
                            const char *field) {
  json_t *d = J(doc);
  struct memory_invalid why;
  memset(&why, 0, sizeof why);
  int rc = skill_check_document(d, &why);
  if (rc != want_rc)
    fail_msg("%s: rc %d (%s), want %d", doc, rc, why.message, want_rc);
  if (rc != 0 && (why.problem != problem || strcmp(why.field, field) != 0))
    fail_msg("%s: problem %d field '%s', want %d '%s'", doc, why.problem, why.field, problem,
             field);
  json_decref(d);
}

#define A_UUID "\"00000000-0000-4000-8000-00000000000a\""

static void test_document_validation(void **state) {
  (void)state;
  expect_document("{\"version\":1,\"skills\":[]}", 0, 0, "");
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\"},"
                  "{\"rule\":\"You cannot y.\",\"id\":7}]}", 0, 0, "");
  expect_document("{\"skills\":[]}", -1, MEMORY_PROBLEM_MISSING, "version");
  expect_document("{\"version\":2,\"skills\":[]}", -1, MEMORY_PROBLEM_INVALID, "version");
  expect_document("{\"version\":1}", -1, MEMORY_PROBLEM_MISSING, "skills");
  expect_document("{\"version\":1,\"skills\":[],\"rules\":[]}", -1, MEMORY_PROBLEM_UNKNOWN, "rules");
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\"},{\"score\":2}]}", -1,
                  MEMORY_PROBLEM_MISSING, "skills[1].rule");
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"id\":3},"
                  "{\"rule\":\"You cannot y.\",\"id\":3}]}", -1, MEMORY_PROBLEM_DUPLICATE,
                  "skills[1].id");
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"signature\":\"s\","
                  "\"family\":\"norm\"},{\"rule\":\"You cannot y.\",\"signature\":\"s\","
                  "\"family\":\"norm\"}]}", -1, MEMORY_PROBLEM_DUPLICATE, "skills[1].signature");
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"signature\":\"s\","
                  "\"family\":\"norm\"},{\"rule\":\"You cannot y.\",\"signature\":\"s\","
                  "\"family\":\"gemm\"}]}", 0, 0, "");
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"examples\":["
                  "{\"class\":\"c\",\"signature\":\"s\",\"candidate_id\":" A_UUID "},"
                  "{\"class\":\"c\",\"signature\":\"s\",\"candidate_id\":" A_UUID "}]}]}", -1,
                  MEMORY_PROBLEM_DUPLICATE, "skills[0].examples[1].candidate_id");
  /* Examples name tasks and candidates by their UUIDs. */
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"examples\":["
                  "{\"class\":\"c\",\"signature\":\"s\",\"candidate_id\":\"a\"}]}]}", -1,
                  MEMORY_PROBLEM_INVALID, "skills[0].examples[0].candidate_id");
  expect_document("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"examples\":["
                  "{\"class\":\"c\",\"signature\":\"s\",\"task_id\":\"task-1\"}]}]}", -1,
                  MEMORY_PROBLEM_INVALID, "skills[0].examples[0].task_id");
}

/* ---- the constraints as proposers apply them ---- */

static void test_vocabulary_agrees(void **state) {
  (void)state;
  /* Every knob the store accepts is one the check reads. */
  json_t *features = J("{\"inner\": 510, \"numel\": 4096}");
  for (size_t i = 0; skill_knobs[i]; i++) {
    bool mode = strcmp(skill_knobs[i], "MODE") == 0;
    json_t *c = mode ? json_pack("{s:s, s:s, s:s}", "knob", "MODE", "op", "eq", "value", "online")
                     : json_pack("{s:s, s:s, s:i}", "knob", skill_knobs[i], "op", "eq", "value", 8);
    json_t *knobs = mode ? json_pack("{s:s}", "MODE", "online") : json_pack("{s:i}", skill_knobs[i], 8);
    json_t *other = json_pack("{s:i}", "UNROLL", 3);
    if (!skill_constraint_forbids(c, "softmax", features, knobs))
      fail_msg("knob %s is not read by skill_constraint_forbids", skill_knobs[i]);
    assert_false(skill_constraint_forbids(c, "softmax", features, other));
    json_decref(c);
    json_decref(knobs);
    json_decref(other);
  }
  /* Every feature and predicate the store accepts is one the check reads. */
  json_t *knobs = J("{\"VEC\": 4}");
  for (size_t f = 0; skill_features[f]; f++)
    for (size_t p = 0; skill_predicates[p]; p++) {
      char key[48];
      snprintf(key, sizeof key, "%s_%s", skill_features[f], skill_predicates[p]);
      json_int_t have = json_integer_value(json_object_get(features, skill_features[f]));
      /* A bound that makes the condition hold, and one that makes it fail. */
      json_int_t yes, no;
      if (strcmp(skill_predicates[p], "multiple_of") == 0)
        yes = 2, no = have == 510 ? 4 : 3;
      else if (strcmp(skill_predicates[p], "not_multiple_of") == 0)
        yes = have == 510 ? 4 : 3, no = 2;
      else if (strcmp(skill_predicates[p], "lt") == 0)
        yes = have + 1, no = have;
      else
        yes = have, no = have + 1;
      json_t *c1 = json_pack("{s:s, s:s, s:i, s:{s:I}}", "knob", "VEC", "op", "eq", "value", 4,
                             "when", key, yes);
      json_t *c0 = json_pack("{s:s, s:s, s:i, s:{s:I}}", "knob", "VEC", "op", "eq", "value", 4,
                             "when", key, no);
      json_t *missing = J("{}");
      if (!skill_constraint_forbids(c1, "norm", features, knobs))
        fail_msg("condition %s = %lld does not hold", key, (long long)yes);
      if (skill_constraint_forbids(c0, "norm", features, knobs))
        fail_msg("condition %s = %lld holds", key, (long long)no);
      /* A feature the region does not have makes the constraint not apply. */
      assert_false(skill_constraint_forbids(c1, "norm", missing, knobs));
      struct memory_invalid why;
      assert_int_equal(skill_check_constraint(c1, "", "constraint", &why), 0);
      json_decref(c1);
      json_decref(c0);
      json_decref(missing);
    }
  /* Ops, the family condition and absent knobs. */
  json_t *gt = J("{\"knob\":\"BLOCK\",\"op\":\"gt\",\"value\":512,\"when\":{\"family\":\"norm\"}}");
  json_t *big = J("{\"BLOCK\": 1024}"), *small = J("{\"BLOCK\": 256}"), *none = J("{}");
  assert_true(skill_constraint_forbids(gt, "norm", features, big));
  assert_false(skill_constraint_forbids(gt, "norm", features, small));
  assert_false(skill_constraint_forbids(gt, "softmax", features, big));
  assert_false(skill_constraint_forbids(gt, NULL, features, big));
  assert_false(skill_constraint_forbids(gt, "norm", features, none));
  json_t *le = J("{\"knob\":\"SPLIT\",\"op\":\"le\",\"value\":0}");
  assert_true(skill_constraint_forbids(le, "gemm", features, none)); /* unset is 0 */
  json_t *ne = J("{\"knob\":\"MODE\",\"op\":\"ne\",\"value\":\"online\"}");
  assert_true(skill_constraint_forbids(ne, "softmax", features, none)); /* unset is "" */
  json_decref(gt);
  json_decref(le);
  json_decref(ne);
  json_decref(big);
  json_decref(small);
  json_decref(none);
  json_decref(knobs);
  json_decref(features);
}

static void test_features_and_knobs(void **state) {
  (void)state;
  json_t *profile = J("{\"inputs\":[{\"name\":\"input:0\",\"shape\":[256,510]}],"
                      "\"outputs\":[{\"name\":\"output:0\",\"shape\":[256,510]}]}");
  json_t *f = skill_profile_features(profile);
  json_t *want = J("{\"inner\":510,\"numel\":130560}");
  assert_true(json_equal(f, want));
  json_decref(f);
  json_decref(want);
  json_decref(profile);
  profile = J("{\"inputs\":[],\"outputs\":[{\"numel\":7,\"shape\":[7]}]}");
  f = skill_profile_features(profile);
  want = J("{\"numel\":7}");
  assert_true(json_equal(f, want));
  json_decref(f);
  json_decref(want);
  json_decref(profile);
  json_t *options = J("[\"-DVEC=4\",\"-DBLOCK=256\",\"-DMODE_TWO_PASS=1\",\"-Dbad\",\"-DX=1y\","
                      "\"--use_fast_math\"]");
  json_t *knobs = skill_knobs_of_options(options);
  want = J("{\"VEC\":4,\"BLOCK\":256,\"MODE\":\"two_pass\"}");
  assert_true(json_equal(knobs, want));
  json_decref(knobs);
  json_decref(want);
  json_decref(options);
}

/* The profile the scripted evaluator reports for torch.softmax(x, dim=-1) on [256, 512]
 * (tests/engine/scripted_evaluator.c, a "plain" task). */
static json_t *softmax_profile(void) {
  return J("{\"eager_ms\":2.0,\"floor_ms\":1.0,\"flops\":0,\"min_bytes\":1048576,"
           "\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[256,512],"
           "\"numel\":131072}],\"params\":[],"
           "\"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\",\"shape\":[256,512],"
           "\"numel\":131072}],"
           "\"graph\":[{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\",\"tensor\":\"input:0\","
           "\"args\":[],\"kwargs\":{},\"shape\":[256,512],\"dtype\":\"float32\"},"
           "{\"name\":\"softmax\",\"op\":\"call_function\",\"target\":\"torch.softmax\","
           "\"args\":[{\"node\":\"x\"}],\"kwargs\":{\"dim\":-1},\"shape\":[256,512],"
           "\"dtype\":\"float32\"},"
           "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"node\":"
           "\"softmax\"}],\"kwargs\":{},\"shape\":[256,512],\"dtype\":\"float32\"}]}");
}

static void test_builtin_refuses_forbidden_knobs(void **state) {
  (void)state;
  struct proposer p;
  assert_int_equal(proposer_builtin_new(&p), 0);
  json_t *profile = softmax_profile();
  struct proposal_request req = {.task_id = "t", .profile = profile, .step = 1};
  /* Without rules the defaults come out; their knobs name the BLOCK a rule then forbids. */
  json_t *cand = NULL, *failure = NULL;
  assert_int_equal(p.propose_large(p.self, &req, &cand, &failure), 0);
  json_t *knobs = skill_knobs_of_options(json_object_get(cand, "options"));
  json_int_t block = json_integer_value(json_object_get(knobs, "BLOCK"));
  assert_true(block > 0);
  json_decref(cand);
  cand = NULL;
  json_t *skills = json_pack("[{s:i, s:s, s:i, s:{s:s, s:s, s:I, s:{s:s}}},"
                             " {s:i, s:s, s:i, s:{s:s, s:s, s:I, s:{s:s}}}]",
                             "id", 6, "rule", "You cannot use BLOCK in norm kernels.", "score", 5,
                             "constraint", "knob", "BLOCK", "op", "eq", "value", block, "when",
                             "family", "norm",
                             "id", 7, "rule", "You cannot use this BLOCK in softmax kernels.",
                             "score", 3, "constraint", "knob", "BLOCK", "op", "eq", "value", block,
                             "when", "family", "softmax");
  req.skills = skills;
  assert_int_equal(p.propose_large(p.self, &req, &cand, &failure), -1);
  assert_null(cand);
  assert_string_equal(json_string_value(json_object_get(failure, "stage")), "parse");
  assert_string_equal(json_string_value(json_object_get(failure, "class")), "parse/invalid_move");
  assert_int_equal(skill_refusal_id(failure), 7);
  assert_non_null(strstr(json_string_value(json_object_get(failure, "message")),
                         "skill rule 7 refuses BLOCK eq"));
  assert_non_null(strstr(json_string_value(json_object_get(failure, "message")),
                         "You cannot use this BLOCK in softmax kernels."));
  /* The refusal is counted once the loop sees it. */
  struct skill_run sr = {.on = true};
  skills_note_refusal(&sr, failure);
  skills_note_refusal(&sr, failure);
  json_t *want = J("{\"7\": 2}");
  assert_true(json_equal(sr.refusals, want));
  json_decref(want);
  json_decref(failure);
  failure = NULL;
  /* A move that changes BLOCK fits the rule. */
  json_t *node = J("{\"knob_move\": {\"knob\": \"BLOCK\", \"op\": \"mul\", \"value\": 2}}");
  req.strategy = "block_size_up";
  req.strategy_node = node;
  int rc = p.propose_large(p.self, &req, &cand, &failure);
  if (rc == 0) {
    assert_null(failure);
    json_decref(cand);
  } else {
    /* Only the family's own check may refuse it (a block too large for the shape). */
    assert_int_equal(skill_refusal_id(failure), 0);
    json_decref(failure);
  }
  /* A failure that is no refusal counts nothing. */
  json_t *plain = J("{\"stage\":\"parse\",\"class\":\"parse/invalid_move\",\"message\":\"x\"}");
  skills_note_refusal(&sr, plain);
  assert_int_equal(json_object_size(sr.refusals), 1);
  json_decref(plain);
  skills_run_clear(&sr);
  json_decref(node);
  json_decref(knobs);
  json_decref(skills);
  json_decref(profile);
  proposer_clear(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_signature_compile_logs),
    cmocka_unit_test(test_signature_runtime_and_mismatch),
    cmocka_unit_test(test_which_failures_count),
    cmocka_unit_test(test_group_constraint),
    cmocka_unit_test(test_rule_sentences),
    cmocka_unit_test(test_rule_validation),
    cmocka_unit_test(test_document_validation),
    cmocka_unit_test(test_vocabulary_agrees),
    cmocka_unit_test(test_features_and_knobs),
    cmocka_unit_test(test_builtin_refuses_forbidden_knobs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
