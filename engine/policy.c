/* The search policies: how each picks the node, step kind, direction and strategy. */
#include "engine/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct policy_traits policies[] = {
  {"single", true, NODE_CHAIN, DIRECTION_PRIOR},
  {"refine", false, NODE_CHAIN, DIRECTION_FEEDBACK},
  {"flat", false, NODE_CHAIN, DIRECTION_FLAT},
  {"htam", false, NODE_CHAIN, DIRECTION_HTAM},
  {"tree", false, NODE_TREE, DIRECTION_MEMORY},
  {"htam+tree", false, NODE_TREE, DIRECTION_HTAM},
  {"best_of_n", false, NODE_ROOT, DIRECTION_HTAM},
};

static const char *const direction_names[] = {"prior", "feedback", "flat", "memory", "htam"};

const struct policy_traits *policy_find(const char *name) {
  for (size_t i = 0; name && i < sizeof policies / sizeof policies[0]; i++)
    if (strcmp(policies[i].name, name) == 0)
      return &policies[i];
  return NULL;
}

enum policy_direction policy_direction_mode(const struct policy_traits *traits,
                                            const struct search_config *cfg) {
  bool scored = traits->direction == DIRECTION_MEMORY || traits->direction == DIRECTION_HTAM;
  return scored && cfg->retrieval == SEARCH_RETRIEVAL_FLAT ? DIRECTION_FLAT : traits->direction;
}

const char *policy_direction_name(enum policy_direction mode) {
  return (unsigned)mode < sizeof direction_names / sizeof direction_names[0]
             ? direction_names[mode]
             : "prior";
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

/* One uniform draw among the strategies of locals[0..n) that apply under global_id
 * (NULL: any direction, with every local's global_id ignored) to family: the choice
 * without evidence. Returns the index or -1 when none applies (no draw then). */
static long uniform_strategy(const struct policy_input *in, const struct htam_local *locals,
                             size_t n, const char *global_id) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++)
    count += htam_local_applies(&locals[i], global_id ? global_id : locals[i].global_id,
                                in->state->family);
  if (count == 0 || !in->rng)
    return -1;
  size_t k = (size_t)(rng_uniform(in->rng) * (double)count);
  if (k >= count)
    k = count - 1;
  for (size_t i = 0; i < n; i++)
    if (htam_local_applies(&locals[i], global_id ? global_id : locals[i].global_id,
                           in->state->family) &&
        k-- == 0)
      return (long)i;
  return -1;
}

/* Flat retrieval: one pool of every applicable strategy regardless of its direction,
 * chosen by UCB on its evidence, or uniformly without local memory. */
