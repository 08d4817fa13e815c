/* Tests of `opforge tune`: usage errors, every exit status, and runs against the real
 * server on port 0 with the scripted evaluator of tests/engine and the test proposer, so
 * that tasks run to their end and every figure is known: the summary table, the readable
 * progress lines (no carriage return, no escape code off a terminal), the live block on
 * a terminal, raw events, --json, --junit (parsed by Python's xml.etree when the venv is
 * there, and checked here in any case), --export (the files import in Python), and the
 * Idempotency-Key (a second run replays, --reuse reuses, another run id submits anew, a
 * task that failed is run again). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/common/child.h"

#define WAIT_MS 90000 /* the longest any one child may take */

static struct {
  char bin[PATH_MAX];
  char evaluator[PATH_MAX]; /* "" when the scripted evaluator was not built */
  char python[PATH_MAX];    /* a Python with torch, or "" */
  char dir[256];            /* scratch */
  char base[64];            /* the scripted server shared by most tests */
  char queued_base[64];     /* a --gpus none server: tasks stay queued */
  pid_t pid, queued_pid;
  bool have_bin;
} g;

/* ---- scratch files ---- */

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

/* A fixture candidate of task `task` whose evaluation the scripted evaluator takes from
 * "SCRIPT <what>". */
static void write_fixture(const char *task, int index, const char *what) {
  static const char kernel[] =
      "extern \"C\" __global__ void softmax_rows(const float* __restrict__ x, float* "
      "__restrict__ y, int cols) {\n  int row = blockIdx.x;\n  const float* in = x + (long)row "
      "* cols;\n  float* out = y + (long)row * cols;\n  for (int c = threadIdx.x; c < cols; c "
      "+= blockDim.x) out[c] = in[c];\n}\n";
  char source[1024], rel[128], path[PATH_MAX];
  snprintf(source, sizeof source, "// SCRIPT %s\n%s", what, kernel);
  json_t *fixture = json_pack(
      "{s:s, s:[s], s:{s:[], s:[{s:s, s:[i,i,i], s:[i,i,i], s:i, s:[{s:s}, {s:s}, {s:i}]}]}}",
      "source", source, "options", "-DROWS=256", "plan", "buffers", "launches", "kernel",
      "softmax_rows", "grid", 256, 1, 1, "block", 32, 1, 1, "shared_bytes", 0, "args", "tensor",
      "input:0", "tensor", "output:0", "i32", 512);
  assert_non_null(fixture);
  char *text = json_dumps(fixture, JSON_INDENT(1));
  snprintf(rel, sizeof rel, "fixtures/%s/%02d.json", task, index);
  scratch_file(rel, text, path, sizeof path);
  free(text);
  json_decref(fixture);
}

/* Writes program g.dir/rel (a valid reference). */
static void program(const char *rel) {
  char path[PATH_MAX];
  scratch_file(rel, child_reference_ok, path, sizeof path);
}

/* The fixtures of every task the tests run. By hand, with eager 2.0 ms, floor 1.0 ms and
 * each reference correct at 2.1 ms (0.95x):
 *   alpha  1.0 ms: 2.00x, at the floor after 1 step
 *   beta   1.25 ms: 1.60x, then nothing more to try after 1 step
 *   gamma  a compile failure, then 1.6 ms: 1.25x after 2 steps
 *   delta, epsilon, term_*  1.25 ms: 1.60x after 1 step
 *   graphfail_lib  a compile failure: the reference (library steps only) stays best
 *   allfail_*  the reference and every step wrong: no correct candidate. */
static void write_fixtures(void) {
  write_fixture("alpha", 1, "correct 1.0");
  write_fixture("beta", 1, "correct 1.25");
  write_fixture("gamma", 1, "compile");
  write_fixture("gamma", 2, "correct 1.6");
  write_fixture("graphfail_lib", 1, "compile");
  static const char *const once[] = {"delta", "epsilon", "term_a", "term_b", "zeta"};
  for (size_t i = 0; i < sizeof once / sizeof once[0]; i++)
    write_fixture(once[i], 1, "correct 1.25");
}

/* ---- set-up ---- */

/* A Python with torch: $OPFORGE_PYTHON, else the venv scripts/test makes; "" if none. */
static void find_python(void) {
  const char *env = getenv("OPFORGE_PYTHON"), *home = getenv("HOME");
  char venv[PATH_MAX] = "";
  if (home)
    snprintf(venv, sizeof venv, "%s/.cache/opforge/venv/bin/python", home);
  const char *pick = env && access(env, X_OK) == 0 ? env : access(venv, X_OK) == 0 ? venv : "";
  snprintf(g.python, sizeof g.python, "%s", pick);
}

static int group_setup(void **state) {
  (void)state;
  child_isolate();
  /* Runs pick their key's scope from these: the tests set them themselves. */
  unsetenv("GITHUB_RUN_ID"), unsetenv("CI_PIPELINE_ID"), unsetenv("BUILD_TAG");
  const char *bin = getenv("OPFORGE_BIN"), *eval = getenv("OPFORGE_SCRIPTED_EVALUATOR");
  g.have_bin = bin && access(bin, X_OK) == 0 && eval && access(eval, X_OK) == 0;
  snprintf(g.dir, sizeof g.dir, "/tmp/opforge-tune-XXXXXX");
  if (!mkdtemp(g.dir))
    return -1;
  if (!g.have_bin)
    return 0;
  snprintf(g.bin, sizeof g.bin, "%s", bin);
  snprintf(g.evaluator, sizeof g.evaluator, "%s", eval);
  find_python();
  write_fixtures();
  char data[PATH_MAX], fixtures[PATH_MAX], queued[PATH_MAX];
  snprintf(data, sizeof data, "%s/data", g.dir);
  snprintf(fixtures, sizeof fixtures, "%s/fixtures", g.dir);
  snprintf(queued, sizeof queued, "%s/queued-data", g.dir);
  const char *extra[] = {"--gpus", "0", "--evaluator", g.evaluator, "--fixtures", fixtures,
                         "--evaluate-deadline", "30", "--sandbox-env", "SCRIPTED_EVAL_*", NULL};
  g.pid = child_server_start(g.bin, data, extra, g.base, WAIT_MS);
  const char *none[] = {"--gpus", "none", NULL};
  g.queued_pid = g.pid > 0 ? child_server_start(g.bin, queued, none, g.queued_base, WAIT_MS) : -1;
  return g.pid > 0 && g.queued_pid > 0 ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  int rc = g.queued_pid > 0 && child_server_stop(g.queued_pid) != 0 ? -1 : 0;
  return child_group_teardown(g.pid, g.dir) != 0 ? -1 : rc;
}

