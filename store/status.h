/* What every store function returns, and the opaque store handle. */
#ifndef OPFORGE_STORE_STATUS_H
#define OPFORGE_STORE_STATUS_H

/* Every store function returns one of these. */
enum store_status {
  STORE_OK = 0,
  STORE_NOT_FOUND = 1,   /* no such row */
  STORE_CONFLICT = 2,    /* the row is in a state that forbids the change */
  STORE_INVALID = 3,     /* an argument (cursor, status filter) is malformed */
  STORE_ERROR = -1,      /* database or allocation failure; logged once where it happened */
  STORE_BUSY = -2,       /* still locked after the busy retries: transient, retry later */
  STORE_CONSTRAINT = -3, /* SQLite refused the statement itself (a CHECK, NOT NULL or
                            trigger constraint, a type mismatch, a value too big): the
                            same call fails the same way again, so retrying is useless */
  STORE_FULL = -4,       /* the disk holding the database is full: nothing was written;
                            the same write succeeds once space is freed */
  STORE_UNAVAILABLE = -5, /* the database server (PostgreSQL) cannot be reached: nothing
                             was written; the next call connects again */
};

/* The store: one database (an SQLite file or a PostgreSQL database), one connection per
 * thread. store/store.h opens it. */
struct store;

#endif
