/* Unit tests of the AdaExplore tree (engine/tree.c): AdaExplore's descent replayed on a
 * scripted run and checked step by step against a hand computation, step kinds, backpropagation, the representative pool,
 * the recent-work window, the HTAM prefix, and JSON rows. */
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
#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"
#include "engine/search_config.h"
#include "engine/tree.h"

/* cmocka 1.1 compares only floats: doubles are checked here to the given tolerance. */
#define assert_near(a, b, tol) near_or_fail((a), (b), (tol), #a, __FILE__, __LINE__)
static void near_or_fail(double a, double b, double tol, const char *what, const char *file,
                         int line) {
  if (!(fabs(a - b) <= tol))
    fail_msg("%s:%d: %s = %.17g, expected %.17g (tolerance %g)", file, line, what, a, b, tol);
}

#define TOL 1e-9
#define R0 0.50909090909090909 /* root: correct at speed-up 1: 0.4 + 1.2*0.9/9.9 */

/* The scripted tree: ten recorded steps, each under a fixed parent (the nodes expanded
 * by the rule opforge had before issue 11, kept so that the pool, window and prefix
 * tests below keep their hand-computed trees). Speed-ups 0.1 + 0.99k give rewards
 * 0.4 + 0.12k. The descent itself is pinned by the tests after test_backprop_exact. */
struct script_step {
  size_t parent;         /* node the step expands */
  enum tree_step step;
  const char *direction;
  enum tree_result result;
  double speedup;
};

static const struct script_step script[] = {
  {0, TREE_STEP_LARGE, "memory_access", TREE_NOT_COMPILED, 0.0},
  {0, TREE_STEP_LARGE, "parallel_mapping", TREE_CORRECT, 2.08},
  {2, TREE_STEP_SMALL, "parallel_mapping", TREE_CORRECT, 1.09},
  {3, TREE_STEP_SMALL, "parallel_mapping", TREE_INCORRECT, 0.0},
  {2, TREE_STEP_SMALL, "parallel_mapping", TREE_CORRECT, 4.06},
  {5, TREE_STEP_LARGE, "fusion", TREE_NOT_COMPILED, 0.0},
  {0, TREE_STEP_LARGE, "reduction_strategy", TREE_CORRECT, 0.1},
  {7, TREE_STEP_SMALL, "reduction_strategy", TREE_CORRECT, 3.07},
  {8, TREE_STEP_LARGE, "memory_access", TREE_CORRECT, 10.0},
  {9, TREE_STEP_SMALL, "memory_access", TREE_INCORRECT, 0.0},
};
#define N_SCRIPT (sizeof script / sizeof script[0])

/* Builds the scripted tree on a new tree; the caller frees it. */
static struct tree *run_script(const struct search_config *cfg) {
  struct tree *t = tree_new();
  assert_non_null(t);
  assert_int_equal(tree_add_root(t, cfg), 0);
  for (size_t k = 0; k < N_SCRIPT; k++) {
    char candidate[16];
    snprintf(candidate, sizeof candidate, "cand-%zu", k + 1);
    size_t id;
    assert_int_equal(tree_add_child(t, script[k].parent, script[k].step, script[k].direction,
                                    "strat", candidate, &id), 0);
    assert_int_equal(id, k + 1);
    assert_int_equal(tree_record(t, cfg, id, script[k].result, script[k].speedup, NULL), 0);
  }
  return t;
}

/* The descent from the scripted tree's root, by AdaExplore's rule (tree_c = 0.3,
 * expand_ratio 1, reward_alpha 0: V is the mean):
 *   root N=11, children 1 (n1 V0), 2 (n5 V.418), 7 (n4 V.7025):
 *     UCB(7) = .7025 + .3*sqrt(ln 11/4) = .934777; expand = .7025 + .3*sqrt(ln 11)/3
 *     = .857351 < .934777 -> 7;
 *   at 7 N=4, child 8 (n3 V.803333): UCB = .803333 + .3*sqrt(ln 4/3) = 1.007267;
 *     expand = .803333 + .3*sqrt(ln 4)/1 = 1.156556 > -> expand 7, depth 1. */
static void test_scripted_descent(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  struct tree_descent d;
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, 7);
  assert_int_equal(d.depth, 1);
  assert_int_equal(d.best_child, 8);
  assert_near(d.expand_score, 1.156556340088, 1e-11);
  assert_near(d.best_child_score, 1.007266731367, 1e-11);
  tree_free(t);
}

/* After the script: visits, sum and max by hand. Own rewards: R0, 0, .64, .52, .05, .88,
 * 0, .4, .76, 1.6, .05. Subtrees: 2 = {2,3,4,5,6}: .64+.52+.05+.88+0 = 2.09, max .88;
 * 3 = {3,4}: .57; 5 = {5,6}: .88; 7 = {7,8,9,10}: .4+.76+1.6+.05 = 2.81, max 1.6;
 * 8 = {8,9,10}: 2.41; 9 = {9,10}: 1.65; root: R0 + 0 + 2.09 + 2.81 = R0 + 4.9. */
