/* Where a request may come from: the Host header (against DNS rebinding), the Origin of
 * writes (against cross-site requests) and the CORS headers for listed origins. Pure:
 * the configuration and header values in, a decision out. */
#ifndef OPFORGE_ORIGIN_H
#define OPFORGE_ORIGIN_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/config.h"

/* The headers a CORS preflight may ask for and the response headers a page may read. */
#define ORIGIN_ALLOW_HEADERS "Authorization, Content-Type, Idempotency-Key, Last-Event-ID"
#define ORIGIN_EXPOSE_HEADERS "Location, Retry-After, WWW-Authenticate, Allow"
#define ORIGIN_PREFLIGHT_MAX_AGE "600"

/* True when host (a Host header value, port optional; not NULL) names this server: the
 * listen address (any IP literal when it is 0.0.0.0 or ::), localhost when the server
 * listens on loopback or on every address, or a --allow-host name. Case-insensitive. */
bool origin_host_allowed(const struct opforge_config *cfg, const char *host);

/* Splits an absolute-form request target ("http://" or "https://", any case, then the
 * authority, then the path): true when url is one, with the authority copied into
 * ret_host (host_len bytes; cut short when longer, which no allowed name is) and
 * *ret_path pointing at the path in url ("/" in static storage when it is empty).
 * False, with nothing written, for any other target. */
bool origin_split_absolute(const char *url, char *ret_host, size_t host_len,
                           const char **ret_path);

/* True when origin (an Origin header value) is listed with --cors-origin. */
bool origin_cors_listed(const struct opforge_config *cfg, const char *origin);

/* True when origin is the server's own: "http://" or "https://" followed by host (the
 * request's Host header, which may be NULL: then nothing is own). */
bool origin_is_own(const char *origin, const char *host);

/* Adds the CORS headers of a real response for the listed origin (borrowed). */
void origin_add_cors_headers(struct MHD_Response *response, const char *origin);

/* Adds the CORS headers of a preflight answer: the listed origin, the path's methods
 * (allow, e.g. "GET, DELETE, HEAD, OPTIONS"), the request headers it may send and how
 * long the answer may be cached. */
void origin_add_preflight_headers(struct MHD_Response *response, const char *origin,
                                  const char *allow);

#endif
