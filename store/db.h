/* Private to store/: the one database interface the store's records are written against
 * (docs/architecture.md, "Store backends"). Two drivers implement it: store/db_sqlite.c
 * (the embedded default) and store/db_pg.c (PostgreSQL through libpq). A record's SQL
 * sits next to its use and is the same text for both; the driver of PostgreSQL rewrites
 * only the parameter markers (?N becomes $N), and the few places where the dialects
 * differ ask db_dialect for the named difference.
 *
 * The calls mirror SQLite's: prepare a statement once, bind, step through its rows, read
 * columns, reset. The result codes are SQLite's numbers under DB_ names, extended codes
 * included, plus DB_UNAVAILABLE for a database server that cannot be reached. */
#ifndef OPFORGE_STORE_DB_H
#define OPFORGE_STORE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Result codes (the values are SQLite's, which store/db_sqlite.c checks at build time). */
enum {
  DB_OK = 0,
  DB_ERROR = 1,
  DB_BUSY = 5,
  DB_LOCKED = 6,
  DB_NOMEM = 7,
  DB_FULL = 13,
  DB_TOOBIG = 18,
  DB_CONSTRAINT = 19,
  DB_MISMATCH = 20,
  DB_RANGE = 25,
  DB_ROW = 100,
  DB_DONE = 101,
  DB_CONSTRAINT_CHECK = DB_CONSTRAINT | (1 << 8),
  DB_CONSTRAINT_FOREIGNKEY = DB_CONSTRAINT | (3 << 8),
  DB_CONSTRAINT_NOTNULL = DB_CONSTRAINT | (5 << 8),
  DB_CONSTRAINT_PRIMARYKEY = DB_CONSTRAINT | (6 << 8),
  DB_CONSTRAINT_UNIQUE = DB_CONSTRAINT | (8 << 8),
  /* Not an SQLite code: the database server is down or the connection to it broke. The
   * next call tries to connect again. */
  DB_UNAVAILABLE = 1000,
};

/* Column types (SQLite's fundamental types). */
enum { DB_INTEGER = 1, DB_FLOAT = 2, DB_TEXT = 3, DB_BLOB = 4, DB_NULL = 5 };

enum db_backend { DB_BACKEND_SQLITE, DB_BACKEND_POSTGRESQL };

struct db;      /* one connection, used by one thread */
struct db_stmt; /* a prepared statement of one connection */

/* The driver of a connection: every call below dispatches through it. */
struct db_driver {
  enum db_backend backend;
  void (*close)(struct db *db);
  int (*exec)(struct db *db, const char *sql);
  int (*begin)(struct db *db, bool serializable);
  int (*prepare)(struct db *db, const char *sql, struct db_stmt **ret_stmt);
  void (*finalize)(struct db_stmt *st);
  int (*step)(struct db_stmt *st);
  void (*reset)(struct db_stmt *st);
  int (*bind_int64)(struct db_stmt *st, int idx, int64_t v);
  int (*bind_double)(struct db_stmt *st, int idx, double v);
  int (*bind_text)(struct db_stmt *st, int idx, const char *borrowed);
  int (*bind_null)(struct db_stmt *st, int idx);
  int (*param_count)(struct db_stmt *st);
  int (*column_count)(struct db_stmt *st);
  int (*column_type)(struct db_stmt *st, int col);
  int64_t (*column_int64)(struct db_stmt *st, int col);
  double (*column_double)(struct db_stmt *st, int col);
  const char *(*column_text)(struct db_stmt *st, int col);
  const char *(*column_name)(struct db_stmt *st, int col);
  bool (*readonly)(struct db_stmt *st);
  int64_t (*changes)(struct db *db);
  bool (*in_transaction)(struct db *db);
  const char *(*errmsg)(struct db *db);
};

/* The common head of a driver's connection and statement structs. */
struct db {
  const struct db_driver *drv;
};
struct db_stmt {
  struct db *db;
  const char *sql; /* the caller's text, borrowed (string literals) */
};

/* Opens the SQLite file at path (created when missing). NULL on failure, with the reason
 * in err. The caller owns the connection (db_close). */
struct db *db_sqlite_open(const char *path, char *err, size_t errlen);

/* Tests only: the SQLite connection's busy timeout (5000 ms when opened). */
void db_sqlite_busy_timeout(struct db *db, int ms);

