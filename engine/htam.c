/* HTAM policy math (docs/architecture.md, "HTAM"): node means, edge utilities, position weights,
 * trigger match, exploration, softmax policy, update deltas, step reward, and the UCB
 * choice of a local strategy. */
#include "engine/htam.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static bool present(const char *s) {
  return s && *s;
}

/* True when one of g's triggers is "<kind>:<value>". */
static bool has_trigger(const struct htam_global *g, const char *kind, const char *value) {
  size_t kl = strlen(kind);
  for (size_t i = 0; i < g->n_triggers; i++) {
    const char *t = g->triggers[i];
    if (t && strncmp(t, kind, kl) == 0 && t[kl] == ':' && strcmp(t + kl + 1, value) == 0)
      return true;
  }
  return false;
}

static double trigger_value(const struct htam_global *g, const struct htam_state *st) {
  if (!st)
    return 0.0;
  unsigned facets = 0, matched = 0;
  if (present(st->failure_stage)) {
    facets++;
    matched += has_trigger(g, "failure", st->failure_stage);
  }
  if (present(st->bound)) {
    facets++;
    matched += has_trigger(g, "bound", st->bound);
  }
  if (present(st->family)) {
    facets++;
    matched += has_trigger(g, "family", st->family);
  }
  return facets ? (double)matched / (double)facets : 0.0;
}

static const struct htam_edge *find_edge(const struct htam_edge *edges, size_t n_edges,
                                         const char *from, const char *to) {
  for (size_t i = 0; i < n_edges; i++)
    if (edges[i].from && edges[i].to && strcmp(edges[i].from, from) == 0 &&
        strcmp(edges[i].to, to) == 0)
      return &edges[i];
  return NULL;
}

/* Fills alpha[0..L-1] for a prefix of used length L (L >= 1). */
static void position_weights(double lambda, size_t L, double *alpha) {
  double total = 0.0;
  for (size_t i = 0; i < L; i++) {
    alpha[i] = exp(-lambda * (double)i);
    total += alpha[i];
  }
  for (size_t i = 0; i < L; i++)
    alpha[i] /= total;
}

static size_t used_prefix(const struct search_config *cfg, size_t prefix_n) {
  size_t cap = cfg->prefix_len < HTAM_MAX_PREFIX ? cfg->prefix_len : HTAM_MAX_PREFIX;
  return prefix_n < cap ? prefix_n : cap;
}

static int check_inputs(const struct htam_global *globals, size_t n_globals,
                        const struct htam_edge *edges, size_t n_edges,
                        const char *const *prefix, size_t L) {
  for (size_t b = 0; b < n_globals; b++)
    if (!globals[b].id || globals[b].n < 0 || !isfinite(globals[b].prior) ||
        !isfinite(globals[b].reward_sum) || (globals[b].n_triggers && !globals[b].triggers))
      return -EINVAL;
  for (size_t e = 0; e < n_edges; e++)
    if (!isfinite(edges[e].n) || edges[e].n < 0 || !isfinite(edges[e].reward_sum))
      return -EINVAL;
  for (size_t i = 0; i < L; i++)
    if (!prefix[i])
      return -EINVAL;
  return 0;
}

/* Fills every term of one candidate's score except pi. */
static void score_one(const struct search_config *cfg, const struct htam_global *g,
                      const struct htam_edge *edges, size_t n_edges,
                      const char *const *prefix, size_t L, const double *alpha, double N,
                      const struct htam_state *st, struct htam_score *s) {
  s->N = N;
  s->mu = (g->reward_sum + cfg->k0 * g->prior) / ((double)g->n + cfg->k0);
  s->n_terms = L;
  s->transition = L ? 0.0 : s->mu;
  for (size_t i = 0; i < L; i++) {
    struct htam_term *t = &s->terms[i];
    const struct htam_edge *e = find_edge(edges, n_edges, prefix[i], g->id);
    double sum = e ? e->reward_sum : 0.0;
    t->from = prefix[i];
    t->alpha = alpha[i];
    t->n_ab = e ? e->n : 0.0;
    t->m_ab = t->n_ab > 0.0 ? sum / t->n_ab : 0.0;
    t->u = (sum + cfg->k_edge * s->mu) / (t->n_ab + cfg->k_edge);
    s->transition += t->alpha * t->u;
  }
  s->trigger = trigger_value(g, st);
  s->explore = cfg->c * sqrt(log(N + 1.0) / ((double)g->n + 1.0));
  s->score = s->transition + cfg->beta * s->trigger + s->explore;
}

