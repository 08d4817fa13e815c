/* The store handle: open (creating and migrating the database), close, readiness. Two
 * backends (docs/architecture.md, "Store backends"): SQLite in the data directory, the
 * default, and PostgreSQL, which several servers share.
 * The records have their own headers: store/tasks.h, store/events.h,
 * store/candidates.h, store/tree_rows.h, store/steps.h and store/memory.h;
 * store/transaction.h runs a transaction, store/fault.h injects faults for tests. */
#ifndef OPFORGE_STORE_H
#define OPFORGE_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "store/status.h"

/* Opens (creating if needed) DATA_DIR/opforge.db in WAL mode and applies every embedded
 * migration not yet in schema_migrations. On failure writes a reason into err and
 * returns STORE_ERROR. The caller owns *ret_store and frees it with store_close. */
int store_open(const char *data_dir, struct store **ret_store, char *err, size_t errlen);

/* Connects to a PostgreSQL database (conninfo: a postgresql:// URL or libpq keywords;
 * password, when not NULL, overrides the URL's) and applies every migration not yet
 * recorded there, one server at a time. A database migrated further than this build
 * knows is refused. On failure writes a reason, without any password, into err and
 * returns STORE_ERROR. The caller owns *ret_store and frees it with store_close. */
int store_open_pg(const char *conninfo, const char *password, struct store **ret_store,
                  char *err, size_t errlen);

/* True when other servers may share the store (PostgreSQL): claims then belong to
 * instances, not hosts, and events of tasks run elsewhere arrive from the database. */
bool store_is_shared(const struct store *s);

/* "sqlite" or "postgresql". Static storage. */
const char *store_backend_name(const struct store *s);

/* Where the store is, for people: the SQLite file, or the PostgreSQL conninfo with its
 * password replaced by ***. Owned by the store. */
const char *store_display(const struct store *s);

/* Closes every per-thread connection and frees the store. Accepts NULL. Call it only
 * after all threads that used the store are done. */
void store_close(struct store *s);

/* True when the database is open and every embedded migration is recorded. */
bool store_ready(struct store *s);

/* Highest applied migration number (0 when none). */
int store_schema_version(struct store *s);

/* Space for writes: false, with a reason in why, when the last write failed because the
 * disk holding the database is full, or when less than STORE_MIN_FREE_BYTES (or, on a
 * disk smaller than 32 times that, a 32nd of it) are free on it now. */
#define STORE_MIN_FREE_BYTES (8u << 20)
bool store_has_space(struct store *s, char *why, size_t whylen);

#endif
