/* /v1/tasks: submit, list, show, cancel and delete tasks. */
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/submission.h"
#include "engine/workers.h"
#include "handlers/handlers.h"
#include "server/app.h"
#include "server/body.h"
#include "server/event_bus.h"
#include "base/ids.h"
#include "base/log.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "store/tasks.h"

#define LIST_DEFAULT_LIMIT 50
#define LIST_MAX_LIMIT 500

enum MHD_Result handle_tasks_create(struct request *req) {
  enum MHD_Result result;
  json_t *body = body_parse_object(req, &result);
  if (!body)
    return result;
  struct submission sub = {0};
  struct validation_error verr;
  if (submission_parse(body, &sub, &verr) != 0 ||
      submission_resolve(&sub, req->app->store, req->app->search, &verr) != 0) {
    if (verr.code == API_ERR_INVALID_REFERENCE && strstr(verr.message, "limit"))
      metrics_limit_tripped(req->app->metrics, LIMIT_REFERENCE);
    result = reply_error(req, verr.code, verr.field[0] ? verr.field : NULL, "%s", verr.message);
    submission_clear(&sub);
    json_decref(body);
    return result;
  }
  char id[ID_LEN + 1];
  id_new(id);
  json_t *task = NULL;
  int rc = store_task_insert(req->app->store, id, sub.name, sub.options, sub.reference, &task);
  submission_clear(&sub);
  json_decref(body);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  event_bus_notify(req->app->bus, id);
  workers_kick(req->app->workers);
  log_info("task %s submitted", id);
  char location[64];
  snprintf(location, sizeof location, "/v1/tasks/%s", id);
  return reply_json_with_header(req, 202, task, MHD_HTTP_HEADER_LOCATION, location);
}

/* Parses ?limit= (1..LIST_MAX_LIMIT); queues 400 and returns -1 when malformed. */
static int parse_limit(struct request *req, int *ret_limit, enum MHD_Result *ret_result) {
  long long v;
  if (query_integer(req, "limit", 1, LIST_MAX_LIMIT, LIST_DEFAULT_LIMIT, &v, ret_result) != 0) {
    /* Only a well-formed page size over the cap is the limit tripping; "abc" or 0 is a
     * malformed parameter (400 all the same). */
    const char *text = request_query(req, "limit");
    long long asked;
    if (parse_decimal(text, 0, LLONG_MAX, &asked) && asked > LIST_MAX_LIMIT)
      metrics_limit_tripped(req->app->metrics, LIMIT_PAGE);
    return -1;
  }
  *ret_limit = (int)v;
  return 0;
}

static bool status_known(const char *s) {
  static const char *const known[] = {"queued", "running", "succeeded", "failed", "cancelled"};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(s, known[i]) == 0)
      return true;
  return false;
}

enum MHD_Result handle_tasks_list(struct request *req) {
  enum MHD_Result result;
  int limit;
  if (parse_limit(req, &limit, &result) != 0)
    return result;
  const char *status = request_query(req, "status");
  if (status && !status_known(status))
    return reply_error(req, API_ERR_INVALID_QUERY, "status",
                       "status must be one of queued, running, succeeded, failed, cancelled");
  const char *cursor = request_query(req, "cursor");
  json_t *items = NULL;
  char *next = NULL;
  int rc = store_task_list(req->app->store, status, limit, cursor, &items, &next);
  if (rc == STORE_INVALID)
    return reply_error(req, API_ERR_INVALID_CURSOR, "cursor",
                       "cursor must be a next_cursor value: 'c' and a hex number");
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  json_t *page = json_pack("{s:o, s:s?}", "items", items, "next_cursor", next);
  free(next);
  return page ? reply_json(req, 200, page) : MHD_NO;
}

enum MHD_Result handle_task_get(struct request *req) {
  enum MHD_Result result;
  const char *id = require_id_param(req, 0, "id", &result);
  if (!id)
    return result;
  json_t *task = NULL;
  int rc = store_task_get(req->app->store, id, true, &task);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  return reply_json(req, 200, task);
}

enum MHD_Result handle_task_cancel(struct request *req) {
  enum MHD_Result result;
  const char *id = require_id_param(req, 0, "id", &result);
  if (!id)
    return result;
  json_t *task = NULL;
  int rc = store_task_cancel(req->app->store, id, &task);
  if (rc == STORE_CONFLICT)
    return reply_error(req, API_ERR_TASK_FINISHED, NULL, "task %s has already finished", id);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  event_bus_notify(req->app->bus, id);
  log_info("task %s cancel requested", id);
  return reply_json(req, 200, task);
}

enum MHD_Result handle_task_delete(struct request *req) {
  enum MHD_Result result;
  const char *id = require_id_param(req, 0, "id", &result);
  if (!id)
    return result;
  int rc = store_task_delete(req->app->store, id);
  if (rc == STORE_CONFLICT)
    return reply_error(req, API_ERR_TASK_RUNNING, NULL,
                       "task %s is running; cancel it first", id);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  event_bus_notify(req->app->bus, id);
  log_info("task %s deleted", id);
  return reply_empty(req, 204);
}
