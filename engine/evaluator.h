/* How the loop talks to an evaluator: one request, one reply, with a deadline. */
#ifndef OPFORGE_ENGINE_EVALUATOR_H
#define OPFORGE_ENGINE_EVALUATOR_H

#include <jansson.h>

/* An evaluator endpoint. In the server it wraps a supervisor (gpu/supervisor.h); tests
 * plug in a scripted one. request sends op with args (borrowed) and stores the reply
 * {"ok":true,"result":{...}} or {"ok":false,"error":{"stage","class","message"}} in
 * *ret_reply (caller owns). It returns 0 whenever a reply object was produced (failures
 * of the candidate or of the evaluator process are replies), -1 only when none could be. */
struct evaluator {
  void *self;
  int (*request)(void *self, const char *op, json_t *args, double deadline_s,
                 json_t **ret_reply);
  void (*set_current_task)(void *self, const char *task_id); /* may be NULL */
};

#endif
