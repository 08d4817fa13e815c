/* The pure parts of the replay: the point key (and, where the builtin space exists, its
 * agreement with space_options_key), one run's figures with steps on points the table
 * lacks left out, the confidence intervals over tasks, and the warm memory's merge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include <jansson.h>

#include "cli/ablate_replay_stats.h"
#include "gpu/replay/space_table.h"

#if defined(__has_include)
#if __has_include("proposers/builtin/space.h")
#include "proposers/builtin/space.h"
#define HAVE_BUILTIN_SPACE 1
#endif
#endif

static void test_point_key(void **state) {
  (void)state;
  static const struct {
    const char *options, *key;
  } cases[] = {
    {"[]", ""},
    {"[\"-DVEC=4\", \"-DBLOCK=256\"]", "BLOCK=256,VEC=4"},
    {"[\"-DBM=128\", \"-DMODE_TF32X3=1\", \"-DBK=16\", \"-DSPLIT=1\"]",
     "BK=16,BM=128,MODE=tf32x3,SPLIT=1"},
    {"[\"-DMODE_3XTF32=1\", \"-DBM=64\"]", "BM=64,MODE=tf32x3"},
    {"[\"-DITEMS=0\", \"-DVEC=2\", \"-use_fast_math\", \"-DMODE_ONLINE=1\"]",
     "MODE=online,VEC=2"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *o = json_loads(cases[i].options, 0, NULL);
    char key[REPLAY_KEY_MAX];
    assert_int_equal(replay_point_key(o, key, sizeof key), 0);
    assert_string_equal(key, cases[i].key);
#ifdef HAVE_BUILTIN_SPACE
    char theirs[256];
    assert_int_equal(space_options_key(o, theirs, sizeof theirs), 0);
    assert_string_equal(key, theirs);
#endif
    json_decref(o);
  }
  char small[8];
  json_t *o = json_loads("[\"-DBLOCK=256\"]", 0, NULL);
  assert_int_equal(replay_point_key(o, small, sizeof small), -1);
  json_decref(o);
}

/* A candidate of step with ms (0: failed) and class. */
static json_t *cand(long step, double ms, const char *cls) {
  if (ms > 0)
    return json_pack("{s:I, s:{s:b, s:n, s:{s:f}}}", "step", (json_int_t)step, "result",
                     "correct", 1, "failure", "time", "median_ms", ms);
  return json_pack("{s:I, s:{s:b, s:{s:s, s:s}}}", "step", (json_int_t)step, "result",
                   "correct", 0, "failure", "stage", "protocol", "class", cls);
}

/* Steps 1..: 1.0, not_recorded, 0.9, compile, not_recorded, 0.52, 0.5 (the best), ...
 * Counted: 1.0 (1), 0.9 (2), compile (3), 0.52 (4), 0.5 (5). Space best 0.5: 95% needs
 * <= 0.5263: first at counted step 4 (0.52); 99% needs <= 0.50505: step 5. */
static void test_run_take(void **state) {
  (void)state;
  json_t *items = json_array();
  json_array_append_new(items, cand(0, 2.0, NULL));
  json_array_append_new(items, cand(2, 0, REPLAY_NOT_RECORDED));
  json_array_append_new(items, cand(1, 1.0, NULL));  /* out of order on purpose */
  json_array_append_new(items, cand(3, 0.9, NULL));
  json_array_append_new(items, cand(4, 0, "compile/syntax_error"));
  json_array_append_new(items, cand(5, 0, REPLAY_NOT_RECORDED));
  json_array_append_new(items, cand(6, 0.52, NULL));
  json_array_append_new(items, cand(7, 0.5, NULL));
  struct replay_run r = {.steps = 10, .space_best_ms = 0.5};
  replay_run_take(&r, items, true);
  assert_true(r.done);
  assert_int_equal(r.engine_steps, 7);
  assert_int_equal(r.not_recorded, 2);
  assert_int_equal(r.effective, 5);
  assert_int_equal(r.to_95, 4);
  assert_int_equal(r.to_99, 5);
  assert_float_equal(r.best_at[0], 0.5, 0);   /* within 5 counted steps */
  assert_float_equal(r.best_at[1], 0.5, 0);   /* the run ended: the best holds */
  assert_true(isnan(r.best_at[2]));           /* past the budget of 10 */
  assert_float_equal(replay_rel_at(&r, 0), 1.0, 0);
  assert_float_equal(replay_steps_to(&r, 0.95), 4, 0);
  /* A budget of 3 counted steps: 1.0, 0.9, compile; then nothing counts. */
  struct replay_run s = {.steps = 3, .space_best_ms = 0.5};
  replay_run_take(&s, items, true);
  assert_int_equal(s.effective, 3);
  assert_int_equal(s.to_95, -1);
  assert_float_equal(replay_steps_to(&s, 0.95), 4, 0); /* never: steps + 1 */
  assert_float_equal(s.final_ms, 0.9, 0);
  /* Cut off before step 5 (not ended): the marks past it are unknown. */
  struct replay_run c = {.steps = 20, .space_best_ms = 0.5};
  json_t *few = json_array();
  json_array_append(few, json_array_get(items, 0));
  json_array_append(few, json_array_get(items, 2));
  replay_run_take(&c, few, false);
  assert_true(isnan(c.best_at[0]));
  json_decref(few);
  json_decref(items);
}

