/* HTAM policy math (docs/architecture.md, "HTAM"): node means, edge utilities, position weights,
 * trigger match, exploration, softmax policy, update deltas, step reward, and the UCB
 * choice of a local strategy. Pure: it reads in-memory arrays the loop fills from the
 * store, and returns numbers and deltas the loop writes back. */
#ifndef OPFORGE_HTAM_H
#define OPFORGE_HTAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/outcome.h"
#include "engine/rng.h"
#include "engine/search_config.h"
#include "schema/memory_vocab.h" /* the vocabulary: families, stages, bounds, triggers */

#define HTAM_MAX_PREFIX SEARCH_MAX_PREFIX

/* A global direction as the scorer sees it. Every pointer is borrowed. */
struct htam_global {
  const char *id;
  double prior;                 /* static prior, in reward units */
  int64_t n;                    /* tries */
  double reward_sum;            /* sum of r over the tries */
  const char *const *triggers;  /* n_triggers strings of the trigger vocabulary */
  size_t n_triggers;
};

/* A transition edge from -> to: weighted count and weighted reward sum. Borrowed. */
struct htam_edge {
  const char *from;
  const char *to;
  double n;
  double reward_sum;
};

/* The facets of the state a trigger can match; NULL or "" means absent. Borrowed. */
struct htam_state {
  const char *failure_stage;    /* stage of the last failure (htam_failure_stages) */
  const char *bound;            /* "memory" or "compute", from the profile */
  const char *family;           /* the task's op family (htam_families) */
};

/* One prefix position i (1-based in DESIGN; terms[i-1] here) of a candidate's score. */
struct htam_term {
  const char *from;             /* p_i, borrowed from the prefix */
  double alpha;                 /* alpha_i */
  double n_ab;                  /* edge weighted count, 0 without an edge */
  double m_ab;                  /* edge mean reward, 0 when n_ab == 0 */
  double u;                     /* U(p_i -> b) */
};

/* Every term of s(b) and pi(b) for one candidate global b. */
struct htam_score {
  size_t index;                 /* b's position in the globals array */
  double N;                     /* total tries over all globals passed in */
  double mu;                    /* mu_b */
  size_t n_terms;               /* prefix positions used: min(prefix_n, prefix_len) */
  struct htam_term terms[HTAM_MAX_PREFIX];
  double transition;            /* sum_i alpha_i*U(p_i->b); mu_b when n_terms == 0 */
  double trigger;               /* trigger(b, state) in [0, 1] */
  double explore;               /* c*sqrt(ln(N+1)/(n_b+1)) */
  double score;                 /* s(b) = transition + beta*trigger + explore */
  double pi;                    /* softmax(s/tau) over the candidates */
};

/* Scores every global of globals[0..n_globals-1] as a candidate b.
 * - mu_b = (reward_sum_b + k0*prior_b) / (n_b + k0), i.e. (n_b*m_b + k0*prior_b)/(n_b+k0).
 * - The prefix is most recent first; only its first cfg->prefix_len ids are used. An id
 *   with no edge to b (or no global at all) gives n_ab = 0, hence U = mu_b.
 * - alpha_i = exp(-lambda*(i-1)) / sum_{j=1..L} exp(-lambda*(j-1)), L the used length.
 * - U(a->b) = (n_ab*m_ab + k_edge*mu_b) / (n_ab + k_edge). The first edge matching
 *   (from, to) is used.
 * - Empty prefix: the transition term is mu_b (the value U takes with no evidence), so
 *   the first step of a task still ranks directions by what they earned on other tasks.
 * - trigger(b, state) = (facets present in state that at least one of b's triggers
 *   matches) / (facets present); 0 when the state has none. A failure facet with stage S
 *   is matched by "failure:S", a bound B by "bound:B", a family F by "family:F".
 * - N = sum of n over globals; explore = c*sqrt(ln(N+1)/(n_b+1)).
 * - pi = exp((s_b - max s)/tau) / sum (max subtracted for stability).
 * Writes n_globals entries to ret_scores (caller's array, untouched on failure; terms'
 * from pointers are borrowed from prefix). Returns 0, or -EINVAL on NULL arguments, no
 * globals, or a non-finite or negative count. */
int htam_score(const struct search_config *cfg, const struct htam_global *globals,
               size_t n_globals, const struct htam_edge *edges, size_t n_edges,
               const char *const *prefix, size_t prefix_n, const struct htam_state *state,
               struct htam_score *ret_scores);

