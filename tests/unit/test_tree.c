/* Unit tests of the AdaExplore tree (engine/tree.c): a scripted search checked node by
 * node against a hand computation, step kinds, backpropagation, the representative pool,
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

/* The scripted search, tree_c = 0.3. Speed-ups 0.1 + 0.99k give rewards 0.4 + 0.12k.
 * Q = sum/visits; UCB1(ch) = Q + 0.3 sqrt(ln N/n); expand(v) = Q(v) + 0.3 sqrt(ln N/(1+|C|)).
 *  1. root is a leaf                                                      -> expand 0
 *  2. root N=2 Q=0.254545: expand 0.254545+0.176611=0.431157 vs child1 0+0.249766
 *                                                                         -> expand 0
 *  3. root N=3 Q=0.383030: expand 0.383030+0.181544=0.564575 vs child2 0.64+0.314444
 *     =0.954444 (child1 0.314444) -> 2; 2 is a leaf                       -> expand 2
 *  4. root N=4 Q=0.417273: expand 0.621206 vs child2 (n2 Q0.58) 0.829766 -> 2;
 *     at 2 N=2: expand 0.58+0.176611=0.756612 vs child3 0.52+0.249766=0.769766 -> 3, leaf
 *                                                                         -> expand 3
 *  5. root N=5 Q=0.343818: expand 0.563552 vs child2 (n3 Q0.403333) 0.623068 -> 2;
 *     at 2 N=3: expand 0.403333+0.222346=0.625679 vs child3 (n2 Q0.285) 0.507346
 *                                                                         -> expand 2
 *  6. root N=6 Q=0.433182: expand 0.665028 vs child2 (n4 Q0.5225) 0.723285 -> 2;
 *     at 2 N=4: expand 0.726433 vs child5 0.88+0.353223=1.233223 -> 5, leaf -> expand 5
 *  7. root N=7 Q=0.371299: expand 0.371299+0.241614=0.612913 vs child2 (n5 Q0.418)
 *     0.605153, child1 0.418488, so the failed subtree loses to breadth  -> expand 0
 *  8. root N=8 Q=0.374886: expand 0.591190 vs child7 0.4+0.432608=0.832608 -> 7, leaf
 *                                                                         -> expand 7
 *  9. root N=9: expand 0.640022 vs child7 (n2 Q0.58) 0.894444 -> 7; at 7 N=2: expand
 *     0.756612 vs child8 0.76+0.249766=1.009766 -> 8, leaf                -> expand 8
 * 10. root N=10: expand 0.763523 vs child7 (n3 Q0.92) 1.182826 -> 7; at 7 N=3: expand
 *     1.142346 vs child8 (n2 Q1.18) 1.402346 -> 8; at 8 N=2: expand 1.356612 vs child9
 *     1.6+0.249766=1.849766 -> 9, leaf                                    -> expand 9
 * 11. root N=11: expand 0.724013 vs child7 (n4 Q0.7025) 0.934777 -> 7; at 7 N=4: expand
 *     0.952266 vs child8 (n3 Q0.803333) 1.007267 -> 8; at 8 N=3: expand 1.025679 vs
 *     child9 (n2 Q0.825) 1.047346 -> 9; at 9 N=2: expand 0.825+0.176611=1.001612 vs
 *     child10 0.05+0.249766=0.299766                                     -> expand 9 */
struct script_step {
  size_t expand;         /* node the descent must stop at */
  enum tree_step step;
  const char *direction;
  enum tree_result result;
  double speedup;
  double expand_score;   /* the expand pseudo-action's score there */
  double child_score;    /* its best child's UCB1 (0 at a leaf) */
};

