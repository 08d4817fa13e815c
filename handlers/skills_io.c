/* /v1/skills/export, /v1/skills/import and /v1/skills/adapt: the skill memory at once, and
 * an adaptation pass over finished tasks. */
#include <stdio.h>
#include <string.h>

#include "base/ids.h"
#include "base/log.h"
#include "engine/skills.h"
#include "handlers/handlers.h"
#include "handlers/skills.h"
#include "server/app.h"
#include "server/body.h"
#include "server/config.h"
#include "server/reply.h"

/* Tasks one adaptation pass may name. */
#define ADAPT_TASKS_MAX 64

enum MHD_Result handle_skills_export(struct request *req) {
  json_t *doc = NULL;
  int rc = store_skills_export(req->app->store, &doc);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_SKILL_NOT_FOUND);
  return reply_json(req, 200, doc);
}

/* The whole document is checked before anything changes; any refusal is one
 * invalid_import naming the first bad field ("skills[3].constraint.op"). */
enum MHD_Result handle_skills_import(struct request *req) {
  enum MHD_Result result;
  json_t *doc = body_parse_object(req, &result);
  if (!doc)
    return result;
  struct memory_invalid why;
  json_t *counts = NULL;
  int rc = store_skills_import(req->app->store, doc, &why, &counts);
  json_decref(doc);
  if (rc == STORE_INVALID)
    return reply_error(req, API_ERR_INVALID_IMPORT, why.field[0] ? why.field : NULL, "%s",
                       why.message);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_SKILL_NOT_FOUND);
  log_info("skills: imported %lld rule(s) with %lld example(s)",
           (long long)json_integer_value(json_object_get(counts, "skills")),
           (long long)json_integer_value(json_object_get(counts, "examples")));
  return reply_json(req, 200, counts);
}

/* {"tasks": [1..ADAPT_TASKS_MAX distinct task ids]}: the ids (borrowed from body), or
 * queues the 400 and returns NULL. */
static json_t *adapt_tasks(struct request *req, json_t *body, enum MHD_Result *ret_result) {
  const char *key;
  json_t *v;
  json_object_foreach(body, key, v) {
    if (strcmp(key, "tasks") != 0) {
      *ret_result = reply_error(req, API_ERR_UNKNOWN_FIELD, key, "%s: unknown key", key);
      return NULL;
    }
  }
  json_t *tasks = json_object_get(body, "tasks");
  if (!tasks) {
    *ret_result = reply_error(req, API_ERR_MISSING_FIELD, "tasks", "tasks: is required");
    return NULL;
  }
  if (!json_is_array(tasks) || json_array_size(tasks) < 1 ||
      json_array_size(tasks) > ADAPT_TASKS_MAX) {
    *ret_result = reply_error(req, API_ERR_INVALID_FIELD, "tasks",
                              "tasks: must be an array of 1..%d task ids", ADAPT_TASKS_MAX);
    return NULL;
  }
  size_t i, j;
  json_array_foreach(tasks, i, v) {
    char field[32];
    snprintf(field, sizeof field, "tasks[%zu]", i);
    const char *id = json_string_value(v);
    bool twice = false;
    for (j = 0; id && j < i; j++)
      twice = twice || strcmp(id, json_string_value(json_array_get(tasks, j))) == 0;
    if (!id || !id_valid(id) || twice) {
      *ret_result = reply_error(req, API_ERR_INVALID_FIELD, field, "%s: %s", field,
                                twice ? "is listed twice" : "must be a task id (a UUID)");
      return NULL;
    }
  }
  return tasks;
}

/* Runs in the request's thread: with an LLM it makes at most SKILLS_ADAPT_LLM_MAX pairs of
 * calls, each under the client's timeouts; without one it only reads and writes the
 * store. */
enum MHD_Result handle_skills_adapt(struct request *req) {
  enum MHD_Result result;
  json_t *body = body_parse_object(req, &result);
  if (!body)
    return result;
  json_t *tasks = adapt_tasks(req, body, &result);
  if (!tasks) {
    json_decref(body);
    return result;
  }
  json_t *report = NULL;
  const char *which = NULL;
  int rc = skills_adapt(req->app->store, &req->app->cfg->llm, tasks, &report, &which);
  if (rc == STORE_NOT_FOUND)
    result = reply_error(req, API_ERR_TASK_NOT_FOUND, "tasks", "no task has id %s",
                         which ? which : "?");
  else if (rc == STORE_CONFLICT)
    result = reply_error(req, API_ERR_TASK_NOT_FINISHED, "tasks",
                         "task %s has not finished; adapt over finished tasks only",
                         which ? which : "?");
  else if (rc != STORE_OK)
    result = reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  else
    result = reply_json(req, 200, report);
  json_decref(body);
  return result;
}
