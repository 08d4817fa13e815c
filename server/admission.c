/* The admission checks (see admission.h). Each refusal is counted where a limit trips,
 * logged once, and answered in the one error shape. */
#include "server/admission.h"

#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "server/auth.h"
#include "server/body.h"
#include "server/client_limit.h"
#include "server/config.h"
#include "server/framing.h"
#include "server/head_deadline.h"
#include "server/metrics.h"
#include "server/origin.h"
#include "server/reply.h"
#include "server/router.h"

/* The client address of conn (borrowed from MHD), or NULL. */
static const struct sockaddr *client_address(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info ? info->client_addr : NULL;
}

/* 400 invalid_header for a head that could be framed two ways or is malformed
 * (server/framing.c); the connection is closed after the answer and the body is never
 * read, since where it ends is what is in doubt. MHD_YES in *ret_ok when sound. */
static enum MHD_Result check_framing(struct request *req, const char *version, bool *ret_ok) {
  struct framing_verdict v;
  *ret_ok = framing_check_request(req->conn, req->method, req->url, version, req->uri_len,
                                  req->uri_blank, &v);
  if (*ret_ok)
    return MHD_YES;
  log_warn("a malformed request head refused: %s", v.message);
  req->defer_replies = false;
  req->close_after = true;
  return reply_error(req, API_ERR_INVALID_HEADER, v.field, "%s", v.message);
}

/* An absolute-form target (http://host:port/path, RFC 9112 section 3.2.2): its path is
 * routed and its authority stands for the Host header. */
static bool take_absolute_form(struct request *req) {
  const char *path = NULL;
  if (!origin_split_absolute(req->url, req->target_host, sizeof req->target_host, &path))
    return false;
  req->url = path;
  return true;
}

/* The host the request names: an absolute-form target's authority, else Host. */
static const char *request_host(struct request *req) {
  return req->target_host[0] ? req->target_host : request_header(req, MHD_HTTP_HEADER_HOST);
}

/* How many connections the client of req has open, when that is over the limit, else
 * 0. The count is taken at open and close; when it is over, the client's sockets are
 * asked which it has not hung up, since the library reports a close only once a thread
 * of its gets to it (not while every thread is busy, nor while the connection is
 * suspended on an event stream). */
static unsigned client_over_limit(const struct admission *a, struct request *req) {
  const struct sockaddr *client = client_address(req->conn);
  if (!client_limit_over(a->clients, client))
    return 0;
  unsigned live = head_deadline_live_from(a->heads, client);
  return live > client_limit_limit(a->clients) ? live : 0;
}

/* 429 when the client has more connections open than allowed; the connection is then
 * closed after the answer, so the slot frees at once. */
static enum MHD_Result refuse_client(const struct admission *a, struct request *req,
                                     unsigned open) {
  metrics_limit_tripped(a->metrics, LIMIT_CONNECTIONS);
  log_warn("limit: a client with %u open connections refused (cap %u)", open,
           client_limit_limit(a->clients));
  req->close_after = true;
  return reply_error_with_header(req, API_ERR_TOO_MANY_REQUESTS, "Retry-After", "1",
                                 "this client has %u connections open; the limit is %u "
                                 "(--max-connections-per-ip): close some and retry",
                                 open, client_limit_limit(a->clients));
}

/* OPTIONS on a known path: 204 with Allow; for a --cors-origin origin asking for a
 * preflight, also the Access-Control-Allow-* headers. Other origins get no CORS
 * header, so the browser refuses the real request. */
static enum MHD_Result answer_options(struct request *req, const char *allow) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
  if (req->cors_origin && request_header(req, "Access-Control-Request-Method"))
    origin_add_preflight_headers(resp, req->cors_origin, allow);
  else if (req->cors_origin)
    origin_add_cors_headers(resp, req->cors_origin);
  req->cors_origin = NULL; /* its headers are on already */
  return reply_response(req, 204, resp);
}

/* Routes req; answers 404, 405 or OPTIONS itself. *ret_routed says whether it may go on. */
static enum MHD_Result route(struct request *req, bool *ret_routed) {
  char allow[96];
  *ret_routed = false;
  enum route_match m = router_match(opforge_routes, req->method, req->url, req, &req->route,
                                    allow, sizeof allow);
  req->route_name = req->route ? req->route->pattern : NULL;
  switch (m) {
  case ROUTE_NOT_FOUND:
    return reply_error(req, API_ERR_NOT_FOUND, NULL, "no route for %s", req->url);
  case ROUTE_OPTIONS:
    return answer_options(req, allow);
  case ROUTE_METHOD_NOT_ALLOWED: {
    const struct api_error_info *info = api_error_info(API_ERR_METHOD_NOT_ALLOWED);
    json_t *body = json_pack("{s:{s:s, s:s+, s:n}}", "error", "code", info->code, "message",
                             "allowed methods: ", allow, "field");
    return reply_json_with_header(req, info->status, body, MHD_HTTP_HEADER_ALLOW, allow);
  }
  case ROUTE_FOUND:
    break;
  }
  *ret_routed = true;
  return MHD_YES;
}

