/* The optimization loop of one task: profile, then steps until the budget is met. */
#ifndef OPFORGE_LOOP_H
#define OPFORGE_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>

#include "engine/evaluator.h"
#include "engine/search_config.h"

struct store;
struct llm_settings;
struct store_failures;

/* Told after every change a client may be waiting for (a step, a profile, the end),
 * with the task's id (borrowed). The server wakes its event streams with it. */
typedef void (*loop_notify_fn)(void *ctx, const char *task_id);

/* What a worker lends the loop; all borrowed. */
struct loop_env {
  struct store *store;
  loop_notify_fn notify;        /* may be NULL (nobody to wake) */
  void *notify_ctx;
  struct evaluator *evaluator;
  const struct search_config *cfg;
  const char *fixtures_dir;     /* for the test proposer; may be NULL */
  const struct llm_settings *llm; /* the LLM proposer's endpoint; NULL: its variables */
  struct store_failures *store_failures; /* the server's count of failed commits per task
                                            (engine/store_failures.h); may be NULL */
  const atomic_bool *stopping;  /* set at shutdown: the loop checkpoints and returns */
  double evaluate_deadline_s;   /* 60 */
  double profile_deadline_s;    /* 600 */
  double load_deadline_s;       /* 120 */
};

enum loop_result {
  LOOP_FINISHED,      /* the task reached succeeded, failed or cancelled */
  LOOP_CHECKPOINTED,  /* shutdown: the task stays running, unclaimed, and resumes later */
  LOOP_STORE_ERROR,   /* the store failed; the task is unclaimed and will be retried (a
                         failure that is not busy at most STORE_FAILURES_LIMIT times in a
                         row: then the task fails with store_error) */
};

/* Runs the claimed task task_id to its end (or to a checkpoint). Every step commits its
 * candidate, tree rows, memory statistics, progress and event in one transaction, so a
 * crash loses at most the step in flight, which is redone on resume. */
enum loop_result loop_run_task(const struct loop_env *env, const char *task_id);

#endif
