/* The search policies (single, refine, flat, htam, tree, htam+tree): how each picks the
 * node to expand, the step kind, the direction and the strategy. Their differences live
 * here and nowhere else. */
#ifndef OPFORGE_POLICY_H
#define OPFORGE_POLICY_H

#include <jansson.h>
#include <stdbool.h>

#include "engine/htam.h"
#include "engine/memory_view.h"
#include "engine/rng.h"
#include "engine/search_config.h"
#include "engine/tree.h"

/* What distinguishes one policy from another. */
struct policy_traits {
  const char *name;
  bool single_shot;       /* single: one proposal, then stop */
  bool use_tree;          /* tree, htam+tree: AdaExplore descent; else a greedy chain
                             that always extends the best correct node */
  enum { DIRECTION_PRIOR, DIRECTION_FLAT, DIRECTION_MEMORY, DIRECTION_HTAM } direction;
                          /* PRIOR: static prior only (single, refine, rotating);
                             FLAT: one flat UCB over every strategy, no hierarchy;
                             MEMORY: node means without transitions (tree);
                             HTAM: transition-aware score over the prefix */
};

/* The traits of a policy by name, or NULL when unknown. */
const struct policy_traits *policy_find(const char *name);

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
  json_t *why;              /* what the choice rested on (scores), caller owns; may be NULL */
};

/* Chooses node, kind, direction and strategy. Returns 0 and fills *ret, or -1 when the
 * memory holds no direction at all. */
int policy_choose(const struct policy_input *in, struct policy_choice *ret);

/* The first half of policy_choose: fills ret's node and kind (the rest zeroed). */
void policy_choose_node(const struct policy_input *in, struct policy_choice *ret);

/* The second half: the direction and strategy for ret's node and kind under in->state
 * (whose family the caller may set for the region it works on). Returns 0, or -1 when
 * the memory holds no direction. */
int policy_choose_direction(const struct policy_input *in, struct policy_choice *ret);

#endif
