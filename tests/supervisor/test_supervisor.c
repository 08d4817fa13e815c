/* Tests of gpu/supervisor.c against tests/supervisor/fake_evaluator.c: normal exchanges,
 * timeouts, crashes, garbage, fatal replies, failed starts, the restart storm guard,
 * process-group cleanup, thread-safe state, the pool, and (when present) the real
 * evaluator on CPU torch. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dlfcn.h>

#include "cli/profile.h"
#include "gpu/sandbox.h"
#include "gpu/supervisor.h"

static const char *fake_path;
static char tmp_dir[PATH_MAX];
static char record_path[PATH_MAX];
static char once_path[PATH_MAX];
static char grandchild_path[PATH_MAX];

static const char *const fake_vars[] = {
    "FAKE_RECORD", "FAKE_READY_DELAY_MS", "FAKE_BEFORE_READY", "FAKE_MODE", "FAKE_OP",
    "FAKE_ONCE", "FAKE_GRANDCHILD", "FAKE_IGNORE_TERM", "FAKE_HUGE_BYTES", "FAKE_SLOW_MS",
    "FAKE_AFTER", "FAKE_FROM_START", "FAKE_HELLO", "FAKE_FAIL_STAGE", "FAKE_FAIL_CLASS"};

/* ---- helpers ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void path_in_tmp(char *out, const char *name) {
  int n = snprintf(out, PATH_MAX, "%s/%s", tmp_dir, name);
  assert_true(n > 0 && n < PATH_MAX);
}

/* A fresh temp dir and a clean fake environment for every test. */
static int setup(void **state) {
  (void)state;
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/opforge-sv-XXXXXX");
  if (!mkdtemp(tmp_dir))
    return -1;
  path_in_tmp(record_path, "record.txt");
  path_in_tmp(once_path, "once");
  path_in_tmp(grandchild_path, "grandchild.pid");
  for (size_t i = 0; i < sizeof fake_vars / sizeof fake_vars[0]; i++)
    unsetenv(fake_vars[i]);
  setenv("FAKE_RECORD", record_path, 1);
  setenv("OPFORGE_SANDBOX", "none", 1);  /* see run_profile_cli */
  return 0;
}

/* Removes the temp dir and checks that no child process is left (no zombies either:
 * every child the supervisor made was reaped, every orphan adopted by us was reaped). */
static int teardown(void **state) {
  (void)state;
  const char *names[] = {"record.txt", "once", "grandchild.pid", "stderr.log", "run.sh",
                         "my_task.py", "out.txt", "err.txt"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char p[PATH_MAX];
    path_in_tmp(p, names[i]);
    unlink(p);
  }
  rmdir(tmp_dir);
  int status;
  errno = 0;
  pid_t left = waitpid(-1, &status, WNOHANG);
  if (left != -1 || errno != ECHILD) {
    fprintf(stderr, "child processes left behind (waitpid -> %ld)\n", (long)left);
    return -1;
  }
  return 0;
}

static void base_config(struct supervisor_config *cfg) {
  supervisor_config_defaults(cfg);
  cfg->evaluator_path = fake_path;
  cfg->device = "0";
  cfg->gpu_lib_path = "/opt/x/libopforge_gpu.so";
  cfg->cache_dir = "/tmp/x-cache";
  cfg->mem_fraction = 0.5;
  cfg->start_deadline_s = 5;
  cfg->load_deadline_s = 5;
  cfg->profile_deadline_s = 5;
  cfg->compile_eval_deadline_s = 5;
  cfg->shutdown_deadline_s = 0.5;
}

static struct supervisor *start_ok(const struct supervisor_config *cfg) {
  struct supervisor *sv = NULL;
  char err[512] = "";
  int rc = supervisor_start(cfg, &sv, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "supervisor_start: %d %s\n", rc, err);
  assert_int_equal(rc, 0);
  assert_non_null(sv);
  return sv;
}

/* Whole file as a string (caller frees); "" when absent. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return strdup("");
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  int c;
  while ((c = fgetc(f)) != EOF)
    fputc(c, mem);
  fclose(mem);
  fclose(f);
  return buf;
}

static int count_of(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

static json_t *request(struct supervisor *sv, const char *op, json_t *args, double deadline) {
  json_t *reply = NULL;
  assert_int_equal(supervisor_request(sv, op, args, deadline, &reply), 0);
  assert_non_null(reply);
  return reply;
}

static void load_task(struct supervisor *sv, const char *name) {
  json_t *args = json_pack("{s:s,s:i,s:s}", "source", "import torch", "seed", 42, "name", name);
  json_t *reply = request(sv, "load_task", args, 0);
  assert_true(json_is_true(json_object_get(reply, "ok")));
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(reply, "result"), "name")), name);
  json_decref(reply);
  json_decref(args);
}

/* Asserts a failure reply's stage and class, and returns its message. */
static const char *assert_failure(json_t *reply, const char *stage, const char *cls) {
  assert_true(json_is_false(json_object_get(reply, "ok")));
  json_t *e = json_object_get(reply, "error");
  assert_string_equal(json_string_value(json_object_get(e, "stage")), stage);
  assert_string_equal(json_string_value(json_object_get(e, "class")), cls);
  const char *msg = json_string_value(json_object_get(e, "message"));
  assert_non_null(msg);
  return msg;
}

/* profile must answer with the task loaded in the current process. */
static void assert_profile_of(struct supervisor *sv, const char *name) {
  json_t *reply = request(sv, "profile", NULL, 0);
  assert_true(json_is_true(json_object_get(reply, "ok")));
  json_t *result = json_object_get(reply, "result");
  assert_string_equal(json_string_value(json_object_get(result, "task")), name);
  assert_int_equal(json_integer_value(json_object_get(result, "pid")), supervisor_pid(sv));
  json_decref(reply);
}

static bool pid_gone(long pid) {
  return kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

static long read_pid_file(const char *path) {
  char *text = slurp(path);
  char *end;
  errno = 0;
  long pid = strtol(text, &end, 10);
  bool ok = errno == 0 && end != text && pid > 0;
  free(text);
  assert_true(ok);
  return pid;
}

/* Reaps an orphan we adopted as subreaper and asserts it died of SIGKILL within 5 s
 * (when it is still alive then, it is killed here so the suite can go on, and the test
 * fails). */
static void assert_killed_orphan(long pid) {
  int status = 0;
  pid_t got = 0;
  for (double end = now_s() + 5.0; got == 0 && now_s() < end;) {
    got = waitpid((pid_t)pid, &status, WNOHANG);
    if (got == 0)
      usleep(5000);
  }
  if (got == 0) {
    kill((pid_t)pid, SIGKILL);
    waitpid((pid_t)pid, &status, 0);
    fail_msg("process %ld outlived its evaluator's process group", pid);
  }
  assert_int_equal(got, pid);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGKILL);
}

