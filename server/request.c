/* The per-request context: what a handler sees of one HTTP request. */
#include "server/request.h"

#include <stdlib.h>
#include <time.h>

#include "server/app.h"
#include "server/metrics.h"

void request_free(struct request *req) {
  if (!req)
    return;
  if (req->handler_state && req->handler_state_free)
    req->handler_state_free(req->handler_state);
  for (unsigned i = 0; i < req->n_params; i++)
    free(req->params[i]);
  if (req->deferred)
    MHD_destroy_response(req->deferred);
  free(req->body);
  free(req);
}

const char *request_query(struct request *req, const char *key) {
  return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *request_header(struct request *req, const char *name) {
  return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

void request_observe(struct request *req) {
  if (req->observed || !req->method || !req->app)
    return;
  req->observed = true;
  double seconds = (double)(monotonic_ns() - req->started_ns) / 1e9;
  metrics_observe_request(req->app->metrics, req->route_name ? req->route_name : "unmatched",
                          req->method, req->status, seconds);
}

uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
