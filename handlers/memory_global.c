/* /v1/memory/global[/{id}]: list, create, show, edit and delete global directions. */
#include <string.h>

#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "server/app.h"
#include "base/log.h"
#include "server/reply.h"

enum MHD_Result handle_memory_global_list(struct request *req) {
  enum MHD_Result result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *items = NULL;
  int rc = store_memory_global_list(req->app->store, ns, &items);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_MEMORY_NOT_FOUND);
  json_t *page = json_pack("{s:o}", "items", items);
  return page ? reply_json(req, 200, page) : MHD_NO;
}

enum MHD_Result handle_memory_global_create(struct request *req) {
  enum MHD_Result result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *body = memory_parse_body(req, memory_check_global, MEMORY_CREATE, &result);
  if (!body)
    return result;
  struct memory_invalid why;
  json_t *node = NULL;
  int rc = store_memory_global_create(req->app->store, ns, body, &why, &node);
  json_decref(body);
  if (rc == STORE_CONFLICT)
    return memory_reply_invalid(req, &why);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_MEMORY_NOT_FOUND);
  const char *id = json_string_value(json_object_get(node, "id"));
  log_info("memory %s: global node %s created", ns, id);
  return memory_reply_created(req, node, "/v1/memory/global/%s", id);
}

enum MHD_Result handle_memory_global_get(struct request *req) {
  enum MHD_Result result;
  const char *id = memory_require_id(req, 0, "id", &result);
  const char *ns = id ? memory_require_namespace(req, &result) : NULL;
  if (!ns)
    return result;
  json_t *node = NULL;
  int rc = store_memory_global_get(req->app->store, ns, id, &node);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no global node has id '%s'", id);
  return reply_json(req, 200, node);
}

enum MHD_Result handle_memory_global_update(struct request *req) {
  enum MHD_Result result;
  const char *id = memory_require_id(req, 0, "id", &result);
  const char *ns = id ? memory_require_namespace(req, &result) : NULL;
  if (!ns)
    return result;
  json_t *body = memory_parse_body(req, memory_check_global, MEMORY_PATCH, &result);
  if (!body)
    return result;
  json_t *node = NULL;
  int rc = store_memory_global_update(req->app->store, ns, id, body, &node);
  json_decref(body);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no global node has id '%s'", id);
  log_info("memory %s: global node %s edited", ns, id);
  return reply_json(req, 200, node);
}

/* ?cascade=true|false (default false); anything else queues 400 and returns -1. */
static int parse_cascade(struct request *req, bool *ret_cascade, enum MHD_Result *ret_result) {
  const char *v = request_query(req, "cascade");
  if (!v || strcmp(v, "false") == 0) {
    *ret_cascade = false;
    return 0;
  }
  if (strcmp(v, "true") == 0) {
    *ret_cascade = true;
    return 0;
  }
  *ret_result = reply_error(req, API_ERR_INVALID_QUERY, "cascade",
                            "cascade must be true or false");
  return -1;
}

enum MHD_Result handle_memory_global_delete(struct request *req) {
  enum MHD_Result result;
  const char *id = memory_require_id(req, 0, "id", &result);
  bool cascade = false;
  if (!id || parse_cascade(req, &cascade, &result) != 0)
    return result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  int rc = store_memory_global_delete(req->app->store, ns, id, cascade);
  if (rc == STORE_CONFLICT)
    return reply_error(req, API_ERR_HAS_CHILDREN, NULL,
                       "global node %s has local nodes; delete them or pass ?cascade=true", id);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_MEMORY_NOT_FOUND,
                                "no global node has id '%s'", id);
  log_info("memory %s: global node %s deleted%s", ns, id,
           cascade ? " with its local nodes" : "");
  return reply_empty(req, 204);
}
