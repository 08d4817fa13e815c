/* Skill rows: typed statement runners, rows to records, and the inserts of rules and
 * examples. */
#include "store/skills_rows.h"

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "store/connection.h"

static const char SQL_LOAD[] = "SELECT " SKILL_COLUMNS " FROM skills s WHERE s.id = ?1";
static const char SQL_INSERT_SKILL[] =
    "INSERT INTO skills (id, rule, score, family, enabled, constraint_json, origin, signature,"
    " refusals, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    " RETURNING id";
static const char SQL_INSERT_EXAMPLE[] =
    "INSERT INTO skill_examples (skill_id, task_id, candidate_id, family, class, signature,"
    " message, in_group, knobs, moved, features, created_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
static const char SQL_TRIM[] =
    "DELETE FROM skill_examples WHERE skill_id = ?1 AND id NOT IN"
    " (SELECT id FROM skill_examples WHERE skill_id = ?1 ORDER BY id DESC LIMIT ?2)";

/* ---- runners ---- */

static bool bind_args(struct db_stmt *st, const struct sk_arg *args, int n) {
  for (int i = 0; i < n; i++) {
    if (args[i].type == 'i') {
      if (db_bind_int64(st, i + 1, args[i].i) != DB_OK) {
        store_log("bind %d: %s", i + 1, db_errmsg(db_handle(st)));
        return false;
      }
    } else if (!st_bind_text(st, i + 1, args[i].text)) {
      return false;
    }
  }
  return true;
}

/* A prepared and bound statement, or NULL (logged, nothing left bound). */
static struct db_stmt *prepare(struct store *s, const char *sql, const struct sk_arg *args, int n) {
  struct db_stmt *st = store_stmt(s, sql);
  if (st && !bind_args(st, args, n)) {
    st_done(st);
    return NULL;
  }
  return st;
}

int sk_collect(struct store *s, const char *sql, const struct sk_arg *args, int n,
               sk_row_fn fn, int flags, json_t **ret_items) {
  json_t *items = st_json_array();
  struct db_stmt *st = items ? prepare(s, sql, args, n) : NULL;
  if (!st) {
    json_decref(items);
    return STORE_ERROR;
  }
  int rc, status = STORE_OK;
  while ((rc = st_step(st)) == DB_ROW) {
    json_t *rec = fn(st, flags);
    if (!rec || st_json_array_append_new(items, rec) != 0) {
      status = STORE_ERROR;
      break;
    }
  }
  if (status == STORE_OK && rc != DB_DONE)
    status = st_fail(st, rc);
  st_done(st);
  if (status == STORE_OK)
    *ret_items = items;
  else
    json_decref(items);
  return status;
}

int sk_exec(struct store *s, const char *sql, const struct sk_arg *args, int n,
            int *ret_changes) {
  struct db_stmt *st = prepare(s, sql, args, n);
  if (!st)
    return STORE_ERROR;
  int rc = st_step(st);
  int status = rc == DB_DONE                                                 ? STORE_OK
               : rc == DB_CONSTRAINT_UNIQUE || rc == DB_CONSTRAINT_PRIMARYKEY ? STORE_CONFLICT
                                                                                 : st_fail(st, rc);
  if (status == STORE_OK && ret_changes)
    *ret_changes = db_changes(db_handle(st));
  st_done(st);
  return status;
}

int sk_int(struct store *s, const char *sql, const struct sk_arg *args, int n,
           long long *ret_value, bool *ret_found) {
  struct db_stmt *st = prepare(s, sql, args, n);
  if (!st)
    return STORE_ERROR;
  int rc = st_step(st);
  int status = rc == DB_ROW || rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  if (status == STORE_OK) {
    *ret_found = rc == DB_ROW;
    if (rc == DB_ROW)
      *ret_value = db_column_int64(st, 0);
  }
  st_done(st);
  return status;
}

int sk_load(struct store *s, long long id, json_t **ret) {
  json_t *items = NULL;
  const struct sk_arg args[] = {SK_I(id)};
  int status = sk_collect(s, SQL_LOAD, args, 1, sk_skill_from_row, SKILL_ROW_API, &items);
  if (status != STORE_OK)
    return status;
  json_t *first = json_array_get(items, 0);
  if (first)
    *ret = json_incref(first);
  json_decref(items);
  return first ? STORE_OK : STORE_NOT_FOUND;
}

/* ---- rows to records ---- */

