/* What one failure teaches the skill memory: an example, a group that becomes a rule at its
 * task count, a new rule or a confirmed one, and the refusals of builtin constraints. Runs
 * inside the step commit's transaction, so a step counts once even across kill -9. */
#include "store/skills.h"

#include <stdlib.h>
#include <string.h>

#include "store/skills_rows.h"
#include "store/transaction.h"

/* Examples one task may keep waiting in one group (the newest). */
#define GROUP_PER_TASK 5

static const char SQL_EXAMINED[] = "SELECT 1 FROM skill_examples WHERE candidate_id = ?1";
static const char SQL_EXISTS[] = "SELECT 1 FROM skills WHERE id = ?1";
static const char SQL_GROUP_RULE[] =
    "SELECT id FROM skills WHERE signature = ?1 AND family IS NOT DISTINCT FROM ?2";
static const char SQL_GROUP_TASKS[] =
    "SELECT COUNT(DISTINCT task_id) FROM skill_examples"
    " WHERE skill_id IS NULL AND in_group = 1 AND signature = ?1 AND family IS NOT DISTINCT FROM ?2";
static const char SQL_GROUP[] =
    "SELECT " SKILL_GROUP_COLUMNS " FROM skill_examples"
    " WHERE skill_id IS NULL AND in_group = 1 AND signature = ?1 AND family IS NOT DISTINCT FROM ?2 ORDER BY id";
static const char SQL_GROUP_ATTACH[] =
    "UPDATE skill_examples SET skill_id = ?3, in_group = 0"
    " WHERE skill_id IS NULL AND in_group = 1 AND signature = ?1 AND family IS NOT DISTINCT FROM ?2";
static const char SQL_GROUP_TRIM[] =
    "DELETE FROM skill_examples WHERE skill_id IS NULL AND in_group = 1 AND signature = ?1"
    " AND family IS NOT DISTINCT FROM ?2 AND task_id IS NOT DISTINCT FROM ?3 AND id NOT IN (SELECT id FROM skill_examples"
    " WHERE skill_id IS NULL AND in_group = 1 AND signature = ?1 AND family IS NOT DISTINCT FROM ?2"
    " AND task_id IS NOT DISTINCT FROM ?3 ORDER BY id DESC LIMIT ?4)";
static const char SQL_LOOSE_TRIM[] =
    "DELETE FROM skill_examples WHERE skill_id IS NULL AND id NOT IN"
    " (SELECT id FROM skill_examples WHERE skill_id IS NULL ORDER BY id DESC LIMIT ?1)";
static const char SQL_CONFIRM[] =
    "UPDATE skills SET score = CASE WHEN score + 1 < ?3 THEN score + 1 ELSE ?3 END,"
    " updated_at = ?2 WHERE id = ?1";
static const char SQL_SAME_RULE[] =
    "SELECT id FROM skills WHERE lower(rule) = lower(?1) AND (family IS NOT DISTINCT FROM ?2 OR family IS NULL)"
    " ORDER BY id LIMIT 1";
static const char SQL_REFUSE[] =
    "UPDATE skills SET refusals = refusals + ?2 WHERE id = ?1";

struct record {
  const struct skill_update *u;
  char now[STORE_TIME_LEN];
  struct skill_result result;
};

static int exists(struct store *s, const char *sql, const struct sk_arg *args, int n,
                  long long *ret_id, bool *ret_found) {
  long long v = 0;
  int status = sk_int(s, sql, args, n, &v, ret_found);
  if (status == STORE_OK && *ret_found && ret_id)
    *ret_id = v;
  return status;
}

static int add_refusals(struct store *s, json_t *refusals) {
  const char *key;
  json_t *v;
  int status = STORE_OK;
  json_object_foreach(refusals, key, v) {
    char *end = NULL;
    long long id = strtoll(key, &end, 10);
    if (status != STORE_OK || !end || *end || id <= 0 || !json_is_integer(v) ||
        json_integer_value(v) <= 0)
      continue;
    const struct sk_arg args[] = {SK_I(id), SK_I(json_integer_value(v))};
    status = sk_exec(s, SQL_REFUSE, args, 2, NULL);
  }
  return status;
}