#define NEED_SERVER()                                                                      \
  do {                                                                                     \
    if (!g.have_bin) {                                                                     \
      print_message("skipped: $OPFORGE_BIN or $OPFORGE_SCRIPTED_EVALUATOR is not set\n");   \
      skip();                                                                              \
    }                                                                                      \
  } while (0)

/* ---- running the CLI ---- */

/* Runs `opforge tune args...` (env: NAME, value pairs or NULL) to its end; returns the
 * exit status with p's out and err filled. */
static int run_tune(struct proc *p, const char *const *args, const char *const *env, bool pty) {
  const char *argv[48] = {"tune"};
  size_t n = 1;
  for (; args[n - 1]; n++)
    argv[n] = args[n - 1];
  argv[n] = NULL;
  proc_start(p, g.bin, argv, env, pty);
  return proc_finish(p, WAIT_MS);
}

/* The lines of text that start with prefix, each with its newline, in order (caller
 * frees). */
static char *lines_with(const char *text, const char *prefix) {
  struct text t = {0};
  for (const char *line = text; *line;) {
    size_t len = strcspn(line, "\n");
    if (strncmp(line, prefix, strlen(prefix)) == 0)
      text_add(&t, line, len + (line[len] == '\n'));
    line += len + (line[len] == '\n');
  }
  return t.s ? t.s : strdup("");
}

/* Asserts s has no carriage return and no escape character. */
static void assert_plain(const char *s) {
  if (strchr(s, '\r') || strchr(s, '\033'))
    print_error("not plain text: '%s'\n", s);
  assert_null(strchr(s, '\r'));
  assert_null(strchr(s, '\033'));
}

/* How many tasks named name the server at base holds. */
static size_t tasks_named(const char *base, const char *name) {
  json_t *list = NULL;
  assert_int_equal(child_http(base, "GET", "/v1/tasks?limit=500", &list), 200);
  size_t n = 0, i;
  json_t *task;
  json_array_foreach(json_object_get(list, "items"), i, task)
    n += strcmp(json_string_value(json_object_get(task, "name")), name) == 0;
  json_decref(list);
  return n;
}

static json_t *load_json(const char *path) {
  json_error_t err;
  json_t *doc = json_load_file(path, 0, &err);
  if (!doc)
    print_error("%s: %s\n", path, err.text);
  assert_non_null(doc);
  return doc;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  struct text t = {0};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    text_add(&t, buf, n);
  fclose(f);
  return t.s ? t.s : strdup("");
}

/* ---- usage ---- */

struct usage_case {
  const char *args[12];
  const char *err;  /* stderr exactly; "@D" stands for the scratch directory */
  bool then_usage;  /* the usage text follows */
};

static void test_usage_errors(void **state) {
  (void)state;
  NEED_SERVER();
  program("usage/one/x.py");
  program("usage/two/x.py");
  char empty[PATH_MAX];
  snprintf(empty, sizeof empty, "%s/usage/empty", g.dir);
  assert_int_equal(mkdir(empty, 0700), 0);
  char one[PATH_MAX], two[PATH_MAX], absent[PATH_MAX];
  snprintf(one, sizeof one, "%s/usage/one", g.dir);
  snprintf(two, sizeof two, "%s/usage/two", g.dir);
  snprintf(absent, sizeof absent, "%s/usage/absent.py", g.dir);
  struct usage_case cases[] = {
      {{NULL}, "error: missing PATH\n", true},
      {{one, "--wait-limit", "0", NULL}, "error: --wait-limit must be 1..2592000\n", false},
      {{one, "--fail-under", "fast", NULL}, "error: --fail-under expects a number, got 'fast'\n",
       false},
      {{one, "--reuse", "--no-idempotency", NULL},
       "error: --reuse works through the Idempotency-Key: it cannot go with --no-idempotency\n",
       false},
      {{one, "--search", "nokey", NULL}, "error: --search expects KEY=VALUE, got 'nokey'\n",
       false},
      {{one, "--bogus", NULL}, "error: unknown option '--bogus'\n", true},
      {{absent, "--server", g.base, NULL}, NULL, false},
      {{empty, "--server", g.base, NULL}, "error: no .py file to run\n", false},
      {{one, two, "--server", g.base, NULL}, NULL, false},
  };
  char want_absent[PATH_MAX * 2], want_twice[PATH_MAX * 3];
  snprintf(want_absent, sizeof want_absent, "error: cannot read %s: No such file or directory\n",
           absent);
  snprintf(want_twice, sizeof want_twice,
           "error: %s/x.py and %s/x.py are both named x: their results would collide\n", one, two);
  cases[6].err = want_absent;
  cases[8].err = want_twice;
  size_t before = tasks_named(g.base, "x");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct proc p;
    int rc = run_tune(&p, cases[i].args, NULL, false);
    const char *err = text_str(&p.err), *want = cases[i].err;
    bool ok = rc == 2 && strcmp(text_str(&p.out), "") == 0 &&
              (cases[i].then_usage
                   ? strncmp(err, want, strlen(want)) == 0 &&
                         strncmp(err + strlen(want), "usage: opforge tune PATH...", 27) == 0
                   : strcmp(err, want) == 0);
    if (!ok)
      print_error("case %zu: exit %d, stderr '%s', want '%s'\n", i, rc, err, want);
    assert_true(ok);
    proc_clear(&p);
  }
  assert_int_equal(tasks_named(g.base, "x"), before);

  /* --help on stdout, with the exit statuses. */
  struct proc p;
  const char *help[] = {"--help", NULL};
  assert_int_equal(run_tune(&p, help, NULL, false), 0);
  assert_memory_equal(text_str(&p.out), "usage: opforge tune PATH... [options]\n", 38);
  static const char *const statuses[] = {
      "  0  every task succeeded (and met --fail-under)\n",
      "  1  a task failed or was cancelled, or its speed-up is under --fail-under\n",
      "  3  the server could not be reached\n",
      "  4  the server refused the token (401 or 403)\n",
      "  5  --wait-limit passed with tasks unfinished (and none failed)\n"};
  for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
    assert_non_null(strstr(text_str(&p.out), statuses[i]));
  assert_non_null(strstr(text_str(&p.out), "  --stop-at-floor X"));
  assert_string_equal(text_str(&p.err), "");
  proc_clear(&p);
}

