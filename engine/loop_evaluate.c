/* Evaluation of a step's candidate through the evaluator, with the reuse of results
 * for candidates this run already evaluated. */
#include <stdlib.h>
#include <string.h>

#include "base/outcome.h"
#include "base/sha256.h"
#include "engine/loop_internal.h"
#include "gpu/supervisor.h"

bool loop_candidate_digest(json_t *candidate, char ret_hex[SHA256_HEX_BYTES]) {
  json_t *key = json_pack("{s:O?, s:O?, s:O?, s:O?}", "source",
                          json_object_get(candidate, "source"), "options",
                          json_object_get(candidate, "options"), "plan",
                          json_object_get(candidate, "plan"), "program",
                          json_object_get(candidate, "program"));
  char *text = key ? json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(key);
  if (!text)
    return false;
  sha256_hex(text, strlen(text), ret_hex);
  free(text);
  return true;
}

bool loop_not_recorded(const json_t *result) {
  const char *cls = json_string_value(
      json_object_get(json_object_get(result, "failure"), "class"));
  return cls && strcmp(cls, LOOP_NOT_RECORDED_CLASS) == 0;
}

bool loop_already_evaluated(const struct task_run *run, json_t *candidate) {
  char digest[SHA256_HEX_BYTES];
  return run->evaluated && loop_candidate_digest(candidate, digest) &&
         json_object_get(run->evaluated, digest) != NULL;
}

/* Evaluates a candidate; returns the evaluation result (caller owns), whose "failure" is
 * set when the evaluator or the kernel failed. */
static json_t *evaluate(struct task_run *run, json_t *candidate) {
  const struct loop_env *env = run->env;
  json_t *args = json_pack("{s:O}", "candidate", candidate), *reply = NULL;
  /* A program's evaluation times stream order and graph replay and breaks the time down
   * by step, on top of a kernel's checks: it gets LOOP_PROGRAM_DEADLINE_FACTOR times the
   * deadline. */
  double deadline = env->evaluate_deadline_s *
                    (json_is_object(json_object_get(candidate, "program")) ? LOOP_PROGRAM_DEADLINE_FACTOR : 1);
  int rc = env->evaluator->request(env->evaluator->self, "evaluate", args, deadline, &reply);
  json_decref(args);
  json_t *result;
  if (rc == 0 && json_is_true(json_object_get(reply, "ok")))
    result = json_incref(json_object_get(reply, "result"));
  else
    result = json_pack("{s:b, s:O?}", "correct", 0, "failure",
                       rc == 0 ? json_object_get(reply, "error") : NULL);
  /* The server's shutdown stopped the evaluator: this result says nothing of the
   * candidate (engine/workers.c, wait_for_workers). */
  const char *cls = json_string_value(
      json_object_get(json_object_get(reply, "error"), "class"));
  if (rc == 0 && cls && strcmp(cls, SUPERVISOR_SHUTDOWN_CLASS) == 0)
    run->aborted = true;
  json_decref(reply);
  if (result && rc != 0)
    json_object_set_new(result, "failure",
                        json_pack("{s:s, s:s, s:s}", "stage", "crash", "class",
                                  "crash/no_reply", "message", "the evaluator gave no reply"));
  return result;
}

json_t *loop_evaluate_once(struct task_run *run, json_t *candidate, const char *id) {
  char digest[SHA256_HEX_BYTES];
  bool keyed = loop_candidate_digest(candidate, digest);
  json_t *seen = keyed && run->evaluated ? json_object_get(run->evaluated, digest) : NULL;
  if (seen) {
    json_t *result = json_deep_copy(json_object_get(seen, "result"));
    if (result)
      json_object_set(result, "reused_from", json_object_get(seen, "id"));
    return result;
  }
  json_t *result = evaluate(run, candidate);
  struct eval_outcome o;
  eval_outcome_read(result, &o);
  /* Crashes, timeouts and the evaluator's own failures (load, protocol: memory taken by
   * another slot, a restart) may be the machine's fault, not the candidate's: never
   * cached. A record's "not recorded" is its answer for good: cached. */
  bool cacheable = result && !run->aborted &&
                   (!eval_stage_environmental(o.stage) || loop_not_recorded(result));
  if (keyed && cacheable) {
    if (!run->evaluated)
      run->evaluated = json_object();
    json_object_set_new(run->evaluated, digest, json_pack("{s:s, s:O}", "id", id, "result", result));
  }
  return result;
}


json_t *loop_cached_result(const struct task_run *run, json_t *candidate) {
  char digest[SHA256_HEX_BYTES];
  if (!run->evaluated || !candidate || !loop_candidate_digest(candidate, digest))
    return NULL;
  return json_object_get(json_object_get(run->evaluated, digest), "result");
}
