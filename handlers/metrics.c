/* GET /metrics: Prometheus text with request counters, latency, limits and task counts. */
#include <stdlib.h>

#include "gpu/supervisor.h"
#include "handlers/handlers.h"
#include "server/app.h"
#include "server/evaluators.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "store/servers.h"
#include "store/store.h"
#include "store/tasks.h"

/* Appends the store's backend, whether it answered, and (when it did) the live servers
 * sharing it. Never the store's location: a PostgreSQL URL may hold a password. */
static int render_store(struct request *req, bool up, char **buf, size_t *len, size_t *cap) {
  json_t *servers = NULL;
  if (up && store_servers_list(req->app->store, &servers) != STORE_OK)
    up = false;
  int rc = metrics_appendf(buf, len, cap,
                           "# HELP opforge_store The store's backend (sqlite or postgresql).\n"
                           "# TYPE opforge_store gauge\nopforge_store{backend=\"%s\"} 1\n"
                           "# HELP opforge_store_up Whether the store answered this scrape.\n"
                           "# TYPE opforge_store_up gauge\nopforge_store_up %d\n",
                           store_backend_name(req->app->store), up ? 1 : 0);
  if (rc == 0 && servers)
    rc = metrics_appendf(buf, len, cap,
                         "# HELP opforge_servers_live Servers that renewed their row within a "
                         "lease (GET /v1/servers).\n# TYPE opforge_servers_live gauge\n"
                         "opforge_servers_live %zu\n",
                         json_array_size(servers));
  json_decref(servers);
  return rc;
}

/* Appends the tasks-by-status gauge; *ret_up says whether the store answered (when it
 * did not, the gauge is left out). Returns 0, -1 on failure. */
static int render_task_counts(struct request *req, bool *ret_up, char **buf, size_t *len,
                              size_t *cap) {
  json_t *counts = NULL;
  *ret_up = store_task_counts(req->app->store, &counts) == STORE_OK;
  if (!*ret_up)
    return 0;
  int rc = metrics_appendf(buf, len, cap,
                           "# HELP opforge_tasks Tasks by status.\n# TYPE opforge_tasks gauge\n");
  const char *status;
  json_t *n;
  json_object_foreach(counts, status, n) {
    if (rc == 0)
      rc = metrics_appendf(buf, len, cap, "opforge_tasks{status=\"%s\"} %lld\n", status,
                           (long long)json_integer_value(n));
  }
  json_decref(counts);
  return rc;
}

/* Appends the evaluator restarts (0 without evaluators). */
static int render_restarts(struct request *req, char **buf, size_t *len, size_t *cap) {
  unsigned long restarts =
      req->app->supervisors ? supervisor_pool_restarts(req->app->supervisors) : 0;
  return metrics_appendf(buf, len, cap,
                         "# HELP opforge_evaluator_restarts_total Evaluator processes restarted "
                         "after a timeout, crash or sticky CUDA error.\n"
                         "# TYPE opforge_evaluator_restarts_total counter\n"
                         "opforge_evaluator_restarts_total %lu\n",
                         restarts);
}

/* Appends the sandbox's mode as an info gauge (docs/architecture.md, "Sandbox"). */
static int render_sandbox(struct request *req, char **buf, size_t *len, size_t *cap) {
  json_t *d = evaluators_sandbox_describe(req->app->sandbox, req->app->sandbox_refusal);
  const char *mode = json_string_value(json_object_get(d, "mode"));
  int rc = metrics_appendf(buf, len, cap,
                           "# HELP opforge_sandbox How evaluators run task code: bwrap "
                           "(sandboxed), none (unsandboxed), refused (no sandbox could be "
                           "made), unused (no evaluator).\n"
                           "# TYPE opforge_sandbox gauge\nopforge_sandbox{mode=\"%s\"} 1\n",
                           mode ? mode : "unknown");
  json_decref(d);
  return rc;
}

enum MHD_Result handle_metrics(struct request *req) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  bool up = false;
  int rc = metrics_render(req->app->metrics, &buf, &len, &cap);
  if (rc == 0)
    rc = render_task_counts(req, &up, &buf, &len, &cap);
  if (rc == 0)
    rc = render_store(req, up, &buf, &len, &cap);
  if (rc == 0)
    rc = render_restarts(req, &buf, &len, &cap);
  if (rc == 0)
    rc = render_sandbox(req, &buf, &len, &cap);
  if (rc != 0) {
    free(buf);
    return reply_error(req, API_ERR_INTERNAL, NULL, "cannot render metrics");
  }
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback(len, buf, free);
  if (!resp) {
    free(buf);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
  return reply_response(req, 200, resp);
}
