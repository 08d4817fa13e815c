/* The LISTEN thread of a PostgreSQL store: its own connection, poll on its socket and a
 * stop pipe, and a reconnect once a second while the server is away. */
#include "store/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/connection.h"
#include "store/util.h"

#define LISTEN_RETRY_MS 1000

struct store_listener {
  struct store *s;
  store_heard_fn heard;
  void *ctx;
  int stop_pipe[2];
  atomic_bool stopping;
  pthread_t thread;
};

static void ignore_notice(void *arg, const char *message) {
  (void)arg, (void)message;
}

/* A connection that LISTENs on both channels, or NULL (the caller retries). */
static PGconn *connect_listening(struct store_listener *l) {
  const char *keys[] = {"application_name", "connect_timeout", "dbname", "password", NULL};
  const char *values[] = {"opforge-listener", "10", l->s->path, l->s->password, NULL};
  PGconn *conn = PQconnectdbParams(keys, values, 1);
  if (!conn || PQstatus(conn) != CONNECTION_OK) {
    PQfinish(conn);
    return NULL;
  }
  PQsetNoticeProcessor(conn, ignore_notice, NULL);
  PGresult *res = PQexec(conn, "LISTEN " STORE_CHANNEL_EVENTS "; LISTEN " STORE_CHANNEL_QUEUE);
  bool ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  if (!ok || PQsetnonblocking(conn, 1) != 0) {
    PQfinish(conn);
    return NULL;
  }
  return conn;
}

/* Waits up to ms for the socket (fd, or none when -1) or the stop pipe; true while not
 * stopping. */
static bool wait_readable(struct store_listener *l, int fd, int ms) {
  struct pollfd fds[2] = {{.fd = l->stop_pipe[0], .events = POLLIN},
                          {.fd = fd, .events = POLLIN}};
  poll(fds, fd >= 0 ? 2 : 1, ms);
  return !atomic_load(&l->stopping);
}

/* Hands every notification received to heard; false when the connection broke. */
static bool drain(struct store_listener *l, PGconn *conn) {
  if (!PQconsumeInput(conn) || PQstatus(conn) != CONNECTION_OK)
    return false;
  PGnotify *n;
  while ((n = PQnotifies(conn)) != NULL) {
    l->heard(l->ctx, n->relname, n->extra ? n->extra : "");
    PQfreemem(n);
  }
  return true;
}

static void *listener_main(void *arg) {
  struct store_listener *l = arg;
  bool was_connected = false;
  while (!atomic_load(&l->stopping)) {
    PGconn *conn = connect_listening(l);
    if (!conn) {
      wait_readable(l, -1, LISTEN_RETRY_MS);
      continue;
    }
    if (was_connected)
      l->heard(l->ctx, STORE_CHANNEL_RECONNECTED, "");
    was_connected = true;
    while (wait_readable(l, PQsocket(conn), 1000) && drain(l, conn))
      continue;
    PQfinish(conn);
  }
  return NULL;
}

int store_listener_start(struct store *s, store_heard_fn heard, void *ctx,
                         struct store_listener **ret_listener) {
  *ret_listener = NULL;
  if (s->backend == DB_BACKEND_SQLITE)
    return STORE_OK;
  struct store_listener *l = st_calloc(1, sizeof *l);
  if (!l)
    return STORE_ERROR;
  l->s = s;
  l->heard = heard;
  l->ctx = ctx;
  atomic_init(&l->stopping, false);
  if (pipe2(l->stop_pipe, O_CLOEXEC) != 0) {
    store_log("listener: pipe: %s", strerror(errno));
    free(l);
    return STORE_ERROR;
  }
  if (pthread_create(&l->thread, NULL, listener_main, l) != 0) {
    store_log("listener: cannot start its thread");
    close(l->stop_pipe[0]);
    close(l->stop_pipe[1]);
    free(l);
    return STORE_ERROR;
  }
  *ret_listener = l;
  return STORE_OK;
}

void store_listener_stop(struct store_listener *l) {
  if (!l)
    return;
  atomic_store(&l->stopping, true);
  ssize_t w = write(l->stop_pipe[1], "x", 1);
  (void)w;
  pthread_join(l->thread, NULL);
  close(l->stop_pipe[0]);
  close(l->stop_pipe[1]);
  free(l);
}