static const char *describe_str(struct supervisor *sv, const char *key, char *out,
                                size_t outlen) {
  json_t *d = supervisor_describe(sv);
  assert_non_null(d);
  const char *v = json_string_value(json_object_get(d, key));
  snprintf(out, outlen, "%s", v ? v : "(null)");
  json_decref(d);
  return out;
}

/* ---- normal operation ---- */

static void test_normal_exchange(void **state) {
  (void)state;
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  long pid = supervisor_pid(sv);
  assert_true(pid > 0);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_READY);

  json_t *d = supervisor_describe(sv);
  assert_string_equal(json_string_value(json_object_get(d, "name")), "Fake H200");
  assert_string_equal(json_string_value(json_object_get(d, "capability")), "9.0");
  assert_int_equal(json_integer_value(json_object_get(d, "memory_bytes")), 150000000000LL);
  assert_int_equal(json_integer_value(json_object_get(d, "index")), 0);
  assert_string_equal(json_string_value(json_object_get(d, "state")), "ready");
  assert_int_equal(json_integer_value(json_object_get(d, "restarts")), 0);
  assert_true(json_is_null(json_object_get(d, "current_task")));
  assert_int_equal(json_integer_value(json_object_get(d, "pid")), pid);
  json_decref(d);

  load_task(sv, "t1");
  assert_profile_of(sv, "t1");
  json_t *args = json_pack("{s:[i,i]}", "x", 1, 2);
  json_t *reply = request(sv, "echo", args, 0);
  json_t *echoed = json_object_get(reply, "result");
  assert_int_equal(json_integer_value(json_object_get(echoed, "id")), 3);
  assert_string_equal(json_string_value(json_object_get(echoed, "op")), "echo");
  assert_true(json_equal(json_object_get(echoed, "x"), json_object_get(args, "x")));
  json_decref(reply);
  json_decref(args);
  assert_int_equal(supervisor_restarts(sv), 0);
  supervisor_free(sv);
  assert_true(pid_gone(pid));

  char expected[1024];
  snprintf(expected, sizeof expected,
           "start %ld --device 0 --lib /opt/x/libopforge_gpu.so --cache-dir /tmp/x-cache "
           "--mem-fraction 0.5\n"
           "{\"id\":1,\"op\":\"load_task\",\"source\":\"import torch\",\"seed\":42,"
           "\"name\":\"t1\"}\n"
           "{\"id\":2,\"op\":\"profile\"}\n"
           "{\"id\":3,\"op\":\"echo\",\"x\":[1,2]}\n"
           "{\"id\":4,\"op\":\"shutdown\"}\n", pid);
  char *rec = slurp(record_path);
  assert_string_equal(rec, expected);
  free(rec);
}

static void test_bad_arguments(void **state) {
  (void)state;
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  json_t *reply = NULL;
  json_t *arr = json_array();
  assert_int_equal(supervisor_request(sv, "echo", arr, 0, &reply), -EINVAL);
  assert_int_equal(supervisor_request(sv, NULL, NULL, 0, &reply), -EINVAL);
  assert_null(reply);
  json_decref(arr);
  supervisor_free(sv);
  supervisor_free(NULL);
}

/* A request and a reply far larger than a pipe's buffer go through whole (partial
 * writes wait for POLLOUT, partial reads accumulate), and the next exchange still works. */
static void test_large_messages(void **state) {
  (void)state;
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  size_t n = 3u << 20;
  char *big = malloc(n + 1);
  assert_non_null(big);
  for (size_t i = 0; i < n; i++)
    big[i] = (char)('a' + i % 26);
  big[n] = '\0';
  json_t *args = json_pack("{s:s}", "blob", big);
  json_t *reply = request(sv, "echo", args, 0);
  const char *back = json_string_value(json_object_get(json_object_get(reply, "result"),
                                                       "blob"));
  assert_non_null(back);
  assert_int_equal(strlen(back), n);
  assert_int_equal(memcmp(back, big, n), 0);
  json_decref(reply);
  json_decref(args);
  free(big);
  load_task(sv, "after-big");
  assert_profile_of(sv, "after-big");
  assert_int_equal(supervisor_restarts(sv), 0);
  supervisor_free(sv);
}

/* ---- timeouts ---- */

static void test_hang_times_out_restarts_and_reloads(void **state) {
  (void)state;
  setenv("FAKE_MODE", "hang", 1);
  setenv("FAKE_OP", "profile", 1);
  setenv("FAKE_ONCE", once_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  long old_pid = supervisor_pid(sv);
  load_task(sv, "t1");

  double t0 = now_s();
  json_t *reply = request(sv, "profile", NULL, 0.5);
  double elapsed = now_s() - t0;
  assert_true(elapsed >= 0.5);
  assert_true(elapsed < 2.0);
  const char *msg = assert_failure(reply, "timeout", "timeout/profile");
  assert_non_null(strstr(msg, "no reply to profile within 0.5 s"));
  assert_int_equal(json_integer_value(json_object_get(reply, "id")), 2);
  assert_true(json_is_false(json_object_get(reply, "fatal")));
  assert_true(json_is_true(json_object_get(reply, "restarted")));
  assert_true(json_is_true(json_object_get(reply, "reloaded")));
  json_decref(reply);

  assert_int_equal(supervisor_restarts(sv), 1);
  assert_true(pid_gone(old_pid));
  long new_pid = supervisor_pid(sv);
  assert_true(new_pid > 0 && new_pid != old_pid);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_READY);

  char *rec = slurp(record_path);
  assert_int_equal(count_of(rec, "start "), 2);
  assert_int_equal(count_of(rec, "\"op\":\"load_task\""), 2);
  char second_start[64];
  snprintf(second_start, sizeof second_start, "start %ld", new_pid);
  const char *after = strstr(rec, second_start);
  assert_non_null(after);
  assert_non_null(strstr(after, "{\"id\":3,\"op\":\"load_task\",\"source\":\"import torch\","
                                "\"seed\":42,\"name\":\"t1\"}"));
  free(rec);

  assert_profile_of(sv, "t1");
  supervisor_free(sv);
}