/* Opens a PostgreSQL connection from a libpq URL or keyword string; password, when not
 * NULL, overrides any in the URL. NULL on failure, with libpq's reason (which never holds
 * the password) in err. The caller owns the connection (db_close). */
struct db *db_pg_open(const char *conninfo, const char *password, char *err, size_t errlen);

static inline enum db_backend db_backend(const struct db *db) { return db->drv->backend; }
static inline void db_close(struct db *db) { if (db) db->drv->close(db); }
/* Runs trusted SQL text, one or more statements, with no parameters and no rows. */
static inline int db_exec(struct db *db, const char *sql) { return db->drv->exec(db, sql); }
/* Starts a write transaction: SQLite's BEGIN IMMEDIATE (the one writer), PostgreSQL's
 * BEGIN ISOLATION LEVEL SERIALIZABLE (a conflict is reported as DB_BUSY, to retry), or,
 * when serializable is false, READ COMMITTED (a row another transaction updates is
 * waited for and then read as it committed: for transactions whose writes are atomic
 * updates and rows they lock first). */
static inline int db_begin(struct db *db, bool serializable) {
  return db->drv->begin(db, serializable);
}
/* Prepares sql (kept borrowed: pass a string literal or static array). */
static inline int db_prepare(struct db *db, const char *sql, struct db_stmt **ret) {
  return db->drv->prepare(db, sql, ret);
}
static inline void db_finalize(struct db_stmt *st) { if (st) st->db->drv->finalize(st); }
/* DB_ROW while there is a row to read, then DB_DONE; anything else is a failure. */
static inline int db_step(struct db_stmt *st) { return st->db->drv->step(st); }
/* Back to the start, with every binding cleared. */
static inline void db_reset(struct db_stmt *st) { st->db->drv->reset(st); }
static inline int db_bind_int64(struct db_stmt *st, int idx, int64_t v) {
  return st->db->drv->bind_int64(st, idx, v);
}
static inline int db_bind_int(struct db_stmt *st, int idx, int v) {
  return st->db->drv->bind_int64(st, idx, v);
}
static inline int db_bind_double(struct db_stmt *st, int idx, double v) {
  return st->db->drv->bind_double(st, idx, v);
}
/* The text is borrowed: it must stay valid until the statement is reset. */
static inline int db_bind_text(struct db_stmt *st, int idx, const char *text) {
  return st->db->drv->bind_text(st, idx, text);
}
static inline int db_bind_null(struct db_stmt *st, int idx) { return st->db->drv->bind_null(st, idx); }
static inline int db_bind_parameter_count(struct db_stmt *st) {
  return st->db->drv->param_count(st);
}
static inline int db_column_count(struct db_stmt *st) { return st->db->drv->column_count(st); }
static inline int db_column_type(struct db_stmt *st, int col) {
  return st->db->drv->column_type(st, col);
}
static inline int64_t db_column_int64(struct db_stmt *st, int col) {
  return st->db->drv->column_int64(st, col);
}
static inline int db_column_int(struct db_stmt *st, int col) {
  return (int)st->db->drv->column_int64(st, col);
}
static inline double db_column_double(struct db_stmt *st, int col) {
  return st->db->drv->column_double(st, col);
}
/* The text of the current row's column, NULL for NULL; valid until the next step or
 * reset. */
static inline const char *db_column_text(struct db_stmt *st, int col) {
  return st->db->drv->column_text(st, col);
}
static inline const char *db_column_name(struct db_stmt *st, int col) {
  return st->db->drv->column_name(st, col);
}
static inline bool db_stmt_readonly(struct db_stmt *st) { return st->db->drv->readonly(st); }
static inline const char *db_sql(const struct db_stmt *st) { return st->sql; }
static inline struct db *db_handle(struct db_stmt *st) { return st->db; }
/* Rows changed by the connection's last INSERT, UPDATE or DELETE. */
static inline int64_t db_changes(struct db *db) { return db->drv->changes(db); }
static inline bool db_in_transaction(struct db *db) { return db->drv->in_transaction(db); }
/* The connection's last error message (owned by the connection). */
static inline const char *db_errmsg(struct db *db) { return db->drv->errmsg(db); }

/* A short English name of a result code. Static storage. */
const char *db_errstr(int rc);

#endif
