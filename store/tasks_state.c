/* Task state changes: cancel, delete, status transitions and progress updates. */
#include "store/tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/connection.h"
#include "store/events.h"
#include "store/tasks_internal.h"
#include "store/transaction.h"
#include "store/util.h"

/* PostgreSQL locks the row it reads (the one difference): a transaction that reads the
 * state and then changes it holds the row meanwhile, even READ COMMITTED
 * (store_transaction_rc). SQLite's one writer holds everything anyway. */
#define SQL_STATE_READ "SELECT status, cancel_requested FROM tasks WHERE id = ?1"
static const char *const SQL_STATE[2] = {
    [DB_BACKEND_SQLITE] = SQL_STATE_READ,
    [DB_BACKEND_POSTGRESQL] = SQL_STATE_READ " FOR UPDATE",
};
static const char SQL_CANCEL_QUEUED[] =
    "UPDATE tasks SET status = 'cancelled', cancel_requested = 1, updated_at = ?2 WHERE id = ?1";
static const char SQL_CANCEL_RUNNING[] =
    "UPDATE tasks SET cancel_requested = 1, updated_at = ?2 WHERE id = ?1";
static const char SQL_DELETE_EVENTS[] = "DELETE FROM events WHERE task_id = ?1";
static const char SQL_DELETE_CANDIDATES[] = "DELETE FROM candidates WHERE task_id = ?1";
static const char SQL_DELETE_TASK[] = "DELETE FROM tasks WHERE id = ?1";
static const char SQL_SET_STATUS[] =
    "UPDATE tasks SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1";
static const char SQL_PROGRESS[] =
    "UPDATE tasks SET progress = COALESCE(?2, progress), baselines = COALESCE(?3, baselines),"
    " updated_at = ?4 WHERE id = ?1";

int store_task_state(struct store *s, const char *id, char ret_status[16], bool *ret_cancel) {
  struct db_stmt *st = store_stmt(s, SQL_STATE[s->backend]);
  if (!st)
    return STORE_ERROR;
  int status = STORE_ERROR;
  int rc = st_bind_text(st, 1, id) ? st_step(st) : DB_ERROR;
  if (rc == DB_ROW) {
    const char *text = (const char *)db_column_text(st, 0);
    if (text && strlen(text) < 16) {
      snprintf(ret_status, 16, "%s", text);
      *ret_cancel = db_column_int(st, 1) != 0;
      status = STORE_OK;
    } else {
      store_log("task %s: unreadable status", id);
    }
  } else if (rc == DB_DONE) {
    status = STORE_NOT_FOUND;
  } else {
    status = st_fail(st, rc);
  }
  st_done(st);
  return status;
}

/* Runs a statement whose parameters are ?1 = id and, when given, ?2..?4 = texts; it
 * must change exactly the rows that exist (*ret_changed says whether any did). */
static int run_update(struct store *s, const char *sql, const char *id, const char *p2,
                      const char *p3, const char *p4, bool *ret_changed) {
  struct db_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  int count = db_bind_parameter_count(st);
  int status = STORE_ERROR;
  if (st_bind_text(st, 1, id) && (count < 2 || st_bind_text(st, 2, p2)) &&
      (count < 3 || st_bind_text(st, 3, p3)) && (count < 4 || st_bind_text(st, 4, p4))) {
    int rc = st_step(st);
    status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  }
  if (status == STORE_OK && ret_changed)
    *ret_changed = db_changes(db_handle(st)) > 0;
  st_done(st);
  return status;
}

/* Every task's stream ends with "finished", whether it ran or was cancelled while
 * queued. Its data is the engine's summary (engine/loop.c): status, steps and correct
 * candidates so far. */
static int append_finished(struct store *s, const char *id, json_t *task) {
  json_t *progress = json_object_get(task, "progress");
  json_t *summary = st_json_pack("{s:s, s:I, s:I}", "status",
                                 json_string_value(json_object_get(task, "status")), "steps",
                                 json_integer_value(json_object_get(progress, "step")),
                                 "correct",
                                 json_integer_value(json_object_get(progress, "correct")));
  char *text = summary ? st_json_dumps(summary) : NULL;
  json_decref(summary);
  int result = text ? store_event_append_tx(s, id, "finished", text, NULL) : STORE_ERROR;
  free(text);
  return result;
}

struct cancel {
  const char *id;
  json_t *task; /* result of the last attempt */
};