static long flat_strategy(const struct policy_input *in) {
  const struct memory_view *m = in->memory;
  if (!in->cfg->local_memory)
    return uniform_strategy(in, m->locals, m->n_locals, NULL);
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

/* ---- feedback only (refine): the task's own tree, no memory statistics ---- */

/* Copies of n records whose counts and reward sums are this task's own: the recorded
 * tree nodes whose direction (by_direction) or strategy equals the record's id, with
 * their tree rewards. ids come from globals (as "directions") or locals. Caller frees. */
static struct htam_local *own_counts(const struct tree *t, const struct memory_view *m,
                                     bool by_direction) {
  size_t n = by_direction ? m->n_globals : m->n_locals;
  struct htam_local *out = calloc(n + 1, sizeof *out);
  for (size_t i = 0; out && i < n; i++) {
    if (by_direction)
      out[i] = (struct htam_local){.id = m->globals[i].id, .global_id = "*"};
    else
      out[i] = (struct htam_local){.id = m->locals[i].id, .global_id = m->locals[i].global_id,
                                   .families = m->locals[i].families,
                                   .n_families = m->locals[i].n_families};
    for (size_t v = 1; v < t->n; v++) {
      const struct tree_node *node = &t->nodes[v];
      const char *key = by_direction ? node->direction : node->strategy;
      if (node->result != TREE_PENDING && strcmp(key, out[i].id) == 0) {
        out[i].n++;
        out[i].reward_sum += node->reward;
      }
    }
  }
  return out;
}

/* The htam_blocked_fn of feedback directions: a direction with no strategy for the
 * family cannot make a move. user is the policy input. */
static bool no_strategy_for_family(const struct htam_local *direction, void *user) {
  const struct policy_input *in = user;
  for (size_t i = 0; i < in->memory->n_locals; i++)
    if (htam_local_applies(&in->memory->locals[i], direction->id, in->state->family))
      return false;
  return in->memory->n_locals > 0;
}

/* The feedback direction: untried by this task first, else UCB on its own rewards. */
static long feedback_direction(const struct policy_input *in) {
  struct htam_local *dirs = own_counts(in->tree, in->memory, true);
  size_t pick;
  int rc = dirs ? htam_choose_local(in->cfg, dirs, in->memory->n_globals, "*", NULL,
                                    no_strategy_for_family, (void *)in, &pick)
                : -1;
  free(dirs);
  return rc == 0 ? (long)pick : -1;
}

/* The feedback strategy under direction, by the same rule. */
static long feedback_strategy(const struct policy_input *in, const char *direction) {
  struct htam_local *own = own_counts(in->tree, in->memory, false);
  size_t pick;
  int rc = own ? htam_choose_local(in->cfg, own, in->memory->n_locals, direction,
                                   in->state->family, NULL, NULL, &pick)
               : -1;
  free(own);
  return rc == 0 ? (long)pick : -1;
}

/* ---- the choice ---- */

/* Node and step kind: tree descent, the root (best-of-N), or the greedy chain (small
 * steps on the best node). */
static void choose_node(const struct policy_input *in, struct policy_choice *ret) {
  switch (in->traits->node) {
  case NODE_TREE: {
    struct tree_descent d;
    ret->node = tree_descend(in->tree, in->cfg, &d) == 0 ? d.node : 0;
    if (tree_step_kind(in->tree, in->cfg, ret->node, in->rng, &ret->kind, NULL) != 0)
      ret->kind = TREE_STEP_LARGE;
    /* The ablation arms of one kind of step (a small step without a kernel to patch is
     * a large one: engine/loop_propose.c). */
    if (in->cfg->steps == SEARCH_STEPS_LARGE)
      ret->kind = TREE_STEP_LARGE;
    else if (in->cfg->steps == SEARCH_STEPS_SMALL)
      ret->kind = TREE_STEP_SMALL;
    return;
  }
  case NODE_ROOT:
    ret->node = 0;
    ret->kind = TREE_STEP_LARGE;
    return;
  case NODE_CHAIN:
    break;
  }
  ret->node = best_correct_node(in->tree);
  ret->kind = ret->node == 0 ? TREE_STEP_LARGE : TREE_STEP_SMALL;
}

void policy_choose_node(const struct policy_input *in, struct policy_choice *ret) {
  *ret = (struct policy_choice){.why = NULL};
  choose_node(in, ret);
}

/* The index of global id in the view, or -1. */
static long global_index(const struct memory_view *m, const char *id) {
  for (size_t i = 0; i < m->n_globals; i++)
    if (strcmp(m->globals[i].id, id) == 0)
      return (long)i;
  return -1;
}

/* The strategy under direction by the mode's rule (FLAT picks before the direction). */
static long choose_strategy(const struct policy_input *in, enum policy_direction mode,
                            const char *direction) {
  const struct memory_view *m = in->memory;
  if (mode == DIRECTION_FEEDBACK)
    return feedback_strategy(in, direction);
  if (!in->cfg->local_memory)
    return uniform_strategy(in, m->locals, m->n_locals, direction);
  size_t pick;
  return htam_choose_local(in->cfg, m->locals, m->n_locals, direction, in->state->family, NULL,
                           NULL, &pick) == 0
             ? (long)pick
             : -1;
}

int policy_choose_direction(const struct policy_input *in, struct policy_choice *ret) {
  const struct memory_view *m = in->memory;
  if (m->n_globals == 0)
    return -1;
  enum policy_direction mode = policy_direction_mode(in->traits, in->cfg);
  struct policy_choice c = *ret;
  c.why = NULL;
  c.inherited = false;
  c.direction[0] = c.strategy[0] = '\0';
  const struct tree_node *node = &in->tree->nodes[c.node];
  long g = -1;
  if (c.kind == TREE_STEP_SMALL && node->direction[0] && in->traits->node == NODE_TREE) {
    g = global_index(m, node->direction);  /* a patch keeps its direction */
    c.inherited = g >= 0;
  }
  long local = -1;
  if (g < 0 && mode == DIRECTION_FLAT) {
    local = flat_strategy(in);
    if (local >= 0)
      g = global_index(m, m->locals[local].global_id);
  }
  if (g < 0 && (mode == DIRECTION_MEMORY || mode == DIRECTION_HTAM))
    g = scored_direction(in, c.node, mode == DIRECTION_HTAM, &c.why);
  if (g < 0 && mode == DIRECTION_FEEDBACK)
    g = feedback_direction(in);
  if (g < 0)
    g = (long)prior_direction(m, in->step);
  snprintf(c.direction, sizeof c.direction, "%s", m->globals[g].id);
  if (local < 0)
    local = choose_strategy(in, mode, c.direction);
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
