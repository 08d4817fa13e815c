/* GET /v1/tasks/{id}/candidates and GET /v1/candidates/{id}: every kernel a task tried. */
#include <stdio.h>
#include <stdlib.h>

#include "handlers/candidates.h"
#include "handlers/handlers.h"
#include "server/app.h"
#include "server/reply.h"
#include "store/candidates.h"

#define CANDIDATES_DEFAULT_LIMIT 50
#define CANDIDATES_MAX_LIMIT 200
#define CANDIDATES_MAX_CURSOR 999999999999999999LL /* 18 digits, as the spec says */

enum MHD_Result handle_task_candidates(struct request *req) {
  enum MHD_Result result;
  const char *id = require_id_param(req, 0, "id", &result);
  long long limit, after;
  if (!id || query_integer(req, "limit", 1, CANDIDATES_MAX_LIMIT, CANDIDATES_DEFAULT_LIMIT,
                           &limit, &result) != 0)
    return result;
  /* The cursor is the sequence number of the last candidate of the previous page. */
  if (query_integer(req, "cursor", 0, CANDIDATES_MAX_CURSOR, 0, &after, &result) != 0)
    return result;
  json_t *items = NULL;
  int rc = store_candidates_list(req->app->store, id, (int)limit, after, &items);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  char next[32] = "";
  if ((long long)json_array_size(items) == limit) {
    json_t *last = json_array_get(items, json_array_size(items) - 1);
    snprintf(next, sizeof next, "%lld", (long long)json_integer_value(json_object_get(last, "seq")));
  }
  return reply_json(req, 200, json_pack("{s:o, s:s?}", "items", items, "next_cursor",
                                        next[0] ? next : NULL));
}

enum MHD_Result handle_candidate_get(struct request *req) {
  enum MHD_Result result;
  const char *id = require_id_param(req, 0, "id", &result);
  if (!id)
    return result;
  json_t *candidate = NULL;
  int rc = store_candidate_get(req->app->store, id, &candidate);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_CANDIDATE_NOT_FOUND);
  return reply_json(req, 200, candidate);
}
