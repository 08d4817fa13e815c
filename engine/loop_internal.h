/* Private to engine/loop*.c: the state of one task while the loop runs it. */
#ifndef OPFORGE_LOOP_INTERNAL_H
#define OPFORGE_LOOP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "base/sha256.h"

#include "engine/htam.h"
#include "engine/loop.h"
#include "engine/memory_view.h"
#include "engine/partition.h"
#include "engine/policy.h"
#include "engine/skills.h"
#include "engine/search_config.h"
#include "engine/tree.h"
#include "proposers/proposer.h"

struct task_run {
  const struct loop_env *env;
  const char *id;
  json_t *task;                 /* owned: the task with its reference */
  json_t *options;              /* borrowed from task */
  json_t *profile;              /* owned */
  json_t *baselines;            /* owned */
  const struct policy_traits *traits;
  struct search_config cfg;     /* the task's settings: the server's, then its own
                                   options.search over them */
  const char *memory;           /* the memory namespace it reads and writes (borrowed
                                   from options) */
  struct proposer proposer;
  struct tree *tree;            /* owned */
  struct htam_state state;      /* strings are static or in last_failure_stage */
  char last_failure_stage[16];
  double eager_ms;              /* 0 when the profile has no CUDA timing */
  int budget_steps;
  double budget_s;
  int step;                     /* steps committed */
  double elapsed_s;             /* wall time of the task so far, across restarts: each
                                   run's load, profile and reference, and the steps */
  double started_s;             /* budget_now_s() when this run of the task began */
  double steps_s;               /* wall time of this run's committed steps */
  int steps_timed;              /* how many they are */
  int correct;
  int not_recorded;             /* proposals the evaluator had no record of (a replay's
                                   table lacks the point): this run's, no step spent */
  double best_speedup, best_ms;
  char best_candidate[40];
  double best_library_ms;       /* the best program's time in library steps; -1 unknown */
  int best_graph;               /* it replays as a CUDA graph: 1, 0, or -1 unknown */
  json_t *evaluated;            /* owned: candidate digest -> {id, result} of this run's
                                   evaluations, so a repeated proposal is not re-run */
  struct partition partition;   /* owned: the regions of the task's graph */
  double *ref_region_ms;        /* owned, partition.n: each region's time as library
                                   steps, from the reference's evaluation; -1 unknown */
  double *best_region_ms;       /* owned, partition.n: the best program's region times */
  json_t *exhausted;            /* owned: {"<node>/<region>": true} where no new move is
                                   left in this run */
  json_t *library_first;        /* owned: {"<region>": generated tries of a library-first
                                   region, -1 once one beat its library step} */
  json_t *outside;              /* owned: {"<region>/<strategy>": taken} of the outside
                                   moves region candidates named (loop_outside.c) */
  json_t *defaults;             /* owned: the proposer's starting point of each region
                                   (null where it proposes none), asked for once */
  double stop_at_floor;         /* budget.stop_at_floor: 0 = off */
  struct proposal_usage step_usage; /* what proposing cost since the last commit */
  struct proposal_usage spent;  /* what proposing cost the task, across restarts */
  struct proposal_usage spent_now; /* what the step being committed spent */
  struct proposal_limit limit;  /* budget.llm_tokens and budget.llm_usd less spent */
  json_t *proposer_error;       /* owned: the last failure of the proposer's service */
  struct skill_run skills;      /* owned: the skill rules of this task (engine/skills.h) */
  char stop_reason[24];         /* why the steps ended: budget, at_floor, space_exhausted */
  int store_status;             /* the store status of the failure that ended a step
                                   (STEP_STORE_ERROR), STORE_ERROR when unknown */
  bool aborted;                 /* the server's shutdown stopped an evaluation: nothing
                                   of it is recorded, the task checkpoints */
};

