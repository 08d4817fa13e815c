/* The HTTP daemon: libmicrohttpd with its own thread pool, and request dispatch. */
#include "server/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>

#include "server/app.h"
#include "server/auth.h"
#include "server/body.h"
#include "server/client_limit.h"
#include "server/config.h"
#include "server/event_bus.h"
#include "base/log.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "server/router.h"

struct daemon {
  struct MHD_Daemon *mhd;
  struct app *app;
  struct client_limit *clients; /* open connections per client address */
};

/* The client address of conn (borrowed from MHD), or NULL. */
static const struct sockaddr *client_address(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info ? info->client_addr : NULL;
}

/* Counts connections per client as MHD opens and closes them. *socket_context marks the
 * ones counted, so a close is only subtracted for a counted open. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  struct daemon *d = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    *socket_context = client_limit_opened(d->clients, client_address(conn)) ? d : NULL;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
    client_limit_closed(d->clients, client_address(conn));
    *socket_context = NULL;
  }
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
  req->body_cap = 0;
  req->status = 0;
  req->handler_state = NULL;
  /* body_len doubles as the URI length until the body starts arriving. */
  req->body_len = strlen(uri);
  return req;
}

/* Early checks on the first callback, before any body byte is read. Queues the error
 * when one trips; otherwise leaves the request unanswered. */
static enum MHD_Result first_call(struct daemon *d, struct request *req) {
  const struct opforge_config *cfg = d->app->cfg;
  size_t uri_len = req->body_len;
  req->body_len = 0;
  if (atomic_load(&d->app->shutting_down))
    return reply_error(req, API_ERR_SHUTTING_DOWN, NULL, "the server is shutting down");
  const struct sockaddr *client = client_address(req->conn);
  if (client_limit_over(d->clients, client)) {
    unsigned open = client_limit_count(d->clients, client);
    metrics_limit_tripped(d->app->metrics, LIMIT_CONNECTIONS);
    log_warn("limit: a client with %u open connections refused (cap %u)", open,
             client_limit_limit(d->clients));
    return reply_error_with_header(req, API_ERR_TOO_MANY_REQUESTS, "Retry-After", "1",
                                   "this client has %u connections open; the limit is %u "
                                   "(--max-connections-per-ip): close some and retry",
                                   open, client_limit_limit(d->clients));
  }
  if (uri_len > cfg->max_url_bytes) {
    metrics_limit_tripped(d->app->metrics, LIMIT_URL);
    log_warn("limit: URL of %zu bytes refused (cap %zu)", uri_len, cfg->max_url_bytes);
    return reply_error(req, API_ERR_URL_TOO_LONG, NULL,
                       "request URL is %zu bytes; the limit is %zu", uri_len,
                       cfg->max_url_bytes);
  }
  char allow[64];
  switch (router_match(opforge_routes, req->method, req->url, req, &req->route, allow,
                       sizeof allow)) {
  case ROUTE_NOT_FOUND:
    return reply_error(req, API_ERR_NOT_FOUND, NULL, "no route for %s", req->url);
  case ROUTE_METHOD_NOT_ALLOWED: {
    const struct api_error_info *info = api_error_info(API_ERR_METHOD_NOT_ALLOWED);
    json_t *body = json_pack("{s:{s:s, s:s+, s:n}}", "error", "code", info->code, "message",
                             "allowed methods: ", allow, "field");
    return reply_json_with_header(req, info->status, body, MHD_HTTP_HEADER_ALLOW, allow);
  }
  case ROUTE_FOUND:
    break;
  }
  if (auth_is_write(req->method)) {
    enum auth_result a = auth_check(cfg, request_header(req, MHD_HTTP_HEADER_AUTHORIZATION));
    if (a == AUTH_MISSING) {
      const struct api_error_info *info = api_error_info(API_ERR_UNAUTHORIZED);
      json_t *body = json_pack("{s:{s:s, s:s, s:n}}", "error", "code", info->code, "message",
                               "this server needs 'Authorization: Bearer <token>' for writes",
                               "field");
      return reply_json_with_header(req, info->status, body, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                    "Bearer realm=\"opforge\"");
    }
    if (a == AUTH_WRONG)
      return reply_error(req, API_ERR_FORBIDDEN, NULL, "the bearer token is not accepted");
  }
  if (!body_length_allowed(request_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH),
                           cfg->max_body_bytes)) {
    metrics_limit_tripped(d->app->metrics, LIMIT_BODY);
    log_warn("limit: body over %zu bytes refused (Content-Length)", cfg->max_body_bytes);
    return reply_error(req, API_ERR_BODY_TOO_LARGE, NULL, "request body is over %zu bytes",
                       cfg->max_body_bytes);
  }
  return MHD_YES;
}

