/* /v1/memory/global/{id}/local and /v1/memory/local/{id}: the local strategies. */
#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "server/app.h"
#include "base/log.h"
#include "server/reply.h"

enum MHD_Result handle_memory_local_list(struct request *req) {
  enum MHD_Result result;
  const char *global = memory_require_id(req, 0, "id", &result);
  const char *ns = global ? memory_require_namespace(req, &result) : NULL;
  if (!ns)
    return result;
  json_t *items = NULL;
  int rc = store_memory_local_list(req->app->store, ns, global, &items);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no global node has id '%s'", global);
  json_t *page = json_pack("{s:o}", "items", items);
  return page ? reply_json(req, 200, page) : MHD_NO;
}

enum MHD_Result handle_memory_local_create(struct request *req) {
  enum MHD_Result result;
  const char *global = memory_require_id(req, 0, "id", &result);
  const char *ns = global ? memory_require_namespace(req, &result) : NULL;
  if (!ns)
    return result;
  json_t *body = memory_parse_body(req, memory_check_local, MEMORY_CREATE, &result);
  if (!body)
    return result;
  struct memory_invalid why;
  json_t *node = NULL;
  int rc = store_memory_local_create(req->app->store, ns, global, body, &why, &node);
  json_decref(body);
  if (rc == STORE_CONFLICT)
    return memory_reply_invalid(req, &why);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no global node has id '%s'", global);
  const char *id = json_string_value(json_object_get(node, "id"));
  log_info("memory %s: local node %s created under %s", ns, id, global);
  return memory_reply_created(req, node, "/v1/memory/local/%s", id);
}

enum MHD_Result handle_memory_local_get(struct request *req) {
  enum MHD_Result result;
  const char *id = memory_require_id(req, 0, "id", &result);
  const char *ns = id ? memory_require_namespace(req, &result) : NULL;
  if (!ns)
    return result;
  json_t *node = NULL;
  int rc = store_memory_local_get(req->app->store, ns, id, &node);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no local node has id '%s'", id);
  return reply_json(req, 200, node);
}

enum MHD_Result handle_memory_local_update(struct request *req) {
  enum MHD_Result result;
  const char *id = memory_require_id(req, 0, "id", &result);
  const char *ns = id ? memory_require_namespace(req, &result) : NULL;
  if (!ns)
    return result;
  json_t *body = memory_parse_body(req, memory_check_local, MEMORY_PATCH, &result);
  if (!body)
    return result;
  struct memory_invalid why;
  json_t *node = NULL;
  int rc = store_memory_local_update(req->app->store, ns, id, body, &why, &node);
  json_decref(body);
  if (rc == STORE_INVALID)
    return memory_reply_invalid(req, &why);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no local node has id '%s'", id);
  log_info("memory %s: local node %s edited", ns, id);
  return reply_json(req, 200, node);
}

enum MHD_Result handle_memory_local_delete(struct request *req) {
  enum MHD_Result result;
  const char *id = memory_require_id(req, 0, "id", &result);
  const char *ns = id ? memory_require_namespace(req, &result) : NULL;
  if (!ns)
    return result;
  int rc = store_memory_local_delete(req->app->store, ns, id);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no local node has id '%s'", id);
  log_info("memory %s: local node %s deleted", ns, id);
  return reply_empty(req, 204);
}
