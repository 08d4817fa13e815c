/* Skill rules: list, get, create, update, delete, and the active rules proposers see. */
#include "store/skills.h"

#include <stdlib.h>

#include "store/skills_rows.h"
#include "store/transaction.h"

static const char SQL_LIST[] =
    "SELECT " SKILL_COLUMNS " FROM skills s"
    " WHERE (?1 IS NULL OR s.family IS NULL OR s.family = ?1) AND (?2 < 0 OR s.enabled = ?2)"
    " ORDER BY s.id";
static const char SQL_EXAMPLES[] =
    "SELECT " SKILL_EXAMPLE_COLUMNS " FROM skill_examples WHERE skill_id = ?1"
    " ORDER BY id DESC LIMIT ?2";
static const char SQL_ACTIVE[] =
    "SELECT id, rule, score, family, constraint_json FROM skills"
    " WHERE enabled = 1 AND score >= ?1 ORDER BY score DESC, id";
static const char SQL_SET_RULE[] = "UPDATE skills SET rule = ?2, updated_at = ?3 WHERE id = ?1";
static const char SQL_SET_SCORE[] =
    "UPDATE skills SET score = ?2, updated_at = ?3 WHERE id = ?1";
static const char SQL_SET_FAMILY[] =
    "UPDATE skills SET family = ?2, updated_at = ?3 WHERE id = ?1";
static const char SQL_SET_ENABLED[] =
    "UPDATE skills SET enabled = ?2, updated_at = ?3 WHERE id = ?1";
static const char SQL_SET_CONSTRAINT[] =
    "UPDATE skills SET constraint_json = ?2, updated_at = ?3 WHERE id = ?1";
static const char SQL_DELETE_EXAMPLES[] = "DELETE FROM skill_examples WHERE skill_id = ?1";
static const char SQL_DELETE[] = "DELETE FROM skills WHERE id = ?1";

/* What one write or read needs; result is the record after the last attempt. */
struct op {
  long long id;
  const json_t *body;
  struct memory_invalid *why;
  char now[STORE_TIME_LEN];
  json_t *result;
};

/* Runs fn in a transaction; on STORE_OK hands op->result to *ret (when ret is not NULL). */
static int run(struct store *s, store_tx_fn fn, struct op *op, json_t **ret) {
  if (!store_time_now(op->now))
    return STORE_ERROR;
  int status = store_transaction(s, fn, op);
  if (status == STORE_OK && ret)
    *ret = op->result;
  else
    json_decref(op->result);
  return status;
}

int store_skills_list(struct store *s, const char *family, int enabled, json_t **ret_items) {
  if (!s || !ret_items)
    return STORE_INVALID;
  const struct sk_arg args[] = {SK_T(family), SK_I(enabled < 0 ? -1 : enabled != 0)};
  return sk_collect(s, SQL_LIST, args, 2, sk_skill_from_row, SKILL_ROW_API, ret_items);
}

static int get_tx(struct store *s, void *arg) {
  struct op *op = arg;
  json_decref(op->result);
  op->result = NULL;
  json_t *skill = NULL, *examples = NULL;
  int status = sk_load(s, op->id, &skill);
  const struct sk_arg args[] = {SK_I(op->id), SK_I(SKILL_EXAMPLES_KEEP)};
  if (status == STORE_OK)
    status = sk_collect(s, SQL_EXAMPLES, args, 2, sk_example_from_row, 0, &examples);
  if (status == STORE_OK && json_object_set_new(skill, "examples", examples) != 0) {
    store_log("out of memory (JSON)");
    status = STORE_ERROR;
  }
  if (status == STORE_OK)
    op->result = skill;
  else
    json_decref(skill);
  return status;
}

int store_skill_get(struct store *s, long long id, json_t **ret_skill) {
  if (!s || !ret_skill)
    return STORE_INVALID;
  struct op op = {.id = id};
  return run(s, get_tx, &op, ret_skill);
}

static int create_tx(struct store *s, void *arg) {
  struct op *op = arg;
  long long id = 0;
  int status = sk_insert_skill(s, op->body, MEMORY_CREATE, "user", NULL, op->now, &id);
  op->id = id;
  return status == STORE_CONFLICT ? STORE_ERROR : status == STORE_OK ? get_tx(s, op) : status;
}

