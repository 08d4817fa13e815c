/* The store's unit suites on either backend: see tests/unit/store_backend.h. */
#include "tests/unit/store_backend.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <libpq-fe.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"

/* The marker file that ties a directory to its database (PostgreSQL mode). */
#define MARKER "pg-database"

bool test_pg(void) {
  const char *admin = getenv("OPFORGE_TEST_PG");
  return admin && *admin;
}

void test_sqlite_only(const char *why) {
  if (!test_pg())
    return;
  fprintf(stderr, "skipped under PostgreSQL: %s\n", why);
  skip();
}

/* FNV-1a of text: the same directory text always gives the same database name. */
static unsigned long long fnv1a(const char *text) {
  unsigned long long h = 1469598103934665603ULL;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return h;
}

/* The name of dir's database, from dir's text as given (tests pass the same string each
 * time), into name (64 bytes). */
static void database_name(const char *dir, char name[64]) {
  snprintf(name, 64, "opf_unit_%016llx", fnv1a(dir));
}

/* libpq prints notices (DROP ... IF EXISTS of nothing) to stderr; the tests do not. */
static void quiet_notices(void *arg, const char *message) {
  (void)arg, (void)message;
}

/* Appends " key='value'" to out (len bytes) with libpq's quoting (\ and ' escaped);
 * fails the test when it does not fit. */
static void append_keyword(char *out, size_t len, const char *key, const char *value) {
  size_t n = strlen(out);
  int w = snprintf(out + n, len - n, "%s%s='", n ? " " : "", key);
  if (w < 0 || (size_t)w >= len - n)
    fail_msg("store_backend: conninfo too long");
  n += (size_t)w;
  for (const char *p = value; *p; p++) {
    if (n + 3 >= len)
      fail_msg("store_backend: conninfo too long");
    if (*p == '\'' || *p == '\\')
      out[n++] = '\\';
    out[n++] = *p;
  }
  if (n + 2 > len)
    fail_msg("store_backend: conninfo too long");
  out[n++] = '\'';
  out[n] = '\0';
}

/* The admin conninfo of OPFORGE_TEST_PG (a URL or keywords) with its database replaced
 * by name (NULL: kept), as libpq keywords, into out (len bytes). */
static void conninfo_for(const char *name, char *out, size_t len) {
  const char *admin = getenv("OPFORGE_TEST_PG");
  char *why = NULL;
  PQconninfoOption *opts = PQconninfoParse(admin, &why);
  if (!opts)
    fail_msg("store_backend: OPFORGE_TEST_PG: %s", why ? why : "out of memory");
  out[0] = '\0';
  for (PQconninfoOption *o = opts; o->keyword; o++)
    if (o->val && *o->val && !(name && strcmp(o->keyword, "dbname") == 0))
      append_keyword(out, len, o->keyword, o->val);
  if (name)
    append_keyword(out, len, "dbname", name);
  PQconninfoFree(opts);
}

/* A connection to database name (NULL: the admin database), notices silenced. Fails the
 * test when it cannot connect. The caller owns it (PQfinish). */
static PGconn *connect_to(const char *name) {
  char conninfo[2048];
  conninfo_for(name, conninfo, sizeof conninfo);
  PGconn *conn = PQconnectdb(conninfo);
  if (PQstatus(conn) != CONNECTION_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
    PQfinish(conn);
    fail_msg("store_backend: cannot connect to database %s: %s", name ? name : "(admin)", msg);
  }
  PQsetNoticeProcessor(conn, quiet_notices, NULL);
  return conn;
}

/* Runs sql on the admin database; fails the test when it does not succeed. */
static void admin_exec(const char *sql) {
  PGconn *conn = connect_to(NULL);
  PGresult *res = PQexec(conn, sql);
  if (PQresultStatus(res) != PGRES_COMMAND_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
    PQclear(res);
    PQfinish(conn);
    fail_msg("store_backend: %s: %s", sql, msg);
  }
  PQclear(res);
  PQfinish(conn);
}

/* Drops database name when it exists, closing any connection still open to it (a test
 * that failed half-way may have left a store open; WITH (FORCE) needs PostgreSQL 13). */
static void drop_database(const char *name) {
  char sql[128];
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
  admin_exec(sql);
}

/* Makes sure dir (created when missing) has its database: without the marker file, any
 * database of that name (an earlier run's) is dropped, an empty one created and the
 * marker written. Its name goes into name (64 bytes). */
