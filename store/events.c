/* Task event logs: append with a gap-free per-task sequence, read after a sequence. */
#include "store/events.h"

#include <stdlib.h>
#include <string.h>

#include "store/connection.h"
#include "store/statements.h"
#include "store/transaction.h"
#include "store/util.h"

#define EVENT_TYPE_MAX 64
/* A reader asking for more gets this many; it asks again for the rest. */
#define EVENTS_MAX 10000

/* The sequence is computed inside the writing transaction (SQLite: BEGIN IMMEDIATE holds
 * the write lock; PostgreSQL: SQL_LOCK_TASK first locks the task's row, also in a READ
 * COMMITTED transaction), so concurrent appends can neither collide nor leave gaps. The
 * foreign key turns an unknown task into DB_CONSTRAINT_FOREIGNKEY. */
static const char SQL_LOCK_TASK[] = "SELECT 1 FROM tasks WHERE id = ?1 FOR UPDATE";
static const char SQL_APPEND[] =
    "INSERT INTO events (task_id, seq, type, time, data)"
    " SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, COALESCE(?4, '{}')"
    " FROM events WHERE task_id = ?1 RETURNING seq";
static const char SQL_AFTER[] = "SELECT seq, type, time, data FROM events"
                                " WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";

int store_event_append_tx(struct store *s, const char *task_id, const char *type,
                          const char *data_text, int64_t *ret_seq) {
  char now[STORE_TIME_LEN];
  if (!store_time_now(now))
    return STORE_ERROR;
  if (s->backend == DB_BACKEND_POSTGRESQL) {
    char *locked = NULL;
    int rc = st_query_text(s, SQL_LOCK_TASK, task_id, NULL, &locked);
    free(locked);
    if (rc != STORE_OK)
      return rc; /* STORE_NOT_FOUND for an unknown task, as the foreign key says below */
  }
  struct db_stmt *st = store_stmt(s, SQL_APPEND);
  if (!st)
    return STORE_ERROR;
  int status = STORE_ERROR;
  if (st_bind_text(st, 1, task_id) && st_bind_text(st, 2, type) && st_bind_text(st, 3, now) &&
      st_bind_text(st, 4, data_text)) {
    int rc = st_step(st);
    int64_t seq = rc == DB_ROW ? db_column_int64(st, 0) : 0;
    if (rc == DB_ROW)
      rc = st_step(st);
    if (rc == DB_DONE) {
      status = STORE_OK;
      if (ret_seq)
        *ret_seq = seq;
    } else {
      status = rc == DB_CONSTRAINT_FOREIGNKEY ? STORE_NOT_FOUND : st_fail(st, rc);
    }
  }
  st_done(st);
  return status;
}

struct append {
  const char *task_id, *type, *data_text;
  int64_t seq;
};

static int append_tx(struct store *s, void *arg) {
  struct append *a = arg;
  return store_event_append_tx(s, a->task_id, a->type, a->data_text, &a->seq);
}

int store_event_append(struct store *s, const char *task_id, const char *type,
                       json_t *data, int64_t *ret_seq) {
  if (!s || !task_id || !type || type[0] == '\0' || strlen(type) > EVENT_TYPE_MAX ||
      (data && !json_is_object(data)))
    return STORE_INVALID;
  struct append a = {.task_id = task_id, .type = type};
  char *text = NULL;
  if (data && !(text = st_json_dumps(data)))
    return STORE_ERROR;
  a.data_text = text;
  int status = store_transaction(s, append_tx, &a);
  free(text);
  if (status == STORE_OK && ret_seq)
    *ret_seq = a.seq;
  return status;
}

/* One event row as {"seq","type","time","data"}; caller owns it. */
static json_t *event_from_row(struct db_stmt *st) {
  const char *type = (const char *)db_column_text(st, 1);
  const char *time = (const char *)db_column_text(st, 2);
  const char *data_text = (const char *)db_column_text(st, 3);
  if (!type || !time || !data_text) {
    store_log("event row unreadable");
    return NULL;
  }
  json_t *data = st_json_loads(data_text);
  if (!data)
    return NULL;
  return st_json_pack("{s:I, s:s, s:s, s:o}", "seq", (json_int_t)db_column_int64(st, 0),
                      "type", type, "time", time, "data", data);
}

int store_events_after(struct store *s, const char *task_id, int64_t after_seq, int max,
                       json_t **ret_events) {
  if (!s || !task_id || !ret_events || max < 1)
    return STORE_INVALID;
  struct db_stmt *st = store_stmt(s, SQL_AFTER);
  if (!st)
    return STORE_ERROR;
  json_t *events = NULL;
  int status = STORE_ERROR;
  if (st_bind_text(st, 1, task_id) && db_bind_int64(st, 2, after_seq) == DB_OK &&
      db_bind_int(st, 3, max > EVENTS_MAX ? EVENTS_MAX : max) == DB_OK)
    events = st_json_array();
  if (events) {
    int rc;
    while ((rc = st_step(st)) == DB_ROW) {
      json_t *event = event_from_row(st);
      if (!event || st_json_array_append_new(events, event) != 0)
        break;
    }
    status = rc == DB_DONE ? STORE_OK : rc == DB_ROW ? STORE_ERROR : st_fail(st, rc);
  }
  st_done(st);
  if (status != STORE_OK) {
    json_decref(events);
    return status;
  }
  *ret_events = events;
  return STORE_OK;
}
