/* The worker pool: one thread per GPU slot, each claiming queued tasks and running them. */
#include "engine/workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/loop.h"
#include "engine/store_failures.h"
#include "gpu/supervisor.h"
#include "base/log.h"
#include "store/tasks.h"

struct worker {
  struct worker_pool *pool;
  struct supervisor *sv;
  struct evaluator evaluator;
  struct loop_env env;
  pthread_t thread;
  bool started;
  atomic_bool done;   /* its thread returned (workers_stop joins it at once) */
  char name[32];
};

struct worker_pool {
  struct store *store;
  struct worker_settings settings;
  atomic_bool stopping;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct worker *workers;
  size_t n;
  struct store_failures store_failures; /* shared by the workers' loops */
};

static int sv_request(void *self, const char *op, json_t *args, double deadline_s,
                      json_t **ret_reply) {
  return supervisor_request(self, op, args, deadline_s, ret_reply) == 0 ? 0 : -1;
}

static void sv_set_task(void *self, const char *task_id) {
  supervisor_set_current_task(self, task_id);
}

/* Sleeps until kicked, stopping, or idle_poll_ms passed. */
static void wait_for_work(struct worker_pool *wp) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  long ns = until.tv_nsec + (long)wp->settings.idle_poll_ms * 1000000L;
  until.tv_sec += ns / 1000000000L;
  until.tv_nsec = ns % 1000000000L;
  pthread_mutex_lock(&wp->lock);
  if (!atomic_load(&wp->stopping))
    pthread_cond_timedwait(&wp->wake, &wp->lock, &until);
  pthread_mutex_unlock(&wp->lock);
}

/* After a commit failed (the database away, a full disk), the loop's own unclaim may
 * have failed too. The claim is then still renewed here while the release is tried again
 * every idle poll, for up to a lease: once the database is back, the task is let go at
 * once (and the others hear of it), rather than held for a whole lease by a claim nobody
 * renews. Then it is forgotten, so at worst its lease runs out as before. */
static void release_after_store_error(struct worker_pool *wp, const char *id) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  unsigned lease_s = store_claims_lease(wp->store);
  for (;;) {
    int rc = store_task_unclaim(wp->store, id);
    if (rc == STORE_OK || rc == STORE_NOT_FOUND || atomic_load(&wp->stopping))
      return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= (time_t)lease_s)
      return;
    wait_for_work(wp);
  }
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct worker_pool *wp = w->pool;
  while (!atomic_load(&wp->stopping)) {
    char id[40];
    int rc = store_task_claim(wp->store, w->name, id);
    if (rc == STORE_NOT_FOUND || rc != STORE_OK) {
      if (rc != STORE_NOT_FOUND)
        log_warn("%s: claiming a task failed (store status %d)", w->name, rc);
      wait_for_work(wp);
      continue;
    }
    log_info("%s: running task %s", w->name, id);
    enum loop_result result = loop_run_task(&w->env, id);
    if (result == LOOP_STORE_ERROR)
      release_after_store_error(wp, id);
    /* Its claim, if it could not be released, now runs out instead of being renewed. */
    store_claims_forget(wp->store, id);
    if (result == LOOP_STORE_ERROR)
      wait_for_work(wp);  /* back off before the task is claimed again */
  }
  pthread_mutex_lock(&wp->lock);
  atomic_store(&w->done, true);
  pthread_cond_broadcast(&wp->wake);
  pthread_mutex_unlock(&wp->lock);
  return NULL;
}

/* True when every started worker's thread returned. Call with wp->lock held. */
static bool all_done(struct worker_pool *wp) {
  for (size_t i = 0; i < wp->n; i++)
    if (wp->workers[i].started && !atomic_load(&wp->workers[i].done))
      return false;
  return true;
}

/* Waits up to grace_s for every worker to reach a checkpoint; then stops the evaluators
 * of those still busy, whose evaluation in flight ends (unrecorded: the loop checkpoints
 * its task, whose step runs again after a restart). */
