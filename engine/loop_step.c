/* One step of the optimization loop: choose, propose, evaluate, record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/outcome.h"
#include "base/sha256.h"
#include "engine/budget.h"
#include "engine/loop_internal.h"
#include "engine/memory_view.h"
#include "engine/program.h"
#include "store/candidates.h"
#include "store/memory.h"
#include "store/steps.h"

static const char *step_name(enum tree_step kind) {
  return kind == TREE_STEP_SMALL ? "small" : kind == TREE_STEP_LARGE ? "large" : "root";
}

/* Outcome of a step: the typed evaluation outcome and the speed-up it means. */
struct outcome {
  struct eval_outcome eval;
  bool correct;
  const char *label;   /* "correct", else the failure class, else the stage */
  double time_ms;      /* median, 0 when not timed */
  double speedup;      /* eager / time, 0 when unknown */
};

/* The eager time a library-only program was timed in turn with (result's "eager",
 * borrowed; docs/architecture.md, "Evaluation result"), or 0 when it has none. */
static double eager_in_turn_ms(const json_t *result) {
  double ms = json_number_value(json_object_get(json_object_get(result, "eager"), "median_ms"));
  return ms > 0 ? ms : 0;
}

/* Reads result (borrowed) into *o; o->label points into o. The speed-up is against the
 * eager time the result was timed in turn with, when it has one, else the run's. */
static void read_outcome(const struct task_run *run, json_t *result, struct outcome *o) {
  *o = (struct outcome){0};
  eval_outcome_read(result, &o->eval);
  o->correct = o->eval.stage == EVAL_CORRECT;
  o->label = o->correct ? "correct" : o->eval.cls[0] ? o->eval.cls : eval_stage_name(o->eval.stage);
  o->time_ms = o->eval.time_ms;
  double eager = eager_in_turn_ms(result);
  if (eager <= 0)
    eager = run->eager_ms;
  if (o->correct && o->time_ms > 0 && eager > 0)
    o->speedup = eager / o->time_ms;
}

#define LOG_MESSAGE_CHARS 300

/* Writes into ret_text ("" when result has no failure message) ": " and the first
 * LOG_MESSAGE_CHARS bytes of result's failure message, control characters as spaces, to
 * end a failed step's line in the server log, so that a bench's log says why (an
 * allocation's size, a mismatch's place). result is borrowed. */
static void failure_suffix(const json_t *result, char ret_text[LOG_MESSAGE_CHARS + 3]) {
  const char *m =
      json_string_value(json_object_get(json_object_get(result, "failure"), "message"));
  ret_text[0] = '\0';
  if (!m || !*m)
    return;
  size_t n = strnlen(m, LOG_MESSAGE_CHARS);
  memcpy(ret_text, ": ", 2);
  for (size_t i = 0; i < n; i++)
    ret_text[2 + i] = (unsigned char)m[i] < 0x20 || m[i] == 0x7f ? ' ' : m[i];
  ret_text[2 + n] = '\0';
}

/* The tree rows a step rewrites: the new node and every ancestor. */
static json_t *changed_rows(const struct tree *t, size_t node) {
  json_t *rows = json_array();
  for (size_t id = node; rows && id != TREE_NONE; id = t->nodes[id].parent)
    json_array_append_new(rows, tree_node_to_json(t, id));
  return rows;
}

/* The progress record of run's committed state (caller owns). */
static json_t *progress_of(const struct task_run *run) {
  bool share = run->correct && run->best_ms > 0 && run->best_library_ms >= 0;
  double library_share = share ? run->best_library_ms / run->best_ms : 0;
  if (library_share > 1)
    library_share = 1;
  const struct proposal_usage *u = &run->spent;
  return json_pack("{s:i, s:i, s:o, s:o, s:i, s:i, s:f, s:s?, s:o, s:o, s:I, s:I, s:f}",
                   "step", run->step,
                   "budget_steps", run->budget_steps,
                   "best_speedup", run->correct ? json_real(run->best_speedup) : json_null(),
                   "best_ms", run->correct ? json_real(run->best_ms) : json_null(), "correct",
                   run->correct, "candidates", run->step, "elapsed_s", run->elapsed_s,
                   "best_candidate", run->correct ? run->best_candidate : NULL,
                   "library_share", share ? json_real(library_share) : json_null(),
                   "best_graph", run->best_graph < 0 ? json_null() : json_boolean(run->best_graph),
                   "llm_prompt_tokens", (json_int_t)u->prompt_tokens, "llm_completion_tokens",
                   (json_int_t)u->completion_tokens, "llm_cost_usd", u->cost_usd);
}

