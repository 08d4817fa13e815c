/* The per-request context: what a handler sees of one HTTP request. */
#ifndef OPFORGE_REQUEST_H
#define OPFORGE_REQUEST_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;
struct route; /* server/router.h; only pointed to here, so request does not include it */

#define REQUEST_MAX_PARAMS 3

/* Lives in MHD's *req_cls from the first callback to the request-completed callback,
 * which frees it (request_free). Handlers borrow it; state they hang on it goes in
 * handler_state with its destructor in handler_state_free. */
struct request {
  struct MHD_Connection *conn;
  struct app *app;
  const char *method;            /* borrowed from MHD */
  const char *url;               /* the path only: borrowed from MHD (for an absolute-form
                                    target, its path part) */
  size_t uri_len;                /* bytes of the whole request target as MHD first saw it
                                    (query included; up to a NUL byte, if any) */
  bool uri_blank;                /* a blank or control byte among them */
  char target_host[256];         /* the authority of an absolute-form target
                                    (http://host:port/path), "" for an origin-form one */
  const struct route *route;     /* NULL until routed */
  const char *route_name;        /* route->pattern once routed (static), else NULL */
  char *params[REQUEST_MAX_PARAMS]; /* owned copies of {..} path segments */
  unsigned n_params;

  /* body intake (server/body.c) */
  char *body;                    /* owned, NUL-terminated */
  size_t body_len;
  size_t body_cap;
  int body_state;                /* enum body_state in body.c */

  /* set by the admission checks (server/admission.c) */
  bool has_body;                 /* Content-Length above 0 or Transfer-Encoding */
  const char *cors_origin;       /* the Origin when --cors-origin lists it (borrowed) */
  bool close_after;              /* the response says Connection: close */

  /* An answer given before the body was read waits until the body is drained, so the
   * client never meets a connection closed with its body unread (a reset that can
   * swallow the answer). reply_response keeps it here while defer_replies is set. */
  bool defer_replies;
  struct MHD_Response *deferred; /* owned until queued */
  unsigned deferred_status;
  size_t drained;                /* body bytes thrown away meanwhile */

  unsigned status;               /* status queued, for metrics and logs */
  uint64_t started_ns;           /* monotonic, for the latency histogram */
  bool answered;
  bool observed;                 /* counted in the metrics (when its response was queued) */

  void *handler_state;
  void (*handler_state_free)(void *state);
};

/* A handler answers the request (queues a response) and returns MHD's result. */
typedef enum MHD_Result (*handler_fn)(struct request *req);

/* Frees everything the request owns, including handler_state and a deferred response
 * never queued. Accepts NULL. */
void request_free(struct request *req);

/* Value of a query argument (borrowed from MHD), or NULL. */
const char *request_query(struct request *req, const char *key);

/* Value of a request header (borrowed from MHD), or NULL. */
const char *request_header(struct request *req, const char *name);

/* Counts the request in the metrics once (route, method, status, time to the response;
 * a response still streaming is counted when it was queued, so a client that has the
 * response also finds it counted). Later calls do nothing. */
void request_observe(struct request *req);

/* Monotonic clock in nanoseconds. */
uint64_t monotonic_ns(void);

#endif
