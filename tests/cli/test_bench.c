/* Tests of `opforge bench`: usage errors, an unreachable server, and runs against the real
 * server on port 0. With --gpus none tasks stay queued, so those runs end by --wait-limit
 * (exit 0, the tasks recorded as unfinished) or by a cancellation; with the scripted
 * evaluator of tests/engine and the test proposer, tasks run to their end and every
 * figure of the report is checked against hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/common/child.h"

#define WAIT_MS 60000 /* the longest any one child may take */

static const char reference_bad[] = "print('no model here')\n";

/* ---- the servers under test ---- */

static struct {
  char bin[PATH_MAX];
  char evaluator[PATH_MAX]; /* "" when the scripted evaluator was not built */
  char dir[256];            /* scratch: data dirs, programs, results */
  char base[64];            /* the --gpus none server shared by most tests */
  pid_t pid;
  pid_t extra_pids[4];      /* servers a test started; killed at teardown if it failed */
  bool have_bin;
} g;

/* Starts a server (see child_server_start) and notes it for the teardown. Returns the
 * pid, or -1. */
static pid_t server_start(const char *data, const char *const *extra, char *base) {
  pid_t pid = child_server_start(g.bin, data, extra, base, WAIT_MS);
  for (size_t i = 0; pid > 0 && i < sizeof g.extra_pids / sizeof g.extra_pids[0]; i++)
    if (g.extra_pids[i] == 0) {
      g.extra_pids[i] = pid;
      break;
    }
  return pid;
}

/* Stops a server with SIGTERM; returns its exit status (-1 when it had to be killed). */
static int server_stop(pid_t pid) {
  for (size_t i = 0; i < sizeof g.extra_pids / sizeof g.extra_pids[0]; i++)
    if (g.extra_pids[i] == pid)
      g.extra_pids[i] = 0;
  return child_server_stop(pid);
}

/* Whether the binary has the bench command (cli/main.c wires it). */
static bool knows_bench(const char *bin) {
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    execl(bin, bin, "bench", "--help", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid)
    return false;
  bool known = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (!known)
    print_message("%s has no bench command (cli/main.c does not wire it)\n", bin);
  return known;
}

static int group_setup(void **state) {
  (void)state;
  child_isolate();
  const char *bin = getenv("OPFORGE_BIN");
  const char *eval = getenv("OPFORGE_SCRIPTED_EVALUATOR");
  g.have_bin = bin && access(bin, X_OK) == 0 && knows_bench(bin);
  if (eval && access(eval, X_OK) == 0)
    snprintf(g.evaluator, sizeof g.evaluator, "%s", eval);
  snprintf(g.dir, sizeof g.dir, "/tmp/opforge-bench-XXXXXX");
  if (!mkdtemp(g.dir))
    return -1;
  if (!g.have_bin)
    return 0;
  snprintf(g.bin, sizeof g.bin, "%s", bin);
  char data[PATH_MAX];
  snprintf(data, sizeof data, "%s/data", g.dir);
  const char *extra[] = {"--gpus", "none", NULL};
  g.pid = server_start(data, extra, g.base);
  return g.pid > 0 ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof g.extra_pids / sizeof g.extra_pids[0]; i++)
    if (g.extra_pids[i] > 0 && g.extra_pids[i] != g.pid) /* left by a failed test */
      server_stop(g.extra_pids[i]);
  return child_group_teardown(g.pid, g.dir);
}

#define NEED_SERVER()                                                                      \
  do {                                                                                     \
    if (!g.have_bin) {                                                                     \
      print_message("skipped: $OPFORGE_BIN is not an opforge binary with bench\n");       \
      skip();                                                                              \
    }                                                                                      \
  } while (0)

/* ---- running the CLI ---- */