static void ensure_database(const char *dir, char name[64]) {
  database_name(dir, name);
  char marker[PATH_MAX];
  snprintf(marker, sizeof marker, "%s/" MARKER, dir);
  if (access(marker, F_OK) == 0)
    return;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    fail_msg("store_backend: mkdir %s: %s", dir, strerror(errno));
  drop_database(name);
  char sql[128];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  admin_exec(sql);
  FILE *f = fopen(marker, "w");
  if (!f || fprintf(f, "%s\n", name) < 0 || fclose(f) != 0)
    fail_msg("store_backend: cannot write %s", marker);
}

int test_store_try_open(const char *dir, struct store **ret_store, char *err, size_t errlen) {
  if (!test_pg())
    return store_open(dir, ret_store, err, errlen);
  char name[64], conninfo[2048];
  ensure_database(dir, name);
  conninfo_for(name, conninfo, sizeof conninfo);
  return store_open_pg(conninfo, NULL, ret_store, err, errlen);
}

struct store *test_store_open(const char *dir) {
  struct store *s = NULL;
  char err[256] = "";
  int rc = test_store_try_open(dir, &s, err, sizeof err);
  if (rc != STORE_OK)
    fail_msg("store_open (%s): %d %s", test_pg() ? "postgresql" : "sqlite", rc, err);
  return s;
}

/* nftw callback of test_store_remove: removes one entry, children first. */
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

void test_store_remove(const char *dir) {
  nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  if (!test_pg())
    return;
  char name[64];
  database_name(dir, name);
  drop_database(name);
}

/* A read-write connection to dir/opforge.db (created when missing); fails the test when
 * it does not open. The caller owns it (sqlite3_close). */
static sqlite3 *sqlite_raw(const char *dir) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/opforge.db", dir);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
      SQLITE_OK) {
    sqlite3_close(db);
    fail_msg("store_backend: cannot open %s", path);
  }
  return db;
}

/* Runs sql on dir's PostgreSQL database and checks it gave want (PGRES_TUPLES_OK with
 * at least one row, or PGRES_COMMAND_OK). The caller owns the result (PQclear). */
static PGresult *pg_raw(const char *dir, const char *sql, ExecStatusType want) {
  char name[64];
  ensure_database(dir, name);
  PGconn *conn = connect_to(name);
  PGresult *res = PQexec(conn, sql);
  ExecStatusType got = PQresultStatus(res);
  bool ok = got == want || (want == PGRES_COMMAND_OK && got == PGRES_TUPLES_OK);
  if (!ok || (want == PGRES_TUPLES_OK && PQntuples(res) < 1)) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ok ? "no row" : PQerrorMessage(conn));
    PQclear(res);
    PQfinish(conn);
    fail_msg("store_backend: %s: %s", sql, msg);
  }
  PQfinish(conn); /* the result outlives its connection */
  return res;
}

/* Steps sql on db to its first row; fails the test when there is none. The caller owns
 * the statement (sqlite3_finalize). */
static sqlite3_stmt *sqlite_first_row(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
    fail_msg("store_backend: %s: %s", sql, sqlite3_errmsg(db));
  return st;
}

long long test_raw_count(const char *dir, const char *sql) {
  if (test_pg()) {
    PGresult *res = pg_raw(dir, sql, PGRES_TUPLES_OK);
    if (PQgetisnull(res, 0, 0))
      fail_msg("store_backend: %s: NULL", sql);
    long long v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
  }
  sqlite3 *db = sqlite_raw(dir);
  sqlite3_stmt *st = sqlite_first_row(db, sql);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

void test_raw_text(const char *dir, const char *sql, char *buf, size_t len) {
  if (test_pg()) {
    PGresult *res = pg_raw(dir, sql, PGRES_TUPLES_OK);
    if (PQgetisnull(res, 0, 0))
      fail_msg("store_backend: %s: NULL", sql);
    snprintf(buf, len, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return;
  }
  sqlite3 *db = sqlite_raw(dir);
  sqlite3_stmt *st = sqlite_first_row(db, sql);
  const char *text = (const char *)sqlite3_column_text(st, 0);
  if (!text)
    fail_msg("store_backend: %s: NULL", sql);
  snprintf(buf, len, "%s", text);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

void test_raw_exec(const char *dir, const char *sql) {
  if (test_pg()) {
    PQclear(pg_raw(dir, sql, PGRES_COMMAND_OK));
    return;
  }
  sqlite3 *db = sqlite_raw(dir);
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    sqlite3_close(db);
    fail_msg("store_backend: %s: %s", sql, copy);
  }
  sqlite3_close(db);
}