json_t *loop_progress(const struct task_run *run) {
  json_t *progress = progress_of(run);
  if (progress && run->not_recorded > 0)
    json_object_set_new(progress, "not_recorded", json_integer(run->not_recorded));
  return progress;
}

void loop_take_usage(struct task_run *run) {
  run->spent_now = run->step_usage;
  run->spent.prompt_tokens += run->step_usage.prompt_tokens;
  run->spent.completion_tokens += run->step_usage.completion_tokens;
  run->spent.cost_usd += run->step_usage.cost_usd;
  run->step_usage = (struct proposal_usage){0};
}

/* Notes what the best program's result says of its make-up: library time and graph. */
static void note_best(struct task_run *run, json_t *candidate, json_t *result) {
  json_t *lib = json_object_get(result, "library_ms");
  json_t *graph = json_object_get(json_object_get(result, "graph"), "used");
  bool program = json_is_object(json_object_get(candidate, "program"));
  run->best_library_ms = json_is_number(lib) ? json_number_value(lib) : program ? -1 : 0;
  if (json_is_string(graph))  /* the order the evaluator timed: "graph" or "stream" */
    run->best_graph = strcmp(json_string_value(graph), "graph") == 0;
  else
    run->best_graph = json_is_boolean(graph) ? json_is_true(graph) : program ? -1 : 0;
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
  if (htam_reward(&run->cfg, ho, t_parent, o->time_ms, ret_r) != 0)
    *ret_r = run->cfg.penalty_incorrect;
  return tree_record(run->tree, &run->cfg, child, tree_result_of(o->eval.stage), o->speedup,
                     NULL);
}

/* Builds and commits the step record; the memory's and the skills' updates only when the
 * run learns (search.learn). */
static int commit_step(struct task_run *run, const struct policy_choice *choice,
                       const struct step_context *ctx, const struct outcome *o,
                       json_t *candidate, size_t child, double r,
                       const struct skill_update *skills) {
  /* A patch that kept its node's direction chose no transition: it writes no edge
   * (docs/architecture.md, "HTAM"). */
  const char *prefix[SEARCH_MAX_PREFIX];
  size_t prefix_n = 0;
  if (!choice->inherited)
    tree_prefix(run->tree, &run->cfg, choice->node, prefix, &prefix_n);
  struct htam_update u;
  htam_update(&run->cfg, prefix, prefix_n, choice->direction,
              choice->strategy[0] ? choice->strategy : NULL, htam_outcome_of(o->eval.stage), r,
              &u);
  char note[160];
  snprintf(note, sizeof note, "%s step %d: %s", step_name(choice->kind), run->step, o->label);
  struct memory_step_update m = {
    .ns = run->memory, .task_id = run->id,
    .candidate_id = json_string_value(json_object_get(candidate, "id")),
    .global_id = choice->direction, .local_id = choice->strategy[0] ? choice->strategy : NULL,
    .reward = r, .correct = o->correct, .improved = o->correct && r > 0,
    .outcome = eval_stage_name(o->eval.stage), .note = note,
    .ema_alpha = run->cfg.ema_alpha, .n_prefix = (int)u.n_edges,
  };
  for (size_t i = 0; i < u.n_edges && i < 8; i++) {
    m.prefix[i] = u.edges[i].from;
    m.alpha[i] = u.edges[i].d_n;
  }
  loop_take_usage(run);
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
  if (event && (run->spent_now.prompt_tokens || run->spent_now.completion_tokens))
    json_object_set_new(event, "llm",
                        json_pack("{s:I, s:I, s:f}", "prompt_tokens",
                                  (json_int_t)run->spent_now.prompt_tokens, "completion_tokens",
                                  (json_int_t)run->spent_now.completion_tokens, "cost_usd",
                                  run->spent_now.cost_usd));
  if (event && choice->inherited)
    json_object_set_new(event, "direction_kept", json_true());
  if (event && run->partition.n > 1) {
    const struct region *reg = &run->partition.regions[ctx->region];
    json_object_set_new(event, "region", ctx->first ? json_null() : json_integer((json_int_t)ctx->region));
    json_object_set_new(event, "family", ctx->first ? json_null() : json_string(reg->family));
    json_object_set_new(event, "library_steps",
                        json_integer((json_int_t)program_library_steps(candidate)));
  }
  json_t *rows = changed_rows(run->tree, child);
  struct step_commit c = {.task_id = run->id, .step = run->step, .candidate = candidate,
                          .tree_rows = rows, .memory = run->cfg.learn ? &m : NULL,
                          .skills = run->cfg.learn ? skills : NULL,
                          .progress = progress, .event_data = event};
  int rc = progress && event && rows ? store_step_commit(run->env->store, &c) : STORE_ERROR;
  json_decref(progress);
  json_decref(event);
  json_decref(rows);
  return rc;
}

