/* What the optimization loop stores: claims, profiles, tree rows, steps, candidates. */
#include "store/search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"

#define CANDIDATE_COLUMNS                                                                \
  "id, task_id, seq, step, parent_id, direction, strategy, step_kind, created_at, source," \
  " options, plan, result"

/* Runs one statement with up to four text bindings (NULL binds SQL NULL) and no result
 * rows. *ret_changes (may be NULL) gets the number of rows changed. */
static int run(struct store *s, const char *sql, const char *a, const char *b, const char *c,
               const char *d, int *ret_changes) {
  sqlite3_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  const char *texts[4] = {a, b, c, d};
  for (int i = 0; i < 4; i++)
    if (sqlite3_bind_parameter_count(st) > i && !st_bind_text(st, i + 1, texts[i])) {
      st_done(st);
      return STORE_ERROR;
    }
  int rc = st_step(st);
  int result = rc == SQLITE_DONE ? STORE_OK : st_fail(st, rc);
  if (result == STORE_OK && ret_changes)
    *ret_changes = sqlite3_changes(sqlite3_db_handle(st));
  st_done(st);
  return result;
}

/* Reads the first text column of the first row of sql bound to a (and b); *ret_text is a
 * malloc'd copy or NULL for SQL NULL; STORE_NOT_FOUND when there is no row. */
static int query_text(struct store *s, const char *sql, const char *a, const char *b,
                      char **ret_text) {
  sqlite3_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  if ((a && !st_bind_text(st, 1, a)) || (b && !st_bind_text(st, 2, b))) {
    st_done(st);
    return STORE_ERROR;
  }
  int rc = st_step(st), result = STORE_NOT_FOUND;
  if (rc == SQLITE_ROW) {
    const char *text = (const char *)sqlite3_column_text(st, 0);
    char *copy = text ? st_strdup(text) : NULL;
    result = text && !copy ? STORE_ERROR : STORE_OK;
    if (result == STORE_OK)
      *ret_text = copy;
  } else if (rc != SQLITE_DONE) {
    result = st_fail(st, rc);
  }
  st_done(st);
  return result;
}

struct claim {
  const char *worker;
  char id[40];
};

static int claim_tx(struct store *s, void *arg) {
  struct claim *c = arg;
  char *id = NULL;
  int result = query_text(s,
                          "SELECT id FROM tasks WHERE status = 'running' AND claimed_by IS NULL"
                          " ORDER BY seq LIMIT 1",
                          NULL, NULL, &id);
  bool resume = result == STORE_OK;
  if (result == STORE_NOT_FOUND)
    result = query_text(s, "SELECT id FROM tasks WHERE status = 'queued' ORDER BY seq LIMIT 1",
                        NULL, NULL, &id);
  if (result != STORE_OK || !id)
    return result == STORE_OK ? STORE_ERROR : result;
  snprintf(c->id, sizeof c->id, "%s", id);
  free(id);
  if (!resume)
    result = store_task_set_status(s, c->id, "running", NULL);
  if (result == STORE_OK)
    result = run(s, "UPDATE tasks SET claimed_by = ?2 WHERE id = ?1", c->id, c->worker, NULL,
                 NULL, NULL);
  return result;
}

int store_task_claim(struct store *s, const char *worker, char ret_id[40]) {
  struct claim c = {.worker = worker};
  int result = store_transaction(s, claim_tx, &c);
  if (result == STORE_OK)
    memcpy(ret_id, c.id, sizeof c.id);
  return result;
}

int store_task_unclaim(struct store *s, const char *id) {
  if (id)
    return run(s, "UPDATE tasks SET claimed_by = NULL WHERE id = ?1", id, NULL, NULL, NULL, NULL);
  return run(s, "UPDATE tasks SET claimed_by = NULL WHERE status = 'running'", NULL, NULL, NULL,
             NULL, NULL);
}

int store_task_profile_get(struct store *s, const char *id, json_t **ret_profile) {
  char *text = NULL;
  int result = query_text(s, "SELECT profile FROM tasks WHERE id = ?1", id, NULL, &text);
  if (result != STORE_OK)
    return result;
  json_t *profile = text ? st_json_loads(text) : NULL;
  free(text);
  if (text && !profile)
    return STORE_ERROR;
  *ret_profile = profile;
  return STORE_OK;
}

struct profile_set {
  const char *id;
  char *profile_text, *baselines_text, *event_text;
};

