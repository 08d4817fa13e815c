/* Task records: the row-to-API-shape conversion, insert, get and per-status counts. */
#include "store/tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/connection.h"
#include "store/events.h"
#include "store/tasks_internal.h"
#include "store/transaction.h"
#include "store/util.h"

/* progress.budget_steps when the options lack budget.steps; the submission default. */
#define DEFAULT_BUDGET_STEPS 20

static const char *const STATUSES[] = {"queued", "running", "succeeded", "failed", "cancelled"};

static const char SQL_GET[] = "SELECT " TASK_COLUMNS " FROM tasks WHERE id = ?1";
static const char SQL_GET_REF[] = "SELECT " TASK_COLUMNS ", reference FROM tasks WHERE id = ?1";
static const char SQL_INSERT[] =
    "INSERT INTO tasks (id, name, status, options, reference, reference_bytes, progress,"
    " created_at, updated_at, device) VALUES (?1, ?2, 'queued', ?3, ?4, ?5, ?6, ?7, ?7, ?8)";
static const char SQL_COUNTS[] = "SELECT status, COUNT(*) FROM tasks GROUP BY status";

bool store_status_valid(const char *status) {
  for (size_t i = 0; status && i < sizeof STATUSES / sizeof *STATUSES; i++)
    if (strcmp(status, STATUSES[i]) == 0)
      return true;
  return false;
}

bool store_status_is_final(const char *status) {
  return status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                    strcmp(status, "cancelled") == 0);
}

/* A JSON column; SQL NULL gives JSON null when nullable, an error otherwise. */
static json_t *json_column(struct db_stmt *st, int col, bool nullable) {
  if (nullable && db_column_type(st, col) == DB_NULL)
    return json_null();
  const char *text = (const char *)db_column_text(st, col);
  if (text)
    return st_json_loads(text);
  store_log("column %s is NULL or unreadable", db_column_name(st, col));
  return NULL;
}

/* Text of a NOT NULL column; NULL (logged) when SQLite could not produce it. */
static const char *text_column(struct db_stmt *st, int col) {
  const char *text = (const char *)db_column_text(st, col);
  if (!text)
    store_log("column %s is NULL or unreadable", db_column_name(st, col));
  return text;
}

json_t *store_task_from_row(struct db_stmt *st, bool with_reference) {
  const char *id = text_column(st, TC_ID), *name = text_column(st, TC_NAME);
  const char *status = text_column(st, TC_STATUS);
  const char *created = text_column(st, TC_CREATED), *updated = text_column(st, TC_UPDATED);
  const char *reference = with_reference ? text_column(st, TC_COUNT) : NULL;
  if (!id || !name || !status || !created || !updated || (with_reference && !reference))
    return NULL;
  char self[sizeof "/v1/tasks/" + STORE_ID_MAX], events[sizeof self + sizeof "/events"];
  snprintf(self, sizeof self, "/v1/tasks/%s", id);
  snprintf(events, sizeof events, "/v1/tasks/%s/events", id);
  json_t *options = json_column(st, TC_OPTIONS, false);
  json_t *progress = options ? json_column(st, TC_PROGRESS, false) : NULL;
  json_t *baselines = progress ? json_column(st, TC_BASELINES, true) : NULL;
  json_t *error = baselines ? json_column(st, TC_ERROR, true) : NULL;
  if (!error) {
    json_decref(options);
    json_decref(progress);
    json_decref(baselines);
    return NULL;
  }
  return st_json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:b, s:o, s:I, s:s*, s:o, s:o, s:o, s:{s:s, s:s}}", "id", id,
      "name", name, "status", status, "created_at", created, "updated_at", updated,
      "cancel_requested", db_column_int(st, TC_CANCEL) != 0, "options", options,
      "reference_bytes", (json_int_t)db_column_int64(st, TC_REFERENCE_BYTES), "reference",
      reference, "progress", progress, "baselines", baselines, "error", error, "links", "self",
      self, "events", events);
}

int store_task_load(struct store *s, const char *id, bool with_reference, json_t **ret_task) {
  struct db_stmt *st = store_stmt(s, with_reference ? SQL_GET_REF : SQL_GET);
  if (!st)
    return STORE_ERROR;
  if (!st_bind_text(st, 1, id)) {
    st_done(st);
    return STORE_ERROR;
  }
  int rc = st_step(st);
  int status = STORE_NOT_FOUND;
  if (rc == DB_ROW) {
    json_t *task = store_task_from_row(st, with_reference);
    status = task ? STORE_OK : STORE_ERROR;
    if (task)
      *ret_task = task;
  } else if (rc != DB_DONE) {
    status = st_fail(st, rc);
  }
  st_done(st);
  return status;
}