/* A repeated cancel of a running task changes nothing and adds no event. */
static int cancel_tx(struct store *s, void *arg) {
  struct cancel *c = arg;
  json_decref(c->task);
  c->task = NULL;
  char status[16], now[STORE_TIME_LEN];
  bool requested = false;
  int result = store_task_state(s, c->id, status, &requested);
  if (result != STORE_OK)
    return result;
  if (store_status_is_final(status))
    return STORE_CONFLICT;
  if (!store_time_now(now))
    return STORE_ERROR;
  bool queued = strcmp(status, "queued") == 0;
  if (queued || !requested) {
    result = run_update(s, queued ? SQL_CANCEL_QUEUED : SQL_CANCEL_RUNNING, c->id, now, NULL,
                        NULL, NULL);
    if (result == STORE_OK)
      result = store_event_append_tx(s, c->id, queued ? "cancelled" : "cancel_requested", NULL,
                                     NULL);
  }
  if (result == STORE_OK)
    result = store_task_load(s, c->id, false, &c->task);
  if (result == STORE_OK && queued)
    result = append_finished(s, c->id, c->task);
  return result;
}

int store_task_cancel(struct store *s, const char *id, json_t **ret_task) {
  if (!s || !id || !ret_task)
    return STORE_INVALID;
  struct cancel c = {.id = id};
  int status = store_transaction(s, cancel_tx, &c);
  if (status == STORE_OK)
    *ret_task = c.task;
  else
    json_decref(c.task);
  return status;
}

/* Events and candidates are deleted explicitly (not left to ON DELETE CASCADE) so the
 * delete does not depend on the foreign_keys pragma of whoever opened the file. */
static int delete_tx(struct store *s, void *arg) {
  const char *id = arg;
  char status[16];
  bool requested = false;
  int result = store_task_state(s, id, status, &requested);
  if (result != STORE_OK)
    return result;
  if (strcmp(status, "running") == 0)
    return STORE_CONFLICT;
  const char *const steps[] = {SQL_DELETE_EVENTS, SQL_DELETE_CANDIDATES, SQL_DELETE_TASK};
  for (size_t i = 0; i < sizeof steps / sizeof *steps && result == STORE_OK; i++)
    result = run_update(s, steps[i], id, NULL, NULL, NULL, NULL);
  return result;
}

int store_task_delete(struct store *s, const char *id) {
  if (!s || !id)
    return STORE_INVALID;
  return store_transaction(s, delete_tx, (void *)id);
}

struct set_status {
  const char *id, *status;
  char *error_text, *event_text; /* event_text: the event's data, NULL for {} */
};

static int set_status_tx(struct store *s, void *arg) {
  const struct set_status *a = arg;
  char status[16], now[STORE_TIME_LEN];
  bool requested = false;
  int result = store_task_state(s, a->id, status, &requested);
  if (result != STORE_OK)
    return result;
  if (store_status_is_final(status) || strcmp(status, a->status) == 0)
    return STORE_CONFLICT;
  if (!store_time_now(now))
    return STORE_ERROR;
  result = run_update(s, SQL_SET_STATUS, a->id, a->status, a->error_text, now, NULL);
  if (result == STORE_OK)
    result = store_event_append_tx(s, a->id, a->status, a->event_text, NULL);
  return result;
}

int store_task_set_status(struct store *s, const char *id, const char *status, json_t *error) {
  if (!s || !id || !store_status_valid(status) || (error && !json_is_object(error)))
    return STORE_INVALID;
  struct set_status a = {.id = id, .status = status};
  int result = STORE_OK;
  if (error) {
    json_t *data = st_json_pack("{s:O}", "error", error);
    a.error_text = st_json_dumps(error);
    a.event_text = data ? st_json_dumps(data) : NULL;
    json_decref(data);
    if (!a.error_text || !a.event_text)
      result = STORE_ERROR;
  }
  if (result == STORE_OK)
    result = store_transaction(s, set_status_tx, &a);
  free(a.error_text);
  free(a.event_text);
  return result;
}

struct progress {
  const char *id;
  char *progress_text, *baselines_text;
};

static int progress_tx(struct store *s, void *arg) {
  const struct progress *p = arg;
  char now[STORE_TIME_LEN];
  bool changed = false;
  if (!store_time_now(now))
    return STORE_ERROR;
  int result = run_update(s, SQL_PROGRESS, p->id, p->progress_text, p->baselines_text, now,
                          &changed);
  return result == STORE_OK && !changed ? STORE_NOT_FOUND : result;
}

int store_task_update_progress(struct store *s, const char *id, json_t *progress,
                               json_t *baselines) {
  if (!s || !id || (progress && !json_is_object(progress)) ||
      (baselines && !json_is_object(baselines)))
    return STORE_INVALID;
  struct progress p = {.id = id};
  int result = STORE_OK;
  if (progress && !(p.progress_text = st_json_dumps(progress)))
    result = STORE_ERROR;
  if (result == STORE_OK && baselines && !(p.baselines_text = st_json_dumps(baselines)))
    result = STORE_ERROR;
  if (result == STORE_OK)
    result = store_transaction(s, progress_tx, &p);
  free(p.progress_text);
  free(p.baselines_text);
  return result;
}
