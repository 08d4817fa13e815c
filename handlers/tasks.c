/* /v1/tasks: submit, list, show, cancel and delete tasks. */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handlers/submission.h"
#include "engine/workers.h"
#include "handlers/handlers.h"
#include "server/app.h"
#include "server/body.h"
#include "server/event_bus.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/sha256.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "store/idempotency.h"
#include "store/servers.h"
#include "store/tasks.h"

#define LIST_DEFAULT_LIMIT 50
#define LIST_MAX_LIMIT 500

/* ---- POST /v1/tasks, with an optional Idempotency-Key ---- */

#define IDEMPOTENCY_HEADER "Idempotency-Key"

/* Whether key is 1..STORE_IDEMPOTENCY_KEY_MAX visible ASCII characters (0x21-0x7E). */
static bool idempotency_key_valid(const char *key) {
  size_t len = strlen(key);
  if (len == 0 || len > STORE_IDEMPOTENCY_KEY_MAX)
    return false;
  for (size_t i = 0; i < len; i++)
    if (key[i] < 0x21 || key[i] > 0x7e)
      return false;
  return true;
}

/* The SHA-256 (hex) of body's canonical JSON: compact, keys sorted, so key order and
 * spacing do not make two submissions differ. -1 when out of memory. */
static int body_digest(const json_t *body, char ret_hex[SHA256_HEX_BYTES]) {
  char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
  if (!text)
    return -1;
  sha256_hex(text, strlen(text), ret_hex);
  free(text);
  return 0;
}

/* Unix milliseconds (keys are compared with times stored by earlier processes). */
static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Queues the answer to a submission: the task (taken over) with Location, as 202 when
 * it was just created and 200 when an Idempotency-Key replayed it. */
static enum MHD_Result reply_task(struct request *req, unsigned status, json_t *task) {
  char location[128];
  snprintf(location, sizeof location, "/v1/tasks/%s",
           json_string_value(json_object_get(task, "id")));
  return reply_json_with_header(req, status, task, MHD_HTTP_HEADER_LOCATION, location);
}

/* Answers a submission whose key is held: 200 with its task when digest is the one it
 * was stored with, 409 idempotency_conflict otherwise. Returns true with *ret_result set
 * when it answered (a store failure too), false when the key is free. */
static bool answer_held_key(struct request *req, const char *key, const char *digest,
                            enum MHD_Result *ret_result) {
  struct store_idempotency held;
  int rc = store_idempotency_find(req->app->store, key, wall_ms(), &held);
  json_t *task = NULL;
  if (rc == STORE_OK && strcmp(held.digest, digest) != 0) {
    *ret_result = reply_error(req, API_ERR_IDEMPOTENCY_CONFLICT, IDEMPOTENCY_HEADER,
                              "this Idempotency-Key was used with another submission "
                              "(task %s) in the last 24 hours; use a new key",
                              held.task_id);
    return true;
  }
  if (rc == STORE_OK)
    rc = store_task_get(req->app->store, held.task_id, false, &task);
  if (rc == STORE_NOT_FOUND)  /* no key, or its task was deleted a moment ago */
    return false;
  if (rc != STORE_OK) {
    *ret_result = reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
    return true;
  }
  log_info("task %s: submission replayed by its Idempotency-Key", held.task_id);
  *ret_result = reply_task(req, 200, task);
  return true;
}

/* Validates and stores the submission in body (borrowed), under key when not NULL.
 * Queues the answer and returns it. */
static enum MHD_Result create_task(struct request *req, json_t *body, const char *key,
                                   const char *digest) {
  struct submission sub = {0};
  struct validation_error verr;
  if (submission_parse(body, &sub, &verr) != 0 ||
      submission_resolve(&sub, req->app->store, req->app->search, &verr) != 0) {
    if (verr.code == API_ERR_INVALID_REFERENCE && strstr(verr.message, "limit"))
      metrics_limit_tripped(req->app->metrics, LIMIT_REFERENCE);
    submission_clear(&sub);
    if (verr.code == API_ERR_STORE_BUSY || verr.code == API_ERR_STORE_UNAVAILABLE)
      return reply_error_with_header(req, verr.code, "Retry-After",
                                     verr.code == API_ERR_STORE_BUSY ? "1" : "5", "%s",
                                     verr.message);
    return reply_error(req, verr.code, verr.field[0] ? verr.field : NULL, "%s", verr.message);
  }
  char id[ID_LEN + 1];
  id_new(id);
  json_t *task = NULL;
  int rc = key ? store_idempotency_insert_task(req->app->store, key, digest, wall_ms(), id,
                                               sub.name, sub.options, sub.reference, &task)
               : store_task_insert(req->app->store, id, sub.name, sub.options, sub.reference,
                                   &task);
  submission_clear(&sub);
  enum MHD_Result result;
  if (rc == STORE_CONFLICT && key && answer_held_key(req, key, digest, &result))
    return result;  /* a concurrent submission with the key was stored first */
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  event_bus_notify(req->app->bus, id);
  workers_kick(req->app->workers);
  log_info("task %s submitted", id);
  return reply_task(req, 202, task);
}

/* A held key is looked up before the body is validated: a retry gets its task back even
 * when something the validation reads (a memory namespace) changed since. */
enum MHD_Result handle_tasks_create(struct request *req) {
  const char *key = request_header(req, IDEMPOTENCY_HEADER);
  if (key && !idempotency_key_valid(key))
    return reply_error(req, API_ERR_INVALID_HEADER, IDEMPOTENCY_HEADER,
                       IDEMPOTENCY_HEADER " must be 1 to %d visible ASCII characters",
                       STORE_IDEMPOTENCY_KEY_MAX);
  enum MHD_Result result;
  json_t *body = body_parse_object(req, &result);
  if (!body)
    return result;
  char digest[SHA256_HEX_BYTES] = "";
  if (key && body_digest(body, digest) != 0)
    result = reply_error(req, API_ERR_INTERNAL, NULL, "out of memory");
  else if (!key || !answer_held_key(req, key, digest, &result))
    result = create_task(req, body, key, digest);
  json_decref(body);
  return result;
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

/* Why a queued task waits when no live server can run it: {"reason","device",
 * "available"}; NULL when some server can (or the servers table cannot be read, which
 * the GET does not fail for). Caller owns it. */
static json_t *waiting_reason(struct store *store, const json_t *task) {
  const char *device =
      json_string_value(json_object_get(json_object_get(task, "options"), "device"));
  bool can_run = true;
  json_t *classes = NULL;
  if (store_servers_can_run(store, device, &can_run, &classes) != STORE_OK || can_run) {
    json_decref(classes);
    return NULL;
  }
  char reason[512];
  char *listed = json_dumps(classes, JSON_COMPACT);
  if (!device)
    snprintf(reason, sizeof reason, "no live server has worker slots (each runs with --gpus "
             "none, or none is running); the task waits for one");
  else if (json_array_size(classes) == 0)
    snprintf(reason, sizeof reason, "no live server has worker slots, so none serves device "
             "class '%s'; the task waits for one that does", device);
  else
    snprintf(reason, sizeof reason, "no live server serves device class '%s' (the live ones "
             "serve %s); the task waits for one that does", device, listed ? listed : "?");
  free(listed);
  return json_pack("{s:s, s:s?, s:o}", "reason", reason, "device", device, "available",
                   classes);
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
  json_t *waiting = strcmp(json_string_value(json_object_get(task, "status")), "queued") == 0
                        ? waiting_reason(req->app->store, task)
                        : NULL;
  if (waiting)
    json_object_set_new(task, "waiting", waiting);
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
