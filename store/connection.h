/* Private to store/ (and its tests): the store handle, one database connection per
 * thread (store/db.h), and each connection's cache of prepared statements. */
#ifndef OPFORGE_STORE_CONNECTION_H
#define OPFORGE_STORE_CONNECTION_H

#include <pthread.h>
#include "store/db.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/claims_held.h"
#include "store/db.h"
#include "store/durable.h"
#include "store/status.h"

struct stmt_slot {
  const char *sql; /* cache key: the caller's string literal */
  struct db_stmt *stmt;
};

/* One database connection, used only by the thread named in owner. */
struct store_conn {
  struct store_conn *next; /* registry list of the store */
  struct db *db;
  pthread_t owner;
  bool in_tx; /* inside store_transaction: nested calls join it */
  struct stmt_slot *stmts;
  size_t nstmts;
  size_t cap;
};

/* "<host>:<pid>:<8 hex>" plus NUL fits (host names are at most 64 bytes). */
#define STORE_INSTANCE_MAX 96
/* ",H200,H100," plus NUL: every advertised device class between commas. */
#define STORE_DEVICES_TEXT_MAX (16 * 33 + 2)

/* This instance's row in servers (store/servers.c), kept to rewrite it on renewal. */
struct store_server_row {
  pthread_mutex_t lock; /* guards the fields below; never held across a database call */
  bool registered;
  char devices[STORE_DEVICES_TEXT_MAX]; /* what claims match; "," when none */
  char version[32];
  char started_at[32];
  char data_dir[4096]; /* the --data directory this server holds the lock of */
  char *gpus; /* JSON text, malloc'd */
  int slots;
};

/* The default lease of a claim (store_claims_configure changes it). */
#define STORE_CLAIM_LEASE_S 60

struct store {
  enum db_backend backend;
  char *path;     /* SQLite: DATA_DIR/opforge.db; PostgreSQL: the conninfo (may hold a
                     password: never log it, log display) */
  char *display;  /* path, or the conninfo with any password replaced by *** */
  char *password; /* from --store-password-file, or NULL */
  char instance[STORE_INSTANCE_MAX]; /* who this process's claims belong to (claims.c) */
  unsigned lease_s;                  /* a claim's lease, renewed by store_claims_renew */
  uint64_t generation; /* unique per store_open; keys the thread-local cache */
  pthread_mutex_t lock; /* guards conns */
  struct store_durable durable; /* group commit (store/durable.c) */
  struct store_conn *conns;
  int schema_version;
  struct claims_held held; /* the claims this process's workers run (claims_held.c) */
  struct store_server_row server; /* its own lock (store/servers.c) */
  atomic_bool full;        /* the last write failed for a full disk (cleared by the next
                              write that succeeds): /readyz says so */
};

/* A handle for DATA_DIR/opforge.db with no connection yet; NULL on failure (logged).
 * The caller owns it and frees it with store_handle_free. */
struct store *store_handle_new(const char *data_dir);

/* A handle for a PostgreSQL database (conninfo: a postgresql:// URL or libpq keywords;
 * password may be NULL) with no connection yet; NULL on failure (logged). The caller owns
 * it and frees it with store_handle_free. */
struct store *store_handle_new_pg(const char *conninfo, const char *password);

/* Closes every connection registered with s (finalizing its statements) and frees s.
 * Accepts NULL. Call it only after all threads that used s are done. */
void store_handle_free(struct store *s);

/* Records the outcome of a write: STORE_FULL marks the store full, STORE_OK clears it
 * (other statuses leave it). Thread-safe. */
void store_note_write(struct store *s, int status);

/* The calling thread's connection, opened and registered on first use. Owned by the
 * store. NULL on failure (logged). */
struct store_conn *store_conn_get(struct store *s);

/* The calling thread's connection, opened on first use; NULL on failure. Owned by the
 * store: do not close it. */
struct db *store_db(struct store *s);

/* A statement for sql on this thread's connection, prepared once and cached by the sql
 * pointer (pass string literals or static arrays). Returned reset and with bindings
 * cleared. Owned by the store: do not finalize it. NULL on failure (logged). */
struct db_stmt *store_stmt(struct store *s, const char *sql);

#endif
