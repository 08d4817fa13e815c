/* `opforge bench`'s report: table, summary, JSON and API parsing against hand-computed
 * values for a fixed set of five results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/bench_report.h"

/* The fixed set. Per task (eager, compile, floor, best in ms):
 *   19_ReLU      pointwise  2.0 1.6 1.0  1.25  -> vs eager 1.6, vs compile 1.28, floor/best
 *                                                  0.8, best/floor 1.25
 *   23_Softmax   softmax    3.0 2.0 0.5  2.5   -> 1.2, 0.8, 0.2, best/floor 5.0
 *   1_Square...  gemm       4.0 5.0 2.0  5.0   -> 0.8, 1.0 (equal: not faster), 0.4; not
 *                                                  memory-bound
 *   95_Cross...  loss       1.0 0.5 0.25 none  -> failed, no_correct_candidate
 *   bad_file     -          refused, invalid_reference
 * Summary:
 *   geomean vs eager   = (1.6 * 1.2 * 0.8)^(1/3)  = 1.536^(1/3) = 1.1537996562459267
 *   geomean vs compile = (1.28 * 0.8 * 1.0)^(1/3) = 1.024^(1/3) = 1.0079368399158986
 *   memory-bound best/floor geomean = (1.25 * 5.0)^(1/2) = 6.25^(1/2) = 2.5, worst 5.0
 *     (23_Softmax); the gemm and the failed loss do not count
 *   fast_1 = 2 of 5 = 0.4 (19_ReLU, 23_Softmax); faster than compile = 1 of 5 = 0.2
 *   counts: succeeded 3, failed 1, refused 1, correct 3 */
static void fill(struct bench_result *r, const char *name, const char *family,
                 enum bench_state state, double eager, double compile, double floor_ms,
                 double best, long to_best, double wall) {
  bench_result_init(r, "kernelbench/level1/x.py");
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->family, sizeof r->family, "%s", family);
  r->state = state;
  r->eager_ms = eager;
  r->compile_ms = compile;
  r->floor_ms = floor_ms;
  r->best_ms = best;
  r->steps_to_best = to_best;
  r->wall_s = wall;
  r->step = r->budget_steps = 20;
}

static void fixed_set(struct bench_result r[5]) {
  fill(&r[0], "19_ReLU", "pointwise", BENCH_SUCCEEDED, 2.0, 1.6, 1.0, 1.25, 3, 84.5);
  fill(&r[1], "23_Softmax", "softmax", BENCH_SUCCEEDED, 3.0, 2.0, 0.5, 2.5, 7, 120.0);
  fill(&r[2], "1_Square_matrix_multiplication_", "gemm", BENCH_SUCCEEDED, 4.0, 5.0, 2.0, 5.0,
       1, 30.2);
  /* A single kernel at its floor; a program with half its time in library steps replayed
   * as a CUDA graph; a task whose best is its reference (library only). Each ran 20 steps
   * and its reference: 21 evaluations. */
  r[0].library_share = 0, r[0].graph = 0, r[0].no_speedup = 0;
  snprintf(r[0].stop_reason, sizeof r[0].stop_reason, "at_floor");
  r[1].library_share = 0.5, r[1].graph = 1;
  snprintf(r[1].stop_reason, sizeof r[1].stop_reason, "budget");
  r[2].library_share = 1, r[2].graph = 0, r[2].no_speedup = 1;
  snprintf(r[2].stop_reason, sizeof r[2].stop_reason, "space_exhausted");
  fill(&r[3], "95_CrossEntropyLoss", "loss", BENCH_FAILED, 1.0, 0.5, 0.25, NAN, -1, 12.0);
  snprintf(r[3].error_code, sizeof r[3].error_code, "no_correct_candidate");
  snprintf(r[3].error_message, sizeof r[3].error_message, "no candidate was correct");
  bench_result_init(&r[4], "bad_file.py");
  snprintf(r[4].name, sizeof r[4].name, "bad_file");
  r[4].state = BENCH_REFUSED;
  snprintf(r[4].error_code, sizeof r[4].error_code, "invalid_reference");
  snprintf(r[4].error_message, sizeof r[4].error_message, "no class Model");
}