/* Adds 1 to rule id and attaches the example. */
static int confirm(struct store *s, struct record *r, long long id) {
  const struct sk_arg args[] = {SK_I(id), SK_T(r->now), SK_I(SKILL_SCORE_MAX)};
  int status = sk_exec(s, SQL_CONFIRM, args, 3, NULL);
  if (status == STORE_OK)
    status = sk_insert_example(s, id, false, &r->u->example, NULL, r->now);
  if (status == STORE_OK)
    status = sk_trim_examples(s, id);
  r->result = (struct skill_result){SKILL_OUTCOME_CONFIRMED, id};
  return status;
}

/* Inserts a rule of origin with the example attached. */
static int add_rule(struct store *s, struct record *r, const char *rule, const char *origin,
                    long long score, json_t *constraint, const char *signature,
                    long long *ret_id) {
  const struct skill_example *ex = &r->u->example;
  json_t *body = st_json_pack("{s:s, s:s?, s:I, s:O?}", "rule", rule, "family", ex->family,
                              "score", (json_int_t)score, "constraint", constraint);
  if (!body)
    return STORE_ERROR;
  long long id = 0;
  int status = sk_insert_skill(s, body, MEMORY_CREATE, origin, signature, r->now, &id);
  json_decref(body);
  /* Checked inside this transaction, so only a concurrent step of another server (a
   * READ COMMITTED commit on PostgreSQL: store_transaction_rc) can have added the same
   * rule since: run the transaction again, which then finds and confirms it. */
  if (status == STORE_CONFLICT)
    status = STORE_BUSY;
  if (status == STORE_OK && ret_id)
    *ret_id = id;
  r->result = (struct skill_result){SKILL_OUTCOME_ADDED, id};
  return status;
}

/* A new rule, or the identical one (case aside) of the family gains 1. */
static int record_new(struct store *s, struct record *r) {
  const struct skill_update *u = r->u;
  const struct sk_arg args[] = {SK_T(u->rule), SK_T(u->example.family)};
  long long id = 0;
  bool found = false;
  int status = exists(s, SQL_SAME_RULE, args, 2, &id, &found);
  if (status != STORE_OK)
    return status;
  if (found)
    return confirm(s, r, id);
  status = add_rule(s, r, u->rule, u->origin ? u->origin : "llm", 1, NULL, NULL, &id);
  return status == STORE_OK ? sk_insert_example(s, id, false, &u->example, NULL, r->now) : status;
}

/* Builds the group's rule with the caller's function once the group has enough tasks. */
static int close_group(struct store *s, struct record *r, long long tasks) {
  const struct skill_update *u = r->u;
  const struct sk_arg args[] = {SK_T(u->example.signature), SK_T(u->example.family)};
  json_t *examples = NULL;
  int status = sk_collect(s, SQL_GROUP, args, 2, sk_group_example_from_row, 0, &examples);
  if (status != STORE_OK)
    return status;
  json_t *made = u->make_rule(u->make_rule_ctx, s, examples, u->example.signature,
                              u->example.family);
  json_decref(examples);
  const char *rule = json_string_value(json_object_get(made, "rule"));
  json_t *constraint = json_object_get(made, "constraint");
  if (!made || !skill_rule_valid(rule) ||
      skill_check_constraint(constraint ? constraint : json_null(), "", "constraint", NULL) != 0) {
    if (made)
      store_log("skills: the rule made for group '%s' is malformed; the group waits",
                u->example.signature);
    json_decref(made);
    return STORE_OK;
  }
  long long id = 0;
  status = add_rule(s, r, rule, "grouping", tasks, json_is_object(constraint) ? constraint : NULL,
                    u->example.signature, &id);
  json_decref(made);
  const struct sk_arg attach[] = {SK_T(u->example.signature), SK_T(u->example.family), SK_I(id)};
  if (status == STORE_OK)
    status = sk_exec(s, SQL_GROUP_ATTACH, attach, 3, NULL);
  return status == STORE_OK ? sk_trim_examples(s, id) : status;
}

