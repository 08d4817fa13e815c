/* The one transaction runner of the store: BEGIN ... COMMIT (store/db.h, db_begin),
 * retried while the database is busy. */
#ifndef OPFORGE_STORE_TRANSACTION_H
#define OPFORGE_STORE_TRANSACTION_H

#include "store/status.h"

/* Runs fn inside a write transaction (SQLite: BEGIN IMMEDIATE, one writer at a time;
 * PostgreSQL: SERIALIZABLE, a conflict retried as busy) on this thread's connection. A busy database
 * is retried (with backoff) up to the busy budget; fn may run more than once, so it must
 * have no effects outside the database. fn returns a store_status; anything but STORE_OK
 * rolls back and is returned. A call made inside fn joins the running transaction.
 * STORE_OK means committed and durable: the WAL is synced (group commit, store/durable.c)
 * before this returns, so the commit survives a power loss; STORE_ERROR after COMMIT
 * means the sync failed (committed, maybe not durable). PostgreSQL's COMMIT is durable
 * itself. */
typedef int (*store_tx_fn)(struct store *s, void *arg);
int store_transaction(struct store *s, store_tx_fn fn, void *arg);

/* store_transaction for the hot transactions of the workers (a claim, a step's commit, a
 * finish): on PostgreSQL they run READ COMMITTED, so the memory rows that every step of
 * every server updates are waited for, not failed and retried as serialization
 * conflicts. That is safe because their writes are atomic updates (n = n + 1), upserts,
 * and rows of their own task, which they lock first (the task's state read and event
 * append lock its row: store/tasks_state.c, store/events.c). SQLite: the same as
 * store_transaction (one writer). */
int store_transaction_rc(struct store *s, store_tx_fn fn, void *arg);

#endif
