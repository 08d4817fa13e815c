/* The optimization loop of one task: profile, then steps until the budget is met. */
#include "engine/loop.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/budget.h"
#include "engine/loop_internal.h"
#include "gpu/supervisor.h"
#include "engine/program.h"
#include "engine/store_failures.h"
#include "proposers/family.h"
#include "store/candidates.h"
#include "store/memory.h"
#include "store/tasks.h"
#include "store/tree_rows.h"

void loop_notify(const struct task_run *run) {
  if (run->env->notify)
    run->env->notify(run->env->notify_ctx, run->id);
}

/* Ends the task with status and an error {code, message[, detail]} (NULL for none). */
static enum loop_result finish(struct task_run *run, const char *status, const char *code,
                               const char *message, json_t *detail) {
  json_t *error = code ? json_pack("{s:s, s:s, s:O*}", "code", code, "message", message,
                                   "detail", detail)
                       : NULL;
  json_t *summary = json_pack("{s:s, s:i, s:i, s:o?, s:o?, s:s?, s:s?, s:b}", "status", status,
                              "steps", run->step, "correct", run->correct, "best_speedup",
                              run->correct ? json_real(run->best_speedup) : NULL,
                              "best_ms", run->correct ? json_real(run->best_ms) : NULL,
                              "best_candidate", run->correct ? run->best_candidate : NULL,
                              "stop_reason", run->stop_reason[0] ? run->stop_reason : NULL,
                              "no_speedup", loop_best_is_reference(run));
  if (summary && run->proposer_error)
    json_object_set(summary, "proposer_error", run->proposer_error);
  if (run->cfg.learn) /* a rule's refusals are evidence too */
    skills_flush_refusals(run->env->store, &run->skills);
  int rc = store_task_finish(run->env->store, run->id, status, error, summary);
  json_decref(error);
  json_decref(summary);
  loop_notify(run);
  if (rc != STORE_OK) {
    /* Nothing is recorded: the task stays running, its claim runs out (the worker drops
     * it, store_claims_forget) and a worker takes it up again once the store writes. */
    log_warn("task %s: its end (%s after %d step(s)) could not be recorded (store status "
             "%d); it is taken up again once the store accepts writes", run->id, status,
             run->step, rc);
    if (run->env->store_failures)
      store_failures_note(run->env->store_failures, run->id, rc);
    return LOOP_STORE_ERROR;
  }
  log_info("task %s %s after %d step(s)%s%s", run->id, status, run->step, code ? ": " : "",
           code ? message : "");
  return LOOP_FINISHED;
}

/* Reply's error object, or NULL when the reply is ok (borrowed). */
static json_t *reply_error(json_t *reply) {
  if (json_is_true(json_object_get(reply, "ok")))
    return NULL;
  json_t *err = json_object_get(reply, "error");
  return err ? err : reply;
}

/* The task's op family: the one the proposer names when it supports the task, else a
 * first guess from the graph (proposers/family.c). Static string. */
static const char *task_family(struct proposer *p, json_t *profile) {
  const char *family = NULL;
  char why[512];
  if (p->supports(p->self, profile, &family, why, sizeof why) == 0 && family)
    return family;
  return family_of_profile(profile);
}

/* The baselines shown on the task: the profile's timings and floors, the family, and
 * the regions of the partition. */
static json_t *make_baselines(struct proposer *p, json_t *profile, const struct partition *pt) {
  static const char *const keys[] = {"eager_ms", "eager_profile_ms", "compile_ms",
                                     "floor_ms", "impossible_ms",
                                     "flops", "min_bytes", "degenerate", "device",
                                     "timing_skipped_reason"};
  json_t *b = json_object();
  for (size_t i = 0; b && i < sizeof keys / sizeof keys[0]; i++) {
    json_t *v = json_object_get(profile, keys[i]);
    json_object_set(b, keys[i], v ? v : json_null());
  }
  /* A task nothing generates is all library steps: say so rather than guess a family. */
  json_object_set_new(b, "family", json_string(partition_generated(pt) > 0
                                                       ? task_family(p, profile)
                                                       : "library"));
  json_object_set_new(b, "bound", json_string(bound_of_profile(profile)));
  json_object_set_new(b, "regions", partition_describe(pt));
  json_object_set_new(b, "generated_regions", json_integer((json_int_t)partition_generated(pt)));
  return b;
}