/* The table of n results as text (caller frees). Not inlined: at -O3 GCC would see the
 * stream keep the address of the local `text` past the return (it cannot know that fclose
 * let go of it) and warn of a dangling pointer. */
__attribute__((noinline)) static char *capture_table(const struct bench_result *r,
                                                     size_t n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  bench_print_table(f, r, n);
  assert_int_equal(fclose(f), 0);
  return text;
}

/* The summary as text (caller frees). Not inlined, as capture_table. */
__attribute__((noinline)) static char *capture_summary(const struct bench_summary *s) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  bench_print_summary(f, s);
  assert_int_equal(fclose(f), 0);
  return text;
}

static void test_table(void **state) {
  (void)state;
  struct bench_result r[5];
  fixed_set(r);
  char *text = capture_table(r, 5);
  assert_string_equal(
      text,
      "TASK                             FAMILY     CORRECT  EAGER_MS  COMPILE_MS  BEST_"
      "MS  FLOOR_MS  VS_EAGER  VS_COMPILE  OF_FLOOR  LIB_SHARE  GRAPH  EVALS  STEPS_TO_"
      "BEST  WALL_S  STOP                        STATUS\n"
      "19_ReLU                          pointwise  yes        2.0000      1.6000   1.25"
      "00    1.0000     1.60x       1.28x      0.80       0.00     no     21           "
      "   3    84.5  at_floor                    succeeded\n"
      "23_Softmax                       softmax    yes        3.0000      2.0000   2.50"
      "00    0.5000     1.20x       0.80x      0.20       0.50    yes     21           "
      "   7   120.0  budget                      succeeded\n"
      "1_Square_matrix_multiplication_  gemm       yes        4.0000      5.0000   5.00"
      "00    2.0000     0.80x       1.00x      0.40       1.00     no     21           "
      "   1    30.2  space_exhausted,no_speedup  succeeded\n"
      "95_CrossEntropyLoss              loss       no         1.0000      0.5000       "
      " -    0.2500         -           -         -          -      -     21           "
      "   -    12.0  -                           failed:no_correct_candidate\n"
      "bad_file                         -          no              -           -       "
      " -         -         -           -         -          -      -      -           "
      "   -       -  -                           refused:invalid_reference\n");
  free(text);
}

/* Unfinished and unsubmitted tasks are marked so in the status column. */
static void test_table_unfinished(void **state) {
  (void)state;
  struct bench_result r[3];
  bench_result_init(&r[0], "a.py");
  snprintf(r[0].name, sizeof r[0].name, "a");
  r[0].state = BENCH_QUEUED;
  bench_result_init(&r[1], "b.py");
  snprintf(r[1].name, sizeof r[1].name, "b");
  bench_result_init(&r[2], "c.py");
  snprintf(r[2].name, sizeof r[2].name, "c");
  r[2].state = BENCH_CANCELLED;
  char *text = capture_table(r, 3);
  const char *rows = strchr(text, '\n') + 1;
  assert_string_equal(rows,
                      "a     -       no              -           -        -         -         -        "
                      "   -         -          -      -      -              -       -  -     unfinished"
                      ":queued\n"
                      "b     -       no              -           -        -         -         -        "
                      "   -         -          -      -      -              -       -  -     not_submit"
                      "ted\n"
                      "c     -       no              -           -        -         -         -        "
                      "   -         -          -      -      -              -       -  -     cancelled\n");
  free(text);
}

static void test_summary_numbers(void **state) {
  (void)state;
  struct bench_result r[5];
  fixed_set(r);
  struct bench_summary s;
  bench_summarize(r, 5, &s);
  assert_int_equal(s.tasks, 5);
  assert_int_equal(s.succeeded, 3);
  assert_int_equal(s.failed, 1);
  assert_int_equal(s.cancelled, 0);
  assert_int_equal(s.unfinished, 0);
  assert_int_equal(s.not_submitted, 0);
  assert_int_equal(s.refused, 1);
  assert_int_equal(s.lost, 0);
  assert_int_equal(s.correct, 3);
  assert_float_equal(s.geomean_vs_eager, 1.1537996562459267, 1e-12);
  assert_int_equal(s.n_vs_eager, 3);
  assert_float_equal(s.geomean_vs_compile, 1.0079368399158986, 1e-12);
  assert_int_equal(s.n_vs_compile, 3);
  assert_float_equal(s.memory_geomean_of_floor, 2.5, 1e-12);
  assert_int_equal(s.n_memory, 2);
  assert_float_equal(s.memory_worst_of_floor, 5.0, 1e-12);
  assert_string_equal(s.memory_worst_task, "23_Softmax");
  assert_float_equal(s.fast_1, 0.4, 1e-15);
  assert_int_equal(s.n_fast_1, 2);
  assert_float_equal(s.faster_than_compile, 0.2, 1e-15);
  assert_int_equal(s.n_faster_than_compile, 1);
}

