/* The optimization loop of one task: profile, then steps until the budget is met. */
#include "engine/loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "engine/loop_internal.h"
#include "proposers/family.h"
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
  json_t *summary = json_pack("{s:s, s:i, s:i, s:o?, s:o?, s:s?}", "status", status, "steps",
                              run->step, "correct", run->correct, "best_speedup",
                              run->correct ? json_real(run->best_speedup) : NULL,
                              "best_ms", run->correct ? json_real(run->best_ms) : NULL,
                              "best_candidate", run->correct ? run->best_candidate : NULL);
  int rc = store_task_finish(run->env->store, run->id, status, error, summary);
  json_decref(error);
  json_decref(summary);
  loop_notify(run);
  log_info("task %s %s after %d step(s)%s%s", run->id, status, run->step, code ? ": " : "",
           code ? message : "");
  return rc == STORE_OK ? LOOP_FINISHED : LOOP_STORE_ERROR;
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

/* The baselines shown on the task: the profile's timings and floors, plus the family. */
static json_t *make_baselines(struct proposer *p, json_t *profile) {
  static const char *const keys[] = {"eager_ms", "compile_ms", "floor_ms", "impossible_ms",
                                     "flops", "min_bytes", "degenerate", "device",
                                     "timing_skipped_reason"};
  json_t *b = json_object();
  for (size_t i = 0; b && i < sizeof keys / sizeof keys[0]; i++) {
    json_t *v = json_object_get(profile, keys[i]);
    json_object_set(b, keys[i], v ? v : json_null());
  }
  json_object_set_new(b, "family", json_string(task_family(p, profile)));
  json_object_set_new(b, "bound", json_string(bound_of_profile(profile)));
  return b;
}

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
    if (rc != 0 || err) {
      *ret_result = finish(run, "failed", "profile_failed", "profiling the reference failed", err);
      json_decref(reply);
      return -1;
    }
    run->profile = json_incref(json_object_get(reply, "result"));
    json_decref(reply);
    json_t *baselines = make_baselines(&run->proposer, run->profile);
    int src = store_task_profile_set(env->store, run->id, run->profile, baselines);
    json_decref(baselines);
    if (src != STORE_OK)
      return *ret_result = LOOP_STORE_ERROR, -1;
    loop_notify(run);
  }
  run->baselines = make_baselines(&run->proposer, run->profile);
  run->eager_ms = json_number_value(json_object_get(run->profile, "eager_ms"));
  run->state.family = task_family(&run->proposer, run->profile);
  run->state.bound = bound_of_profile(run->profile);
  return 0;
}

/* Ends the task at once when the proposer cannot write candidates for it, with its
 * reason, rather than spending the budget on steps that cannot propose anything. */
static int check_supported(struct task_run *run, enum loop_result *ret_result) {
  const char *family;
  char why[1024], code[64];
  if (run->proposer.supports(run->proposer.self, run->profile, &family, why, sizeof why) == 0)
    return 0;
  snprintf(code, sizeof code, "unsupported_by_%s", run->proposer.name);
  *ret_result = finish(run, "failed", code, why, NULL);
  return -1;
}

/* Rebuilds the tree from its stored rows, or starts one at the reference. */
static int restore_tree(struct task_run *run) {
  json_t *rows = NULL;
  if (!(run->tree = tree_new()) || store_tree_rows(run->env->store, run->id, &rows) != STORE_OK)
    return -1;
  int rc = 0;
  if (json_array_size(rows) == 0) {
    rc = tree_add_root(run->tree, run->env->cfg);
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
  return rc;
}

/* Reads the options and the resumable counters of the task. */
static int load_task(struct task_run *run, enum loop_result *ret_result) {
  if (store_task_get(run->env->store, run->id, true, &run->task) != STORE_OK)
    return *ret_result = LOOP_STORE_ERROR, -1;
  run->options = json_object_get(run->task, "options");
  json_t *budget = json_object_get(run->options, "budget");
  run->budget_steps = (int)json_integer_value(json_object_get(budget, "steps"));
  run->budget_s = json_number_value(json_object_get(budget, "seconds"));
  json_t *progress = json_object_get(run->task, "progress");
  run->step = (int)json_integer_value(json_object_get(progress, "step"));
  run->correct = (int)json_integer_value(json_object_get(progress, "correct"));
  run->best_speedup = json_number_value(json_object_get(progress, "best_speedup"));
  run->best_ms = json_number_value(json_object_get(progress, "best_ms"));
  run->elapsed_s = json_number_value(json_object_get(progress, "elapsed_s"));
  const char *best = json_string_value(json_object_get(progress, "best_candidate"));
  snprintf(run->best_candidate, sizeof run->best_candidate, "%s", best ? best : "");
  run->traits = policy_find(json_string_value(json_object_get(run->options, "policy")));
  const char *proposer = json_string_value(json_object_get(run->options, "proposer"));
  if (!run->traits) {
    *ret_result = finish(run, "failed", "unknown_policy", "the task's policy is unknown", NULL);
    return -1;
  }
  struct proposer_config pcfg = {.fixtures_dir = run->env->fixtures_dir};
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

/* Steps until the budget, a cancel, a checkpoint or a store failure. */
static enum loop_result run_steps(struct task_run *run) {
  while (run->step < run->budget_steps && run->elapsed_s < run->budget_s) {
    if (atomic_load(run->env->stopping)) {
      store_task_unclaim(run->env->store, run->id);
      log_info("task %s checkpointed at step %d", run->id, run->step);
      return LOOP_CHECKPOINTED;
    }
    if (cancel_requested(run))
      return finish(run, "cancelled", NULL, NULL, NULL);
    if (loop_step(run) != STORE_OK) {
      store_task_unclaim(run->env->store, run->id);
      return LOOP_STORE_ERROR;
    }
    if (run->traits->single_shot)
      break;
  }
  if (cancel_requested(run))
    return finish(run, "cancelled", NULL, NULL, NULL);
  if (run->correct > 0)
    return finish(run, "succeeded", NULL, NULL, NULL);
  char message[128];
  snprintf(message, sizeof message, "none of the %d candidate(s) was correct", run->step);
  return finish(run, "failed", "no_correct_candidate", message, NULL);
}

enum loop_result loop_run_task(const struct loop_env *env, const char *task_id) {
  struct task_run run = {.env = env, .id = task_id};
  enum loop_result result = LOOP_STORE_ERROR;
  if (env->evaluator->set_current_task)
    env->evaluator->set_current_task(env->evaluator->self, task_id);
  if (load_task(&run, &result) == 0 && prepare_evaluator(&run, &result) == 0 &&
      check_supported(&run, &result) == 0) {
    if (restore_tree(&run) == 0)
      result = run_steps(&run);
    else
      result = finish(&run, "failed", "bad_tree", "the stored search tree is unreadable", NULL);
  }
  if (env->evaluator->set_current_task)
    env->evaluator->set_current_task(env->evaluator->self, NULL);
  proposer_clear(&run.proposer);
  tree_free(run.tree);
  json_decref(run.task);
  json_decref(run.profile);
  json_decref(run.baselines);
  json_decref(run.evaluated);
  return result;
}