/* Cuts the task's graph into regions for the proposer and notes them on the task's
 * baselines. No task is refused: what the proposer cannot write stays library steps. */
static int partition_task(struct task_run *run, enum loop_result *ret_result) {
  if (partition_build(run->profile, &run->proposer, &run->partition) != 0)
    return *ret_result = LOOP_STORE_ERROR, -1;
  size_t n = run->partition.n ? run->partition.n : 1;
  run->ref_region_ms = malloc(n * sizeof *run->ref_region_ms);
  run->best_region_ms = malloc(n * sizeof *run->best_region_ms);
  if (!run->ref_region_ms || !run->best_region_ms)
    return *ret_result = LOOP_STORE_ERROR, -1;
  for (size_t k = 0; k < n; k++)
    run->ref_region_ms[k] = run->best_region_ms[k] = -1;
  return 0;
}

/* True (and the run marked aborted) when err says the server's shutdown stopped the
 * evaluator: the task is not to blame. */
static bool stopped_by_shutdown(struct task_run *run, json_t *err) {
  const char *cls = json_string_value(json_object_get(err, "class"));
  if (cls && strcmp(cls, SUPERVISOR_SHUTDOWN_CLASS) == 0)
    run->aborted = true;
  return run->aborted;
}

static enum loop_result checkpoint(struct task_run *run);

/* Loads the task into the evaluator and profiles it once (the profile is stored, so a
 * resumed task only reloads). Returns 0, or -1 after finishing the task as failed. */
static int prepare_evaluator(struct task_run *run, enum loop_result *ret_result) {
  const struct loop_env *env = run->env;
  json_t *args = json_pack("{s:s, s:s, s:O, s:O, s:O, s:O}", "name",
                           json_string_value(json_object_get(run->task, "name")), "source",
                           json_string_value(json_object_get(run->task, "reference")), "seed",
                           json_object_get(run->options, "seed"), "precision",
                           json_object_get(run->options, "precision"), "tolerance",
                           json_object_get(run->options, "tolerance"), "trials",
                           json_object_get(run->options, "trials"));
  json_t *reply = NULL;
  int rc = env->evaluator->request(env->evaluator->self, "load_task", args, env->load_deadline_s,
                                   &reply);
  json_decref(args);
  json_t *err = rc == 0 ? reply_error(reply) : NULL;
  if (stopped_by_shutdown(run, err)) {
    json_decref(reply);
    return *ret_result = checkpoint(run), -1;
  }
  if (rc != 0 || err) {
    *ret_result = finish(run, "failed", "load_failed", "the reference program could not be "
                         "loaded by the evaluator", err);
    json_decref(reply);
    return -1;
  }
  json_decref(reply);
  if (store_task_profile_get(env->store, run->id, &run->profile) != STORE_OK)
    return *ret_result = LOOP_STORE_ERROR, -1;
  if (!run->profile) {
    reply = NULL;
    json_t *no_args = json_object();
    rc = env->evaluator->request(env->evaluator->self, "profile", no_args,
                                 env->profile_deadline_s, &reply);
    json_decref(no_args);
    err = rc == 0 ? reply_error(reply) : NULL;
    if (stopped_by_shutdown(run, err)) {
      json_decref(reply);
      return *ret_result = checkpoint(run), -1;
    }
    if (rc != 0 || err) {
      *ret_result = finish(run, "failed", "profile_failed", "profiling the reference failed", err);
      json_decref(reply);
      return -1;
    }
    run->profile = json_incref(json_object_get(reply, "result"));
    json_decref(reply);
    if (partition_task(run, ret_result) != 0)
      return -1;
    json_t *baselines = make_baselines(&run->proposer, run->profile, &run->partition);
    int src = store_task_profile_set(env->store, run->id, run->profile, baselines);
    json_decref(baselines);
    if (src != STORE_OK)
      return *ret_result = LOOP_STORE_ERROR, -1;
    loop_notify(run);
  }
  if (!run->ref_region_ms && partition_task(run, ret_result) != 0)
    return -1;
  run->baselines = make_baselines(&run->proposer, run->profile, &run->partition);
  run->eager_ms = json_number_value(json_object_get(run->profile, "eager_ms"));
  run->state.family = task_family(&run->proposer, run->profile);
  run->state.bound = bound_of_profile(run->profile);
  return 0;
}

