/* GET /v1/servers: the live servers of the store, from store_servers_list. */
#include "handlers/servers.h"

#include "handlers/handlers.h"
#include "server/app.h"
#include "server/config.h"
#include "server/reply.h"
#include "store/servers.h"
#include "store/store.h"

enum MHD_Result handle_servers_list(struct request *req) {
  json_t *items = NULL;
  int rc = store_servers_list(req->app->store, &items);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_NOT_FOUND);
  json_t *body = json_pack("{s:s, s:i, s:o}", "store", store_backend_name(req->app->store),
                           "lease_seconds", (int)req->app->cfg->lease_s, "servers", items);
  if (!body)
    return reply_error(req, API_ERR_INTERNAL, NULL, "out of memory listing servers");
  return reply_json(req, 200, body);
}
