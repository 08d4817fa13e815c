/* Unit tests of the HTAM policy math (engine/htam.c) against values computed by hand,
 * of the seeded RNG (engine/rng.c) and of the search configuration (engine/search_config.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/htam.h"
#include "engine/rng.h"
#include "engine/search_config.h"

/* cmocka 1.1 compares only floats: doubles are checked here to the given tolerance. */
#define assert_near(a, b, tol) near_or_fail((a), (b), (tol), #a, __FILE__, __LINE__)
static void near_or_fail(double a, double b, double tol, const char *what, const char *file,
                         int line) {
  if (!(fabs(a - b) <= tol))
    fail_msg("%s:%d: %s = %.17g, expected %.17g (tolerance %g)", file, line, what, a, b, tol);
}

#define TOL 1e-9

/* The fixed graph, with the default constants k0 = k = 2, lambda = 0.7, beta = 0.2,
 * tau = 0.1, K = 3, and the exploration weight c = 0.3 (the default is 0; see
 * test_scores_default_no_bonus and docs/architecture.md, "HTAM").
 *
 *   global  prior  n  reward_sum  triggers
 *   A       0.2    4   1.0        bound:memory, family:norm
 *   B       0.1    2  -0.2        failure:compile
 *   C       0.3    0   0.0        bound:memory
 *   edges (n, sum): A->B (2, 0.6)   B->A (1, -0.3)   A->C (0.5, 0.1)   C->A (3, 0.9)
 *   prefix (most recent first): p1 = B, p2 = A
 *   state: failure "compile", bound "memory", family "norm" (3 facets)
 *
 * Node means mu = (sum + 2*prior) / (n + 2):
 *   mu_A = (1.0 + 0.4)/6 = 0.233333333333;  mu_B = (-0.2 + 0.2)/4 = 0;
 *   mu_C = (0 + 0.6)/2 = 0.3
 * Weights: e^-0.7 = 0.496585303791; alpha_1 = 1/1.496585303791 = 0.668187772168,
 *   alpha_2 = 0.496585303791/1.496585303791 = 0.331812227832
 * Edge utilities U = (sum_ab + 2*mu_b) / (n_ab + 2):
 *   A: U(B->A) = (-0.3 + 0.466667)/3 = 0.055555555556 (m = -0.3);  U(A->A) = mu_A (no edge)
 *   B: U(B->B) = mu_B = 0;  U(A->B) = (0.6 + 0)/4 = 0.15 (m = 0.3)
 *   C: U(B->C) = mu_C = 0.3;  U(A->C) = (0.1 + 0.6)/2.5 = 0.28 (m = 0.2)
 * Transition sum_i alpha_i*U_i:
 *   A: 0.668188*0.055556 + 0.331812*0.233333 = 0.114544396059
 *   B: 0.668188*0 + 0.331812*0.15 = 0.049771834175
 *   C: 0.668188*0.3 + 0.331812*0.28 = 0.293363755443
 * Triggers: A matches bound and family: 2/3; B matches failure: 1/3; C bound: 1/3.
 * Exploration, N = 4 + 2 + 0 = 6, ln 7 = 1.945910149055:
 *   A: 0.3*sqrt(1.945910/5) = 0.187153366742;  B: 0.3*sqrt(1.945910/3) = 0.241613957527;
 *   C: 0.3*sqrt(1.945910/1) = 0.418487650254
 * Scores s = transition + 0.2*trigger + exploration:
 *   A: 0.114544 + 0.133333 + 0.187153 = 0.435031096135
 *   B: 0.049772 + 0.066667 + 0.241614 = 0.358052458368
 *   C: 0.293364 + 0.066667 + 0.418488 = 0.778518072364
 * Softmax at tau 0.1, max s_C subtracted: exp((s-s_C)/0.1) = 0.032229607469,
 *   0.014925917613, 1; sum 1.047155525082 => pi = 0.030778243247, 0.014253773442,
 *   0.954967983310. */
static const char *const trig_a[] = {"bound:memory", "family:norm"};
static const char *const trig_b[] = {"failure:compile"};
static const char *const trig_c[] = {"bound:memory"};
static const struct htam_global graph[3] = {
  {"A", 0.2, 4, 1.0, trig_a, 2},
  {"B", 0.1, 2, -0.2, trig_b, 1},
  {"C", 0.3, 0, 0.0, trig_c, 1},
};
static const struct htam_edge edges[4] = {
  {"A", "B", 2.0, 0.6},
  {"B", "A", 1.0, -0.3},
  {"A", "C", 0.5, 0.1},
  {"C", "A", 3.0, 0.9},
};
static const char *const prefix_ba[] = {"B", "A"};
static const struct htam_state full_state = {"compile", "memory", "norm"};