static void test_summary_text(void **state) {
  (void)state;
  struct bench_result r[5];
  fixed_set(r);
  struct bench_summary s;
  bench_summarize(r, 5, &s);
  char *text = capture_summary(&s);
  assert_string_equal(text,
                      "tasks: 5 (succeeded 3, failed 1, cancelled 0, unfinished 0, "
                      "not submitted 0, refused 1, lost 0)\n"
                      "with a correct candidate: 3\n"
                      "geomean speed-up vs eager: 1.154x over 3 tasks\n"
                      "geomean speed-up vs torch.compile: 1.008x over 3 tasks\n"
                      "memory-bound geomean best/floor: 2.500 over 2 tasks; worst 5.000 "
                      "(23_Softmax)\n"
                      "fast_1 (correct and faster than eager): 40.0% (2 of 5)\n"
                      "faster than torch.compile: 20.0% (1 of 5)\n");
  free(text);
}

/* Nothing correct: every ratio is unknown, and printed and written as such. */
static void test_summary_empty(void **state) {
  (void)state;
  struct bench_summary s;
  bench_summarize(NULL, 0, &s);
  assert_true(isnan(s.geomean_vs_eager) && isnan(s.geomean_vs_compile));
  assert_true(isnan(s.memory_geomean_of_floor) && isnan(s.memory_worst_of_floor));
  assert_true(isnan(s.fast_1) && isnan(s.faster_than_compile));
  char *text = capture_summary(&s);
  assert_string_equal(text,
                      "tasks: 0 (succeeded 0, failed 0, cancelled 0, unfinished 0, "
                      "not submitted 0, refused 0, lost 0)\n"
                      "with a correct candidate: 0\n"
                      "geomean speed-up vs eager: - (no task)\n"
                      "geomean speed-up vs torch.compile: - (no task)\n"
                      "memory-bound geomean best/floor: - (no task)\n"
                      "fast_1 (correct and faster than eager): - (no task)\n"
                      "faster than torch.compile: - (no task)\n");
  free(text);
  json_t *j = bench_summary_json(&s);
  assert_non_null(j);
  assert_true(json_is_null(json_object_get(j, "geomean_speedup_vs_eager")));
  assert_true(json_is_null(json_object_get(j, "fast_1")));
  assert_true(json_is_null(json_object_get(j, "memory_bound_worst_task")));
  json_decref(j);
}

static double num(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  assert_true(json_is_number(v));
  return json_number_value(v);
}

static void test_summary_json(void **state) {
  (void)state;
  struct bench_result r[5];
  fixed_set(r);
  struct bench_summary s;
  bench_summarize(r, 5, &s);
  json_t *j = bench_summary_json(&s);
  assert_non_null(j);
  assert_int_equal(json_object_size(j), 21);
  assert_int_equal(json_integer_value(json_object_get(j, "tasks")), 5);
  assert_int_equal(json_integer_value(json_object_get(j, "succeeded")), 3);
  assert_int_equal(json_integer_value(json_object_get(j, "failed")), 1);
  assert_int_equal(json_integer_value(json_object_get(j, "refused")), 1);
  assert_int_equal(json_integer_value(json_object_get(j, "correct")), 3);
  assert_float_equal(num(j, "geomean_speedup_vs_eager"), 1.1537996562459267, 1e-12);
  assert_int_equal(json_integer_value(json_object_get(j, "geomean_speedup_vs_eager_tasks")), 3);
  assert_float_equal(num(j, "geomean_speedup_vs_compile"), 1.0079368399158986, 1e-12);
  assert_float_equal(num(j, "memory_bound_geomean_best_over_floor"), 2.5, 1e-12);
  assert_int_equal(json_integer_value(json_object_get(j, "memory_bound_tasks")), 2);
  assert_float_equal(num(j, "memory_bound_worst_best_over_floor"), 5.0, 1e-12);
  assert_string_equal(json_string_value(json_object_get(j, "memory_bound_worst_task")),
                      "23_Softmax");
  assert_float_equal(num(j, "fast_1"), 0.4, 1e-15);
  assert_int_equal(json_integer_value(json_object_get(j, "fast_1_tasks")), 2);
  assert_float_equal(num(j, "faster_than_compile"), 0.2, 1e-15);
  assert_int_equal(json_integer_value(json_object_get(j, "faster_than_compile_tasks")), 1);
  json_decref(j);
}

