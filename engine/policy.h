/* The search policies (single, refine, flat, htam, tree, htam+tree, best_of_n): how each
 * picks the node to expand, the step kind, the direction and the strategy, and how the
 * ablation settings of its search configuration bend that choice. Their differences
 * live here and nowhere else. */
#ifndef OPFORGE_POLICY_H
#define OPFORGE_POLICY_H

#include <jansson.h>
#include <stdbool.h>

#include "engine/htam.h"
#include "engine/memory_view.h"
#include "engine/rng.h"
#include "engine/search_config.h"
#include "engine/tree.h"

/* Where a policy expands. */
enum policy_node {
  NODE_CHAIN, /* the best correct node (the reference first): a greedy chain of patches */
  NODE_TREE,  /* AdaExplore's descent and step kind */
  NODE_ROOT,  /* always the reference by a large step: independent samples (best-of-N) */
};

/* How a policy picks the direction (and with it the strategy). */
enum policy_direction {
  DIRECTION_PRIOR,    /* the static priors, rotating by step (single) */
  DIRECTION_FEEDBACK, /* the task's own results only, no memory statistics (refine) */
  DIRECTION_FLAT,     /* one UCB over every strategy, no hierarchy (flat retrieval) */
  DIRECTION_MEMORY,   /* HTAM's score without transitions (tree) */
  DIRECTION_HTAM,     /* HTAM's transition-aware score over the prefix */
};

/* What distinguishes one policy from another. */
struct policy_traits {
  const char *name;
  bool single_shot;              /* single: one proposal, then stop */
  enum policy_node node;
  enum policy_direction direction;
};

/* The traits of a policy by name, or NULL when unknown. */
const struct policy_traits *policy_find(const char *name);

/* The direction logic a policy runs under cfg: retrieval "flat" turns the memory-scored
 * ones (MEMORY, HTAM) into FLAT; PRIOR and FEEDBACK read no scores and stay. */
enum policy_direction policy_direction_mode(const struct policy_traits *traits,
                                            const struct search_config *cfg);

/* The name of a direction mode ("prior", "feedback", "flat", "memory", "htam"). */
const char *policy_direction_name(enum policy_direction mode);

/* Inputs of one choice; all borrowed. */
struct policy_input {
  const struct search_config *cfg;
  const struct policy_traits *traits;
  const struct tree *tree;
  const struct memory_view *memory;
  const struct htam_state *state;
  struct rng *rng;
  int step;                 /* 1-based */
};

/* The choice of one step. */
struct policy_choice {
  size_t node;              /* tree node to expand (0 = the reference) */
  enum tree_step kind;      /* small or large */
  char direction[TREE_ID_MAX];
  char strategy[TREE_ID_MAX]; /* "" when no strategy applies */
  bool inherited;           /* a tree patch keeping its node's direction: no transition
                               was chosen, so the step writes no edge */
  json_t *why;              /* what the choice rested on (scores), caller owns; may be NULL */
};

/* Chooses node, kind, direction and strategy. Returns 0 and fills *ret, or -1 when the
 * memory holds no direction at all. */
int policy_choose(const struct policy_input *in, struct policy_choice *ret);

/* The first half of policy_choose: fills ret's node and kind (the rest zeroed). */
void policy_choose_node(const struct policy_input *in, struct policy_choice *ret);

/* The second half: the direction and strategy for ret's node and kind under in->state
 * (whose family the caller may set for the region it works on). Returns 0, or -1 when
 * the memory holds no direction. The strategy:
 * - FEEDBACK: untried by this task first (memory order), else UCB (local_c) on the
 *   task's own tree rewards; the direction the same way among the directions with a
 *   strategy for the family;
 * - FLAT: the strategy first, its direction follows;
 * - otherwise under the direction: UCB on the memory's evidence (htam_choose_local), or,
 *   with local_memory false, one uniform draw among the applicable strategies. */
int policy_choose_direction(const struct policy_input *in, struct policy_choice *ret);

#endif