static const double ALPHA1 = 0.6681877721681662, ALPHA2 = 0.33181222783183395;

static void test_scores_by_hand(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  cfg.c = 0.3;
  struct htam_score s[3];
  assert_int_equal(htam_score(&cfg, graph, 3, edges, 4, prefix_ba, 2, &full_state, s), 0);
  static const double mu[3] = {0.2333333333333333, 0.0, 0.3};
  static const double n_ab[3][2] = {{1.0, 0.0}, {0.0, 2.0}, {0.0, 0.5}};
  static const double m_ab[3][2] = {{-0.3, 0.0}, {0.0, 0.3}, {0.0, 0.2}};
  static const double u[3][2] = {{0.055555555555555546, 0.2333333333333333}, {0.0, 0.15},
                                 {0.3, 0.28}};
  static const double transition[3] = {0.11454439605899269, 0.04977183417477509,
                                       0.29336375544336335};
  static const double trigger[3] = {2.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0};
  static const double explore[3] = {0.18715336674234753, 0.24161395752658704,
                                    0.4184876502538375};
  static const double score[3] = {0.43503109613467356, 0.3580524583680288,
                                  0.7785180723638675};
  static const double pi[3] = {0.030778243247362898, 0.014253773442326742,
                               0.9549679833103104};
  for (size_t b = 0; b < 3; b++) {
    assert_int_equal(s[b].index, b);
    assert_near(s[b].N, 6.0, 0.0);
    assert_near(s[b].mu, mu[b], TOL);
    assert_int_equal(s[b].n_terms, 2);
    assert_string_equal(s[b].terms[0].from, "B");
    assert_string_equal(s[b].terms[1].from, "A");
    assert_near(s[b].terms[0].alpha, ALPHA1, TOL);
    assert_near(s[b].terms[1].alpha, ALPHA2, TOL);
    for (size_t i = 0; i < 2; i++) {
      assert_near(s[b].terms[i].n_ab, n_ab[b][i], TOL);
      assert_near(s[b].terms[i].m_ab, m_ab[b][i], TOL);
      assert_near(s[b].terms[i].u, u[b][i], TOL);
    }
    assert_near(s[b].transition, transition[b], TOL);
    assert_near(s[b].trigger, trigger[b], TOL);
    assert_near(s[b].explore, explore[b], TOL);
    assert_near(s[b].score, score[b], TOL);
    assert_near(s[b].pi, pi[b], TOL);
  }
}

/* The same graph with the default c = 0: no exploration bonus, so the score is the
 * transition and trigger terms alone and the softmax at tau = 0.1 does the exploring:
 *   s_A = 0.114544 + 0.133333 = 0.247877729392, s_B = 0.049772 + 0.066667 =
 *   0.116438500841, s_C = 0.293364 + 0.066667 = 0.360030422110;
 *   exp((s - s_C)/0.1) = 0.325785877..., 0.087517..., 1 => pi = 0.230511672149,
 *   0.061924085911, 0.707564241940.
 * With c = 0.3 the bonus of C (0.418488, n = 0) exceeded its transition term (0.293364)
 * and pushed pi_C from 0.708 to 0.955. */
static void test_scores_default_no_bonus(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  assert_near(cfg.c, 0.0, 0.0);
  struct htam_score s[3];
  assert_int_equal(htam_score(&cfg, graph, 3, edges, 4, prefix_ba, 2, &full_state, s), 0);
  static const double score[3] = {0.24787772939232602, 0.11643850084144175, 0.36003042211003};
  static const double pi[3] = {0.2305116721493202, 0.061924085910903454, 0.7075642419397764};
  for (size_t b = 0; b < 3; b++) {
    assert_near(s[b].explore, 0.0, 0.0);
    assert_near(s[b].score, score[b], TOL);
    assert_near(s[b].pi, pi[b], TOL);
  }
  assert_true(0.4184876502538375 > s[2].transition); /* the bonus it had at c = 0.3 */
}