/* Runs {bin, args...} to the end; returns the exit status and fills p's out and err. */
static int run_cli(struct proc *p, const char *const *args) {
  proc_start(p, g.bin, args, NULL, false);
  return proc_finish(p, WAIT_MS);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

/* Makes the directory g.dir/rel and returns its path in out. */
static void scratch_dir(const char *rel, char *out, size_t outlen) {
  snprintf(out, outlen, "%s/%s", g.dir, rel);
  assert_true(mkdir(out, 0700) == 0 || errno == EEXIST);
}

static json_t *load_json(const char *path) {
  json_error_t err;
  json_t *doc = json_load_file(path, 0, &err);
  if (!doc)
    print_error("%s: %s\n", path, err.text);
  assert_non_null(doc);
  return doc;
}

/* ---- talking to a server directly ---- */

/* How many tasks the shared server holds. */
static size_t task_count(void) {
  json_t *list = NULL;
  assert_int_equal(child_http(g.base, "GET", "/v1/tasks?limit=500", &list), 200);
  size_t n = json_array_size(json_object_get(list, "items"));
  json_decref(list);
  return n;
}

static const char *jstr(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  if (!s)
    print_error("member %s is not a string\n", key);
  assert_non_null(s);
  return s;
}

static long long jint(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  if (!json_is_integer(v))
    print_error("member %s is not an integer\n", key);
  assert_true(json_is_integer(v));
  return json_integer_value(v);
}

static double jnum(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  if (!json_is_number(v))
    print_error("member %s is not a number\n", key);
  assert_true(json_is_number(v));
  return json_number_value(v);
}

/* ---- usage errors ---- */

/* The paths the usage cases name with placeholders. */
struct usage_paths {
  char file[PATH_MAX];     /* @F: a valid program */
  char out[PATH_MAX];      /* @O: the results file, never written by a usage error */
  char none[PATH_MAX];     /* @N: a path that does not exist */
  char empty_dir[PATH_MAX];/* @D: a directory without programs */
  char excl_dir[PATH_MAX]; /* @A: a directory whose one program --exclude skips */
  char empty[PATH_MAX];    /* @X: an empty file */
  char bad_out[PATH_MAX];  /* @W: a results file in a missing directory */
};

/* The value of placeholder s (or s itself). */
static const char *expand(const struct usage_paths *u, const char *s) {
  static const char *const keys = "FONDAXW";
  if (s[0] != '@' || !s[1] || s[2] || !strchr(keys, s[1]))
    return strcmp(s, "@S") == 0 ? g.base : s;
  const char *const values[] = {u->file, u->out, u->none, u->empty_dir, u->excl_dir, u->empty,
                                u->bad_out};
  return values[strchr(keys, s[1]) - keys];
}

/* Writes want with every "@K" placeholder replaced into out. */
static void expand_text(const struct usage_paths *u, const char *want, char *out, size_t outlen) {
  size_t n = 0;
  out[0] = '\0';
  for (const char *p = want; *p && n + 1 < outlen;) {
    if (p[0] == '@' && p[1] && strchr("FONDAXWS", p[1])) {
      char key[3] = {'@', p[1], '\0'};
      n += (size_t)snprintf(out + n, outlen - n, "%s", expand(u, key));
      p += 2;
    } else {
      out[n++] = *p++;
      out[n] = '\0';
    }
  }
}

struct usage_case {
  const char *args[16];
  const char *err;   /* stderr, exactly; or its first line when usage follows */
  bool then_usage;   /* the usage text follows the error line */
};

static const struct usage_case usage_cases[] = {
    {{"bench", "--steps", "3", "--out", "@O", NULL}, "error: missing FILES_OR_DIRS\n", true},
    {{"bench", "@F", "--out", "@O", "--server", "@S", NULL}, "error: --steps N is required\n",
     false},
    {{"bench", "@F", "--steps", "3", "--server", "@S", NULL}, "error: --out FILE is required\n",
     false},
    {{"bench", "@F", "--steps", "0", "--out", "@O", NULL}, "error: --steps must be 1..1000\n",
     false},
    {{"bench", "@F", "--steps", "1001", "--out", "@O", NULL},
     "error: --steps must be 1..1000\n", false},
    {{"bench", "@F", "--steps", "abc", "--out", "@O", NULL},
     "error: --steps expects an integer, got 'abc'\n", false},
    {{"bench", "@F", "--steps", "3", "--seconds", "0", "--out", "@O", NULL},
     "error: --seconds must be 1..86400\n", false},
    {{"bench", "@F", "--steps", "3", "--concurrency", "0", "--out", "@O", NULL},
     "error: --concurrency must be 1..256\n", false},
    {{"bench", "@F", "--steps", "3", "--wait-limit", "0", "--out", "@O", NULL},
     "error: --wait-limit must be 1..2592000\n", false},
    {{"bench", "@F", "--steps", "3", "--policy", "greedy", "--out", "@O", NULL},
     "error: --policy must be one of single, refine, flat, htam, tree, htam+tree, best_of_n\n",
     false},
    {{"bench", "@F", "--steps", "3", "--fresh-memory", "--out", "@O", NULL},
     "error: --fresh-memory needs --memory NAME\n", false},
    {{"bench", "@F", "--steps", "3", "--proposer", "human", "--out", "@O", NULL},
     "error: --proposer must be one of builtin, llm, test\n", false},
    {{"bench", "@F", "--steps", "3", "--bogus", "--out", "@O", NULL},
     "error: unknown option '--bogus'\n", true},
    {{"bench", "@F", "--out", "@O", "--steps", NULL}, "error: --steps needs a value\n", false},
    {{"bench", "@N", "--steps", "3", "--out", "@O", "--server", "@S", NULL},
     "error: cannot read @N: No such file or directory\n", false},
    {{"bench", "@D", "--steps", "3", "--out", "@O", "--server", "@S", NULL},
     "error: no .py file to run\n", false},
    {{"bench", "@A", "--exclude", "only", "--steps", "3", "--out", "@O", "--server", "@S",
      NULL},
     "error: no .py file to run\n", false},
    {{"bench", "@F", "@X", "--steps", "3", "--out", "@O", "--server", "@S", NULL},
     "error: @X is empty\n", false},
    {{"bench", "@F", "--steps", "3", "--out", "@W", "--server", "@S", NULL},
     "error: cannot write @W: No such file or directory\n", false},
};

static void test_usage_errors(void **state) {
  (void)state;
  NEED_SERVER();
  struct usage_paths u;
  char ignored[PATH_MAX];
  scratch_file("usage/prog.py", child_reference_ok, u.file, sizeof u.file);
  snprintf(u.out, sizeof u.out, "%s/usage/out.json", g.dir);
  snprintf(u.none, sizeof u.none, "%s/usage/absent.py", g.dir);
  scratch_dir("usage/empty", u.empty_dir, sizeof u.empty_dir);
  scratch_file("usage/empty/notes.txt", "not a program\n", ignored, sizeof ignored);
  scratch_file("usage/excl/only.py", child_reference_ok, ignored, sizeof ignored);
  snprintf(u.excl_dir, sizeof u.excl_dir, "%s/usage/excl", g.dir);
  scratch_file("usage/zero.py", "", u.empty, sizeof u.empty);
  snprintf(u.bad_out, sizeof u.bad_out, "%s/usage/missing/out.json", g.dir);
  size_t before = task_count();
  for (size_t i = 0; i < sizeof usage_cases / sizeof usage_cases[0]; i++) {
    const struct usage_case *c = &usage_cases[i];
    const char *args[16];
    size_t n = 0;
    for (; c->args[n]; n++)
      args[n] = expand(&u, c->args[n]);
    args[n] = NULL;
    char want[PATH_MAX * 2];
    expand_text(&u, c->err, want, sizeof want);
    struct proc p;
    int rc = run_cli(&p, args);
    const char *err = text_str(&p.err);
    bool ok = rc == 2 && strcmp(text_str(&p.out), "") == 0 &&
              (c->then_usage ? strncmp(err, want, strlen(want)) == 0 &&
                                   strncmp(err + strlen(want), "usage: opforge bench ", 21) == 0
                             : strcmp(err, want) == 0) &&
              access(u.out, F_OK) != 0;
    if (!ok)
      print_error("case %zu (%s ...): exit %d, stderr '%s', want '%s'\n", i, args[1], rc, err,
                  want);
    assert_true(ok);
    proc_clear(&p);
  }
  assert_int_equal(task_count(), before);

  /* A reply limit under the smallest allowed: refused before anything is sent. */
  struct proc p;
  const char *limited[] = {"bench", u.file, "--steps", "1", "--out", u.out, "--server", g.base,
                           NULL};
  setenv("OPFORGE_MAX_REPLY_BYTES", "4095", 1);
  int limited_rc = run_cli(&p, limited);
  unsetenv("OPFORGE_MAX_REPLY_BYTES");
  assert_int_equal(limited_rc, 2);
  assert_string_equal(text_str(&p.err),
                      "error: OPFORGE_MAX_REPLY_BYTES must be 4096 to 67108864, got 4095\n");
  assert_int_equal(access(u.out, F_OK), -1);
  assert_int_equal(task_count(), before);
  proc_clear(&p);

  const char *help[] = {"bench", "--help", NULL};
  assert_int_equal(run_cli(&p, help), 0);
  assert_memory_equal(text_str(&p.out), "usage: opforge bench FILES_OR_DIRS... --steps N --out "
                      "FILE [options]\n", 63);
  assert_string_equal(text_str(&p.err), "");
  proc_clear(&p);
}

/* ---- an unreachable server ---- */

/* Nothing is submitted, nothing printed on stdout; the results file says so. */
static void test_unreachable_server(void **state) {
  (void)state;
  NEED_SERVER();
  char url[64], prefix[128], file[PATH_MAX], out[PATH_MAX];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", child_dead_port());
  snprintf(prefix, sizeof prefix, "error: cannot reach %s: ", url);
  scratch_file("unreach/prog.py", child_reference_ok, file, sizeof file);
  snprintf(out, sizeof out, "%s/unreach/out.json", g.dir);
  struct proc p;
  const char *args[] = {"bench", file, "--steps", "3", "--out", out, "--server", url, NULL};
  assert_int_equal(run_cli(&p, args), 1);
  assert_string_equal(text_str(&p.out), "");
  const char *err = text_str(&p.err);
  assert_memory_equal(err, prefix, strlen(prefix));
  assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
  proc_clear(&p);
  json_t *doc = load_json(out);
  assert_true(json_is_false(json_object_get(doc, "complete")));
  assert_string_equal(jstr(doc, "server"), url);
  json_t *task = json_array_get(json_object_get(doc, "tasks"), 0);
  assert_int_equal(json_array_size(json_object_get(doc, "tasks")), 1);
  assert_string_equal(jstr(task, "name"), "prog");
  assert_string_equal(jstr(task, "status"), "not_submitted");
  assert_true(json_is_null(json_object_get(task, "id")));
  assert_int_equal(jint(json_object_get(doc, "summary"), "not_submitted"), 1);
  json_decref(doc);
}

/* ---- runs on the --gpus none server: tasks stay queued ---- */

/* A directory of programs: two run, in version order (2_a before 10_b); skip_me.py is
 * excluded; the text file, the hidden file and the directory named like a program are
 * not programs. Returns the directory in out. */
static void queued_programs(char *out, size_t outlen) {
  char path[PATH_MAX];
  scratch_file("queued/10_b.py", child_reference_ok, path, sizeof path);
  scratch_file("queued/2_a.py", child_reference_ok, path, sizeof path);
  scratch_file("queued/skip_me.py", child_reference_ok, path, sizeof path);
  scratch_file("queued/notes.txt", child_reference_ok, path, sizeof path);
  scratch_file("queued/.hidden.py", child_reference_ok, path, sizeof path);
  scratch_dir("queued/sub.py", path, sizeof path);
  snprintf(out, outlen, "%s/queued", g.dir);
}

/* The stdout of a run whose tasks a and b were both left queued. */
static const char queued_report[] =
    "TASK  FAMILY  CORRECT  EAGER_MS  COMPILE_MS  BEST_MS  FLOOR_MS  VS_EAGER  VS_COMPILE"
    "  OF_FLOOR  LIB_SHARE  GRAPH  EVALS  STEPS_TO_BEST  WALL_S  STOP  STATUS\n"
    "2_a   -       no              -           -        -         -         -           -"
    "         -          -      -      0              -       -  -     unfinished:queued\n"
    "10_b  -       no              -           -        -         -         -           -"
    "         -          -      -      0              -       -  -     unfinished:queued\n"
    "\n"
    "tasks: 2 (succeeded 0, failed 0, cancelled 0, unfinished 2, not submitted 0, refused 0, "
    "lost 0)\n"
    "with a correct candidate: 0\n"
    "geomean speed-up vs eager: - (no task)\n"
    "geomean speed-up vs torch.compile: - (no task)\n"
    "memory-bound geomean best/floor: - (no task)\n"
    "fast_1 (correct and faster than eager): 0.0% (0 of 2)\n"
    "faster than torch.compile: 0.0% (0 of 2)\n";

/* Checks that the server holds task t of the results with the options bench sent. */
static void check_server_task(const json_t *t, const char *name) {
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s", jstr(t, "id"));
  json_t *task = NULL;
  assert_int_equal(child_http(g.base, "GET", path, &task), 200);
  assert_string_equal(jstr(task, "name"), name);
  assert_string_equal(jstr(task, "status"), "queued");
  assert_string_equal(jstr(task, "reference"), child_reference_ok);
  assert_string_equal(jstr(task, "created_at"), jstr(t, "created_at"));
  json_t *o = json_object_get(task, "options");
  assert_string_equal(jstr(o, "policy"), "flat");
  assert_string_equal(jstr(o, "proposer"), "builtin");
  assert_int_equal(jint(json_object_get(o, "budget"), "steps"), 3);
  assert_int_equal(jint(json_object_get(o, "budget"), "seconds"), 60);
  json_decref(task);
}

/* Checks the record of a task left queued, here and on the server. */
static void check_queued_task(const json_t *t, const char *dir, const char *name) {
  char file[PATH_MAX + 16];
  snprintf(file, sizeof file, "%s/%s.py", dir, name);
  assert_string_equal(jstr(t, "name"), name);
  assert_string_equal(jstr(t, "file"), file);
  const char *id = jstr(t, "id");
  assert_true(child_is_uuid_v4(id, strlen(id)));
  assert_string_equal(jstr(t, "status"), "queued");
  assert_true(json_is_false(json_object_get(t, "finished")));
  assert_true(json_is_false(json_object_get(t, "correct")));
  assert_int_equal(jint(t, "steps"), 0);
  assert_int_equal(jint(t, "budget_steps"), 3);
  assert_true(json_is_null(json_object_get(t, "best_ms")));
  assert_true(json_is_null(json_object_get(t, "wall_s")));
  assert_true(json_is_null(json_object_get(t, "finished_at")));
  check_server_task(t, name);
}

/* --wait-limit ends a run whose tasks never start: exit 0, every task recorded as
 * unfinished with what the server said of it. */
static void test_wait_limit_leaves_tasks_queued(void **state) {
  (void)state;
  NEED_SERVER();
  char dir[PATH_MAX], out[PATH_MAX];
  queued_programs(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/queued-out.json", g.dir);
  const char *args[] = {"bench", dir, "--exclude", "skip_", "--steps", "3", "--seconds", "60",
                        "--policy", "flat", "--proposer", "builtin", "--concurrency", "2",
                        "--wait-limit", "2", "--out", out, "--server", g.base, NULL};
  struct proc p;
  double started = now_s();
  assert_int_equal(run_cli(&p, args), 0);
  double took = now_s() - started;
  assert_true(took >= 2.0 && took < 10.0);
  assert_string_equal(text_str(&p.out), queued_report);
  assert_string_equal(text_str(&p.err),
                      "note: the wait limit of 2 s passed: 2 task(s) unfinished, 0 not "
                      "submitted\n");
  proc_clear(&p);

  json_t *doc = load_json(out);
  assert_true(json_is_false(json_object_get(doc, "complete")));
  json_t *o = json_object_get(doc, "options");
  assert_int_equal(jint(o, "steps"), 3);
  assert_int_equal(jint(o, "seconds"), 60);
  assert_int_equal(jint(o, "concurrency"), 2);
  assert_int_equal(jint(o, "wait_limit_s"), 2);
  assert_string_equal(jstr(o, "policy"), "flat");
  assert_string_equal(json_string_value(json_array_get(json_object_get(o, "exclude"), 0)),
                      "skip_");
  json_t *tasks = json_object_get(doc, "tasks");
  assert_int_equal(json_array_size(tasks), 2);
  check_queued_task(json_array_get(tasks, 0), dir, "2_a");
  check_queued_task(json_array_get(tasks, 1), dir, "10_b");
  json_t *s = json_object_get(doc, "summary");
  assert_int_equal(jint(s, "tasks"), 2);
  assert_int_equal(jint(s, "unfinished"), 2);
  assert_int_equal(jint(s, "succeeded"), 0);
  assert_float_equal(jnum(s, "fast_1"), 0.0, 0);
  assert_true(json_is_null(json_object_get(s, "geomean_speedup_vs_eager")));
  json_decref(doc);
}

/* Without --concurrency bench asks the server how many GPUs it has: none here, so one
 * task at a time, and the second is never submitted before the wait limit. */
static void test_default_concurrency_one_at_a_time(void **state) {
  (void)state;
  NEED_SERVER();
  char dir[PATH_MAX], out[PATH_MAX];
  queued_programs(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/serial-out.json", g.dir);
  const char *args[] = {"bench", dir, "--exclude", "skip_", "--steps", "3", "--wait-limit", "1",
                        "--out", out, "--server", g.base, NULL};
  size_t before = task_count();
  struct proc p;
  assert_int_equal(run_cli(&p, args), 0);
  assert_string_equal(text_str(&p.err),
                      "note: the wait limit of 1 s passed: 1 task(s) unfinished, 1 not "
                      "submitted\n");
  assert_non_null(strstr(text_str(&p.out), "\n10_b  -       no  "));
  assert_non_null(strstr(text_str(&p.out), "  not_submitted\n"));
  proc_clear(&p);
  assert_int_equal(task_count(), before + 1);
  json_t *doc = load_json(out);
  assert_int_equal(jint(json_object_get(doc, "options"), "concurrency"), 1);
  assert_int_equal(jint(json_object_get(doc, "options"), "seconds"), 300);
  json_t *tasks = json_object_get(doc, "tasks");
  assert_string_equal(jstr(json_array_get(tasks, 0), "status"), "queued");
  assert_string_equal(jstr(json_array_get(tasks, 1), "status"), "not_submitted");
  assert_true(json_is_null(json_object_get(json_array_get(tasks, 1), "id")));
  assert_int_equal(jint(json_object_get(doc, "summary"), "not_submitted"), 1);
  json_decref(doc);
}

/* The id of the queued task named name on the shared server, or NULL (malloc'ed). */
static char *find_queued(const char *name) {
  json_t *list = NULL;
  assert_int_equal(child_http(g.base, "GET", "/v1/tasks?status=queued&limit=500", &list), 200);
  char *id = NULL;
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(list, "items"), i, t) {
    if (!id && strcmp(jstr(t, "name"), name) == 0)
      id = strdup(jstr(t, "id"));
  }
  json_decref(list);
  return id;
}

/* A task cancelled while bench follows it has ended: bench finishes it (times from its
 * event log) well before the wait limit, and exits 0. */
static void test_cancelled_task_ends_the_run(void **state) {
  (void)state;
  NEED_SERVER();
  char file[PATH_MAX], out[PATH_MAX];
  scratch_file("cancel/cancel_me.py", child_reference_ok, file, sizeof file);
  snprintf(out, sizeof out, "%s/cancel-out.json", g.dir);
  const char *args[] = {"bench", file, "--steps", "3", "--wait-limit", "40", "--out", out,
                        "--server", g.base, NULL};
  struct proc p;
  double started = now_s();
  proc_start(&p, g.bin, args, NULL, false);
  char *id = NULL;
  for (int i = 0; i < 200 && !id; i++) {
    id = find_queued("cancel_me");
    if (!id)
      usleep(50000);
  }
  assert_non_null(id);
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
  json_t *reply = NULL;
  assert_int_equal(child_http(g.base, "POST", path, &reply), 200);
  json_decref(reply);
  assert_int_equal(proc_finish(&p, WAIT_MS), 0);
  assert_true(now_s() - started < 20.0);
  const char *want = "[1/1] cancel_me cancelled: no correct candidate, step 0/3, ";
  const char *err = text_str(&p.err);
  assert_memory_equal(err, want, strlen(want));
  assert_string_equal(err + strlen(err) - 3, " s\n");
  assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
  assert_non_null(strstr(text_str(&p.out), "  cancelled\n"));
  proc_clear(&p);

  json_t *doc = load_json(out);
  assert_true(json_is_true(json_object_get(doc, "complete")));
  json_t *t = json_array_get(json_object_get(doc, "tasks"), 0);
  assert_string_equal(jstr(t, "id"), id);
  assert_string_equal(jstr(t, "status"), "cancelled");
  assert_true(json_is_true(json_object_get(t, "finished")));
  assert_true(strcmp(jstr(t, "finished_at"), jstr(t, "created_at")) >= 0);
  double wall = jnum(t, "wall_s");
  assert_true(wall >= 0 && wall < 20.0);
  assert_true(json_is_null(json_object_get(t, "run_s"))); /* it never ran */
  assert_int_equal(jint(json_object_get(doc, "summary"), "cancelled"), 1);
  json_decref(doc);
  free(id);
}

/* A program the server refuses is recorded; the others still run; the exit status is 1. */
static void test_refused_program(void **state) {
  (void)state;
  NEED_SERVER();
  char bad[PATH_MAX], good[PATH_MAX], out[PATH_MAX], dir[PATH_MAX];
  scratch_file("refuse/bad.py", reference_bad, bad, sizeof bad);
  scratch_file("refuse/good.py", child_reference_ok, good, sizeof good);
  snprintf(dir, sizeof dir, "%s/refuse", g.dir);
  snprintf(out, sizeof out, "%s/refuse-out.json", g.dir);
  const char *args[] = {"bench", dir, "--steps", "3", "--concurrency", "2", "--wait-limit", "1",
                        "--out", out, "--server", g.base, NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, args), 1);
  char want[PATH_MAX + 64];
  snprintf(want, sizeof want, "error: %s: invalid_reference: ", bad);
  assert_memory_equal(text_str(&p.err), want, strlen(want));
  assert_non_null(strstr(text_str(&p.out), "  refused:invalid_reference\n"));
  proc_clear(&p);
  json_t *doc = load_json(out);
  json_t *tasks = json_object_get(doc, "tasks");
  json_t *refused = json_array_get(tasks, 0);
  assert_string_equal(jstr(refused, "name"), "bad");
  assert_string_equal(jstr(refused, "status"), "refused");
  assert_string_equal(jstr(json_object_get(refused, "error"), "code"), "invalid_reference");
  assert_string_equal(jstr(json_array_get(tasks, 1), "status"), "queued");
  assert_int_equal(jint(json_object_get(doc, "summary"), "refused"), 1);
  json_decref(doc);
}

/* A server that wants a token refuses the first submission; bench stops there. With the
 * token the same run goes through. */
static void test_token(void **state) {
  (void)state;
  NEED_SERVER();
  char data[PATH_MAX], tokfile[PATH_MAX], base[64], a[PATH_MAX], b[PATH_MAX], out[PATH_MAX];
  scratch_file("tok/token", "bench-test-token-0123456789\n", tokfile, sizeof tokfile);
  scratch_file("tok/progs/a.py", child_reference_ok, a, sizeof a);
  scratch_file("tok/progs/b.py", child_reference_ok, b, sizeof b);
  snprintf(data, sizeof data, "%s/tokdata", g.dir);
  snprintf(out, sizeof out, "%s/tok/out.json", g.dir);
  const char *extra[] = {"--gpus", "none", "--token-file", tokfile, NULL};
  pid_t pid = server_start(data, extra, base);
  assert_true(pid > 0);
  const char *args[] = {"bench", a, b, "--steps", "2", "--concurrency", "2", "--wait-limit",
                        "1", "--out", out, "--server", base, NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, args), 1);
  char want[PATH_MAX + 64];
  snprintf(want, sizeof want, "error: %s: unauthorized: ", a);
  const char *err = text_str(&p.err);
  assert_memory_equal(err, want, strlen(want));
  assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
  proc_clear(&p);
  json_t *doc = load_json(out);
  json_t *tasks = json_object_get(doc, "tasks");
  assert_string_equal(jstr(json_array_get(tasks, 0), "status"), "refused");
  assert_string_equal(jstr(json_array_get(tasks, 1), "status"), "not_submitted");
  json_decref(doc);

  const char *with[] = {"bench", a, b, "--steps", "2", "--concurrency", "2", "--wait-limit",
                        "1", "--out", out, "--server", base, "--token-file", tokfile, NULL};
  assert_int_equal(run_cli(&p, with), 0);
  proc_clear(&p);
  doc = load_json(out);
  assert_int_equal(jint(json_object_get(doc, "summary"), "unfinished"), 2);
  json_decref(doc);
  assert_int_equal(server_stop(pid), 0);
}

