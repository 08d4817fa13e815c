/* Entry points of every HTTP resource handler; the route table (server/routes.c) uses them. */
#ifndef OPFORGE_HANDLERS_H
#define OPFORGE_HANDLERS_H

#include <stdbool.h>

#include "base/errors.h"
#include "server/request.h"

/* handlers/tasks.c */
enum MHD_Result handle_tasks_create(struct request *req);
enum MHD_Result handle_tasks_list(struct request *req);
enum MHD_Result handle_task_get(struct request *req);
enum MHD_Result handle_task_cancel(struct request *req);
enum MHD_Result handle_task_delete(struct request *req);

/* handlers/task_events.c */
enum MHD_Result handle_task_events(struct request *req);

/* handlers/health.c */
enum MHD_Result handle_healthz(struct request *req);
enum MHD_Result handle_readyz(struct request *req);

/* handlers/metrics.c */
enum MHD_Result handle_metrics(struct request *req);

/* handlers/openapi.c */
enum MHD_Result handle_openapi(struct request *req);

/* Shared by handlers: answers a failed store call (busy -> 503, error -> 500, not found
 * -> not_found_code 404). */
enum MHD_Result reply_store_failure(struct request *req, int store_rc,
                                    enum api_error not_found_code);

/* Shared by handlers: parses text as a decimal integer in [lo, hi] (lo >= 0) written the
 * way the spec's integer parameters are: digits only, no sign, no blanks, at most 19
 * of them, no leading zero except "0" itself. False for anything else. */
bool parse_decimal(const char *text, long long lo, long long hi, long long *ret_value);

/* Shared by handlers: the query argument key as an integer in [lo, hi], fallback when
 * absent; otherwise queues 400 invalid_query naming key and returns -1 (the caller
 * returns *ret_result). */
int query_integer(struct request *req, const char *key, long long lo, long long hi,
                  long long fallback, long long *ret_value, enum MHD_Result *ret_result);

/* Shared by handlers: req->params[index] when it is a UUID, else queues 400 invalid_id
 * and returns NULL (the caller returns *ret_result). */
const char *require_id_param(struct request *req, unsigned index, const char *name,
                             enum MHD_Result *ret_result);

#endif
