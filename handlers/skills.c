/* /v1/skills[/{id}]: list, create, show, edit (enable, disable) and delete skill rules. */
#include "handlers/skills.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "schema/memory_vocab.h"
#include "server/app.h"
#include "server/reply.h"
#include "store/skills.h"

/* The largest rule id the path takes: every id of the spec's pattern, 1 to 16 digits
 * (SkillId); one that names no rule is then 404 skill_not_found. */
#define SKILL_ID_MAX 9999999999999999LL

/* The path's rule id (1 to 16 decimal digits, no sign or leading zero); else queues 400
 * invalid_id and returns 0 (the caller returns *ret_result). */
static long long require_skill_id(struct request *req, enum MHD_Result *ret_result) {
  const char *s = req->n_params > 0 ? req->params[0] : NULL;
  long long id = 0;
  if (parse_decimal(s, 1, SKILL_ID_MAX, &id))
    return id;
  *ret_result = reply_error(req, API_ERR_INVALID_ID, "id",
                            "id must be a positive integer of at most 16 digits");
  return 0;
}

/* Parses the body and checks it as a rule in mode (as memory_parse_body does). */
static json_t *parse_rule(struct request *req, enum memory_mode mode, enum MHD_Result *ret_result) {
  return memory_parse_body(req, skill_check, mode, ret_result);
}

enum MHD_Result handle_skills_list(struct request *req) {
  const char *family = request_query(req, "family");
  const char *enabled = request_query(req, "enabled");
  if (family && !htam_family_known(family))
    return reply_error(req, API_ERR_INVALID_QUERY, "family", "family must be an op family");
  int want = -1;
  if (enabled && strcmp(enabled, "true") == 0)
    want = 1;
  else if (enabled && strcmp(enabled, "false") == 0)
    want = 0;
  else if (enabled)
    return reply_error(req, API_ERR_INVALID_QUERY, "enabled", "enabled must be true or false");
  json_t *items = NULL;
  int rc = store_skills_list(req->app->store, family, want, &items);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_SKILL_NOT_FOUND);
  json_t *page = json_pack("{s:o}", "items", items);
  return page ? reply_json(req, 200, page) : MHD_NO;
}

enum MHD_Result handle_skill_create(struct request *req) {
  enum MHD_Result result = MHD_NO;
  json_t *body = parse_rule(req, MEMORY_CREATE, &result);
  if (!body)
    return result;
  json_t *skill = NULL;
  int rc = store_skill_create(req->app->store, body, &skill);
  json_decref(body);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_SKILL_NOT_FOUND);
  long long id = (long long)json_integer_value(json_object_get(skill, "id"));
  log_info("skills: rule %lld created", id);
  return memory_reply_created(req, skill, "/v1/skills/%lld", id);
}

enum MHD_Result handle_skill_get(struct request *req) {
  enum MHD_Result result = MHD_NO;
  long long id = require_skill_id(req, &result);
  if (!id)
    return result;
  json_t *skill = NULL;
  int rc = store_skill_get(req->app->store, id, &skill);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_SKILL_NOT_FOUND, "no skill rule has id %lld", id);
  return reply_json(req, 200, skill);
}

enum MHD_Result handle_skill_update(struct request *req) {
  enum MHD_Result result = MHD_NO;
  long long id = require_skill_id(req, &result);
  if (!id)
    return result;
  json_t *body = parse_rule(req, MEMORY_PATCH, &result);
  if (!body)
    return result;
  struct memory_invalid why;
  json_t *skill = NULL;
  int rc = store_skill_update(req->app->store, id, body, &why, &skill);
  json_decref(body);
  if (rc == STORE_CONFLICT)
    return memory_reply_invalid(req, &why);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_SKILL_NOT_FOUND, "no skill rule has id %lld", id);
  log_info("skills: rule %lld edited", id);
  return reply_json(req, 200, skill);
}

enum MHD_Result handle_skill_delete(struct request *req) {
  enum MHD_Result result = MHD_NO;
  long long id = require_skill_id(req, &result);
  if (!id)
    return result;
  int rc = store_skill_delete(req->app->store, id);
  if (rc != STORE_OK)
    return memory_reply_failure(req, rc, API_ERR_SKILL_NOT_FOUND, "no skill rule has id %lld", id);
  log_info("skills: rule %lld deleted", id);
  return reply_empty(req, 204);
}
