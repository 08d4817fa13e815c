/* The proposer interface: what the engine's loop knows of anything that writes candidate
 * kernels. The builtin template proposer, the fixture-replaying test proposer and the
 * LLM proposer implement it; the loop reaches them only through these operations. */
#ifndef OPFORGE_PROPOSER_H
#define OPFORGE_PROPOSER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/outcome.h"

/* What proposing cost: tokens sent and received, and their price in US dollars. A
 * proposer that calls a paid service adds to it; the others leave it alone. */
struct proposal_usage {
  long long prompt_tokens;
  long long completion_tokens;
  double cost_usd;
};

/* What a task may still spend on proposing: its budget less what it spent, and the paid
 * calls left to the step. A proposer that calls a paid service spends from it as it goes
 * (every call of a step, retries and reflections included, sees what the earlier ones
 * spent) and sends no call whose worst case (every prompt byte a token, plus the whole
 * completion cap) could pass it. A field <= 0 is used up; a budget the task does not set
 * is LLONG_MAX tokens or HUGE_VAL dollars; calls is INT_MAX where nothing caps them. */
struct proposal_limit {
  long long tokens;   /* prompt and completion tokens together (budget.llm_tokens) */
  double cost_usd;    /* budget.llm_usd */
  int calls;          /* paid calls left in this step (search.max_calls_per_step) */
};

/* What the loop asks for in one step; everything is borrowed for the call. */
struct proposal_request {
  const char *task_id;
  const char *task_name;
  json_t *task_options;       /* the task's normalized options */
  json_t *profile;            /* the evaluator's profile of the task (or of the region) */
  int step;                   /* 1-based */
  const char *direction;      /* HTAM global node id, or NULL */
  json_t *direction_node;     /* its memory node, or NULL */
  const char *strategy;       /* local node id, or NULL for the proposer's own start */
  json_t *strategy_node;      /* its memory node (edit pattern, knob move), or NULL */
  json_t *parent;             /* the candidate being patched or regenerated from (source,
                                 options, plan, result), or NULL for the reference */
  json_t *context;            /* array of candidates: the representative pool (large
                                 step) or the recent work on the path (small step) */
  /* Additions for proposers that write from a prompt (the LLM proposer); every one may
   * be NULL, and the others ignore them. */
  struct proposal_usage *usage; /* the proposer adds what each call of this request cost
                                   (written, not reset: the caller zeroes it) */
  struct proposal_limit *limit; /* what the task may still spend, or NULL for no limit:
                                   the proposer spends from it and fails with class
                                   parse/llm_budget_exhausted (parse/llm_call_limit when
                                   the step's calls are used up) rather than call past it */
  json_t *skills;             /* array of {"rule","score"}: the skill rules; those with a
                                 score of at least 3 go into prompts as common pitfalls */
  json_t *strategies;         /* array of local memory nodes: the candidate strategies of
                                 the direction for the region's family, with their stats
                                 and evidence */
  const char *reference;      /* the task's reference program (PyTorch source) */
  size_t context_bytes;       /* a small step's ancestors' sources get at most this many
                                 bytes of its prompt (search.context_bytes); 0: none */
  bool two_call;              /* a small step asks a reviser first, then writes the edits
                                 (search.small_step two_call) */
};

/* Skill memory (AdaExplore): one failed step, for a proposer that can turn a failure into
 * a rule (the LLM proposer); everything is borrowed for the call. */
#define PROPOSAL_RULE_MAX 300       /* bytes of a rule's sentence */
struct skill_reflection {
  const char *task_id;
  json_t *task_options;             /* the task's normalized options (its llm settings) */
  const char *family;               /* the op family of the region that failed */
  const char *source;               /* the failed kernel's source, or NULL */
  const char *failure;              /* the failure log: stage, class, message */
  json_t *rules;                    /* the rules to match against: [{"id","rule","score"}] */
  struct proposal_usage *usage;     /* what the calls cost is added here (may be NULL) */
  struct proposal_limit *limit;     /* what the task may still spend (may be NULL), spent
                                       from as for a proposal */
};

/* What a reflection concluded. */
enum skill_verdict_kind {
  SKILL_VERDICT_NONE,       /* "no guidance": the log implies no single prohibited action */
  SKILL_VERDICT_NEW,        /* rule is new */
  SKILL_VERDICT_DUPLICATE,  /* rule says what rules[match] says: match_id gains 1 */
};
struct skill_verdict {
  enum skill_verdict_kind kind;
  char rule[PROPOSAL_RULE_MAX + 1]; /* "You cannot ...." (NEW, DUPLICATE) */
  long long match_id;               /* DUPLICATE: the id of the matched rule */
};