/* True when a Content-Type header is present and is not JSON. */
static bool wrong_media_type(struct request *req) {
  const char *ct = request_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (!ct)
    return false;
  if (strncasecmp(ct, "application/json", 16) != 0)
    return true;
  return !(ct[16] == '\0' || ct[16] == ';' || ct[16] == ' ');
}

/* The upload is complete: answer limits tripped while reading, then run the handler. */
static enum MHD_Result dispatch(struct daemon *d, struct request *req) {
  if (req->body_state == BODY_OVERFLOW) {
    metrics_limit_tripped(d->app->metrics, LIMIT_BODY);
    log_warn("limit: body over %zu bytes refused (while reading)", d->app->cfg->max_body_bytes);
    return reply_error(req, API_ERR_BODY_TOO_LARGE, NULL, "request body is over %zu bytes",
                       d->app->cfg->max_body_bytes);
  }
  if (req->body_len > 0 && wrong_media_type(req))
    return reply_error(req, API_ERR_UNSUPPORTED_MEDIA, NULL,
                       "request bodies must be JSON: send Content-Type: application/json");
  enum MHD_Result r = req->route->handler(req);
  if (!req->answered && r == MHD_YES) {
    log_error("handler for %s %s answered nothing", req->method, req->route->pattern);
    return reply_error(req, API_ERR_INTERNAL, NULL, "internal error");
  }
  return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
  (void)version;
  struct daemon *d = cls;
  struct request *req = *req_cls;
  if (!req)
    return MHD_NO;
  if (!req->conn) {
    req->conn = conn;
    req->method = method;
    req->url = url;
    req->app = d->app;
    return first_call(d, req);
  }
  if (req->answered) {
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

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)conn;
  struct daemon *d = cls;
  struct request *req = *req_cls;
  if (!req)
    return;
  (void)d;
  request_observe(req);  /* requests that ended without a response are counted here */
  const char *route = req->route ? req->route->pattern : "unmatched";
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
  if (!d->clients) {
    free(d);
    return -1;
  }
  /* MHD itself drops connections only at twice the per-client limit, a backstop against
   * floods: up to there, the request over the limit gets a 429 that says why. */
  unsigned hard_per_ip = cfg->max_connections_per_ip > 32768 ? 65535u
                                                             : 2u * cfg->max_connections_per_ip;
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
    free(d);
    return -1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
  *ret_port = info ? info->port : cfg->listen_port;
  *ret_daemon = d;
  return 0;
}

void daemon_quiesce(struct daemon *d) {
  if (!d || !d->mhd)
    return;
  /* MHD hands the listening socket back; closing it refuses new connections at once. */
  MHD_socket fd = MHD_quiesce_daemon(d->mhd);
  if (fd != MHD_INVALID_SOCKET)
    close(fd);
}

void daemon_stop(struct daemon *d) {
  if (!d)
    return;
  event_bus_shutdown(d->app->bus);
  MHD_stop_daemon(d->mhd);
  client_limit_free(d->clients);
  free(d);
}