/* Empty prefix: the transition term is mu_b. No state facets: trigger 0. No tries at
 * all: N = 0 and exploration ln(1) = 0, so s = mu and pi follows the priors:
 * exp((0.2-0.3)/0.1) = e^-1 = 0.367879441171, exp(-2) = 0.135335283237, 1;
 * sum 1.503214724408 => pi = 0.244728471055, 0.090030573170, 0.665240955775. */
static void test_empty_prefix_and_state(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct htam_global fresh[3] = {graph[0], graph[1], graph[2]};
  for (size_t b = 0; b < 3; b++) {
    fresh[b].n = 0;
    fresh[b].reward_sum = 0.0;
  }
  struct htam_state none = {NULL, "", NULL};
  struct htam_score s[3];
  assert_int_equal(htam_score(&cfg, fresh, 3, edges, 4, NULL, 0, &none, s), 0);
  static const double pi[3] = {0.24472847105479767, 0.09003057317038046, 0.6652409557748219};
  for (size_t b = 0; b < 3; b++) {
    assert_int_equal(s[b].n_terms, 0);
    assert_near(s[b].mu, fresh[b].prior, TOL);
    assert_near(s[b].transition, fresh[b].prior, TOL);
    assert_near(s[b].trigger, 0.0, 0.0);
    assert_near(s[b].explore, 0.0, 0.0);
    assert_near(s[b].score, fresh[b].prior, TOL);
    assert_near(s[b].pi, pi[b], TOL);
  }
  /* A NULL state is the same as no facets. */
  assert_int_equal(htam_score(&cfg, graph, 3, edges, 4, prefix_ba, 2, NULL, s), 0);
  assert_near(s[0].trigger, 0.0, 0.0);
}

/* Only the first K = 3 prefix ids count. L = 3: weights 1, e^-0.7, e^-1.4 over
 * 1 + 0.496585303791 + 0.246596963942 = 1.743182267733 => 0.573663476568,
 * 0.284872851786, 0.141463671646. The fourth id (C) is ignored. */
static void test_prefix_truncated_to_k(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  const char *const prefix[] = {"A", "B", "A", "C"};
  struct htam_score s[3];
  assert_int_equal(htam_score(&cfg, graph, 3, edges, 4, prefix, 4, &full_state, s), 0);
  assert_int_equal(s[0].n_terms, 3);
  assert_near(s[0].terms[0].alpha, 0.5736634765683373, TOL);
  assert_near(s[0].terms[1].alpha, 0.2848728517857239, TOL);
  assert_near(s[0].terms[2].alpha, 0.14146367164593887, TOL);
  /* For B: U(A->B) = 0.15 twice, U(B->B) = 0 => 0.15*(0.573663 + 0.141464) = 0.107269. */
  assert_near(s[1].transition, 0.15 * (0.5736634765683373 + 0.14146367164593887), TOL);
  /* K = 1 keeps only p1 with weight 1. */
  cfg.prefix_len = 1;
  assert_int_equal(htam_score(&cfg, graph, 3, edges, 4, prefix, 4, &full_state, s), 0);
  assert_int_equal(s[2].n_terms, 1);
  assert_near(s[2].terms[0].alpha, 1.0, 0.0);
  assert_near(s[2].transition, 0.28, TOL); /* U(A->C) */
}

/* trigger = matched facets / present facets, per facet kind. */
static void test_trigger_facets(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct htam_score s[3];
  struct htam_state family_only = {NULL, NULL, "norm"};
  assert_int_equal(htam_score(&cfg, graph, 3, NULL, 0, NULL, 0, &family_only, s), 0);
  assert_near(s[0].trigger, 1.0, 0.0);
  assert_near(s[1].trigger, 0.0, 0.0);
  struct htam_state two = {"correctness", "memory", NULL};
  assert_int_equal(htam_score(&cfg, graph, 3, NULL, 0, NULL, 0, &two, s), 0);
  assert_near(s[0].trigger, 0.5, 0.0);
  assert_near(s[1].trigger, 0.0, 0.0); /* failure:compile does not match correctness */
  assert_near(s[2].trigger, 0.5, 0.0);
  /* A trigger's prefix must match the facet kind: "family:norm" is no bound. */
  struct htam_state bound_norm = {NULL, "norm", NULL};
  assert_int_equal(htam_score(&cfg, graph, 3, NULL, 0, NULL, 0, &bound_norm, s), 0);
  assert_near(s[0].trigger, 0.0, 0.0);
}

