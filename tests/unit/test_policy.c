/* Unit tests of the search policies (engine/policy.c): on one fixed memory and one fixed
 * tree, each policy's node, step kind, direction and strategy, computed by hand; the
 * ablation settings (retrieval, local_memory, prefix_len, skills) bending those choices;
 * and refine reading nothing of the memory's statistics. Every policy's direction is
 * pinned to a different answer where their logics differ, so swapping two policies'
 * direction logic fails a test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/policy.h"

/* The memory (deterministic choices; no trigger facets; k0 = k = 2, lambda = 0.7, c = 0):
 *
 *   direction  prior  n   reward_sum  mu = (sum + 2 prior)/(n + 2)
 *   alpha      0.30   10  -2.0        -0.116667
 *   beta       0.10    2   1.0         0.3
 *   epsilon    0.00   20  -6.0        -0.272727
 *   gamma      0.20    0   0.0         0.2
 *   delta      0.05    4   0.4         0.083333
 *   edges (n, sum): alpha->delta (4, 4), beta->delta (2, 2), alpha->beta (1, -0.5)
 *
 *   strategy   under    n  sum   (no family restriction)
 *   a1         alpha    3  0.3
 *   b1         beta     2  0.2
 *   b2         beta     4  1.6
 *   g1         gamma    5  3.0
 *   d1         delta    1 -0.5
 *   d2         delta    2  0.6
 *   e1         epsilon  3 -0.9
 *   e2         epsilon  3  0.9
 *
 * The tree (rewards 0.4 + 1.2 (s - 0.1)/9.9):
 *   0 root, the reference (1x, R0 = 0.509091)
 *   1 large under 0, alpha/a1, correct 2.0x (0.630303)
 *   2 large under 1, beta/b1, correct 1.5x (0.569697)
 *   3 large under 1, delta/d1, not compiled (0)
 *   4 large under 0, gamma/g1, incorrect (0.05)
 *
 * Direction logics:
 *   PRIOR at step 1: the highest prior: alpha.
 *   FEEDBACK (the task's own nodes): alpha, beta, delta, gamma tried; epsilon untried ->
 *     epsilon; its strategies e1, e2 both untried by the task -> the first, e1 (the
 *     memory's evidence would pick e2).
 *   FLAT: UCB over all strategies, N = 23, ln 24 = 3.178054: a1 .367406, b1 .408774,
 *     b2 .639176, g1 .1*6 + .3 sqrt(3.178054/6) = .818336, d1 -.121830, d2 .608774,
 *     e1 -.032594, e2 .567406 -> g1, so gamma.
 *   MEMORY (no transitions): the largest mu: beta.
 *   HTAM with prefix [alpha] (alpha_1 = 1): U(alpha->delta) = (4 + 2*.083333)/6 =
 *     .694444, U(alpha->beta) = (-.5 + .6)/3 = .033333, others mu -> delta.
 *   HTAM with prefix [beta, alpha] (weights .668188, .331812): delta: .668188 *
 *     (2 + .166667)/4 + .331812 * .694444 = .592360; beta: .668188*.3 + .331812*.033333
 *     = .211517; gamma .2 -> delta.
 * Strategies by evidence, UCB .3 sqrt(ln(N+1)/(n+1)): under beta (N = 6) b1 .341614, b2
 * .587153 -> b2; under delta (N = 3) d1 -.250234, d2 .503933 -> d2; under alpha a1.
 *
 * Nodes: the chain (single, refine, flat, htam) expands the best correct node, 1
 * (2.0x), by a small step. The tree descent: root N=5, C={1 (n3 V.4), 4 (n1 .05)}:
 * UCB(1) = .4 + .3 sqrt(ln 5/3) = .619788, expand = .4 + .3 sqrt(ln 5)/2 = .590295 < ->
 * 1; at 1 N=3, C={2 (n1 .569697), 3 (n1 0)}: UCB(2) = .569697 + .3 sqrt(ln 3) =
 * .884141, expand = .569697 + .157222 = .726919 < -> 2, a leaf. Node 2 has no small
 * child, so its kind is one draw against large_step_prob (set to 1 or 0 here).
 * best_of_n: the root, large; at the root the prefix is empty, so HTAM scores mu: beta. */