int store_task_get(struct store *s, const char *id, bool with_reference, json_t **ret_task) {
  if (!s || !id || !ret_task)
    return STORE_INVALID;
  return store_task_load(s, id, with_reference, ret_task);
}

/* Everything an insert attempt needs, prepared before the transaction so a retry does
 * no allocation of its own except the returned task. */
struct insert {
  const char *id, *name, *reference;
  const char *device; /* options' device class (claims match it), or NULL */
  char *options_text, *progress_text;
  char now[STORE_TIME_LEN];
  json_t *task; /* result of the last attempt; NULL when the caller wants none */
  bool want_task;
};

static int insert_tx(struct store *s, void *arg) {
  struct insert *in = arg;
  json_decref(in->task);
  in->task = NULL;
  struct db_stmt *st = store_stmt(s, SQL_INSERT);
  if (!st)
    return STORE_ERROR;
  int status = STORE_OK;
  if (!st_bind_text(st, 1, in->id) || !st_bind_text(st, 2, in->name) ||
      !st_bind_text(st, 3, in->options_text) || !st_bind_text(st, 4, in->reference) ||
      db_bind_int64(st, 5, (int64_t)strlen(in->reference)) != DB_OK ||
      !st_bind_text(st, 6, in->progress_text) || !st_bind_text(st, 7, in->now) ||
      !st_bind_text(st, 8, in->device)) {
    status = STORE_ERROR;
  } else {
    int rc = st_step(st);
    if (rc == DB_CONSTRAINT_UNIQUE)
      status = STORE_CONFLICT;
    else if (rc != DB_DONE)
      status = st_fail(st, rc);
  }
  st_done(st);
  if (status == STORE_OK)
    status = store_event_append_tx(s, in->id, "queued", NULL, NULL);
  if (status == STORE_OK && in->want_task)
    status = store_task_load(s, in->id, false, &in->task);
  return status;
}

/* The initial progress object, as JSON text (caller frees). */
static char *initial_progress(json_t *options) {
  json_t *steps = json_object_get(json_object_get(options, "budget"), "steps");
  json_int_t budget = json_is_integer(steps) ? json_integer_value(steps) : DEFAULT_BUDGET_STEPS;
  json_t *progress = st_json_pack("{s:i, s:I, s:n, s:n, s:i, s:i}", "step", 0, "budget_steps",
                                  budget, "best_speedup", "best_ms", "correct", 0,
                                  "candidates", 0);
  char *text = progress ? st_json_dumps(progress) : NULL;
  json_decref(progress);
  return text;
}

int store_task_insert(struct store *s, const char *id, const char *name, json_t *options,
                      const char *reference, json_t **ret_task) {
  if (!s || !id || !name || !reference || !json_is_object(options) || id[0] == '\0' ||
      strlen(id) > STORE_ID_MAX)
    return STORE_INVALID;
  struct insert in = {.id = id, .name = name, .reference = reference,
                      .device = json_string_value(json_object_get(options, "device")),
                      .want_task = ret_task != NULL};
  int status = STORE_ERROR;
  in.options_text = st_json_dumps(options);
  in.progress_text = in.options_text ? initial_progress(options) : NULL;
  if (in.progress_text && store_time_now(in.now))
    status = store_transaction(s, insert_tx, &in);
  free(in.options_text);
  free(in.progress_text);
  if (status == STORE_OK && ret_task)
    *ret_task = in.task;
  else
    json_decref(in.task);
  return status;
}

/* Rows first, then one allocation, so a failure can only come from one place. */
int store_task_counts(struct store *s, json_t **ret_counts) {
  if (!s || !ret_counts)
    return STORE_INVALID;
  enum { N = sizeof STATUSES / sizeof *STATUSES };
  json_int_t counts[N] = {0};
  struct db_stmt *st = store_stmt(s, SQL_COUNTS);
  if (!st)
    return STORE_ERROR;
  int rc;
  while ((rc = st_step(st)) == DB_ROW) {
    const char *status = (const char *)db_column_text(st, 0);
    for (size_t i = 0; status && i < N; i++)
      if (strcmp(status, STATUSES[i]) == 0)
        counts[i] = db_column_int64(st, 1);
  }
  int status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  st_done(st);
  if (status != STORE_OK)
    return status;
  json_t *obj = st_json_pack("{s:I, s:I, s:I, s:I, s:I}", STATUSES[0], counts[0], STATUSES[1],
                             counts[1], STATUSES[2], counts[2], STATUSES[3], counts[3],
                             STATUSES[4], counts[4]);
  if (!obj)
    return STORE_ERROR;
  *ret_counts = obj;
  return STORE_OK;
}
