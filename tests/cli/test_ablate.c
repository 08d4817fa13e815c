/* Tests of `opforge ablate`: usage errors, and a run of two programs under two arms
 * against the real server with the scripted evaluator of tests/engine and the test
 * proposer, whose table, summary, results file and memory namespaces are checked
 * against figures computed by hand. Also `opforge serve --search-config FILE`, the
 * server's default search settings the arms' settings go over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/common/child.h"

#define WAIT_MS 60000

static struct {
  char bin[PATH_MAX];
  char evaluator[PATH_MAX]; /* "" when the scripted evaluator was not built */
  char dir[256];
  bool have_bin;
} g;

static int group_setup(void **state) {
  (void)state;
  child_isolate();
  const char *bin = getenv("OPFORGE_BIN");
  const char *eval = getenv("OPFORGE_SCRIPTED_EVALUATOR");
  g.have_bin = bin && access(bin, X_OK) == 0;
  if (g.have_bin)
    snprintf(g.bin, sizeof g.bin, "%s", bin);
  if (eval && access(eval, X_OK) == 0)
    snprintf(g.evaluator, sizeof g.evaluator, "%s", eval);
  snprintf(g.dir, sizeof g.dir, "/tmp/opforge-ablate-XXXXXX");
  return mkdtemp(g.dir) ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  return child_group_teardown(-1, g.dir);
}