static void test_backprop_exact(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  static const struct {
    int64_t visits;
    double sum, max;
  } want[11] = {
    {11, R0 + 4.9, 1.6}, {1, 0.0, 0.0},   {5, 2.09, 0.88}, {2, 0.57, 0.52},
    {1, 0.05, 0.05},     {2, 0.88, 0.88}, {1, 0.0, 0.0},   {4, 2.81, 1.6},
    {3, 2.41, 1.6},      {2, 1.65, 1.6},  {1, 0.05, 0.05},
  };
  assert_int_equal(t->n, 11);
  for (size_t i = 0; i < 11; i++) {
    if (t->nodes[i].visits != want[i].visits)
      fail_msg("node %zu: visits %lld, expected %lld", i, (long long)t->nodes[i].visits,
               (long long)want[i].visits);
    assert_near(t->nodes[i].reward_sum, want[i].sum, 1e-12);
    assert_near(t->nodes[i].reward_max, want[i].max, 1e-12);
  }
  assert_int_equal(t->nodes[2].n_children, 2);
  assert_int_equal(t->nodes[2].n_small_children, 2);
  assert_int_equal(t->nodes[0].n_small_children, 0);
  /* A bare backprop adds to the node and each ancestor, and only to them. */
  assert_int_equal(tree_backprop(t, 4, 2.0), 0);
  assert_int_equal(t->nodes[4].visits, 2);
  assert_near(t->nodes[4].reward_max, 2.0, 0.0);
  assert_near(t->nodes[3].reward_sum, 2.57, 1e-12);
  assert_near(t->nodes[2].reward_max, 2.0, 0.0);
  assert_near(t->nodes[0].reward_sum, R0 + 6.9, 1e-12);
  assert_int_equal(t->nodes[5].visits, 2);
  assert_near(t->nodes[5].reward_sum, 0.88, 1e-12);
  assert_int_equal(tree_backprop(t, 11, 1.0), -EINVAL);
  /* A recorded node cannot be recorded twice. */
  assert_int_equal(tree_record(t, &cfg, 4, TREE_CORRECT, 2.0, NULL), -EINVAL);
  tree_free(t);
}

/* ---- the descent of AdaExplore (agent/mcts.py) on the ten outcomes of the script ----
 *
 * The outcomes of steps 1..10, in order, with their rewards r: not compiled (0), 2.08x
 * (.64), 1.09x (.52), incorrect (.05), 4.06x (.88), not compiled (0), 0.1x (.4), 3.07x
 * (.76), 10x (1.6), incorrect (.05). Each step records its outcome under the node the
 * descent stops at. The public configs use exploration_weight 0.3, reward_alpha 0 (V is
 * the mean) and, below whole models, expand_exploration_ratio 1 (w_e = 0.3).
 *
 * Reference as root (opforge: the root is the reference, correct at 1x: R0 = 0.509091,
 * visits 1). UCB(ch) = V(ch) + .3 sqrt(ln N/n), expand = max V(ch) + .3 sqrt(ln N)/|C|,
 * a leaf expands, a real child wins ties:
 *  1. root is a leaf                                                       -> expand 0
 *  2. root N=2, C={1 (n1 V0)}: UCB(1) = .3 sqrt(ln 2) = .249766; expand = 0 + .249766:
 *     a tie, so the child: 1 is a leaf                                     -> expand 1
 *  3. root N=3, C={1 (n2 V.32)}: UCB(1) = .32 + .3 sqrt(ln 3/2) = .542346; expand =
 *     .32 + .3 sqrt(ln 3) = .634444 >                                      -> expand 0
 *  4. root N=4, C={1 (n2 .32), 3 (n1 .52)}: UCB(1) = .569766, UCB(3) = .52 + .353223
 *     = .873223; expand = .52 + .3 sqrt(ln 4)/2 = .696612 < -> 3, a leaf  -> expand 3
 *  5. root N=5, C={1 (n2 .32), 3 (n2 .285)}: UCB(1) = .32 + .269118 = .589118 (3:
 *     .554118); expand = .32 + .3 sqrt(ln 5)/2 = .510295 < -> 1; at 1 N=2, C={2 (n1
 *     .64)}: UCB(2) = .64 + .249766 = .889766 = expand: a tie -> 2, a leaf -> expand 2
 *  6. root N=6: UCB(1) (n3 V.506667) = .506667 + .3 sqrt(ln 6/3) = .738513 (3: .568954);
 *     expand = .506667 + .3 sqrt(ln 6)/2 = .707451 < -> 1; at 1 N=3, C={2 (n2 .76)}:
 *     UCB(2) = .76 + .3 sqrt(ln 3/2) = .982346; expand = .76 + .314444 = 1.074444 >
 *                                                                          -> expand 1
 *  7. root N=7: UCB(1) (n4 V.38) = .38 + .3 sqrt(ln 7/4) = .589244; expand = .38 +
 *     .3 sqrt(ln 7/2^2) = .589244: a tie -> 1; at 1 N=4, C={2 (n2 .76), 6 (n1 0)}:
 *     UCB(2) = .76 + .249766 = 1.009766; expand = .76 + .3 sqrt(ln 4)/2 = .936612 < -> 2;
 *     at 2 N=2, C={5 (n1 .88)}: UCB(5) = .88 + .249766 = expand: a tie -> 5, a leaf
 *                                                                          -> expand 5
 *  8. root N=8: UCB(1) (n5 V.384) = .384 + .3 sqrt(ln 8/5) = .577468, UCB(3) (n2 .285)
 *     = .285 + .3 sqrt(ln 8/2) = .590900; expand = .384 + .3 sqrt(ln 8)/2 = .600304 >
 *                                                                          -> expand 0
 *  9. root N=9, C={1, 3, 8 (n1 .76)}: UCB(8) = .76 + .3 sqrt(ln 9) = 1.204691; expand
 *     = .76 + .3 sqrt(ln 9)/3 = .908230 < -> 8, a leaf                     -> expand 8
 * 10. root N=10: UCB(8) (n2 1.18) = 1.18 + .3 sqrt(ln 10/2) = 1.501895; expand = 1.18 +
 *     .3 sqrt(ln 10)/3 = 1.331743 < -> 8; at 8 N=2, C={9 (n1 1.6)}: UCB(9) = 1.6 +
 *     .249766 = expand: a tie -> 9, a leaf                                 -> expand 9
 * So [0,1,0,3,2,1,5,0,8,9], the same as from the public code's empty root; the rule
 * opforge had (expand = the node's own mean + c sqrt(ln N/(1+|C|)), ties to expand)
 * gave [0,0,2,3,2,5,0,7,8,9], parting at step 2. */
