/* Asking the proposer for a step's region candidate, trying the direction's other
 * strategies, then the other directions' strategies, when a move does not fit or repeats
 * an evaluated program, and telling the proposer how its candidate did. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/loop_internal.h"
#include "store/candidates.h"

/* For a proposer whose proposals are paid calls (an LLM), at most this many other
 * strategies are tried in one step under the chosen direction, and at most as many again
 * under the other directions. A template proposer's tries cost microseconds and nothing
 * else, so it tries every applicable strategy: with a limit, a region whose shapes refuse
 * most moves (a column reduction over an odd inner length refuses VEC, ITEMS, ROWS and
 * the row MODEs) spent its tries on refusals and was given up with valid moves left. */
#define MOVE_RETRIES 8

/* How many other strategies one retry pass may try for run's proposer: no limit for one
 * whose proposals are cheap templates (starts_every_region, proposers/proposer.h). */
static size_t retry_limit(const struct task_run *run) {
  return run->proposer.starts_every_region ? SIZE_MAX : MOVE_RETRIES;
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
  int rc = kind == TREE_STEP_LARGE ? tree_pool(run->tree, &run->cfg, node, ids, &n)
                                   : tree_recent(run->tree, &run->cfg, node, ids, &n);
  return load_candidates(run, ids, rc == 0 ? n : 0);
}

/* The memory nodes of the direction's strategies that apply to the family (caller owns). */
static json_t *applicable_strategies(struct task_run *run, const struct memory_view *memory,
                                     const char *direction) {
  json_t *out = json_array();
  for (size_t i = 0; out && direction && i < memory->n_locals; i++)
    if (htam_local_applies(&memory->locals[i], direction, run->state.family))
      json_array_append(out, memory->local_nodes[i]);
  return out;
}

/* What of the memory a proposal may carry, by the task's arm (docs/architecture.md,
 * "LLM proposer", the table of what each arm's prompts contain): the refine policy reads
 * no memory and no skill; without local memory only the direction is named; best-of-N's
 * samples are independent, so they see no pool of earlier kernels. */
struct request_view {
  bool memory;     /* the direction (global memory) */
  bool local;      /* the strategy, its record and the direction's other strategies */
  bool skills;     /* the skill rules (pitfalls) */
  bool pool;       /* the representative pool of a large step */
};

static struct request_view request_view_of(const struct task_run *run) {
  if (!run->proposer.prompted)  /* a template proposer applies the strategy's move */
    return (struct request_view){.memory = true, .local = true, .skills = true, .pool = true};
  bool memory = run->traits->direction != DIRECTION_FEEDBACK;
  return (struct request_view){.memory = memory, .local = memory && run->cfg.local_memory,
                               .skills = memory, .pool = run->traits->node != NODE_ROOT};
}

/* Fills *req for choice in the context's region: its sub-profile, and its candidate in
 * the base program as the parent, with what the task's arm lets it see of the memory.
 * The context, strategies and skills arrays are loaded (release with request_clear); the
 * rest is borrowed. */
static void request_init(struct task_run *run, const struct policy_choice *choice,
                         const struct memory_view *memory, const struct step_context *c,
                         struct proposal_request *req) {
  struct request_view view = request_view_of(run);
  json_t *strategy_node = NULL;
  for (size_t i = 0; view.local && i < memory->n_locals; i++)
    if (strcmp(memory->locals[i].id, choice->strategy) == 0)
      strategy_node = memory->local_nodes[i];
  bool pool = view.pool || choice->kind != TREE_STEP_LARGE;
  *req = (struct proposal_request){
    .task_id = run->id,
    .task_name = json_string_value(json_object_get(run->task, "name")),
    .task_options = run->options,
    .profile = run->partition.regions[c->region].profile,
    .step = run->step + 1,
    .direction = view.memory ? choice->direction : NULL,
    .direction_node = view.memory ? memory_view_global_node(memory, choice->direction) : NULL,
    .strategy = view.local && choice->strategy[0] ? choice->strategy : NULL,
    .strategy_node = strategy_node,
    .parent = c->choices[c->region],
    .context = pool ? proposal_context(run, choice->node, choice->kind) : json_array(),
    .usage = &run->step_usage,
    .limit = &run->limit,
    .strategies = view.local ? applicable_strategies(run, memory, choice->direction)
                             : json_array(),
    .reference = json_string_value(json_object_get(run->task, "reference")),
    .skills = view.skills ? skills_for(&run->skills, run->state.family) : NULL,
    .context_bytes = run->cfg.context_bytes,
    .two_call = run->cfg.small_step == SEARCH_SMALL_TWO_CALL,
  };
}