int loop_eager_retimed(struct task_run *run, double profile_eager_ms) {
  if (!json_object_get(run->profile, "eager_profile_ms"))
    json_object_set_new(run->profile, "eager_profile_ms", json_real(profile_eager_ms));
  json_object_set_new(run->profile, "eager_ms", json_real(run->eager_ms));
  json_t *baselines = make_baselines(&run->proposer, run->profile, &run->partition);
  if (!baselines)
    return STORE_ERROR;
  int rc = store_task_profile_set(run->env->store, run->id, run->profile, baselines);
  if (rc == STORE_OK) {
    json_decref(run->baselines);
    run->baselines = baselines;
    loop_notify(run);
  } else {
    json_decref(baselines);
  }
  return rc;
}

/* The region times of the stored candidate id (its result) into ms, when it has them. */
static void stored_region_times(struct task_run *run, const char *id, double *ms) {
  json_t *c = NULL;
  if (id && id[0] && store_candidate_get(run->env->store, id, &c) == STORE_OK)
    program_region_times(&run->partition, c, json_object_get(c, "result"), ms);
  json_decref(c);
}

/* Rebuilds the tree from its stored rows, or starts one at the reference. */
static int restore_tree(struct task_run *run) {
  json_t *rows = NULL;
  if (!(run->tree = tree_new()) || store_tree_rows(run->env->store, run->id, &rows) != STORE_OK)
    return -1;
  int rc = 0;
  if (json_array_size(rows) == 0) {
    rc = tree_add_root(run->tree, &run->cfg);
  } else {
    size_t i;
    json_t *row;
    char err[256];
    json_array_foreach(rows, i, row) if (rc == 0 && tree_append_json(run->tree, row, err,
                                                                      sizeof err) != 0) {
      log_error("task %s: stored tree row %zu: %s", run->id, i, err);
      rc = -1;
    }
  }
  json_decref(rows);
  if (rc == 0 && run->tree->nodes[0].candidate[0])
    stored_region_times(run, run->tree->nodes[0].candidate, run->ref_region_ms);
  if (rc == 0 && run->correct)
    stored_region_times(run, run->best_candidate, run->best_region_ms);
  return rc;
}

/* The task's search settings and memory namespace (docs/architecture.md, "Search
 * settings"): options.search, recorded whole at submission, over the server's; the
 * namespace must still exist. Returns 0, or -1 with the task finished or unclaimed. */
static int task_settings(struct task_run *run, enum loop_result *ret_result) {
  run->cfg = *run->env->cfg;
  json_t *search = json_object_get(run->options, "search");
  struct search_config_error err;
  if (search && search_config_apply(&run->cfg, search, &err) != 0) {
    *ret_result = finish(run, "failed", "bad_search", err.message, NULL);
    return -1;
  }
  const char *ns = json_string_value(json_object_get(run->options, "memory"));
  run->memory = ns ? ns : MEMORY_DEFAULT_NAMESPACE;
  json_t *found = NULL;
  int rc = store_memory_namespace_get(run->env->store, run->memory, &found);
  json_int_t directions = json_integer_value(json_object_get(found, "globals"));
  json_decref(found);
  if (rc == STORE_NOT_FOUND || (rc == STORE_OK && directions == 0)) {
    *ret_result = finish(run, "failed", rc == STORE_OK ? "empty_memory" : "unknown_memory",
                         rc == STORE_OK ? "the task's memory namespace holds no direction"
                                        : "the task's memory namespace no longer exists",
                         NULL);
    return -1;
  }
  if (rc != STORE_OK) {
    store_task_unclaim(run->env->store, run->id);
    *ret_result = LOOP_STORE_ERROR;
    return -1;
  }
  return 0;
}