static int record_group(struct store *s, struct record *r) {
  const struct skill_update *u = r->u;
  const struct skill_example *ex = &u->example;
  const struct sk_arg key[] = {SK_T(ex->signature), SK_T(ex->family)};
  long long id = 0, tasks = 0;
  bool found = false;
  int status = exists(s, SQL_GROUP_RULE, key, 2, &id, &found);
  if (status != STORE_OK || found)
    return status == STORE_OK ? confirm(s, r, id) : status;
  status = sk_insert_example(s, 0, true, ex, NULL, r->now);
  const struct sk_arg trim[] = {SK_T(ex->signature), SK_T(ex->family), SK_T(ex->task_id),
                                SK_I(GROUP_PER_TASK)};
  if (status == STORE_OK)
    status = sk_exec(s, SQL_GROUP_TRIM, trim, 4, NULL);
  if (status == STORE_OK)
    status = exists(s, SQL_GROUP_TASKS, key, 2, &tasks, &found);
  r->result = (struct skill_result){SKILL_OUTCOME_WAITING, 0};
  if (status == STORE_OK && u->make_rule && tasks >= (u->group_tasks > 0 ? u->group_tasks : 1))
    status = close_group(s, r, tasks);
  return status;
}

static int record_tx(struct store *s, void *arg) {
  struct record *r = arg;
  const struct skill_update *u = r->u;
  r->result = (struct skill_result){SKILL_OUTCOME_NONE, 0};
  int status = u->refusals ? add_refusals(s, u->refusals) : STORE_OK;
  if (status != STORE_OK || u->action == SKILL_ACTION_NONE)
    return status;
  if (u->example.candidate_id) {
    const struct sk_arg args[] = {SK_T(u->example.candidate_id)};
    bool seen = false;
    status = exists(s, SQL_EXAMINED, args, 1, NULL, &seen);
    if (status != STORE_OK || seen) {
      r->result.outcome = seen ? SKILL_OUTCOME_SEEN : SKILL_OUTCOME_NONE;
      return status;
    }
  }
  switch (u->action) {
  case SKILL_ACTION_EXAMINED:
    status = sk_insert_example(s, 0, false, &u->example, NULL, r->now);
    r->result.outcome = SKILL_OUTCOME_EXAMINED;
    break;
  case SKILL_ACTION_GROUP:
    status = record_group(s, r);
    break;
  case SKILL_ACTION_CONFIRM: {
    const struct sk_arg args[] = {SK_I(u->match_id)};
    bool found = false;
    status = exists(s, SQL_EXISTS, args, 1, NULL, &found);
    if (status == STORE_OK)
      status = found ? confirm(s, r, u->match_id) : record_new(s, r);
    break;
  }
  case SKILL_ACTION_NEW:
    status = record_new(s, r);
    break;
  case SKILL_ACTION_NONE:
    break;
  }
  const struct sk_arg keep[] = {SK_I(SKILL_LOOSE_KEEP)};
  return status == STORE_OK ? sk_exec(s, SQL_LOOSE_TRIM, keep, 1, NULL) : status;
}

int store_skills_record(struct store *s, const struct skill_update *u) {
  if (!s || !u)
    return STORE_INVALID;
  if (u->action != SKILL_ACTION_NONE &&
      (!u->example.failure_class || !u->example.signature ||
       strlen(u->example.failure_class) > SKILL_CLASS_MAX ||
       strlen(u->example.signature) > SKILL_SIGNATURE_MAX))
    return STORE_INVALID;
  if ((u->action == SKILL_ACTION_NEW || u->action == SKILL_ACTION_CONFIRM) &&
      !skill_rule_valid(u->rule))
    return STORE_INVALID;
  struct record r = {.u = u};
  if (!store_time_now(r.now))
    return STORE_ERROR;
  int status = store_transaction(s, record_tx, &r);
  if (status == STORE_OK && u->result)
    *u->result = r.result;
  return status;
}

int store_skills_examined(struct store *s, const char *candidate_id, bool *ret_seen) {
  if (!s || !candidate_id || !ret_seen)
    return STORE_INVALID;
  const struct sk_arg args[] = {SK_T(candidate_id)};
  return exists(s, SQL_EXAMINED, args, 1, NULL, ret_seen);
}

static int refusals_tx(struct store *s, void *arg) {
  return add_refusals(s, arg);
}

int store_skills_add_refusals(struct store *s, json_t *refusals) {
  if (!s)
    return STORE_INVALID;
  return json_object_size(refusals) ? store_transaction(s, refusals_tx, refusals) : STORE_OK;
}
