/* AdaExplore tree search (docs/architecture.md, "AdaExplore"): node rewards, UCB1 descent against an
 * expand pseudo-action, small and large steps, backpropagation, the representative pool,
 * the recent-work window, the HTAM prefix of a node, and JSON rows for persistence.
 * Pure: the loop persists the rows it gets from here. */
#ifndef OPFORGE_TREE_H
#define OPFORGE_TREE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/outcome.h"
#include "engine/rng.h"
#include "engine/search_config.h"

#define TREE_NONE SIZE_MAX  /* no node (the root's parent, a leaf's first child) */
#define TREE_ID_MAX 64      /* buffer size of ids; longer ids are refused */
#define TREE_MAX_NODES 100000

enum tree_step { TREE_STEP_ROOT, TREE_STEP_SMALL, TREE_STEP_LARGE };

/* What the evaluation of a node found. TREE_PENDING: created, not yet recorded. */
enum tree_result { TREE_PENDING, TREE_NOT_COMPILED, TREE_INCORRECT, TREE_CORRECT };

/* One node: a candidate (the root is the reference). Its id is its index in tree.nodes,
 * and a parent's id is always lower than its children's. */
struct tree_node {
  size_t parent;                 /* TREE_NONE for the root */
  size_t first_child, last_child, next_sibling; /* children in creation order */
  unsigned n_children;
  unsigned n_small_children;     /* children made by a small step */
  enum tree_step step;
  char direction[TREE_ID_MAX];   /* global direction it was made under; "" for none */
  char strategy[TREE_ID_MAX];    /* local strategy; "" for none */
  char candidate[TREE_ID_MAX];   /* the store's candidate id; "" for the root */
  enum tree_result result;
  double speedup;                /* over eager; meaningful when result is CORRECT */
  double reward;                 /* its own reward (tree_reward) */
  int64_t visits;                /* evaluations in its subtree, itself included */
  double reward_sum;             /* sum of rewards in its subtree */
  double reward_max;             /* max reward in its subtree (0 while pending) */
};

/* A tree owns its node array. */
struct tree {
  struct tree_node *nodes;
  size_t n, cap;
};

/* Reward of an evaluated node: 0 when not compiled, tree_reward_incorrect (0.05) when
 * incorrect, and tree_reward_base + tree_reward_span * (clip(speedup, speedup_min,
 * speedup_max) - speedup_min) / (speedup_max - speedup_min) when correct
 * (0.4 + 1.2*(clip(s,0.1,10)-0.1)/9.9). A non-finite speed-up counts as speedup_min. */
double tree_reward(const struct search_config *cfg, enum tree_result result, double speedup);

/* The tree result a stage means: correct is CORRECT; parse, compile and load mean no
 * runnable kernel (NOT_COMPILED); every other failure is INCORRECT. */
enum tree_result tree_result_of(enum eval_stage stage);

/* Returns a new empty tree (caller frees with tree_free), or NULL when out of memory. */
struct tree *tree_new(void);

/* Frees t and its nodes. Accepts NULL. */
void tree_free(struct tree *t);

/* Adds the root to an empty tree: the reference, correct at speed-up 1, evaluated, so
 * it starts with visits 1 and its reward as sum and max. Returns 0, -EEXIST when the
 * tree has nodes, or -ENOMEM. */
int tree_add_root(struct tree *t, const struct search_config *cfg);

/* Adds a pending child of parent (step SMALL or LARGE; strings copied, NULL = ""). It
 * has no statistics until tree_record. Returns 0 and sets *ret_id, or -EINVAL (bad
 * parent, step, or an id of TREE_ID_MAX bytes or more), -ENOSPC (TREE_MAX_NODES), or
 * -ENOMEM. Node pointers taken before the call may be invalidated. */
int tree_add_child(struct tree *t, size_t parent, enum tree_step step, const char *direction,
                   const char *strategy, const char *candidate, size_t *ret_id);

/* Adds reward to id and every ancestor: visits += 1, reward_sum += reward, reward_max =
 * max(reward_max, reward). Returns 0, or -EINVAL. */
int tree_backprop(struct tree *t, size_t id, double reward);

/* Records the evaluation of a pending node (result, speed-up, its tree_reward) and
 * backpropagates it. Returns 0 and sets *ret_reward (may be NULL), or -EINVAL (unknown
 * or already recorded node, result TREE_PENDING). */
int tree_record(struct tree *t, const struct search_config *cfg, size_t id,
                enum tree_result result, double speedup, double *ret_reward);

