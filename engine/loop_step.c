/* One step of the optimization loop: choose, propose, evaluate, record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/outcome.h"
#include "base/sha256.h"
#include "engine/loop_internal.h"
#include "engine/memory_view.h"
#include "store/candidates.h"
#include "store/memory.h"
#include "store/steps.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *step_name(enum tree_step kind) {
  return kind == TREE_STEP_SMALL ? "small" : kind == TREE_STEP_LARGE ? "large" : "root";
}

/* Loads the stored candidates of tree nodes ids[0..n) into an array (caller owns). */
static json_t *load_candidates(struct task_run *run, const size_t *ids, size_t n) {
  json_t *out = json_array();
  for (size_t i = 0; out && i < n; i++) {
    json_t *c = NULL;
    if (store_candidate_get(run->env->store, run->tree->nodes[ids[i]].candidate, &c) == STORE_OK)
      json_array_append_new(out, c);
  }
  return out;
}

/* The context of a proposal: the representative pool for a large step, the recent work
 * for a small one. */
static json_t *proposal_context(struct task_run *run, size_t node, enum tree_step kind) {
  size_t ids[SEARCH_MAX_POOL], n = 0;
  int rc = kind == TREE_STEP_LARGE ? tree_pool(run->tree, run->env->cfg, node, ids, &n)
                                   : tree_recent(run->tree, run->env->cfg, node, ids, &n);
  return load_candidates(run, ids, rc == 0 ? n : 0);
}

/* Fills *req for choice: the parent candidate and the context are loaded (release them
 * with request_clear), the rest is borrowed from run and memory. */
static void request_init(struct task_run *run, const struct policy_choice *choice,
                         const struct memory_view *memory, struct proposal_request *req) {
  json_t *parent = NULL, *strategy_node = NULL;
  if (choice->node > 0)
    store_candidate_get(run->env->store, run->tree->nodes[choice->node].candidate, &parent);
  for (size_t i = 0; i < memory->n_locals; i++)
    if (strcmp(memory->locals[i].id, choice->strategy) == 0)
      strategy_node = memory->local_nodes[i];
  *req = (struct proposal_request){
    .task_id = run->id,
    .task_name = json_string_value(json_object_get(run->task, "name")),
    .task_options = run->options,
    .profile = run->profile,
    .step = run->step + 1,
    .direction = choice->direction,
    .direction_node = memory_view_global_node(memory, choice->direction),
    .strategy = choice->strategy[0] ? choice->strategy : NULL,
    .strategy_node = strategy_node,
    .parent = parent,
    .context = proposal_context(run, choice->node, choice->kind),
  };
}

static void request_clear(struct proposal_request *req) {
  json_decref(req->parent);
  json_decref(req->context);
}

/* Asks the proposer once for choice, a small or a large step; on success *ret_candidate,
 * else *ret_failure (caller owns). */
static void propose_once(struct task_run *run, const struct policy_choice *choice,
                         const struct memory_view *memory, json_t **ret_candidate,
                         json_t **ret_failure) {
  struct proposal_request req;
  request_init(run, choice, memory, &req);
  *ret_candidate = NULL;
  *ret_failure = NULL;
  struct proposer *p = &run->proposer;
  int rc = choice->kind == TREE_STEP_SMALL
               ? p->propose_small(p->self, &req, ret_candidate, ret_failure)
               : p->propose_large(p->self, &req, ret_candidate, ret_failure);
  if (rc != 0 && !*ret_failure)
    *ret_failure = json_pack("{s:s, s:s, s:s}", "stage", "parse", "class", "parse/proposer",
                             "message", "the proposer failed without a reason");
  request_clear(&req);
}

/* Lets the proposer learn from the outcome of the step's candidate. */
static void proposer_learn(struct task_run *run, const struct policy_choice *choice,
                           const struct memory_view *memory, json_t *candidate,
                           const struct eval_outcome *o) {
  if (!run->proposer.learn)
    return;
  struct proposal_request req;
  request_init(run, choice, memory, &req);
  run->proposer.learn(run->proposer.self, &req, candidate, o);
  request_clear(&req);
}

