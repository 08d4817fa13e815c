/* The table of API error codes (see errors.h). */
#include "base/errors.h"

#include <string.h>

static const struct api_error_info error_table[API_ERR__COUNT] = {
  [API_ERR_BAD_JSON] = {"bad_json", 400},
  [API_ERR_UNKNOWN_FIELD] = {"unknown_field", 400},
  [API_ERR_INVALID_FIELD] = {"invalid_field", 400},
  [API_ERR_MISSING_FIELD] = {"missing_field", 400},
  [API_ERR_INVALID_REFERENCE] = {"invalid_reference", 400},
  [API_ERR_INVALID_ID] = {"invalid_id", 400},
  [API_ERR_INVALID_QUERY] = {"invalid_query", 400},
  [API_ERR_INVALID_CURSOR] = {"invalid_cursor", 400},
  [API_ERR_UNAUTHORIZED] = {"unauthorized", 401},
  [API_ERR_FORBIDDEN] = {"forbidden", 403},
  [API_ERR_NOT_FOUND] = {"not_found", 404},
  [API_ERR_TASK_NOT_FOUND] = {"task_not_found", 404},
  [API_ERR_CANDIDATE_NOT_FOUND] = {"candidate_not_found", 404},
  [API_ERR_METHOD_NOT_ALLOWED] = {"method_not_allowed", 405},
  [API_ERR_TASK_FINISHED] = {"task_finished", 409},
  [API_ERR_TASK_RUNNING] = {"task_running", 409},
  [API_ERR_CONFLICT] = {"conflict", 409},
  [API_ERR_BODY_TOO_LARGE] = {"body_too_large", 413},
  [API_ERR_URL_TOO_LONG] = {"url_too_long", 414},
  [API_ERR_UNSUPPORTED_MEDIA] = {"unsupported_media_type", 415},
  [API_ERR_TOO_MANY_REQUESTS] = {"too_many_requests", 429},
  [API_ERR_INTERNAL] = {"internal", 500},
  [API_ERR_STORE_BUSY] = {"store_busy", 503},
  [API_ERR_INSUFFICIENT_STORAGE] = {"insufficient_storage", 507},
  [API_ERR_NOT_READY] = {"not_ready", 503},
  [API_ERR_SHUTTING_DOWN] = {"shutting_down", 503},
  [API_ERR_MEMORY_NOT_FOUND] = {"memory_node_not_found", 404},
  [API_ERR_EDGE_NOT_FOUND] = {"edge_not_found", 404},
  [API_ERR_HAS_CHILDREN] = {"has_local_nodes", 409},
  [API_ERR_ALREADY_EXISTS] = {"already_exists", 409},
  [API_ERR_INVALID_IMPORT] = {"invalid_import", 400},
  [API_ERR_NO_CORRECT_CANDIDATE] = {"no_correct_candidate", 409},
  [API_ERR_NOT_PURE] = {"not_pure", 409},
  [API_ERR_NO_GENERATED_CANDIDATE] = {"no_generated_candidate", 409},
  [API_ERR_NO_ELEMENTWISE_CANDIDATE] = {"no_elementwise_candidate", 409},
  [API_ERR_SKILL_NOT_FOUND] = {"skill_not_found", 404},
  [API_ERR_TASK_NOT_FINISHED] = {"task_not_finished", 409},
  [API_ERR_NAMESPACE_NOT_FOUND] = {"memory_namespace_not_found", 404},
  [API_ERR_CROSS_SITE_REFUSED] = {"cross_site_refused", 403},
  [API_ERR_HOST_NOT_ALLOWED] = {"host_not_allowed", 421},
  [API_ERR_INVALID_HEADER] = {"invalid_header", 400},
  [API_ERR_NOT_EXPORTABLE] = {"not_exportable", 409},
  [API_ERR_IDEMPOTENCY_CONFLICT] = {"idempotency_conflict", 409},
  [API_ERR_STORE_UNAVAILABLE] = {"store_unavailable", 503},
};

const struct api_error_info *api_error_info(enum api_error err) {
  if ((unsigned)err >= API_ERR__COUNT)
    return &error_table[API_ERR_INTERNAL];
  return &error_table[err];
}

enum api_error api_error_from_code(const char *code) {
  for (unsigned i = 0; i < API_ERR__COUNT; i++)
    if (strcmp(error_table[i].code, code) == 0)
      return (enum api_error)i;
  return API_ERR__COUNT;
}