static const struct {
  enum tree_result result;
  double speedup;
} outcomes[10] = {
  {TREE_NOT_COMPILED, 0.0}, {TREE_CORRECT, 2.08}, {TREE_CORRECT, 1.09},
  {TREE_INCORRECT, 0.0},    {TREE_CORRECT, 4.06}, {TREE_NOT_COMPILED, 0.0},
  {TREE_CORRECT, 0.1},      {TREE_CORRECT, 3.07}, {TREE_CORRECT, 10.0},
  {TREE_INCORRECT, 0.0},
};

/* Where a replayed descent stopped at each step. */
struct stop {
  size_t node, depth;
  double expand, child; /* expand_score (+inf at a leaf) and best_child_score */
};

/* Replays the ten outcomes under cfg, each recorded under the node the descent stops at,
 * from the reference root or (empty_root) a root with no visits, like the public code's
 * dummy root; checks each stop against want (NULL: only the nodes in order). */
static void replay(const struct search_config *cfg, bool empty_root, const int *order,
                   const struct stop *want) {
  struct tree *t = tree_new();
  assert_int_equal(tree_add_root(t, cfg), 0);
  if (empty_root) {
    t->nodes[0].visits = 0;
    t->nodes[0].reward_sum = t->nodes[0].reward_max = 0.0;
  }
  for (size_t k = 0; k < 10; k++) {
    struct tree_descent d;
    assert_int_equal(tree_descend(t, cfg, &d), 0);
    if (d.node != (size_t)order[k])
      fail_msg("step %zu: expanded node %zu, expected %d", k + 1, d.node, order[k]);
    if (want) {
      assert_int_equal(d.depth, want[k].depth);
      if (isinf(want[k].expand)) {
        assert_true(isinf(d.expand_score) && d.expand_score > 0);
        assert_int_equal(d.best_child, TREE_NONE);
      } else {
        assert_near(d.expand_score, want[k].expand, 1e-12);
      }
      assert_near(d.best_child_score, want[k].child, 1e-12);
    }
    size_t id;
    assert_int_equal(tree_add_child(t, d.node, d.node ? TREE_STEP_SMALL : TREE_STEP_LARGE, "d",
                                    NULL, NULL, &id), 0);
    assert_int_equal(tree_record(t, cfg, id, outcomes[k].result, outcomes[k].speedup, NULL), 0);
  }
  tree_free(t);
}

static void test_public_descent_reference_root(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  static const int order[10] = {0, 1, 0, 3, 2, 1, 5, 0, 8, 9};
  static const struct stop want[10] = {
    {0, 0, INFINITY, 0.0},
    {1, 1, INFINITY, 0.0},
    {0, 0, 0.6344441221904615, 0.5423455711051267},
    {3, 1, INFINITY, 0.0},
    {2, 2, INFINITY, 0.0},
    {1, 1, 1.0744441221904615, 0.9823455711051267},
    {5, 3, INFINITY, 0.0},
    {0, 0, 0.6003040329901325, 0.5909000970506426},
    {8, 1, INFINITY, 0.0},
    {9, 2, INFINITY, 0.0},
  };
  replay(&cfg, false, order, want);
}