static int profile_tx(struct store *s, void *arg) {
  struct profile_set *p = arg;
  int changed = 0;
  int result = run(s, "UPDATE tasks SET profile = ?2, baselines = ?3 WHERE id = ?1", p->id,
                   p->profile_text, p->baselines_text, NULL, &changed);
  if (result == STORE_OK && changed == 0)
    return STORE_NOT_FOUND;
  return result == STORE_OK ? store_event_append_tx(s, p->id, "profiled", p->event_text, NULL)
                            : result;
}

int store_task_profile_set(struct store *s, const char *id, json_t *profile,
                           json_t *baselines) {
  json_t *event = st_json_pack("{s:O}", "baselines", baselines);
  struct profile_set p = {.id = id,
                          .profile_text = st_json_dumps(profile),
                          .baselines_text = st_json_dumps(baselines),
                          .event_text = event ? st_json_dumps(event) : NULL};
  json_decref(event);
  int result = p.profile_text && p.baselines_text && p.event_text
                   ? store_transaction(s, profile_tx, &p)
                   : STORE_ERROR;
  free(p.profile_text);
  free(p.baselines_text);
  free(p.event_text);
  return result;
}

int store_tree_rows(struct store *s, const char *task_id, json_t **ret_rows) {
  sqlite3_stmt *st =
      store_stmt(s, "SELECT data FROM tree_nodes WHERE task_id = ?1 ORDER BY node_id");
  json_t *rows = st ? st_json_array() : NULL;
  if (!rows || !st_bind_text(st, 1, task_id)) {
    json_decref(rows);
    if (st)
      st_done(st);
    return STORE_ERROR;
  }
  int rc, result = STORE_OK;
  while ((rc = st_step(st)) == SQLITE_ROW && result == STORE_OK) {
    json_t *row = st_json_loads((const char *)sqlite3_column_text(st, 0));
    if (!row || st_json_array_append_new(rows, row) != 0)
      result = STORE_ERROR;
  }
  if (result == STORE_OK && rc != SQLITE_DONE)
    result = st_fail(st, rc);
  st_done(st);
  if (result != STORE_OK) {
    json_decref(rows);
    return result;
  }
  *ret_rows = rows;
  return STORE_OK;
}

/* Inserts or replaces the tree rows of a step. */
static int write_tree_rows(struct store *s, const char *task_id, json_t *rows) {
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    char node[24];
    snprintf(node, sizeof node, "%lld", (long long)json_integer_value(json_object_get(row, "id")));
    char *text = st_json_dumps(row);
    int result = text ? run(s,
                            "INSERT OR REPLACE INTO tree_nodes (task_id, node_id, data)"
                            " VALUES (?1, CAST(?2 AS INTEGER), ?3)",
                            task_id, node, text, NULL, NULL)
                      : STORE_ERROR;
    free(text);
    if (result != STORE_OK)
      return result;
  }
  return STORE_OK;
}

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

/* Inserts the step's candidate with the next per-task sequence number. */
static int insert_candidate(struct store *s, const struct step_commit *c) {
  bool failed = false;
  char *options = member_text(c->candidate, "options", &failed);
  char *plan = member_text(c->candidate, "plan", &failed);
  char *result_text = member_text(c->candidate, "result", &failed);
  char now[STORE_TIME_LEN];
  int result = failed || !store_time_now(now) ? STORE_ERROR : STORE_OK;
  sqlite3_stmt *st = result == STORE_OK
      ? store_stmt(s,
                   "INSERT INTO candidates (id, task_id, seq, step, parent_id, source, options,"
                   " plan, result, direction, strategy, step_kind, created_at) VALUES (?1, ?2,"
                   " (SELECT COALESCE(MAX(seq), 0) + 1 FROM candidates WHERE task_id = ?2), ?3,"
                   " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)")
      : NULL;
  if (st) {
    const char *source = member_string(c->candidate, "source");
    bool ok = st_bind_text(st, 1, member_string(c->candidate, "id")) &&
              st_bind_text(st, 2, c->task_id) && sqlite3_bind_int(st, 3, c->step) == SQLITE_OK &&
              st_bind_text(st, 4, member_string(c->candidate, "parent_id")) &&
              st_bind_text(st, 5, source ? source : "") && st_bind_text(st, 6, options) &&
              st_bind_text(st, 7, plan) && st_bind_text(st, 8, result_text) &&
              st_bind_text(st, 9, member_string(c->candidate, "direction")) &&
              st_bind_text(st, 10, member_string(c->candidate, "strategy")) &&
              st_bind_text(st, 11, member_string(c->candidate, "step_kind")) &&
              st_bind_text(st, 12, now);
    int rc = ok ? st_step(st) : SQLITE_ERROR;
    result = !ok ? STORE_ERROR : rc == SQLITE_DONE ? STORE_OK : st_fail(st, rc);
    st_done(st);
  } else {
    result = STORE_ERROR;
  }
  free(options);
  free(plan);
  free(result_text);
  return result;
}

