/* A worker's hold on a task: claim (resume or start), unclaim, and finish. */
#include "store/tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/events.h"
#include "store/statements.h"
#include "store/transaction.h"
#include "store/util.h"

struct claim {
  const char *worker;
  char id[40];
};

static int claim_tx(struct store *s, void *arg) {
  struct claim *c = arg;
  char *id = NULL;
  int result = st_query_text(s,
                             "SELECT id FROM tasks WHERE status = 'running' AND claimed_by IS NULL"
                             " ORDER BY seq LIMIT 1",
                             NULL, NULL, &id);
  bool resume = result == STORE_OK;
  if (result == STORE_NOT_FOUND)
    result = st_query_text(s, "SELECT id FROM tasks WHERE status = 'queued' ORDER BY seq LIMIT 1",
                           NULL, NULL, &id);
  if (result != STORE_OK || !id)
    return result == STORE_OK ? STORE_ERROR : result;
  snprintf(c->id, sizeof c->id, "%s", id);
  free(id);
  if (!resume)
    result = store_task_set_status(s, c->id, "running", NULL);
  if (result == STORE_OK)
    result = st_run(s, "UPDATE tasks SET claimed_by = ?2 WHERE id = ?1", c->id, c->worker, NULL,
                    NULL, NULL);
  return result;
}

int store_task_claim(struct store *s, const char *worker, char ret_id[40]) {
  struct claim c = {.worker = worker};
  int result = store_transaction(s, claim_tx, &c);
  if (result == STORE_OK)
    memcpy(ret_id, c.id, sizeof c.id);
  return result;
}

int store_task_unclaim(struct store *s, const char *id) {
  if (id)
    return st_run(s, "UPDATE tasks SET claimed_by = NULL WHERE id = ?1", id, NULL, NULL, NULL,
                  NULL);
  return st_run(s, "UPDATE tasks SET claimed_by = NULL WHERE status = 'running'", NULL, NULL,
                NULL, NULL, NULL);
}

struct finish {
  const char *id, *status;
  json_t *error;
  char *summary_text;
};

static int finish_tx(struct store *s, void *arg) {
  struct finish *f = arg;
  int result = store_task_set_status(s, f->id, f->status, f->error);
  if (result == STORE_OK)
    result = store_event_append_tx(s, f->id, "finished", f->summary_text, NULL);
  if (result == STORE_OK)
    result = store_task_unclaim(s, f->id);
  return result;
}

int store_task_finish(struct store *s, const char *id, const char *status, json_t *error,
                      json_t *summary) {
  struct finish f = {.id = id, .status = status, .error = error,
                     .summary_text = summary ? st_json_dumps(summary) : NULL};
  int result = summary && !f.summary_text ? STORE_ERROR : store_transaction(s, finish_tx, &f);
  free(f.summary_text);
  return result;
}