static void test_result_json(void **state) {
  (void)state;
  struct bench_result r[5];
  fixed_set(r);
  json_t *ok = bench_result_json(&r[0]);
  assert_non_null(ok);
  assert_string_equal(json_string_value(json_object_get(ok, "name")), "19_ReLU");
  assert_string_equal(json_string_value(json_object_get(ok, "status")), "succeeded");
  assert_true(json_is_true(json_object_get(ok, "finished")));
  assert_true(json_is_true(json_object_get(ok, "correct")));
  assert_true(json_is_true(json_object_get(ok, "memory_bound")));
  assert_true(json_is_null(json_object_get(ok, "error")));
  assert_float_equal(num(ok, "eager_ms"), 2.0, 1e-15);
  assert_float_equal(num(ok, "compile_ms"), 1.6, 1e-15);
  assert_float_equal(num(ok, "best_ms"), 1.25, 1e-15);
  assert_float_equal(num(ok, "floor_ms"), 1.0, 1e-15);
  assert_float_equal(num(ok, "speedup_vs_eager"), 1.6, 1e-12);
  assert_float_equal(num(ok, "speedup_vs_compile"), 1.28, 1e-12);
  assert_float_equal(num(ok, "floor_fraction"), 0.8, 1e-12);
  assert_float_equal(num(ok, "best_over_floor"), 1.25, 1e-12);
  assert_float_equal(num(ok, "wall_s"), 84.5, 1e-12);
  assert_int_equal(json_integer_value(json_object_get(ok, "steps_to_best")), 3);
  assert_int_equal(json_integer_value(json_object_get(ok, "steps")), 20);
  assert_true(json_is_null(json_object_get(ok, "impossible_ms")));
  assert_float_equal(num(ok, "library_share"), 0.0, 0);
  assert_true(json_is_false(json_object_get(ok, "graph")));
  assert_int_equal(json_integer_value(json_object_get(ok, "evaluations")), 21);
  assert_string_equal(json_string_value(json_object_get(ok, "stop_reason")), "at_floor");
  assert_true(json_is_false(json_object_get(ok, "no_speedup")));
  json_decref(ok);

  json_t *bad = bench_result_json(&r[3]);
  assert_non_null(bad);
  assert_string_equal(json_string_value(json_object_get(bad, "status")), "failed");
  assert_true(json_is_false(json_object_get(bad, "correct")));
  json_t *err = json_object_get(bad, "error");
  assert_string_equal(json_string_value(json_object_get(err, "code")), "no_correct_candidate");
  assert_string_equal(json_string_value(json_object_get(err, "message")),
                      "no candidate was correct");
  assert_true(json_is_null(json_object_get(bad, "best_ms")));
  assert_true(json_is_null(json_object_get(bad, "speedup_vs_eager")));
  assert_true(json_is_null(json_object_get(bad, "steps_to_best")));
  json_decref(bad);

  json_t *refused = bench_result_json(&r[4]);
  assert_string_equal(json_string_value(json_object_get(refused, "status")), "refused");
  assert_true(json_is_false(json_object_get(refused, "finished")));
  assert_true(json_is_null(json_object_get(refused, "id")));
  assert_true(json_is_null(json_object_get(refused, "steps")));
  assert_string_equal(json_string_value(json_object_get(refused, "file")), "bad_file.py");
  json_decref(refused);
}