/* An option the server refuses: its code, message and field, exit 2, nothing queued. */
static void test_server_refuses_an_option(void **state) {
  (void)state;
  NEED_SERVER();
  char dir[PATH_MAX];
  program("refuse/r1.py");
  program("refuse/r2.py");
  snprintf(dir, sizeof dir, "%s/refuse", g.dir);
  const char *args[] = {dir, "--server", g.base, "--atol", "2", NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, false), 2);
  assert_string_equal(text_str(&p.err),
                      "error: invalid_field: tolerance.atol must be in (0, 1] (field "
                      "tolerance.atol)\n");
  assert_string_equal(text_str(&p.out),
                      "TASK  STATUS         SPEEDUP  BEST_MS  STEPS  STOP  ORIGIN  NOTE\n"
                      "r1    refused        -        -        -      -     -       "
                      "invalid_field: tolerance.atol must be in (0, 1] (field tolerance.atol)\n"
                      "r2    not_submitted  -        -        -      -     -\n"
                      "\n"
                      "tasks: 2 (succeeded 0, failed 0, cancelled 0, refused 1, lost 0, "
                      "unfinished 1)\n"
                      "submitted: new 0, replayed 0, reused 0\n"
                      "exit status: 2\n");
  assert_int_equal(tasks_named(g.base, "r1") + tasks_named(g.base, "r2"), 0);
  proc_clear(&p);
}

/* ---- a run to the end ---- */

/* The stdout of the scripted run of alpha, beta and gamma (see write_fixtures). */
static const char three_report[] =
    "TASK   STATUS     SPEEDUP  BEST_MS  STEPS  STOP             ORIGIN  NOTE\n"
    "alpha  succeeded  2.00x    1.0000   1/4    at_floor         new\n"
    "beta   succeeded  1.60x    1.2500   1/4    space_exhausted  new\n"
    "gamma  succeeded  1.25x    1.6000   2/4    space_exhausted  new\n"
    "\n"
    "tasks: 3 (succeeded 3, failed 0, cancelled 0, refused 0, lost 0, unfinished 0)\n"
    "submitted: new 3, replayed 0, reused 0\n"
    "under --fail-under 1.00x: 0\n"
    "exit status: 0\n";

/* Checks the progress lines of one task of the scripted run: exactly these, in order,
 * where a line ending in '*' is a prefix (a step's direction and strategy come from the
 * shared memory) and "@ID" stands for the task's id. */
static void check_task_lines(const char *err, const char *name, const char *id,
                             const char *const *want, size_t n) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "[%s] ", name);
  char *got = lines_with(err, prefix);
  const char *line = got;
  for (size_t i = 0; i < n; i++) {
    char expect[512];
    const char *at = strstr(want[i], "@ID");
    if (at)
      snprintf(expect, sizeof expect, "%.*s%s%s", (int)(at - want[i]), want[i], id, at + 3);
    else
      snprintf(expect, sizeof expect, "%s", want[i]);
    size_t len = strcspn(line, "\n"), elen = strlen(expect);
    bool prefix_only = elen > 0 && expect[elen - 1] == '*';
    bool ok = prefix_only ? len >= elen - 1 && strncmp(line, expect, elen - 1) == 0
                          : len == elen && strncmp(line, expect, len) == 0;
    if (!ok)
      print_error("%s line %zu: '%.*s', want '%s'\nall:\n%s", name, i, (int)len, line, expect,
                  got);
    assert_true(ok);
    line += len + (line[len] == '\n');
  }
  if (*line)
    print_error("%s: more lines than expected:\n%s", name, line);
  assert_string_equal(line, "");
  free(got);
}

/* The ids of the tasks of a results document, in order. */
static void result_ids(const json_t *doc, char ids[][64], size_t n) {
  json_t *tasks = json_object_get(doc, "tasks");
  assert_int_equal(json_array_size(tasks), n);
  for (size_t i = 0; i < n; i++) {
    const char *id = json_string_value(json_object_get(json_array_get(tasks, i), "id"));
    assert_non_null(id);
    assert_true(child_is_uuid_v4(id, strlen(id)));
    snprintf(ids[i], 64, "%s", id);
  }
}