/* ---- the public KernelBench programs ---- */

/* Whether name is a program that `--exclude '[Cc]onv'` keeps. */
static int kept_program(const struct dirent *d) {
  size_t len = strlen(d->d_name);
  return d->d_name[0] != '.' && len > 3 && strcmp(d->d_name + len - 3, ".py") == 0 &&
         !strstr(d->d_name, "conv") && !strstr(d->d_name, "Conv");
}

static int version_order(const struct dirent **a, const struct dirent **b) {
  return strverscmp((*a)->d_name, (*b)->d_name);
}

/* A directory of level 1 stands for its non-convolution programs in version order. */
static void test_kernelbench_directory(void **state) {
  (void)state;
  NEED_SERVER();
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  char dir[PATH_MAX], out[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/../shared/kernelbench/level1", root ? root : ".");
  struct dirent **names = NULL;
  int n = scandir(dir, &names, kept_program, version_order);
  if (n <= 0) {
    print_message("skipped: %s is absent or empty (no ../shared/kernelbench)\n", dir);
    skip();
  }
  snprintf(out, sizeof out, "%s/kb-out.json", g.dir);
  const char *args[] = {"bench", dir, "--exclude", "[Cc]onv", "--steps", "2", "--concurrency",
                        "1", "--wait-limit", "1", "--out", out, "--server", g.base, NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, args), 0);
  proc_clear(&p);
  json_t *doc = load_json(out);
  json_t *tasks = json_object_get(doc, "tasks");
  assert_int_equal(json_array_size(tasks), (size_t)n);
  for (int i = 0; i < n; i++) {
    json_t *t = json_array_get(tasks, (size_t)i);
    char want[PATH_MAX + 256];
    snprintf(want, sizeof want, "%s/%s", dir, names[i]->d_name);
    assert_string_equal(jstr(t, "file"), want);
    assert_string_equal(jstr(t, "status"), i == 0 ? "queued" : "not_submitted");
    free(names[i]);
  }
  free(names);
  json_decref(doc);
}

