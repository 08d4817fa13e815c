/* The HTTP daemon: libmicrohttpd with its own thread pool, and request dispatch. */
#include "server/daemon.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/admission.h"
#include "server/app.h"
#include "server/body.h"
#include "server/client_limit.h"
#include "server/config.h"
#include "server/conn_shed.h"
#include "server/event_bus.h"
#include "server/framing.h"
#include "server/head_deadline.h"
#include "base/log.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "server/router.h"

struct daemon {
  struct MHD_Daemon *mhd;
  struct app *app;
  struct client_limit *clients; /* open connections per client address */
  struct head_deadline *heads;  /* the request-head deadline of every connection */
  struct admission admission;
  _Atomic unsigned long long shed_logged_ns; /* when shedding was last logged */
};

/* The client address of conn (borrowed from MHD), or NULL. */
static const struct sockaddr *client_address(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info ? info->client_addr : NULL;
}

/* The head-deadline watch of conn (its socket context), or NULL. */
static struct head_watch *watch_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? info->socket_context : NULL;
}

/* Closes connections that wait for a request head when the table is nearly full (see
 * server/conn_shed.h), never the one just opened; counts and logs them (the log at most
 * once a second: under a flood every new connection sheds one). */
static void shed_if_full(struct daemon *d, const struct head_watch *opened) {
  unsigned max = d->app->cfg->max_connections;
  unsigned n = conn_shed_count(head_deadline_count(d->heads), max);
  unsigned shed = n ? head_deadline_shed(d->heads, n, opened) : 0;
  if (!shed)
    return;
  metrics_limit_tripped_n(d->app->metrics, LIMIT_SHED, shed);
  unsigned long long now = monotonic_ns(), last = atomic_load(&d->shed_logged_ns);
  if (now - last >= 1000000000ull && atomic_compare_exchange_strong(&d->shed_logged_ns, &last, now))
    log_warn("limit: the connection table is nearly full (%u of %u, --max-connections): "
             "closed %u connection(s) still waiting for a request head, longest first",
             head_deadline_count(d->heads), max, shed);
}

/* Watches each connection for the arrival deadlines and counts it per client. The watch
 * is the socket context; it records whether client_limit counted the connection, so a
 * close is only subtracted for a counted open. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  struct daemon *d = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    const struct sockaddr *peer = client_address(conn);
    struct head_watch *w = fd ? head_deadline_opened(d->heads, fd->connect_fd, peer) : NULL;
    if (w)
      w->counted = client_limit_opened(d->clients, peer) > 0;
    *socket_context = w;
    if (w)
      shed_if_full(d, w);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
    struct head_watch *w = *socket_context;
    if (w->counted)
      client_limit_closed(d->clients, client_address(conn));
    head_deadline_closed(d->heads, w);
    *socket_context = NULL;
  }
}

/* The sweeper closed n connections whose request head or body was late. */
static void on_late(void *cls, enum head_deadline_reason why, unsigned n) {
  struct daemon *d = cls;
  const struct opforge_config *cfg = d->app->cfg;
  metrics_limit_tripped_n(d->app->metrics,
                          why == HEAD_LATE ? LIMIT_HEADER_DEADLINE : LIMIT_BODY_DEADLINE, n);
  if (why == HEAD_LATE)
    log_warn("limit: %u connection(s) closed: no complete request head within %u s "
             "(--header-deadline)", n, cfg->header_deadline_s);
  else
    log_warn("limit: %u connection(s) closed: the request body was not complete within "
             "%u s of its head (--body-deadline)", n, cfg->body_deadline_s);
}

/* MHD calls this first with the full request URI; the context it returns becomes
 * *req_cls, so the URL cap can be checked on the whole URI (query included). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)cls;
  (void)conn;
  struct request *req = calloc(1, sizeof *req);
  if (!req)
    return NULL;
  req->started_ns = monotonic_ns();
  /* Measured now: the library splits off the query and decodes the path in place next. */
  framing_measure_target(uri, &req->uri_len, &req->uri_blank);
  return req;
}

/* The upload is complete: answer limits tripped while reading, then run the handler. */
static enum MHD_Result dispatch(struct daemon *d, struct request *req) {
  if (req->body_state == BODY_OVERFLOW) {
    metrics_limit_tripped(d->app->metrics, LIMIT_BODY);
    log_warn("limit: body over %zu bytes refused (while reading)", d->app->cfg->max_body_bytes);
    return reply_error(req, API_ERR_BODY_TOO_LARGE, NULL, "request body is over %zu bytes",
                       d->app->cfg->max_body_bytes);
  }
  enum MHD_Result r = req->route->handler(req);
  if (!req->answered && r == MHD_YES) {
    log_error("handler for %s %s answered nothing", req->method, req->route_name);
    return reply_error(req, API_ERR_INTERNAL, NULL, "internal error");
  }
  return r;
}

/* A request answered before its body: the body is read and thrown away (up to the body
 * cap; past it the connection is closed), then the answer goes out. */