static void test_score_rejects_bad_input(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct htam_score s[3];
  s[0].score = 42.0;
  assert_int_equal(htam_score(&cfg, graph, 0, edges, 4, NULL, 0, NULL, s), -EINVAL);
  struct htam_global g[3] = {graph[0], graph[1], graph[2]};
  g[1].n = -1;
  assert_int_equal(htam_score(&cfg, g, 3, edges, 4, NULL, 0, NULL, s), -EINVAL);
  struct htam_edge e[1] = {{"A", "B", NAN, 0.0}};
  assert_int_equal(htam_score(&cfg, graph, 3, e, 1, NULL, 0, NULL, s), -EINVAL);
  assert_near(s[0].score, 42.0, 0.0); /* untouched on failure */
}

/* Step that chose C after prefix (B, A), correct, 2 ms -> 1 ms: r = ln 2 = 0.693147180560.
 * Edge deltas: B->C += alpha_1 = 0.668187772168, sum += alpha_1*ln2 = 0.463152470363;
 * A->C += alpha_2 = 0.331812227832, sum += alpha_2*ln2 = 0.229994710197.
 * EMA: keep 0.7, add 0.3*ln2 = 0.207944154168; from 0.1: 0.07 + 0.207944 = 0.277944154168. */
static void test_update_deltas(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  double r;
  assert_int_equal(htam_reward(&cfg, HTAM_CORRECT, 2.0, 1.0, &r), 0);
  assert_near(r, 0.6931471805599453, TOL);
  struct htam_update u;
  assert_int_equal(htam_update(&cfg, prefix_ba, 2, "C", "vec4", HTAM_CORRECT, r, &u), 0);
  assert_string_equal(u.global_id, "C");
  assert_int_equal(u.d_n, 1);
  assert_near(u.d_reward_sum, r, 0.0);
  assert_int_equal(u.d_successes, 1);
  assert_int_equal(u.d_improvements, 1);
  assert_near(u.ema_keep, 0.7, TOL);
  assert_near(u.ema_add, 0.2079441541679836, TOL);
  assert_near(htam_ema_apply(&u, 0.1), 0.27794415416798357, TOL);
  assert_string_equal(u.local_id, "vec4");
  assert_int_equal(u.local_d_n, 1);
  assert_near(u.local_d_reward_sum, r, 0.0);
  assert_int_equal(u.n_edges, 2);
  assert_string_equal(u.edges[0].from, "B");
  assert_string_equal(u.edges[0].to, "C");
  assert_near(u.edges[0].d_n, ALPHA1, TOL);
  assert_near(u.edges[0].d_reward_sum, 0.46315247036299545, TOL);
  assert_string_equal(u.edges[1].from, "A");
  assert_near(u.edges[1].d_n, ALPHA2, TOL);
  assert_near(u.edges[1].d_reward_sum, 0.22999471019694992, TOL);
}

/* Prefix (A, A, B) with K = 3, incorrect (r = -0.3): A's two positions merge into one
 * delta, alpha_1 + alpha_2 = 0.573663 + 0.284873 = 0.858536328354, sum *(-0.3) =
 * -0.257560898506; B gets alpha_3 = 0.141463671646, sum -0.042439101494. No local. */
static void test_update_merges_repeats(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  const char *const prefix[] = {"A", "A", "B"};
  double r;
  assert_int_equal(htam_reward(&cfg, HTAM_FAIL_INCORRECT, 0, 0, &r), 0);
  struct htam_update u;
  assert_int_equal(htam_update(&cfg, prefix, 3, "A", NULL, HTAM_FAIL_INCORRECT, r, &u), 0);
  assert_int_equal(u.d_successes, 0);
  assert_int_equal(u.d_improvements, 0);
  assert_null(u.local_id);
  assert_int_equal(u.local_d_n, 0);
  assert_int_equal(u.n_edges, 2);
  assert_string_equal(u.edges[0].from, "A");
  assert_string_equal(u.edges[0].to, "A");
  assert_near(u.edges[0].d_n, 0.8585363283540612, TOL);
  assert_near(u.edges[0].d_reward_sum, -0.2575608985062184, TOL);
  assert_string_equal(u.edges[1].from, "B");
  assert_near(u.edges[1].d_n, 0.14146367164593887, TOL);
  assert_near(u.edges[1].d_reward_sum, -0.04243910149378166, TOL);
  /* Correct but slower: a success, not an improvement. Empty prefix: no edges. */
  assert_int_equal(htam_reward(&cfg, HTAM_CORRECT, 1.0, 1.25, &r), 0);
  assert_near(r, log(0.8), TOL);
  assert_int_equal(htam_update(&cfg, NULL, 0, "B", "x", HTAM_CORRECT, r, &u), 0);
  assert_int_equal(u.d_successes, 1);
  assert_int_equal(u.d_improvements, 0);
  assert_int_equal(u.n_edges, 0);
}