/* True when failure says the strategy's move does not fit this task's shapes. */
static bool invalid_move(json_t *failure) {
  const char *cls = json_string_value(json_object_get(failure, "class"));
  return cls && strcmp(cls, "parse/invalid_move") == 0;
}

#define MOVE_RETRIES 8

/* The digest of what decides a candidate's evaluation (source, options, plan) as hex in
 * ret_hex; false when it cannot be computed. */
static bool candidate_digest(json_t *candidate, char ret_hex[SHA256_HEX_BYTES]) {
  json_t *key = json_pack("{s:O?, s:O?, s:O?}", "source", json_object_get(candidate, "source"),
                          "options", json_object_get(candidate, "options"), "plan",
                          json_object_get(candidate, "plan"));
  char *text = key ? json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(key);
  if (!text)
    return false;
  sha256_hex(text, strlen(text), ret_hex);
  free(text);
  return true;
}

/* True when this run already evaluated candidate. */
static bool already_evaluated(const struct task_run *run, json_t *candidate) {
  char digest[SHA256_HEX_BYTES];
  return run->evaluated && candidate_digest(candidate, digest) &&
         json_object_get(run->evaluated, digest) != NULL;
}

/* Whether an alternative proposal should replace the one in hand: none yet, and the
 * last attempt was refused as an invalid move or repeated an evaluated candidate. */
static bool keep_looking(json_t *candidate, json_t *failure, bool have_repeat) {
  return !candidate && (have_repeat || invalid_move(failure));
}

/* Asks the proposer. When the chosen strategy's move does not fit the task (refused
 * before compiling, so nothing was spent), or yields a candidate this run already
 * evaluated (its result would only be reused), the other strategies of the same
 * direction are tried in memory order, so a step is not lost; choice->strategy then
 * names the one used. When every alternative repeats or does not fit, the repeat stands. */
static void propose(struct task_run *run, struct policy_choice *choice,
                    const struct memory_view *memory, json_t **ret_candidate,
                    json_t **ret_failure) {
  propose_once(run, choice, memory, ret_candidate, ret_failure);
  json_t *repeat = NULL;
  char repeat_strategy[sizeof choice->strategy];
  if (*ret_candidate && already_evaluated(run, *ret_candidate)) {
    repeat = *ret_candidate;
    *ret_candidate = NULL;
    snprintf(repeat_strategy, sizeof repeat_strategy, "%s", choice->strategy);
  }
  int tries = 0;
  for (size_t i = 0; i < memory->n_locals && tries < MOVE_RETRIES &&
                     keep_looking(*ret_candidate, *ret_failure, repeat != NULL);
       i++) {
    const struct htam_local *l = &memory->locals[i];
    if (strcmp(l->id, choice->strategy) == 0 ||
        !htam_local_applies(l, choice->direction, run->state.family))
      continue;
    struct policy_choice alt = *choice;
    snprintf(alt.strategy, sizeof alt.strategy, "%s", l->id);
    json_t *candidate = NULL, *failure = NULL;
    propose_once(run, &alt, memory, &candidate, &failure);
    tries++;
    if (candidate && already_evaluated(run, candidate)) {
      json_decref(candidate);
      json_decref(failure);
    } else if (candidate || !invalid_move(failure)) {
      json_decref(*ret_failure);
      *ret_candidate = candidate;
      *ret_failure = failure;
      snprintf(choice->strategy, sizeof choice->strategy, "%s", l->id);
    } else {
      json_decref(failure);
    }
  }
  if (!*ret_candidate && repeat) {
    json_decref(*ret_failure);
    *ret_failure = NULL;
    *ret_candidate = repeat;
    snprintf(choice->strategy, sizeof choice->strategy, "%s", repeat_strategy);
  } else {
    json_decref(repeat);
  }
}

