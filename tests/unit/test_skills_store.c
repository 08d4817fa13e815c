/* Unit tests of the skill memory's store: rule CRUD and filters, a group that becomes a rule
 * at 3 tasks (not at 2), confirmations, verdicts of the LLM path, a candidate examined
 * once, refusals, export and import, and the skill record inside the step commit: a commit
 * that fails at any fault site leaves no rule and no example. They run on SQLite, or on
 * PostgreSQL when OPFORGE_TEST_PG is set (tests/unit/store_backend.h). */
#include "store/fault.h"
#include "store/skills.h"
#include "store/steps.h"
#include "store/store.h"
#include "store/tasks.h"
#include "tests/unit/store_backend.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SITES 5000

struct fixture {
  char dir[64];
  struct store *s;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/opforge-test-skills-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  f->s = test_store_open(f->dir); /* SQLite, or PostgreSQL with OPFORGE_TEST_PG */
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  store_fail_after(-1);
  store_close(f->s);
  test_store_remove(f->dir);
  free(f);
  return 0;
}

static json_t *J(const char *text) {
  json_error_t jerr;
  json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
  if (!v)
    fail_msg("bad test JSON: %s: %s", jerr.text, text);
  return v;
}

static json_t *list(struct store *s, const char *family, int enabled) {
  json_t *items = NULL;
  assert_int_equal(store_skills_list(s, family, enabled, &items), STORE_OK);
  return items;
}

static json_t *get(struct store *s, long long id) {
  json_t *skill = NULL;
  assert_int_equal(store_skill_get(s, id, &skill), STORE_OK);
  return skill;
}

static long long create(struct store *s, const char *body) {
  json_t *b = J(body), *skill = NULL;
  struct memory_invalid why;
  if (skill_check(b, MEMORY_CREATE, "", &why) != 0)
    fail_msg("test body refused: %s", why.message);
  assert_int_equal(store_skill_create(s, b, &skill), STORE_OK);
  long long id = json_integer_value(json_object_get(skill, "id"));
  json_decref(skill);
  json_decref(b);
  return id;
}

static json_int_t member(json_t *obj, const char *key) {
  return json_integer_value(json_object_get(obj, key));
}

/* ---- CRUD ---- */

static void test_crud_and_filters(void **state) {
  struct fixture *f = *state;
  long long a = create(f->s, "{\"rule\":\"You cannot use VEC=4 in softmax kernels.\","
                             "\"family\":\"softmax\",\"score\":4,"
                             "\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4}}");
  long long b = create(f->s, "{\"rule\":\"You cannot call __syncthreads in divergent code.\"}");
  long long c = create(f->s, "{\"rule\":\"You cannot use split-K here.\",\"family\":\"gemm\","
                             "\"enabled\":false}");
  assert_true(a > 0 && b > a && c > b);
  json_t *skill = get(f->s, a);
  assert_string_equal(json_string_value(json_object_get(skill, "origin")), "user");
  assert_int_equal(member(skill, "score"), 4);
  assert_int_equal(member(skill, "refusals"), 0);
  assert_int_equal(member(skill, "example_count"), 0);
  assert_int_equal(json_array_size(json_object_get(skill, "examples")), 0);
  assert_true(json_is_null(json_object_get(skill, "signature")));
  assert_string_equal(json_string_value(json_object_get(json_object_get(skill, "constraint"), "knob")),
                      "VEC");
  json_decref(skill);
  skill = get(f->s, b);
  assert_int_equal(member(skill, "score"), 1);
  assert_true(json_is_true(json_object_get(skill, "enabled")));
  assert_true(json_is_null(json_object_get(skill, "family")));
  assert_true(json_is_null(json_object_get(skill, "constraint")));
  json_decref(skill);
  /* A rule without a family is listed under every family. */
  json_t *items = list(f->s, "softmax", -1);
  assert_int_equal(json_array_size(items), 2);
  json_decref(items);
  items = list(f->s, NULL, 0);
  assert_int_equal(json_array_size(items), 1);
  assert_int_equal(member(json_array_get(items, 0), "id"), c);
  json_decref(items);
  items = list(f->s, NULL, 1);
  assert_int_equal(json_array_size(items), 2);
  json_decref(items);
  /* Active: enabled and scored 3 or more. */
  json_t *active = NULL;
  assert_int_equal(store_skills_active(f->s, 3, &active), STORE_OK);
  assert_int_equal(json_array_size(active), 1);
  assert_int_equal(member(json_array_get(active, 0), "id"), a);
  json_decref(active);
  /* Patch: disable, remove the constraint, move to every family. */
  json_t *patch = J("{\"enabled\":false,\"constraint\":null,\"family\":null,\"score\":9}");
  assert_int_equal(store_skill_update(f->s, a, patch, NULL, &skill), STORE_OK);
  assert_true(json_is_false(json_object_get(skill, "enabled")));
  assert_true(json_is_null(json_object_get(skill, "constraint")));
  assert_true(json_is_null(json_object_get(skill, "family")));
  assert_int_equal(member(skill, "score"), 9);
  json_decref(skill);
  assert_int_equal(store_skill_update(f->s, 999, patch, NULL, &skill), STORE_NOT_FOUND);
  json_decref(patch);
  assert_int_equal(store_skills_active(f->s, 3, &active), STORE_OK);
  assert_int_equal(json_array_size(active), 0);
  json_decref(active);
  assert_int_equal(store_skill_delete(f->s, b), STORE_OK);
  assert_int_equal(store_skill_delete(f->s, b), STORE_NOT_FOUND);
  assert_int_equal(store_skill_get(f->s, b, &skill), STORE_NOT_FOUND);
}

