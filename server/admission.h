/* The checks every request passes before its handler runs, in one order, each answering
 * in the one error shape: framing and head syntax (server/framing.c), shutdown, connections per client, URL length,
 * Host, route (404, 405, OPTIONS), cross-site writes, bearer token, media type, body
 * length. */
#ifndef OPFORGE_ADMISSION_H
#define OPFORGE_ADMISSION_H

#include <stdatomic.h>
#include <stddef.h>

#include "server/request.h"

struct client_limit;
struct head_deadline;
struct metrics;
struct opforge_config;

/* What the checks read; all borrowed. */
struct admission {
  const struct opforge_config *cfg;
  struct metrics *metrics;
  struct client_limit *clients;
  struct head_deadline *heads; /* the open connections, for which are still alive */
  const atomic_bool *shutting_down;
};

/* Runs the checks on the first access-handler call of req (headers complete, no body
 * byte read; req->uri_len and uri_blank measured by the URI log callback). version is
 * the request's HTTP version. When one refuses the request it queues the answer (or, for a request with a
 * body, defers it until the body is drained: req->deferred) and returns the result of
 * queueing; otherwise it routes req (req->route, req->params), sets req->cors_origin
 * and returns MHD_YES with req->answered false. */
enum MHD_Result admission_check(const struct admission *a, struct request *req,
                                const char *version);

#endif