/* Checks one task of the results document. */
static void check_result(const json_t *t, const char *name, double speedup, double ms,
                         long steps, const char *stop, const char *origin, bool passed,
                         const char *export_dir) {
  char url[256], model[PATH_MAX], kernel[PATH_MAX];
  assert_string_equal(json_string_value(json_object_get(t, "name")), name);
  assert_string_equal(json_string_value(json_object_get(t, "status")), "succeeded");
  assert_string_equal(json_string_value(json_object_get(t, "origin")), origin);
  assert_int_equal(json_is_true(json_object_get(t, "passed")), passed);
  assert_float_equal(json_number_value(json_object_get(t, "best_speedup")), speedup, 1e-9);
  assert_float_equal(json_number_value(json_object_get(t, "best_ms")), ms, 1e-12);
  assert_float_equal(json_number_value(json_object_get(t, "eager_ms")), 2.0, 1e-12);
  assert_int_equal(json_integer_value(json_object_get(t, "steps")), steps);
  assert_int_equal(json_integer_value(json_object_get(t, "budget_steps")), 4);
  assert_string_equal(json_string_value(json_object_get(t, "stop_reason")), stop);
  snprintf(url, sizeof url, "%s/v1/tasks/%s", g.base,
           json_string_value(json_object_get(t, "id")));
  assert_string_equal(json_string_value(json_object_get(t, "url")), url);
  assert_true(json_is_null(json_object_get(t, "error")));
  json_t *exp = json_object_get(t, "export");
  if (!export_dir) {
    assert_true(json_is_null(exp));
    return;
  }
  snprintf(model, sizeof model, "%s/%s_new.py", export_dir, name);
  snprintf(kernel, sizeof kernel, "%s/%s.cu", export_dir, name);
  assert_string_equal(json_string_value(json_object_get(exp, "model_new")), model);
  assert_string_equal(json_string_value(json_object_get(exp, "kernel")), kernel);
  assert_true(json_is_null(json_object_get(exp, "note")));
}

/* Finds `<testcase ... name="name"` in xml and returns its element up to </testcase>
 * (caller frees). */
static char *testcase_of(const char *xml, const char *name) {
  char needle[128];
  snprintf(needle, sizeof needle, "<testcase classname=\"opforge.tune\" name=\"%s\"", name);
  const char *start = strstr(xml, needle);
  assert_non_null(start);
  const char *end = strstr(start, "</testcase>");
  assert_non_null(end);
  return strndup(start, (size_t)(end - start));
}