static int step_tx(struct store *s, void *arg) {
  const struct step_commit *c = arg;
  char step[24];
  snprintf(step, sizeof step, "%d", c->step);
  char *progress = st_json_dumps(c->progress), *event = st_json_dumps(c->event_data);
  int result = progress && event ? insert_candidate(s, c) : STORE_ERROR;
  if (result == STORE_OK)
    result = write_tree_rows(s, c->task_id, c->tree_rows);
  if (result == STORE_OK && c->memory) {
    result = store_memory_record_step(s, c->memory);
    if (result == STORE_NOT_FOUND)  /* the direction was deleted meanwhile: nothing to count */
      result = STORE_OK;
  }
  if (result == STORE_OK)
    result = run(s,
                 "UPDATE tasks SET progress = ?2, step = CAST(?3 AS INTEGER),"
                 " updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
                 c->task_id, progress, step, NULL, NULL);
  if (result == STORE_OK)
    result = store_event_append_tx(s, c->task_id, "step", event, NULL);
  free(progress);
  free(event);
  return result;
}

int store_step_commit(struct store *s, const struct step_commit *c) {
  return store_transaction(s, step_tx, (void *)c);
}

struct finish {
  const char *id, *status;
  json_t *error;
  char *summary_text;
};

static int finish_tx(struct store *s, void *arg) {
  struct finish *f = arg;
  int result = store_task_set_status(s, f->id, f->status, f->error);
  if (result == STORE_OK)
    result = store_event_append_tx(s, f->id, "finished", f->summary_text, NULL);
  if (result == STORE_OK)
    result = store_task_unclaim(s, f->id);
  return result;
}

int store_task_finish(struct store *s, const char *id, const char *status, json_t *error,
                      json_t *summary) {
  struct finish f = {.id = id, .status = status, .error = error,
                     .summary_text = summary ? st_json_dumps(summary) : NULL};
  int result = summary && !f.summary_text ? STORE_ERROR : store_transaction(s, finish_tx, &f);
  free(f.summary_text);
  return result;
}

/* The candidate on st's current row in API shape (caller owns), NULL on failure. */
static json_t *candidate_from_row(sqlite3_stmt *st) {
  json_t *obj = st_json_pack("{}");
  for (int col = 0; obj && col < sqlite3_column_count(st); col++) {
    const char *name = sqlite3_column_name(st, col);
    json_t *v;
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
      v = json_null();
    else if (strcmp(name, "seq") == 0 || strcmp(name, "step") == 0)
      v = json_integer(sqlite3_column_int64(st, col));
    else if (strcmp(name, "options") == 0 || strcmp(name, "plan") == 0 ||
             strcmp(name, "result") == 0)
      v = st_json_loads((const char *)sqlite3_column_text(st, col));
    else
      v = json_string((const char *)sqlite3_column_text(st, col));
    if (!v || json_object_set_new(obj, name, v) != 0) {
      json_decref(obj);
      obj = NULL;
    }
  }
  return obj;
}

/* Collects the rows of a prepared, bound candidate query into an array. */
static int collect_candidates(sqlite3_stmt *st, json_t **ret_items) {
  json_t *items = st_json_array();
  int rc, result = items ? STORE_OK : STORE_ERROR;
  while (result == STORE_OK && (rc = st_step(st)) == SQLITE_ROW) {
    json_t *c = candidate_from_row(st);
    if (!c || st_json_array_append_new(items, c) != 0)
      result = STORE_ERROR;
  }
  if (result == STORE_OK && rc != SQLITE_DONE)
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
  int result = query_text(s, "SELECT id FROM tasks WHERE id = ?1", task_id, NULL, &exists);
  free(exists);
  if (result != STORE_OK)
    return result;
  sqlite3_stmt *st = store_stmt(s, "SELECT " CANDIDATE_COLUMNS " FROM candidates"
                                   " WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3");
  if (!st)
    return STORE_ERROR;
  if (!st_bind_text(st, 1, task_id) || sqlite3_bind_int64(st, 2, after_seq) != SQLITE_OK ||
      sqlite3_bind_int(st, 3, limit) != SQLITE_OK) {
    st_done(st);
    return STORE_ERROR;
  }
  return collect_candidates(st, ret_items);
}

int store_candidate_get(struct store *s, const char *id, json_t **ret_candidate) {
  sqlite3_stmt *st = store_stmt(s, "SELECT " CANDIDATE_COLUMNS " FROM candidates WHERE id = ?1");
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