/* Reads the options and the resumable counters of the task. */
static int load_task(struct task_run *run, enum loop_result *ret_result) {
  if (store_task_get(run->env->store, run->id, true, &run->task) != STORE_OK)
    return *ret_result = LOOP_STORE_ERROR, -1;
  run->options = json_object_get(run->task, "options");
  skills_run_init(&run->skills, run->options);
  json_t *budget = json_object_get(run->options, "budget");
  run->budget_steps = (int)json_integer_value(json_object_get(budget, "steps"));
  run->budget_s = json_number_value(json_object_get(budget, "seconds"));
  json_t *stop = json_object_get(budget, "stop_at_floor");
  run->stop_at_floor = stop ? json_number_value(stop) : LOOP_DEFAULT_STOP_AT_FLOOR;
  json_t *progress = json_object_get(run->task, "progress");
  run->step = (int)json_integer_value(json_object_get(progress, "step"));
  run->correct = (int)json_integer_value(json_object_get(progress, "correct"));
  run->best_speedup = json_number_value(json_object_get(progress, "best_speedup"));
  run->best_ms = json_number_value(json_object_get(progress, "best_ms"));
  run->elapsed_s = json_number_value(json_object_get(progress, "elapsed_s"));
  run->spent.prompt_tokens = json_integer_value(json_object_get(progress, "llm_prompt_tokens"));
  run->spent.completion_tokens =
      json_integer_value(json_object_get(progress, "llm_completion_tokens"));
  run->spent.cost_usd = json_number_value(json_object_get(progress, "llm_cost_usd"));
  const char *best = json_string_value(json_object_get(progress, "best_candidate"));
  snprintf(run->best_candidate, sizeof run->best_candidate, "%s", best ? best : "");
  run->traits = policy_find(json_string_value(json_object_get(run->options, "policy")));
  const char *proposer = json_string_value(json_object_get(run->options, "proposer"));
  if (!run->traits) {
    *ret_result = finish(run, "failed", "unknown_policy", "the task's policy is unknown", NULL);
    return -1;
  }
  if (task_settings(run, ret_result) != 0)
    return -1;
  struct proposer_config pcfg = {.fixtures_dir = run->env->fixtures_dir, .llm = run->env->llm};
  char why[256];
  if (proposer_open(proposer, &pcfg, &run->proposer, why, sizeof why) != 0) {
    *ret_result = finish(run, "failed", "proposer_unavailable", why, NULL);
    return -1;
  }
  return 0;
}

/* True when the client asked to cancel (read fresh from the store). */
static bool cancel_requested(struct task_run *run) {
  json_t *task = NULL;
  if (store_task_get(run->env->store, run->id, false, &task) != STORE_OK)
    return false;
  bool yes = json_is_true(json_object_get(task, "cancel_requested"));
  json_decref(task);
  return yes;
}

/* Checks between steps: a shutdown checkpoints, a cancel ends the task. Returns 1 to
 * go on, else 0 with *ret set. */
/* Leaves the task running and unclaimed at its last committed step (shutdown). */
static enum loop_result checkpoint(struct task_run *run) {
  if (run->cfg.learn) /* a rule's refusals are evidence too */
    skills_flush_refusals(run->env->store, &run->skills);
  store_task_unclaim(run->env->store, run->id);
  log_info("task %s checkpointed at step %d%s", run->id, run->step,
           run->aborted ? " (its evaluation in flight was stopped; it runs again)" : "");
  return LOOP_CHECKPOINTED;
}

static int between_steps(struct task_run *run, enum loop_result *ret) {
  if (atomic_load(run->env->stopping)) {
    *ret = checkpoint(run);
    return 0;
  }
  if (cancel_requested(run)) {
    *ret = finish(run, "cancelled", NULL, NULL, NULL);
    return 0;
  }
  return 1;
}

/* The LLM budget left (budget.llm_tokens, budget.llm_usd less what was spent) into
 * run->limit; true when either is used up. */