static void test_reward_penalties(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  static const struct {
    const char *stage;
    double r;
  } cases[] = {
    {"compile", -0.5}, {"load", -0.5},  {"launch", -0.5},  {"parse", -0.5},
    {"correctness", -0.3}, {"check", -0.3}, {"timeout", -0.7}, {"crash", -0.7},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    enum eval_stage stage;
    double r = 99.0;
    assert_int_equal(eval_stage_from_name(cases[i].stage, &stage), 0);
    assert_int_equal(htam_reward(&cfg, htam_outcome_of(stage), 1.0, 1.0, &r), 0);
    if (r != cases[i].r)
      fail_msg("stage %s: reward %g, expected %g", cases[i].stage, r, cases[i].r);
  }
  enum eval_stage stage = EVAL_CORRECT;
  assert_int_equal(eval_stage_from_name("segfault", &stage), -1);
  assert_int_equal(eval_stage_from_name("correct", &stage), -1); /* not a failure stage */
  assert_int_equal(stage, EVAL_CORRECT);
  assert_int_equal(htam_outcome_of(EVAL_CORRECT), HTAM_CORRECT);
  assert_int_equal(htam_outcome_of(EVAL_PROTOCOL), HTAM_FAIL_INCORRECT);
  double r = 7.0;
  assert_int_equal(htam_reward(&cfg, HTAM_CORRECT, 0.0, 1.0, &r), -EINVAL);
  assert_int_equal(htam_reward(&cfg, HTAM_CORRECT, 1.0, -1.0, &r), -EINVAL);
  assert_near(r, 7.0, 0.0);
  cfg.penalty_timeout = -2.0; /* penalties come from the configuration */
  assert_int_equal(htam_reward(&cfg, HTAM_FAIL_TIMEOUT, 0, 0, &r), 0);
  assert_near(r, -2.0, 0.0);
}

/* Locals for the UCB test, family "norm", direction "memory_access":
 *   0 x0    data_reuse      n=0                  (other direction)
 *   1 vec4  memory_access   n=3 sum 0.6  [norm, softmax]
 *   2 ldg   memory_access   n=1 sum 0.05 [pointwise]     (other family)
 *   3 grid  memory_access   n=2 sum 0.1  []              (any family)
 *   4 pad   memory_access   n=0          [norm]          (untried; blocked by a rule)
 *   5 coal  memory_access   n=4 sum 1.0  [norm]
 * Eligible with pad blocked: 1, 3, 5; N = 9, ln 10 = 2.302585092994.
 *   vec4: 0.2  + 0.3*sqrt(2.302585/4) = 0.427614069408
 *   grid: 0.05 + 0.3*sqrt(2.302585/3) = 0.312826088488
 *   coal: 0.25 + 0.3*sqrt(2.302585/5) = 0.453584212732  => coal (5)
 * With coal blocked too: N = 5, ln 6 = 1.791759469228:
 *   vec4: 0.2 + 0.3*sqrt(1.791759/4) = 0.400784929857; grid: 0.281846466604 => vec4 (1) */
static const char *const fam_norm_softmax[] = {"norm", "softmax"};
static const char *const fam_pointwise[] = {"pointwise"};
static const char *const fam_norm[] = {"norm"};
static const struct htam_local locals[6] = {
  {"x0", "data_reuse", 0, 0.0, NULL, 0},
  {"vec4", "memory_access", 3, 0.6, fam_norm_softmax, 2},
  {"ldg", "memory_access", 1, 0.05, fam_pointwise, 1},
  {"grid", "memory_access", 2, 0.1, NULL, 0},
  {"pad", "memory_access", 0, 0.0, fam_norm, 1},
  {"coal", "memory_access", 4, 1.0, fam_norm, 1},
};

/* Blocks every local whose id is listed in the NULL-terminated user array. */
static bool block_listed(const struct htam_local *l, void *user) {
  for (const char *const *p = user; *p; p++)
    if (strcmp(*p, l->id) == 0)
      return true;
  return false;
}