/* ---- a failure's record ---- */

static int g_calls;

/* skill_group_fn for the tests: a fixed rule and constraint, counting its calls. */
static json_t *fixed_rule(void *ctx, struct store *s, json_t *examples, const char *signature,
                          const char *family) {
  (void)s;
  g_calls++;
  assert_string_equal(ctx, "ctx");
  assert_string_equal(signature, "compile/x: identifier <id> is undefined");
  assert_string_equal(family, "softmax");
  assert_true(json_array_size(examples) >= 3);
  assert_string_equal(json_string_value(json_object_get(json_array_get(examples, 0), "moved")),
                      "VEC");
  return J("{\"rule\":\"You cannot use VEC=4 in softmax kernels.\","
           "\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,"
           "\"when\":{\"family\":\"softmax\"}}}");
}

/* A UUID that stands for name (the store keeps task and candidate ids as UUIDs): a
 * 48-bit FNV-1a hash of name in its last group. */
static void uuid_of(const char *name, char out[37]) {
  unsigned long long h = 1469598103934665603ULL;
  for (const char *p = name; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  snprintf(out, 37, "00000000-0000-4000-8000-%012llx", h & 0xffffffffffffULL);
}

/* Records one compile failure of task in the group, as the engine does. */
static struct skill_result group_failure(struct store *s, const char *task_name,
                                         const char *cand_name) {
  char task[37], cand[37];
  uuid_of(task_name, task);
  uuid_of(cand_name, cand);
  json_t *knobs = J("{\"VEC\":4}"), *features = J("{\"inner\":510}");
  struct skill_result r = {0};
  struct skill_update u = {
    .action = SKILL_ACTION_GROUP,
    .example = {.task_id = task, .candidate_id = cand, .family = "softmax",
                .failure_class = "compile/x",
                .signature = "compile/x: identifier <id> is undefined",
                .message = "k.cu(3): error: identifier \"a\" is undefined", .moved = "VEC",
                .knobs = knobs, .features = features},
    .group_tasks = 3, .make_rule = fixed_rule, .make_rule_ctx = "ctx", .result = &r,
  };
  assert_int_equal(store_skills_record(s, &u), STORE_OK);
  json_decref(knobs);
  json_decref(features);
  return r;
}

static void test_group_becomes_rule_at_three_tasks(void **state) {
  struct fixture *f = *state;
  g_calls = 0;
  /* Two tasks (one of them failing twice) are not enough. */
  assert_int_equal(group_failure(f->s, "task-1", "c1").outcome, SKILL_OUTCOME_WAITING);
  assert_int_equal(group_failure(f->s, "task-1", "c2").outcome, SKILL_OUTCOME_WAITING);
  assert_int_equal(group_failure(f->s, "task-2", "c3").outcome, SKILL_OUTCOME_WAITING);
  json_t *items = list(f->s, NULL, -1);
  assert_int_equal(json_array_size(items), 0);
  json_decref(items);
  assert_int_equal(g_calls, 0);
  /* The same candidate again counts nothing. */
  assert_int_equal(group_failure(f->s, "task-2", "c3").outcome, SKILL_OUTCOME_SEEN);
  /* A third task makes the rule, scored by its tasks, with every example of the group. */
  struct skill_result r = group_failure(f->s, "task-3", "c4");
  assert_int_equal(r.outcome, SKILL_OUTCOME_ADDED);
  assert_int_equal(g_calls, 1);
  json_t *skill = get(f->s, r.skill_id);
  assert_string_equal(json_string_value(json_object_get(skill, "rule")),
                      "You cannot use VEC=4 in softmax kernels.");
  assert_string_equal(json_string_value(json_object_get(skill, "origin")), "grouping");
  assert_string_equal(json_string_value(json_object_get(skill, "signature")),
                      "compile/x: identifier <id> is undefined");
  assert_string_equal(json_string_value(json_object_get(skill, "family")), "softmax");
  assert_int_equal(member(skill, "score"), 3);
  assert_int_equal(member(skill, "example_count"), 4);
  json_t *ex = json_array_get(json_object_get(skill, "examples"), 0); /* newest first */
  char c4[37];
  uuid_of("c4", c4);
  assert_string_equal(json_string_value(json_object_get(ex, "candidate_id")), c4);
  assert_string_equal(json_string_value(json_object_get(ex, "class")), "compile/x");
  assert_string_equal(json_string_value(json_object_get(ex, "message")),
                      "k.cu(3): error: identifier \"a\" is undefined");
  json_decref(skill);
  /* Later failures of the group confirm it. */
  struct skill_result again = group_failure(f->s, "task-4", "c5");
  assert_int_equal(again.outcome, SKILL_OUTCOME_CONFIRMED);
  assert_int_equal(again.skill_id, r.skill_id);
  skill = get(f->s, r.skill_id);
  assert_int_equal(member(skill, "score"), 4);
  assert_int_equal(member(skill, "example_count"), 5);
  json_decref(skill);
  assert_int_equal(g_calls, 1);
  bool seen = false;
  char c5[37], c9[37];
  uuid_of("c5", c5);
  uuid_of("c9", c9);
  assert_int_equal(store_skills_examined(f->s, c5, &seen), STORE_OK);
  assert_true(seen);
  assert_int_equal(store_skills_examined(f->s, c9, &seen), STORE_OK);
  assert_false(seen);
}

static struct skill_result verdict(struct store *s, enum skill_action action, const char *rule,
                                   long long match, const char *cand_name) {
  char task[37], cand[37];
  uuid_of("t", task);
  uuid_of(cand_name, cand);
  struct skill_result r = {0};
  struct skill_update u = {
    .action = action, .rule = rule, .match_id = match, .result = &r,
    .example = {.task_id = task, .candidate_id = cand, .family = "norm",
                .failure_class = "launch/x", .signature = "launch/x", .message = "m"},
  };
  assert_int_equal(store_skills_record(s, &u), STORE_OK);
  return r;
}

static void test_llm_verdicts(void **state) {
  struct fixture *f = *state;
  struct skill_result r = verdict(f->s, SKILL_ACTION_NEW, "You cannot read past the row.", 0, "a");
  assert_int_equal(r.outcome, SKILL_OUTCOME_ADDED);
  json_t *skill = get(f->s, r.skill_id);
  assert_int_equal(member(skill, "score"), 1);
  assert_string_equal(json_string_value(json_object_get(skill, "origin")), "llm");
  assert_string_equal(json_string_value(json_object_get(skill, "family")), "norm");
  json_decref(skill);
  /* A duplicate adds 1. */
  struct skill_result d = verdict(f->s, SKILL_ACTION_CONFIRM, "You cannot read beyond a row.",
                                  r.skill_id, "b");
  assert_int_equal(d.outcome, SKILL_OUTCOME_CONFIRMED);
  assert_int_equal(d.skill_id, r.skill_id);
  /* The same sentence (case aside) is the same rule, without asking anyone. */
  skill = get(f->s, r.skill_id);
  assert_int_equal(member(skill, "score"), 2);
  json_decref(skill);
  d = verdict(f->s, SKILL_ACTION_NEW, "You cannot READ past the row.", 0, "e");
  assert_int_equal(d.outcome, SKILL_OUTCOME_CONFIRMED);
  assert_int_equal(d.skill_id, r.skill_id);
  /* A confirmation of a rule deleted meanwhile makes it new. */
  d = verdict(f->s, SKILL_ACTION_CONFIRM, "You cannot launch 2048 threads.", 999, "f");
  assert_int_equal(d.outcome, SKILL_OUTCOME_ADDED);
  assert_true(d.skill_id != 999);
  /* No guidance: examined, no rule; examined once. */
  d = verdict(f->s, SKILL_ACTION_EXAMINED, NULL, 0, "g");
  assert_int_equal(d.outcome, SKILL_OUTCOME_EXAMINED);
  d = verdict(f->s, SKILL_ACTION_NEW, "You cannot do it again.", 0, "g");
  assert_int_equal(d.outcome, SKILL_OUTCOME_SEEN);
  /* Malformed updates are refused. */
  struct skill_update bad = {.action = SKILL_ACTION_NEW, .rule = "Never do this.",
                             .example = {.failure_class = "c", .signature = "s"}};
  assert_int_equal(store_skills_record(f->s, &bad), STORE_INVALID);
  bad.rule = "You cannot x.";
  bad.example.signature = NULL;
  assert_int_equal(store_skills_record(f->s, &bad), STORE_INVALID);
  /* Refusals go to the rules that exist. */
  json_t *refusals = json_pack("{s:i, s:i}", "999", 4, "1", 3);
  char key[24];
  snprintf(key, sizeof key, "%lld", r.skill_id);
  json_object_set_new(refusals, key, json_integer(2));
  assert_int_equal(store_skills_add_refusals(f->s, refusals), STORE_OK);
  json_decref(refusals);
  skill = get(f->s, r.skill_id);
  assert_int_equal(member(skill, "refusals"), 2);
  json_decref(skill);
}

/* ---- export and import ---- */

static void test_export_import(void **state) {
  struct fixture *f = *state;
  long long a = create(f->s, "{\"rule\":\"You cannot use VEC=4 in softmax kernels.\","
                             "\"family\":\"softmax\",\"score\":4}");
  struct skill_result r = verdict(f->s, SKILL_ACTION_NEW, "You cannot read past the row.", 0, "a");
  group_failure(f->s, "task-1", "w1"); /* waits in its group */
  json_t *doc = NULL;
  assert_int_equal(store_skills_export(f->s, &doc), STORE_OK);
  json_t *skills = json_object_get(doc, "skills");
  assert_int_equal(json_array_size(skills), 2);
  assert_null(json_object_get(json_array_get(skills, 0), "example_count"));
  assert_int_equal(json_array_size(json_object_get(json_array_get(skills, 1), "examples")), 1);
  struct memory_invalid why;
  assert_int_equal(skill_check_document(doc, &why), 0);
  /* Re-importing the export gives the same export. */
  json_t *counts = NULL;
  assert_int_equal(store_skills_import(f->s, doc, &why, &counts), STORE_OK);
  json_t *want = J("{\"skills\":2,\"examples\":1}");
  assert_true(json_equal(counts, want));
  json_decref(want);
  json_decref(counts);
  json_t *again = NULL;
  assert_int_equal(store_skills_export(f->s, &again), STORE_OK);
  assert_true(json_equal(json_object_get(doc, "skills"), json_object_get(again, "skills")));
  json_decref(again);
  json_t *skill = get(f->s, a);
  assert_int_equal(member(skill, "score"), 4);
  json_decref(skill);
  (void)r;
  /* A refused document changes nothing. */
  json_t *bad = J("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\"},"
                  "{\"rule\":\"You cannot y.\",\"constraint\":{\"knob\":\"VEC\",\"op\":\"is\","
                  "\"value\":1}}]}");
  assert_int_equal(store_skills_import(f->s, bad, &why, NULL), STORE_INVALID);
  assert_string_equal(why.field, "skills[1].constraint.op");
  json_decref(bad);
  json_t *items = list(f->s, NULL, -1);
  assert_int_equal(json_array_size(items), 2);
  json_decref(items);
  /* A seed-like document: only rules; the group's waiting failure stays. */
  json_t *seed = J("{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"score\":5}]}");
  assert_int_equal(store_skills_import(f->s, seed, &why, NULL), STORE_OK);
  json_decref(seed);
  items = list(f->s, NULL, -1);
  assert_int_equal(json_array_size(items), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "origin")),
                      "import");
  json_decref(items);
  assert_int_equal(group_failure(f->s, "task-2", "w2").outcome, SKILL_OUTCOME_WAITING);
  assert_int_equal(group_failure(f->s, "task-3", "w3").outcome, SKILL_OUTCOME_ADDED);
  json_decref(doc);
}

