/* Every tunable constant of the search (HTAM policy, AdaExplore tree), with defaults and
 * a JSON override parser. */
#ifndef OPFORGE_SEARCH_CONFIG_H
#define OPFORGE_SEARCH_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define SEARCH_MAX_PREFIX 8 /* upper bound of prefix_len (K) */
#define SEARCH_MAX_POOL 32  /* upper bound of pool_size and recent_window */

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
  double c;                 /* exploration weight of the score: 0.3 */
  double tau;               /* softmax temperature: 0.1 */
  double ema_alpha;         /* EMA trend weight of a new reward: 0.3 */
  bool deterministic;       /* argmax instead of sampling: false */
  double local_c;           /* UCB exploration weight of local strategies: 0.3 */
  /* AdaExplore tree (docs/architecture.md, "AdaExplore"). */
  double tree_c;            /* UCB1 exploration weight: 0.3 */
  double large_step_prob;   /* chance of a large step when not forced: 0.2 */
  unsigned small_children_before_large; /* small children that force a large step: 2 */
  unsigned pool_size;       /* representative pool size: 5 */
  unsigned recent_window;   /* recent-work window of a small step: 5 */
  double tree_reward_incorrect; /* reward of a compiled but incorrect node: 0.05 */
  double tree_reward_base;  /* reward of a correct node at the lowest speed-up: 0.4 */
  double tree_reward_span;  /* added at the highest speed-up: 1.2 */
  double speedup_min;       /* speed-up clip, low end: 0.1 */
  double speedup_max;       /* speed-up clip, high end: 10 */
};

/* Sets every field to its default. */
void search_config_defaults(struct search_config *ret_cfg);

/* Applies the keys of obj (borrowed; a JSON object of known keys, each optional) over
 * *cfg. An unknown key, a value of the wrong type or outside its range, or an
 * inconsistent pair (speedup_min >= speedup_max) is refused: returns -1 with a message
 * naming the key in err, and *cfg is left unchanged. Returns 0 on success. */
int search_config_apply_json(struct search_config *cfg, const json_t *obj, char *err,
                             size_t errlen);

/* Returns a new JSON object with every field (caller owns the reference), or NULL when
 * out of memory. search_config_apply_json accepts it back unchanged. */
json_t *search_config_to_json(const struct search_config *cfg);

#endif
