/* AdaExplore tree search (docs/architecture.md, "AdaExplore"): node rewards, UCB1 descent against an
 * expand pseudo-action, small and large steps, backpropagation, the representative pool,
 * the recent-work window, the HTAM prefix of a node, and JSON rows for persistence. */
#include "engine/tree.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double tree_reward(const struct search_config *cfg, enum tree_result result, double speedup) {
  switch (result) {
  case TREE_CORRECT: {
    double s = isfinite(speedup) ? speedup : cfg->speedup_min;
    if (s < cfg->speedup_min)
      s = cfg->speedup_min;
    if (s > cfg->speedup_max)
      s = cfg->speedup_max;
    return cfg->tree_reward_base + cfg->tree_reward_span * (s - cfg->speedup_min) /
                                       (cfg->speedup_max - cfg->speedup_min);
  }
  case TREE_INCORRECT:
    return cfg->tree_reward_incorrect;
  case TREE_NOT_COMPILED:
  case TREE_PENDING:
    break;
  }
  return 0.0;
}

enum tree_result tree_result_of(enum eval_stage stage) {
  switch (stage) {
  case EVAL_CORRECT:
    return TREE_CORRECT;
  case EVAL_PARSE:
  case EVAL_COMPILE:
  case EVAL_LOAD:
    return TREE_NOT_COMPILED;
  default:
    return TREE_INCORRECT;
  }
}

struct tree *tree_new(void) {
  return calloc(1, sizeof(struct tree));
}

void tree_free(struct tree *t) {
  if (!t)
    return;
  free(t->nodes);
  free(t);
}

/* Copies s (NULL = "") into a TREE_ID_MAX buffer; false when it does not fit. */
static bool copy_id(char *dst, const char *s) {
  if (!s)
    s = "";
  size_t len = strlen(s);
  if (len >= TREE_ID_MAX)
    return false;
  memcpy(dst, s, len + 1);
  return true;
}

/* Reserves a zeroed node slot at t->n (not yet counted). Returns 0, -ENOSPC or -ENOMEM. */
static int reserve(struct tree *t) {
  if (t->n >= TREE_MAX_NODES)
    return -ENOSPC;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    struct tree_node *nodes = realloc(t->nodes, cap * sizeof *nodes);
    if (!nodes)
      return -ENOMEM;
    t->nodes = nodes;
    t->cap = cap;
  }
  struct tree_node *n = &t->nodes[t->n];
  memset(n, 0, sizeof *n);
  n->parent = n->first_child = n->last_child = n->next_sibling = TREE_NONE;
  return 0;
}

/* Links the reserved slot t->n under its parent and counts it. */
static void link_reserved(struct tree *t) {
  size_t id = t->n;
  struct tree_node *n = &t->nodes[id];
  if (n->parent != TREE_NONE) {
    struct tree_node *p = &t->nodes[n->parent];
    if (p->last_child == TREE_NONE)
      p->first_child = id;
    else
      t->nodes[p->last_child].next_sibling = id;
    p->last_child = id;
    p->n_children++;
    if (n->step == TREE_STEP_SMALL)
      p->n_small_children++;
  }
  t->n++;
}

int tree_add_root(struct tree *t, const struct search_config *cfg) {
  if (!t || !cfg)
    return -EINVAL;
  if (t->n)
    return -EEXIST;
  int rc = reserve(t);
  if (rc < 0)
    return rc;
  struct tree_node *root = &t->nodes[0];
  root->step = TREE_STEP_ROOT;
  root->result = TREE_CORRECT;
  root->speedup = 1.0;
  root->reward = tree_reward(cfg, TREE_CORRECT, 1.0);
  root->visits = 1;
  root->reward_sum = root->reward;
  root->reward_max = root->reward;
  link_reserved(t);
  return 0;
}

int tree_add_child(struct tree *t, size_t parent, enum tree_step step, const char *direction,
                   const char *strategy, const char *candidate, size_t *ret_id) {
  if (!t || parent >= t->n || (step != TREE_STEP_SMALL && step != TREE_STEP_LARGE) ||
      !ret_id)
    return -EINVAL;
  int rc = reserve(t);
  if (rc < 0)
    return rc;
  struct tree_node *n = &t->nodes[t->n];
  n->parent = parent;
  n->step = step;
  n->result = TREE_PENDING;
  if (!copy_id(n->direction, direction) || !copy_id(n->strategy, strategy) ||
      !copy_id(n->candidate, candidate))
    return -EINVAL;
  *ret_id = t->n;
  link_reserved(t);
  return 0;
}

