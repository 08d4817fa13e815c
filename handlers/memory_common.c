/* Helpers shared by the /v1/memory handlers: node id parameters, body checks, errors. */
#include <stdarg.h>
#include <stdio.h>

#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "server/app.h"
#include "server/body.h"
#include "server/reply.h"

const char *memory_require_id(struct request *req, unsigned index, const char *name,
                              enum MHD_Result *ret_result) {
  const char *id = index < req->n_params ? req->params[index] : NULL;
  if (memory_id_valid(id))
    return id;
  *ret_result = reply_error(req, API_ERR_INVALID_ID, name,
                            "%s must match ^[a-z][a-z0-9_]{1,63}$", name);
  return NULL;
}

const char *memory_require_namespace(struct request *req, enum MHD_Result *ret_result) {
  const char *ns = request_query(req, "memory");
  if (!ns)
    ns = MEMORY_DEFAULT_NAMESPACE;
  if (!store_memory_namespace_valid(ns)) {
    *ret_result = reply_error(req, API_ERR_INVALID_QUERY, "memory",
                              "memory must match ^[a-z0-9][a-z0-9_-]{0,63}$ (not seed or empty)");
    return NULL;
  }
  json_t *found = NULL;
  int rc = store_memory_namespace_get(req->app->store, ns, &found);
  json_decref(found);
  if (rc == STORE_OK)
    return ns;
  *ret_result = rc == STORE_NOT_FOUND
                    ? reply_error(req, API_ERR_NAMESPACE_NOT_FOUND, "memory",
                                  "no memory namespace is named '%s'", ns)
                    : reply_store_failure(req, rc, API_ERR_NAMESPACE_NOT_FOUND);
  return NULL;
}

enum MHD_Result memory_reply_invalid(struct request *req, const struct memory_invalid *why) {
  enum api_error code = API_ERR_INVALID_FIELD;
  switch (why->problem) {
  case MEMORY_PROBLEM_UNKNOWN: code = API_ERR_UNKNOWN_FIELD; break;
  case MEMORY_PROBLEM_MISSING: code = API_ERR_MISSING_FIELD; break;
  case MEMORY_PROBLEM_REFERENCE: code = API_ERR_MEMORY_NOT_FOUND; break;
  case MEMORY_PROBLEM_DUPLICATE: code = API_ERR_ALREADY_EXISTS; break;
  case MEMORY_PROBLEM_INVALID: break;
  }
  return reply_error(req, code, why->field[0] ? why->field : NULL, "%s", why->message);
}

json_t *memory_parse_body(struct request *req, memory_check_fn check, enum memory_mode mode,
                          enum MHD_Result *ret_result) {
  json_t *body = body_parse_object(req, ret_result);
  if (!body)
    return NULL;
  struct memory_invalid why;
  if (check(body, mode, "", &why) != 0) {
    *ret_result = memory_reply_invalid(req, &why);
    json_decref(body);
    return NULL;
  }
  return body;
}

enum MHD_Result memory_reply_failure(struct request *req, int store_rc,
                                     enum api_error not_found, const char *fmt, ...) {
  if (store_rc != STORE_NOT_FOUND)
    return reply_store_failure(req, store_rc, not_found);
  char message[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return reply_error(req, not_found, NULL, "%s", message);
}

enum MHD_Result memory_reply_created(struct request *req, json_t *record, const char *fmt, ...) {
  char location[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(location, sizeof location, fmt, ap);
  va_end(ap);
  return reply_json_with_header(req, 201, record, MHD_HTTP_HEADER_LOCATION, location);
}
