/* Private to engine/loop*.c: the state of one task while the loop runs it. */
#ifndef OPFORGE_LOOP_INTERNAL_H
#define OPFORGE_LOOP_INTERNAL_H

#include <jansson.h>

#include "engine/htam.h"
#include "engine/loop.h"
#include "engine/policy.h"
#include "proposers/proposer.h"
#include "engine/tree.h"

struct task_run {
  const struct loop_env *env;
  const char *id;
  json_t *task;                 /* owned: the task with its reference */
  json_t *options;              /* borrowed from task */
  json_t *profile;              /* owned */
  json_t *baselines;            /* owned */
  const struct policy_traits *traits;
  struct proposer proposer;
  struct tree *tree;            /* owned */
  struct htam_state state;      /* strings are static or in last_failure_stage */
  char last_failure_stage[16];
  double eager_ms;              /* 0 when the profile has no CUDA timing */
  int budget_steps;
  double budget_s;
  int step;                     /* steps committed */
  double elapsed_s;             /* wall time of the steps so far, across restarts */
  int correct;
  double best_speedup, best_ms;
  char best_candidate[40];
  json_t *evaluated;            /* owned: candidate digest -> {id, result} of this run's
                                   evaluations, so a repeated proposal is not re-run */
};

/* Runs one step (choice, proposal, evaluation, commit). Returns a store status:
 * STORE_OK when the step committed. */
int loop_step(struct task_run *run);

/* Tells the environment's notify callback that the task changed. */
void loop_notify(const struct task_run *run);

/* The task's progress object from the run's counters (caller owns). */
json_t *loop_progress(const struct task_run *run);

#endif