int tree_backprop(struct tree *t, size_t id, double reward) {
  if (!t || id >= t->n || !isfinite(reward))
    return -EINVAL;
  for (size_t v = id; v != TREE_NONE; v = t->nodes[v].parent) {
    struct tree_node *n = &t->nodes[v];
    if (n->visits == 0 || reward > n->reward_max)
      n->reward_max = reward;
    n->visits++;
    n->reward_sum += reward;
  }
  return 0;
}

int tree_record(struct tree *t, const struct search_config *cfg, size_t id,
                enum tree_result result, double speedup, double *ret_reward) {
  if (!t || !cfg || id >= t->n || t->nodes[id].result != TREE_PENDING ||
      result == TREE_PENDING || (unsigned)result > TREE_CORRECT)
    return -EINVAL;
  struct tree_node *n = &t->nodes[id];
  double r = tree_reward(cfg, result, speedup);
  n->result = result;
  n->speedup = isfinite(speedup) ? speedup : 0.0;
  n->reward = r;
  tree_backprop(t, id, r);
  if (ret_reward)
    *ret_reward = r;
  return 0;
}

static double mean(const struct tree_node *n) {
  return n->visits ? n->reward_sum / (double)n->visits : 0.0;
}

/* The blended value of a recorded node: reward_alpha*max + (1-reward_alpha)*mean
 * (AdaExplore's _blended_reward). */
static double blended(const struct search_config *cfg, const struct tree_node *n) {
  return cfg->reward_alpha * n->reward_max + (1.0 - cfg->reward_alpha) * mean(n);
}

int tree_descend(const struct tree *t, const struct search_config *cfg,
                 struct tree_descent *ret) {
  if (!t || !cfg || !ret || t->n == 0)
    return -EINVAL;
  double w_e = cfg->tree_c * cfg->expand_ratio;
  size_t v = 0, depth = 0;
  for (;;) {
    const struct tree_node *node = &t->nodes[v];
    double lnN = node->visits > 0 ? log((double)node->visits) : 0.0;
    size_t best = TREE_NONE, recorded = 0;
    double best_score = 0.0, q = 0.0;
    for (size_t ch = node->first_child; ch != TREE_NONE; ch = t->nodes[ch].next_sibling) {
      const struct tree_node *c = &t->nodes[ch];
      if (c->visits == 0)
        continue; /* pending: not a candidate yet */
      double value = blended(cfg, c);
      q = recorded == 0 || value > q ? value : q;
      recorded++;
      double s = value + (node->visits > 0 ? cfg->tree_c * sqrt(lnN / (double)c->visits) : 0.0);
      if (best == TREE_NONE || s > best_score) {
        best = ch;
        best_score = s;
      }
    }
    /* The public code's expand_ucb1: +inf at a leaf, -inf without exploration weight,
     * else the best child's value plus w_e*sqrt(ln N / |C|^2). The division is written
     * as it is there, so that a node with one child of one visit ties exactly. */
    double expand = best == TREE_NONE ? INFINITY
                    : !(w_e > 0.0)    ? -INFINITY
                    : node->visits == 0
                        ? q
                        : q + w_e * sqrt(lnN / ((double)recorded * (double)recorded));
    if (best == TREE_NONE || expand > best_score) {
      ret->node = v;
      ret->depth = depth;
      ret->best_child = best;
      ret->best_child_score = best == TREE_NONE ? 0.0 : best_score;
      ret->expand_score = expand;
      return 0;
    }
    v = best;
    depth++;
  }
}

int tree_step_kind(const struct tree *t, const struct search_config *cfg, size_t node,
                   struct rng *rng, enum tree_step *ret_step, bool *ret_forced) {
  if (!t || !cfg || node >= t->n || !ret_step)
    return -EINVAL;
  const struct tree_node *n = &t->nodes[node];
  bool forced = n->step == TREE_STEP_ROOT ||
                n->n_small_children >= cfg->small_children_before_large;
  enum tree_step step = TREE_STEP_LARGE;
  if (!forced) {
    if (!rng)
      return -EINVAL;
    step = rng_uniform(rng) < cfg->large_step_prob ? TREE_STEP_LARGE : TREE_STEP_SMALL;
  }
  *ret_step = step;
  if (ret_forced)
    *ret_forced = forced;
  return 0;
}