/* What loop_step did. */
enum step_result {
  STEP_COMMITTED,   /* a step was evaluated and committed */
  STEP_NOTHING_NEW, /* the move chosen had nothing new to try: no step was spent */
  STEP_STORE_ERROR, /* the store failed; nothing was committed */
  STEP_BUDGET_SPENT, /* the proposer refused to call past the task's LLM budget */
  STEP_PROPOSER_DOWN, /* the proposer's service failed (endpoint down, rate limited, a
                         model it may not use): nothing was learned, no step was spent */
  STEP_ABORTED,     /* the server's shutdown stopped the evaluation: nothing recorded */
  STEP_NOT_RECORDED, /* the evaluator answers from a record that lacks the program (a
                        replay's replay/not_recorded): no step was spent, nothing was
                        learned, and the program counts as evaluated */
};

/* The failure class of an evaluation the evaluator could not make because its record
 * lacks the program (gpu/replay/replay.c). */
#define LOOP_NOT_RECORDED_CLASS "replay/not_recorded"

/* Where one step works: the program it changes (its node's, or for the root the
 * proposer's starting point in every region) and the region it changes. */
struct step_context {
  size_t node;        /* the tree node expanded */
  json_t **choices;   /* owned, partition.n: the base program's region choices (local
                         candidates, NULL for library steps) */
  double *region_ms;  /* owned, partition.n: the base program's region times, -1 unknown */
  size_t region;      /* the region the step changes */
  bool first;         /* the task's first step: the starting point of every region */
};

/* Fills *ret for tree node. Returns 0, 1 when every region at node is exhausted, or -1
 * when out of memory; release with loop_context_clear in every case. */
int loop_context_init(struct task_run *run, size_t node, struct step_context *ret);
void loop_context_clear(struct task_run *run, struct step_context *c);

/* The child program: the base program with the context's region replaced by
 * region_candidate (borrowed; local names), and any other generated region that was
 * slower than its library steps put back to them; on the first step, the starting point
 * of every region. Caller owns. */
json_t *loop_compose(struct task_run *run, const struct step_context *c, json_t *region_candidate);

/* The proposer's starting point of every region into ret_choices (partition.n entries,
 * caller owns each; NULL for library regions and where it proposes nothing). They are
 * asked for once per run and kept. */
void loop_default_choices(struct task_run *run, json_t **ret_choices);

/* Outside moves (engine/loop_outside.c): strategies a region candidate lists under
 * "outside_moves" because their gain lies in a library step the region reads. */
/* Records region k's outside moves from region_candidate (borrowed) as pending, unless
 * taken already. */
void loop_outside_note(struct task_run *run, size_t k, json_t *region_candidate);
/* Marks region k's outside move strategy as taken (whatever its step's outcome). */
void loop_outside_taken(struct task_run *run, size_t k, const char *strategy);
/* True when region k (any region when k < 0) has an outside move not taken yet: the task
 * is not at its floor while one is pending. */
bool loop_outside_pending(const struct task_run *run, long k);
/* When region k has a pending outside move whose strategy the memory holds, sets
 * choice's direction and strategy to it (a transition like any chosen direction) and
 * returns true; a strategy the memory lacks is marked taken. */
bool loop_outside_choice(struct task_run *run, size_t k, const struct memory_view *memory,
                         struct policy_choice *choice);

/* Marks region k at tree node as having no new move in this run. */
void loop_mark_exhausted(struct task_run *run, size_t node, size_t k);

/* Notes a step on a library-first region (a no-op for other steps): one more try, or,
 * when candidate's program (its result borrowed, correct or not) ran the region faster
 * than the reference's library step, that it won. After LIBRARY_FIRST_TRIES tries (3 when
 * the region is the whole task, else 1) without a win the region is left as its library
 * step (docs/architecture.md, "Convolutions"). */
void loop_note_library_first(struct task_run *run, const struct step_context *c,
                             json_t *candidate, json_t *result, bool correct);

/* The node a step falls back to when the policy's node has nothing left in any generated
 * region (the policy's descent is deterministic, so it would pick that node again): the
 * correct node with the highest speed-up, the root included, that still has a generated
 * region with moves; -1 when there is none. */
long loop_open_node(const struct task_run *run);

/* The result this run got for candidate, or NULL (borrowed). */
json_t *loop_cached_result(const struct task_run *run, json_t *candidate);