static void request_clear(struct proposal_request *req) {
  json_decref(req->context);
  json_decref(req->strategies);
  json_decref(req->skills);
}

void loop_local_choice(struct task_run *run, struct policy_choice *choice,
                       const struct memory_view *memory, const struct step_context *c) {
  struct proposer *p = &run->proposer;
  if (run->cfg.local_choice != SEARCH_LOCAL_LLM || !p->choose_strategy ||
      !choice->strategy[0] || !request_view_of(run).local)
    return;
  struct proposal_request req;
  request_init(run, choice, memory, c, &req);
  const char *id = NULL;
  json_t *failure = NULL;
  if (p->choose_strategy(p->self, &req, &id, &failure) == 0) {
    if (strcmp(id, choice->strategy) != 0)
      log_info("task %s step %d: the proposer chose strategy %s (the policy's: %s)", run->id,
               run->step + 1, id, choice->strategy);
    snprintf(choice->strategy, sizeof choice->strategy, "%s", id);
  } else {
    const char *cls = json_string_value(json_object_get(failure, "class"));
    log_warn("task %s step %d: the proposer's local choice failed (%s); strategy %s stays",
             run->id, run->step + 1, cls ? cls : "?", choice->strategy);
  }
  json_decref(failure);
  request_clear(&req);
}

/* Asks the proposer once for choice, a small or a large step (a small step needs a
 * region candidate to patch); on success *ret_candidate, else *ret_failure (caller owns). */
static void propose_once(struct task_run *run, const struct policy_choice *choice,
                         const struct memory_view *memory, const struct step_context *c,
                         json_t **ret_candidate, json_t **ret_failure) {
  struct proposal_request req;
  request_init(run, choice, memory, c, &req);
  *ret_candidate = NULL;
  *ret_failure = NULL;
  struct proposer *p = &run->proposer;
  int rc = choice->kind == TREE_STEP_SMALL && req.parent
               ? p->propose_small(p->self, &req, ret_candidate, ret_failure)
               : p->propose_large(p->self, &req, ret_candidate, ret_failure);
  if (rc != 0 && !*ret_failure)
    *ret_failure = json_pack("{s:s, s:s, s:s}", "stage", "parse", "class", "parse/proposer",
                             "message", "the proposer failed without a reason");
  if (rc != 0)
    skills_note_refusal(&run->skills, *ret_failure);
  request_clear(&req);
}

void loop_learn(struct task_run *run, const struct policy_choice *choice,
                const struct memory_view *memory, const struct step_context *c,
                json_t *region_candidate, const struct eval_outcome *o) {
  if (!run->proposer.learn || !region_candidate)
    return;
  struct proposal_request req;
  request_init(run, choice, memory, c, &req);
  run->proposer.learn(run->proposer.self, &req, region_candidate, o);
  request_clear(&req);
}

/* True when failure says the strategy's move does not fit the region's shapes: refused
 * before compiling, so nothing was spent. */
static bool invalid_move(json_t *failure) {
  const char *cls = json_string_value(json_object_get(failure, "class"));
  return cls && strcmp(cls, "parse/invalid_move") == 0;
}

/* One try: the region candidate and the program it makes, when that program is new. */
struct attempt {
  json_t *region;   /* owned */
  json_t *program;  /* owned */
  json_t *failure;  /* owned */
  bool repeat;      /* the program was evaluated already */
};

static void attempt_clear(struct attempt *a) {
  json_decref(a->region);
  json_decref(a->program);
  json_decref(a->failure);
  memset(a, 0, sizeof *a);
}

static void attempt_make(struct task_run *run, const struct policy_choice *choice,
                         const struct memory_view *memory, const struct step_context *c,
                         struct attempt *a) {
  *a = (struct attempt){0};
  if (c->first) {  /* the starting point of every region: no proposal of its own */
    a->program = loop_compose(run, c, NULL);
  } else {
    propose_once(run, choice, memory, c, &a->region, &a->failure);
    if (a->region)
      a->program = loop_compose(run, c, a->region);
  }
  a->repeat = a->program && loop_already_evaluated(run, a->program);
}

/* True when failure is the proposer's service failing (class parse/llm_* other than an
 * answer that did not parse): the endpoint is down, slow, rate limited, or refused the
 * model. Nothing was proposed, so nothing is learned or recorded. */