/* 401 or 403 for a write without the right bearer token; *ret_ok when it may go on. */
static enum MHD_Result check_token(const struct admission *a, struct request *req,
                                   bool *ret_ok) {
  *ret_ok = false;
  enum auth_result r = auth_check(a->cfg, request_header(req, MHD_HTTP_HEADER_AUTHORIZATION));
  if (r == AUTH_MISSING) {
    const struct api_error_info *info = api_error_info(API_ERR_UNAUTHORIZED);
    json_t *body = json_pack("{s:{s:s, s:s, s:n}}", "error", "code", info->code, "message",
                             "this server needs 'Authorization: Bearer <token>' for writes",
                             "field");
    return reply_json_with_header(req, info->status, body, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                  "Bearer realm=\"opforge\"");
  }
  if (r == AUTH_WRONG)
    return reply_error(req, API_ERR_FORBIDDEN, NULL, "the bearer token is not accepted");
  *ret_ok = true;
  return MHD_YES;
}

/* True when a Content-Type value is application/json (parameters allowed). */
static bool is_json(const char *ct) {
  if (strncasecmp(ct, "application/json", 16) != 0)
    return false;
  return ct[16] == '\0' || ct[16] == ';' || ct[16] == ' ';
}

/* The checks of a write (POST, PUT, PATCH, DELETE); *ret_ok when it may go on. A write
 * from a browser page of another site carries that site's Origin: it is refused unless
 * listed. A form (the one cross-site write a browser sends without asking first) has a
 * form or text Content-Type: every write that names a type must name JSON, and a body
 * must come with it. */
static enum MHD_Result check_write(const struct admission *a, struct request *req,
                                   bool *ret_ok) {
  *ret_ok = false;
  const char *origin = request_header(req, "Origin");
  if (origin && !req->cors_origin &&
      !origin_is_own(origin, request_host(req))) {
    log_warn("a %s from origin '%.100s' refused", req->method, origin);
    return reply_error(req, API_ERR_CROSS_SITE_REFUSED, "Origin",
                       "writes from origin %.100s are refused: it is neither this "
                       "server's nor listed with --cors-origin", origin);
  }
  bool token_ok;
  enum MHD_Result r = check_token(a, req, &token_ok);
  if (!token_ok)
    return r;
  const char *ct = request_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
  if ((ct && !is_json(ct)) || (!ct && req->has_body))
    return reply_error(req, API_ERR_UNSUPPORTED_MEDIA, "Content-Type",
                       "writes take JSON: send Content-Type: application/json (or, "
                       "without a body, no Content-Type)");
  *ret_ok = true;
  return MHD_YES;
}

/* Decides whether an early answer to req must wait for its body (see request.h). */
static void plan_early_answer(const struct admission *a, struct request *req,
                              bool *ret_length_over) {
  const char *cl = request_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const char *te = request_header(req, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  const char *expect = request_header(req, MHD_HTTP_HEADER_EXPECT);
  *ret_length_over = !body_length_allowed(cl, a->cfg->max_body_bytes);
  req->has_body = te || (cl && strspn(cl, "0") != strlen(cl));
  /* Without a body there is nothing to drain; past the cap it is not drained; with
   * "Expect: 100-continue" the client waits and sends no body after an early answer. */
  bool waits = expect && strcasecmp(expect, "100-continue") == 0;
  req->defer_replies = req->has_body && !*ret_length_over && !waits;
  req->close_after = req->has_body && !req->defer_replies;
}

enum MHD_Result admission_check(const struct admission *a, struct request *req,
                                const char *version) {
  const struct opforge_config *cfg = a->cfg;
  bool ok, length_over;
  enum MHD_Result r = check_framing(req, version, &ok);
  if (!ok)
    return r;
  plan_early_answer(a, req, &length_over);
  bool absolute = take_absolute_form(req);
  if (atomic_load(a->shutting_down))
    return reply_error(req, API_ERR_SHUTTING_DOWN, NULL, "the server is shutting down");
  unsigned open = client_over_limit(a, req);
  if (open)
    return refuse_client(a, req, open);
  if (req->uri_len > cfg->max_url_bytes) {
    metrics_limit_tripped(a->metrics, LIMIT_URL);
    log_warn("limit: URL of %zu bytes refused (cap %zu)", req->uri_len, cfg->max_url_bytes);
    return reply_error(req, API_ERR_URL_TOO_LONG, NULL,
                       "request URL is %zu bytes; the limit is %zu", req->uri_len,
                       cfg->max_url_bytes);
  }
  const char *host = request_host(req);
  if ((absolute && !req->target_host[0]) || (host && !origin_host_allowed(cfg, host))) {
    host = absolute ? req->target_host : host;
    log_warn("a request for host '%.100s' refused", host);
    return reply_error(req, API_ERR_HOST_NOT_ALLOWED, "Host",
                       "this server does not answer for host '%.100s' (--allow-host adds "
                       "names)", host);
  }
  const char *origin = request_header(req, "Origin");
  if (origin_cors_listed(cfg, origin))
    req->cors_origin = origin;
  r = route(req, &ok);
  if (!ok)
    return r;
  if (auth_is_write(req->method)) {
    r = check_write(a, req, &ok);
    if (!ok)
      return r;
  }
  if (length_over) {
    metrics_limit_tripped(a->metrics, LIMIT_BODY);
    log_warn("limit: body over %zu bytes refused (Content-Length)", cfg->max_body_bytes);
    return reply_error(req, API_ERR_BODY_TOO_LARGE, NULL, "request body is over %zu bytes",
                       cfg->max_body_bytes);
  }
  req->defer_replies = false;
  req->close_after = false;
  return MHD_YES;
}
