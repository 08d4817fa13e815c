/* The step commit: candidate, tree rows, memory statistics, skill rules, task progress and
 * the "step" event of one loop step, all or nothing. */
#include "store/steps.h"

#include <stdio.h>
#include <stdlib.h>

#include "store/candidates.h"
#include "store/events.h"
#include "store/statements.h"
#include "store/transaction.h"
#include "store/tree_rows.h"
#include "store/util.h"

static int step_tx(struct store *s, void *arg) {
  const struct step_commit *c = arg;
  char step[24];
  snprintf(step, sizeof step, "%d", c->step);
  char *progress = st_json_dumps(c->progress), *event = st_json_dumps(c->event_data);
  int result = progress && event ? store_candidate_insert(s, c->task_id, c->step, c->candidate)
                                 : STORE_ERROR;
  if (result == STORE_OK)
    result = store_tree_rows_write(s, c->task_id, c->tree_rows);
  if (result == STORE_OK && c->memory) {
    result = store_memory_record_step(s, c->memory);
    if (result == STORE_NOT_FOUND)  /* the direction was deleted meanwhile: nothing to count */
      result = STORE_OK;
  }
  if (result == STORE_OK && c->skills)
    result = store_skills_record(s, c->skills);
  char now[STORE_TIME_LEN];
  if (result == STORE_OK && !store_time_now(now))
    result = STORE_ERROR;
  if (result == STORE_OK)
    result = st_run(s,
                    "UPDATE tasks SET progress = ?2, step = CAST(?3 AS INTEGER),"
                    " updated_at = ?4 WHERE id = ?1",
                    c->task_id, progress, step, now, NULL);
  if (result == STORE_OK)
    result = store_event_append_tx(s, c->task_id, "step", event, NULL);
  free(progress);
  free(event);
  return result;
}

int store_step_commit(struct store *s, const struct step_commit *c) {
  return store_transaction_rc(s, step_tx, (void *)c);
}