/* The JUnit file, checked here: three cases with their figures and verdicts. */
static void check_junit_text(const char *path, const char *const *names,
                             const char *const *speedups, const char *verdict) {
  char *xml = read_file(path);
  assert_memory_equal(xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites ", 51);
  size_t cases = 0;
  for (const char *p = strstr(xml, "<testcase "); p; p = strstr(p + 1, "<testcase "))
    cases++;
  assert_int_equal(cases, 3);
  for (size_t i = 0; i < 3; i++) {
    char *one = testcase_of(xml, names[i]), prop[96];
    snprintf(prop, sizeof prop, "<property name=\"speedup\" value=\"%s\"/>", speedups[i]);
    assert_non_null(strstr(one, prop));
    assert_non_null(strstr(one, "<property name=\"url\" value=\"http://127.0.0.1:"));
    assert_int_equal(strstr(one, "<failure ") != NULL, verdict != NULL);
    if (verdict)
      assert_non_null(strstr(one, verdict));
    free(one);
  }
  assert_non_null(strstr(xml, "  </testsuite>\n</testsuites>\n"));
  free(xml);
}

/* Runs a Python check (script, then args) with the venv's Python; returns its stdout
 * (caller frees), or NULL when there is no Python with torch here (said so). */
static char *run_python(const char *script, const char *const *args) {
  if (!g.python[0]) {
    print_message("note: no Python with torch ($OPFORGE_PYTHON, the venv): its checks "
                  "are skipped\n");
    return NULL;
  }
  const char *argv[16] = {"-c", script};
  size_t n = 2;
  for (size_t i = 0; args[i] && n < 15; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  struct proc p;
  proc_start(&p, g.python, argv, NULL, false);
  int rc = proc_finish(&p, WAIT_MS);
  if (rc != 0)
    print_error("python exited %d: %s\n", rc, text_str(&p.err));
  assert_int_equal(rc, 0);
  char *out = strdup(text_str(&p.out));
  proc_clear(&p);
  return out;
}

/* xml.etree parses the report; each case's figures, task id and verdict; then each
 * exported file runs after its reference, as KernelBench's eval does, and defines a
 * ModelNew module. */
static const char python_check[] =
    "import sys, xml.etree.ElementTree as ET\n"
    "root = ET.parse(sys.argv[1]).getroot()\n"
    "suite = root.find('testsuite')\n"
    "print(root.tag, suite.get('tests'), suite.get('failures'), suite.get('errors'))\n"
    "for c in suite.findall('testcase'):\n"
    "    p = {q.get('name'): q.get('value') for q in c.find('properties')}\n"
    "    v = [e.tag + ':' + e.get('type') for e in c if e.tag in ('failure', 'error')]\n"
    "    print(c.get('name'), p['speedup'], p['stop_reason'], p['url'].split('/')[-1],\n"
    "          v[0] if v else 'passed')\n"
    "if len(sys.argv) > 2:\n"
    "    import torch\n"
    "    for name in sys.argv[4:]:\n"
    "        ctx = {}\n"
    "        exec(open(sys.argv[3] + '/' + name + '.py').read(), ctx)\n"
    "        exec(open(sys.argv[2] + '/' + name + '_new.py').read(), ctx)\n"
    "        print(name, issubclass(ctx['ModelNew'], torch.nn.Module))\n";

/* Three programs to their end: exit 0 with --fail-under 1.0, the table, the lines, the
 * results, the JUnit report and the exports; then the same run with --fail-under 100
 * replays the same three tasks (no new one on the server) and exits 1. */
static void test_three_programs(void **state) {
  (void)state;
  NEED_SERVER();
  program("three/alpha.py"), program("three/beta.py"), program("three/gamma.py");
  char dir[PATH_MAX], out[PATH_MAX], json[PATH_MAX], junit[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/three", g.dir);
  snprintf(out, sizeof out, "%s/three-out/models", g.dir);
  snprintf(json, sizeof json, "%s/three.json", g.dir);
  snprintf(junit, sizeof junit, "%s/three.xml", g.dir);
  const char *args[] = {dir, "--server", g.base, "--proposer", "test", "--steps", "4",
                        "--fail-under", "1.0", "--export", out, "--json", json, "--junit",
                        junit, NULL};
  struct proc p;
  int rc = run_tune(&p, args, NULL, false);
  if (rc != 0)
    print_error("tune exited %d:\n%s\n%s", rc, text_str(&p.out), text_str(&p.err));
  assert_int_equal(rc, 0);
  assert_string_equal(text_str(&p.out), three_report);
  assert_plain(text_str(&p.err));
  json_t *doc = load_json(json);
  char ids[3][64];
  result_ids(doc, ids, 3);
  const char *const alpha[] = {
      "[alpha] submitted: task @ID", "[alpha] queued", "[alpha] running",
      "[alpha] profiled: eager 2.00 ms, torch.compile 1.60 ms",
      "[alpha] step 0/4 reference: correct 2.10 ms, 0.95x (best 0.95x)",
      "[alpha] step 1/4 *",
      "[alpha] succeeded: best 2.00x (1.00 ms) after 1 step, stop at_floor"};
  const char *const gamma[] = {
      "[gamma] submitted: task @ID", "[gamma] queued", "[gamma] running",
      "[gamma] profiled: eager 2.00 ms, torch.compile 1.60 ms",
      "[gamma] step 0/4 reference: correct 2.10 ms, 0.95x (best 0.95x)",
      "[gamma] step 1/4 *", "[gamma] step 2/4 *",
      "[gamma] succeeded: best 1.25x (1.60 ms) after 2 steps, stop space_exhausted"};
  check_task_lines(text_str(&p.err), "alpha", ids[0], alpha, 7);
  check_task_lines(text_str(&p.err), "gamma", ids[2], gamma, 8);
  char *gamma_lines = lines_with(text_str(&p.err), "[gamma] step ");
  assert_non_null(strstr(gamma_lines, ": compile/syntax_error (best 0.95x)\n[gamma] step 2/4 "));
  assert_non_null(strstr(gamma_lines, ": correct 1.60 ms, 1.25x (best 1.25x)\n"));
  free(gamma_lines);
  proc_clear(&p);

  json_t *tasks = json_object_get(doc, "tasks");
  check_result(json_array_get(tasks, 0), "alpha", 2.0, 1.0, 1, "at_floor", "new", true, out);
  check_result(json_array_get(tasks, 1), "beta", 1.6, 1.25, 1, "space_exhausted", "new", true,
               out);
  check_result(json_array_get(tasks, 2), "gamma", 1.25, 1.6, 2, "space_exhausted", "new", true,
               out);
  assert_true(json_is_true(json_object_get(doc, "complete")));
  assert_int_equal(json_integer_value(json_object_get(doc, "exit_status")), 0);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "summary"),
                                                      "succeeded")), 3);
  json_decref(doc);
  static const char *const names[] = {"alpha", "beta", "gamma"};
  static const char *const speedups[] = {"2.0000", "1.6000", "1.2500"};
  check_junit_text(junit, names, speedups, NULL);
  for (size_t i = 0; i < 3; i++) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s.cu", out, names[i]);
    char *cu = read_file(path);
    assert_non_null(strstr(cu, "__global__ void softmax_rows("));
    free(cu);
  }
  const char *py_args[] = {junit, out, dir, "alpha", "beta", "gamma", NULL};
  char *py = run_python(python_check, py_args);
  if (py) {
    char want[1024];
    snprintf(want, sizeof want,
             "testsuites 3 0 0\n"
             "alpha 2.0000 at_floor %s passed\nbeta 1.6000 space_exhausted %s passed\n"
             "gamma 1.2500 space_exhausted %s passed\n"
             "alpha True\nbeta True\ngamma True\n", ids[0], ids[1], ids[2]);
    assert_string_equal(py, want);
    free(py);
  }

  /* Again, with a threshold none of them meets: the same tasks, replayed, and exit 1. */
  const char *again[] = {dir, "--server", g.base, "--proposer", "test", "--steps", "4",
                         "--fail-under", "100", "--json", json, "--junit", junit, NULL};
  assert_int_equal(run_tune(&p, again, NULL, false), 1);
  assert_string_equal(
      text_str(&p.out),
      "TASK   STATUS     SPEEDUP  BEST_MS  STEPS  STOP             ORIGIN    NOTE\n"
      "alpha  succeeded  2.00x    1.0000   1/4    at_floor         replayed  under --fail-under "
      "100.00x\n"
      "beta   succeeded  1.60x    1.2500   1/4    space_exhausted  replayed  under --fail-under "
      "100.00x\n"
      "gamma  succeeded  1.25x    1.6000   2/4    space_exhausted  replayed  under --fail-under "
      "100.00x\n"
      "\n"
      "tasks: 3 (succeeded 3, failed 0, cancelled 0, refused 0, lost 0, unfinished 0)\n"
      "submitted: new 0, replayed 3, reused 0\n"
      "under --fail-under 100.00x: 3\n"
      "exit status: 1\n");
  const char *const alpha_again[] = {
      "[alpha] replayed: task @ID, succeeded, best 2.00x (an earlier run submitted it)",
      "[alpha] succeeded: best 2.00x (1.00 ms) after 1 step, stop at_floor"};
  check_task_lines(text_str(&p.err), "alpha", ids[0], alpha_again, 2);
  assert_plain(text_str(&p.err));
  proc_clear(&p);
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(tasks_named(g.base, names[i]), 1);
  doc = load_json(json);
  char again_ids[3][64];
  result_ids(doc, again_ids, 3);
  for (size_t i = 0; i < 3; i++)
    assert_string_equal(again_ids[i], ids[i]);
  check_result(json_array_get(json_object_get(doc, "tasks"), 1), "beta", 1.6, 1.25, 1,
               "space_exhausted", "replayed", false, NULL);
  json_decref(doc);
  check_junit_text(junit, names, speedups, "<failure type=\"under_threshold\" message=\"best "
                                           "speed-up ");
  const char *py_again[] = {junit, NULL};
  py = run_python(python_check, py_again);
  if (py) {
    char want[1024];
    snprintf(want, sizeof want,
             "testsuites 3 3 0\n"
             "alpha 2.0000 at_floor %s failure:under_threshold\n"
             "beta 1.6000 space_exhausted %s failure:under_threshold\n"
             "gamma 1.2500 space_exhausted %s failure:under_threshold\n", ids[0], ids[1], ids[2]);
    assert_string_equal(py, want);
    free(py);
  }
}

