/* The one transaction runner: db_begin ... COMMIT, retried while the database is busy. */
#include "store/transaction.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "store/connection.h"
#include "store/fault.h"
#include "store/util.h"

/* Each attempt already waits up to the connection's busy timeout inside SQLite; these
 * retries cover what that cannot (a busy COMMIT, a busy statement inside fn, WAL
 * recovery) and long lock holders. Backoff 5, 10, ... 250 ms: about 0.6 s of sleep over
 * the attempts. */
#define TX_ATTEMPTS 8
#define TX_BACKOFF_FIRST_MS 5
#define TX_BACKOFF_MAX_MS 250
/* PostgreSQL has no busy wait: concurrent serializable transactions that conflict fail
 * at once (SQLSTATE 40001) and are retried here, so it gets more attempts, and a random
 * part in each pause keeps the servers that collided from colliding again. */
#define TX_ATTEMPTS_PG 30

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    continue;
}

/* ROLLBACK is cleanup, so it bypasses fault injection. The database may already have
 * rolled back by itself after some errors; then there is nothing to do. */
static void rollback(struct store_conn *c) {
  if (!db_in_transaction(c->db))
    return;
  int rc = db_exec(c->db, "ROLLBACK");
  if (rc != DB_OK && rc != DB_UNAVAILABLE)
    store_log("rollback: %s", db_errmsg(c->db));
}

/* One attempt; returns fn's status, STORE_BUSY to retry, or STORE_ERROR. */
static int tx_attempt(struct store *s, struct store_conn *c, bool serializable, store_tx_fn fn,
                      void *arg) {
  int rc = store_fault() ? DB_NOMEM : db_begin(c->db, serializable);
  if (rc != DB_OK) {
    if (!st_is_busy(rc) && rc != DB_UNAVAILABLE)
      store_log("begin: %s", rc == DB_NOMEM ? "injected fault" : db_errmsg(c->db));
    return st_status(rc);
  }
  c->in_tx = true;
  int status = fn(s, arg);
  c->in_tx = false;
  if (status == STORE_OK) {
    rc = st_exec(c->db, "COMMIT");
    if (rc == DB_OK)
      return STORE_OK;
    status = st_status(rc); /* a deferred constraint fails at COMMIT */
  }
  rollback(c);
  return status;
}

/* A call made while this thread's connection is already inside a transaction joins it:
 * fn runs directly and the outer runner commits, rolls back or retries the whole. A
 * committed transaction is durable (synced to disk, store/durable.c) when this returns. */
/* The runner of both isolations. */
static int run(struct store *s, bool serializable, store_tx_fn fn, void *arg) {
  struct store_conn *c = store_conn_get(s);
  if (!c)
    return STORE_ERROR;
  if (c->in_tx)
    return fn(s, arg);
  long delay = TX_BACKOFF_FIRST_MS;
  int attempts = s->backend == DB_BACKEND_SQLITE ? TX_ATTEMPTS : TX_ATTEMPTS_PG;
  unsigned seed = (unsigned)(uintptr_t)c ^ (unsigned)time(NULL);
  for (int attempt = 1;; attempt++) {
    int status = tx_attempt(s, c, serializable, fn, arg);
    store_note_write(s, status);
    if (status == STORE_OK)
      return s->backend == DB_BACKEND_SQLITE ? store_durable_wait(&s->durable, s->path)
                                             : STORE_OK; /* durable before it returns */
    if (status != STORE_BUSY)
      return status;
    if (attempt == attempts)
      break;
    sleep_ms(s->backend == DB_BACKEND_SQLITE ? delay : delay / 2 + rand_r(&seed) % (delay / 2 + 1));
    delay = delay * 2 > TX_BACKOFF_MAX_MS ? TX_BACKOFF_MAX_MS : delay * 2;
  }
  store_log("database still busy after %d attempts", attempts);
  return STORE_BUSY;
}

int store_transaction(struct store *s, store_tx_fn fn, void *arg) {
  return run(s, true, fn, arg);
}

int store_transaction_rc(struct store *s, store_tx_fn fn, void *arg) {
  return run(s, false, fn, arg);
}