static const struct htam_global globals[5] = {
  {"alpha", 0.30, 10, -2.0, NULL, 0},
  {"beta", 0.10, 2, 1.0, NULL, 0},
  {"epsilon", 0.0, 20, -6.0, NULL, 0},
  {"gamma", 0.20, 0, 0.0, NULL, 0},
  {"delta", 0.05, 4, 0.4, NULL, 0},
};
static const struct htam_edge edges[3] = {
  {"alpha", "delta", 4.0, 4.0},
  {"beta", "delta", 2.0, 2.0},
  {"alpha", "beta", 1.0, -0.5},
};
static const struct htam_local locals[8] = {
  {"a1", "alpha", 3, 0.3, NULL, 0},  {"b1", "beta", 2, 0.2, NULL, 0},
  {"b2", "beta", 4, 1.6, NULL, 0},   {"g1", "gamma", 5, 3.0, NULL, 0},
  {"d1", "delta", 1, -0.5, NULL, 0}, {"d2", "delta", 2, 0.6, NULL, 0},
  {"e1", "epsilon", 3, -0.9, NULL, 0}, {"e2", "epsilon", 3, 0.9, NULL, 0},
};

/* A view over copies of the arrays above (so a test may change the copies). */
struct fixture {
  struct htam_global g[5];
  struct htam_edge e[3];
  struct htam_local l[8];
  struct memory_view view;
  struct tree *tree;
  struct search_config cfg;
  struct htam_state state;
  struct rng rng;
};

/* Adds a recorded child to t; returns its id. */
static size_t add(struct tree *t, const struct search_config *cfg, size_t parent,
                  enum tree_step step, const char *dir, const char *strat,
                  enum tree_result result, double speedup) {
  size_t id;
  assert_int_equal(tree_add_child(t, parent, step, dir, strat, "c", &id), 0);
  assert_int_equal(tree_record(t, cfg, id, result, speedup, NULL), 0);
  return id;
}

static int setup(void **state) {
  static struct fixture f;
  memset(&f, 0, sizeof f);
  memcpy(f.g, globals, sizeof f.g);
  memcpy(f.e, edges, sizeof f.e);
  memcpy(f.l, locals, sizeof f.l);
  f.view = (struct memory_view){.globals = f.g, .n_globals = 5, .locals = f.l, .n_locals = 8,
                                .edges = f.e, .n_edges = 3};
  search_config_defaults(&f.cfg);
  f.cfg.deterministic = true;
  f.state = (struct htam_state){NULL, NULL, "softmax"};
  f.tree = tree_new();
  assert_int_equal(tree_add_root(f.tree, &f.cfg), 0);
  assert_int_equal(add(f.tree, &f.cfg, 0, TREE_STEP_LARGE, "alpha", "a1", TREE_CORRECT, 2.0), 1);
  assert_int_equal(add(f.tree, &f.cfg, 1, TREE_STEP_LARGE, "beta", "b1", TREE_CORRECT, 1.5), 2);
  assert_int_equal(add(f.tree, &f.cfg, 1, TREE_STEP_LARGE, "delta", "d1", TREE_NOT_COMPILED, 0),
                   3);
  assert_int_equal(add(f.tree, &f.cfg, 0, TREE_STEP_LARGE, "gamma", "g1", TREE_INCORRECT, 0), 4);
  rng_seed(&f.rng, 1);
  *state = &f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  tree_free(f->tree);
  return 0;
}