/* The public code's empty root (no visits): the same order. Step 2 there is root N=1,
 * ln 1 = 0: UCB(1) = 0 = expand, a tie, so the child. Step 3: root N=2, C={1 (n2 .32)}:
 * UCB(1) = .32 + .3 sqrt(ln 2/2) = .496612; expand = .32 + .249766 = .569766 > -> 0. */
static void test_public_descent_empty_root(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  static const int order[10] = {0, 1, 0, 3, 2, 1, 5, 0, 8, 9};
  static const struct stop want[10] = {
    {0, 0, INFINITY, 0.0},
    {1, 1, INFINITY, 0.0},
    {0, 0, 0.5697663833473093, 0.4966115033773212},
    {3, 1, INFINITY, 0.0},
    {2, 2, INFINITY, 0.0},
    {1, 1, 1.0744441221904615, 0.9823455711051267},
    {5, 3, INFINITY, 0.0},
    {0, 0, 0.5932438251269188, 0.5809154553373127},
    {8, 1, INFINITY, 0.0},
    {9, 2, INFINITY, 0.0},
  };
  replay(&cfg, true, order, want);
}

/* The settings move the descent (orders from the same rule, public code replayed):
 * expand_ratio 0.5 (the paper's level 3): w_e = .15 widens less -> [0,1,2,3,4,0,5,1,8,9];
 * reward_alpha 1 (V is the max) -> [0,1,0,2,3,5,3,6,0,9]; expand_ratio 0 or tree_c 0:
 * expand is -inf wherever a child exists, so the descent only deepens -> a chain. */
static void test_descent_settings(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  cfg.expand_ratio = 0.5;
  replay(&cfg, false, (const int[]){0, 1, 2, 3, 4, 0, 5, 1, 8, 9}, NULL);
  replay(&cfg, true, (const int[]){0, 1, 2, 3, 4, 0, 5, 1, 8, 9}, NULL);
  search_config_defaults(&cfg);
  cfg.reward_alpha = 1.0;
  replay(&cfg, false, (const int[]){0, 1, 0, 2, 3, 5, 3, 6, 0, 9}, NULL);
  search_config_defaults(&cfg);
  cfg.expand_ratio = 0.0;
  replay(&cfg, false, (const int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, NULL);
  search_config_defaults(&cfg);
  cfg.tree_c = 0.0;
  replay(&cfg, false, (const int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, NULL);
}

static void test_reward_values(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  assert_near(tree_reward(&cfg, TREE_NOT_COMPILED, 5.0), 0.0, 0.0);
  assert_near(tree_reward(&cfg, TREE_INCORRECT, 5.0), 0.05, 0.0);
  assert_near(tree_reward(&cfg, TREE_CORRECT, 1.0), R0, 1e-15);
  assert_near(tree_reward(&cfg, TREE_CORRECT, 5.05), 1.0, 1e-12); /* 0.4 + 1.2*4.95/9.9 */
  assert_near(tree_reward(&cfg, TREE_CORRECT, 0.01), 0.4, 1e-15);  /* clipped to 0.1 */
  assert_near(tree_reward(&cfg, TREE_CORRECT, 25.0), 1.6, 1e-15);  /* clipped to 10 */
  assert_near(tree_reward(&cfg, TREE_CORRECT, NAN), 0.4, 1e-15);
  assert_int_equal(tree_result_of(EVAL_CORRECT), TREE_CORRECT);
  assert_int_equal(tree_result_of(EVAL_COMPILE), TREE_NOT_COMPILED);
  assert_int_equal(tree_result_of(EVAL_PARSE), TREE_NOT_COMPILED);
  assert_int_equal(tree_result_of(EVAL_LOAD), TREE_NOT_COMPILED);
  assert_int_equal(tree_result_of(EVAL_LAUNCH), TREE_INCORRECT);
  assert_int_equal(tree_result_of(EVAL_TIMEOUT), TREE_INCORRECT);
  assert_int_equal(tree_result_of(EVAL_CHECK), TREE_INCORRECT);
}

/* Ties and pending children. With tree_c = 0, w_e = 0: expand is -inf at a node with a
 * child, so the descent goes down to the best child (V alone, the first created on ties)
 * and stops at a leaf (+inf). Pending children are skipped. */
static void test_ties_and_pending(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  cfg.tree_c = 0.0;
  struct tree *t = tree_new();
  assert_int_equal(tree_add_root(t, &cfg), 0);
  assert_int_equal(tree_add_root(t, &cfg), -EEXIST);
  size_t a, b, p;
  struct tree_descent d;
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, 0);
  assert_true(isinf(d.expand_score) && d.expand_score > 0);
  assert_int_equal(tree_add_child(t, 0, TREE_STEP_LARGE, "x", NULL, NULL, &a), 0);
  assert_int_equal(tree_record(t, &cfg, a, TREE_CORRECT, 1.0, NULL), 0); /* reward R0 */
  assert_int_equal(tree_add_child(t, 0, TREE_STEP_LARGE, "y", NULL, NULL, &b), 0);
  assert_int_equal(tree_record(t, &cfg, b, TREE_CORRECT, 1.0, NULL), 0); /* R0 too */
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, a); /* a tie between a and b: the first created, a leaf */
  assert_int_equal(d.depth, 1);
  assert_int_equal(tree_add_child(t, a, TREE_STEP_SMALL, "x", NULL, NULL, &p), 0);
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, a); /* p is pending: a is still a leaf */
  assert_int_equal(d.best_child, TREE_NONE);
  /* With exploration, a real child still wins an exact tie with expand: one child of one
   * visit gives UCB = V + c sqrt(ln N) = expand. */
  search_config_defaults(&cfg);
  struct tree *u = tree_new();
  assert_int_equal(tree_add_root(u, &cfg), 0);
  assert_int_equal(tree_add_child(u, 0, TREE_STEP_LARGE, "x", NULL, NULL, &a), 0);
  assert_int_equal(tree_record(u, &cfg, a, TREE_CORRECT, 2.08, NULL), 0);
  assert_int_equal(tree_descend(u, &cfg, &d), 0);
  assert_int_equal(d.node, a); /* root N = 2: UCB(a) = .64 + .3 sqrt(ln 2) = expand */
  assert_int_equal(d.depth, 1);
  tree_free(u);
  char long_id[TREE_ID_MAX + 1];
  memset(long_id, 'a', TREE_ID_MAX);
  long_id[TREE_ID_MAX] = '\0';
  size_t before = t->n;
  assert_int_equal(tree_add_child(t, 0, TREE_STEP_SMALL, long_id, NULL, NULL, &p), -EINVAL);
  assert_int_equal(tree_add_child(t, 0, TREE_STEP_ROOT, "x", NULL, NULL, &p), -EINVAL);
  assert_int_equal(tree_add_child(t, 99, TREE_STEP_SMALL, "x", NULL, NULL, &p), -EINVAL);
  assert_int_equal(t->n, before);
  tree_free(t);
  tree_free(NULL);
}

