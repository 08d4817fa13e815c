/* /v1/memory/edges[/{from}/{to}]: the transition edges between global directions. */
#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "server/app.h"
#include "base/log.h"
#include "server/reply.h"

/* ?name= as a node id filter: absent gives NULL; malformed queues 400 and returns -1. */
static int id_filter(struct request *req, const char *name, const char **ret_id,
                     enum MHD_Result *ret_result) {
  const char *v = request_query(req, name);
  if (v && !memory_id_valid(v)) {
    *ret_result = reply_error(req, API_ERR_INVALID_QUERY, name,
                              "%s must match ^[a-z][a-z0-9_]{1,63}$", name);
    return -1;
  }
  *ret_id = v;
  return 0;
}

enum MHD_Result handle_memory_edges_list(struct request *req) {
  enum MHD_Result result;
  const char *from = NULL, *to = NULL;
  if (id_filter(req, "from", &from, &result) != 0 || id_filter(req, "to", &to, &result) != 0)
    return result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *items = NULL;
  int rc = store_memory_edge_list(req->app->store, ns, from, to, &items);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_EDGE_NOT_FOUND);
  json_t *page = json_pack("{s:o}", "items", items);
  return page ? reply_json(req, 200, page) : MHD_NO;
}

enum MHD_Result handle_memory_edge_create(struct request *req) {
  enum MHD_Result result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *body = memory_parse_body(req, memory_check_edge, MEMORY_CREATE, &result);
  if (!body)
    return result;
  struct memory_invalid why;
  json_t *edge = NULL;
  int rc = store_memory_edge_create(req->app->store, ns, body, &why, &edge);
  json_decref(body);
  if (rc == STORE_CONFLICT || rc == STORE_INVALID)
    return memory_reply_invalid(req, &why);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_EDGE_NOT_FOUND);
  const char *from = json_string_value(json_object_get(edge, "from"));
  const char *to = json_string_value(json_object_get(edge, "to"));
  log_info("memory %s: edge %s -> %s created", ns, from, to);
  return memory_reply_created(req, edge, "/v1/memory/edges/%s/%s", from, to);
}

/* The {from} and {to} path parameters; false after queueing 400 invalid_id. */
static bool edge_params(struct request *req, const char **ret_from, const char **ret_to,
                        enum MHD_Result *ret_result) {
  *ret_from = memory_require_id(req, 0, "from", ret_result);
  *ret_to = *ret_from ? memory_require_id(req, 1, "to", ret_result) : NULL;
  return *ret_to != NULL;
}

/* The edge parameters and the namespace; NULL after queueing the error. */
static const char *edge_request(struct request *req, const char **ret_from, const char **ret_to,
                                enum MHD_Result *ret_result) {
  return edge_params(req, ret_from, ret_to, ret_result)
             ? memory_require_namespace(req, ret_result)
             : NULL;
}

enum MHD_Result handle_memory_edge_get(struct request *req) {
  enum MHD_Result result;
  const char *from, *to;
  const char *ns = edge_request(req, &from, &to, &result);
  if (!ns)
    return result;
  json_t *edge = NULL;
  int rc = store_memory_edge_get(req->app->store, ns, from, to, &edge);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_EDGE_NOT_FOUND, "no edge %s -> %s", from, to);
  return reply_json(req, 200, edge);
}

enum MHD_Result handle_memory_edge_update(struct request *req) {
  enum MHD_Result result;
  const char *from, *to;
  const char *ns = edge_request(req, &from, &to, &result);
  if (!ns)
    return result;
  json_t *body = memory_parse_body(req, memory_check_edge, MEMORY_PATCH, &result);
  if (!body)
    return result;
  json_t *edge = NULL;
  int rc = store_memory_edge_update(req->app->store, ns, from, to, body, &edge);
  json_decref(body);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_EDGE_NOT_FOUND, "no edge %s -> %s", from, to);
  log_info("memory %s: edge %s -> %s edited", ns, from, to);
  return reply_json(req, 200, edge);
}

enum MHD_Result handle_memory_edge_delete(struct request *req) {
  enum MHD_Result result;
  const char *from, *to;
  const char *ns = edge_request(req, &from, &to, &result);
  if (!ns)
    return result;
  int rc = store_memory_edge_delete(req->app->store, ns, from, to);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_EDGE_NOT_FOUND, "no edge %s -> %s", from, to);
  log_info("memory %s: edge %s -> %s deleted", ns, from, to);
  return reply_empty(req, 204);
}