/* The choice of policy under f's settings at step 1 (caller frees why). */
static struct policy_choice choose(struct fixture *f, const char *policy) {
  const struct policy_traits *traits = policy_find(policy);
  assert_non_null(traits);
  struct policy_input in = {.cfg = &f->cfg, .traits = traits, .tree = f->tree,
                            .memory = &f->view, .state = &f->state, .rng = &f->rng, .step = 1};
  struct policy_choice c;
  assert_int_equal(policy_choose(&in, &c), 0);
  return c;
}

/* Asserts policy's whole choice. */
static void expect(struct fixture *f, const char *policy, size_t node, enum tree_step kind,
                   const char *direction, const char *strategy, bool inherited) {
  struct policy_choice c = choose(f, policy);
  if (c.node != node || c.kind != kind || strcmp(c.direction, direction) != 0 ||
      strcmp(c.strategy, strategy) != 0 || c.inherited != inherited)
    fail_msg("%s: node %zu kind %d %s/%s inherited %d; want node %zu kind %d %s/%s %d",
             policy, c.node, (int)c.kind, c.direction, c.strategy, (int)c.inherited, node,
             (int)kind, direction, strategy, (int)inherited);
  json_decref(c.why);
}

static void test_each_policy(void **state) {
  struct fixture *f = *state;
  f->cfg.large_step_prob = 1.0; /* the tree's free draw always says large */
  expect(f, "single", 1, TREE_STEP_SMALL, "alpha", "a1", false);
  expect(f, "refine", 1, TREE_STEP_SMALL, "epsilon", "e1", false);
  expect(f, "flat", 1, TREE_STEP_SMALL, "gamma", "g1", false);
  expect(f, "htam", 1, TREE_STEP_SMALL, "delta", "d2", false);
  expect(f, "tree", 2, TREE_STEP_LARGE, "beta", "b2", false);
  expect(f, "htam+tree", 2, TREE_STEP_LARGE, "delta", "d2", false);
  expect(f, "best_of_n", 0, TREE_STEP_LARGE, "beta", "b2", false);
  /* A small tree step keeps its node's direction (beta): no transition is chosen. */
  f->cfg.large_step_prob = 0.0;
  expect(f, "tree", 2, TREE_STEP_SMALL, "beta", "b2", true);
  expect(f, "htam+tree", 2, TREE_STEP_SMALL, "beta", "b2", true);
  assert_null(policy_find("bogus"));
  assert_null(policy_find(NULL));
}

static void test_direction_modes(void **state) {
  struct fixture *f = *state;
  static const struct {
    const char *policy;
    enum policy_direction hierarchical, flat;
  } modes[] = {
    {"single", DIRECTION_PRIOR, DIRECTION_PRIOR},
    {"refine", DIRECTION_FEEDBACK, DIRECTION_FEEDBACK},
    {"flat", DIRECTION_FLAT, DIRECTION_FLAT},
    {"htam", DIRECTION_HTAM, DIRECTION_FLAT},
    {"tree", DIRECTION_MEMORY, DIRECTION_FLAT},
    {"htam+tree", DIRECTION_HTAM, DIRECTION_FLAT},
    {"best_of_n", DIRECTION_HTAM, DIRECTION_FLAT},
  };
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    f->cfg.retrieval = SEARCH_RETRIEVAL_HIERARCHICAL;
    assert_int_equal(policy_direction_mode(policy_find(modes[i].policy), &f->cfg),
                     modes[i].hierarchical);
    f->cfg.retrieval = SEARCH_RETRIEVAL_FLAT;
    assert_int_equal(policy_direction_mode(policy_find(modes[i].policy), &f->cfg),
                     modes[i].flat);
  }
  assert_string_equal(policy_direction_name(DIRECTION_FEEDBACK), "feedback");
  assert_string_equal(policy_direction_name(DIRECTION_HTAM), "htam");
  assert_true(policy_find("single")->single_shot);
  assert_false(policy_find("refine")->single_shot);
  assert_int_equal(policy_find("best_of_n")->node, NODE_ROOT);
}