/* Forced large steps consume no draw; the free choice is one draw against 0.2. Seed 2024
 * gives the uniforms 0.0558 0.7821 0.0721 0.1597 0.7737 0.2449 0.3943 0.2570 0.5568
 * 0.0507 0.7203 0.9317 (computed with the reference xoshiro256** and splitmix64, not with
 * engine/rng.c), so the kinds are L S L L S S S S S L S S. */
static void test_step_kinds(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  struct rng r, saved;
  rng_seed(&r, 2024);
  saved = r;
  enum tree_step step;
  bool forced = false;
  assert_int_equal(tree_step_kind(t, &cfg, 0, &r, &step, &forced), 0);
  assert_int_equal(step, TREE_STEP_LARGE);
  assert_true(forced);
  assert_int_equal(tree_step_kind(t, &cfg, 2, &r, &step, &forced), 0); /* 2 small kids */
  assert_int_equal(step, TREE_STEP_LARGE);
  assert_true(forced);
  assert_memory_equal(&r, &saved, sizeof r);
  const char *want = "LSLLSSSSSLSS";
  for (size_t i = 0; want[i]; i++) {
    assert_int_equal(tree_step_kind(t, &cfg, 1, &r, &step, &forced), 0);
    assert_false(forced);
    if ((step == TREE_STEP_LARGE) != (want[i] == 'L'))
      fail_msg("draw %zu: got %s, expected %c", i, step == TREE_STEP_LARGE ? "L" : "S",
               want[i]);
  }
  /* Node 3 has one small child: not forced at 2, forced at 1. */
  assert_int_equal(tree_step_kind(t, &cfg, 3, &r, &step, &forced), 0);
  assert_false(forced);
  cfg.small_children_before_large = 1;
  assert_int_equal(tree_step_kind(t, &cfg, 3, &r, &step, &forced), 0);
  assert_true(forced);
  cfg.small_children_before_large = 3;
  cfg.large_step_prob = 0.0;
  for (int i = 0; i < 100; i++) {
    assert_int_equal(tree_step_kind(t, &cfg, 2, &r, &step, NULL), 0);
    assert_int_equal(step, TREE_STEP_SMALL);
  }
  cfg.large_step_prob = 1.0;
  assert_int_equal(tree_step_kind(t, &cfg, 2, &r, &step, NULL), 0);
  assert_int_equal(step, TREE_STEP_LARGE);
  assert_int_equal(tree_step_kind(t, &cfg, 2, NULL, &step, NULL), -EINVAL);
  tree_free(t);
}

