/* Candidate records: the insert of the step commit, the list of a task, one by id. */
#include "store/candidates.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/connection.h"
#include "store/statements.h"
#include "store/util.h"

#define CANDIDATE_COLUMNS                                                                \
  "id, task_id, seq, step, parent_id, direction, strategy, step_kind, created_at, source," \
  " options, plan, result, program, region"

/* Dumps the named member of obj as JSON text (NULL for a missing or null member). */
static char *member_text(json_t *obj, const char *key, bool *ret_failed) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v))
    return NULL;
  char *text = st_json_dumps(v);
  if (!text)
    *ret_failed = true;
  return text;
}

static const char *member_string(json_t *obj, const char *key) {
  return json_string_value(json_object_get(obj, key));
}

int store_candidate_insert(struct store *s, const char *task_id, int step, json_t *candidate) {
  bool failed = false;
  char *options = member_text(candidate, "options", &failed);
  char *plan = member_text(candidate, "plan", &failed);
  char *result_text = member_text(candidate, "result", &failed);
  char *program = member_text(candidate, "program", &failed);
  json_t *region = json_object_get(candidate, "region");
  char now[STORE_TIME_LEN];
  int result = failed || !store_time_now(now) ? STORE_ERROR : STORE_OK;
  struct db_stmt *st = result == STORE_OK
      ? store_stmt(s,
                   "INSERT INTO candidates (id, task_id, seq, step, parent_id, source, options,"
                   " plan, result, direction, strategy, step_kind, created_at, program, region)"
                   " VALUES (?1, ?2,"
                   " (SELECT COALESCE(MAX(seq), 0) + 1 FROM candidates WHERE task_id = ?2), ?3,"
                   " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)")
      : NULL;
  if (st) {
    const char *source = member_string(candidate, "source");
    bool ok = st_bind_text(st, 1, member_string(candidate, "id")) &&
              st_bind_text(st, 2, task_id) && db_bind_int(st, 3, step) == DB_OK &&
              st_bind_text(st, 4, member_string(candidate, "parent_id")) &&
              st_bind_text(st, 5, source ? source : "") && st_bind_text(st, 6, options) &&
              st_bind_text(st, 7, plan) && st_bind_text(st, 8, result_text) &&
              st_bind_text(st, 9, member_string(candidate, "direction")) &&
              st_bind_text(st, 10, member_string(candidate, "strategy")) &&
              st_bind_text(st, 11, member_string(candidate, "step_kind")) &&
              st_bind_text(st, 12, now) && st_bind_text(st, 13, program) &&
              (json_is_integer(region)
                   ? db_bind_int64(st, 14, json_integer_value(region)) == DB_OK
                   : db_bind_null(st, 14) == DB_OK);
    int rc = ok ? st_step(st) : DB_ERROR;
    result = !ok ? STORE_ERROR : rc == DB_DONE ? STORE_OK : st_fail(st, rc);
    st_done(st);
  } else {
    result = STORE_ERROR;
  }
  free(options);
  free(plan);
  free(result_text);
  free(program);
  return result;
}

/* The candidate on st's current row in API shape (caller owns), NULL on failure. */
static json_t *candidate_from_row(struct db_stmt *st) {
  json_t *obj = st_json_pack("{}");
  for (int col = 0; obj && col < db_column_count(st); col++) {
    const char *name = db_column_name(st, col);
    json_t *v;
    if (db_column_type(st, col) == DB_NULL)
      v = json_null();
    else if (strcmp(name, "seq") == 0 || strcmp(name, "step") == 0 ||
             strcmp(name, "region") == 0)
      v = json_integer(db_column_int64(st, col));
    else if (strcmp(name, "options") == 0 || strcmp(name, "plan") == 0 ||
             strcmp(name, "result") == 0 || strcmp(name, "program") == 0)
      v = st_json_loads((const char *)db_column_text(st, col));
    else
      v = json_string((const char *)db_column_text(st, col));
    if (!v || json_object_set_new(obj, name, v) != 0) {
      json_decref(obj);
      obj = NULL;
    }
  }
  return obj;
}

/* Collects the rows of a prepared, bound candidate query into an array. */
static int collect_candidates(struct db_stmt *st, json_t **ret_items) {
  json_t *items = st_json_array();
  int rc, result = items ? STORE_OK : STORE_ERROR;
  while (result == STORE_OK && (rc = st_step(st)) == DB_ROW) {
    json_t *c = candidate_from_row(st);
    if (!c || st_json_array_append_new(items, c) != 0)
      result = STORE_ERROR;
  }
  if (result == STORE_OK && rc != DB_DONE)
    result = st_fail(st, rc);
  st_done(st);
  if (result != STORE_OK) {
    json_decref(items);
    return result;
  }
  *ret_items = items;
  return STORE_OK;
}

int store_candidates_list(struct store *s, const char *task_id, int limit, int64_t after_seq,
                          json_t **ret_items) {
  char *exists = NULL;
  int result = st_query_text(s, "SELECT id FROM tasks WHERE id = ?1", task_id, NULL, &exists);
  free(exists);
  if (result != STORE_OK)
    return result;
  struct db_stmt *st = store_stmt(s, "SELECT " CANDIDATE_COLUMNS " FROM candidates"
                                   " WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3");
  if (!st)
    return STORE_ERROR;
  if (!st_bind_text(st, 1, task_id) || db_bind_int64(st, 2, after_seq) != DB_OK ||
      db_bind_int(st, 3, limit) != DB_OK) {
    st_done(st);
    return STORE_ERROR;
  }
  return collect_candidates(st, ret_items);
}

int store_candidate_get(struct store *s, const char *id, json_t **ret_candidate) {
  struct db_stmt *st = store_stmt(s, "SELECT " CANDIDATE_COLUMNS " FROM candidates WHERE id = ?1");
  if (!st)
    return STORE_ERROR;
  if (!st_bind_text(st, 1, id)) {
    st_done(st);
    return STORE_ERROR;
  }
  json_t *items = NULL;
  int result = collect_candidates(st, &items);
  if (result != STORE_OK)
    return result;
  if (json_array_size(items) == 0) {
    json_decref(items);
    return STORE_NOT_FOUND;
  }
  *ret_candidate = json_incref(json_array_get(items, 0));
  json_decref(items);
  return STORE_OK;
}