int tree_prefix(const struct tree *t, const struct search_config *cfg, size_t node,
                const char **ret_ids, size_t *ret_n) {
  if (!t || !cfg || node >= t->n || !ret_ids || !ret_n)
    return -EINVAL;
  size_t cap = cfg->prefix_len < SEARCH_MAX_PREFIX ? cfg->prefix_len : SEARCH_MAX_PREFIX;
  size_t n = 0;
  for (size_t v = node; v != TREE_NONE && n < cap; v = t->nodes[v].parent) {
    const char *d = t->nodes[v].direction;
    if (!*d)
      continue;
    if (cfg->prefix_collapse_repeats && n && strcmp(ret_ids[n - 1], d) == 0)
      continue;
    ret_ids[n++] = d;
  }
  *ret_n = n;
  return 0;
}

size_t tree_region_root(const struct tree *t, size_t id) {
  if (!t || id >= t->n)
    return TREE_NONE;
  size_t v = id;
  while (t->nodes[v].step != TREE_STEP_LARGE && t->nodes[v].parent != TREE_NONE)
    v = t->nodes[v].parent;
  return t->nodes[v].step == TREE_STEP_LARGE ? v : 0;
}

bool tree_node_is_large_root(const struct tree_node *node) {
  return node && node->step == TREE_STEP_LARGE;
}

int tree_recent(const struct tree *t, const struct search_config *cfg, size_t node,
                size_t *ret_ids, size_t *ret_n) {
  if (!t || !cfg || node >= t->n || !ret_ids || !ret_n)
    return -EINVAL;
  size_t cap = cfg->recent_window < SEARCH_MAX_POOL ? cfg->recent_window : SEARCH_MAX_POOL;
  size_t n = 0;
  for (size_t v = node; v != TREE_NONE && v != 0 && n < cap;
       v = t->nodes[v].parent) {
    ret_ids[n++] = v;
    if (t->nodes[v].step == TREE_STEP_LARGE)
      break;
  }
  *ret_n = n;
  return 0;
}

/* True when correct node a beats correct node b as a region's representative. */
static bool better(const struct tree *t, size_t a, size_t b) {
  if (b == TREE_NONE)
    return true;
  double sa = t->nodes[a].speedup, sb = t->nodes[b].speedup;
  return sa > sb || (sa == sb && a < b);
}

/* Fills best[r] for every region root r (TREE_NONE elsewhere or when the region has no
 * correct node). Relies on parents having lower ids than their children. */
static void region_bests(const struct tree *t, size_t *region, size_t *best) {
  for (size_t u = 0; u < t->n; u++) {
    const struct tree_node *n = &t->nodes[u];
    best[u] = TREE_NONE;
    region[u] = (n->step == TREE_STEP_LARGE || n->parent == TREE_NONE) ? u : region[n->parent];
    if (n->result == TREE_CORRECT && u != 0 && better(t, u, best[region[u]]))
      best[region[u]] = u;
  }
}

/* Appends, best first, the representatives of large regions not on the path. */
static void fill_pool(const struct tree *t, const size_t *best, bool *used,
                      size_t cap, size_t *ids, size_t *n) {
  while (*n < cap) {
    size_t pick = TREE_NONE;
    for (size_t r = 1; r < t->n; r++) {
      if (t->nodes[r].step != TREE_STEP_LARGE || used[r] || best[r] == TREE_NONE)
        continue;
      if (pick == TREE_NONE || better(t, best[r], best[pick]))
        pick = r;
    }
    if (pick == TREE_NONE)
      return;
    ids[(*n)++] = best[pick];
    used[pick] = true;
  }
}

int tree_pool(const struct tree *t, const struct search_config *cfg, size_t node,
              size_t *ret_ids, size_t *ret_n) {
  if (!t || !cfg || node >= t->n || !ret_ids || !ret_n)
    return -EINVAL;
  size_t *region = malloc(t->n * sizeof *region);
  size_t *best = malloc(t->n * sizeof *best);
  bool *used = calloc(t->n, sizeof *used);
  if (!region || !best || !used) {
    free(region);
    free(best);
    free(used);
    return -ENOMEM;
  }
  region_bests(t, region, best);
  size_t cap = cfg->pool_size < SEARCH_MAX_POOL ? cfg->pool_size : SEARCH_MAX_POOL;
  size_t n = 0;
  for (size_t v = node; v != TREE_NONE && n < cap; v = t->nodes[v].parent) {
    if (t->nodes[v].step != TREE_STEP_LARGE)
      continue;
    used[v] = true;
    if (best[v] != TREE_NONE)
      ret_ids[n++] = best[v];
  }
  fill_pool(t, best, used, cap, ret_ids, &n);
  free(region);
  free(best);
  free(used);
  *ret_n = n;
  return 0;
}

