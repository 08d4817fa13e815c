/* The step commit: everything one optimization-loop step records, in one transaction. */
#ifndef OPFORGE_STORE_STEPS_H
#define OPFORGE_STORE_STEPS_H

#include <jansson.h>

#include "store/memory.h"
#include "store/skills.h"
#include "store/status.h"

/* Everything one loop step records, committed in one transaction (all borrowed). */
struct step_commit {
  const char *task_id;
  int step;                      /* 1-based step number; becomes tasks.step */
  json_t *candidate;             /* {"id","parent_id","source","options","plan","result",
                                    "direction","strategy","step_kind"} */
  json_t *tree_rows;             /* rows to insert or replace (new node + its ancestors) */
  const struct memory_step_update *memory; /* NULL: no memory update */
  const struct skill_update *skills;       /* NULL: no skill memory update */
  json_t *progress;              /* the task's new progress object */
  json_t *event_data;            /* data of the "step" event */
};

/* Commits a step: candidate, tree rows, memory statistics, skill rules, progress and the
 * "step" event, all or nothing. */
int store_step_commit(struct store *s, const struct step_commit *c);

#endif
