/* /v1/memory/namespaces[/{name}]: list, create (from the seed, empty, or a copy of
 * another namespace), show and delete memory namespaces. */
#include <string.h>

#include "base/log.h"
#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "server/app.h"
#include "server/body.h"
#include "server/reply.h"

#define NAME_RULE "^[a-z0-9][a-z0-9_-]{0,63}$, not seed or empty"

enum MHD_Result handle_memory_namespaces_list(struct request *req) {
  json_t *items = NULL;
  int rc = store_memory_namespace_list(req->app->store, &items);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_NAMESPACE_NOT_FOUND);
  json_t *page = json_pack("{s:o}", "items", items);
  return page ? reply_json(req, 200, page) : MHD_NO;
}

/* Checks the body {"name", "from"} (from defaults to "seed"). Returns 0 with the
 * strings borrowed from body, or queues the 400 and returns -1. */
static int parse_create(struct request *req, json_t *body, const char **ret_name,
                        const char **ret_from, enum MHD_Result *ret_result) {
  const char *key;
  json_t *value;
  json_object_foreach(body, key, value) {
    if (strcmp(key, "name") != 0 && strcmp(key, "from") != 0) {
      *ret_result = reply_error(req, API_ERR_UNKNOWN_FIELD, key, "%s is not a known field", key);
      return -1;
    }
  }
  json_t *name = json_object_get(body, "name"), *from = json_object_get(body, "from");
  if (!name) {
    *ret_result = reply_error(req, API_ERR_MISSING_FIELD, "name", "name is required");
    return -1;
  }
  if (!store_memory_namespace_valid(json_string_value(name))) {
    *ret_result = reply_error(req, API_ERR_INVALID_FIELD, "name", "name must match " NAME_RULE);
    return -1;
  }
  const char *f = from ? json_string_value(from) : "seed";
  if (!f || (strcmp(f, "seed") != 0 && strcmp(f, "empty") != 0 &&
             !store_memory_namespace_valid(f))) {
    *ret_result = reply_error(req, API_ERR_INVALID_FIELD, "from",
                              "from must be seed, empty or a namespace name");
    return -1;
  }
  *ret_name = json_string_value(name);
  *ret_from = f;
  return 0;
}

enum MHD_Result handle_memory_namespace_create(struct request *req) {
  enum MHD_Result result = MHD_NO;
  json_t *body = body_parse_object(req, &result);
  if (!body)
    return result;
  const char *name, *from;
  if (parse_create(req, body, &name, &from, &result) != 0) {
    json_decref(body);
    return result;
  }
  json_t *ns = NULL;
  int rc = store_memory_namespace_create(req->app->store, name, from, &ns);
  if (rc == STORE_CONFLICT)
    result = reply_error(req, API_ERR_ALREADY_EXISTS, "name",
                         "a memory namespace named '%s' exists", name);
  else if (rc == STORE_NOT_FOUND)
    result = reply_error(req, API_ERR_NAMESPACE_NOT_FOUND, "from",
                         "no memory namespace is named '%s'", from);
  else if (rc != STORE_OK)
    result = reply_store_failure(req, rc, API_ERR_NAMESPACE_NOT_FOUND);
  else {
    log_info("memory: namespace %s created from %s", name, from);
    result = memory_reply_created(req, ns, "/v1/memory/namespaces/%s", name);
  }
  json_decref(body);
  return result;
}

/* The {name} path parameter; NULL after queueing 400 invalid_id. */
static const char *name_param(struct request *req, enum MHD_Result *ret_result) {
  const char *name = req->n_params > 0 ? req->params[0] : NULL;
  if (store_memory_namespace_valid(name))
    return name;
  *ret_result = reply_error(req, API_ERR_INVALID_ID, "name", "name must match " NAME_RULE);
  return NULL;
}

enum MHD_Result handle_memory_namespace_get(struct request *req) {
  enum MHD_Result result = MHD_NO;
  const char *name = name_param(req, &result);
  if (!name)
    return result;
  json_t *ns = NULL;
  int rc = store_memory_namespace_get(req->app->store, name, &ns);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_NAMESPACE_NOT_FOUND,
                                "no memory namespace is named '%s'", name);
  return reply_json(req, 200, ns);
}

enum MHD_Result handle_memory_namespace_delete(struct request *req) {
  enum MHD_Result result = MHD_NO;
  const char *name = name_param(req, &result);
  if (!name)
    return result;
  if (strcmp(name, MEMORY_DEFAULT_NAMESPACE) == 0)
    return reply_error(req, API_ERR_CONFLICT, "name",
                       "the default namespace cannot be deleted; reset it instead");
  int rc = store_memory_namespace_delete(req->app->store, name);
  if (rc == STORE_CONFLICT)
    return reply_error(req, API_ERR_CONFLICT, "name",
                       "a queued or running task uses memory namespace '%s'", name);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_NAMESPACE_NOT_FOUND,
                                "no memory namespace is named '%s'", name);
  log_info("memory: namespace %s deleted", name);
  return reply_empty(req, 204);
}