/* Evaluates a candidate; returns the evaluation result (caller owns), whose "failure" is
 * set when the evaluator or the kernel failed. */
static json_t *evaluate(struct task_run *run, json_t *candidate) {
  const struct loop_env *env = run->env;
  json_t *args = json_pack("{s:O}", "candidate", candidate), *reply = NULL;
  int rc = env->evaluator->request(env->evaluator->self, "evaluate", args,
                                   env->evaluate_deadline_s, &reply);
  json_decref(args);
  json_t *result;
  if (rc == 0 && json_is_true(json_object_get(reply, "ok")))
    result = json_incref(json_object_get(reply, "result"));
  else
    result = json_pack("{s:b, s:O?}", "correct", 0, "failure",
                       rc == 0 ? json_object_get(reply, "error") : NULL);
  json_decref(reply);
  if (result && rc != 0)
    json_object_set_new(result, "failure",
                        json_pack("{s:s, s:s, s:s}", "stage", "crash", "class",
                                  "crash/no_reply", "message", "the evaluator gave no reply"));
  return result;
}

/* Evaluates a candidate unless this run already evaluated the same one (templates
 * often reach one knob set by different moves): then the earlier result is reused,
 * marked with "reused_from", and the GPU is spared. Returns the result (caller owns).
 * The memory of reuse lasts for this process's run of the task: after a restart, a
 * repeat is evaluated again. */
static json_t *evaluate_once(struct task_run *run, json_t *candidate, const char *id) {
  char digest[SHA256_HEX_BYTES];
  bool keyed = candidate_digest(candidate, digest);
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
   * cached. */
  bool cacheable = result && !eval_stage_environmental(o.stage);
  if (keyed && cacheable) {
    if (!run->evaluated)
      run->evaluated = json_object();
    json_object_set_new(run->evaluated, digest, json_pack("{s:s, s:O}", "id", id, "result", result));
  }
  return result;
}

/* Outcome of a step: the typed evaluation outcome and the speed-up it means. */
struct outcome {
  struct eval_outcome eval;
  bool correct;
  const char *label;   /* "correct", else the failure class, else the stage */
  double time_ms;      /* median, 0 when not timed */
  double speedup;      /* eager / time, 0 when unknown */
};

/* Reads result (borrowed) into *o; o->label points into o. */
static void read_outcome(const struct task_run *run, json_t *result, struct outcome *o) {
  *o = (struct outcome){0};
  eval_outcome_read(result, &o->eval);
  o->correct = o->eval.stage == EVAL_CORRECT;
  o->label = o->correct ? "correct" : o->eval.cls[0] ? o->eval.cls : eval_stage_name(o->eval.stage);
  o->time_ms = o->eval.time_ms;
  if (o->correct && o->time_ms > 0 && run->eager_ms > 0)
    o->speedup = run->eager_ms / o->time_ms;
}

/* The tree rows a step rewrites: the new node and every ancestor. */
static json_t *changed_rows(const struct tree *t, size_t node) {
  json_t *rows = json_array();
  for (size_t id = node; rows && id != TREE_NONE; id = t->nodes[id].parent)
    json_array_append_new(rows, tree_node_to_json(t, id));
  return rows;
}

json_t *loop_progress(const struct task_run *run) {
  return json_pack("{s:i, s:i, s:o, s:o, s:i, s:i, s:f, s:s?}", "step", run->step,
                   "budget_steps", run->budget_steps,
                   "best_speedup", run->correct ? json_real(run->best_speedup) : json_null(),
                   "best_ms", run->correct ? json_real(run->best_ms) : json_null(), "correct",
                   run->correct, "candidates", run->step, "elapsed_s", run->elapsed_s,
                   "best_candidate", run->correct ? run->best_candidate : NULL);
}