static enum MHD_Result drain(struct daemon *d, struct request *req, size_t *upload_data_size) {
  if (*upload_data_size == 0)
    return reply_deferred(req);
  req->drained += *upload_data_size;
  *upload_data_size = 0;
  if (req->drained > d->app->cfg->max_body_bytes) {
    log_warn("limit: closing a connection whose refused body went past %zu bytes",
             d->app->cfg->max_body_bytes);
    return MHD_NO;
  }
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
  struct daemon *d = cls;
  struct request *req = *req_cls;
  if (!req)
    return MHD_NO;
  if (!req->conn) {
    req->conn = conn;
    req->method = method;
    req->url = url;
    req->app = d->app;
    enum MHD_Result r = admission_check(&d->admission, req, version);
    head_deadline_head_done(d->heads, watch_of(conn), req->has_body && !req->close_after);
    return r;
  }
  if (*upload_data_size == 0)
    head_deadline_body_done(d->heads, watch_of(conn)); /* the upload is complete */
  if (req->answered) {
    if (req->deferred)
      return drain(d, req, upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (*upload_data_size) {
    body_append(req, upload_data, *upload_data_size, d->app->cfg->max_body_bytes);
    *upload_data_size = 0;
    return MHD_YES;
  }
  return dispatch(d, req);
}

/* The request ended (answered, or its connection closed): the connection waits for its
 * next request head from now on. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct daemon *d = cls;
  head_deadline_waiting(d->heads, watch_of(conn));
  struct request *req = *req_cls;
  if (!req)
    return;
  request_observe(req);  /* requests that ended without a response are counted here */
  const char *route = req->route_name ? req->route_name : "unmatched";
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && req->status < 400)
    log_debug("%s %s ended early (%d)", req->method ? req->method : "?", route, (int)toe);
  request_free(req);
  *req_cls = NULL;
}

/* Fills a socket address for host:port (IPv4 or IPv6 literal). */
static int make_address(const struct opforge_config *cfg, struct sockaddr_storage *ss,
                        bool *ret_ipv6) {
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
  const char *host = strcmp(cfg->listen_host, "localhost") == 0 ? "127.0.0.1" : cfg->listen_host;
  if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(cfg->listen_port);
    *ret_ipv6 = false;
    return 0;
  }
  char trimmed[256];
  snprintf(trimmed, sizeof trimmed, "%s", host);
  size_t n = strlen(trimmed);
  if (n > 2 && trimmed[0] == '[' && trimmed[n - 1] == ']') {
    memmove(trimmed, trimmed + 1, n - 2);
    trimmed[n - 2] = '\0';
  }
  if (inet_pton(AF_INET6, trimmed, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(cfg->listen_port);
    *ret_ipv6 = true;
    return 0;
  }
  return -1;
}

/* Where libmicrohttpd itself drops a client's new connections at accept: a backstop
 * against floods, set well above the per-client limit. Up to it, a request over the
 * limit gets a 429 that says why and closes its connection; the room above the limit
 * absorbs connections a client has closed that the server has not reaped yet. */
static unsigned hard_per_client_limit(unsigned per_client) {
  unsigned long hard = per_client < 32 ? per_client + 32ul : 2ul * per_client;
  return hard > 65535 ? 65535u : (unsigned)hard;
}

int daemon_start(struct app *app, struct daemon **ret_daemon, uint16_t *ret_port) {
  const struct opforge_config *cfg = app->cfg;
  struct sockaddr_storage addr;
  bool ipv6 = false;
  if (make_address(cfg, &addr, &ipv6) != 0) {
    log_error("--listen: '%s' is not an IP address", cfg->listen_host);
    return -1;
  }
  struct daemon *d = calloc(1, sizeof *d);
  if (!d)
    return -1;
  d->app = app;
  d->clients = client_limit_new(cfg->max_connections, cfg->max_connections_per_ip);
  d->heads = head_deadline_new(cfg->header_deadline_s, cfg->body_deadline_s, on_late, d);
  if (!d->clients || !d->heads) {
    client_limit_free(d->clients);
    head_deadline_free(d->heads);
    free(d);
    return -1;
  }
  d->admission = (struct admission){.cfg = cfg, .metrics = app->metrics,
                                    .clients = d->clients, .heads = d->heads,
                                    .shutting_down = &app->shutting_down};
  unsigned hard_per_ip = hard_per_client_limit(cfg->max_connections_per_ip);
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                   (ipv6 ? MHD_USE_IPv6 : 0);
  size_t conn_memory = cfg->max_url_bytes + 96 * 1024;
  d->mhd = MHD_start_daemon(
      flags, cfg->listen_port, NULL, NULL, on_request, d,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, hard_per_ip,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, d,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_memory,
      MHD_OPTION_URI_LOG_CALLBACK, on_uri, d,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, d,
      MHD_OPTION_END);
  if (!d->mhd) {
    log_error("cannot listen on %s:%u (address in use or not permitted)", cfg->listen_host,
              (unsigned)cfg->listen_port);
    client_limit_free(d->clients);
    head_deadline_free(d->heads);
    free(d);
    return -1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
  *ret_port = info ? info->port : cfg->listen_port;
  *ret_daemon = d;
  return 0;
}

void daemon_stop(struct daemon *d) {
  if (!d)
    return;
  event_bus_shutdown(d->app->bus);
  MHD_stop_daemon(d->mhd);
  head_deadline_free(d->heads);
  client_limit_free(d->clients);
  free(d);
}
