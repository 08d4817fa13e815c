/* The SQLite driver of store/db.h: each call forwards to SQLite's own. */
#include "store/db.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(DB_OK == SQLITE_OK && DB_ERROR == SQLITE_ERROR && DB_BUSY == SQLITE_BUSY &&
                   DB_LOCKED == SQLITE_LOCKED && DB_NOMEM == SQLITE_NOMEM &&
                   DB_FULL == SQLITE_FULL && DB_TOOBIG == SQLITE_TOOBIG &&
                   DB_CONSTRAINT == SQLITE_CONSTRAINT && DB_MISMATCH == SQLITE_MISMATCH &&
                   DB_RANGE == SQLITE_RANGE && DB_ROW == SQLITE_ROW && DB_DONE == SQLITE_DONE,
               "DB_ codes are SQLite's");
_Static_assert(DB_CONSTRAINT_CHECK == SQLITE_CONSTRAINT_CHECK &&
                   DB_CONSTRAINT_FOREIGNKEY == SQLITE_CONSTRAINT_FOREIGNKEY &&
                   DB_CONSTRAINT_NOTNULL == SQLITE_CONSTRAINT_NOTNULL &&
                   DB_CONSTRAINT_PRIMARYKEY == SQLITE_CONSTRAINT_PRIMARYKEY &&
                   DB_CONSTRAINT_UNIQUE == SQLITE_CONSTRAINT_UNIQUE,
               "DB_ extended codes are SQLite's");
_Static_assert(DB_INTEGER == SQLITE_INTEGER && DB_FLOAT == SQLITE_FLOAT &&
                   DB_TEXT == SQLITE_TEXT && DB_BLOB == SQLITE_BLOB && DB_NULL == SQLITE_NULL,
               "DB_ column types are SQLite's");

/* Long enough to ride out a writer's normal transaction; store_transaction retries
 * beyond it. */
#define SQLITE_BUSY_TIMEOUT_MS 5000

struct sqlite_db {
  struct db base;
  sqlite3 *h;
};

struct sqlite_stmt {
  struct db_stmt base;
  sqlite3_stmt *h;
};

static sqlite3 *H(struct db *db) { return ((struct sqlite_db *)db)->h; }
static sqlite3_stmt *S(struct db_stmt *st) { return ((struct sqlite_stmt *)st)->h; }

static void sq_close(struct db *db) {
  if (sqlite3_close(H(db)) != SQLITE_OK)
    fprintf(stderr, "opforge: store: close: %s\n", sqlite3_errmsg(H(db)));
  free(db);
}

static int sq_exec(struct db *db, const char *sql) {
  return sqlite3_exec(H(db), sql, NULL, NULL, NULL);
}

/* One writer at a time: every transaction is serializable here. */
static int sq_begin(struct db *db, bool serializable) {
  (void)serializable;
  return sq_exec(db, "BEGIN IMMEDIATE");
}

static int sq_prepare(struct db *db, const char *sql, struct db_stmt **ret) {
  struct sqlite_stmt *st = calloc(1, sizeof *st);
  if (!st)
    return DB_NOMEM;
  int rc = sqlite3_prepare_v3(H(db), sql, -1, SQLITE_PREPARE_PERSISTENT, &st->h, NULL);
  if (rc != SQLITE_OK) {
    free(st);
    return rc;
  }
  st->base.db = db;
  st->base.sql = sql;
  *ret = &st->base;
  return DB_OK;
}

static void sq_finalize(struct db_stmt *st) {
  sqlite3_finalize(S(st));
  free(st);
}

static int sq_step(struct db_stmt *st) { return sqlite3_step(S(st)); }
static void sq_reset(struct db_stmt *st) {
  sqlite3_reset(S(st));
  sqlite3_clear_bindings(S(st));
}
static int sq_bind_int64(struct db_stmt *st, int i, int64_t v) {
  return sqlite3_bind_int64(S(st), i, v);
}
static int sq_bind_double(struct db_stmt *st, int i, double v) {
  return sqlite3_bind_double(S(st), i, v);
}
static int sq_bind_text(struct db_stmt *st, int i, const char *t) {
  return sqlite3_bind_text(S(st), i, t, -1, SQLITE_STATIC);
}
static int sq_bind_null(struct db_stmt *st, int i) { return sqlite3_bind_null(S(st), i); }
static int sq_param_count(struct db_stmt *st) { return sqlite3_bind_parameter_count(S(st)); }
static int sq_column_count(struct db_stmt *st) { return sqlite3_column_count(S(st)); }
static int sq_column_type(struct db_stmt *st, int c) { return sqlite3_column_type(S(st), c); }
static int64_t sq_column_int64(struct db_stmt *st, int c) { return sqlite3_column_int64(S(st), c); }
static double sq_column_double(struct db_stmt *st, int c) { return sqlite3_column_double(S(st), c); }
static const char *sq_column_text(struct db_stmt *st, int c) {
  return (const char *)sqlite3_column_text(S(st), c);
}
static const char *sq_column_name(struct db_stmt *st, int c) { return sqlite3_column_name(S(st), c); }
static bool sq_readonly(struct db_stmt *st) { return sqlite3_stmt_readonly(S(st)) != 0; }
static int64_t sq_changes(struct db *db) { return sqlite3_changes(H(db)); }
static bool sq_in_transaction(struct db *db) { return !sqlite3_get_autocommit(H(db)); }
static const char *sq_errmsg(struct db *db) { return sqlite3_errmsg(H(db)); }

static const struct db_driver sqlite_driver = {
    .backend = DB_BACKEND_SQLITE,
    .close = sq_close,
    .exec = sq_exec,
    .begin = sq_begin,
    .prepare = sq_prepare,
    .finalize = sq_finalize,
    .step = sq_step,
    .reset = sq_reset,
    .bind_int64 = sq_bind_int64,
    .bind_double = sq_bind_double,
    .bind_text = sq_bind_text,
    .bind_null = sq_bind_null,
    .param_count = sq_param_count,
    .column_count = sq_column_count,
    .column_type = sq_column_type,
    .column_int64 = sq_column_int64,
    .column_double = sq_column_double,
    .column_text = sq_column_text,
    .column_name = sq_column_name,
    .readonly = sq_readonly,
    .changes = sq_changes,
    .in_transaction = sq_in_transaction,
    .errmsg = sq_errmsg,
};

/* Foreign keys on; synchronous=NORMAL: a COMMIT does not sync the WAL itself;
 * store_transaction then waits for a group fsync (store/durable.c), so a committed
 * transaction survives a power loss while concurrent commits share one fdatasync. FULL
 * would sync once per commit: docs/bench-results.md compares the two. */
struct db *db_sqlite_open(const char *path, char *err, size_t errlen) {
  struct sqlite_db *db = calloc(1, sizeof *db);
  if (!db) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  db->base.drv = &sqlite_driver;
  int rc = sqlite3_open_v2(path, &db->h,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, SQLITE_BUSY_TIMEOUT_MS);
    rc = sqlite3_exec(db->h, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL", NULL, NULL,
                      NULL);
  }
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "%s", db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
    sqlite3_close(db->h);
    free(db);
    return NULL;
  }
  return &db->base;
}

void db_sqlite_busy_timeout(struct db *db, int ms) {
  if (db->drv == &sqlite_driver)
    sqlite3_busy_timeout(H(db), ms);
}

const char *db_errstr(int rc) {
  return rc == DB_UNAVAILABLE ? "the database server cannot be reached" : sqlite3_errstr(rc);
}