static bool service_failure(json_t *failure) {
  static const char *const classes[] = {
    "parse/llm_rate_limited", "parse/llm_server_error", "parse/llm_timeout",
    "parse/llm_transport", "parse/llm_too_large", "parse/llm_bad_response",
    "parse/llm_model_not_allowed", "parse/llm_prompt", NULL};
  const char *cls = json_string_value(json_object_get(failure, "class"));
  if (!cls)
    return false;
  if (strncmp(cls, "parse/llm_http_", 15) == 0)
    return true;
  for (size_t i = 0; classes[i]; i++)
    if (strcmp(cls, classes[i]) == 0)
      return true;
  return false;
}

static bool budget_failure(json_t *failure) {
  const char *cls = json_string_value(json_object_get(failure, "class"));
  return cls && strcmp(cls, "parse/llm_budget_exhausted") == 0;
}

/* True when failure says the step made every paid call it may (search.max_calls_per_step):
 * nothing was asked, so nothing is recorded; the next step asks again. */
static bool calls_used_up(json_t *failure) {
  const char *cls = json_string_value(json_object_get(failure, "class"));
  return cls && strcmp(cls, "parse/llm_call_limit") == 0;
}

/* Whether the attempt leaves nothing to evaluate or record: no candidate but a move
 * that did not fit or a step out of calls, or a program evaluated before. */
static bool nothing_new(const struct attempt *a) {
  return a->repeat ||
         (!a->program && (invalid_move(a->failure) || calls_used_up(a->failure)));
}

/* While attempt *a leaves nothing new, tries up to retry_limit() other strategies that
 * apply to the region's family: those of choice's direction (same_direction), else those
 * of the other directions. The first that makes something new replaces *a (which the
 * caller owns) and becomes choice's strategy; one of another direction also becomes its
 * direction, and the step is then a transition like any chosen direction, not a patch
 * keeping its node's. A direction whose moves all repeat at a node (a patch keeps its
 * node's direction) thus does not end the region there while another has a move. */
static void retry_strategies(struct task_run *run, struct policy_choice *choice,
                             const struct memory_view *memory, const struct step_context *c,
                             struct attempt *a, bool same_direction) {
  size_t tries = 0, limit = retry_limit(run);
  for (size_t i = 0; !c->first && nothing_new(a) && i < memory->n_locals && tries < limit; i++) {
    const struct htam_local *l = &memory->locals[i];
    bool same = l->global_id && strcmp(l->global_id, choice->direction) == 0;
    if (same != same_direction || strcmp(l->id, choice->strategy) == 0 ||
        !htam_local_applies(l, l->global_id, run->state.family))
      continue;
    struct policy_choice alt = *choice;
    snprintf(alt.direction, sizeof alt.direction, "%s", l->global_id);
    snprintf(alt.strategy, sizeof alt.strategy, "%s", l->id);
    struct attempt b;
    attempt_make(run, &alt, memory, c, &b);
    tries++;
    if (nothing_new(&b)) {
      attempt_clear(&b);
      continue;
    }
    attempt_clear(a);
    *a = b;
    if (!same) {
      snprintf(choice->direction, sizeof choice->direction, "%s", l->global_id);
      choice->inherited = false;
    }
    snprintf(choice->strategy, sizeof choice->strategy, "%s", l->id);
  }
}

enum step_result loop_propose(struct task_run *run, struct policy_choice *choice,
                              const struct memory_view *memory, const struct step_context *c,
                              json_t **ret_candidate, json_t **ret_region_candidate,
                              json_t **ret_failure) {
  struct attempt a;
  attempt_make(run, choice, memory, c, &a);
  if (!a.program && (budget_failure(a.failure) || service_failure(a.failure))) {
    enum step_result r = budget_failure(a.failure) ? STEP_BUDGET_SPENT : STEP_PROPOSER_DOWN;
    json_decref(run->proposer_error);
    run->proposer_error = json_incref(a.failure);
    attempt_clear(&a);
    return r;
  }
  retry_strategies(run, choice, memory, c, &a, true);
  retry_strategies(run, choice, memory, c, &a, false);
  if (nothing_new(&a)) {
    attempt_clear(&a);
    return STEP_NOTHING_NEW;
  }
  *ret_candidate = a.program;
  *ret_region_candidate = a.region;
  *ret_failure = a.failure;
  return STEP_COMMITTED;
}