static bool llm_budget_spent(struct task_run *run) {
  json_t *budget = json_object_get(run->options, "budget");
  json_t *tokens = json_object_get(budget, "llm_tokens");
  /* What the task spent, committed or not: a step that found nothing new commits no
   * usage, yet its calls were paid. */
  long long used = run->spent.prompt_tokens + run->spent.completion_tokens +
                   run->step_usage.prompt_tokens + run->step_usage.completion_tokens;
  double spent_usd = run->spent.cost_usd + run->step_usage.cost_usd;
  run->limit.tokens = json_is_integer(tokens) ? json_integer_value(tokens) - used : LLONG_MAX;
  run->limit.cost_usd = json_number_value(json_object_get(budget, "llm_usd")) - spent_usd;
  run->limit.calls = (int)run->cfg.max_calls_per_step;
  return run->limit.tokens <= 0 || (spent_usd > 0 && run->limit.cost_usd <= 0);
}

/* How many tries in a row may find nothing new before the task's space is exhausted:
 * enough for every generated region to be tried at a few nodes. */
static int nothing_new_limit(const struct task_run *run) {
  size_t n = partition_generated(&run->partition);
  return (int)(n * 4 + 8 < 64 ? n * 4 + 8 : 64);
}

/* True when the proposer's service refused for good (a model it may not use). */
static bool permanent_failure(json_t *failure) {
  const char *cls = json_string_value(json_object_get(failure, "class"));
  return cls && strcmp(cls, "parse/llm_model_not_allowed") == 0;
}

/* Ends the steps: succeeded when a correct program exists (the reference counts),
 * cancelled on request, else failed. */
static enum loop_result conclude(struct task_run *run) {
  if (cancel_requested(run))
    return finish(run, "cancelled", NULL, NULL, NULL);
  if (run->correct > 0)
    return finish(run, "succeeded", NULL, NULL, NULL);
  char message[128];
  snprintf(message, sizeof message, "none of the %d candidate(s) was correct", run->step);
  return finish(run, "failed", "no_correct_candidate", message, NULL);
}

/* A commit of the task's work failed with store status: counts it (a busy store, or a
 * database server that cannot be reached, is not counted) and unclaims the task, which a
 * worker claims again after a pause (or, when the unclaim could not reach the database
 * either, once its lease runs out). */
static enum loop_result store_failed(struct task_run *run, int status) {
  if (run->env->store_failures) {
    int n = store_failures_note(run->env->store_failures, run->id, status);
    log_warn("task %s: a commit failed (store status %d, %d in a row%s)", run->id, status, n,
             status == STORE_BUSY          ? "; busy is not counted"
             : status == STORE_UNAVAILABLE ? "; the database is away, not counted"
                                           : "");
  }
  store_task_unclaim(run->env->store, run->id);
  return LOOP_STORE_ERROR;
}

/* A commit succeeded: the count of failures in a row starts again. */
static void note_committed(struct task_run *run) {
  if (run->env->store_failures)
    store_failures_forget(run->env->store_failures, run->id);
}

/* The task's commits failed STORE_FAILURES_LIMIT times in a row (not busy): retrying can't
 * help, so the task fails with store_error, which its events and GET say; the worker is
 * free for the next task. */
static enum loop_result fail_on_store(struct task_run *run, int count, int status) {
  char message[200];
  snprintf(message, sizeof message,
           "the store refused this task's commit %d times in a row (%s); the server log "
           "names the statement",
           count, status == STORE_CONSTRAINT ? "a constraint or type the statement breaks"
                                             : "a storage error");
  snprintf(run->stop_reason, sizeof run->stop_reason, "store_error");
  return finish(run, "failed", "store_error", message, NULL);
}

/* The reference, then steps until the budget, the floor, an exhausted space, a cancel,
 * a checkpoint or a store failure. */
