/* What every store function returns, and the opaque store handle. */
#ifndef OPFORGE_STORE_STATUS_H
#define OPFORGE_STORE_STATUS_H

/* Every store function returns one of these. */
enum store_status {
  STORE_OK = 0,
  STORE_NOT_FOUND = 1,   /* no such row */
  STORE_CONFLICT = 2,    /* the row is in a state that forbids the change */
  STORE_INVALID = 3,     /* an argument (cursor, status filter) is malformed */
  STORE_ERROR = -1,      /* SQLite or allocation failure; logged once where it happened */
  STORE_BUSY = -2,       /* still locked after the busy retries */
};

/* The store: one database file, one connection per thread. store/store.h opens it. */
struct store;

#endif