/* ---- a run to the end, with the scripted evaluator ---- */

/* A fixture candidate whose evaluation the scripted evaluator takes from "SCRIPT <what>". */
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
  snprintf(rel, sizeof rel, "scripted/fixtures/%s/%02d.json", task, index);
  scratch_file(rel, text, path, sizeof path);
  free(text);
  json_decref(fixture);
}

/* Checks one task of the scripted run. best 0 means none. */
static void check_scripted_task(const json_t *t, const char *name, long long steps,
                                double best, long long to_best, long long correct) {
  assert_string_equal(jstr(t, "name"), name);
  assert_string_equal(jstr(t, "status"), "succeeded");
  assert_true(json_is_true(json_object_get(t, "finished")));
  assert_string_equal(jstr(t, "family"), "softmax");
  assert_true(json_is_true(json_object_get(t, "memory_bound")));
  assert_float_equal(jnum(t, "eager_ms"), 2.0, 0);
  assert_float_equal(jnum(t, "compile_ms"), 1.6, 0);
  assert_float_equal(jnum(t, "floor_ms"), 1.0, 0);
  assert_float_equal(jnum(t, "impossible_ms"), 0.4, 0);
  assert_int_equal(jint(t, "steps"), steps);
  assert_int_equal(jint(t, "budget_steps"), 4);
  assert_int_equal(jint(t, "candidates"), steps);
  assert_int_equal(jint(t, "evaluations"), steps + 1);
  assert_int_equal(jint(t, "correct_candidates"), correct);
  assert_string_equal(jstr(t, "stop_reason"), "space_exhausted");
  assert_true(json_is_boolean(json_object_get(t, "no_speedup")));
  assert_int_equal(json_is_true(json_object_get(t, "no_speedup")), to_best == 0);
  assert_float_equal(jnum(t, "library_share"), to_best == 0 ? 1.0 : 0.0, 1e-12);
  double wall = jnum(t, "wall_s"), run = jnum(t, "run_s");
  assert_true(wall >= 0 && wall < 30 && run >= 0 && run <= wall);
  assert_true(strcmp(jstr(t, "finished_at"), jstr(t, "created_at")) >= 0);
  assert_float_equal(jnum(t, "best_ms"), best, 0);
  assert_float_equal(jnum(t, "speedup_vs_eager"), 2.0 / best, 1e-12);
  assert_float_equal(jnum(t, "speedup_vs_compile"), 1.6 / best, 1e-12);
  assert_float_equal(jnum(t, "floor_fraction"), 1.0 / best, 1e-12);
  assert_int_equal(jint(t, "steps_to_best"), to_best);
  const char *best_candidate = jstr(t, "best_candidate");
  assert_true(child_is_uuid_v4(best_candidate, strlen(best_candidate)));
}