/* Proposes for the context's region under choice (strategy may be replaced by another
 * of the same direction when the chosen move does not fit or repeats). On success
 * *ret_candidate is the composed child program (caller owns) and *ret_region_candidate
 * the region's candidate (caller owns); on failure *ret_failure (caller owns). Returns
 * STEP_NOTHING_NEW when every move tried repeats an evaluated program or does not fit. */
/* HTAM's local choice by the proposer (search.local_choice llm, a proposer with
 * choose_strategy, an arm that shows local memory): the proposer picks the strategy among
 * the direction's; on failure the policy's choice stays. The call is paid from the step's
 * budget like any other. */
void loop_local_choice(struct task_run *run, struct policy_choice *choice,
                       const struct memory_view *memory, const struct step_context *c);

enum step_result loop_propose(struct task_run *run, struct policy_choice *choice,
                              const struct memory_view *memory, const struct step_context *c,
                              json_t **ret_candidate, json_t **ret_region_candidate,
                              json_t **ret_failure);

/* Lets the proposer learn from the outcome of the region candidate it proposed. */
void loop_learn(struct task_run *run, const struct policy_choice *choice,
                const struct memory_view *memory, const struct step_context *c,
                json_t *region_candidate, const struct eval_outcome *o);

/* Runs one step (choice, proposal, evaluation, commit). attempt counts the tries at this
 * step number that found nothing new (0 first), so each try draws other choices. */
enum step_result loop_step(struct task_run *run, int attempt);

/* The digest of what decides a candidate's evaluation (source, options, plan, program)
 * as hex in ret_hex; false when it cannot be computed. */
bool loop_candidate_digest(json_t *candidate, char ret_hex[SHA256_HEX_BYTES]);

/* True when result (borrowed) is the evaluator's "not in my record" answer. */
bool loop_not_recorded(const json_t *result);

/* True when this run already evaluated candidate. */
bool loop_already_evaluated(const struct task_run *run, json_t *candidate);

/* Evaluates a candidate unless this run already evaluated the same one (templates often
 * reach one knob set by different moves): then the earlier result is reused, marked
 * with "reused_from", and the GPU is spared. Returns the result (caller owns), whose
 * "failure" is set when the evaluator or the kernel failed. The memory of reuse lasts
 * for this process's run of the task: after a restart, a repeat is evaluated again. */
json_t *loop_evaluate_once(struct task_run *run, json_t *candidate, const char *id);

/* Evaluates the reference program (every region as library steps) as step 0 and records
 * it on the tree's root. Returns a store status. */
int loop_reference(struct task_run *run);

/* Stores run->eager_ms, the eager time step 0 was timed in turn with, as the profile's
 * "eager_ms" (the profile's own figure kept as "eager_profile_ms") and in the baselines,
 * so that every figure of the task and a resumed run use it. Returns a store status. */
int loop_eager_retimed(struct task_run *run, double profile_eager_ms);

/* How many times the evaluate deadline a program gets. */
#define LOOP_PROGRAM_DEADLINE_FACTOR 4

/* Failures of the proposer's service in a row that end the task's steps. */
#define LOOP_PROPOSER_DOWN_LIMIT 3
/* Proposals in a row that the evaluator's record lacks before the space counts as
 * exhausted (a replay of a sparse table). */
#define LOOP_NOT_RECORDED_LIMIT 256

/* budget.stop_at_floor when the task does not say. */
#define LOOP_DEFAULT_STOP_AT_FLOOR 0.97

/* True when the task's best program is the reference (nothing beat it). */
bool loop_best_is_reference(const struct task_run *run);

/* True when every generated region of the best program is within stop_at_floor of its
 * floor (floor/time >= stop_at_floor); false when the check is off or times are unknown. */
bool loop_at_floor(const struct task_run *run);

/* Moves what proposing cost since the last commit into the task's total (spent) and the
 * step's (spent_now), for the commit being built. */
void loop_take_usage(struct task_run *run);

/* Tells the environment's notify callback that the task changed. */
void loop_notify(const struct task_run *run);

/* The task's progress object from the run's counters (caller owns). */
json_t *loop_progress(const struct task_run *run);

#endif
