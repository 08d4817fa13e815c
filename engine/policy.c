/* The search policies: how each picks the node, step kind, direction and strategy. */
#include "engine/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct policy_traits policies[] = {
  {"single", true, false, DIRECTION_PRIOR},
  {"refine", false, false, DIRECTION_PRIOR},
  {"flat", false, false, DIRECTION_FLAT},
  {"htam", false, false, DIRECTION_HTAM},
  {"tree", false, true, DIRECTION_MEMORY},
  {"htam+tree", false, true, DIRECTION_HTAM},
};

const struct policy_traits *policy_find(const char *name) {
  for (size_t i = 0; name && i < sizeof policies / sizeof policies[0]; i++)
    if (strcmp(policies[i].name, name) == 0)
      return &policies[i];
  return NULL;
}

/* The greedy chain's node: the fastest correct node so far, else the reference. */
static size_t best_correct_node(const struct tree *t) {
  size_t best = 0;
  for (size_t i = 1; i < t->n; i++)
    if (t->nodes[i].result == TREE_CORRECT && t->nodes[i].speedup > t->nodes[best].speedup)
      best = i;
  return best;
}

/* Direction by static prior: the (step-1)-th best prior, so a chain rotates through the
 * directions instead of repeating one. */
static size_t prior_direction(const struct memory_view *m, int step) {
  size_t *order = malloc(m->n_globals * sizeof *order);
  if (!order)
    return 0;
  for (size_t i = 0; i < m->n_globals; i++)
    order[i] = i;
  for (size_t i = 1; i < m->n_globals; i++)  /* insertion sort, stable, by prior desc */
    for (size_t j = i; j > 0 && m->globals[order[j]].prior > m->globals[order[j - 1]].prior; j--) {
      size_t tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
  size_t pick = order[(size_t)(step - 1) % m->n_globals];
  free(order);
  return pick;
}

/* Scores directions with HTAM (with the node's prefix, or none for MEMORY) and picks one;
 * records the scores in *ret_why. Returns the index or -1. */
static long scored_direction(const struct policy_input *in, size_t node, bool transitions,
                             json_t **ret_why) {
  const struct memory_view *m = in->memory;
  const char *prefix[SEARCH_MAX_PREFIX];
  size_t prefix_n = 0;
  if (transitions && tree_prefix(in->tree, in->cfg, node, prefix, &prefix_n) != 0)
    prefix_n = 0;
  struct htam_score *scores = calloc(m->n_globals, sizeof *scores);
  size_t pick = 0;
  if (!scores ||
      htam_score(in->cfg, m->globals, m->n_globals, m->edges, transitions ? m->n_edges : 0,
                 prefix, prefix_n, in->state, scores) != 0 ||
      htam_choose(in->cfg, scores, m->n_globals, in->rng, &pick) != 0) {
    free(scores);
    return -1;
  }
  json_t *why = json_array();
  for (size_t i = 0; why && i < m->n_globals; i++)
    json_array_append_new(why, json_pack("{s:s, s:f, s:f}", "direction", m->globals[i].id,
                                         "score", scores[i].score, "pi", scores[i].pi));
  *ret_why = why;
  free(scores);
  return (long)pick;
}

/* Flat retrieval: one UCB over every applicable strategy regardless of its direction. */
static long flat_strategy(const struct policy_input *in) {
  const struct memory_view *m = in->memory;
  struct htam_local *flat = calloc(m->n_locals + 1, sizeof *flat);
  if (!flat)
    return -1;
  for (size_t i = 0; i < m->n_locals; i++) {
    flat[i] = m->locals[i];
    flat[i].global_id = "*";
  }
  size_t pick;
  int rc = htam_choose_local(in->cfg, flat, m->n_locals, "*", in->state->family, NULL, NULL,
                             &pick);
  free(flat);
  return rc == 0 ? (long)pick : -1;
}

/* Node and step kind: tree descent, or the greedy chain (small steps on the best node). */
static void choose_node(const struct policy_input *in, struct policy_choice *ret) {
  if (in->traits->use_tree) {
    struct tree_descent d;
    ret->node = tree_descend(in->tree, in->cfg, &d) == 0 ? d.node : 0;
    if (tree_step_kind(in->tree, in->cfg, ret->node, in->rng, &ret->kind, NULL) != 0)
      ret->kind = TREE_STEP_LARGE;
    return;
  }
  ret->node = best_correct_node(in->tree);
  ret->kind = ret->node == 0 ? TREE_STEP_LARGE : TREE_STEP_SMALL;
}

void policy_choose_node(const struct policy_input *in, struct policy_choice *ret) {
  *ret = (struct policy_choice){.why = NULL};
  choose_node(in, ret);
}

int policy_choose_direction(const struct policy_input *in, struct policy_choice *ret) {
  const struct memory_view *m = in->memory;
  if (m->n_globals == 0)
    return -1;
  struct policy_choice c = *ret;
  c.why = NULL;
  c.direction[0] = c.strategy[0] = '\0';
  const struct tree_node *node = &in->tree->nodes[c.node];
  long g = -1;
  if (c.kind == TREE_STEP_SMALL && node->direction[0] && in->traits->use_tree) {
    for (size_t i = 0; i < m->n_globals && g < 0; i++)  /* a patch keeps its direction */
      if (strcmp(m->globals[i].id, node->direction) == 0)
        g = (long)i;
  }
  long local = -1;
  if (g < 0 && in->traits->direction == DIRECTION_FLAT) {
    local = flat_strategy(in);
    for (size_t i = 0; local >= 0 && i < m->n_globals && g < 0; i++)
      if (strcmp(m->globals[i].id, m->locals[local].global_id) == 0)
        g = (long)i;
  }
  if (g < 0 && (in->traits->direction == DIRECTION_MEMORY ||
                in->traits->direction == DIRECTION_HTAM))
    g = scored_direction(in, c.node, in->traits->direction == DIRECTION_HTAM, &c.why);
  if (g < 0)
    g = (long)prior_direction(m, in->step);
  snprintf(c.direction, sizeof c.direction, "%s", m->globals[g].id);
  size_t pick;
  if (local < 0 && htam_choose_local(in->cfg, m->locals, m->n_locals, c.direction,
                                     in->state->family, NULL, NULL, &pick) == 0)
    local = (long)pick;
  if (local >= 0)
    snprintf(c.strategy, sizeof c.strategy, "%s", m->locals[local].id);
  *ret = c;
  return 0;
}

int policy_choose(const struct policy_input *in, struct policy_choice *ret) {
  if (in->memory->n_globals == 0)
    return -1;
  policy_choose_node(in, ret);
  return policy_choose_direction(in, ret);
}
