/* The SQLite store: connections (one per thread), migrations, transactions, and the
 * task and event records. Records come back as Jansson objects in their API shape. */
#ifndef OPFORGE_STORE_H
#define OPFORGE_STORE_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every store function returns one of these. */
enum store_status {
  STORE_OK = 0,
  STORE_NOT_FOUND = 1,   /* no such row */
  STORE_CONFLICT = 2,    /* the row is in a state that forbids the change */
  STORE_INVALID = 3,     /* an argument (cursor, status filter) is malformed */
  STORE_ERROR = -1,      /* SQLite or allocation failure; logged once where it happened */
  STORE_BUSY = -2,       /* still locked after the busy retries */
};

struct store;

/* Opens (creating if needed) DATA_DIR/opforge.db in WAL mode and applies every embedded
 * migration not yet in schema_migrations. On failure writes a reason into err and
 * returns STORE_ERROR. The caller owns *ret_store and frees it with store_close. */
int store_open(const char *data_dir, struct store **ret_store, char *err, size_t errlen);

/* Closes every per-thread connection and frees the store. Accepts NULL. Call it only
 * after all threads that used the store are done. */
void store_close(struct store *s);

/* True when the database is open and every embedded migration is recorded. */
bool store_ready(struct store *s);

/* Highest applied migration number (0 when none). */
int store_schema_version(struct store *s);

/* The calling thread's connection, opened on first use; NULL on failure. Owned by the
 * store: do not close it. */
sqlite3 *store_db(struct store *s);

/* A statement for sql on this thread's connection, prepared once and cached by the sql
 * pointer (pass string literals). Returned reset and with bindings cleared. Owned by the
 * store: do not finalize it. NULL on failure (logged). */
sqlite3_stmt *store_stmt(struct store *s, const char *sql);

/* Runs fn inside BEGIN IMMEDIATE ... COMMIT on this thread's connection. A busy database
 * is retried (with backoff) up to the busy budget; fn may run more than once, so it must
 * have no effects outside the database. fn returns a store_status; anything but STORE_OK
 * rolls back and is returned. */
typedef int (*store_tx_fn)(struct store *s, void *arg);
int store_transaction(struct store *s, store_tx_fn fn, void *arg);

/* Fault injection for tests: after n more successful allocations/SQLite steps inside the
 * store, the next one fails (n < 0 disables). */
void store_fail_after(int n);

/* For tests: true when the injected fault has fired since the last store_fail_after.
 * The fault is one-shot: the call that fails also switches injection off. */
bool store_fault_injected(void);

/* ---- tasks ---- */

/* Inserts a task in status "queued" with its normalized options (borrowed) and its
 * reference source, and appends its first event ("queued") in the same transaction.
 * On STORE_OK, *ret_task (caller owns) is the task in API shape, without reference. */
int store_task_insert(struct store *s, const char *id, const char *name, json_t *options,
                      const char *reference, json_t **ret_task);

/* Loads one task in API shape (caller owns *ret_task); with_reference adds "reference".
 * STORE_NOT_FOUND when there is no such id. */
int store_task_get(struct store *s, const char *id, bool with_reference, json_t **ret_task);

/* Lists tasks newest first, optionally only those in status (NULL for all), at most limit
 * (1..500). cursor is NULL or a value from an earlier *ret_next_cursor; a malformed one
 * gives STORE_INVALID. *ret_items (caller owns) is a JSON array; *ret_next_cursor (caller
 * frees with free) is NULL when there is no further page. */
int store_task_list(struct store *s, const char *status, int limit, const char *cursor,
                    json_t **ret_items, char **ret_next_cursor);

/* Cancels a task: a queued one becomes "cancelled" at once (event "cancelled"); a running
 * one gets cancel_requested=true (event "cancel_requested") and its worker ends it.
 * STORE_CONFLICT for a task already succeeded, failed or cancelled. On STORE_OK
 * *ret_task (caller owns) is the task after the change. */
int store_task_cancel(struct store *s, const char *id, json_t **ret_task);

/* Deletes a task with its events and candidates. STORE_CONFLICT while it is running. */
int store_task_delete(struct store *s, const char *id);

/* Moves a task to status (one of the five) and appends an event whose type is the new
 * status, with data {"error": error} when error is given, else {}. error (borrowed, an
 * object or NULL) replaces the stored error; pass NULL to clear it. A final task, or a
 * task already in status, gives STORE_CONFLICT (so two workers cannot both claim a
 * queued task); any other move is allowed, e.g. running back to queued on restart.
 * Joins the caller's store_transaction when called inside one. */
int store_task_set_status(struct store *s, const char *id, const char *status, json_t *error);

/* Replaces a task's progress and/or baselines (borrowed objects; NULL leaves that field
 * unchanged) and its updated_at; appends no event. STORE_NOT_FOUND when there is no
 * such id. Joins the caller's store_transaction when called inside one. */
int store_task_update_progress(struct store *s, const char *id, json_t *progress,
                               json_t *baselines);

/* Counts tasks per status: {"queued":n,"running":n,"succeeded":n,"failed":n,
 * "cancelled":n} (every key present). Caller owns *ret_counts. */
int store_task_counts(struct store *s, json_t **ret_counts);

/* ---- events ---- */

/* Appends an event to a task's log; data is borrowed and may be NULL ({}). Works inside
 * or outside store_transaction. *ret_seq (may be NULL) gets its sequence number, which
 * starts at 1 per task and has no gaps. */
int store_event_append(struct store *s, const char *task_id, const char *type,
                       json_t *data, int64_t *ret_seq);

/* Events of a task with seq > after_seq, oldest first, at most max. Each is
 * {"seq","type","time","data"}. Caller owns *ret_events (an array, maybe empty). */
int store_events_after(struct store *s, const char *task_id, int64_t after_seq, int max,
                       json_t **ret_events);

/* True when the task status is final (succeeded, failed, cancelled). */
bool store_status_is_final(const char *status);

#endif