static const char *const step_names[] = {"root", "small", "large"};
static const char *const result_names[] = {"pending", "not_compiled", "incorrect", "correct"};

json_t *tree_node_to_json(const struct tree *t, size_t id) {
  if (!t || id >= t->n)
    return NULL;
  const struct tree_node *n = &t->nodes[id];
  json_t *parent = n->parent == TREE_NONE ? json_null() : json_integer((json_int_t)n->parent);
  return json_pack("{s:I, s:o, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:I, s:f, s:f}",
                   "id", (json_int_t)id, "parent", parent, "step", step_names[n->step],
                   "direction", n->direction, "strategy", n->strategy, "candidate",
                   n->candidate, "result", result_names[n->result], "speedup", n->speedup,
                   "reward", n->reward, "visits", (json_int_t)n->visits, "reward_sum",
                   n->reward_sum, "reward_max", n->reward_max);
}

/* Index of name in a list of count names, or -1. */
static int name_index(const char *const *names, int count, const char *name) {
  for (int i = 0; i < count; i++)
    if (strcmp(names[i], name) == 0)
      return i;
  return -1;
}

/* Checks the parts of a row json_unpack cannot: ids, links, names, numbers. */
static int check_row(const struct tree *t, json_int_t id, const json_t *parent, int step,
                     int result, const struct tree_node *n, char *err, size_t errlen) {
  if (id != (json_int_t)t->n) {
    snprintf(err, errlen, "id: expected %zu, got %lld", t->n, (long long)id);
    return -1;
  }
  if (json_is_null(parent) != (id == 0) ||
      (!json_is_null(parent) && (!json_is_integer(parent) || json_integer_value(parent) < 0 ||
                                 json_integer_value(parent) >= id))) {
    snprintf(err, errlen, "parent: must be null for node 0, else an earlier node's id");
    return -1;
  }
  if (step < 0 || (step == TREE_STEP_ROOT) != (id == 0)) {
    snprintf(err, errlen, "step: must be \"root\" for node 0, else \"small\" or \"large\"");
    return -1;
  }
  if (result < 0) {
    snprintf(err, errlen, "result: unknown value");
    return -1;
  }
  if (!isfinite(n->speedup) || !isfinite(n->reward) || n->visits < 0 ||
      !isfinite(n->reward_sum) || !isfinite(n->reward_max)) {
    snprintf(err, errlen, "statistics: must be finite, visits >= 0");
    return -1;
  }
  return 0;
}

int tree_append_json(struct tree *t, const json_t *row, char *err, size_t errlen) {
  json_int_t id, visits;
  json_t *parent;
  const char *step, *direction, *strategy, *candidate, *result;
  struct tree_node n;
  memset(&n, 0, sizeof n);
  json_error_t jerr;
  if (!t || json_unpack_ex((json_t *)row, &jerr, JSON_STRICT,
                           "{s:I, s:o, s:s, s:s, s:s, s:s, s:s, s:F, s:F, s:I, s:F, s:F}",
                           "id", &id, "parent", &parent, "step", &step, "direction",
                           &direction, "strategy", &strategy, "candidate", &candidate,
                           "result", &result, "speedup", &n.speedup, "reward", &n.reward,
                           "visits", &visits, "reward_sum", &n.reward_sum, "reward_max",
                           &n.reward_max) < 0) {
    snprintf(err, errlen, "tree row: %s", t ? jerr.text : "no tree");
    return -1;
  }
  n.visits = (int64_t)visits;
  int step_i = name_index(step_names, 3, step), result_i = name_index(result_names, 4, result);
  if (check_row(t, id, parent, step_i, result_i, &n, err, errlen) < 0)
    return -1;
  if (!copy_id(n.direction, direction) || !copy_id(n.strategy, strategy) ||
      !copy_id(n.candidate, candidate)) {
    snprintf(err, errlen, "direction, strategy, candidate: at most %d bytes", TREE_ID_MAX - 1);
    return -1;
  }
  if (reserve(t) < 0) {
    snprintf(err, errlen, "tree row: out of memory or over %d nodes", TREE_MAX_NODES);
    return -1;
  }
  n.parent = json_is_null(parent) ? TREE_NONE : (size_t)json_integer_value(parent);
  n.first_child = n.last_child = n.next_sibling = TREE_NONE;
  n.step = (enum tree_step)step_i;
  n.result = (enum tree_result)result_i;
  t->nodes[t->n] = n;
  link_reserved(t);
  return 0;
}