static const struct script_step script[] = {
  {0, TREE_STEP_LARGE, "memory_access", TREE_NOT_COMPILED, 0.0, R0, 0.0},
  {0, TREE_STEP_LARGE, "parallel_mapping", TREE_CORRECT, 2.08, 0.4311569579, 0.2497663833},
  {2, TREE_STEP_SMALL, "parallel_mapping", TREE_CORRECT, 1.09, 0.64, 0.0},
  {3, TREE_STEP_SMALL, "parallel_mapping", TREE_INCORRECT, 0.0, 0.52, 0.0},
  {2, TREE_STEP_SMALL, "parallel_mapping", TREE_CORRECT, 4.06, 0.6256789044, 0.5073455711},
  {5, TREE_STEP_LARGE, "fusion", TREE_NOT_COMPILED, 0.0, 0.88, 0.0},
  {0, TREE_STEP_LARGE, "reduction_strategy", TREE_CORRECT, 0.1, 0.6129126588, 0.6051533667},
  {7, TREE_STEP_SMALL, "reduction_strategy", TREE_CORRECT, 3.07, 0.4, 0.0},
  {8, TREE_STEP_LARGE, "memory_access", TREE_CORRECT, 10.0, 0.76, 0.0},
  {9, TREE_STEP_SMALL, "memory_access", TREE_INCORRECT, 0.0, 1.6, 0.0},
};
#define N_SCRIPT (sizeof script / sizeof script[0])

/* Runs the script on a new tree, checking every descent; the caller frees the tree. */
static struct tree *run_script(const struct search_config *cfg) {
  struct tree *t = tree_new();
  assert_non_null(t);
  assert_int_equal(tree_add_root(t, cfg), 0);
  for (size_t k = 0; k < N_SCRIPT; k++) {
    struct tree_descent d;
    assert_int_equal(tree_descend(t, cfg, &d), 0);
    if (d.node != script[k].expand)
      fail_msg("step %zu: expanded node %zu, expected %zu", k + 1, d.node, script[k].expand);
    assert_near(d.expand_score, script[k].expand_score, 1e-9);
    assert_near(d.best_child_score, script[k].child_score, 1e-9);
    char candidate[16];
    snprintf(candidate, sizeof candidate, "cand-%zu", k + 1);
    size_t id;
    assert_int_equal(tree_add_child(t, d.node, script[k].step, script[k].direction, "strat",
                                    candidate, &id), 0);
    assert_int_equal(id, k + 1);
    assert_int_equal(tree_record(t, cfg, id, script[k].result, script[k].speedup, NULL), 0);
  }
  return t;
}

static void test_scripted_descent(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct tree *t = run_script(&cfg);
  struct tree_descent d;
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, 9); /* step 11 of the comment */
  assert_int_equal(d.depth, 3);
  assert_int_equal(d.best_child, 10);
  assert_near(d.expand_score, 1.0016115033773212, TOL);
  assert_near(d.best_child_score, 0.2997663833473093, TOL);
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

/* tree_c = 0: expand = Q(v), UCB1 = Q(child). A child equal to the root's mean ties and
 * the tie goes to expansion; a better child wins. Pending children are ignored. */
static void test_ties_and_pending(void **state) {
  (void)state;
  struct search_config cfg;
  search_config_defaults(&cfg);
  cfg.tree_c = 0.0;
  struct tree *t = tree_new();
  assert_int_equal(tree_add_root(t, &cfg), 0);
  assert_int_equal(tree_add_root(t, &cfg), -EEXIST);
  size_t a, b, p;
  assert_int_equal(tree_add_child(t, 0, TREE_STEP_LARGE, "x", NULL, NULL, &a), 0);
  assert_int_equal(tree_record(t, &cfg, a, TREE_CORRECT, 1.0, NULL), 0); /* reward R0 */
  struct tree_descent d;
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, 0);
  assert_near(d.expand_score, R0, 1e-15);
  assert_near(d.best_child_score, R0, 1e-15);
  assert_int_equal(tree_add_child(t, 0, TREE_STEP_LARGE, "y", NULL, NULL, &b), 0);
  assert_int_equal(tree_record(t, &cfg, b, TREE_CORRECT, 1.09, NULL), 0); /* 0.52 */
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, b); /* Q(root) = (2*R0 + 0.52)/3 = 0.512727 < 0.52 */
  assert_int_equal(tree_add_child(t, b, TREE_STEP_SMALL, "y", NULL, NULL, &p), 0);
  assert_int_equal(tree_descend(t, &cfg, &d), 0);
  assert_int_equal(d.node, b); /* p is pending: b is still a leaf */
  assert_int_equal(d.best_child, TREE_NONE);
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