/* Two tasks, two seeds each: per-task means 3 and 5 (full), 4 and 8 (random).
 * full: mean 4, sd sqrt(2), CI 4 +- 12.706*sqrt(2)/sqrt(2) = [-8.706, 16.706].
 * full - random: -1 and -3: mean -2, sd sqrt(2), the same half-width. */
static void test_ci(void **state) {
  (void)state;
  struct replay_run runs[8];
  memset(runs, 0, sizeof runs);
  const long to95[8] = {2, 4, 5, 5, 3, 5, 7, 9};
  for (int i = 0; i < 8; i++) {
    snprintf(runs[i].mode, sizeof runs[i].mode, "cold");
    snprintf(runs[i].arm, sizeof runs[i].arm, "%s", i < 4 ? "full" : "random");
    runs[i].task_index = (i / 2) % 2;
    runs[i].done = true;
    runs[i].steps = 20;
    runs[i].to_95 = to95[i];
  }
  struct replay_ci c = replay_stat(runs, 8, "cold", "full", replay_v_to95);
  assert_int_equal(c.n, 2);
  assert_float_equal(c.mean, 4, 1e-12);
  assert_float_equal(c.lo, 4 - 12.706, 1e-9);
  assert_float_equal(c.hi, 4 + 12.706, 1e-9);
  struct replay_ci d = replay_diff(runs, 8, "cold", "full", "cold", "random", replay_v_to95);
  assert_float_equal(d.mean, -2, 1e-12);
  assert_float_equal(d.hi, -2 + 12.706, 1e-9);
  assert_float_equal(replay_t975(30), 2.042, 0);
  assert_true(fabs(replay_t975(60) - 2.000) < 0.002);
  assert_true(fabs(replay_t975(1000) - 1.962) < 0.002);
}

static void test_merge_memory(void **state) {
  (void)state;
  json_t *seed = json_loads(
      "{\"version\":1,\"exported_at\":\"x\",\"globals\":[{\"id\":\"a\",\"stats\":{\"n\":0,"
      "\"reward_sum\":0.0,\"ema\":null}}],\"locals\":[{\"id\":\"s\",\"global\":\"a\","
      "\"stats\":{\"n\":0,\"reward_sum\":0.0},\"evidence\":[]}],\"edges\":[{\"from\":\"a\","
      "\"to\":\"b\",\"when\":\"w\",\"stats\":{\"n\":0.0,\"reward_sum\":0.0}}]}",
      0, NULL);
  json_t *d1 = json_loads(
      "{\"globals\":[{\"id\":\"a\",\"stats\":{\"n\":2,\"reward_sum\":0.5,\"ema\":0.1}}],"
      "\"locals\":[{\"id\":\"s\",\"stats\":{\"n\":2,\"reward_sum\":0.5},\"evidence\":[{\"r\":1}]}],"
      "\"edges\":[{\"from\":\"a\",\"to\":\"b\",\"stats\":{\"n\":1.5,\"reward_sum\":0.25}},"
      "{\"from\":\"b\",\"to\":\"a\",\"when\":\"v\",\"stats\":{\"n\":1.0,\"reward_sum\":-0.5}}]}",
      0, NULL);
  json_t *d2 = json_loads(
      "{\"globals\":[{\"id\":\"a\",\"stats\":{\"n\":1,\"reward_sum\":-0.25}}],"
      "\"locals\":[{\"id\":\"s\",\"stats\":{\"n\":1,\"reward_sum\":-0.25},\"evidence\":[{\"r\":2}]}],"
      "\"edges\":[{\"from\":\"b\",\"to\":\"a\",\"when\":\"v\",\"stats\":{\"n\":2.0,\"reward_sum\":1.0}}]}",
      0, NULL);
  json_t *docs[] = {d1, d2};
  json_t *m = replay_merge_memory(seed, docs, 2);
  assert_non_null(m);
  assert_null(json_object_get(m, "exported_at"));
  json_t *g = json_object_get(json_array_get(json_object_get(m, "globals"), 0), "stats");
  assert_int_equal(json_integer_value(json_object_get(g, "n")), 3);
  assert_float_equal(json_real_value(json_object_get(g, "reward_sum")), 0.25, 1e-12);
  assert_float_equal(json_real_value(json_object_get(g, "ema")), 0.25 / 3, 1e-12);
  json_t *l = json_array_get(json_object_get(m, "locals"), 0);
  assert_int_equal(json_array_size(json_object_get(l, "evidence")), 2);
  json_t *edges = json_object_get(m, "edges");
  assert_int_equal(json_array_size(edges), 2);
  assert_float_equal(json_real_value(json_object_get(json_object_get(json_array_get(edges, 0),
                                                                     "stats"), "n")), 1.5, 0);
  json_t *ba = json_array_get(edges, 1);
  assert_string_equal(json_string_value(json_object_get(ba, "when")), "v");
  assert_float_equal(json_real_value(json_object_get(json_object_get(ba, "stats"), "n")), 3.0, 0);
  assert_float_equal(json_real_value(json_object_get(json_object_get(ba, "stats"),
                                                     "reward_sum")), 0.5, 0);
  json_decref(m);
  json_decref(d1);
  json_decref(d2);
  json_decref(seed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_point_key),
    cmocka_unit_test(test_run_take),
    cmocka_unit_test(test_ci),
    cmocka_unit_test(test_merge_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