/* The stdout of the scripted run up to the WALL_S column (whose width the times set),
 * then each row's stop reason and status; and the summary, exactly. By hand, with eager
 * 2.0, compile 1.6 and floor 1.0 ms for every task, and each task's reference program
 * (step 0) correct at the scripted evaluator's 2.1 ms:
 *   alpha best 1.25 (step 3; its fixture 4 repeats 3, so it costs no step and the space
 *     is exhausted after 3 steps): 1.6x eager, 1.28x compile, 0.8 of floor; a single
 *     kernel, so no library time; 4 evaluations with the reference
 *   beta  wrong, 2.5 ms, then repeats: the reference stays best (step 0): 2/2.1 = 0.95x
 *     eager, 1.6/2.1 = 0.76x compile, 1/2.1 = 0.48 of floor, all of it library time;
 *     3 evaluations
 *   gamma one fixture that does not compile: the reference is best, as for beta;
 *     2 evaluations
 *   geomean vs eager (1.6 * (2/2.1)^2)^(1/3) = 1.132; vs compile (1.28 * (1.6/2.1)^2)^(1/3)
 *   = 0.906; best/floor (1.25 * 2.1^2)^(1/3) = 1.767, worst 2.1 (beta, the first of the
 *   two); fast_1 1 of 3; faster than compile 1 of 3. */