/* Rewards of a step: HTAM's r and the tree's node reward (recorded in the tree). */
static int score_step(struct task_run *run, const struct policy_choice *choice,
                      const struct outcome *o, size_t child, double *ret_r) {
  enum htam_outcome ho = htam_outcome_of(o->eval.stage);
  /* The parent's time; a parent without one (failed) is compared as eager would be. */
  const struct tree_node *parent = &run->tree->nodes[choice->node];
  double t_parent = parent->result == TREE_CORRECT && parent->speedup > 0 && run->eager_ms > 0
                        ? run->eager_ms / parent->speedup
                        : run->eager_ms > 0 ? run->eager_ms : o->time_ms;
  if (htam_reward(run->env->cfg, ho, t_parent, o->time_ms, ret_r) != 0)
    *ret_r = run->env->cfg->penalty_incorrect;
  return tree_record(run->tree, run->env->cfg, child, tree_result_of(o->eval.stage), o->speedup,
                     NULL);
}

/* Builds and commits the step record. */
static int commit_step(struct task_run *run, const struct policy_choice *choice,
                       const struct outcome *o, json_t *candidate, size_t child, double r) {
  const char *prefix[SEARCH_MAX_PREFIX];
  size_t prefix_n = 0;
  tree_prefix(run->tree, run->env->cfg, choice->node, prefix, &prefix_n);
  struct htam_update u;
  htam_update(run->env->cfg, prefix, prefix_n, choice->direction,
              choice->strategy[0] ? choice->strategy : NULL, htam_outcome_of(o->eval.stage), r,
              &u);
  char note[160];
  snprintf(note, sizeof note, "%s step %d: %s", step_name(choice->kind), run->step, o->label);
  struct memory_step_update m = {
    .task_id = run->id, .candidate_id = json_string_value(json_object_get(candidate, "id")),
    .global_id = choice->direction, .local_id = choice->strategy[0] ? choice->strategy : NULL,
    .reward = r, .correct = o->correct, .improved = o->correct && r > 0,
    .outcome = eval_stage_name(o->eval.stage), .note = note,
    .ema_alpha = run->env->cfg->ema_alpha, .n_prefix = (int)u.n_edges,
  };
  for (size_t i = 0; i < u.n_edges && i < 8; i++) {
    m.prefix[i] = u.edges[i].from;
    m.alpha[i] = u.edges[i].d_n;
  }
  json_t *progress = loop_progress(run);
  json_t *event = json_pack(
      "{s:i, s:i, s:s, s:s?, s:s, s:s, s:s?, s:o, s:o, s:o, s:f, s:s}", "step", run->step,
      "budget_steps", run->budget_steps, "direction", choice->direction, "strategy",
      choice->strategy[0] ? choice->strategy : NULL, "kind", step_name(choice->kind), "outcome",
      eval_stage_name(o->eval.stage), "class", o->eval.cls[0] ? o->eval.cls : NULL,
      "time_ms", o->time_ms > 0 ? json_real(o->time_ms) : json_null(),
      "speedup", o->speedup > 0 ? json_real(o->speedup) : json_null(),
      "best_speedup", run->correct ? json_real(run->best_speedup) : json_null(), "reward", r,
      "candidate", json_string_value(json_object_get(candidate, "id")));
  json_t *rows = changed_rows(run->tree, child);
  struct step_commit c = {.task_id = run->id, .step = run->step, .candidate = candidate,
                          .tree_rows = rows, .memory = &m, .progress = progress,
                          .event_data = event};
  int rc = progress && event && rows ? store_step_commit(run->env->store, &c) : STORE_ERROR;
  json_decref(progress);
  json_decref(event);
  json_decref(rows);
  return rc;
}

/* Completes the candidate record with its identity, lineage and feedback. */
static void annotate(json_t *candidate, const struct task_run *run,
                     const struct policy_choice *choice, json_t *result, const char *id) {
  const char *parent = choice->node > 0 ? run->tree->nodes[choice->node].candidate : NULL;
  json_object_set_new(candidate, "id", json_string(id));
  json_object_set_new(candidate, "parent_id", parent ? json_string(parent) : json_null());
  json_object_set_new(candidate, "direction", json_string(choice->direction));
  json_object_set_new(candidate, "strategy",
                      choice->strategy[0] ? json_string(choice->strategy) : json_null());
  json_object_set_new(candidate, "step_kind", json_string(step_name(choice->kind)));
  json_object_set(candidate, "result", result);
}