/* ---- inside the step commit ---- */

static json_t *snapshot(struct store *s) {
  json_t *doc = NULL;
  assert_int_equal(store_skills_export(s, &doc), STORE_OK);
  json_object_del(doc, "exported_at");
  return doc;
}

/* One step commit of task carrying a skill record (a new rule). */
static int commit_with_skill(struct store *s, const char *task, int step, const char *cand,
                             struct skill_result *ret) {
  json_t *candidate = json_pack("{s:s, s:n, s:s, s:[], s:{}, s:{s:b}, s:s, s:n, s:s}", "id", cand,
                                "parent_id", "source", "// SCRIPT compile", "options", "plan",
                                "result", "correct", 0, "direction", "memory_access",
                                "strategy", "step_kind", "large");
  json_t *rows = json_array(), *progress = json_pack("{s:i}", "step", step);
  json_t *event = json_pack("{s:i}", "step", step);
  struct skill_update u = {
    .action = SKILL_ACTION_NEW, .rule = "You cannot index past the end of a row.",
    .result = ret,
    .example = {.task_id = task, .candidate_id = cand, .family = "softmax",
                .failure_class = "launch/x", .signature = "launch/x", .message = "m"},
  };
  struct step_commit c = {.task_id = task, .step = step, .candidate = candidate,
                          .tree_rows = rows, .skills = &u, .progress = progress,
                          .event_data = event};
  int rc = store_step_commit(s, &c);
  json_decref(candidate);
  json_decref(rows);
  json_decref(progress);
  json_decref(event);
  return rc;
}