/* A best of library steps only: its KernelBench file is written, it has no kernel
 * source, the summary says so, and the run does not fail for it. */
static void test_library_only_best(void **state) {
  (void)state;
  NEED_SERVER();
  char file[PATH_MAX], out[PATH_MAX], json[PATH_MAX], path[PATH_MAX + 32];
  scratch_file("libonly/graphfail_lib.py", child_reference_ok, file, sizeof file);
  snprintf(out, sizeof out, "%s/libonly-out", g.dir);
  snprintf(json, sizeof json, "%s/libonly.json", g.dir);
  const char *args[] = {file, "--server", g.base, "--proposer", "test", "--steps", "2",
                        "--export", out, "--json", json, NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, false), 0);
  static const char note[] = "the best runs library steps only: it has no kernel source of its own";
  char want[1024];
  snprintf(want, sizeof want,
           "TASK           STATUS     SPEEDUP  BEST_MS  STEPS  STOP             ORIGIN  NOTE\n"
           "graphfail_lib  succeeded  0.95x    2.1000   1/2    space_exhausted  new     %s\n"
           "\n"
           "tasks: 1 (succeeded 1, failed 0, cancelled 0, refused 0, lost 0, unfinished 0)\n"
           "submitted: new 1, replayed 0, reused 0\n"
           "exit status: 0\n", note);
  assert_string_equal(text_str(&p.out), want);
  proc_clear(&p);
  snprintf(path, sizeof path, "%s/graphfail_lib_new.py", out);
  char *model = read_file(path);
  assert_memory_equal(model, "# ---- opforge export ----", 25);
  free(model);
  snprintf(path, sizeof path, "%s/graphfail_lib.cu", out);
  assert_int_equal(access(path, F_OK), -1);
  json_t *doc = load_json(json);
  json_t *exp = json_object_get(json_array_get(json_object_get(doc, "tasks"), 0), "export");
  assert_true(json_is_string(json_object_get(exp, "model_new")));
  assert_true(json_is_null(json_object_get(exp, "kernel")));
  assert_string_equal(json_string_value(json_object_get(exp, "note")), note);
  json_decref(doc);
}

/* ---- each exit status ---- */

/* 3: nothing listens. Each keyed try says so (the key makes trying again safe); nothing
 * on stdout; --json still says what happened. */
static void test_exit_unreachable(void **state) {
  (void)state;
  NEED_SERVER();
  char url[64], prefix[128], file[PATH_MAX], json[PATH_MAX];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", child_dead_port());
  snprintf(prefix, sizeof prefix, "error: cannot reach %s: ", url);
  scratch_file("unreach/u.py", child_reference_ok, file, sizeof file);
  snprintf(json, sizeof json, "%s/unreach.json", g.dir);
  const char *args[] = {file, "--server", url, "--json", json, NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, false), 3);
  assert_string_equal(text_str(&p.out), "");
  char *lines = lines_with(text_str(&p.err), prefix);
  assert_string_equal(lines, text_str(&p.err));
  assert_int_equal(strlen(lines) > 0, true);
  free(lines);
  proc_clear(&p);
  json_t *doc = load_json(json);
  assert_int_equal(json_integer_value(json_object_get(doc, "exit_status")), 3);
  json_t *t = json_array_get(json_object_get(doc, "tasks"), 0);
  assert_string_equal(json_string_value(json_object_get(t, "status")), "not_submitted");
  assert_true(json_is_null(json_object_get(t, "id")));
  json_decref(doc);
}

/* 4: a server with a token file refuses no token (401) and a wrong one (403); the right
 * one gets through (and the wait limit ends that run: 5). */
static void test_exit_auth(void **state) {
  (void)state;
  NEED_SERVER();
  static const char token[] = "0123456789abcdef-tune-test";
  char data[PATH_MAX], tokfile[PATH_MAX + 16], base[64], file[PATH_MAX];
  snprintf(data, sizeof data, "%s/tokdata", g.dir);
  assert_int_equal(mkdir(data, 0700), 0);
  snprintf(tokfile, sizeof tokfile, "%s/tokens", data);
  FILE *f = fopen(tokfile, "w");
  assert_non_null(f);
  fprintf(f, "%s\n", token);
  fclose(f);
  const char *extra[] = {"--gpus", "none", "--token-file", tokfile, NULL};
  pid_t pid = child_server_start(g.bin, data, extra, base, WAIT_MS);
  assert_true(pid > 0);
  scratch_file("auth/a.py", child_reference_ok, file, sizeof file);
  const char *args[] = {file, "--server", base, NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, false), 4);
  assert_string_equal(text_str(&p.err), "error: unauthorized: this server needs "
                                        "'Authorization: Bearer <token>' for writes\n");
  assert_string_equal(text_str(&p.out), "");
  proc_clear(&p);
  const char *wrong[] = {"OPFORGE_TOKEN", "wrong-wrong-wrong-wrong", NULL};
  assert_int_equal(run_tune(&p, args, wrong, false), 4);
  assert_string_equal(text_str(&p.err), "error: forbidden: the bearer token is not accepted\n");
  proc_clear(&p);
  const char *with[] = {file, "--server", base, "--token-file", tokfile, "--wait-limit", "1",
                        NULL};
  assert_int_equal(run_tune(&p, with, wrong, false), 5);
  proc_clear(&p);
  assert_int_equal(child_server_stop(pid), 0);
}

/* 5: tasks that never start (--gpus none) outlast --wait-limit: the table says queued,
 * the results are incomplete, JUnit skips them, the tasks stay on the server. */
