/* The worker pool: one thread per GPU slot, each claiming queued tasks and running them. */
#ifndef OPFORGE_WORKERS_H
#define OPFORGE_WORKERS_H

#include "engine/loop.h"
#include "engine/search_config.h"

struct store;
struct supervisor_pool;
struct worker_pool;

/* Settings the pool passes to every loop (strings borrowed; they must outlive the pool). */
struct worker_settings {
  const struct search_config *search;
  const char *fixtures_dir;
  const struct llm_settings *llm; /* the LLM proposer's endpoint; may be NULL */
  double evaluate_deadline_s, profile_deadline_s, load_deadline_s;
  unsigned idle_poll_ms;   /* how often an idle worker looks for work (500) */
};

/* Starts one worker per supervisor of pool (borrowed; it must outlive the workers). Each
 * loop calls notify(notify_ctx, task_id) after every change (notify may be NULL).
 * Returns 0 and *ret_pool (free with workers_stop), or -1. */
int workers_start(struct store *store, loop_notify_fn notify, void *notify_ctx,
                  struct supervisor_pool *pool, const struct worker_settings *settings,
                  struct worker_pool **ret_pool);

/* Wakes idle workers (a task was queued). Accepts NULL. */
void workers_kick(struct worker_pool *wp);

/* Asks every worker to checkpoint its task; a worker whose evaluation is still in flight
 * after grace_s has its evaluator stopped (supervisor_abort): that step is not recorded,
 * and runs again when the task resumes, as after kill -9. Joins them and frees the pool.
 * Accepts NULL. */
void workers_stop(struct worker_pool *wp, double grace_s);

#endif