static void test_local_ucb_choice(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  size_t pick = 99;
  const char *blocked_pad[] = {"pad", NULL};
  const char *blocked_two[] = {"pad", "coal", NULL};
  const char *blocked_all[] = {"pad", "coal", "vec4", "grid", NULL};
  /* Untried and eligible comes first. */
  assert_int_equal(htam_choose_local(&cfg, locals, 6, "memory_access", "norm", NULL, NULL,
                                     &pick), 0);
  assert_int_equal(pick, 4);
  assert_int_equal(htam_choose_local(&cfg, locals, 6, "memory_access", "norm", block_listed,
                                     blocked_pad, &pick), 0);
  assert_int_equal(pick, 5);
  assert_int_equal(htam_choose_local(&cfg, locals, 6, "memory_access", "norm", block_listed,
                                     blocked_two, &pick), 0);
  assert_int_equal(pick, 1);
  pick = 99;
  assert_int_equal(htam_choose_local(&cfg, locals, 6, "memory_access", "norm", block_listed,
                                     blocked_all, &pick), -ENOENT);
  assert_int_equal(pick, 99);
  /* Pointwise: ldg (n=1, mean 0.05) against grid (n=2, mean 0.05), N = 3, ln 4:
   * ldg 0.05 + 0.3*sqrt(1.386294/2) = 0.299766; grid 0.05 + 0.3*sqrt(1.386294/3) = 0.253933. */
  assert_int_equal(htam_choose_local(&cfg, locals, 6, "memory_access", "pointwise",
                                     block_listed, blocked_pad, &pick), 0);
  assert_int_equal(pick, 2);
  /* The other direction's only local is untried. */
  assert_int_equal(htam_choose_local(&cfg, locals, 6, "data_reuse", "gemm", NULL, NULL,
                                     &pick), 0);
  assert_int_equal(pick, 0);
  assert_true(htam_local_applies(&locals[3], "memory_access", "gemm"));
  assert_false(htam_local_applies(&locals[1], "memory_access", "gemm"));
  assert_true(htam_local_applies(&locals[1], "memory_access", NULL));
}

static void test_choose_argmax_and_sampling(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct htam_score s[3];
  assert_int_equal(htam_score(&cfg, graph, 3, edges, 4, prefix_ba, 2, &full_state, s), 0);
  size_t pick = 99;
  cfg.deterministic = true;
  assert_int_equal(htam_choose(&cfg, s, 3, NULL, &pick), 0);
  assert_int_equal(pick, 2);
  /* Sampling at tau = 1 flattens pi; two generators with one seed agree draw by draw,
   * and the frequencies over 20000 draws follow pi. */
  cfg.deterministic = false;
  cfg.tau = 1.0;
  assert_int_equal(htam_score(&cfg, graph, 3, edges, 4, prefix_ba, 2, &full_state, s), 0);
  struct rng r1, r2, r3;
  rng_seed(&r1, 42);
  rng_seed(&r2, 42);
  rng_seed(&r3, 43);
  size_t counts[3] = {0, 0, 0}, differ = 0;
  for (int i = 0; i < 20000; i++) {
    size_t a, b, c;
    assert_int_equal(htam_choose(&cfg, s, 3, &r1, &a), 0);
    assert_int_equal(htam_choose(&cfg, s, 3, &r2, &b), 0);
    assert_int_equal(htam_choose(&cfg, s, 3, &r3, &c), 0);
    assert_int_equal(a, b);
    differ += a != c;
    counts[a]++;
  }
  assert_true(differ > 1000);
  for (size_t b = 0; b < 3; b++)
    assert_near((double)counts[b] / 20000.0, s[b].pi, 0.015);
  assert_int_equal(htam_choose(&cfg, s, 3, NULL, &pick), -EINVAL);
}

/* xoshiro256** from state {1, 2, 3, 4} gives 11520, 0, 1509978240, 1215971899390074240
 * (first output: rotl(2*5, 7)*9 = 1280*9); splitmix64 from 0 gives 0xe220a8397b1dcdaf,
 * 0x6e789e6aa1b965f4, 0x06c45d188009454f, 0xf88bb8a8724c81ec (the reference values). */