static void test_finished_line(void **state) {
  (void)state;
  struct bench_result r[5];
  fixed_set(r);
  char line[512];
  bench_format_finished(&r[0], 1, 5, line, sizeof line);
  assert_string_equal(line, "[1/5] 19_ReLU succeeded: best 1.2500 ms, 1.60x vs eager, "
                            "step 20/20, 84.5 s");
  bench_format_finished(&r[3], 4, 5, line, sizeof line);
  assert_string_equal(line, "[4/5] 95_CrossEntropyLoss failed:no_correct_candidate: no "
                            "correct candidate, step 20/20, 12.0 s");
  bench_format_finished(&r[4], 5, 5, line, sizeof line);
  assert_string_equal(line, "[5/5] bad_file refused:invalid_reference: no correct candidate");
}

/* A task as GET /v1/tasks/{id} gives it, read into a result, then its candidates. */
static void test_take_api(void **state) {
  (void)state;
  json_t *task = json_loads(
      "{\"progress\":{\"step\":5,\"budget_steps\":20,\"best_speedup\":2.0,\"best_ms\":1.0,"
      "\"correct\":2,\"candidates\":5,\"elapsed_s\":3.5,\"best_candidate\":\"c-3\"},"
      "\"baselines\":{\"eager_ms\":2.0,\"compile_ms\":1.6,\"floor_ms\":0.8,"
      "\"impossible_ms\":0.4,\"family\":\"norm\",\"bound\":\"memory\",\"flops\":0}}",
      0, NULL);
  assert_non_null(task);
  struct bench_result r;
  bench_result_init(&r, "x.py");
  bench_result_take_progress(&r, json_object_get(task, "progress"),
                             json_object_get(task, "baselines"));
  assert_int_equal(r.step, 5);
  assert_int_equal(r.budget_steps, 20);
  assert_int_equal(r.correct_count, 2);
  assert_int_equal(r.candidates, 5);
  assert_float_equal(r.best_ms, 1.0, 0);
  assert_string_equal(r.best_candidate, "c-3");
  assert_string_equal(r.family, "norm");
  assert_string_equal(r.bound, "memory");
  assert_float_equal(r.eager_ms, 2.0, 0);
  assert_float_equal(r.compile_ms, 1.6, 0);
  assert_float_equal(r.floor_ms, 0.8, 0);
  assert_float_equal(r.impossible_ms, 0.4, 0);
  /* Step 1 is slower, step 2 wrong though fast, step 3 is the first at the best time,
   * step 4 equals it later, step 5 failed to compile. */
  json_t *items = json_loads(
      "[{\"seq\":1,\"step\":1,\"result\":{\"correct\":true,\"failure\":null,"
      "\"time\":{\"median_ms\":1.5}}},"
      "{\"seq\":2,\"step\":2,\"result\":{\"correct\":false,\"failure\":{\"stage\":"
      "\"correctness\"},\"time\":{\"median_ms\":0.5}}},"
      "{\"seq\":3,\"step\":3,\"result\":{\"correct\":true,\"failure\":null,"
      "\"time\":{\"median_ms\":1.0}}},"
      "{\"seq\":4,\"step\":4,\"result\":{\"correct\":true,\"failure\":null,"
      "\"time\":{\"median_ms\":1.0}}},"
      "{\"seq\":5,\"step\":5,\"result\":{\"correct\":false,\"failure\":{\"stage\":"
      "\"compile\"},\"time\":null}}]",
      0, NULL);
  assert_non_null(items);
  bench_result_take_candidates(&r, items);
  assert_int_equal(r.steps_to_best, 3);
  json_decref(items);
  json_decref(task);
}

/* A task without a correct candidate keeps best_ms unknown, even if progress carries a
 * number, and its candidates set no step of best. */
static void test_take_api_nothing_correct(void **state) {
  (void)state;
  json_t *progress = json_loads("{\"step\":2,\"budget_steps\":2,\"best_ms\":null,"
                                "\"correct\":0,\"candidates\":2}", 0, NULL);
  struct bench_result r;
  bench_result_init(&r, "x.py");
  bench_result_take_progress(&r, progress, NULL);
  assert_true(isnan(r.best_ms));
  assert_false(bench_result_correct(&r));
  assert_true(isnan(bench_vs_eager(&r)));
  json_t *items = json_loads("[{\"seq\":1,\"step\":1,\"result\":{\"correct\":true,"
                             "\"time\":{\"median_ms\":1.0}}}]", 0, NULL);
  bench_result_take_candidates(&r, items);
  assert_int_equal(r.steps_to_best, -1);
  assert_string_equal(r.family, "");
  json_decref(items);
  json_decref(progress);
}

