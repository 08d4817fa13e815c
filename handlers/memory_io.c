/* /v1/memory/export, /v1/memory/import and /v1/memory/reset: the whole memory at once. */
#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "server/app.h"
#include "server/body.h"
#include "base/log.h"
#include "server/reply.h"

enum MHD_Result handle_memory_export(struct request *req) {
  enum MHD_Result result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *doc = NULL;
  int rc = store_memory_export(req->app->store, ns, &doc);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_MEMORY_NOT_FOUND);
  return reply_json(req, 200, doc);
}

/* The whole document is checked before anything changes; the first problem is the
 * answer, naming its field ("locals[3].global"): a reference to a node the document does
 * not define is 404 memory_node_not_found and an id given twice 409 already_exists, as
 * for single records; anything else 400 invalid_import. */
enum MHD_Result handle_memory_import(struct request *req) {
  enum MHD_Result result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *doc = body_parse_object(req, &result);
  if (!doc)
    return result;
  struct memory_invalid why;
  json_t *counts = NULL;
  int rc = store_memory_import(req->app->store, ns, doc, &why, &counts);
  json_decref(doc);
  if (rc == STORE_INVALID) {
    enum api_error code = why.problem == MEMORY_PROBLEM_REFERENCE   ? API_ERR_MEMORY_NOT_FOUND
                          : why.problem == MEMORY_PROBLEM_DUPLICATE ? API_ERR_ALREADY_EXISTS
                                                                    : API_ERR_INVALID_IMPORT;
    return reply_error(req, code, why.field[0] ? why.field : NULL, "%s", why.message);
  }
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_MEMORY_NOT_FOUND);
  log_info("memory %s: imported %lld global, %lld local nodes, %lld edges", ns,
           (long long)json_integer_value(json_object_get(counts, "globals")),
           (long long)json_integer_value(json_object_get(counts, "locals")),
           (long long)json_integer_value(json_object_get(counts, "edges")));
  return reply_json(req, 200, counts);
}

enum MHD_Result handle_memory_reset(struct request *req) {
  enum MHD_Result result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *counts = NULL;
  int rc = store_memory_reset(req->app->store, ns, &counts);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_NAMESPACE_NOT_FOUND);
  log_info("memory %s: reset to the seed", ns);
  return reply_json(req, 200, counts);
}