int store_skill_create(struct store *s, const json_t *body, json_t **ret_skill) {
  if (!s || !json_is_object(body))
    return STORE_INVALID;
  struct op op = {.body = body};
  return run(s, create_tx, &op, ret_skill);
}

/* Sets one member of the patch body when present: text (or null), integer or boolean. */
static int set_member(struct store *s, struct op *op, const char *sql, const char *key) {
  const json_t *v = json_object_get(op->body, key);
  if (!v)
    return STORE_OK;
  char *text = json_is_object(v) ? st_json_dumps(v) : NULL;
  if (json_is_object(v) && !text)
    return STORE_ERROR;
  struct sk_arg value = json_is_integer(v)   ? SK_I(json_integer_value(v))
                        : json_is_boolean(v) ? SK_I(json_is_true(v))
                        : text               ? SK_T(text)
                                             : SK_T(json_string_value(v));
  const struct sk_arg args[] = {SK_I(op->id), value, SK_T(op->now)};
  int changes = 0;
  int status = sk_exec(s, sql, args, 3, &changes);
  free(text);
  if (status == STORE_OK && changes == 0)
    status = STORE_NOT_FOUND;
  if (status == STORE_CONFLICT)
    memory_why(op->why, MEMORY_PROBLEM_DUPLICATE, "family",
               "a grouped rule with this signature exists in family %s",
               json_is_string(v) ? json_string_value(v) : "null");
  return status;
}

static int update_tx(struct store *s, void *arg) {
  struct op *op = arg;
  json_decref(op->result);
  op->result = NULL;
  json_t *skill = NULL;
  int status = sk_load(s, op->id, &skill);
  json_decref(skill);
  static const struct {
    const char *sql, *key;
  } members[] = {{SQL_SET_RULE, "rule"},       {SQL_SET_SCORE, "score"},
                 {SQL_SET_FAMILY, "family"},   {SQL_SET_ENABLED, "enabled"},
                 {SQL_SET_CONSTRAINT, "constraint"}};
  for (size_t i = 0; i < sizeof members / sizeof members[0] && status == STORE_OK; i++)
    status = set_member(s, op, members[i].sql, members[i].key);
  return status == STORE_OK ? get_tx(s, op) : status;
}

int store_skill_update(struct store *s, long long id, const json_t *body,
                       struct memory_invalid *why, json_t **ret_skill) {
  if (!s || !json_is_object(body))
    return STORE_INVALID;
  struct op op = {.id = id, .body = body, .why = why};
  return run(s, update_tx, &op, ret_skill);
}

static int delete_tx(struct store *s, void *arg) {
  struct op *op = arg;
  const struct sk_arg args[] = {SK_I(op->id)};
  int changes = 0;
  int status = sk_exec(s, SQL_DELETE_EXAMPLES, args, 1, NULL);
  if (status == STORE_OK)
    status = sk_exec(s, SQL_DELETE, args, 1, &changes);
  return status == STORE_OK && changes == 0 ? STORE_NOT_FOUND : status;
}

int store_skill_delete(struct store *s, long long id) {
  if (!s)
    return STORE_INVALID;
  struct op op = {.id = id};
  return run(s, delete_tx, &op, NULL);
}

/* {"id","rule","score","family","constraint"} of an active rule's row. */
static json_t *active_from_row(struct db_stmt *st, int flags) {
  (void)flags;
  const char *rule = (const char *)db_column_text(st, 1);
  const char *family = db_column_type(st, 3) == DB_NULL
                           ? NULL : (const char *)db_column_text(st, 3);
  const char *text = db_column_type(st, 4) == DB_NULL
                         ? NULL : (const char *)db_column_text(st, 4);
  json_t *constraint = text ? st_json_loads(text) : json_null();
  if (!rule || !constraint) {
    json_decref(constraint);
    store_log("an active skill row is unreadable");
    return NULL;
  }
  return st_json_pack("{s:I, s:s, s:I, s:s?, s:o}", "id",
                      (json_int_t)db_column_int64(st, 0), "rule", rule, "score",
                      (json_int_t)db_column_int64(st, 2), "family", family, "constraint",
                      constraint);
}

int store_skills_active(struct store *s, long long min_score, json_t **ret_items) {
  if (!s || !ret_items)
    return STORE_INVALID;
  const struct sk_arg args[] = {SK_I(min_score)};
  return sk_collect(s, SQL_ACTIVE, args, 1, active_from_row, 0, ret_items);
}