static void test_task_name(void **state) {
  (void)state;
  char name[BENCH_NAME_MAX + 1];
  bench_task_name("kernelbench/level1/19_ReLU.py", name);
  assert_string_equal(name, "19_ReLU");
  bench_task_name("dir/a b+\xc3\xbc.py", name); /* ü is one character: one '_' */
  assert_string_equal(name, "a_b__");
  bench_task_name("dir/.py", name);
  assert_string_equal(name, "task");
  bench_task_name("plain", name);
  assert_string_equal(name, "plain");
  char long_path[300];
  memset(long_path, 'x', 200);
  memcpy(long_path + 200, ".py", 4);
  bench_task_name(long_path, name);
  assert_int_equal(strlen(name), BENCH_NAME_MAX);
}

static void test_parse_time(void **state) {
  (void)state;
  double t = 0;
  assert_int_equal(bench_parse_time("2026-11-29T07:42:04.123Z", &t), 0);
  assert_float_equal(t, 1795938124.123, 1e-6);
  assert_int_equal(bench_parse_time("1970-01-01T00:00:00Z", &t), 0);
  assert_float_equal(t, 0.0, 0);
  assert_int_equal(bench_parse_time("2024-02-29T23:59:59.5Z", &t), 0);
  assert_float_equal(t, 1709251199.5, 1e-6);
  t = 42;
  assert_int_equal(bench_parse_time("2026-11-29 07:42:04Z", &t), -1);
  assert_int_equal(bench_parse_time("2026-11-29T07:42:04.123", &t), -1);
  assert_int_equal(bench_parse_time("2026-13-29T07:42:04Z", &t), -1);
  assert_int_equal(bench_parse_time("2026-11-29T07:42:04.Z", &t), -1);
  assert_int_equal(bench_parse_time("2026-11-29T07:42:04Z+", &t), -1);
  assert_int_equal(bench_parse_time("", &t), -1);
  assert_int_equal(bench_parse_time(NULL, &t), -1);
  assert_float_equal(t, 42, 0);
}

static void test_states_and_families(void **state) {
  (void)state;
  static const char *const memory[] = {"pointwise", "reduction", "norm", "softmax",
                                       "scan",      "pooling",   "loss"};
  for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++)
    assert_true(bench_family_memory_bound(memory[i]));
  assert_false(bench_family_memory_bound("gemm"));
  assert_false(bench_family_memory_bound(""));
  assert_false(bench_family_memory_bound(NULL));
  assert_int_equal(bench_state_from_status("queued"), BENCH_QUEUED);
  assert_int_equal(bench_state_from_status("running"), BENCH_RUNNING);
  assert_int_equal(bench_state_from_status("succeeded"), BENCH_SUCCEEDED);
  assert_int_equal(bench_state_from_status("failed"), BENCH_FAILED);
  assert_int_equal(bench_state_from_status("cancelled"), BENCH_CANCELLED);
  assert_int_equal(bench_state_from_status("exploded"), BENCH_LOST);
  assert_true(bench_state_is_final(BENCH_CANCELLED));
  assert_false(bench_state_is_final(BENCH_RUNNING));
  assert_false(bench_state_is_final(BENCH_REFUSED));
  assert_string_equal(bench_state_name(BENCH_NOT_SUBMITTED), "not_submitted");
  assert_string_equal(bench_state_name(BENCH_LOST), "lost");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_table_unfinished),
      cmocka_unit_test(test_summary_numbers),
      cmocka_unit_test(test_summary_text),
      cmocka_unit_test(test_summary_empty),
      cmocka_unit_test(test_summary_json),
      cmocka_unit_test(test_result_json),
      cmocka_unit_test(test_finished_line),
      cmocka_unit_test(test_take_api),
      cmocka_unit_test(test_take_api_nothing_correct),
      cmocka_unit_test(test_task_name),
      cmocka_unit_test(test_parse_time),
      cmocka_unit_test(test_states_and_families),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