/* The knob the strategy's move sets, or NULL (borrowed from memory). */
static const char *moved_knob(const struct memory_view *memory, const char *strategy) {
  for (size_t i = 0; strategy && strategy[0] && i < memory->n_locals; i++)
    if (strcmp(memory->locals[i].id, strategy) == 0)
      return json_string_value(
          json_object_get(json_object_get(memory->local_nodes[i], "knob_move"), "knob"));
  return NULL;
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

/* Updates the run's counters for a recorded outcome of candidate (its result borrowed). */
static void count(struct task_run *run, const struct outcome *o, json_t *candidate,
                  json_t *result, const char *id) {
  run->step++;
  if (o->correct) {
    run->correct++;
    if (o->speedup > run->best_speedup || run->correct == 1) {
      run->best_speedup = o->speedup;
      run->best_ms = o->time_ms;
      snprintf(run->best_candidate, sizeof run->best_candidate, "%s", id);
      program_region_times(&run->partition, candidate, result, run->best_region_ms);
      note_best(run, candidate, result);
    }
    run->last_failure_stage[0] = '\0';
  } else {
    snprintf(run->last_failure_stage, sizeof run->last_failure_stage, "%s",
             eval_stage_name(o->eval.stage));
  }
  run->state.failure_stage = run->last_failure_stage[0] ? run->last_failure_stage : NULL;
}

/* The memory graph as the policy reads it. Returns 0, or -1 on a store failure. */
static int load_memory(struct task_run *run, struct memory_view *ret) {
  json_t *graph = NULL;
  *ret = (struct memory_view){0};
  int rc = store_memory_load_graph(run->env->store, run->memory, &graph) == STORE_OK &&
                   memory_view_init(ret, graph) == 0
               ? 0
               : -1;
  json_decref(graph);
  return rc;
}

/* The candidate of a step whose proposer wrote none: an empty record of the failure. */
static json_t *failed_proposal(json_t *failure, json_t **ret_result) {
  *ret_result = json_pack("{s:b, s:O}", "correct", 0, "failure", failure);
  return json_pack("{s:s, s:n, s:n}", "source", "", "options", "plan");
}

/* Evaluates, scores, counts and commits the step's candidate. */
static int record_step(struct task_run *run, struct policy_choice *choice,
                       const struct memory_view *memory, const struct step_context *ctx,
                       json_t *candidate, json_t *region_candidate, json_t *failure,
                       double started, bool *ret_not_recorded) {
  char id[ID_LEN + 1];
  id_new(id);
  json_t *result;
  if (candidate)
    result = loop_evaluate_once(run, candidate, id);
  else
    candidate = failed_proposal(failure, &result);
  /* The shutdown stopped it, or the evaluator's record lacks it (a replay): nothing of
   * this step is recorded, and no step is spent. */
  *ret_not_recorded = !run->aborted && loop_not_recorded(result);
  if (run->aborted || *ret_not_recorded) {
    run->not_recorded += *ret_not_recorded;
    json_decref(candidate);
    json_decref(result);
    return STORE_OK;
  }
  annotate(candidate, run, choice, result, id);
  json_object_set_new(candidate, "region", ctx->first ? json_null() : json_integer((json_int_t)ctx->region));
  struct outcome o;
  read_outcome(run, result, &o);
  loop_learn(run, choice, memory, ctx, region_candidate, &o.eval);
  /* What the failure teaches the skill memory; any LLM call it makes counts in this step's
   * usage, and its record commits with the step. */
  struct skills_step skill;
  struct skills_failure sf = {
    .task_id = run->id, .candidate_id = id, .family = run->state.family,
    .candidate = candidate, .result = result, .partition = &run->partition,
    .task_profile = run->profile, .moved = moved_knob(memory, choice->strategy),
    .task_options = run->options, .proposer = &run->proposer, .usage = &run->step_usage,
    .limit = &run->limit,
  };
  skills_step_prepare(&run->skills, run->env->store, &sf, &skill);
  size_t child;
  double r = 0;
  int rc = tree_add_child(run->tree, choice->node, choice->kind, choice->direction,
                          choice->strategy, id, &child) == 0 &&
                   score_step(run, choice, &o, child, &r) == 0
               ? STORE_OK
               : STORE_ERROR;
  if (rc == STORE_OK) {
    count(run, &o, candidate, result, id);
    loop_note_library_first(run, ctx, candidate, result, o.correct);
    double took = budget_now_s() - started;
    run->elapsed_s += took;
    run->steps_s += took;
    run->steps_timed++;
    rc = commit_step(run, choice, ctx, &o, candidate, child, r, &skill.update);
  }
  if (rc == STORE_OK && skill.result.outcome == SKILL_OUTCOME_ADDED)
    log_info("task %s: skill rule %lld added: %s", run->id, skill.result.skill_id,
             skill.update.rule ? skill.update.rule : skill.signature);
  skills_step_clear(&skill);
  if (rc == STORE_OK)
    loop_notify(run);
  char why[LOG_MESSAGE_CHARS + 3] = "";
  if (!o.correct)
    failure_suffix(result, why);
  log_info("task %s step %d/%d: region %s %s/%s %s -> %s%s", run->id, run->step,
           run->budget_steps, ctx->first ? "all" : run->partition.regions[ctx->region].family,
           choice->direction, choice->strategy, step_name(choice->kind), o.label, why);
  json_decref(candidate);
  json_decref(result);
  return rc;
}

enum step_result loop_step(struct task_run *run, int attempt) {
  double started = budget_now_s();
  struct memory_view memory;
  if (load_memory(run, &memory) != 0)
    return STEP_STORE_ERROR;
  if (skills_load(run->env->store, &run->skills) != 0) {
    memory_view_clear(&memory);
    return STEP_STORE_ERROR;
  }
  struct rng rng;
  uint64_t stream = (uint64_t)run->step + 1 + (uint64_t)attempt * 1000003u;
  rng_seed_stream(&rng, (uint64_t)json_integer_value(json_object_get(run->options, "seed")),
                  stream);
  struct policy_input in = {.cfg = &run->cfg, .traits = run->traits, .tree = run->tree,
                            .memory = &memory, .state = &run->state, .rng = &rng,
                            .step = run->step + 1};
  struct policy_choice choice;
  struct step_context ctx;
  policy_choose_node(&in, &choice);
  int crc = loop_context_init(run, choice.node, &ctx);
  long open = crc == 1 && run->traits->node != NODE_ROOT ? loop_open_node(run) : -1;
  if (open >= 0) {  /* nothing left at the policy's node: the best node that has some */
    log_info("task %s step %d: node %zu has no move left: expanding node %ld", run->id,
             run->step + 1, choice.node, open);
    loop_context_clear(run, &ctx);
    choice.node = (size_t)open;
    choice.kind = open == 0 ? TREE_STEP_LARGE : TREE_STEP_SMALL;
    crc = loop_context_init(run, choice.node, &ctx);
  }
  enum step_result res = crc < 0 ? STEP_STORE_ERROR : STEP_NOTHING_NEW;
  if (crc == 0) {
    if (run->partition.n > 0 && run->partition.regions[ctx.region].generated)
      run->state.family = run->partition.regions[ctx.region].family;
    if (policy_choose_direction(&in, &choice) != 0)
      res = STEP_STORE_ERROR;
    else if (!ctx.first)
      loop_local_choice(run, &choice, &memory, &ctx);
  }
  /* The first step proposes the proposer's own starting point in every region (for the
   * builtin proposer, the families' tuned defaults) without a strategy's move, so the
   * search never ends worse than where it starts. It still counts for the direction. */
  if (crc == 0 && res != STEP_STORE_ERROR && ctx.first)
    choice.strategy[0] = '\0';
  /* A pending outside move of the region is taken before any other (loop_outside.c). */
  char forced[TREE_ID_MAX] = "";
  if (crc == 0 && res != STEP_STORE_ERROR && !ctx.first &&
      loop_outside_choice(run, ctx.region, &memory, &choice))
    snprintf(forced, sizeof forced, "%s", choice.strategy);
  json_t *candidate = NULL, *region_candidate = NULL, *failure = NULL;
  if (crc == 0 && res != STEP_STORE_ERROR)
    res = loop_propose(run, &choice, &memory, &ctx, &candidate, &region_candidate, &failure);
  if (forced[0])
    loop_outside_taken(run, ctx.region, forced);
  if (res == STEP_COMMITTED && !ctx.first)
    loop_outside_note(run, ctx.region, region_candidate);
  /* best_of_n only ever expands the root: a direction whose moves all repeat there must
   * not close the root to the others; the idle limit ends such a task instead. */
  if (res == STEP_NOTHING_NEW && crc >= 0 && run->traits->node != NODE_ROOT)
    loop_mark_exhausted(run, choice.node, ctx.region);
  run->store_status = STORE_ERROR;
  if (res == STEP_COMMITTED) {
    bool not_recorded = false;
    int rc = record_step(run, &choice, &memory, &ctx, candidate, region_candidate, failure,
                         started, &not_recorded);
    if (rc != STORE_OK) {
      run->store_status = rc;
      res = STEP_STORE_ERROR;
    } else if (run->aborted) {
      res = STEP_ABORTED;
    } else if (not_recorded) {
      res = STEP_NOT_RECORDED;
    }
  }
  json_decref(region_candidate);
  json_decref(failure);
  json_decref(choice.why);
  loop_context_clear(run, &ctx);
  memory_view_clear(&memory);
  return res;
}

/* The whole model as one library step ({"library": "model"}, CUDA-graph replay where
 * faster) is evaluated after the reference program whenever it can differ from it: the
 * reference has more than one library step (one forward call, captured whole, can beat
 * the graph run node by node), or it is slower than eager by more than
 * REFERENCE_SLOW_RATIO. When correct and faster it replaces the reference as step 0, so
 * no task ends slower than eager's own program (docs/architecture.md, "One task, start
 * to end"). The per-node times stay the regions' reference times. Takes over
 * *candidate, *result and *o in that case. */
#define REFERENCE_SLOW_RATIO 0.98

static void prefer_whole_model(struct task_run *run, char id[ID_LEN + 1], json_t **candidate,
                               json_t **result, struct outcome *o) {
  if (run->partition.whole_model || !o->correct || o->speedup <= 0)
    return;
  if (program_library_steps(*candidate) <= 1 && o->speedup >= REFERENCE_SLOW_RATIO)
    return;
  char whole_id[ID_LEN + 1];
  id_new(whole_id);
  json_t *whole = program_whole_model();
  json_t *whole_result = whole ? loop_evaluate_once(run, whole, whole_id) : NULL;
  struct outcome w;
  if (whole_result)
    read_outcome(run, whole_result, &w);
  if (!whole_result || !w.correct || w.speedup <= o->speedup) {
    json_decref(whole);
    json_decref(whole_result);
    return;
  }
  log_info("task %s reference: node by node x%.3f of eager, the whole model x%.3f: the whole "
           "model is step 0", run->id, o->speedup, w.speedup);
  json_decref(*candidate);
  json_decref(*result);
  *candidate = whole;
  *result = whole_result;
  *o = w;
  memcpy(id, whole_id, ID_LEN + 1);
}

int loop_reference(struct task_run *run) {
  json_t *candidate = program_reference(&run->partition);
  char id[ID_LEN + 1];
  id_new(id);
  json_t *result = loop_evaluate_once(run, candidate, id);
  if (run->aborted) {  /* the shutdown stopped it: step 0 runs again on resume */
    json_decref(candidate);
    json_decref(result);
    return STORE_OK;
  }
  struct outcome o;
  read_outcome(run, result, &o);
  if (o.correct)
    program_region_times(&run->partition, candidate, result, run->ref_region_ms);
  prefer_whole_model(run, id, &candidate, &result, &o);
  /* Step 0's eager time in turn becomes the task's, for every later figure. */
  double in_turn = o.correct ? eager_in_turn_ms(result) : 0, profile_eager_ms = run->eager_ms;
  int src = STORE_OK;
  if (in_turn > 0 && in_turn != profile_eager_ms) {
    run->eager_ms = in_turn;
    src = loop_eager_retimed(run, profile_eager_ms);
  }
  if (src != STORE_OK) {
    json_decref(candidate);
    json_decref(result);
    return src;
  }
  json_object_set_new(candidate, "id", json_string(id));
  json_object_set_new(candidate, "parent_id", json_null());
  json_object_set_new(candidate, "direction", json_null());
  json_object_set_new(candidate, "strategy", json_null());
  json_object_set_new(candidate, "step_kind", json_string("reference"));
  json_object_set(candidate, "result", result);
  struct tree_node *root = &run->tree->nodes[0];
  snprintf(root->candidate, sizeof root->candidate, "%s", id);
  if (o.correct) {
    if (o.speedup > 0)
      root->speedup = o.speedup;
    run->correct++;
    run->best_speedup = o.speedup;
    run->best_ms = o.time_ms;
    snprintf(run->best_candidate, sizeof run->best_candidate, "%s", id);
    memcpy(run->best_region_ms, run->ref_region_ms, run->partition.n * sizeof(double));
    note_best(run, candidate, result);
  }
  json_t *progress = loop_progress(run), *rows = changed_rows(run->tree, 0);
  /* Step 0 names the settings the task runs under (docs/architecture.md, "Search
   * settings"): its policy, memory namespace and every search setting. */
  json_t *event = json_pack("{s:i, s:i, s:s, s:s, s:s?, s:o, s:o, s:s, s:i, s:s, s:s, s:o}",
                            "step", 0, "budget_steps", run->budget_steps, "kind", "reference",
                            "outcome", eval_stage_name(o.eval.stage), "class",
                            o.eval.cls[0] ? o.eval.cls : NULL, "time_ms",
                            o.time_ms > 0 ? json_real(o.time_ms) : json_null(), "speedup",
                            o.speedup > 0 ? json_real(o.speedup) : json_null(), "candidate",
                            id, "library_steps", (int)program_library_steps(candidate),
                            "policy", run->traits->name, "memory", run->memory, "search",
                            search_config_to_json(&run->cfg));
  struct step_commit c = {.task_id = run->id, .step = 0, .candidate = candidate,
                          .tree_rows = rows, .memory = NULL, .progress = progress,
                          .event_data = event};
  int rc = progress && event && rows ? store_step_commit(run->env->store, &c) : STORE_ERROR;
  if (rc == STORE_OK)
    loop_notify(run);
  char why[LOG_MESSAGE_CHARS + 3] = "";
  if (!o.correct)
    failure_suffix(result, why);
  log_info("task %s reference: %s%s%s", run->id, o.label, o.correct ? "" : " (steps go on)",
           why);
  json_decref(progress);
  json_decref(rows);
  json_decref(event);
  json_decref(candidate);
  json_decref(result);
  return rc;
}