static const char *const scripted_rows[] = {
    "TASK   FAMILY   CORRECT  EAGER_MS  COMPILE_MS  BEST_MS  FLOOR_MS  VS_EAGER  VS_COMPILE  "
    "OF_FLOOR  LIB_SHARE  GRAPH  EVALS  STEPS_TO_BEST  ",
    "alpha  softmax  yes        2.0000      1.6000   1.2500    1.0000     1.60x       1.28x  "
    "    0.80       0.00     no      4              3  ",
    "beta   softmax  yes        2.0000      1.6000   2.1000    1.0000     0.95x       0.76x  "
    "    0.48       1.00     no      3              0  ",
    "gamma  softmax  yes        2.0000      1.6000   2.1000    1.0000     0.95x       0.76x  "
    "    0.48       1.00     no      2              0  ",
};
static const char *const scripted_status[] = {
    "STOP                        STATUS", "space_exhausted             succeeded",
    "space_exhausted,no_speedup  succeeded", "space_exhausted,no_speedup  succeeded"};
static const char scripted_summary[] =
    "\n"
    "tasks: 3 (succeeded 3, failed 0, cancelled 0, unfinished 0, not submitted 0, refused 0, "
    "lost 0)\n"
    "with a correct candidate: 3\n"
    "geomean speed-up vs eager: 1.132x over 3 tasks\n"
    "geomean speed-up vs torch.compile: 0.906x over 3 tasks\n"
    "memory-bound geomean best/floor: 1.767 over 3 tasks; worst 2.100 (beta)\n"
    "fast_1 (correct and faster than eager): 33.3% (1 of 3)\n"
    "faster than torch.compile: 33.3% (1 of 3)\n";