/* Text of a column; NULL for SQL NULL. */
static const char *text_col(struct db_stmt *st, int col) {
  return db_column_type(st, col) == DB_NULL ? NULL
                                                     : (const char *)db_column_text(st, col);
}

/* A JSON column: null for SQL NULL; NULL (logged) when unreadable. Caller owns it. */
static json_t *json_col(struct db_stmt *st, int col) {
  const char *text = text_col(st, col);
  json_t *v = text ? st_json_loads(text) : json_null();
  if (!v)
    store_log("column %s is unreadable", db_column_name(st, col));
  return v;
}

enum { SC_ID, SC_RULE, SC_SCORE, SC_FAMILY, SC_ENABLED, SC_CONSTRAINT, SC_ORIGIN,
       SC_SIGNATURE, SC_REFUSALS, SC_CREATED, SC_UPDATED, SC_EXAMPLES };

json_t *sk_skill_from_row(struct db_stmt *st, int flags) {
  const char *rule = text_col(st, SC_RULE), *origin = text_col(st, SC_ORIGIN);
  const char *created = text_col(st, SC_CREATED), *updated = text_col(st, SC_UPDATED);
  if (!rule || !origin || !created || !updated) {
    store_log("a skill row lacks a required column");
    return NULL;
  }
  json_t *constraint = json_col(st, SC_CONSTRAINT);
  if (!constraint)
    return NULL;
  json_t *rec = st_json_pack(
      "{s:I, s:s, s:I, s:s?, s:b, s:o, s:s, s:s?, s:I, s:s, s:s}", "id",
      (json_int_t)db_column_int64(st, SC_ID), "rule", rule, "score",
      (json_int_t)db_column_int64(st, SC_SCORE), "family", text_col(st, SC_FAMILY),
      "enabled", db_column_int(st, SC_ENABLED) != 0, "constraint", constraint, "origin",
      origin, "signature", text_col(st, SC_SIGNATURE), "refusals",
      (json_int_t)db_column_int64(st, SC_REFUSALS), "created_at", created, "updated_at",
      updated);
  if (rec && !(flags & SKILL_ROW_EXPORT) &&
      json_object_set_new(rec, "example_count",
                          json_integer((json_int_t)db_column_int64(st, SC_EXAMPLES))) != 0) {
    store_log("out of memory (JSON)");
    json_decref(rec);
    return NULL;
  }
  return rec;
}

enum { EC_TASK, EC_CANDIDATE, EC_CLASS, EC_SIGNATURE, EC_MESSAGE, EC_CREATED };

json_t *sk_example_from_row(struct db_stmt *st, int flags) {
  (void)flags;
  const char *cls = text_col(st, EC_CLASS), *sig = text_col(st, EC_SIGNATURE);
  const char *msg = text_col(st, EC_MESSAGE), *created = text_col(st, EC_CREATED);
  if (!cls || !sig || !created) {
    store_log("a skill example row lacks a required column");
    return NULL;
  }
  json_t *task = text_col(st, EC_TASK) ? json_string(text_col(st, EC_TASK)) : json_null();
  json_t *cand = text_col(st, EC_CANDIDATE) ? json_string(text_col(st, EC_CANDIDATE)) : json_null();
  return st_json_pack("{s:o, s:o, s:s, s:s, s:s, s:s}", "task_id", task, "candidate_id", cand,
                      "class", cls, "signature", sig, "message", msg ? msg : "", "created_at",
                      created);
}

enum { GC_TASK, GC_CANDIDATE, GC_FAMILY, GC_CLASS, GC_SIGNATURE, GC_MESSAGE, GC_MOVED,
       GC_KNOBS, GC_FEATURES, GC_CREATED };

json_t *sk_group_example_from_row(struct db_stmt *st, int flags) {
  (void)flags;
  json_t *knobs = json_col(st, GC_KNOBS), *features = knobs ? json_col(st, GC_FEATURES) : NULL;
  if (!features) {
    json_decref(knobs);
    return NULL;
  }
  return st_json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:o, s:o, s:s?}", "task_id",
                      text_col(st, GC_TASK), "candidate_id", text_col(st, GC_CANDIDATE), "family",
                      text_col(st, GC_FAMILY), "class", text_col(st, GC_CLASS), "signature",
                      text_col(st, GC_SIGNATURE), "message", text_col(st, GC_MESSAGE), "moved",
                      text_col(st, GC_MOVED), "knobs", knobs, "features", features,
                      "created_at", text_col(st, GC_CREATED));
}

