/* Every tunable constant of the search (HTAM policy, AdaExplore tree) and the ablation
 * switches, with defaults and a JSON override parser. A task carries its own copy
 * (docs/architecture.md, "Search settings"). */
#ifndef OPFORGE_SEARCH_CONFIG_H
#define OPFORGE_SEARCH_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define SEARCH_MAX_PREFIX 8 /* upper bound of prefix_len (K) */
#define SEARCH_MAX_POOL 32  /* upper bound of pool_size and recent_window */
#define SEARCH_KEY_MAX 48   /* buffer size of a key named in an error */

/* Where strategies are retrieved from (HTAM's flat-retrieval ablation). */
enum search_retrieval {
  SEARCH_RETRIEVAL_HIERARCHICAL, /* direction first, then a strategy under it */
  SEARCH_RETRIEVAL_FLAT,         /* one pool of every strategy, directions ignored */
};

/* Which kinds of step the tree takes (the ablation arms "large steps only" and "small
 * steps only"; chain and root policies keep their own). */
enum search_steps { SEARCH_STEPS_MIXED, SEARCH_STEPS_LARGE, SEARCH_STEPS_SMALL };

/* How a small step asks a writing proposer: one call, or a reviser call that says what to
 * change, then a tuner call that writes the edits (AdaExplore's public code). */
enum search_small_step { SEARCH_SMALL_ONE_CALL, SEARCH_SMALL_TWO_CALL };

/* Who picks the strategy within HTAM's chosen direction: UCB over the strategies'
 * records, or the LLM, in a short call that sees those records (HTAM's step 3). */
enum search_local_choice { SEARCH_LOCAL_UCB, SEARCH_LOCAL_LLM };

/* Plain data, no ownership. The JSON key of each field is its name; the default and the
 * accepted range are in the table in search_config.c. */
struct search_config {
  /* HTAM reward of a failed step (docs/architecture.md, "HTAM"). */
  double penalty_compile;   /* compile, load or launch failure: -0.5 */
  double penalty_incorrect; /* wrong output or failed check: -0.3 */
  double penalty_timeout;   /* timeout or crash: -0.7 */
  /* HTAM score. */
  double k0;                /* prior weight of a node mean: 2 */
  double k_edge;            /* weight of mu_b in an edge utility (the paper's k): 2 */
  unsigned prefix_len;      /* K, directions in the prefix: 3 (0..SEARCH_MAX_PREFIX) */
  bool prefix_collapse_repeats; /* collapse consecutive equal directions: true */
  double lambda;            /* decay of the position weights: 0.7 */
  double beta;              /* weight of the trigger match: 0.2 */
  double c;                 /* exploration weight of the score: 0 (the softmax at tau
                               explores; docs/architecture.md, "HTAM") */
  double tau;               /* softmax temperature: 0.1 */
  double ema_alpha;         /* EMA trend weight of a new reward: 0.3 */
  bool deterministic;       /* argmax instead of sampling: false */
  double local_c;           /* UCB exploration weight of local strategies: 0.3 */
  bool local_memory;        /* strategies chosen by their evidence: true; false picks
                               one uniformly (HTAM's "no local memory" ablation) */
  enum search_retrieval retrieval; /* "hierarchical" or "flat" */
  bool skills;              /* the skill memory (engine/skills.c): true */
  bool learn;               /* the run's steps update the memory and the skill memory:
                               true; false runs on them as they are (frozen memory) */
  /* AdaExplore tree (docs/architecture.md, "AdaExplore"). */
  double tree_c;            /* UCB1 exploration weight: 0.3 */
  double expand_ratio;      /* w_e = tree_c*expand_ratio for the expand action: 1 */
  double reward_alpha;      /* node value alpha*max + (1-alpha)*mean: 0 (the mean) */
  double large_step_prob;   /* chance of a large step when not forced: 0.2 */
  unsigned small_children_before_large; /* small children that force a large step: 2 */
  unsigned pool_size;       /* representative pool size: 5 */
  unsigned recent_window;   /* recent-work window of a small step: 5 */
  double tree_reward_incorrect; /* reward of a compiled but incorrect node: 0.05 */
  double tree_reward_base;  /* reward of a correct node at the lowest speed-up: 0.4 */
  double tree_reward_span;  /* added at the highest speed-up: 1.2 */
  double speedup_min;       /* speed-up clip, low end: 0.1 */
  double speedup_max;       /* speed-up clip, high end: 10 */
  unsigned max_calls_per_step; /* paid proposer calls one step may make, retries of
                                  repeated programs and skill reflection included: 4 */
  enum search_steps steps;  /* "mixed", "large" or "small" (tree policies) */
  enum search_small_step small_step; /* "one_call" or "two_call" */
  enum search_local_choice local_choice; /* "ucb" or "llm" */
  unsigned context_bytes;   /* a small step's ancestors' sources and metrics, in bytes of
                               prompt: 24576 */
};

/* Sets every field to its default. */
void search_config_defaults(struct search_config *ret_cfg);

/* Why an override was refused: the key (empty when obj is not an object), whether it is
 * unknown or has a bad value, and a message that names it. */
struct search_config_error {
  bool unknown;
  char key[SEARCH_KEY_MAX];
  char message[256];
};

/* Applies the keys of obj (borrowed; a JSON object of known keys, each optional) over
 * *cfg. An unknown key, a value of the wrong type or outside its range, or an
 * inconsistent pair (speedup_min >= speedup_max, named by speedup_min) is refused:
 * returns -1 with *ret_err filled (may be NULL), and *cfg is left unchanged. Returns 0
 * on success. */
int search_config_apply(struct search_config *cfg, const json_t *obj,
                        struct search_config_error *ret_err);

/* search_config_apply with the message alone copied into err. */
int search_config_apply_json(struct search_config *cfg, const json_t *obj, char *err,
                             size_t errlen);

/* The name of a retrieval mode ("hierarchical", "flat"). */
const char *search_retrieval_name(enum search_retrieval r);

/* Returns a new JSON object with every field (caller owns the reference), or NULL when
 * out of memory. search_config_apply_json accepts it back unchanged. */
json_t *search_config_to_json(const struct search_config *cfg);

#endif