/* Checks the table and summary of the scripted run. */
static void check_scripted_report(const char *out) {
  const char *line = out;
  for (size_t i = 0; i < 4; i++) {
    const char *nl = strchr(line, '\n');
    assert_non_null(nl);
    size_t len = (size_t)(nl - line), status_len = strlen(scripted_status[i]);
    if (strncmp(line, scripted_rows[i], strlen(scripted_rows[i])) != 0)
      print_error("row %zu: '%.*s'\n", i, (int)len, line);
    assert_memory_equal(line, scripted_rows[i], strlen(scripted_rows[i]));
    assert_true(len > status_len + 2);
    assert_memory_equal(line + len - status_len - 2, "  ", 2);
    assert_memory_equal(line + len - status_len, scripted_status[i], status_len);
    line = nl + 1;
  }
  assert_string_equal(line, scripted_summary);
}

/* Writes the programs alpha, beta and gamma and their fixtures under g.dir/scripted. */
static void scripted_setup(void) {
  write_fixture("alpha", 1, "correct 1.6");
  write_fixture("alpha", 2, "compile");
  write_fixture("alpha", 3, "correct 1.25");
  write_fixture("alpha", 4, "correct 1.25");
  write_fixture("beta", 1, "wrong");
  write_fixture("beta", 2, "correct 2.5");
  write_fixture("gamma", 1, "compile");
  static const char *const names[] = {"alpha", "beta", "gamma"};
  for (size_t i = 0; i < 3; i++) {
    char rel[64], path[PATH_MAX];
    snprintf(rel, sizeof rel, "scripted/progs/%s.py", names[i]);
    scratch_file(rel, child_reference_ok, path, sizeof path);
  }
}