int htam_score(const struct search_config *cfg, const struct htam_global *globals,
               size_t n_globals, const struct htam_edge *edges, size_t n_edges,
               const char *const *prefix, size_t prefix_n, const struct htam_state *state,
               struct htam_score *ret_scores) {
  if (!cfg || !globals || n_globals == 0 || (n_edges && !edges) || (prefix_n && !prefix) ||
      !ret_scores)
    return -EINVAL;
  size_t L = used_prefix(cfg, prefix_n);
  if (check_inputs(globals, n_globals, edges, n_edges, prefix, L) < 0)
    return -EINVAL;
  double alpha[HTAM_MAX_PREFIX];
  if (L)
    position_weights(cfg->lambda, L, alpha);
  double N = 0.0;
  for (size_t b = 0; b < n_globals; b++)
    N += (double)globals[b].n;
  double best = -INFINITY;
  for (size_t b = 0; b < n_globals; b++) {
    memset(&ret_scores[b], 0, sizeof ret_scores[b]);
    ret_scores[b].index = b;
    score_one(cfg, &globals[b], edges, n_edges, prefix, L, alpha, N, state, &ret_scores[b]);
    if (ret_scores[b].score > best)
      best = ret_scores[b].score;
  }
  double total = 0.0;
  for (size_t b = 0; b < n_globals; b++) {
    ret_scores[b].pi = exp((ret_scores[b].score - best) / cfg->tau);
    total += ret_scores[b].pi;
  }
  for (size_t b = 0; b < n_globals; b++)
    ret_scores[b].pi /= total;
  return 0;
}

int htam_choose(const struct search_config *cfg, const struct htam_score *scores, size_t n,
                struct rng *rng, size_t *ret_index) {
  if (!cfg || !scores || n == 0 || !ret_index)
    return -EINVAL;
  if (cfg->deterministic) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
      if (scores[i].pi > scores[best].pi)
        best = i;
    *ret_index = best;
    return 0;
  }
  if (!rng)
    return -EINVAL;
  /* Same draw as rng_categorical over the pi column, without copying it out. */
  double total = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(scores[i].pi) || scores[i].pi < 0.0)
      return -EINVAL;
    total += scores[i].pi;
  }
  if (!(total > 0.0))
    return -EINVAL;
  double u = rng_uniform(rng) * total, acc = 0.0;
  size_t pick = n;
  for (size_t i = 0; i < n && pick == n; i++) {
    if (scores[i].pi <= 0.0)
      continue;
    acc += scores[i].pi;
    if (u < acc)
      pick = i;
  }
  for (size_t i = n; pick == n && i-- > 0;)
    if (scores[i].pi > 0.0)
      pick = i; /* rounding left u above the sum: the last positive weight wins */
  *ret_index = pick;
  return 0;
}

enum htam_outcome htam_outcome_of(enum eval_stage stage) {
  switch (stage) {
  case EVAL_CORRECT:
    return HTAM_CORRECT;
  case EVAL_PARSE:
  case EVAL_COMPILE:
  case EVAL_LOAD:
  case EVAL_LAUNCH:
    return HTAM_FAIL_COMPILE;
  case EVAL_TIMEOUT:
  case EVAL_CRASH:
  case EVAL_PROFILE:
    return HTAM_FAIL_TIMEOUT;
  case EVAL_CORRECTNESS:
  case EVAL_CHECK:
  case EVAL_PROTOCOL:
  case EVAL_STAGE__COUNT:
    break;
  }
  return HTAM_FAIL_INCORRECT;
}

int htam_reward(const struct search_config *cfg, enum htam_outcome outcome,
                double t_parent_ms, double t_new_ms, double *ret_r) {
  if (!cfg || !ret_r)
    return -EINVAL;
  switch (outcome) {
  case HTAM_CORRECT:
    if (!isfinite(t_parent_ms) || !isfinite(t_new_ms) || !(t_parent_ms > 0.0) ||
        !(t_new_ms > 0.0))
      return -EINVAL;
    *ret_r = log(t_parent_ms / t_new_ms);
    return 0;
  case HTAM_FAIL_COMPILE:
    *ret_r = cfg->penalty_compile;
    return 0;
  case HTAM_FAIL_INCORRECT:
    *ret_r = cfg->penalty_incorrect;
    return 0;
  case HTAM_FAIL_TIMEOUT:
    *ret_r = cfg->penalty_timeout;
    return 0;
  }
  return -EINVAL;
}