/* Picks a candidate from scores[0..n-1]: the argmax of pi (first on ties) when
 * cfg->deterministic (rng unused, may be NULL), else one rng_categorical draw over pi.
 * Returns 0 and sets *ret_index (a position in scores), or -EINVAL. */
int htam_choose(const struct search_config *cfg, const struct htam_score *scores, size_t n,
                struct rng *rng, size_t *ret_index);

/* How a step ended, for its reward. */
enum htam_outcome {
  HTAM_CORRECT,        /* correct: r = ln(t_parent/t_new) */
  HTAM_FAIL_COMPILE,   /* compile, load, launch or proposer parse failure */
  HTAM_FAIL_INCORRECT, /* correctness or check failure */
  HTAM_FAIL_TIMEOUT,   /* timeout or crash */
};

/* The outcome a stage means: parse, compile, load and launch failures are
 * HTAM_FAIL_COMPILE; correctness, check and protocol failures HTAM_FAIL_INCORRECT;
 * timeout, crash and profile HTAM_FAIL_TIMEOUT. */
enum htam_outcome htam_outcome_of(enum eval_stage stage);

/* Reward of a step: ln(t_parent_ms/t_new_ms) when correct (both times must be finite and
 * > 0), else the configured penalty (times ignored). Returns 0 and sets *ret_r, or
 * -EINVAL. */
int htam_reward(const struct search_config *cfg, enum htam_outcome outcome,
                double t_parent_ms, double t_new_ms, double *ret_r);

/* Additive change of one edge p_i -> g. Strings borrowed from the update's inputs. */
struct htam_edge_delta {
  const char *from;
  const char *to;
  double d_n;           /* sum of alpha_i over the positions where p_i == from */
  double d_reward_sum;  /* d_n * r */
};

/* What to add after one evaluated step. The EMA is given as an affine map so that it
 * can be applied atomically in SQL: ema := ema*ema_keep + ema_add, i.e.
 * (1-a)*ema + a*r. */
struct htam_update {
  const char *global_id;
  int64_t d_n;            /* 1 */
  double d_reward_sum;    /* r */
  int64_t d_successes;    /* 1 when the candidate is correct */
  int64_t d_improvements; /* 1 when correct and r > 0 (faster than its parent) */
  double ema_keep;        /* 1 - ema_alpha */
  double ema_add;         /* ema_alpha * r */
  const char *local_id;   /* NULL when no local strategy was used */
  int64_t local_d_n;      /* 1, or 0 without a local */
  double local_d_reward_sum;
  size_t n_edges;         /* distinct from-ids in the used prefix, in first-seen order */
  struct htam_edge_delta edges[HTAM_MAX_PREFIX];
};

/* Computes the deltas of one step that chose global_id (and local_id, or NULL) after
 * prefix (most recent first, truncated to cfg->prefix_len as in htam_score), with
 * reward r. A from-id repeated in the prefix gets one delta with the alphas summed.
 * Pointers in *ret are borrowed from the arguments. Returns 0, or -EINVAL. */
int htam_update(const struct search_config *cfg, const char *const *prefix, size_t prefix_n,
                const char *global_id, const char *local_id, enum htam_outcome outcome,
                double r, struct htam_update *ret);

/* Applies an update's EMA map to a stored value. */
double htam_ema_apply(const struct htam_update *u, double ema);

/* A local strategy as the chooser sees it. Borrowed. */
struct htam_local {
  const char *id;
  const char *global_id;        /* parent direction */
  int64_t n;                    /* tries */
  double reward_sum;
  const char *const *families;  /* op families it applies to; none = every family */
  size_t n_families;
};

/* Returns true when a skill rule forbids local for the current task. Must be pure: it
 * may be called more than once per local. */
typedef bool (*htam_blocked_fn)(const struct htam_local *local, void *user);

/* True when local is under global_id and applies to family (NULL family: any). */
bool htam_local_applies(const struct htam_local *local, const char *global_id,
                        const char *family);

/* Chooses a local strategy under global_id for family. Eligible: htam_local_applies and
 * not blocked (blocked may be NULL). The first eligible untried one (n == 0) wins;
 * otherwise the highest mean + local_c*sqrt(ln(N+1)/(n+1)), N the sum of n over the
 * eligible ones, first on ties. Returns 0 and sets *ret_index (a position in locals),
 * -ENOENT when nothing is eligible, or -EINVAL. */
int htam_choose_local(const struct search_config *cfg, const struct htam_local *locals,
                      size_t n_locals, const char *global_id, const char *family,
                      htam_blocked_fn blocked, void *user, size_t *ret_index);

#endif
