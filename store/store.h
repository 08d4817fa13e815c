/* The store handle: open (creating and migrating the database), close, readiness.
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