int htam_update(const struct search_config *cfg, const char *const *prefix, size_t prefix_n,
                const char *global_id, const char *local_id, enum htam_outcome outcome,
                double r, struct htam_update *ret) {
  if (!cfg || !global_id || (prefix_n && !prefix) || !ret || !isfinite(r) ||
      (unsigned)outcome > HTAM_FAIL_TIMEOUT)
    return -EINVAL;
  size_t L = used_prefix(cfg, prefix_n);
  for (size_t i = 0; i < L; i++)
    if (!prefix[i])
      return -EINVAL;
  struct htam_update u;
  memset(&u, 0, sizeof u);
  u.global_id = global_id;
  u.d_n = 1;
  u.d_reward_sum = r;
  u.d_successes = outcome == HTAM_CORRECT;
  u.d_improvements = outcome == HTAM_CORRECT && r > 0.0;
  u.ema_keep = 1.0 - cfg->ema_alpha;
  u.ema_add = cfg->ema_alpha * r;
  u.local_id = local_id;
  u.local_d_n = local_id ? 1 : 0;
  u.local_d_reward_sum = local_id ? r : 0.0;
  double alpha[HTAM_MAX_PREFIX];
  if (L)
    position_weights(cfg->lambda, L, alpha);
  for (size_t i = 0; i < L; i++) {
    size_t e = 0;
    while (e < u.n_edges && strcmp(u.edges[e].from, prefix[i]) != 0)
      e++;
    if (e == u.n_edges) {
      u.edges[e].from = prefix[i];
      u.edges[e].to = global_id;
      u.n_edges++;
    }
    u.edges[e].d_n += alpha[i];
    u.edges[e].d_reward_sum += alpha[i] * r;
  }
  *ret = u;
  return 0;
}

double htam_ema_apply(const struct htam_update *u, double ema) {
  return ema * u->ema_keep + u->ema_add;
}

bool htam_local_applies(const struct htam_local *local, const char *global_id,
                        const char *family) {
  if (!local || !local->id || !local->global_id || !global_id ||
      strcmp(local->global_id, global_id) != 0)
    return false;
  if (!present(family) || local->n_families == 0)
    return true;
  for (size_t i = 0; i < local->n_families; i++)
    if (local->families[i] && strcmp(local->families[i], family) == 0)
      return true;
  return false;
}

static bool eligible(const struct htam_local *l, const char *global_id, const char *family,
                     htam_blocked_fn blocked, void *user) {
  return htam_local_applies(l, global_id, family) && !(blocked && blocked(l, user));
}

int htam_choose_local(const struct search_config *cfg, const struct htam_local *locals,
                      size_t n_locals, const char *global_id, const char *family,
                      htam_blocked_fn blocked, void *user, size_t *ret_index) {
  if (!cfg || (n_locals && !locals) || !global_id || !ret_index)
    return -EINVAL;
  double N = 0.0;
  size_t count = 0;
  for (size_t i = 0; i < n_locals; i++) {
    if (!eligible(&locals[i], global_id, family, blocked, user))
      continue;
    if (locals[i].n < 0 || !isfinite(locals[i].reward_sum))
      return -EINVAL;
    if (locals[i].n == 0) {
      *ret_index = i; /* untried first, in array order */
      return 0;
    }
    N += (double)locals[i].n;
    count++;
  }
  if (count == 0)
    return -ENOENT;
  size_t best = n_locals;
  double best_ucb = -INFINITY;
  for (size_t i = 0; i < n_locals; i++) {
    if (!eligible(&locals[i], global_id, family, blocked, user))
      continue;
    double n = (double)locals[i].n;
    double ucb = locals[i].reward_sum / n + cfg->local_c * sqrt(log(N + 1.0) / (n + 1.0));
    if (ucb > best_ucb) {
      best_ucb = ucb;
      best = i;
    }
  }
  *ret_index = best;
  return 0;
}