/* Writes g.dir/rel (parent directories created) and returns its path in out. */
static void scratch_file(const char *rel, const char *content, char *out, size_t outlen) {
  snprintf(out, outlen, "%s/%s", g.dir, rel);
  for (char *slash = strchr(out + strlen(g.dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    assert_true(mkdir(out, 0700) == 0 || errno == EEXIST);
    *slash = '/';
  }
  FILE *f = fopen(out, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(content, 1, strlen(content), f), strlen(content));
  assert_int_equal(fclose(f), 0);
}

/* Runs {bin, args...} to the end; returns the exit status with p's output collected. */
static int run_cli(struct proc *p, const char *const *args) {
  proc_start(p, g.bin, args, NULL, false);
  return proc_finish(p, WAIT_MS);
}

static void test_usage_errors(void **state) {
  (void)state;
  if (!g.have_bin)
    skip();
  char prog[PATH_MAX];
  scratch_file("usage/p.py", child_reference_ok, prog, sizeof prog);
  static const struct {
    const char *args[8];
    const char *err;
  } cases[] = {
    {{"ablate", "--steps", "3", NULL}, "error: missing FILES\n"},
    {{"ablate", "@", NULL}, "error: --steps N is required\n"},
    {{"ablate", "@", "--steps", "0", NULL}, "error: --steps must be 1..1000\n"},
    {{"ablate", "@", "--steps", "3", "--arms", "full,bogus", NULL},
     "error: --arms: unknown arm 'bogus' (known: full, noprefix, lastonly, nolocal, flat, "
     "refine, noskills, bestofn, htam, single, large, small, random; or all)\n"},
    {{"ablate", "@", "--steps", "3", "--arms", "full,full", NULL},
     "error: --arms: repeated arm 'full' (known: full, noprefix, lastonly, nolocal, flat, "
     "refine, noskills, bestofn, htam, single, large, small, random; or all)\n"},
    {{"ablate", "@", "--steps", "3", "--prefix", "Bad", NULL},
     "error: --prefix must be lower-case letters, digits, '_' and '-' (at most 55)\n"},
    {{"ablate", "@", "--steps", "3", "--proposer", "human", NULL},
     "error: --proposer must be one of builtin, llm, test\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[8];
    for (size_t k = 0; k < 8; k++)
      args[k] = cases[i].args[k] && strcmp(cases[i].args[k], "@") == 0 ? prog : cases[i].args[k];
    struct proc p;
    int rc = run_cli(&p, args);
    const char *err = text_str(&p.err);
    if (rc != 2 || strncmp(err, cases[i].err, strlen(cases[i].err)) != 0)
      print_error("case %zu: exit %d, stderr '%s'\n", i, rc, err);
    assert_int_equal(rc, 2);
    assert_memory_equal(err, cases[i].err, strlen(cases[i].err));
    assert_string_equal(text_str(&p.out), "");
    proc_clear(&p);
  }
}

/* A fixture of task (the server's name, "<program>.<arm>") whose evaluation the scripted
 * evaluator takes from "SCRIPT <what>"; the variant line keeps equal scripts apart. */
static void write_fixture(const char *task, int index, const char *what) {
  char source[512], rel[128], path[PATH_MAX];
  snprintf(source, sizeof source,
           "// SCRIPT %s\n// variant %s %d\nextern \"C\" __global__ void k(const float* x, "
           "float* y) { y[threadIdx.x] = x[threadIdx.x]; }\n", what, task, index);
  json_t *fixture = json_pack("{s:s, s:[], s:{s:[], s:[{s:s, s:[i,i,i], s:[i,i,i], s:i, "
                              "s:[{s:s}, {s:s}]}]}}", "source", source, "options", "plan",
                              "buffers", "launches", "kernel", "k", "grid", 1, 1, 1, "block",
                              32, 1, 1, "shared_bytes", 0, "args", "tensor", "input:0",
                              "tensor", "output:0");
  assert_non_null(fixture);
  char *text = json_dumps(fixture, JSON_INDENT(1));
  snprintf(rel, sizeof rel, "run/fixtures/%s/%02d.json", task, index);
  scratch_file(rel, text, path, sizeof path);
  free(text);
  json_decref(fixture);
}

/* Each program's steps under each arm (the test proposer replays them by step, so the
 * arms differ only as their fixtures do). The reference (step 0) runs at the scripted
 * evaluator's 2.1 ms; eager is 2.0 ms, the floor 1.0 ms, so a task whose best comes
 * within 0.97 of the floor (1.031 ms or less) ends at_floor. */
static void write_fixtures(void) {
  static const char *const alpha_full[] = {"correct 1.9", "compile", "correct 1.5",
                                           "correct 1.6", "wrong", "correct 1.2", "correct 1.3",
                                           "correct 1.1", "compile", "correct 1.0"};
  static const char *const alpha_refine[] = {"correct 1.8", "correct 1.7", "correct 1.6",
                                             "correct 1.15", "compile", "correct 1.12",
                                             "correct 1.5", "correct 1.4", "correct 1.3",
                                             "correct 1.2"};
  for (int i = 0; i < 10; i++) {
    write_fixture("alpha.full", i + 1, alpha_full[i]);
    write_fixture("alpha.refine", i + 1, alpha_refine[i]);
  }
  write_fixture("beta.full", 1, "wrong");
  write_fixture("beta.full", 2, "correct 2.5");
  write_fixture("beta.full", 3, "correct 0.9");
  write_fixture("beta.refine", 1, "compile");
  write_fixture("beta.refine", 2, "compile");
}

/* The report, by hand (budget 10 steps, so BEST@20 is unknown):
 *  alpha/full: best of steps 0..5 = min(2.1, 1.9, 1.5, 1.6) = 1.5; of 0..10: 1.0; within
 *    95% of the final 1.0 means <= 1.0/0.95 = 1.0526: first at step 10; 7 of 10 correct.
 *  alpha/refine: 0..5: 1.15; 0..10: 1.12; <= 1.12/0.95 = 1.1789 first at step 4 (1.15);
 *    9 of 10 correct.
 *  beta/full: wrong, 2.5, 0.9 (under the floor's 0.97: the task ends at_floor after 3
 *    steps), so the best after 5 and 10 steps is the final 0.9, reached at step 3; 2 of 3
 *    correct.
 *  beta/refine: two compile failures, then its fixtures repeat, which costs no step: the
 *    space is exhausted after 2 steps and the reference (2.1, step 0) stays best.
 *  Geomeans of eager/best: full at 5: sqrt(2/1.5 * 2/0.9) = 1.721326, at 10 and at the
 *    end sqrt(2/1.0 * 2/0.9) = 2.108185; refine at 5: sqrt(2/1.15 * 2/2.1) = 1.286979, at
 *    10 and the end sqrt(2/1.12 * 2/2.1) = 1.304101. Steps to 95%: (10 + 3)/2 = 6.5 and
 *    (4 + 0)/2 = 2.0. Correct: 9 of 13 = 69.2%, 9 of 12 = 75.0%. */
static const char expected_report[] =
    "arms:\n"
    "  full      htam+tree {} in t-full: HTAM's full method (1.978x in its paper) on "
    "AdaExplore's tree\n"
    "  refine    refine {} in t-refine: feedback-only refinement that reads no memory\n"
    "\n"
    "TASK   ARM       BEST@5   BEST@10   BEST@20     FINAL  TO_95  CORRECT  STATUS\n"
    "alpha  full      1.5000    1.0000         -    1.0000     10     7/10  succeeded\n"
    "alpha  refine    1.1500    1.1200         -    1.1200      4     9/10  succeeded\n"
    "beta   full      0.9000    0.9000         -    0.9000      3      2/3  succeeded\n"
    "beta   refine    2.1000    2.1000         -    2.1000      0      0/2  succeeded\n"
    "\n"
    "ARM     TASKS     GEO@5    GEO@10    GEO@20  GEO_FINAL  MEAN_TO_95  CORRECT\n"
    "full        2    1.721x    2.108x         -     2.108x         6.5  9/13 (69.2%)\n"
    "refine      2    1.287x    1.304x         -     1.304x         2.0  9/12 (75.0%)\n";

/* The sum of the directions' tries in memory namespace ns of the server at base. */
static long long directions_n(const char *base, const char *ns) {
  char path[128];
  snprintf(path, sizeof path, "/v1/memory/global?memory=%s", ns);
  json_t *page = NULL;
  assert_int_equal(child_http(base, "GET", path, &page), 200);
  long long n = 0;
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(page, "items"), i, node)
    n += json_integer_value(json_object_get(json_object_get(node, "stats"), "n"));
  json_decref(page);
  return n;
}

/* Checks the results file against the same figures. */
static void check_json(const char *path) {
  json_error_t jerr;
  json_t *doc = json_load_file(path, 0, &jerr);
  if (!doc)
    fail_msg("%s: %s", path, jerr.text);
  assert_int_equal(json_integer_value(json_object_get(doc, "steps")), 10);
  assert_int_equal(json_integer_value(json_object_get(doc, "seed")), 42);
  json_t *arms = json_object_get(doc, "arms"), *results = json_object_get(doc, "results");
  assert_int_equal(json_array_size(arms), 2);
  assert_int_equal(json_array_size(results), 4);
  json_t *full = json_array_get(arms, 0);
  assert_string_equal(json_string_value(json_object_get(full, "memory")), "t-full");
  assert_float_equal(json_real_value(json_object_get(full, "geomean_final")),
                     sqrt(2.0 * (2.0 / 0.9)), 1e-12);
  assert_float_equal(json_real_value(json_object_get(full, "geomean_at_5")),
                     sqrt((2.0 / 1.5) * (2.0 / 0.9)), 1e-12);
  json_t *r = json_array_get(results, 1);
  assert_string_equal(json_string_value(json_object_get(r, "arm")), "refine");
  json_t *at = json_object_get(r, "best_ms_at");
  assert_float_equal(json_real_value(json_object_get(at, "5")), 1.15, 0);
  assert_float_equal(json_real_value(json_object_get(at, "10")), 1.12, 0);
  assert_true(json_is_null(json_object_get(at, "20")));
  assert_int_equal(json_integer_value(json_object_get(r, "steps_to_95")), 4);
  assert_int_equal(json_integer_value(json_object_get(r, "correct")), 9);
  assert_int_equal(json_integer_value(json_object_get(r, "candidates")), 10);
  r = json_array_get(results, 2);
  assert_int_equal(json_integer_value(json_object_get(r, "steps")), 3);
  assert_float_equal(json_real_value(json_object_get(r, "eager_ms")), 2.0, 0);
  json_decref(doc);
}

static void test_scripted_run(void **state) {
  (void)state;
  if (!g.have_bin || !g.evaluator[0]) {
    print_message("skipped: no opforge binary or scripted evaluator\n");
    skip();
  }
  write_fixtures();
  char alpha[PATH_MAX], beta[PATH_MAX], fixtures[PATH_MAX], data[PATH_MAX], out[PATH_MAX];
  char base[64];
  scratch_file("run/progs/alpha.py", child_reference_ok, alpha, sizeof alpha);
  scratch_file("run/progs/beta.py", child_reference_ok, beta, sizeof beta);
  snprintf(fixtures, sizeof fixtures, "%s/run/fixtures", g.dir);
  snprintf(data, sizeof data, "%s/run/data", g.dir);
  snprintf(out, sizeof out, "%s/run/out.json", g.dir);
  const char *extra[] = {"--gpus", "0", "--evaluator", g.evaluator, "--fixtures", fixtures,
                         "--evaluate-deadline", "30", "--sandbox-env", "SCRIPTED_EVAL_*",
                         NULL};
  pid_t pid = child_server_start(g.bin, data, extra, base, WAIT_MS);
  assert_true(pid > 0);
  const char *args[] = {"ablate", alpha, beta, "--arms", "full,refine", "--steps", "10",
                        "--proposer", "test", "--prefix", "t", "--server", base, "--out", out,
                        NULL};
  struct proc p;
  int rc = run_cli(&p, args);
  if (rc != 0 || strcmp(text_str(&p.out), expected_report) != 0)
    print_error("ablate exited %d\nstdout:\n%s\nstderr:\n%s\n", rc, text_str(&p.out),
                text_str(&p.err));
  assert_int_equal(rc, 0);
  assert_string_equal(text_str(&p.out), expected_report);
  proc_clear(&p);
  check_json(out);
  /* Each arm wrote only its own namespace: 10 + 3 and 10 + 2 steps; the default none. */
  assert_int_equal(directions_n(base, "t-full"), 13);
  assert_int_equal(directions_n(base, "t-refine"), 12);
  assert_int_equal(directions_n(base, "default"), 0);
  /* Run again: the namespaces are recreated from the seed, so they count 13 and 12 again
   * (the same seed, the same fixtures, the same figures). */
  rc = run_cli(&p, args);
  assert_int_equal(rc, 0);
  assert_string_equal(text_str(&p.out), expected_report);
  proc_clear(&p);
  assert_int_equal(directions_n(base, "t-full"), 13);
  assert_int_equal(directions_n(base, "t-refine"), 12);
  assert_int_equal(child_server_stop(pid), 0);
}

/* serve --search-config: a bad file stops the start with exit 2 naming the option; a
 * good one sets the defaults a task's own settings go over, and the task records them. */
static void test_serve_search_config(void **state) {
  (void)state;
  if (!g.have_bin)
    skip();
  char bad[PATH_MAX], not_json[PATH_MAX], good[PATH_MAX], prog[PATH_MAX], data[PATH_MAX];
  scratch_file("cfg/bad.json", "{\"tau\": 0}", bad, sizeof bad);
  scratch_file("cfg/not.json", "{tau", not_json, sizeof not_json);
  scratch_file("cfg/good.json", "{\"large_step_prob\": 1, \"retrieval\": \"flat\"}", good,
               sizeof good);
  scratch_file("cfg/p.py", child_reference_ok, prog, sizeof prog);
  snprintf(data, sizeof data, "%s/cfg/data", g.dir);
  static const char *const wants[][2] = {
    {"bad", ": tau: must be in (0, 100]\n"},
    {"not", ": string or '}' expected near 'tau' (line 1)\n"},
    {"unknown", "--search-config: /nonexistent/s.json: unable to open"},
  };
  const char *files[] = {bad, not_json, "/nonexistent/s.json"};
  for (size_t i = 0; i < 3; i++) {
    const char *args[] = {"serve", "--listen", "127.0.0.1:0", "--data", data, "--gpus", "none",
                          "--search-config", files[i], NULL};
    struct proc p;
    assert_int_equal(run_cli(&p, args), 2);
    char prefix[PATH_MAX + 64];
    snprintf(prefix, sizeof prefix, "opforge serve: --search-config: %s", files[i]);
    const char *err = text_str(&p.err);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, wants[i][1]))
      print_error("%s: stderr '%s'\n", wants[i][0], err);
    assert_memory_equal(err, prefix, strlen(prefix));
    assert_non_null(strstr(err, wants[i][1]));
    proc_clear(&p);
  }
  char base[64];
  const char *extra[] = {"--gpus", "none", "--search-config", good, NULL};
  pid_t pid = child_server_start(g.bin, data, extra, base, WAIT_MS);
  assert_true(pid > 0);
  const char *submit[] = {"submit", prog, "--server", base, NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, submit), 0);
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%.36s", text_str(&p.out));
  proc_clear(&p);
  json_t *task = NULL;
  assert_int_equal(child_http(base, "GET", path, &task), 200);
  json_t *search = json_object_get(json_object_get(task, "options"), "search");
  assert_float_equal(json_number_value(json_object_get(search, "large_step_prob")), 1.0, 0);
  assert_string_equal(json_string_value(json_object_get(search, "retrieval")), "flat");
  assert_float_equal(json_number_value(json_object_get(search, "tree_c")), 0.3, 0);
  json_decref(task);
  assert_int_equal(child_server_stop(pid), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_scripted_run),
      cmocka_unit_test(test_serve_search_config),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
