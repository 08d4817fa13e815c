/* The store handle: one database connection per thread and its statement cache. */
#include "store/connection.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ids.h"
#include "store/fault.h"
#include "store/conninfo.h"
#include "store/util.h"

/* Per-thread cache of this thread's connection for recently used stores. A store is
 * identified by its generation, never reused in a process, so entries left behind by a
 * closed store can never match a new one that happens to get the same address. A
 * connection evicted from here is found again through the store's registry. */
#define TL_SLOTS 16
struct tl_slot {
  uint64_t generation;
  struct store_conn *conn;
};
static _Thread_local struct tl_slot tl_cache[TL_SLOTS];
static _Thread_local unsigned tl_next;

static atomic_uint_fast64_t next_generation = 1;

static struct store_conn *tl_lookup(uint64_t generation) {
  for (int i = 0; i < TL_SLOTS; i++)
    if (tl_cache[i].generation == generation)
      return tl_cache[i].conn;
  return NULL;
}

static void tl_remember(uint64_t generation, struct store_conn *c) {
  unsigned slot = tl_next++ % TL_SLOTS;
  tl_cache[slot].generation = generation;
  tl_cache[slot].conn = c;
}

/* Finalizes the cached statements and closes the connection. Accepts NULL. */
static void conn_free(struct store_conn *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->nstmts; i++)
    db_finalize(c->stmts[i].stmt);
  free(c->stmts);
  db_close(c->db);
  free(c);
}

/* Opens a connection of the store's backend; caller owns it (conn_free). */
static struct store_conn *conn_open(struct store *s) {
  struct store_conn *c = st_calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->owner = pthread_self();
  char err[512] = "injected fault";
  if (!store_fault())
    c->db = s->backend == DB_BACKEND_SQLITE ? db_sqlite_open(s->path, err, sizeof err)
                                            : db_pg_open(s->path, s->password, err, sizeof err);
  if (!c->db) {
    store_log("open %s: %s", s->display, err);
    free(c);
    return NULL;
  }
  return c;
}

/* A thread that has lost its cache entry gets its registered connection back. pthread
 * ids are reused after a thread exits; the new thread then inherits the dead one's
 * connection, which is safe (nobody else uses it) and keeps the registry from growing. */
struct store_conn *store_conn_get(struct store *s) {
  struct store_conn *c = tl_lookup(s->generation);
  if (c)
    return c;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&s->lock);
  for (c = s->conns; c; c = c->next)
    if (pthread_equal(c->owner, self))
      break;
  pthread_mutex_unlock(&s->lock);
  if (!c) {
    c = conn_open(s);
    if (!c)
      return NULL;
    pthread_mutex_lock(&s->lock);
    c->next = s->conns;
    s->conns = c;
    pthread_mutex_unlock(&s->lock);
  }
  tl_remember(s->generation, c);
  return c;
}

struct db *store_db(struct store *s) {
  struct store_conn *c = store_conn_get(s);
  return c ? c->db : NULL;
}

/* The statement for sql on connection c, from the cache or newly prepared. */
static struct db_stmt *conn_stmt(struct store_conn *c, const char *sql) {
  if (store_fault()) {
    store_log("injected fault (%.60s)", sql);
    return NULL;
  }
  for (size_t i = 0; i < c->nstmts; i++) {
    if (c->stmts[i].sql == sql) {
      st_done(c->stmts[i].stmt);
      return c->stmts[i].stmt;
    }
  }
  if (c->nstmts == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    struct stmt_slot *grown = st_realloc(c->stmts, cap * sizeof *grown);
    if (!grown)
      return NULL;
    c->stmts = grown;
    c->cap = cap;
  }
  struct db_stmt *stmt = NULL;
  int rc = db_prepare(c->db, sql, &stmt);
  if (rc != DB_OK) {
    store_log("prepare: %s (%.60s)", rc == DB_NOMEM ? "out of memory" : db_errmsg(c->db), sql);
    return NULL;
  }
  c->stmts[c->nstmts++] = (struct stmt_slot){.sql = sql, .stmt = stmt};
  return stmt;
}

struct db_stmt *store_stmt(struct store *s, const char *sql) {
  struct store_conn *c = store_conn_get(s);
  return c ? conn_stmt(c, sql) : NULL;
}

void store_note_write(struct store *s, int status) {
  if (status == STORE_FULL)
    atomic_store(&s->full, true);
  else if (status == STORE_OK)
    atomic_store(&s->full, false);
}

/* The instance id: the host (claims of this host are stale once this process holds the
 * data directory's lock), the pid (for people reading the table) and a random part (pids
 * are reused). */
static void instance_id_new(char out[STORE_INSTANCE_MAX]) {
  char host[65] = "", uuid[ID_LEN + 1];
  if (gethostname(host, sizeof host - 1) != 0 || !host[0])
    snprintf(host, sizeof host, "localhost");
  for (char *c = host; *c; c++)
    if (*c == ':')
      *c = '_';
  id_new(uuid);
  snprintf(out, STORE_INSTANCE_MAX, "%s:%ld:%.8s", host, (long)getpid(), uuid);
}

/* A handle with its path and display set; the rest initialized. NULL on failure. */
static struct store *handle_new(enum db_backend backend, char *path, char *display,
                                const char *password) {
  struct store *s = st_calloc(1, sizeof *s);
  char *password_copy = password ? st_strdup(password) : NULL;
  if (!s || !path || !display || (password && !password_copy)) {
    free(s);
    free(path);
    free(display);
    free(password_copy);
    return NULL;
  }
  s->backend = backend;
  s->path = path;
  s->display = display;
  s->password = password_copy;
  instance_id_new(s->instance);
  s->lease_s = STORE_CLAIM_LEASE_S;
  snprintf(s->server.devices, sizeof s->server.devices, ",");
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->server.lock, NULL);
  store_durable_init(&s->durable);
  claims_held_init(&s->held);
  atomic_init(&s->full, false);
  s->generation = atomic_fetch_add(&next_generation, 1);
  return s;
}

struct store *store_handle_new(const char *data_dir) {
  size_t len = strlen(data_dir) + sizeof "/opforge.db";
  char *path = st_malloc(len);
  if (path)
    snprintf(path, len, "%s/opforge.db", data_dir);
  return handle_new(DB_BACKEND_SQLITE, path, path ? st_strdup(path) : NULL, NULL);
}

struct store *store_handle_new_pg(const char *conninfo, const char *password) {
  return handle_new(DB_BACKEND_POSTGRESQL, st_strdup(conninfo), store_redact(conninfo),
                    password);
}

void store_handle_free(struct store *s) {
  if (!s)
    return;
  struct store_conn *c = s->conns;
  while (c) {
    struct store_conn *next = c->next;
    conn_free(c);
    c = next;
  }
  store_durable_clear(&s->durable);
  claims_held_clear(&s->held);
  pthread_mutex_destroy(&s->lock);
  pthread_mutex_destroy(&s->server.lock);
  free(s->server.gpus);
  free(s->path);
  free(s->display);
  if (s->password)
    explicit_bzero(s->password, strlen(s->password));
  free(s->password);
  free(s);
}