static void test_timeout_kills_grandchild(void **state) {
  (void)state;
  setenv("FAKE_MODE", "hang", 1);
  setenv("FAKE_OP", "evaluate", 1);
  setenv("FAKE_ONCE", once_path, 1);
  setenv("FAKE_GRANDCHILD", grandchild_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  long grandchild = read_pid_file(grandchild_path);
  json_t *reply = request(sv, "evaluate", NULL, 0.3);
  assert_failure(reply, "timeout", "timeout/evaluate");
  assert_true(json_is_false(json_object_get(reply, "reloaded")));  /* nothing loaded */
  json_decref(reply);
  assert_killed_orphan(grandchild);

  long second = read_pid_file(grandchild_path);
  assert_true(second != grandchild);
  supervisor_free(sv);
  assert_killed_orphan(second);
}

static void test_load_timeout_forgets_old_task(void **state) {
  (void)state;
  setenv("FAKE_MODE", "hang", 1);
  setenv("FAKE_OP", "load_task", 1);
  setenv("FAKE_AFTER", "1", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  load_task(sv, "t1");
  json_t *args = json_pack("{s:s}", "name", "t2");
  json_t *reply = request(sv, "load_task", args, 0.3);
  assert_failure(reply, "timeout", "timeout/load_task");
  assert_true(json_is_true(json_object_get(reply, "restarted")));
  assert_true(json_is_false(json_object_get(reply, "reloaded")));
  json_decref(reply);
  json_decref(args);
  /* Neither t2 (never loaded) nor t1 (replaced) may come back after the restart. */
  reply = request(sv, "profile", NULL, 0);
  assert_failure(reply, "profile", "profile/no_task");
  json_decref(reply);
  char *rec = slurp(record_path);
  assert_int_equal(count_of(rec, "\"op\":\"load_task\""), 2);
  free(rec);
  supervisor_free(sv);
}

/* A task whose reload kills every fresh process: each attempt is a restart, and with no
 * normal reply in between the storm guard ends it. */
static void test_reload_crash_loop_trips_guard(void **state) {
  (void)state;
  setenv("FAKE_MODE", "exit7", 1);
  setenv("FAKE_OP", "load_task", 1);
  setenv("FAKE_FROM_START", "2", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.restart_limit = 3;
  struct supervisor *sv = start_ok(&cfg);
  load_task(sv, "t-doomed");
  kill((pid_t)supervisor_pid(sv), SIGKILL);
  usleep(50000);
  for (unsigned long i = 1; i <= 3; i++) {
    json_t *reply = request(sv, "profile", NULL, 0);
    const char *msg = assert_failure(reply, "crash", "crash/start_failed");
    assert_string_equal(msg, "evaluator lost again while reloading the task: replaying "
                             "load_task after a restart failed: crash/exit_7");
    json_decref(reply);
    assert_int_equal(supervisor_restarts(sv), i);
    assert_int_equal(supervisor_state(sv), SUPERVISOR_RESTARTING);
  }
  json_t *reply = request(sv, "profile", NULL, 0);
  const char *msg = assert_failure(reply, "crash", "crash/restart_limit");
  assert_string_equal(msg, "3 restarts within 60 s; evaluator marked failed");
  json_decref(reply);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_FAILED);
  char last[512];
  describe_str(sv, "last_error", last, sizeof last);
  assert_string_equal(last, "replaying load_task after a restart failed: crash/exit_7");
  supervisor_free(sv);
}

/* One-shot users turn restarts off: the failure is reported and the process stays down. */
static void test_no_restart(void **state) {
  (void)state;
  setenv("FAKE_MODE", "hang", 1);
  setenv("FAKE_OP", "profile", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.no_restart = true;
  struct supervisor *sv = start_ok(&cfg);
  long pid = supervisor_pid(sv);
  load_task(sv, "t1");
  json_t *reply = request(sv, "profile", NULL, 0.3);
  const char *msg = assert_failure(reply, "timeout", "timeout/profile");
  assert_string_equal(msg, "no reply to profile within 0.3 s; evaluator stopped "
                           "(restarts disabled)");
  assert_true(json_is_false(json_object_get(reply, "restarted")));
  json_decref(reply);
  assert_true(pid_gone(pid));
  assert_int_equal(supervisor_pid(sv), -1);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_RESTARTING);
  reply = request(sv, "profile", NULL, 0);
  msg = assert_failure(reply, "crash", "crash/start_failed");
  assert_non_null(strstr(msg, "restarts are disabled"));
  json_decref(reply);
  assert_int_equal(supervisor_restarts(sv), 0);
  char *rec = slurp(record_path);
  assert_int_equal(count_of(rec, "start "), 1);
  free(rec);
  supervisor_free(sv);
}

/* ---- crashes ---- */

static void crash_case(const char *mode, const char *cls) {
  setenv("FAKE_MODE", mode, 1);
  setenv("FAKE_OP", "evaluate", 1);
  setenv("FAKE_ONCE", once_path, 1);
  unlink(once_path);
  unlink(record_path);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  long old_pid = supervisor_pid(sv);
  load_task(sv, "t-crash");
  json_t *reply = request(sv, "evaluate", NULL, 0);
  const char *msg = assert_failure(reply, "crash", cls);
  assert_non_null(strstr(msg, "evaluator died during evaluate"));
  assert_true(json_is_true(json_object_get(reply, "restarted")));
  assert_true(json_is_true(json_object_get(reply, "reloaded")));
  json_decref(reply);
  assert_int_equal(supervisor_restarts(sv), 1);
  assert_true(pid_gone(old_pid));
  assert_profile_of(sv, "t-crash");
  reply = request(sv, "evaluate", NULL, 0);
  assert_true(json_is_true(json_object_get(reply, "ok")));
  json_decref(reply);
  char last[512];
  describe_str(sv, "last_error", last, sizeof last);
  assert_non_null(strstr(last, cls));
  supervisor_free(sv);
}

static void test_crash_sigsegv(void **state) {
  (void)state;
  crash_case("segv", "crash/signal_11");
}

static void test_crash_abort(void **state) {
  (void)state;
  crash_case("abort", "crash/signal_6");
}

static void test_crash_exit7(void **state) {
  (void)state;
  crash_case("exit7", "crash/exit_7");
}

/* The fake's grandchild inherits the protocol pipes, so the evaluator's death brings no
 * EOF: it must still be seen as a crash at once, not as a timeout at the deadline. */
static void test_crash_seen_despite_inherited_pipes(void **state) {
  (void)state;
  setenv("FAKE_MODE", "segv", 1);
  setenv("FAKE_OP", "evaluate", 1);
  setenv("FAKE_ONCE", once_path, 1);
  setenv("FAKE_GRANDCHILD", grandchild_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  long grandchild = read_pid_file(grandchild_path);
  double t0 = now_s();
  json_t *reply = request(sv, "evaluate", NULL, 5.0);
  assert_true(now_s() - t0 < 2.0);
  assert_failure(reply, "crash", "crash/signal_11");
  json_decref(reply);
  assert_killed_orphan(grandchild);
  long second = read_pid_file(grandchild_path);
  reply = request(sv, "evaluate", NULL, 0);
  assert_true(json_is_true(json_object_get(reply, "ok")));
  json_decref(reply);
  supervisor_free(sv);
  assert_killed_orphan(second);
}

/* ---- garbage ---- */

static void garbage_case(const char *mode, const char *needle, size_t max_line) {
  setenv("FAKE_MODE", mode, 1);
  setenv("FAKE_OP", "profile", 1);
  setenv("FAKE_ONCE", once_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  if (max_line)
    cfg.max_line_bytes = max_line;
  struct supervisor *sv = start_ok(&cfg);
  long old_pid = supervisor_pid(sv);
  load_task(sv, "t-garbage");
  json_t *reply = request(sv, "profile", NULL, 0);
  const char *msg = assert_failure(reply, "crash", "crash/garbage_output");
  if (!strstr(msg, needle))
    fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
  assert_true(json_is_true(json_object_get(reply, "restarted")));
  json_decref(reply);
  assert_int_equal(supervisor_restarts(sv), 1);
  assert_true(pid_gone(old_pid));
  assert_profile_of(sv, "t-garbage");
  supervisor_free(sv);
}

static void test_garbage_line(void **state) {
  (void)state;
  garbage_case("garbage", "unparsable line from the evaluator: this is not json", 0);
}

static void test_wrong_id_is_garbage(void **state) {
  (void)state;
  garbage_case("wrong_id", "line is not the reply to request 2: {\"id\":102", 0);
}

static void test_huge_line_is_garbage(void **state) {
  (void)state;
  setenv("FAKE_HUGE_BYTES", "1048576", 1);
  garbage_case("huge", "reply line longer than 65536 bytes", 65536);
}

static void test_closed_stdout_is_garbage(void **state) {
  (void)state;
  garbage_case("close_stdout", "evaluator closed its stdout", 0);
}

/* ---- fatal replies ---- */

static void test_fatal_reply_passed_through_then_restart(void **state) {
  (void)state;
  setenv("FAKE_MODE", "fatal", 1);
  setenv("FAKE_OP", "evaluate", 1);
  setenv("FAKE_ONCE", once_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  long old_pid = supervisor_pid(sv);
  load_task(sv, "t-fatal");
  json_t *reply = request(sv, "evaluate", NULL, 0);
  json_t *expected = json_pack("{s:i,s:b,s:{s:s,s:s,s:s,s:s},s:b}", "id", 2, "ok", 0,
                               "error", "stage", "launch", "class",
                               "cuda/CUDA_ERROR_ILLEGAL_ADDRESS", "message",
                               "an illegal memory access was encountered", "traceback", "",
                               "fatal", 1);
  assert_true(json_equal(reply, expected));
  json_decref(expected);
  json_decref(reply);
  assert_int_equal(supervisor_restarts(sv), 1);
  assert_true(pid_gone(old_pid));
  assert_int_equal(supervisor_state(sv), SUPERVISOR_READY);
  assert_profile_of(sv, "t-fatal");
  supervisor_free(sv);
}

/* ---- starting ---- */

static void start_fails(const struct supervisor_config *cfg, int want_rc, const char *needle) {
  struct supervisor *sv = (struct supervisor *)0x1;
  char err[512] = "";
  int rc = supervisor_start(cfg, &sv, err, sizeof err);
  assert_int_equal(rc, want_rc);
  assert_ptr_equal(sv, (struct supervisor *)0x1);
  if (!strstr(err, needle))
    fail_msg("error \"%s\" lacks \"%s\"", err, needle);
}

static void test_die_before_ready(void **state) {
  (void)state;
  setenv("FAKE_BEFORE_READY", "exit", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  start_fails(&cfg, -ECHILD, "evaluator ended before its ready line (crash/exit_3)");
}

static void test_garbage_before_ready(void **state) {
  (void)state;
  setenv("FAKE_BEFORE_READY", "garbage", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  start_fails(&cfg, -EPROTO,
              "evaluator wrote Traceback (most recent call last): oops instead of its ready");
}

static void test_no_ready_within_deadline(void **state) {
  (void)state;
  setenv("FAKE_BEFORE_READY", "hang", 1);
  setenv("FAKE_GRANDCHILD", grandchild_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.start_deadline_s = 0.4;
  double t0 = now_s();
  start_fails(&cfg, -ETIMEDOUT, "no ready line within 0.4 s");
  assert_true(now_s() - t0 < 2.0);
  assert_killed_orphan(read_pid_file(grandchild_path));
}

static void test_missing_program(void **state) {
  (void)state;
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.evaluator_path = "/nonexistent/evaluator";
  start_fails(&cfg, -ENOENT, "cannot start /nonexistent/evaluator: No such file or directory");
  cfg.evaluator_path = NULL;
  start_fails(&cfg, -EINVAL, "no evaluator path configured");
}

static void test_slow_ready_within_deadline(void **state) {
  (void)state;
  setenv("FAKE_READY_DELAY_MS", "300", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  double t0 = now_s();
  struct supervisor *sv = start_ok(&cfg);
  assert_true(now_s() - t0 >= 0.3);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_READY);
  supervisor_free(sv);
}

static void test_python_runs_script(void **state) {
  (void)state;
  /* With a python set, argv is python SCRIPT --device ...: use sh as the "python". */
  char script[PATH_MAX];
  path_in_tmp(script, "run.sh");
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  fprintf(f, "exec \"%s\" \"$@\"\n", fake_path);
  fclose(f);
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.python = "sh";
  cfg.evaluator_path = script;
  cfg.gpu_lib_path = NULL;
  cfg.cache_dir = NULL;
  cfg.mem_fraction = 0;
  cfg.device = "cpu";
  struct supervisor *sv = start_ok(&cfg);
  long pid = supervisor_pid(sv);
  json_t *d = supervisor_describe(sv);
  assert_string_equal(json_string_value(json_object_get(d, "device")), "cpu");
  json_decref(d);
  supervisor_free(sv);
  char expected[128];
  snprintf(expected, sizeof expected, "start %ld --device cpu\n", pid);
  char *rec = slurp(record_path);
  assert_int_equal(strncmp(rec, expected, strlen(expected)), 0);
  free(rec);
}

static void test_stderr_to_log(void **state) {
  (void)state;
  char log_path[PATH_MAX];
  path_in_tmp(log_path, "stderr.log");
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.stderr_path = log_path;
  setenv("FAKE_HELLO", "1", 1);
  struct supervisor *sv = start_ok(&cfg);
  long pid = supervisor_pid(sv);
  supervisor_free(sv);
  sv = start_ok(&cfg);  /* appends */
  long pid2 = supervisor_pid(sv);
  supervisor_free(sv);
  char expected[128];
  snprintf(expected, sizeof expected, "fake evaluator %ld starting\nfake evaluator %ld "
           "starting\n", pid, pid2);
  char *text = slurp(log_path);
  assert_string_equal(text, expected);
  free(text);
}

/* In the sandbox (gpu/sandbox.h): the evaluator's stderr reaches the log through the
 * server's pipe, a segfault reads back as crash/signal_11 (bwrap's exit 139), the slot
 * restarts, and the fake cannot write its record file in our temp dir. */
static void test_sandboxed_evaluator(void **state) {
  (void)state;
  if (access("/usr/bin/bwrap", X_OK) != 0) {
    print_message("skipped: bubblewrap is not installed (scripts/test installs it)\n");
    skip();
  }
  struct sandbox_settings settings;
  sandbox_settings_defaults(&settings);
  settings.mode = SANDBOX_BWRAP;
  snprintf(settings.env[settings.n_env++], sizeof settings.env[0], "FAKE_*");
  const char *hidden[] = {tmp_dir, NULL};
  struct sandbox_paths paths = {.evaluator = fake_path, .hidden = hidden};
  struct sandbox *sb = NULL;
  char err[1024];
  assert_int_equal(sandbox_prepare(&settings, &paths, &sb, err, sizeof err), 0);
  char log_path[PATH_MAX];
  path_in_tmp(log_path, "stderr.log");
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.device = "cpu";
  cfg.stderr_path = log_path;
  cfg.sandbox = sb;
  setenv("FAKE_HELLO", "1", 1);
  setenv("FAKE_MODE", "segv", 1);
  setenv("FAKE_OP", "profile", 1);
  struct supervisor *sv = start_ok(&cfg);
  json_t *reply = request(sv, "profile", NULL, 0);
  assert_failure(reply, "crash", "crash/signal_11");
  json_decref(reply);
  assert_int_equal(supervisor_restarts(sv), 1);
  supervisor_free(sv);
  sandbox_free(sb);
  char *text = slurp(log_path);
  int hellos = 0;
  for (const char *p = text; (p = strstr(p, "fake evaluator ")) != NULL; p++)
    hellos++;
  assert_int_equal(hellos, 2);  /* the first process and its restart */
  free(text);
  text = slurp(record_path);
  assert_string_equal(text, "");  /* our temp dir is not in its view */
  free(text);
  /* bwrap's namespace init can outlive bwrap by a moment and then comes to us, the
   * subreaper the teardown's leak check relies on: reap those before it looks. */
  for (int i = 0; i < 200; i++) {
    pid_t left = waitpid(-1, NULL, WNOHANG);
    if (left < 0 && errno == ECHILD)
      break;
    if (left == 0)
      usleep(10000);
  }
}

/* ---- restart storm ---- */

static void test_restart_storm_fails_fast(void **state) {
  (void)state;
  setenv("FAKE_MODE", "segv", 1);
  setenv("FAKE_OP", "profile", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.restart_limit = 5;
  cfg.restart_window_s = 60;
  struct supervisor *sv = start_ok(&cfg);
  for (unsigned long i = 1; i <= 5; i++) {
    json_t *reply = request(sv, "profile", NULL, 0);
    assert_failure(reply, "crash", "crash/signal_11");
    assert_true(json_is_true(json_object_get(reply, "restarted")));
    json_decref(reply);
    assert_int_equal(supervisor_restarts(sv), i);
  }
  json_t *reply = request(sv, "profile", NULL, 0);
  const char *msg = assert_failure(reply, "crash", "crash/signal_11");
  assert_non_null(strstr(msg, "restart failed: 5 restarts within 60 s"));
  assert_true(json_is_false(json_object_get(reply, "restarted")));
  json_decref(reply);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_FAILED);
  assert_int_equal(supervisor_restarts(sv), 5);
  assert_int_equal(supervisor_pid(sv), -1);

  double t0 = now_s();
  reply = request(sv, "evaluate", NULL, 0);
  assert_true(now_s() - t0 < 0.1);
  assert_failure(reply, "crash", "crash/restart_limit");
  json_decref(reply);
  char *rec = slurp(record_path);
  assert_int_equal(count_of(rec, "start "), 6);
  free(rec);
  char st[32];
  assert_string_equal(describe_str(sv, "state", st, sizeof st), "failed");
  supervisor_free(sv);
}

/* Candidates that crash again and again must not take the slot down: each restart is
 * followed by a successful reload, which proves the evaluator itself works. */
static void test_crashing_candidates_do_not_trip_guard(void **state) {
  (void)state;
  setenv("FAKE_MODE", "segv", 1);
  setenv("FAKE_OP", "evaluate", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.restart_limit = 2;
  struct supervisor *sv = start_ok(&cfg);
  load_task(sv, "t-loop");
  for (int i = 0; i < 4; i++) {
    json_t *reply = request(sv, "evaluate", NULL, 0);
    assert_failure(reply, "crash", "crash/signal_11");
    assert_true(json_is_true(json_object_get(reply, "reloaded")));
    json_decref(reply);
  }
  assert_int_equal(supervisor_restarts(sv), 4);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_READY);
  assert_profile_of(sv, "t-loop");
  supervisor_free(sv);
}

/* ---- shutdown ---- */

static void test_free_kills_hung_group(void **state) {
  (void)state;
  setenv("FAKE_MODE", "hang", 1);
  setenv("FAKE_OP", "shutdown", 1);
  setenv("FAKE_IGNORE_TERM", "1", 1);
  setenv("FAKE_GRANDCHILD", grandchild_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  cfg.shutdown_deadline_s = 0.3;
  struct supervisor *sv = start_ok(&cfg);
  long pid = supervisor_pid(sv);
  long grandchild = read_pid_file(grandchild_path);
  double t0 = now_s();
  supervisor_free(sv);
  double elapsed = now_s() - t0;
  assert_true(elapsed >= 0.6);  /* the shutdown request and SIGTERM each got 0.3 s */
  assert_true(elapsed < 3.0);
  assert_true(pid_gone(pid));
  assert_killed_orphan(grandchild);
  char *rec = slurp(record_path);
  assert_int_equal(count_of(rec, "\"op\":\"shutdown\""), 1);
  free(rec);
}

/* ---- between requests ---- */

static void test_stray_output_between_requests(void **state) {
  (void)state;
  setenv("FAKE_MODE", "extra", 1);
  setenv("FAKE_OP", "echo", 1);
  setenv("FAKE_ONCE", once_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  load_task(sv, "t-stray");
  json_t *reply = request(sv, "echo", NULL, 0);
  assert_true(json_is_true(json_object_get(reply, "ok")));
  json_decref(reply);
  usleep(100000);  /* let the stray line arrive */
  assert_profile_of(sv, "t-stray");
  assert_int_equal(supervisor_restarts(sv), 1);
  char last[512];
  describe_str(sv, "last_error", last, sizeof last);
  assert_non_null(strstr(last, "crash/garbage_output: evaluator wrote output between requests"));
  supervisor_free(sv);
}

static void test_death_between_requests(void **state) {
  (void)state;
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  load_task(sv, "t-dead");
  kill((pid_t)supervisor_pid(sv), SIGKILL);
  usleep(100000);
  assert_profile_of(sv, "t-dead");
  assert_int_equal(supervisor_restarts(sv), 1);
  char last[512];
  describe_str(sv, "last_error", last, sizeof last);
  assert_non_null(strstr(last, "crash/signal_9: evaluator died between requests"));
  supervisor_free(sv);
}

/* ---- state seen from other threads ---- */

struct slow_call {
  struct supervisor *sv;
  json_t *reply;
};

static void *slow_request(void *arg) {
  struct slow_call *call = arg;
  supervisor_request(call->sv, "evaluate", NULL, 0, &call->reply);
  return NULL;
}

static void test_describe_while_busy(void **state) {
  (void)state;
  setenv("FAKE_MODE", "slow", 1);
  setenv("FAKE_OP", "evaluate", 1);
  setenv("FAKE_SLOW_MS", "800", 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor *sv = start_ok(&cfg);
  supervisor_set_current_task(sv, "task-123");
  struct slow_call call = {.sv = sv};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, slow_request, &call), 0);
  bool saw_busy = false;
  for (double end = now_s() + 2.0; now_s() < end && !saw_busy;) {
    char st[32];
    saw_busy = strcmp(describe_str(sv, "state", st, sizeof st), "busy") == 0;
    usleep(10000);
  }
  char task[64];
  assert_string_equal(describe_str(sv, "current_task", task, sizeof task), "task-123");
  pthread_join(th, NULL);
  assert_true(saw_busy);
  assert_true(json_is_true(json_object_get(call.reply, "ok")));
  json_decref(call.reply);
  assert_int_equal(supervisor_state(sv), SUPERVISOR_READY);
  supervisor_set_current_task(sv, NULL);
  json_t *d = supervisor_describe(sv);
  assert_true(json_is_null(json_object_get(d, "current_task")));
  json_decref(d);
  supervisor_free(sv);
}

/* ---- pool, disabled slots, discovery ---- */

static void test_pool(void **state) {
  (void)state;
  json_t *empty = supervisor_pool_describe(NULL);
  json_t *want_empty = json_pack("{s:[]}", "devices");
  assert_true(json_equal(empty, want_empty));
  json_decref(empty);
  json_decref(want_empty);
  assert_int_equal(supervisor_pool_restarts(NULL), 0);

  setenv("FAKE_MODE", "exit7", 1);
  setenv("FAKE_OP", "evaluate", 1);
  setenv("FAKE_ONCE", once_path, 1);
  struct supervisor_config cfg;
  base_config(&cfg);
  struct supervisor_pool *pool = supervisor_pool_new();
  assert_non_null(pool);
  assert_int_equal(supervisor_pool_add(pool, start_ok(&cfg)), 0);
  struct supervisor *off = NULL;
  cfg.device = "1";
  assert_int_equal(supervisor_new_disabled(&cfg, "no driver", &off), 0);
  assert_int_equal(supervisor_pool_add(pool, off), 0);
  assert_int_equal(supervisor_pool_count(pool), 2);
  assert_null(supervisor_pool_get(pool, 2));

  json_t *reply = request(supervisor_pool_get(pool, 0), "evaluate", NULL, 0);
  assert_failure(reply, "crash", "crash/exit_7");
  json_decref(reply);
  reply = request(off, "evaluate", NULL, 0);
  assert_failure(reply, "crash", "crash/disabled");
  json_decref(reply);
  supervisor_set_current_task(supervisor_pool_get(pool, 0), "abc");

  json_t *got = supervisor_pool_describe(pool);
  json_t *want = json_pack(
      "{s:[{s:i,s:s,s:s,s:I,s:s,s:i,s:s,s:s},{s:i,s:s,s:n,s:n,s:s,s:i,s:n,s:s}]}",
      "devices", "index", 0, "name", "Fake H200", "capability", "9.0", "memory_bytes",
      (json_int_t)150000000000LL, "state", "ready", "restarts", 1, "current_task", "abc",
      "last_error", "crash/exit_7: evaluator died during evaluate", "index", 1, "name", "1",
      "capability", "memory_bytes", "state", "disabled", "restarts", 0, "current_task",
      "last_error", "no driver");
  if (!json_equal(got, want)) {
    char *text = json_dumps(got, 0);
    fail_msg("pool describe: %s", text);
  }
  json_decref(got);
  json_decref(want);
  assert_int_equal(supervisor_pool_restarts(pool), 1);
  supervisor_pool_free(pool);
  supervisor_pool_free(NULL);
}

static void test_count_gpus(void **state) {
  (void)state;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) {
    dlclose(lib);
    printf("SKIP: a CUDA driver is installed here; the no-driver case cannot be checked\n");
    skip();
  }
  assert_int_equal(supervisor_count_gpus(), 0);
}

static void test_default_paths(void **state) {
  (void)state;
  setenv("OPFORGE_PYTHON", "/custom/python", 1);
  char *p = supervisor_default_python();
  assert_string_equal(p, "/custom/python");
  free(p);
  unsetenv("OPFORGE_PYTHON");
  char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  setenv("HOME", tmp_dir, 1);
  p = supervisor_default_python();
  assert_string_equal(p, "python3");
  free(p);
  char venv[PATH_MAX];
  const char *parts[] = {".cache", ".cache/opforge", ".cache/opforge/venv",
                         ".cache/opforge/venv/bin"};
  for (size_t i = 0; i < 4; i++) {
    path_in_tmp(venv, parts[i]);
    assert_int_equal(mkdir(venv, 0755), 0);
  }
  path_in_tmp(venv, ".cache/opforge/venv/bin/python");
  FILE *f = fopen(venv, "w");
  assert_non_null(f);
  fclose(f);
  chmod(venv, 0755);
  p = supervisor_default_python();
  assert_string_equal(p, venv);
  free(p);
  unlink(venv);
  for (size_t i = 4; i-- > 0;) {
    char dir[PATH_MAX];
    path_in_tmp(dir, parts[i]);
    rmdir(dir);
  }
  if (saved_home)
    setenv("HOME", saved_home, 1);
  free(saved_home);

  setenv("OPFORGE_EVALUATOR", "/x/evaluator/main.py", 1);
  p = supervisor_default_evaluator();
  assert_string_equal(p, "/x/evaluator/main.py");
  free(p);
  unsetenv("OPFORGE_EVALUATOR");
  setenv("OPFORGE_GPU_LIB", "/x/libopforge_gpu.so", 1);
  p = supervisor_default_gpu_lib();
  assert_string_equal(p, "/x/libopforge_gpu.so");
  free(p);
  unsetenv("OPFORGE_GPU_LIB");
}

/* The stage list (base/outcome.h) is exactly the protocol's strings, in the enum's
 * order, and each name parses back to its stage. */
static void test_stage_names(void **state) {
  (void)state;
  static const char *const names[] = {"correct", "parse",   "compile", "load",
                                      "launch",  "correctness", "check", "timeout",
                                      "crash",   "protocol", "profile"};
  for (int i = 0; i < (int)EVAL_STAGE__COUNT; i++) {
    assert_string_equal(eval_stage_name((enum eval_stage)i), names[i]);
    enum eval_stage back;
    assert_int_equal(eval_stage_from_name(names[i], &back), i == 0 ? -1 : 0);
    if (i > 0)
      assert_int_equal(back, i);
  }
  assert_int_equal((int)EVAL_STAGE__COUNT, (int)(sizeof names / sizeof names[0]));
  assert_string_equal(eval_stage_name((enum eval_stage)99), "correctness");
}

/* ---- opforge profile ---- */

/* Runs cli_profile_main with stdout and stderr captured into *ret_out / *ret_err (caller
 * frees). args end with NULL; "FAKE" is replaced by the fake's path. */
static int run_profile_cli(char **ret_out, char **ret_err, ...) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = (char *)"profile";
  va_list ap;
  va_start(ap, ret_err);
  for (const char *a = va_arg(ap, const char *); a && argc < 31; a = va_arg(ap, const char *))
    argv[argc++] = (char *)(strcmp(a, "FAKE") == 0 ? fake_path : a);
  va_end(ap);
  argv[argc] = NULL;
  char out_path[PATH_MAX], err_path[PATH_MAX];
  path_in_tmp(out_path, "out.txt");
  path_in_tmp(err_path, "err.txt");
  fflush(stdout);
  fflush(stderr);
  int saved_out = dup(1), saved_err = dup(2);
  FILE *out = fopen(out_path, "w"), *err = fopen(err_path, "w");
  assert_non_null(out);
  assert_non_null(err);
  dup2(fileno(out), 1);
  dup2(fileno(err), 2);
  int rc = cli_profile_main(argc, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  fclose(out);
  fclose(err);
  *ret_out = slurp(out_path);
  *ret_err = slurp(err_path);
  /* The fake evaluator needs its FAKE_* variables and its record file, which no sandbox
   * passes: OPFORGE_SANDBOX=none (setup), and the warning it earns is taken off here. */
  static const char warning[] = "warning: --sandbox none: the program runs unsandboxed, as "
                                "you and with your environment\n";
  char *w = strstr(*ret_err, warning);
  if (w)
    memmove(w, w + strlen(warning), strlen(w + strlen(warning)) + 1);
  return rc;
}

static void write_task_file(char *path) {
  path_in_tmp(path, "my_task.py");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("import torch\n", f);
  fclose(f);
}

static void test_cli_profile_prints_profile(void **state) {
  (void)state;
  char task[PATH_MAX];
  write_task_file(task);
  char *out, *err;
  int rc = run_profile_cli(&out, &err, "--python", "", "--evaluator", "FAKE", "--device", "0",
                           "--lib", "/x/lib.so", "--seed", "7", "--precision", "bf16", task,
                           NULL);
  assert_int_equal(rc, 0);
  char *rec = slurp(record_path);
  long pid = 0;
  assert_int_equal(sscanf(rec, "start %ld", &pid), 1);
  char expected[256];
  snprintf(expected, sizeof expected, "{\n  \"task\": \"my_task\",\n  \"pid\": %ld\n}\n", pid);
  assert_string_equal(out, expected);
  assert_string_equal(err, "");
  assert_non_null(strstr(rec, "--device 0 --lib /x/lib.so\n"));
  assert_non_null(strstr(rec, "{\"id\":1,\"op\":\"load_task\",\"source\":\"import torch\\n\","
                              "\"seed\":7,\"precision\":\"bf16\",\"tolerance\":{\"atol\":0.01,"
                              "\"rtol\":0.01},\"trials\":5,\"name\":\"my_task\"}\n"
                              "{\"id\":2,\"op\":\"profile\"}\n{\"id\":3,\"op\":\"shutdown\"}\n"));
  assert_true(pid_gone(pid));
  free(rec);
  free(out);
  free(err);
}

static void test_cli_profile_failures(void **state) {
  (void)state;
  char task[PATH_MAX];
  write_task_file(task);
  char *out, *err;
  setenv("FAKE_MODE", "fail", 1);
  setenv("FAKE_OP", "load_task", 1);
  int rc = run_profile_cli(&out, &err, "--python", "", "--evaluator", "FAKE", "--device",
                           "cpu", task, NULL);
  assert_int_equal(rc, 1);
  assert_string_equal(out, "");
  assert_string_equal(err, "error: load/ValueError: ValueError: boom\n"
                           "Traceback (most recent call last):\nValueError: boom\n");
  free(out);
  free(err);

  setenv("FAKE_OP", "profile", 1);
  setenv("FAKE_FAIL_STAGE", "profile", 1);
  setenv("FAKE_FAIL_CLASS", "RuntimeError", 1);
  rc = run_profile_cli(&out, &err, "--python", "", "--evaluator", "FAKE", "--device", "cpu",
                       task, NULL);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(err, "error: profile/RuntimeError: ValueError: boom\n"));
  free(out);
  free(err);

  setenv("FAKE_MODE", "segv", 1);
  rc = run_profile_cli(&out, &err, "--python", "", "--evaluator", "FAKE", "--device", "cpu",
                       task, NULL);
  assert_int_equal(rc, 1);
  assert_string_equal(err, "error: crash/signal_11: evaluator died during profile; evaluator "
                           "stopped (restarts disabled)\n");
  free(out);
  free(err);

  setenv("FAKE_BEFORE_READY", "exit", 1);
  rc = run_profile_cli(&out, &err, "--python", "", "--evaluator", "FAKE", "--device", "cpu",
                       task, NULL);
  assert_int_equal(rc, 1);
  assert_string_equal(err, "error: start: the evaluator did not start: evaluator ended before "
                           "its ready line (crash/exit_3); see its stderr\n");
  free(out);
  free(err);
}

static void test_cli_profile_usage(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(run_profile_cli(&out, &err, NULL), 2);
  assert_non_null(strstr(err, "error: missing FILE.py\nusage: opforge profile FILE.py"));
  free(out);
  free(err);
  assert_int_equal(run_profile_cli(&out, &err, "--device", "gpu0", "x.py", NULL), 2);
  assert_string_equal(err, "error: --device expects cpu, meta or a GPU index, got 'gpu0'\n");
  free(out);
  free(err);
  assert_int_equal(run_profile_cli(&out, &err, "--precision", "fp16", "x.py", NULL), 2);
  assert_string_equal(err, "error: --precision expects fp32, tf32 or bf16, got 'fp16'\n");
  free(out);
  free(err);
  assert_int_equal(run_profile_cli(&out, &err, "/nonexistent/t.py", NULL), 2);
  assert_string_equal(err, "error: cannot read /nonexistent/t.py: No such file or directory\n");
  free(out);
  free(err);
  assert_int_equal(run_profile_cli(&out, &err, "--help", NULL), 0);
  assert_non_null(strstr(out, "usage: opforge profile FILE.py [options]\n"));
  free(out);
  free(err);
}

/* ---- the real evaluator (CPU torch), when it and its Python exist ---- */

static void test_real_evaluator_cpu(void **state) {
  (void)state;
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  char evaluator[PATH_MAX], task[PATH_MAX];
  snprintf(evaluator, sizeof evaluator, "%s/gpu/evaluator/main.py", root ? root : ".");
  snprintf(task, sizeof task, "%s/../shared/kernelbench/level1/19_ReLU.py", root ? root : ".");
  if (access(evaluator, R_OK) != 0 || access(task, R_OK) != 0) {
    printf("SKIP: needs %s and %s\n", evaluator, task);
    skip();
  }
  char *python = supervisor_default_python();
  char stderr_log[PATH_MAX];
  path_in_tmp(stderr_log, "stderr.log");
  struct supervisor_config cfg;
  supervisor_config_defaults(&cfg);
  cfg.python = python;
  cfg.evaluator_path = evaluator;
  cfg.device = "cpu";
  cfg.stderr_path = stderr_log;
  cfg.profile_deadline_s = 300;
  struct supervisor *sv = start_ok(&cfg);
  char *source = slurp(task);
  json_t *args = json_pack("{s:s,s:i,s:s,s:{s:f,s:f},s:i,s:s}", "source", source, "seed", 42,
                           "precision", "fp32", "tolerance", "atol", 1e-4, "rtol", 1e-4,
                           "trials", 5, "name", "19_ReLU");
  free(source);
  json_t *reply = request(sv, "load_task", args, 0);
  assert_true(json_is_true(json_object_get(reply, "ok")));
  json_decref(reply);
  json_decref(args);
  reply = request(sv, "profile", NULL, 0);
  if (!json_is_true(json_object_get(reply, "ok"))) {
    char *text = json_dumps(reply, 0);
    fail_msg("profile failed: %s", text);
  }
  json_t *result = json_object_get(reply, "result");
  /* 19_ReLU's inputs (6+ GB) exceed a small host's share; then it is profiled on meta. */
  const char *device = json_string_value(json_object_get(result, "device"));
  assert_non_null(device);
  assert_true(strcmp(device, "cpu") == 0 || strcmp(device, "meta") == 0);
  json_t *inputs = json_object_get(result, "inputs");
  assert_int_equal(json_array_size(inputs), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(inputs, 0), "name")),
                      "input:0");
  json_decref(reply);
  long pid = supervisor_pid(sv);
  supervisor_free(sv);
  assert_true(pid_gone(pid));
  free(python);
}

int main(void) {
  fake_path = getenv("OPFORGE_FAKE_EVALUATOR");
  if (!fake_path || access(fake_path, X_OK) != 0) {
    fprintf(stderr, "OPFORGE_FAKE_EVALUATOR must name the fake evaluator (meson sets it)\n");
    return 1;
  }
  /* Orphans of killed evaluators come to us, so the tests can see them die and reap
   * them, and can require that nothing is left at the end of each test. */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    perror("prctl(PR_SET_CHILD_SUBREAPER)");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_normal_exchange, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_large_messages, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hang_times_out_restarts_and_reloads, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_timeout_kills_grandchild, setup, teardown),
      cmocka_unit_test_setup_teardown(test_load_timeout_forgets_old_task, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reload_crash_loop_trips_guard, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_restart, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crash_sigsegv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crash_abort, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crash_exit7, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crash_seen_despite_inherited_pipes, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_garbage_line, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_id_is_garbage, setup, teardown),
      cmocka_unit_test_setup_teardown(test_huge_line_is_garbage, setup, teardown),
      cmocka_unit_test_setup_teardown(test_closed_stdout_is_garbage, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fatal_reply_passed_through_then_restart, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_die_before_ready, setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_before_ready, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_ready_within_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_program, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slow_ready_within_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_python_runs_script, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stderr_to_log, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restart_storm_fails_fast, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crashing_candidates_do_not_trip_guard, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_free_kills_hung_group, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stray_output_between_requests, setup, teardown),
      cmocka_unit_test_setup_teardown(test_death_between_requests, setup, teardown),
      cmocka_unit_test_setup_teardown(test_describe_while_busy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_count_gpus, setup, teardown),
      cmocka_unit_test_setup_teardown(test_default_paths, setup, teardown),
      cmocka_unit_test(test_stage_names),
      cmocka_unit_test_setup_teardown(test_cli_profile_prints_profile, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cli_profile_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cli_profile_usage, setup, teardown),
      cmocka_unit_test_setup_teardown(test_real_evaluator_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sandboxed_evaluator, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