/* Updates the run's counters for a recorded outcome. */
static void count(struct task_run *run, const struct outcome *o, const char *id) {
  run->step++;
  if (o->correct) {
    run->correct++;
    if (o->speedup > run->best_speedup || run->correct == 1) {
      run->best_speedup = o->speedup;
      run->best_ms = o->time_ms;
      snprintf(run->best_candidate, sizeof run->best_candidate, "%s", id);
    }
    run->last_failure_stage[0] = '\0';
  } else {
    snprintf(run->last_failure_stage, sizeof run->last_failure_stage, "%s",
             eval_stage_name(o->eval.stage));
  }
  run->state.failure_stage = run->last_failure_stage[0] ? run->last_failure_stage : NULL;
}

int loop_step(struct task_run *run) {
  double started = now_s();
  json_t *graph = NULL;
  struct memory_view memory = {0};
  if (store_memory_load_graph(run->env->store, &graph) != STORE_OK ||
      memory_view_init(&memory, graph) != 0) {
    json_decref(graph);
    return STORE_ERROR;
  }
  json_decref(graph);
  struct rng rng;
  rng_seed_stream(&rng, (uint64_t)json_integer_value(json_object_get(run->options, "seed")),
                  (uint64_t)run->step + 1);
  struct policy_input in = {.cfg = run->env->cfg, .traits = run->traits, .tree = run->tree,
                            .memory = &memory, .state = &run->state, .rng = &rng,
                            .step = run->step + 1};
  struct policy_choice choice;
  if (policy_choose(&in, &choice) != 0) {
    memory_view_clear(&memory);
    return STORE_ERROR;
  }
  /* The first step of a task proposes the proposer's own starting point (for the
   * builtin proposer, the family's tuned defaults) without a strategy's move, so the
   * search never ends worse than where it starts: with 3 steps, 42_Max_Pooling_2D on
   * the H200 otherwise tried only one move (2.75 ms) and never its default (1.29 ms).
   * The step still counts for the chosen direction. */
  if (run->step == 0 && choice.node == 0 && choice.kind == TREE_STEP_LARGE)
    choice.strategy[0] = '\0';
  json_t *candidate = NULL, *failure = NULL, *result;
  char id[ID_LEN + 1];
  id_new(id);
  propose(run, &choice, &memory, &candidate, &failure);
  if (candidate) {
    result = evaluate_once(run, candidate, id);
  } else {
    candidate = json_pack("{s:s, s:n, s:n}", "source", "", "options", "plan");
    result = json_pack("{s:b, s:o}", "correct", 0, "failure", failure);
  }
  annotate(candidate, run, &choice, result, id);
  struct outcome o;
  read_outcome(run, result, &o);
  proposer_learn(run, &choice, &memory, candidate, &o.eval);
  size_t child;
  double r = 0;
  int rc = tree_add_child(run->tree, choice.node, choice.kind, choice.direction,
                          choice.strategy, id, &child) == 0 &&
                   score_step(run, &choice, &o, child, &r) == 0
               ? STORE_OK
               : STORE_ERROR;
  if (rc == STORE_OK) {
    count(run, &o, id);
    run->elapsed_s += now_s() - started;
    rc = commit_step(run, &choice, &o, candidate, child, r);
  }
  if (rc == STORE_OK)
    loop_notify(run);
  log_info("task %s step %d/%d: %s/%s %s -> %s", run->id, run->step, run->budget_steps,
           choice.direction, choice.strategy, step_name(choice.kind), o.label);
  json_decref(candidate);
  json_decref(result);
  json_decref(choice.why);
  memory_view_clear(&memory);
  return rc;
}
