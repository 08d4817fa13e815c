/* Opening and closing the store: the data directory or the PostgreSQL database, WAL
 * mode, migrations. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "store/connection.h"
#include "store/migrate.h"
#include "store/util.h"

/* WAL is a property of the database file, so it is set once here, not per connection. */
static bool set_wal(struct store *s, char *err, size_t errlen) {
  struct db_stmt *st = store_stmt(s, "PRAGMA journal_mode=WAL");
  if (!st) {
    snprintf(err, errlen, "cannot set WAL mode on %s", s->path);
    return false;
  }
  int rc = st_step(st);
  const char *mode = rc == DB_ROW ? (const char *)db_column_text(st, 0) : NULL;
  bool wal = mode && strcmp(mode, "wal") == 0;
  if (mode && !wal)
    store_log("journal mode is %s, not wal", mode);
  st_done(st);
  if (!wal)
    snprintf(err, errlen, "cannot set WAL mode on %s", s->path);
  return wal;
}

/* A start-up failure on a full disk says so, instead of SQLite's own words. */
static void explain_full_disk(struct store *s, char *err, size_t errlen) {
  char why[4096 + 200];
  if (!store_has_space(s, why, sizeof why))
    snprintf(err, errlen, "%s; nothing was changed", why);
}

/* Connects the handle's first connection, sets WAL (SQLite) and migrates; frees s and
 * fills err on failure. */
static int open_handle(struct store *s, struct store **ret_store, char *err, size_t errlen) {
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return STORE_ERROR;
  }
  if (!store_conn_get(s)) {
    snprintf(err, errlen, "cannot open %s", s->display);
    store_close(s);
    return STORE_ERROR;
  }
  if (s->backend != DB_BACKEND_SQLITE && db_exec(store_db(s), "SELECT 1") != DB_OK) {
    snprintf(err, errlen, "cannot connect to %s: %s", s->display, db_errmsg(store_db(s)));
    store_close(s);
    return STORE_ERROR;
  }
  bool wal = s->backend != DB_BACKEND_SQLITE || set_wal(s, err, errlen);
  if (!wal || store_migrate(s, err, errlen) != STORE_OK) {
    if (s->backend == DB_BACKEND_SQLITE)
      explain_full_disk(s, err, errlen);
    store_close(s);
    return STORE_ERROR;
  }
  *ret_store = s;
  return STORE_OK;
}

int store_open(const char *data_dir, struct store **ret_store, char *err, size_t errlen) {
  if (mkdir(data_dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot create %s: %s", data_dir, strerror(errno));
    return STORE_ERROR;
  }
  return open_handle(store_handle_new(data_dir), ret_store, err, errlen);
}

int store_open_pg(const char *conninfo, const char *password, struct store **ret_store,
                  char *err, size_t errlen) {
  return open_handle(store_handle_new_pg(conninfo, password), ret_store, err, errlen);
}

bool store_is_shared(const struct store *s) {
  return s->backend == DB_BACKEND_POSTGRESQL;
}

const char *store_backend_name(const struct store *s) {
  return s->backend == DB_BACKEND_SQLITE ? "sqlite" : "postgresql";
}

const char *store_display(const struct store *s) {
  return s->display;
}

void store_close(struct store *s) {
  store_handle_free(s);
}

/* Queries the database rather than trusting store_open's result, so /readyz notices a
 * database that has become unreadable. */
bool store_ready(struct store *s) {
  return s && store_migrations_current(s);
}

int store_schema_version(struct store *s) {
  return s ? s->schema_version : 0;
}

bool store_has_space(struct store *s, char *why, size_t whylen) {
  if (s->backend != DB_BACKEND_SQLITE) {
    if (!atomic_load(&s->full))
      return true;
    snprintf(why, whylen, "the PostgreSQL server refused the last write: its disk is full "
             "(SQLSTATE 53100); free space there (writes resume at once)");
    return false;
  }
  struct statvfs vfs;
  unsigned long long free_bytes = 0, least = STORE_MIN_FREE_BYTES;
  bool known = statvfs(s->path, &vfs) == 0;
  if (known) {
    free_bytes = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    unsigned long long share = (unsigned long long)vfs.f_blocks * vfs.f_frsize / 32;
    least = share < least ? share : least;  /* a small disk: a 32nd of it */
  }
  bool full = atomic_load(&s->full);
  if (!full && (!known || free_bytes >= least))
    return true;
  snprintf(why, whylen, "the disk holding the store (%s) is full: %s%llu KiB free; free some "
           "space (writes resume at once)", s->path,
           full ? "the last write failed, " : "", free_bytes >> 10);
  return false;
}