/* Asserts that ids[0..n-1] is exactly the -1-terminated list want. */
static void expect_ids(const size_t *ids, size_t n, const int *want, const char *what) {
  size_t k = 0;
  while (want[k] >= 0)
    k++;
  bool same = n == k;
  for (size_t i = 0; same && i < n; i++)
    same = ids[i] == (size_t)want[i];
  if (!same) {
    char got[128] = "";
    for (size_t i = 0; i < n; i++)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%zu ", ids[i]);
    fail_msg("%s: got [ %s]", what, got);
  }
}

/* Regions of the scripted tree (large nodes and their small-step descendants):
 * 1 = {1} (no correct node), 2 = {2 (2.08x), 3 (1.09x), 4 (incorrect), 5 (4.06x)} best 5,
 * 6 = {6} (none), 7 = {7 (0.1x), 8 (3.07x)} best 8, 9 = {9 (10x), 10 (incorrect)} best 9.
 *   pool at 10: path regions 9, 7 -> [9, 8]; then others by speed-up: 5   -> [9, 8, 5]
 *   pool at 6:  path regions 6 (none), 2 -> [5]; then 9 (10x), 8 (3.07x) -> [5, 9, 8]
 *   pool at 0:  no region on the path; by speed-up                      -> [9, 5, 8]
 *   pool_size 2 at 10                                                   -> [9, 8]
 *   pool_size 1 at 6                                                    -> [5] */
static void test_pool(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  size_t ids[SEARCH_MAX_POOL], n = 99;
  assert_int_equal(tree_pool(t, &cfg, 10, ids, &n), 0);
  expect_ids(ids, n, (const int[]){9, 8, 5, -1}, "pool at 10");
  assert_int_equal(tree_pool(t, &cfg, 6, ids, &n), 0);
  expect_ids(ids, n, (const int[]){5, 9, 8, -1}, "pool at 6");
  assert_int_equal(tree_pool(t, &cfg, 0, ids, &n), 0);
  expect_ids(ids, n, (const int[]){9, 5, 8, -1}, "pool at 0");
  cfg.pool_size = 2;
  assert_int_equal(tree_pool(t, &cfg, 10, ids, &n), 0);
  expect_ids(ids, n, (const int[]){9, 8, -1}, "pool of 2 at 10");
  cfg.pool_size = 1;
  assert_int_equal(tree_pool(t, &cfg, 6, ids, &n), 0);
  expect_ids(ids, n, (const int[]){5, -1}, "pool of 1 at 6");
  /* A tie on speed-up keeps the lower id: 11 (4.06x, under 5) does not displace 5. */
  size_t tie;
  assert_int_equal(tree_add_child(t, 5, TREE_STEP_SMALL, "parallel_mapping", NULL, NULL, &tie),
                   0);
  assert_int_equal(tree_record(t, &cfg, tie, TREE_CORRECT, 4.06, NULL), 0);
  assert_int_equal(tree_pool(t, &cfg, tie, ids, &n), 0);
  expect_ids(ids, n, (const int[]){5, -1}, "pool of 1 at 11, tie");
  assert_int_equal(tree_region_root(t, 4), 2);
  assert_int_equal(tree_region_root(t, 10), 9);
  assert_int_equal(tree_region_root(t, 8), 7);
  assert_int_equal(tree_region_root(t, 0), 0);
  assert_int_equal(tree_region_root(t, 11), 2);
  assert_int_equal(tree_region_root(t, 12), TREE_NONE);
  assert_true(tree_node_is_large_root(&t->nodes[6]));
  assert_false(tree_node_is_large_root(&t->nodes[5]));
  assert_false(tree_node_is_large_root(&t->nodes[0]));
  tree_free(t);
}

/* Recent window: node, parent, ... through the nearest large node, never the root.
 *   at 10 -> [10, 9];  at 4 -> [4, 3, 2] (4 failed, still included);  at 6 -> [6];
 *   at 0 -> [];  window 2 at 4 -> [4, 3].
 * A chain root -> 1 (large) -> 2..8 (small): at 8 the window of 5 is [8, 7, 6, 5, 4]. */