static void wait_for_workers(struct worker_pool *wp, double grace_s) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  long long ns = until.tv_nsec + (long long)(grace_s * 1e9);
  until.tv_sec += (time_t)(ns / 1000000000LL);
  until.tv_nsec = (long)(ns % 1000000000LL);
  pthread_mutex_lock(&wp->lock);
  while (!all_done(wp) && pthread_cond_timedwait(&wp->wake, &wp->lock, &until) == 0)
    continue;
  bool late = !all_done(wp);
  pthread_mutex_unlock(&wp->lock);
  if (!late)
    return;
  log_info("shutdown grace of %g s over: stopping the evaluations still in flight", grace_s);
  for (size_t i = 0; i < wp->n; i++)
    if (wp->workers[i].started && !atomic_load(&wp->workers[i].done))
      supervisor_abort(wp->workers[i].sv);
}

int workers_start(struct store *store, loop_notify_fn notify, void *notify_ctx,
                  struct supervisor_pool *pool, const struct worker_settings *settings,
                  struct worker_pool **ret_pool) {
  struct worker_pool *wp = calloc(1, sizeof *wp);
  size_t n = pool ? supervisor_pool_count(pool) : 0;
  if (!wp || !(wp->workers = calloc(n + 1, sizeof *wp->workers))) {
    free(wp);
    return -1;
  }
  wp->store = store;
  store_failures_init(&wp->store_failures);
  wp->settings = *settings;
  if (!wp->settings.idle_poll_ms)
    wp->settings.idle_poll_ms = 500;
  pthread_mutex_init(&wp->lock, NULL);
  pthread_cond_init(&wp->wake, NULL);
  wp->n = n;
  for (size_t i = 0; i < n; i++) {
    struct worker *w = &wp->workers[i];
    w->pool = wp;
    w->sv = supervisor_pool_get(pool, i);
    atomic_init(&w->done, false);
    if (supervisor_state(w->sv) == SUPERVISOR_DISABLED)
      continue;  /* its evaluator could not start: /v1/devices says why */
    w->evaluator = (struct evaluator){.self = w->sv, .request = sv_request,
                                      .set_current_task = sv_set_task};
    w->env = (struct loop_env){.store = store, .notify = notify, .notify_ctx = notify_ctx,
                               .evaluator = &w->evaluator,
                               .cfg = settings->search, .fixtures_dir = settings->fixtures_dir,
                               .llm = settings->llm,
                               .store_failures = &wp->store_failures,
                               .stopping = &wp->stopping,
                               .evaluate_deadline_s = settings->evaluate_deadline_s,
                               .profile_deadline_s = settings->profile_deadline_s,
                               .load_deadline_s = settings->load_deadline_s};
    snprintf(w->name, sizeof w->name, "worker-%zu", i);
    w->started = pthread_create(&w->thread, NULL, worker_main, w) == 0;
    if (!w->started)
      log_error("cannot start %s", w->name);
  }
  *ret_pool = wp;
  return 0;
}

void workers_kick(struct worker_pool *wp) {
  if (!wp)
    return;
  pthread_mutex_lock(&wp->lock);
  pthread_cond_broadcast(&wp->wake);
  pthread_mutex_unlock(&wp->lock);
}

void workers_stop(struct worker_pool *wp, double grace_s) {
  if (!wp)
    return;
  pthread_mutex_lock(&wp->lock);
  atomic_store(&wp->stopping, true);
  pthread_cond_broadcast(&wp->wake);
  pthread_mutex_unlock(&wp->lock);
  wait_for_workers(wp, grace_s);
  for (size_t i = 0; i < wp->n; i++)
    if (wp->workers[i].started)
      pthread_join(wp->workers[i].thread, NULL);
  pthread_cond_destroy(&wp->wake);
  pthread_mutex_destroy(&wp->lock);
  free(wp->workers);
  store_failures_destroy(&wp->store_failures);
  free(wp);
}