static void test_commit_in_step_transaction(void **state) {
  struct fixture *f = *state;
  json_t *options = J("{\"seed\": 7}"), *task = NULL;
  const char *tid = "00000000-0000-4000-8000-000000000001";
  assert_int_equal(store_task_insert(f->s, tid, "t", options, "ref", &task), STORE_OK);
  json_decref(task);
  json_decref(options);
  json_t *before = snapshot(f->s);
  int n = 0, sites = -1;
  for (n = 0; n < MAX_SITES; n++) {
    struct skill_result r = {0};
    store_fail_after(n);
    int rc = commit_with_skill(f->s, tid, 1, "00000000-0000-4000-8000-0000000000aa", &r);
    bool fired = store_fault_injected();
    store_fail_after(-1);
    if (!fired) {
      assert_int_equal(rc, STORE_OK);
      assert_int_equal(r.outcome, SKILL_OUTCOME_ADDED);
      sites = n;
      break;
    }
    assert_int_not_equal(rc, STORE_OK);
    /* Nothing of the failed commit remains: no rule, no example, no candidate. */
    json_t *now = snapshot(f->s);
    if (!json_equal(before, now))
      fail_msg("fault site %d left a skill record behind", n);
    json_decref(now);
    bool seen = true;
    assert_int_equal(store_skills_examined(f->s, "00000000-0000-4000-8000-0000000000aa", &seen),
                     STORE_OK);
    assert_false(seen);
  }
  assert_true(sites > 5);
  json_t *after = snapshot(f->s);
  assert_int_equal(json_array_size(json_object_get(after, "skills")), 1);
  json_decref(after);
  /* The same step committed again (a resume would use a new candidate) changes no score:
   * the candidate was examined, and the step number is taken. */
  struct skill_result r = {0};
  assert_int_not_equal(commit_with_skill(f->s, tid, 1, "00000000-0000-4000-8000-0000000000aa", &r),
                       STORE_OK);
  json_t *items = list(f->s, NULL, -1);
  assert_int_equal(member(json_array_get(items, 0), "score"), 1);
  json_decref(items);
  json_decref(before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_crud_and_filters, setup, teardown),
    cmocka_unit_test_setup_teardown(test_group_becomes_rule_at_three_tasks, setup, teardown),
    cmocka_unit_test_setup_teardown(test_llm_verdicts, setup, teardown),
    cmocka_unit_test_setup_teardown(test_export_import, setup, teardown),
    cmocka_unit_test_setup_teardown(test_commit_in_step_transaction, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
