/* Store helpers: logging, checked allocation and JSON, database call wrappers, the clock. */
#include "store/util.h"
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/fault.h"

void store_log(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_error("store: %s", msg);  /* one line with the time and the level, as every log */
}

void *st_malloc(size_t size) {
  void *p = store_fault() ? NULL : malloc(size);
  if (!p)
    store_log("out of memory (%zu bytes)", size);
  return p;
}

void *st_calloc(size_t n, size_t size) {
  void *p = store_fault() ? NULL : calloc(n, size);
  if (!p)
    store_log("out of memory (%zu x %zu bytes)", n, size);
  return p;
}

/* On failure p is untouched and still owned by the caller. */
void *st_realloc(void *p, size_t size) {
  void *q = store_fault() ? NULL : realloc(p, size);
  if (!q)
    store_log("out of memory (%zu bytes)", size);
  return q;
}

char *st_strdup(const char *s) {
  size_t len = strlen(s) + 1;
  char *copy = st_malloc(len);
  if (copy)
    memcpy(copy, s, len);
  return copy;
}

json_t *st_json_loads(const char *text) {
  if (store_fault()) {
    store_log("out of memory (JSON)");
    return NULL;
  }
  json_error_t jerr;
  json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
  if (!v)
    store_log("bad JSON in database: %s", jerr.text);
  return v;
}

/* json_dumpb into our own buffer, so the caller frees with plain free whatever
 * allocator Jansson was given. */
char *st_json_dumps(const json_t *v) {
  size_t size = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
  if (size == 0) {
    store_log("cannot encode JSON");
    return NULL;
  }
  char *text = st_malloc(size + 1);
  if (!text)
    return NULL;
  if (json_dumpb(v, text, size, JSON_COMPACT | JSON_ENCODE_ANY) != size) {
    store_log("cannot encode JSON");
    free(text);
    return NULL;
  }
  text[size] = '\0';
  return text;
}

/* The injected fault comes after a real pack so that "o" arguments are consumed
 * exactly as Jansson does on its own failures. */
json_t *st_json_pack(const char *fmt, ...) {
  va_list ap;
  json_error_t jerr;
  va_start(ap, fmt);
  json_t *v = json_vpack_ex(&jerr, 0, fmt, ap);
  va_end(ap);
  if (!v) {
    store_log("cannot build JSON: %s", jerr.text);
    return NULL;
  }
  if (store_fault()) {
    json_decref(v);
    store_log("out of memory (JSON)");
    return NULL;
  }
  return v;
}

json_t *st_json_array(void) {
  json_t *a = store_fault() ? NULL : json_array();
  if (!a)
    store_log("out of memory (JSON)");
  return a;
}

int st_json_array_append_new(json_t *array, json_t *value) {
  if (store_fault()) {
    json_decref(value);
    store_log("out of memory (JSON)");
    return -1;
  }
  if (json_array_append_new(array, value) != 0) {
    store_log("out of memory (JSON)");
    return -1;
  }
  return 0;
}

bool st_is_busy(int rc) {
  if (rc == DB_UNAVAILABLE)
    return false;
  int primary = rc & 0xff;
  return primary == DB_BUSY || primary == DB_LOCKED;
}

/* Constraint codes that callers turn into STORE_CONFLICT or STORE_NOT_FOUND. */
static bool is_mapped_constraint(int rc) {
  return rc == DB_CONSTRAINT_UNIQUE || rc == DB_CONSTRAINT_PRIMARYKEY ||
         rc == DB_CONSTRAINT_FOREIGNKEY;
}

/* The database server cannot be reached: said once per UNAVAILABLE_LOG_S, not per call
 * (every thread meets it while it lasts). */
#define UNAVAILABLE_LOG_S 10
static void note_unavailable(struct db *db) {
  static _Atomic long long last_logged;
  long long now = (long long)time(NULL);
  long long last = last_logged;
  if (now - last >= UNAVAILABLE_LOG_S && atomic_compare_exchange_strong(&last_logged, &last, now))
    store_log("the database server cannot be reached (said again in %d s while it lasts): %s",
              UNAVAILABLE_LOG_S, db_errmsg(db));
}

int st_exec(struct db *db, const char *sql) {
  if (store_fault()) {
    store_log("injected fault (%.60s)", sql);
    return DB_NOMEM;
  }
  int rc = db_exec(db, sql);
  if (rc == DB_UNAVAILABLE)
    note_unavailable(db);
  else if (rc != DB_OK && !st_is_busy(rc))
    store_log("%s (%.60s)", db_errmsg(db), sql);
  return rc;
}

int st_step(struct db_stmt *stmt) {
  if (store_fault()) {
    store_log("injected fault (%.60s)", db_sql(stmt));
    return DB_NOMEM;
  }
  int rc = store_statement_fault(db_sql(stmt));
  if (rc != DB_OK) {
    if (!st_is_busy(rc))
      store_log("injected persistent fault %d (%.60s)", rc, db_sql(stmt));
    return rc;
  }
  rc = db_step(stmt);
  if (rc == DB_UNAVAILABLE)
    note_unavailable(db_handle(stmt));
  if (rc != DB_ROW && rc != DB_DONE && !st_is_busy(rc) && !is_mapped_constraint(rc) &&
      rc != DB_UNAVAILABLE)
    store_log("%s (%.60s)", db_errmsg(db_handle(stmt)), db_sql(stmt));
  return rc;
}

int st_status(int rc) {
  if (st_is_busy(rc))
    return STORE_BUSY;
  if (rc == DB_UNAVAILABLE)
    return STORE_UNAVAILABLE;
  switch (rc & 0xff) {
  case DB_FULL:
    return STORE_FULL;
  case DB_CONSTRAINT:
  case DB_MISMATCH:
  case DB_TOOBIG:
  case DB_RANGE:
    return STORE_CONSTRAINT;
  default:
    return STORE_ERROR;
  }
}

int st_fail(struct db_stmt *stmt, int rc) {
  if (is_mapped_constraint(rc))
    store_log("%s (%.60s)", db_errmsg(db_handle(stmt)), db_sql(stmt));
  return st_status(rc);
}

void st_done(struct db_stmt *stmt) {
  db_reset(stmt);
}

bool st_bind_text(struct db_stmt *stmt, int idx, const char *text) {
  int rc = text ? db_bind_text(stmt, idx, text) : db_bind_null(stmt, idx);
  if (rc != DB_OK)
    store_log("bind %d: %s (%.60s)", idx, db_errstr(rc), db_sql(stmt));
  return rc == DB_OK;
}

void store_epoch_ms_text(char buf[24], unsigned offset_s) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + (long long)offset_s * 1000;
  snprintf(buf, 24, "%lld", ms);
}

void store_time_of_epoch_ms(long long ms, char buf[STORE_TIME_LEN]) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  if (ms < 0 || !gmtime_r(&secs, &tm)) {
    snprintf(buf, STORE_TIME_LEN, "1970-01-01T00:00:00.000Z");
    return;
  }
  size_t n = strftime(buf, STORE_TIME_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, STORE_TIME_LEN - n, ".%03dZ", (int)(ms % 1000));
}

bool store_time_now(char buf[STORE_TIME_LEN]) {
  struct timespec ts;
  struct tm tm;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || !gmtime_r(&ts.tv_sec, &tm)) {
    store_log("cannot read the clock");
    return false;
  }
  size_t n = strftime(buf, STORE_TIME_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
  if (n == 0) {
    store_log("cannot format the time");
    return false;
  }
  snprintf(buf + n, STORE_TIME_LEN - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
  return true;
}