static void test_recent_window(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  size_t ids[SEARCH_MAX_POOL], n = 99;
  assert_int_equal(tree_recent(t, &cfg, 10, ids, &n), 0);
  expect_ids(ids, n, (const int[]){10, 9, -1}, "recent at 10");
  assert_int_equal(tree_recent(t, &cfg, 4, ids, &n), 0);
  expect_ids(ids, n, (const int[]){4, 3, 2, -1}, "recent at 4");
  assert_int_equal(tree_recent(t, &cfg, 6, ids, &n), 0);
  expect_ids(ids, n, (const int[]){6, -1}, "recent at 6");
  assert_int_equal(tree_recent(t, &cfg, 0, ids, &n), 0);
  assert_int_equal(n, 0);
  cfg.recent_window = 2;
  assert_int_equal(tree_recent(t, &cfg, 4, ids, &n), 0);
  expect_ids(ids, n, (const int[]){4, 3, -1}, "recent of 2 at 4");
  tree_free(t);

  search_config_defaults(&cfg);
  t = tree_new();
  assert_int_equal(tree_add_root(t, &cfg), 0);
  size_t id = 0;
  for (int i = 1; i <= 8; i++) {
    assert_int_equal(tree_add_child(t, id, i == 1 ? TREE_STEP_LARGE : TREE_STEP_SMALL, "d",
                                    NULL, NULL, &id), 0);
    assert_int_equal(tree_record(t, &cfg, id, i % 3 ? TREE_CORRECT : TREE_NOT_COMPILED,
                                 1.0 + i, NULL), 0);
  }
  assert_int_equal(tree_recent(t, &cfg, 8, ids, &n), 0);
  expect_ids(ids, n, (const int[]){8, 7, 6, 5, 4, -1}, "recent in a chain");
  tree_free(t);
}

/* Prefix at 10: directions 10 ma, 9 ma, 8 rs, 7 rs, root none -> collapsed [ma, rs];
 * uncollapsed [ma, ma, rs]. At 6: 6 fusion, 5 pm, 2 pm -> [fusion, pm]. A node 11 (large,
 * fusion) under 10 -> [fusion, ma, rs]; with K = 2 -> [fusion, ma]. */