static enum loop_result run_steps(struct task_run *run) {
  enum loop_result ret;
  if (!run->tree->nodes[0].candidate[0]) {
    if (!between_steps(run, &ret))
      return ret;
    int rc = loop_reference(run);
    if (rc != STORE_OK)
      return store_failed(run, rc);
    if (run->aborted)
      return checkpoint(run);
    note_committed(run);
  }
  /* This run's load, profile and reference count in the time budget. */
  run->elapsed_s += budget_now_s() - run->started_s;
  snprintf(run->stop_reason, sizeof run->stop_reason, "budget");
  int idle = 0, down = 0, not_recorded = 0; /* not_recorded: in a row */
  while (run->step < run->budget_steps &&
         budget_time_allows_step(run->elapsed_s, run->budget_s, run->steps_s,
                                 run->steps_timed)) {
    if (!between_steps(run, &ret))
      return ret;
    if (llm_budget_spent(run)) {
      snprintf(run->stop_reason, sizeof run->stop_reason, "budget_exhausted");
      break;
    }
    if (run->step > 0 && loop_at_floor(run)) {
      snprintf(run->stop_reason, sizeof run->stop_reason, "at_floor");
      break;
    }
    enum step_result res = loop_step(run, idle + not_recorded);
    if (res == STEP_ABORTED)
      return checkpoint(run);
    if (res == STEP_STORE_ERROR)
      return store_failed(run, run->store_status);
    if (res == STEP_COMMITTED)
      note_committed(run);
    if (res == STEP_BUDGET_SPENT) {
      snprintf(run->stop_reason, sizeof run->stop_reason, "budget_exhausted");
      break;
    }
    down = res == STEP_PROPOSER_DOWN ? down + 1 : 0;
    if (down >= LOOP_PROPOSER_DOWN_LIMIT || (down && permanent_failure(run->proposer_error))) {
      snprintf(run->stop_reason, sizeof run->stop_reason, "proposer_unavailable");
      break;
    }
    if (res == STEP_PROPOSER_DOWN)
      continue;
    if (res == STEP_NOT_RECORDED) {  /* no step spent; a record this sparse ends it */
      if (++not_recorded >= LOOP_NOT_RECORDED_LIMIT) {
        snprintf(run->stop_reason, sizeof run->stop_reason, "space_exhausted");
        break;
      }
      continue;
    }
    if (res == STEP_COMMITTED)
      not_recorded = 0;
    idle = res == STEP_NOTHING_NEW ? idle + 1 : 0;
    if (idle >= nothing_new_limit(run)) {
      snprintf(run->stop_reason, sizeof run->stop_reason, "space_exhausted");
      break;
    }
    if (run->traits->single_shot && res == STEP_COMMITTED)
      break;
  }
  return conclude(run);
}

enum loop_result loop_run_task(const struct loop_env *env, const char *task_id) {
  struct task_run run = {.env = env, .id = task_id, .best_library_ms = -1, .best_graph = -1,
                         .started_s = budget_now_s()};
  enum loop_result result = LOOP_STORE_ERROR;
  if (env->evaluator->set_current_task)
    env->evaluator->set_current_task(env->evaluator->self, task_id);
  if (load_task(&run, &result) == 0 && prepare_evaluator(&run, &result) == 0) {
    int status = 0;
    int failures = env->store_failures ? store_failures_count(env->store_failures, task_id,
                                                              &status)
                                       : 0;
    if (restore_tree(&run) != 0)
      result = finish(&run, "failed", "bad_tree", "the stored search tree is unreadable", NULL);
    else if (failures >= STORE_FAILURES_LIMIT)
      result = fail_on_store(&run, failures, status);
    else
      result = run_steps(&run);
    if (result == LOOP_FINISHED && env->store_failures)
      store_failures_forget(env->store_failures, task_id);
  }
  if (env->evaluator->set_current_task)
    env->evaluator->set_current_task(env->evaluator->self, NULL);
  proposer_clear(&run.proposer);
  tree_free(run.tree);
  json_decref(run.task);
  json_decref(run.profile);
  json_decref(run.baselines);
  json_decref(run.evaluated);
  json_decref(run.exhausted);
  json_decref(run.library_first);
  json_decref(run.outside);
  json_decref(run.defaults);
  json_decref(run.proposer_error);
  skills_run_clear(&run.skills);
  partition_clear(&run.partition);
  free(run.ref_region_ms);
  free(run.best_region_ms);
  return result;
}