/* ---- inserts ---- */

int sk_insert_skill(struct store *s, const json_t *body, enum memory_mode mode,
                    const char *origin, const char *signature, const char *now,
                    long long *ret_id) {
  bool import = mode == MEMORY_IMPORT;
  const json_t *id = import ? json_object_get(body, "id") : NULL;
  const json_t *score = json_object_get(body, "score"), *enabled = json_object_get(body, "enabled");
  const json_t *constraint = json_object_get(body, "constraint");
  const json_t *refusals = import ? json_object_get(body, "refusals") : NULL;
  const char *created = import ? json_string_value(json_object_get(body, "created_at")) : NULL;
  const char *updated = import ? json_string_value(json_object_get(body, "updated_at")) : NULL;
  if (!origin)
    origin = json_string_value(json_object_get(body, "origin"));
  if (!signature && import)
    signature = json_string_value(json_object_get(body, "signature"));
  char *constraint_text = json_is_object(constraint) ? st_json_dumps(constraint) : NULL;
  if (json_is_object(constraint) && !constraint_text)
    return STORE_ERROR;
  struct db_stmt *st = store_stmt(s, SQL_INSERT_SKILL);
  bool bound = st &&
               (id ? db_bind_int64(st, 1, json_integer_value(id)) == DB_OK
                   : db_bind_null(st, 1) == DB_OK) &&
               st_bind_text(st, 2, json_string_value(json_object_get(body, "rule"))) &&
               db_bind_int64(st, 3, score ? json_integer_value(score) : 1) == DB_OK &&
               st_bind_text(st, 4, json_string_value(json_object_get(body, "family"))) &&
               db_bind_int(st, 5, enabled ? json_is_true(enabled) : 1) == DB_OK &&
               st_bind_text(st, 6, constraint_text) &&
               st_bind_text(st, 7, origin ? origin : "import") && st_bind_text(st, 8, signature) &&
               db_bind_int64(st, 9, refusals ? json_integer_value(refusals) : 0) == DB_OK &&
               st_bind_text(st, 10, created ? created : now) &&
               st_bind_text(st, 11, updated ? updated : now);
  int status = STORE_ERROR;
  if (bound) {
    int rc = st_step(st);
    status = rc == DB_ROW ? STORE_OK
             : rc == DB_CONSTRAINT_UNIQUE || rc == DB_CONSTRAINT_PRIMARYKEY ? STORE_CONFLICT
                                                                              : st_fail(st, rc);
  }
  if (status == STORE_OK)
    *ret_id = db_column_int64(st, 0);
  if (st)
    st_done(st);
  free(constraint_text);
  return status;
}

int sk_insert_example(struct store *s, long long skill_id, bool in_group,
                      const struct skill_example *ex, const char *created_at,
                      const char *now) {
  const char *msg = ex->message ? ex->message : "";
  size_t len = utf8_cut(msg, strnlen(msg, SKILL_MESSAGE_MAX));
  char *cut = st_malloc(len + 1);
  char *knobs = ex->knobs && !json_is_null(ex->knobs) ? st_json_dumps(ex->knobs) : NULL;
  char *features = ex->features && !json_is_null(ex->features) ? st_json_dumps(ex->features) : NULL;
  int status = STORE_ERROR;
  if (cut && (knobs || !ex->knobs || json_is_null(ex->knobs)) &&
      (features || !ex->features || json_is_null(ex->features))) {
    memcpy(cut, msg, len);
    cut[len] = '\0';
    const struct sk_arg args[] = {
      skill_id > 0 ? SK_I(skill_id) : SK_T(NULL), SK_T(ex->task_id), SK_T(ex->candidate_id),
      SK_T(ex->family), SK_T(ex->failure_class), SK_T(ex->signature), SK_T(cut),
      SK_I(in_group && skill_id <= 0), SK_T(knobs), SK_T(ex->moved), SK_T(features),
      SK_T(created_at ? created_at : now),
    };
    status = sk_exec(s, SQL_INSERT_EXAMPLE, args, 12, NULL);
  }
  free(cut);
  free(knobs);
  free(features);
  return status;
}

int sk_trim_examples(struct store *s, long long skill_id) {
  const struct sk_arg args[] = {SK_I(skill_id), SK_I(SKILL_EXAMPLES_KEEP)};
  return sk_exec(s, SQL_TRIM, args, 2, NULL);
}