/* Where a descent stopped and why. */
struct tree_descent {
  size_t node;              /* the node to expand */
  size_t depth;             /* its depth (root 0) */
  size_t best_child;        /* its best child by UCB1, TREE_NONE at a leaf */
  double best_child_score;  /* that child's UCB1 (0 at a leaf) */
  double expand_score;      /* the expand pseudo-action's score at node (+inf at a leaf) */
};

/* Descends from the root by AdaExplore's rule (agent/mcts.py: select, should_expand,
 * expand_ucb1). At node v with N = visits(v) and C its recorded children (pending ones are
 * skipped), with the blended value V(x) = reward_alpha*max(x) + (1-reward_alpha)*mean(x):
 *   UCB1(ch)  = V(ch) + tree_c*sqrt(ln N / n(ch))            (V(ch) alone when N = 0)
 *   expand(v) = +inf when C is empty (the descent stops at a leaf);
 *               -inf when w_e = tree_c*expand_ratio is 0;
 *               max_{ch in C} V(ch) + w_e*sqrt(ln N / |C|^2)  otherwise.
 * Stop at v when expand(v) > the best UCB1 (a real child wins ties); else move to the
 * best child (the first created on ties). Returns 0 and fills *ret, or -EINVAL (no root).
 * A root with no visits is accepted (the public code's empty root). */
int tree_descend(const struct tree *t, const struct search_config *cfg,
                 struct tree_descent *ret);

/* Kind of the step that expands node. Forced LARGE (no draw) at the root, which holds no
 * kernel to patch, and when node already has small_children_before_large small
 * children; otherwise LARGE when one rng_uniform draw is below large_step_prob, else
 * SMALL. Returns 0 and sets *ret_step and *ret_forced (may be NULL), or -EINVAL. */
int tree_step_kind(const struct tree *t, const struct search_config *cfg, size_t node,
                   struct rng *rng, enum tree_step *ret_step, bool *ret_forced);

/* The HTAM prefix of node: the non-empty directions of node, its parent, ... up to the
 * root, most recent first, at most prefix_len of them; with prefix_collapse_repeats, a
 * direction equal to the one just taken is skipped (small steps repeat their parent's
 * direction and carry no transition). ret_ids (capacity SEARCH_MAX_PREFIX) receives
 * pointers into the nodes, valid until the tree changes. Returns 0, or -EINVAL. */
int tree_prefix(const struct tree *t, const struct search_config *cfg, size_t node,
                const char **ret_ids, size_t *ret_n);

/* The large-step region of id: its nearest ancestor-or-self made by a large step, or the
 * root when there is none. The region of a large node r is r and the descendants reached
 * from r through small steps only. Returns TREE_NONE for a bad id. */
size_t tree_region_root(const struct tree *t, size_t id);

/* True when the node starts a large-step region. */
bool tree_node_is_large_root(const struct tree_node *node);

/* Representative pool for a large step at node: the best correct node (highest
 * speed-up, lowest id on ties) of each large-step region, regions with no correct node
 * skipped, the root's region (the reference) never included. First the regions on the
 * path from node to the root, nearest first; then, to fill up to pool_size, the other
 * regions by their best speed-up, highest first (lower region id on ties). ret_ids has
 * capacity SEARCH_MAX_POOL. Returns 0, -EINVAL or -ENOMEM. */
int tree_pool(const struct tree *t, const struct search_config *cfg, size_t node,
              size_t *ret_ids, size_t *ret_n);

/* Recent-work window for a small step at node: node, its parent, ... stopping after the
 * nearest large-step node, never the root, failures included, at most recent_window
 * nodes, most recent (node) first. ret_ids has capacity SEARCH_MAX_POOL. Returns 0, or
 * -EINVAL. */
int tree_recent(const struct tree *t, const struct search_config *cfg, size_t node,
                size_t *ret_ids, size_t *ret_n);

/* One node as a JSON row (caller owns the reference), NULL on a bad id or no memory:
 * {"id", "parent" (null for the root), "step": "root|small|large", "direction",
 *  "strategy", "candidate", "result": "pending|not_compiled|incorrect|correct",
 *  "speedup", "reward", "visits", "reward_sum", "reward_max"}. */
json_t *tree_node_to_json(const struct tree *t, size_t id);

/* Appends a row made by tree_node_to_json (borrowed). Its id must equal t->n and its
 * parent must be an existing node (null only for id 0); children links are rebuilt.
 * Returns 0, or -1 with the reason in err (t unchanged). */
int tree_append_json(struct tree *t, const json_t *row, char *err, size_t errlen);

#endif
