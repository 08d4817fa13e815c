/* Private to store/: logging, checked allocation and JSON, database call wrappers, the
 * clock. Every helper here logs its own failure; callers only propagate it. */
#ifndef OPFORGE_STORE_UTIL_H
#define OPFORGE_STORE_UTIL_H

#include <jansson.h>
#include "store/db.h"
#include <stdbool.h>
#include <stddef.h>

#include "store/status.h"

/* "2026-11-29T07:42:04.123Z" plus NUL fits. */
#define STORE_TIME_LEN 32

void store_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* malloc/strdup that honour fault injection; free the result with free. */
void *st_malloc(size_t size);
void *st_calloc(size_t n, size_t size);
void *st_realloc(void *p, size_t size);
char *st_strdup(const char *s);

/* Parses JSON text read from the database; caller owns the result. */
json_t *st_json_loads(const char *text);
/* Compact JSON text of v; caller frees it with free. */
char *st_json_dumps(const json_t *v);
/* json_pack: "o" arguments are stolen even on failure. Caller owns the result. */
json_t *st_json_pack(const char *fmt, ...);
/* An empty array; caller owns it. */
json_t *st_json_array(void);
/* Appends value (stolen, released on failure) to array; 0 or -1. */
int st_json_array_append_new(json_t *array, json_t *value);

/* db_exec of trusted SQL; returns the DB_ code. Busy codes are not logged. */
int st_exec(struct db *db, const char *sql);
/* db_step; returns the DB_ code. Busy codes and the constraint codes that
 * callers map to statuses (unique, primary key, foreign key) are not logged. */
int st_step(struct db_stmt *stmt);
/* Maps an unexpected DB_ code from stmt to STORE_BUSY, STORE_UNAVAILABLE, STORE_CONSTRAINT or
 * STORE_ERROR (st_status), logging what st_step left unlogged (call it before st_done). */
int st_fail(struct db_stmt *stmt, int rc);
/* The store status of a failed DB_ code: STORE_BUSY for busy and locked (and
 * PostgreSQL's serialization failures), STORE_UNAVAILABLE for a server that cannot be
 * reached, STORE_FULL for a full disk,
 * STORE_CONSTRAINT for the codes that repeat on every retry (constraint, mismatch, too
 * big, range), else STORE_ERROR. */
int st_status(int rc);
/* Resets stmt and clears its bindings so it holds no read snapshot or borrowed text. */
void st_done(struct db_stmt *stmt);
/* Binds borrowed text (NULL binds SQL NULL); the text must outlive the step. */
bool st_bind_text(struct db_stmt *stmt, int idx, const char *text);
bool st_is_busy(int rc);

/* Wall-clock milliseconds as decimal text (leases are compared across processes and
 * hosts, so not the monotonic clock), plus offset_s seconds. */
void store_epoch_ms_text(char buf[24], unsigned offset_s);

/* Unix milliseconds as RFC 3339 UTC with milliseconds. */
void store_time_of_epoch_ms(long long ms, char buf[STORE_TIME_LEN]);

/* Current UTC time as RFC 3339 with milliseconds. */
bool store_time_now(char buf[STORE_TIME_LEN]);

#endif