static void test_exit_wait_limit(void **state) {
  (void)state;
  NEED_SERVER();
  char file[PATH_MAX], json[PATH_MAX], junit[PATH_MAX];
  scratch_file("waiting/w1.py", child_reference_ok, file, sizeof file);
  snprintf(json, sizeof json, "%s/waiting.json", g.dir);
  snprintf(junit, sizeof junit, "%s/waiting.xml", g.dir);
  const char *args[] = {file, "--server", g.queued_base, "--wait-limit", "1", "--json", json,
                        "--junit", junit, NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, false), 5);
  assert_string_equal(text_str(&p.out),
                      "TASK  STATUS  SPEEDUP  BEST_MS  STEPS  STOP  ORIGIN  NOTE\n"
                      "w1    queued  -        -        0/20   -     new\n"
                      "\n"
                      "tasks: 1 (succeeded 0, failed 0, cancelled 0, refused 0, lost 0, "
                      "unfinished 1)\n"
                      "submitted: new 1, replayed 0, reused 0\n"
                      "the wait limit passed: 1 task(s) unfinished; they go on on the server\n"
                      "exit status: 5\n");
  json_t *doc = load_json(json);
  char ids[1][64];
  result_ids(doc, ids, 1);
  char want[256];
  snprintf(want, sizeof want, "[w1] submitted: task %s\n[w1] queued\n", ids[0]);
  assert_string_equal(text_str(&p.err), want);
  assert_true(json_is_false(json_object_get(doc, "complete")));
  assert_int_equal(json_integer_value(json_object_get(doc, "exit_status")), 5);
  json_decref(doc);
  char *xml = read_file(junit);
  assert_non_null(strstr(xml, "<skipped message=\"unfinished (queued) when opforge stopped "
                              "following it\"/>"));
  assert_non_null(strstr(xml, "tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\""));
  free(xml);
  proc_clear(&p);
  assert_int_equal(tasks_named(g.queued_base, "w1"), 1);
}

/* 1 for a task that failed, 2 for a program the server refused (the rest still runs). */
static void test_exit_failed_and_refused(void **state) {
  (void)state;
  NEED_SERVER();
  static const char no_inputs[] = "import torch\nclass Model:\n    pass\n"
                                  "def get_init_inputs():\n    return []\n";
  char dir[PATH_MAX], bad[PATH_MAX];
  program("failing/allfail_one.py");
  snprintf(dir, sizeof dir, "%s/failing", g.dir);
  const char *args[] = {dir, "--server", g.base, "--proposer", "test", "--steps", "2", NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, false), 1);
  assert_string_equal(text_str(&p.out),
                      "TASK         STATUS  SPEEDUP  BEST_MS  STEPS  STOP    ORIGIN  NOTE\n"
                      "allfail_one  failed  -        -        2/2    budget  new     "
                      "no_correct_candidate: none of the 2 candidate(s) was correct\n"
                      "\n"
                      "tasks: 1 (succeeded 0, failed 1, cancelled 0, refused 0, lost 0, "
                      "unfinished 0)\n"
                      "submitted: new 1, replayed 0, reused 0\n"
                      "exit status: 1\n");
  char *last = lines_with(text_str(&p.err), "[allfail_one] failed ");
  assert_string_equal(last, "[allfail_one] failed after 2 steps: no_correct_candidate: none of "
                            "the 2 candidate(s) was correct\n");
  free(last);
  proc_clear(&p);

  /* The failed task is run again by the next run (the key's next attempt). */
  assert_int_equal(run_tune(&p, args, NULL, false), 1);
  char *again = lines_with(text_str(&p.err), "[allfail_one] submitted again: task ");
  assert_int_equal(strlen(again) > 0, true);
  free(again);
  proc_clear(&p);
  assert_int_equal(tasks_named(g.base, "allfail_one"), 2);

  scratch_file("refused_mix/bad.py", no_inputs, bad, sizeof bad);
  program("refused_mix/epsilon.py");
  snprintf(dir, sizeof dir, "%s/refused_mix", g.dir);
  const char *mix[] = {dir, "--server", g.base, "--proposer", "test", "--steps", "2", NULL};
  assert_int_equal(run_tune(&p, mix, NULL, false), 2);
  assert_string_equal(text_str(&p.out),
                      "TASK     STATUS     SPEEDUP  BEST_MS  STEPS  STOP             ORIGIN  "
                      "NOTE\n"
                      "bad      refused    -        -        -      -                -       "
                      "invalid_reference: reference: the reference must define get_inputs() "
                      "(field reference)\n"
                      "epsilon  succeeded  1.60x    1.2500   1/2    space_exhausted  new\n"
                      "\n"
                      "tasks: 2 (succeeded 1, failed 0, cancelled 0, refused 1, lost 0, "
                      "unfinished 0)\n"
                      "submitted: new 1, replayed 0, reused 0\n"
                      "exit status: 2\n");
  static const char refusal[] = "error: invalid_reference: reference: the reference must "
                                "define get_inputs() (field reference)\n";
  assert_memory_equal(text_str(&p.err), refusal, strlen(refusal));
  proc_clear(&p);
}

/* ---- keys across runs ---- */

/* The origin column of a run's only row. */
static void assert_origin(const char *out, const char *name, const char *origin) {
  char want[128];
  snprintf(want, sizeof want, "succeeded  1.60x    1.2500   1/2    space_exhausted  %s\n",
           origin);
  const char *row = strstr(out, "\n");
  assert_non_null(row);
  if (strncmp(row + 1, name, strlen(name)) != 0 || !strstr(row, want))
    print_error("want %s %s in:\n%s", name, origin, out);
  assert_non_null(strstr(row, want));
}

/* A run id scopes the key (a retried job replays, another run submits anew); --reuse
 * leaves it out (any --reuse run's success counts); --no-idempotency always submits. */