/* One proposer. Every operation gets self back. The propose operations fill
 * *ret_candidate ({"source","options","plan"}, caller owns) and return 0, or return -1
 * with *ret_failure ({"stage":"parse","class","message"}, caller owns). */
struct proposer {
  const char *name;
  void *self;
  /* Whether the task's first step may ask for the proposer's own starting point in every
   * region at once: true when that is cheap and deterministic (templates), false when
   * every proposal is a paid call (an LLM). */
  bool starts_every_region;
  /* Whether its proposals are written from a prompt (the LLM proposer): the task's arm
   * then decides what of the memory the request carries (engine/loop_propose.c). A
   * template proposer always gets the strategy whose move it applies. */
  bool prompted;
  /* Whether this proposer can write candidates for the profile (a task's or a region's,
   * borrowed). Returns 0 and sets *ret_family (static string: the op family HTAM learns
   * under), or -1 with the reason in why. */
  int (*supports)(void *self, json_t *profile, const char **ret_family, char *why,
                  size_t whylen);
  /* A large step: a new candidate written from the request's direction and strategy,
   * informed by the representative pool. */
  int (*propose_large)(void *self, const struct proposal_request *req, json_t **ret_candidate,
                       json_t **ret_failure);
  /* A small step: a patch of req->parent under its strategy. */
  int (*propose_small)(void *self, const struct proposal_request *req, json_t **ret_candidate,
                       json_t **ret_failure);
  /* HTAM's local choice by the proposer (search.local_choice llm): picks one of
   * req->strategies (the direction's, with their records) for the step. Returns 0 and
   * *ret_id (borrowed from req->strategies), or -1 with *ret_failure (caller owns) when it
   * could not; the engine then keeps its own choice. May be NULL. */
  int (*choose_strategy)(void *self, const struct proposal_request *req, const char **ret_id,
                         json_t **ret_failure);
  /* Learns from the evaluated outcome of a candidate it proposed for req (candidate and
   * result borrowed). May be NULL. */
  void (*learn)(void *self, const struct proposal_request *req, json_t *candidate,
                const struct eval_outcome *outcome);
  /* Skill memory: turns one failure into one rule or none (an extraction prompt), then
   * matches it against req->rules (a dedup prompt). Returns 0 with *ret, or -1 with why
   * when the service failed (nothing is learned then). May be NULL: the engine then
   * groups failures by signature itself. */
  int (*reflect)(void *self, const struct skill_reflection *req, struct skill_verdict *ret,
                 char *why, size_t whylen);
  void (*free)(void *self);
};

/* What a proposer may need to start (strings borrowed for the call). */
struct llm_settings;
struct proposer_config {
  const char *fixtures_dir;   /* the test proposer's candidates; may be NULL */
  const struct llm_settings *llm; /* the LLM endpoint (proposers/llm/settings.h); NULL:
                                 the settings of this process's OPFORGE_LLM_* variables */
};

/* Opens the proposer called name (proposers/registry.c) into *ret. Returns 0, or -1 with
 * the reason in why (unknown name, or not available in this configuration). */
int proposer_open(const char *name, const struct proposer_config *cfg, struct proposer *ret,
                  char *why, size_t whylen);

/* The test proposer: replays fixture candidates, the JSON files of FIXTURES/<task name>/
 * in name order, file (step-1) mod count at step `step`. fixtures_dir is copied.
 * Returns 0 and fills *ret, or -1 when out of memory. */
int proposer_test_new(const char *fixtures_dir, struct proposer *ret);

/* The builtin proposer (proposers/builtin/proposer.c): templates and knobs, no network.
 * Returns 0 and fills *ret. */
int proposer_builtin_new(struct proposer *ret);

/* The LLM proposer (proposers/llm/proposer.c): prompts an OpenAI-compatible endpoint.
 * settings are copied. Returns 0 and fills *ret, or -1 with the reason in why (no
 * endpoint configured, out of memory). */
int proposer_llm_new(const struct llm_settings *settings, struct proposer *ret, char *why,
                     size_t whylen);

/* Frees what a proposer owns (calls its free). Accepts a zeroed struct. */
void proposer_clear(struct proposer *p);

#endif
