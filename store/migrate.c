/* Schema migrations: applies each embedded schema/NNNN_name.sql (SQLite) or
 * schema/postgresql/NNNN_name.sql (PostgreSQL) not yet recorded. The two lists carry the
 * same numbers: a migration is one change, written once per dialect. */
#include "store/migrate.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/embedded.h"
#include "store/connection.h"
#include "store/transaction.h"
#include "store/util.h"

/* schema/NNNN_name.sql and schema/postgresql/NNNN_name.sql, in list order (generated
 * by tools/embed.c). */
extern const struct embedded_file opforge_migrations[];
extern const struct embedded_file opforge_migrations_pg[];

/* PostgreSQL: servers starting together migrate one at a time (a session lock, taken
 * before the first migration's snapshot, so each sees what the one before applied). */
static const char SQL_PG_LOCK[] = "SELECT pg_advisory_lock(7230571)";
static const char SQL_PG_UNLOCK[] = "SELECT pg_advisory_unlock(7230571)";

static const struct embedded_file *migrations_of(const struct store *s) {
  return s->backend == DB_BACKEND_SQLITE ? opforge_migrations : opforge_migrations_pg;
}

static const char SQL_CREATE[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)";
static const char SQL_MAX[] =
    "SELECT COUNT(*), COALESCE(MAX(version), 0) FROM schema_migrations";
static const char SQL_HAS[] = "SELECT 1 FROM schema_migrations WHERE version = ?1";
static const char SQL_RECORD[] =
    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)";

/* The number NNNN of "NNNN_name.sql"; -1 when the name does not have that form. */
static int migration_number(const char *name) {
  if (!isdigit((unsigned char)name[0]))
    return -1;
  char *end = NULL;
  errno = 0;
  long v = strtol(name, &end, 10);
  if (errno != 0 || *end != '_' || v <= 0 || v > INT_MAX)
    return -1;
  return (int)v;
}

/* The number of the last embedded migration, after checking that the list is strictly
 * increasing (the build lists them by hand); -1 with err set when it is not. */
static int last_embedded(const struct embedded_file *list, char *err, size_t errlen,
                         int *ret_count) {
  int last = 0;
  int count = 0;
  for (const struct embedded_file *f = list; f->name; f++, count++) {
    int v = migration_number(f->name);
    if (v <= last) {
      snprintf(err, errlen, "migration %s: name must be NNNN_name.sql, numbers increasing",
               f->name);
      return -1;
    }
    last = v;
  }
  *ret_count = count;
  return last;
}

/* Reads how many migrations are recorded and the highest one. */
static int recorded(struct store *s, int64_t *ret_count, int64_t *ret_max) {
  struct db_stmt *st = store_stmt(s, SQL_MAX);
  if (!st)
    return STORE_ERROR;
  int rc = st_step(st);
  if (rc != DB_ROW) {
    int status = st_fail(st, rc);
    st_done(st);
    return status;
  }
  *ret_count = db_column_int64(st, 0);
  *ret_max = db_column_int64(st, 1);
  st_done(st);
  return STORE_OK;
}

struct migration {
  const struct embedded_file *file;
  int version;
};

/* Re-checks inside the transaction: another process may have applied it meanwhile. */
static int apply_tx(struct store *s, void *arg) {
  const struct migration *m = arg;
  struct db_stmt *st = store_stmt(s, SQL_HAS);
  if (!st || db_bind_int(st, 1, m->version) != DB_OK)
    return STORE_ERROR;
  int rc = st_step(st);
  int status = rc == DB_ROW || rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  st_done(st);
  if (rc != DB_DONE)
    return status;
  rc = st_exec(store_db(s), m->file->data);
  if (rc != DB_OK)
    return st_is_busy(rc) ? STORE_BUSY : STORE_ERROR;
  char now[STORE_TIME_LEN];
  st = store_stmt(s, SQL_RECORD);
  if (!st || !store_time_now(now))
    return STORE_ERROR;
  if (db_bind_int(st, 1, m->version) != DB_OK || !st_bind_text(st, 2, m->file->name) ||
      !st_bind_text(st, 3, now)) {
    st_done(st);
    return STORE_ERROR;
  }
  rc = st_step(st);
  status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  st_done(st);
  return status;
}

/* Applies what is missing; the caller holds the migration lock where there is one. */
static int migrate_locked(struct store *s, char *err, size_t errlen) {
  int count = 0;
  int last = last_embedded(migrations_of(s), err, errlen, &count);
  if (last < 0)
    return STORE_ERROR;
  int64_t have = 0, max = 0;
  if (st_exec(store_db(s), SQL_CREATE) != DB_OK || recorded(s, &have, &max) != STORE_OK) {
    snprintf(err, errlen, "cannot read schema_migrations in %s", s->display);
    return STORE_ERROR;
  }
  if (max > last) {
    snprintf(err, errlen,
             "%s has schema version %lld, newer than this build's %d: a newer opforge "
             "migrated it; run that version (or newer) against it",
             s->display, (long long)max, last);
    return STORE_ERROR;
  }
  for (const struct embedded_file *f = migrations_of(s); f->name; f++) {
    struct migration m = {.file = f, .version = migration_number(f->name)};
    int status = store_transaction(s, apply_tx, &m);
    if (status != STORE_OK) {
      snprintf(err, errlen, "migration %s failed", f->name);
      return status;
    }
  }
  s->schema_version = last;
  return STORE_OK;
}

int store_migrate(struct store *s, char *err, size_t errlen) {
  if (s->backend == DB_BACKEND_SQLITE)
    return migrate_locked(s, err, errlen);
  if (st_exec(store_db(s), SQL_PG_LOCK) != DB_OK) {
    snprintf(err, errlen, "cannot take the migration lock in %s", s->display);
    return STORE_ERROR;
  }
  int status = migrate_locked(s, err, errlen);
  /* A lock this connection keeps would stall every other server's start: the open fails,
   * and closing the connection lets the lock go. */
  if (st_exec(store_db(s), SQL_PG_UNLOCK) != DB_OK && status == STORE_OK) {
    snprintf(err, errlen, "cannot release the migration lock in %s", s->display);
    status = STORE_ERROR;
  }
  return status;
}

bool store_migrations_current(struct store *s) {
  char err[256];
  int count = 0;
  int last = last_embedded(migrations_of(s), err, sizeof err, &count);
  int64_t have = 0, max = 0;
  return last >= 0 && recorded(s, &have, &max) == STORE_OK && have >= count && max == last;
}