static void test_run_id_reuse_and_no_key(void **state) {
  (void)state;
  NEED_SERVER();
  char file[PATH_MAX];
  scratch_file("keys/delta.py", child_reference_ok, file, sizeof file);
  const char *args[] = {file, "--server", g.base, "--proposer", "test", "--steps", "2", NULL};
  const char *reuse[] = {file, "--server", g.base, "--proposer", "test", "--steps", "2",
                         "--reuse", NULL};
  const char *nokey[] = {file, "--server", g.base, "--proposer", "test", "--steps", "2",
                         "--no-idempotency", NULL};
  const char *run1[] = {"GITHUB_RUN_ID", "9001", NULL}, *run2[] = {"CI_PIPELINE_ID", "77", NULL};
  static const struct {
    int which; /* 0 plain, 1 --reuse, 2 --no-idempotency */
    int env;   /* 0 none, 1 run 9001, 2 pipeline 77 */
    const char *origin;
    size_t tasks;
  } runs[] = {
      {0, 1, "new", 1},      {0, 1, "replayed", 1}, {0, 2, "new", 2},
      {1, 1, "new", 3},      {1, 2, "reused", 3},   {2, 1, "new", 4},
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    const char *const *a = runs[i].which == 0 ? args : runs[i].which == 1 ? reuse : nokey;
    const char *const *env = runs[i].env == 1 ? run1 : runs[i].env == 2 ? run2 : NULL;
    struct proc p;
    int rc = run_tune(&p, a, env, false);
    if (rc != 0)
      print_error("run %zu exited %d: %s", i, rc, text_str(&p.err));
    assert_int_equal(rc, 0);
    assert_origin(text_str(&p.out), "delta", runs[i].origin);
    assert_int_equal(tasks_named(g.base, "delta"), runs[i].tasks);
    if (strcmp(runs[i].origin, "reused") == 0)
      assert_non_null(strstr(text_str(&p.out), "submitted: new 0, replayed 0, reused 1\n"));
    proc_clear(&p);
  }
}

/* ---- progress ---- */

/* --events: every line on stderr is {"task","id","event"}; the task's last is finished. */
static void test_events_lines(void **state) {
  (void)state;
  NEED_SERVER();
  char file[PATH_MAX];
  scratch_file("events/zeta.py", child_reference_ok, file, sizeof file);
  const char *args[] = {file, "--server", g.base, "--proposer", "test", "--steps", "2",
                        "--events", NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, false), 0);
  assert_plain(text_str(&p.err));
  size_t n = 0;
  json_int_t last_seq = 0;
  const char *type = NULL;
  json_t *event = NULL;
  for (const char *line = text_str(&p.err); *line; n++) {
    size_t len = strcspn(line, "\n");
    json_t *one = json_loadb(line, len, 0, NULL);
    if (!one)
      print_error("not JSON: '%.*s'\n", (int)len, line);
    assert_non_null(one);
    assert_string_equal(json_string_value(json_object_get(one, "task")), "zeta");
    const char *id = json_string_value(json_object_get(one, "id"));
    assert_true(id && child_is_uuid_v4(id, strlen(id)));
    json_decref(event);
    event = json_incref(json_object_get(one, "event"));
    json_int_t seq = json_integer_value(json_object_get(event, "seq"));
    assert_int_equal(seq, last_seq + 1);
    last_seq = seq;
    type = json_string_value(json_object_get(event, "type"));
    json_decref(one);
    line += len + (line[len] == '\n');
  }
  assert_true(n >= 6);
  assert_string_equal(type, "finished");
  json_decref(event);
  assert_non_null(strstr(text_str(&p.out), "\nexit status: 0\n"));
  proc_clear(&p);
}

/* On a terminal (evaluations slowed down): the live block, a bar with step, budget,
 * best speed-up, elapsed time and time left, erased and redrawn in place; then each
 * task's final line and the table. */
static void test_terminal_live_block(void **state) {
  (void)state;
  NEED_SERVER();
  char data[PATH_MAX], fixtures[PATH_MAX], base[64], dir[PATH_MAX];
  snprintf(data, sizeof data, "%s/slow-data", g.dir);
  snprintf(fixtures, sizeof fixtures, "%s/fixtures", g.dir);
  const char *extra[] = {"--gpus", "0", "--evaluator", g.evaluator, "--fixtures", fixtures,
                         "--evaluate-deadline", "30", "--sandbox-env", "SCRIPTED_EVAL_*", NULL};
  setenv("SCRIPTED_EVAL_DELAY_MS", "700", 1);
  pid_t pid = child_server_start(g.bin, data, extra, base, WAIT_MS);
  unsetenv("SCRIPTED_EVAL_DELAY_MS");
  assert_true(pid > 0);
  program("terminal/term_a.py"), program("terminal/term_b.py");
  snprintf(dir, sizeof dir, "%s/terminal", g.dir);
  const char *args[] = {dir, "--server", base, "--proposer", "test", "--steps", "2", NULL};
  struct proc p;
  assert_int_equal(run_tune(&p, args, NULL, true), 0);
  const char *out = text_str(&p.out);
  if (!strstr(out, "] ") || !strstr(out, " left\033[K\r\n"))
    print_error("terminal output was: %s\n", out);
  assert_non_null(strstr(out, "term_b  queued  0:0"));
  assert_non_null(strstr(out, "term_a  [----------"));
  assert_non_null(strstr(out, "   0/2    best "));
  assert_non_null(strstr(out, " left\033[K\r\n"));
  assert_non_null(strstr(out, "\033[2A\r\033[J"));
  assert_non_null(strstr(out, "\033[J[term_a] succeeded: best 1.60x (1.25 ms) after 1 step, "
                              "stop space_exhausted\r\n"));
  assert_null(strstr(out, "[term_a] step ")); /* no log lines on a terminal */
  assert_non_null(strstr(out, "\r\nexit status: 0\r\n"));
  proc_clear(&p);
  assert_int_equal(child_server_stop(pid), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_server_refuses_an_option),
      cmocka_unit_test(test_three_programs),
      cmocka_unit_test(test_library_only_best),
      cmocka_unit_test(test_exit_unreachable),
      cmocka_unit_test(test_exit_auth),
      cmocka_unit_test(test_exit_wait_limit),
      cmocka_unit_test(test_exit_failed_and_refused),
      cmocka_unit_test(test_run_id_reuse_and_no_key),
      cmocka_unit_test(test_events_lines),
      cmocka_unit_test(test_terminal_live_block),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
