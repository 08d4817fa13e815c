/* GET /healthz (the process answers) and GET /readyz (the store is open and migrated). */
#include <limits.h>

#include "handlers/handlers.h"
#include "server/app.h"
#include "server/evaluators.h"
#include "server/reply.h"
#include "store/store.h"

enum MHD_Result handle_healthz(struct request *req) {
  json_t *sandbox =
      evaluators_sandbox_describe(req->app->sandbox, req->app->sandbox_refusal);
  return reply_json(req, 200, json_pack("{s:s,s:o*,s:s}", "status", "ok", "sandbox", sandbox,
                                        "store", store_backend_name(req->app->store)));
}

enum MHD_Result handle_readyz(struct request *req) {
  if (atomic_load(&req->app->shutting_down))
    return reply_error(req, API_ERR_SHUTTING_DOWN, NULL, "the server is shutting down");
  if (!store_ready(req->app->store))
    return reply_error_with_header(
        req, API_ERR_NOT_READY, "Retry-After", "5",
        store_is_shared(req->app->store)
            ? "the database server (postgresql) cannot be reached, or its migrations are "
              "not all applied"
            : "the store is not open or its migrations are not all applied");
  char why[PATH_MAX + 200];
  if (!store_has_space(req->app->store, why, sizeof why))
    return reply_error(req, API_ERR_NOT_READY, NULL, "%s", why);
  return reply_json(req, 200, json_pack("{s:s, s:i}", "status", "ready", "schema_version",
                                        store_schema_version(req->app->store)));
}