/* The ablation settings on the full method (htam+tree at node 2, large):
 * retrieval flat -> the flat pick, g1 under gamma; prefix_len 0 -> no transitions, so
 * mu alone: beta/b2; skills false -> no change (delta/d2). On the chain (htam at node
 * 1, delta chosen), local_memory false draws the strategy uniformly among d1, d2:
 * seed 2 gives the uniform 0.102159 -> index 0, d1 (the evidence would give d2); seed 1
 * gives 0.702930 -> d2. With flat retrieval too, the draw is over all eight strategies:
 * seed 1, 0.702930*8 = 5.62 -> index 5, d2 under delta; seed 2 -> index 0, a1. The
 * uniforms are xoshiro256** from splitmix64, computed outside engine/rng.c. */
static void test_ablation_settings(void **state) {
  struct fixture *f = *state;
  f->cfg.large_step_prob = 1.0;
  f->cfg.retrieval = SEARCH_RETRIEVAL_FLAT;
  expect(f, "htam+tree", 2, TREE_STEP_LARGE, "gamma", "g1", false);
  f->cfg.retrieval = SEARCH_RETRIEVAL_HIERARCHICAL;
  f->cfg.prefix_len = 0;
  expect(f, "htam+tree", 2, TREE_STEP_LARGE, "beta", "b2", false);
  expect(f, "htam", 1, TREE_STEP_SMALL, "beta", "b2", false);
  f->cfg.prefix_len = 3;
  f->cfg.skills = false;
  expect(f, "htam+tree", 2, TREE_STEP_LARGE, "delta", "d2", false);
  f->cfg.local_memory = false;
  rng_seed(&f->rng, 2);
  expect(f, "htam", 1, TREE_STEP_SMALL, "delta", "d1", false);
  rng_seed(&f->rng, 1);
  expect(f, "htam", 1, TREE_STEP_SMALL, "delta", "d2", false);
  f->cfg.retrieval = SEARCH_RETRIEVAL_FLAT;
  rng_seed(&f->rng, 1);
  expect(f, "htam", 1, TREE_STEP_SMALL, "delta", "d2", false);
  rng_seed(&f->rng, 2);
  expect(f, "htam", 1, TREE_STEP_SMALL, "alpha", "a1", false);
}

/* refine reads no memory statistics: priors, counts, sums and edges rewritten, the
 * choice stays epsilon/e1. Its own results move it: once the task has tried epsilon
 * (node 5, e1, correct 3.07x: reward .76), every direction is tried, so UCB on the
 * task's own mean tree rewards (N = 5, ln 6 = 1.791759, .3 sqrt(ln 6/2) = .283954):
 * alpha .630303+.283954, beta .569697+.283954, epsilon .76+.283954 = 1.043954, gamma
 * .05+.283954, delta 0+.283954 -> epsilon; its strategies: e1 tried once (.76), e2
 * untried -> e2. */
static void test_refine_reads_no_memory(void **state) {
  struct fixture *f = *state;
  for (size_t i = 0; i < 5; i++) {
    f->g[i].prior = 1.0 - 0.2 * (double)i;
    f->g[i].n = 100;
    f->g[i].reward_sum = 50.0 * (double)i;
  }
  for (size_t i = 0; i < 8; i++) {
    f->l[i].n = 7;
    f->l[i].reward_sum = (double)i;
  }
  f->e[0] = (struct htam_edge){"alpha", "epsilon", 9.0, -9.0};
  expect(f, "refine", 1, TREE_STEP_SMALL, "epsilon", "e1", false);
  add(f->tree, &f->cfg, 1, TREE_STEP_SMALL, "epsilon", "e1", TREE_CORRECT, 3.07);
  expect(f, "refine", 5, TREE_STEP_SMALL, "epsilon", "e2", false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_each_policy, setup, teardown),
    cmocka_unit_test_setup_teardown(test_direction_modes, setup, teardown),
    cmocka_unit_test_setup_teardown(test_ablation_settings, setup, teardown),
    cmocka_unit_test_setup_teardown(test_refine_reads_no_memory, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