/* Checks the three progress lines of the scripted run (wall times vary). */
static void check_scripted_lines(const char *err) {
  static const char *const lines[] = {
      "[1/3] alpha succeeded: best 1.2500 ms, 1.60x vs eager, step 3/4, ",
      "[2/3] beta succeeded: best 2.1000 ms, 0.95x vs eager, step 2/4, ",
      "[3/3] gamma succeeded: best 2.1000 ms, 0.95x vs eager, step 1/4, "};
  for (size_t i = 0; i < 3; i++) {
    if (strncmp(err, lines[i], strlen(lines[i])) != 0)
      print_error("line %zu: '%s'\n", i, err);
    assert_memory_equal(err, lines[i], strlen(lines[i]));
    err = strchr(err, '\n');
    assert_non_null(err);
    assert_memory_equal(err - 2, " s", 2);
    err++;
  }
  assert_string_equal(err, "");
}

/* Checks the results file of the scripted run. */
static void check_scripted_json(const char *out) {
  json_t *doc = load_json(out);
  assert_true(json_is_true(json_object_get(doc, "complete")));
  assert_int_equal(jint(json_object_get(doc, "options"), "concurrency"), 1); /* one GPU */
  json_t *tasks = json_object_get(doc, "tasks");
  check_scripted_task(json_array_get(tasks, 0), "alpha", 3, 1.25, 3, 3);
  check_scripted_task(json_array_get(tasks, 1), "beta", 2, 2.1, 0, 2);
  check_scripted_task(json_array_get(tasks, 2), "gamma", 1, 2.1, 0, 1);
  json_t *s = json_object_get(doc, "summary");
  assert_int_equal(jint(s, "succeeded"), 3);
  assert_int_equal(jint(s, "failed"), 0);
  assert_int_equal(jint(s, "correct"), 3);
  assert_float_equal(jnum(s, "geomean_speedup_vs_eager"), cbrt(1.6 * (2 / 2.1) * (2 / 2.1)),
                     1e-12);
  assert_float_equal(jnum(s, "geomean_speedup_vs_compile"),
                     cbrt(1.28 * (1.6 / 2.1) * (1.6 / 2.1)), 1e-12);
  assert_float_equal(jnum(s, "memory_bound_geomean_best_over_floor"), cbrt(1.25 * 2.1 * 2.1),
                     1e-12);
  assert_float_equal(jnum(s, "memory_bound_worst_best_over_floor"), 2.1, 1e-12);
  assert_string_equal(jstr(s, "memory_bound_worst_task"), "beta");
  assert_float_equal(jnum(s, "fast_1"), 1.0 / 3.0, 1e-12);
  assert_float_equal(jnum(s, "faster_than_compile"), 1.0 / 3.0, 1e-12);
  json_decref(doc);
}

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

/* Three programs run to their end on one scripted GPU: the table, the summary, the
 * progress lines and the results file carry the figures computed by hand. */
static void test_scripted_run(void **state) {
  (void)state;
  NEED_SERVER();
  if (!g.evaluator[0]) {
    print_message("skipped: $OPFORGE_SCRIPTED_EVALUATOR is not set (tests/engine absent)\n");
    skip();
  }
  scripted_setup();
  char progs[PATH_MAX], fixtures[PATH_MAX], data[PATH_MAX], out[PATH_MAX], base[64];
  snprintf(progs, sizeof progs, "%s/scripted/progs", g.dir);
  snprintf(fixtures, sizeof fixtures, "%s/scripted/fixtures", g.dir);
  snprintf(data, sizeof data, "%s/scripted/data", g.dir);
  snprintf(out, sizeof out, "%s/scripted/out.json", g.dir);
  const char *extra[] = {"--gpus", "0", "--evaluator", g.evaluator, "--fixtures", fixtures,
                         "--evaluate-deadline", "30", "--sandbox-env", "SCRIPTED_EVAL_*",
                         NULL};
  pid_t pid = server_start(data, extra, base);
  assert_true(pid > 0);
  /* In a namespace of its own, created from the seed: the default one stays untouched. */
  const char *args[] = {"bench", progs, "--steps", "4", "--proposer", "test", "--wait-limit",
                        "60", "--out", out, "--server", base, "--memory", "bench_arm",
                        "--fresh-memory", NULL};
  struct proc p;
  /* The smallest reply limit allowed, which a page of alpha's 4 candidates (about 1.1 KB
   * each) exceeds: bench halves its page (200, 100, ... 3) quietly, no line on stderr,
   * and still finds steps_to_best 3. Without the halving the run prints an error. */
  setenv("OPFORGE_MAX_REPLY_BYTES", "4096", 1);
  int rc = run_cli(&p, args);
  unsetenv("OPFORGE_MAX_REPLY_BYTES");
  if (rc != 0)
    print_error("bench exited %d: %s\n", rc, text_str(&p.err));
  assert_int_equal(rc, 0);
  check_scripted_report(text_str(&p.out));
  check_scripted_lines(text_str(&p.err));
  proc_clear(&p);
  check_scripted_json(out);
  /* 3 + 2 + 1 steps were recorded in bench_arm's directions, none in the default's. */
  assert_int_equal(directions_n(base, "bench_arm"), 6);
  assert_int_equal(directions_n(base, "default"), 0);
  assert_int_equal(server_stop(pid), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_unreachable_server),
      cmocka_unit_test(test_wait_limit_leaves_tasks_queued),
      cmocka_unit_test(test_default_concurrency_one_at_a_time),
      cmocka_unit_test(test_cancelled_task_ends_the_run),
      cmocka_unit_test(test_refused_program),
      cmocka_unit_test(test_token),
      cmocka_unit_test(test_kernelbench_directory),
      cmocka_unit_test(test_scripted_run),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