static void test_prefix(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  const char *p[SEARCH_MAX_PREFIX];
  size_t n = 99;
  assert_int_equal(tree_prefix(t, &cfg, 10, p, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(p[0], "memory_access");
  assert_string_equal(p[1], "reduction_strategy");
  assert_int_equal(tree_prefix(t, &cfg, 6, p, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(p[0], "fusion");
  assert_string_equal(p[1], "parallel_mapping");
  assert_int_equal(tree_prefix(t, &cfg, 0, p, &n), 0);
  assert_int_equal(n, 0);
  cfg.prefix_collapse_repeats = false;
  assert_int_equal(tree_prefix(t, &cfg, 10, p, &n), 0);
  assert_int_equal(n, 3);
  assert_string_equal(p[0], "memory_access");
  assert_string_equal(p[1], "memory_access");
  assert_string_equal(p[2], "reduction_strategy");
  cfg.prefix_collapse_repeats = true;
  size_t id;
  assert_int_equal(tree_add_child(t, 10, TREE_STEP_LARGE, "fusion", NULL, NULL, &id), 0);
  assert_int_equal(tree_prefix(t, &cfg, id, p, &n), 0);
  assert_int_equal(n, 3);
  assert_string_equal(p[0], "fusion");
  assert_string_equal(p[1], "memory_access");
  assert_string_equal(p[2], "reduction_strategy");
  cfg.prefix_len = 2;
  assert_int_equal(tree_prefix(t, &cfg, id, p, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(p[1], "memory_access");
  tree_free(t);
}

/* Every row written by tree_node_to_json rebuilds an identical tree, which then makes
 * the same decisions. */
static void test_json_round_trip(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  size_t pending;
  assert_int_equal(tree_add_child(t, 4, TREE_STEP_SMALL, "parallel_mapping", "s", "c-p",
                                  &pending), 0);
  json_t *row = tree_node_to_json(t, 2);
  assert_non_null(row);
  assert_int_equal(json_object_size(row), 12);
  json_int_t id, parent, visits;
  const char *step, *direction, *strategy, *candidate, *result;
  double speedup, reward, sum, max;
  assert_int_equal(json_unpack(row, "{s:I, s:I, s:s, s:s, s:s, s:s, s:s, s:F, s:F, s:I, s:F, s:F}",
                               "id", &id, "parent", &parent, "step", &step, "direction",
                               &direction, "strategy", &strategy, "candidate", &candidate,
                               "result", &result, "speedup", &speedup, "reward", &reward,
                               "visits", &visits, "reward_sum", &sum, "reward_max", &max),
                   0);
  assert_true(id == 2 && parent == 0 && visits == 5);
  assert_string_equal(step, "large");
  assert_string_equal(direction, "parallel_mapping");
  assert_string_equal(strategy, "strat");
  assert_string_equal(candidate, "cand-2");
  assert_string_equal(result, "correct");
  assert_near(speedup, 2.08, 0.0);
  assert_near(reward, 0.64, 1e-12);
  assert_near(sum, 2.09, 1e-12);
  assert_near(max, 0.88, 1e-12);
  json_decref(row);
  row = tree_node_to_json(t, 0);
  assert_true(json_is_null(json_object_get(row, "parent")));
  assert_string_equal(json_string_value(json_object_get(row, "step")), "root");
  json_decref(row);
  row = tree_node_to_json(t, pending);
  assert_string_equal(json_string_value(json_object_get(row, "result")), "pending");
  assert_null(tree_node_to_json(t, t->n));
  json_decref(row);
  struct tree *u = tree_new();
  char err[256];
  for (size_t i = 0; i < t->n; i++) {
    row = tree_node_to_json(t, i);
    assert_non_null(row);
    if (tree_append_json(u, row, err, sizeof err) != 0)
      fail_msg("row %zu: %s", i, err);
    json_decref(row);
  }
  assert_int_equal(u->n, t->n);
  for (size_t i = 0; i < t->n; i++) {
    const struct tree_node *a = &t->nodes[i], *b = &u->nodes[i];
    assert_int_equal(a->parent, b->parent);
    assert_int_equal(a->first_child, b->first_child);
    assert_int_equal(a->last_child, b->last_child);
    assert_int_equal(a->next_sibling, b->next_sibling);
    assert_int_equal(a->n_children, b->n_children);
    assert_int_equal(a->n_small_children, b->n_small_children);
    assert_int_equal(a->step, b->step);
    assert_int_equal(a->result, b->result);
    assert_string_equal(a->direction, b->direction);
    assert_string_equal(a->strategy, b->strategy);
    assert_string_equal(a->candidate, b->candidate);
    assert_true(a->visits == b->visits && a->speedup == b->speedup &&
                a->reward == b->reward && a->reward_sum == b->reward_sum &&
                a->reward_max == b->reward_max);
  }
  assert_int_equal(u->nodes[pending].result, TREE_PENDING);
  struct tree_descent d1, d2;
  assert_int_equal(tree_descend(t, &cfg, &d1), 0);
  assert_int_equal(tree_descend(u, &cfg, &d2), 0);
  assert_int_equal(d1.node, d2.node);
  assert_int_equal(tree_record(u, &cfg, pending, TREE_CORRECT, 3.0, NULL), 0);
  tree_free(u);
  tree_free(t);
}

/* Appends the JSON text to t and expects a refusal whose message contains want. */
static void expect_bad_row(struct tree *t, const char *text, const char *want) {
  json_t *row = json_loads(text, 0, NULL);
  assert_non_null(row);
  char err[256] = "";
  size_t before = t->n;
  assert_int_equal(tree_append_json(t, row, err, sizeof err), -1);
  if (!strstr(err, want))
    fail_msg("%s: message '%s' lacks '%s'", text, err, want);
  assert_int_equal(t->n, before);
  json_decref(row);
}

#define ROW(id, parent, step, extra)                                                    \
  "{\"id\":" id ",\"parent\":" parent ",\"step\":\"" step "\",\"direction\":\"d\","      \
  "\"strategy\":\"\",\"candidate\":\"c\",\"result\":\"correct\",\"speedup\":1.0,"         \
  "\"reward\":0.5,\"visits\":1,\"reward_sum\":0.5,\"reward_max\":0.5" extra "}"

static void test_json_rejects(void **state) {
  (void)state;
  struct tree *t = tree_new();
  expect_bad_row(t, ROW("1", "0", "small", ""), "id: expected 0");
  expect_bad_row(t, ROW("0", "null", "small", ""), "step");
  expect_bad_row(t, ROW("0", "0", "root", ""), "parent");
  char err[256];
  json_t *root = json_loads(ROW("0", "null", "root", ""), 0, NULL);
  assert_int_equal(tree_append_json(t, root, err, sizeof err), 0);
  json_decref(root);
  expect_bad_row(t, ROW("1", "1", "small", ""), "parent");
  expect_bad_row(t, ROW("1", "null", "small", ""), "parent");
  expect_bad_row(t, ROW("1", "0", "root", ""), "step");
  expect_bad_row(t, ROW("1", "0", "medium", ""), "step");
  expect_bad_row(t, ROW("1", "0", "small", ",\"note\":1"), "tree row");
  expect_bad_row(t, "{\"id\":1}", "tree row");
  char big[512];
  snprintf(big, sizeof big,
           "{\"id\":1,\"parent\":0,\"step\":\"small\",\"direction\":\"%0*d\","
           "\"strategy\":\"\",\"candidate\":\"c\",\"result\":\"correct\",\"speedup\":1.0,"
           "\"reward\":0.5,\"visits\":1,\"reward_sum\":0.5,\"reward_max\":0.5}",
           TREE_ID_MAX, 0);
  expect_bad_row(t, big, "at most 63 bytes");
  assert_int_equal(t->n, 1);
  tree_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_scripted_descent),
    cmocka_unit_test(test_backprop_exact),
    cmocka_unit_test(test_public_descent_reference_root),
    cmocka_unit_test(test_public_descent_empty_root),
    cmocka_unit_test(test_descent_settings),
    cmocka_unit_test(test_reward_values),
    cmocka_unit_test(test_ties_and_pending),
    cmocka_unit_test(test_step_kinds),
    cmocka_unit_test(test_pool),
    cmocka_unit_test(test_recent_window),
    cmocka_unit_test(test_prefix),
    cmocka_unit_test(test_json_round_trip),
    cmocka_unit_test(test_json_rejects),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