static void test_rng_reference_values(void **state) {
  (void)state;
  struct rng r = {{1, 2, 3, 4}};
  assert_int_equal(rng_next(&r), 11520u);
  assert_int_equal(rng_next(&r), 0u);
  assert_int_equal(rng_next(&r), 1509978240u);
  assert_true(rng_next(&r) == 1215971899390074240ull);
  rng_seed(&r, 0);
  assert_true(r.s[0] == 0xe220a8397b1dcdafull);
  assert_true(r.s[1] == 0x6e789e6aa1b965f4ull);
  assert_true(r.s[2] == 0x06c45d188009454full);
  assert_true(r.s[3] == 0xf88bb8a8724c81ecull);
  /* Streams of one seed differ; one stream is reproducible. */
  struct rng a, b, c;
  rng_seed_stream(&a, 42, 7);
  rng_seed_stream(&b, 42, 7);
  rng_seed_stream(&c, 42, 8);
  uint64_t x = rng_next(&a);
  assert_true(x == rng_next(&b));
  assert_true(x != rng_next(&c));
  for (int i = 0; i < 1000; i++) {
    double u = rng_uniform(&a);
    assert_true(u >= 0.0 && u < 1.0);
  }
}

static void test_rng_categorical(void **state) {
  (void)state;
  struct rng r;
  rng_seed(&r, 5);
  size_t idx = 77;
  const double zero_first[] = {0.0, 1.0, 0.0};
  for (int i = 0; i < 100; i++) {
    assert_int_equal(rng_categorical(&r, zero_first, 3, &idx), 0);
    assert_int_equal(idx, 1);
  }
  const double unnormalized[] = {3.0, 1.0};
  size_t count0 = 0;
  for (int i = 0; i < 20000; i++) {
    assert_int_equal(rng_categorical(&r, unnormalized, 2, &idx), 0);
    count0 += idx == 0;
  }
  assert_near((double)count0 / 20000.0, 0.75, 0.015);
  const double negative[] = {1.0, -0.5};
  const double zeros[] = {0.0, 0.0};
  idx = 77;
  assert_int_equal(rng_categorical(&r, negative, 2, &idx), -EINVAL);
  assert_int_equal(rng_categorical(&r, zeros, 2, &idx), -EINVAL);
  assert_int_equal(rng_categorical(&r, zeros, 0, &idx), -EINVAL);
  assert_int_equal(idx, 77);
}

static void test_config_defaults(void **state) {
  (void)state;
  struct search_config c;
  search_config_defaults(&c);
  assert_near(c.penalty_compile, -0.5, 0.0);
  assert_near(c.penalty_incorrect, -0.3, 0.0);
  assert_near(c.penalty_timeout, -0.7, 0.0);
  assert_near(c.k0, 2.0, 0.0);
  assert_near(c.k_edge, 2.0, 0.0);
  assert_int_equal(c.prefix_len, 3);
  assert_true(c.prefix_collapse_repeats);
  assert_near(c.lambda, 0.7, 0.0);
  assert_near(c.beta, 0.2, 0.0);
  assert_near(c.c, 0.0, 0.0);
  assert_near(c.tau, 0.1, 0.0);
  assert_near(c.ema_alpha, 0.3, 0.0);
  assert_false(c.deterministic);
  assert_near(c.local_c, 0.3, 0.0);
  assert_true(c.local_memory);
  assert_int_equal(c.retrieval, SEARCH_RETRIEVAL_HIERARCHICAL);
  assert_true(c.skills);
  assert_near(c.tree_c, 0.3, 0.0);
  assert_near(c.expand_ratio, 1.0, 0.0);
  assert_near(c.reward_alpha, 0.0, 0.0);
  assert_near(c.large_step_prob, 0.2, 0.0);
  assert_int_equal(c.small_children_before_large, 2);
  assert_int_equal(c.pool_size, 5);
  assert_int_equal(c.recent_window, 5);
  assert_near(c.tree_reward_incorrect, 0.05, 0.0);
  assert_near(c.tree_reward_base, 0.4, 0.0);
  assert_near(c.tree_reward_span, 1.2, 0.0);
  assert_near(c.speedup_min, 0.1, 0.0);
  assert_near(c.speedup_max, 10.0, 0.0);
}

/* Applies text over defaults; returns the status and leaves the message in err. */
static int apply_text(struct search_config *c, const char *text, char *err, size_t errlen) {
  json_t *obj = json_loads(text, 0, NULL);
  assert_non_null(obj);
  err[0] = '\0';
  int rc = search_config_apply_json(c, obj, err, errlen);
  json_decref(obj);
  return rc;
}

static void test_config_overrides(void **state) {
  (void)state;
  struct search_config c, before;
  char err[256];
  search_config_defaults(&c);
  assert_int_equal(apply_text(&c, "{\"tau\": 0.5, \"prefix_len\": 2, \"deterministic\": true,"
                                  " \"penalty_compile\": -1}", err, sizeof err), 0);
  assert_near(c.tau, 0.5, 0.0);
  assert_int_equal(c.prefix_len, 2);
  assert_true(c.deterministic);
  assert_near(c.penalty_compile, -1.0, 0.0);
  assert_near(c.lambda, 0.7, 0.0); /* untouched keys keep their value */
  static const struct {
    const char *text, *want;
  } bad[] = {
    {"{\"tau\": 0.5, \"temperature\": 1}", "temperature: unknown"},
    {"{\"tau\": 0}", "tau: must be in (0"},
    {"{\"prefix_len\": 2.5}", "prefix_len: must be an integer"},
    {"{\"prefix_len\": 9}", "prefix_len: must be in [0, 8]"},
    {"{\"deterministic\": 1}", "deterministic: must be a boolean"},
    {"{\"beta\": \"high\"}", "beta: must be a number"},
    {"{\"large_step_prob\": 1.5}", "large_step_prob: must be in [0, 1]"},
    {"{\"speedup_min\": 20}", "speedup_min: must be in (0, 1]"},
    {"{\"speedup_max\": 1}", "speedup_max: must be in (1, 1e+06]"},
    {"{\"retrieval\": \"tree\"}", "retrieval: must be one of: hierarchical, flat"},
    {"{\"local_memory\": \"no\"}", "local_memory: must be a boolean"},
    {"{\"reward_alpha\": 1.5}", "reward_alpha: must be in [0, 1]"},
    {"{\"expand_ratio\": -1}", "expand_ratio: must be in [0, 100]"},
    {"[1]", "must be a JSON object"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    before = c;
    assert_int_equal(apply_text(&c, bad[i].text, err, sizeof err), -1);
    if (!strstr(err, bad[i].want))
      fail_msg("%s: message '%s' lacks '%s'", bad[i].text, err, bad[i].want);
    assert_memory_equal(&c, &before, sizeof c); /* a refused override changes nothing */
  }
  /* The structured error names the key and says whether it is unknown. */
  struct search_config_error why;
  json_t *obj = json_loads("{\"retrieval\": \"flat\", \"skills\": false, \"bogus\": 1}", 0,
                           NULL);
  before = c;
  assert_int_equal(search_config_apply(&c, obj, &why), -1);
  assert_true(why.unknown);
  assert_string_equal(why.key, "bogus");
  assert_memory_equal(&c, &before, sizeof c);
  json_object_del(obj, "bogus");
  json_object_set_new(obj, "tau", json_real(-1));
  assert_int_equal(search_config_apply(&c, obj, &why), -1);
  assert_false(why.unknown);
  assert_string_equal(why.key, "tau");
  json_object_del(obj, "tau");
  assert_int_equal(search_config_apply(&c, obj, &why), 0);
  assert_int_equal(c.retrieval, SEARCH_RETRIEVAL_FLAT);
  assert_false(c.skills);
  assert_string_equal(search_retrieval_name(c.retrieval), "flat");
  json_decref(obj);
  /* to_json and back is the identity. */
  json_t *j = search_config_to_json(&c);
  assert_non_null(j);
  struct search_config d;
  search_config_defaults(&d);
  assert_int_equal(search_config_apply_json(&d, j, err, sizeof err), 0);
  assert_memory_equal(&c, &d, sizeof c);
  json_decref(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_scores_by_hand),
    cmocka_unit_test(test_scores_default_no_bonus),
    cmocka_unit_test(test_empty_prefix_and_state),
    cmocka_unit_test(test_prefix_truncated_to_k),
    cmocka_unit_test(test_trigger_facets),
    cmocka_unit_test(test_score_rejects_bad_input),
    cmocka_unit_test(test_update_deltas),
    cmocka_unit_test(test_update_merges_repeats),
    cmocka_unit_test(test_reward_penalties),
    cmocka_unit_test(test_local_ucb_choice),
    cmocka_unit_test(test_choose_argmax_and_sampling),
    cmocka_unit_test(test_rng_reference_values),
    cmocka_unit_test(test_rng_categorical),
    cmocka_unit_test(test_config_defaults),
    cmocka_unit_test(test_config_overrides),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
