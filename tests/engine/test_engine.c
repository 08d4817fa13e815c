/* Engine tests: the real opforge server with the scripted evaluator and the test
 * proposer, driven through the HTTP API (every response checked against the spec).
 * Fixture candidates (tests/engine/fixtures/TASK/NN.json) script each step's outcome,
 * so step k of a task always gets file (k-1) mod n and the expected progress, rewards
 * and memory statistics can be computed by hand (see the tables below). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "tests/api/harness.h"

#define EAGER_MS 2.0
#define START_TIMEOUT_MS 20000L
#define FINAL_TIMEOUT_MS 40000L
#define MAX_SERVERS 4
#define EPS 1e-9

/* ------------------------------------------------------------------ fixtures */

/* One fixture file's scripted outcome: the step event's "outcome" and "class", and the
 * median time of a correct candidate. */
struct script {
  const char *outcome;  /* "correct", "compile", "correctness" or "crash" */
  const char *cls;      /* failure class, NULL when correct */
  double ms;            /* median time when correct, else 0 */
};

/* A fixture directory: its files 01.json.. in order (kept in step with the files). */
struct fixture_set {
  const char *name;
  size_t n;
  struct script steps[8];
};

#define OK(ms) {"correct", NULL, ms}
#define COMPILE {"compile", "compile/syntax_error", 0}
#define WRONG {"correctness", "correctness/mismatch", 0}
#define CRASH {"crash", "crash/signal_6", 0}

static const struct fixture_set fixture_sets[] = {
  {"softmax_a", 5, {OK(1.6), COMPILE, OK(1.25), WRONG, OK(0.8)}},
  {"softmax_b", 4, {WRONG, OK(2.5), OK(1.0), COMPILE}},
  {"mixed", 6, {OK(1.5), COMPILE, WRONG, OK(0.5), OK(1.0), COMPILE}},
  {"crashy", 3, {OK(1.6), CRASH, OK(1.0)}},
  {"allfail", 3, {COMPILE, WRONG, WRONG}},
  /* 01 and 03 pass by the float64 accuracy budget only ("SCRIPT budget"), 04's robust
   * trial does ("SCRIPT budget-robust") */
  {"softmax_c", 4, {OK(1.2), OK(1.5), OK(1.1), OK(1.3)}},
  /* softmax_b's first two; the name makes the scripted evaluator time library-only
   * programs in turn with eager */
  {"inturn_b", 2, {WRONG, OK(2.5)}},
  /* library-only programs captured, their replay 1% (graphok) or 5% (graphslow) slower
   * than stream order; graphok's step 3 within 2% of the reference's 2.0 ms */
  {"graphok_b", 3, {WRONG, OK(2.5), OK(2.04)}},
  {"graphslow_b", 2, {WRONG, OK(2.5)}},
  {"graphfail_b", 2, {WRONG, OK(2.5)}},
  {"graphoom_b", 2, {WRONG, OK(2.5)}},
};

static const char REFERENCE[] =
    "import torch\n\n"
    "class Model(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n\n"
    "    def forward(self, x):\n"
    "        return torch.softmax(x, dim=-1)\n\n"
    "def get_inputs():\n"
    "    return [torch.randn(256, 512)]\n\n"
    "def get_init_inputs():\n"
    "    return []\n";

/* The table of a fixture directory (static storage); fails the test when unknown. */
static const struct fixture_set *fixture_set(const char *name) {
  for (size_t i = 0; i < sizeof fixture_sets / sizeof fixture_sets[0]; i++)
    if (strcmp(fixture_sets[i].name, name) == 0)
      return &fixture_sets[i];
  fail_msg("no fixture table for %s", name);
  return NULL;
}

/* The scripted outcome of step (1-based) of a task on set. */
static const struct script *script_at(const struct fixture_set *set, int step) {
  return &set->steps[(size_t)(step - 1) % set->n];
}

static char g_fixtures[PATH_MAX];
static char g_evaluator[PATH_MAX];

/* The fixture file replayed at step (caller owns the result). */
static json_t *fixture_at(const struct fixture_set *set, int step) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s/%02zu.json", g_fixtures, set->name,
           (size_t)(step - 1) % set->n + 1);
  json_error_t jerr;
  json_t *doc = json_load_file(path, 0, &jerr);
  if (!doc)
    fail_msg("%s: %s", path, jerr.text);
  return doc;
}

/* ------------------------------------------------------------------ the server */

struct engine_server {
  pid_t pid;
  int out_fd;
  char dir[PATH_MAX];   /* temp dir: data/ (with the evaluator logs), server.log */
  char url[64];
  char gpus[32];
  long delay_ms;        /* SCRIPTED_EVAL_DELAY_MS */
};

static struct engine_server *g_live[MAX_SERVERS];

/* Monotonic milliseconds. */
static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Sleeps ms milliseconds, across signals. */
static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Writes s->dir/name into out (len bytes). */
static void path_in(const struct engine_server *s, const char *name, char *out, size_t len) {
  int n = snprintf(out, len, "%s/%s", s->dir, name);
  assert_true(n > 0 && (size_t)n < len);
}

/* Prints the end of the server's log (for failures). */
static void dump_log(const struct engine_server *s) {
  char path[PATH_MAX + 16];
  path_in(s, "server.log", path, sizeof path);
  harness_dump_log(path, 6144);
}

/* Forks and execs the server on s->dir/data; stdout on a pipe, stderr appended to the
 * log. Its environment is ours without OPFORGE_* (the server reads those as option
 * defaults) and SCRIPTED_EVAL_*, plus the evaluator's delay and log. The evaluator runs
 * in the sandbox, which passes it the SCRIPTED_EVAL_* variables; its log of operations
 * goes to its stderr, which the server copies into data/evaluator-<gpu>-<slot>.log. */
static void spawn_server(struct engine_server *s) {
  char data[PATH_MAX + 8], log[PATH_MAX + 16];
  char delay_var[64];
  path_in(s, "data", data, sizeof data);
  path_in(s, "server.log", log, sizeof log);
  snprintf(delay_var, sizeof delay_var, "SCRIPTED_EVAL_DELAY_MS=%ld", s->delay_ms);
  static const char *const drop[] = {"OPFORGE_", "SCRIPTED_EVAL_", NULL};
  /* The reference program (step 0) runs at eager's 2.0 ms, so the rewards of the steps
   * after it are those the fixtures give against eager. */
  char *const extra[] = {delay_var, "SCRIPTED_EVAL_LOG=stderr",
                         "SCRIPTED_EVAL_PROGRAM=correct 2.0", NULL};
  const char *argv[] = {getenv("OPFORGE_BIN"), "serve", "--listen", "127.0.0.1:0", "--data",
                        data, "--gpus", s->gpus, "--evaluator", g_evaluator, "--fixtures",
                        g_fixtures, "--evaluate-deadline", "30",
                        "--sandbox-env", "SCRIPTED_EVAL_*", "--shutdown-grace", "1", NULL, NULL, NULL};
  harness_add_store(argv, sizeof argv / sizeof argv[0], data);
  char **envp = harness_environment(drop, extra);
  assert_non_null(envp);
  int rc = harness_spawn(argv, envp, log, &s->pid, &s->out_fd);
  free(envp);
  assert_int_equal(rc, 0);
}

/* Reads the server's stdout up to its listening line and keeps the URL. */
static void wait_listening(struct engine_server *s) {
  if (harness_wait_listening(s->out_fd, START_TIMEOUT_MS, s->url, sizeof s->url) == 0)
    return;
  dump_log(s);
  fail_msg("the server did not print its listening line");
}

/* Starts (or restarts, on the same data) the server of s. */
static void es_launch(struct engine_server *s) {
  spawn_server(s);
  wait_listening(s);
}

/* A server on a new temp dir with --gpus gpus and the evaluator's delay (caller ends it
 * with es_stop; the teardown kills whatever a failed test left). */
static struct engine_server *es_start(const char *gpus, long delay_ms) {
  struct engine_server *s = calloc(1, sizeof *s);
  assert_non_null(s);
  s->pid = -1;
  s->out_fd = -1;
  s->delay_ms = delay_ms;
  snprintf(s->gpus, sizeof s->gpus, "%s", gpus);
  snprintf(s->dir, sizeof s->dir, "/tmp/opforge-engine-XXXXXX");
  assert_non_null(mkdtemp(s->dir));
  char data[PATH_MAX + 8];
  path_in(s, "data", data, sizeof data);
  assert_int_equal(mkdir(data, 0700), 0);
  for (size_t i = 0; i < MAX_SERVERS; i++)
    if (!g_live[i]) {
      g_live[i] = s;
      break;
    }
  es_launch(s);
  return s;
}

/* SIGKILLs the server process (its evaluators see EOF and exit on their own). */
static void es_kill9(struct engine_server *s) {
  assert_int_equal(kill(s->pid, SIGKILL), 0);
  int status = 0;
  assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  s->pid = -1;
  close(s->out_fd);
  s->out_fd = -1;
}

/* Frees s and its temp dir; kills the process first when it still runs. */
static void es_free(struct engine_server *s) {
  if (!s)
    return;
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
  }
  if (s->out_fd >= 0)
    close(s->out_fd);
  for (size_t i = 0; i < MAX_SERVERS; i++)
    if (g_live[i] == s)
      g_live[i] = NULL;
  harness_remove_tree(s->dir);
  free(s);
}

/* SIGTERM; the server must exit 0 within 20 s. Frees s. */
static void es_stop(struct engine_server *s) {
  kill(s->pid, SIGTERM);
  int status = harness_wait_exit(s->pid, 20000);
  bool clean = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!clean)
    dump_log(s);
  else
    s->pid = -1;
  es_free(s);
  assert_true(clean);
}

/* ------------------------------------------------------------------ HTTP */

/* One request (body: JSON text or NULL), checked against the spec by the harness. The
 * caller frees the response with http_response_free. */
static struct http_response *es_request(struct engine_server *s, const char *method,
                                        const char *path, const char *body) {
  struct http_request req = {.method = method, .path = path, .body = body,
                             .timeout_ms = 30000};
  return http_do_url(s->url, &req);
}

/* A request whose status must be want; returns the JSON body (caller owns). */
static json_t *es_json(struct engine_server *s, const char *method, const char *path,
                       const char *body, long want) {
  struct http_response *r = es_request(s, method, path, body);
  if (r->status != want)
    fail_msg("%s %s: status %ld, want %ld; body %.600s", method, path, r->status, want, r->body);
  json_t *doc = http_json(r);
  http_response_free(r);
  return doc;
}

/* GET path, which must answer 200; returns the JSON body (caller owns). */
static json_t *es_get(struct engine_server *s, const char *path) {
  return es_json(s, "GET", path, NULL, 200);
}

/* ------------------------------------------------------------------ tasks */

/* Submits a task with the test proposer (or proposer); returns its id (caller frees). */
static char *submit(struct engine_server *s, const char *name, const char *policy,
                    const char *proposer, int steps, int seconds) {
  /* stop_at_floor 0: these tasks spend exactly their budget (the stop rules have tests
   * of their own). */
  json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:{s:i, s:i, s:i}, s:i}", "name", name,
                          "reference", REFERENCE, "proposer", proposer, "policy", policy,
                          "budget", "steps", steps, "seconds", seconds, "stop_at_floor", 0,
                          "seed", 7);
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  struct http_response *r = es_request(s, "POST", "/v1/tasks", text);
  free(text);
  if (r->status != 202)
    fail_msg("POST /v1/tasks: status %ld: %.600s", r->status, r->body);
  json_t *task = http_json(r);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  char location[128];
  snprintf(location, sizeof location, "/v1/tasks/%s", id);
  assert_string_equal(http_header(r, "Location"), location);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "queued");
  json_decref(task);
  http_response_free(r);
  return id;
}

/* Submits like submit(), with the members of extra (a JSON object text: "search",
 * "memory", ...) added to the body; returns the id (caller frees). */
static char *submit_with(struct engine_server *s, const char *name, const char *policy,
                         int steps, const char *extra) {
  json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:{s:i, s:i, s:i}, s:i}", "name", name,
                          "reference", REFERENCE, "proposer", "test", "policy", policy,
                          "budget", "steps", steps, "seconds", 600, "stop_at_floor", 0,
                          "seed", 7);
  json_t *more = json_loads(extra, 0, NULL);
  assert_non_null(more);
  assert_int_equal(json_object_update(req, more), 0);
  json_decref(more);
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  json_t *task = es_json(s, "POST", "/v1/tasks", text, 202);
  free(text);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  json_decref(task);
  return id;
}

/* GET /v1/tasks/{id} (caller owns the task). */
static json_t *get_task(struct engine_server *s, const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s", id);
  return es_get(s, path);
}

/* True for succeeded, failed and cancelled. */
static bool is_final(const char *status) {
  return strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
         strcmp(status, "cancelled") == 0;
}

/* Polls the task until it is final; returns it (caller owns). */
static json_t *wait_final(struct engine_server *s, const char *id) {
  long deadline = now_ms() + FINAL_TIMEOUT_MS;
  for (;;) {
    json_t *task = get_task(s, id);
    if (is_final(json_string_value(json_object_get(task, "status"))))
      return task;
    json_decref(task);
    if (now_ms() > deadline) {
      dump_log(s);
      fail_msg("task %s not final after %ld ms", id, FINAL_TIMEOUT_MS);
    }
    sleep_ms(40);
  }
}

/* Polls until the task has committed at least min_step steps; returns the step seen. */
static int wait_step(struct engine_server *s, const char *id, int min_step) {
  long deadline = now_ms() + FINAL_TIMEOUT_MS;
  for (;;) {
    json_t *task = get_task(s, id);
    int step = (int)json_integer_value(json_object_get(json_object_get(task, "progress"), "step"));
    const char *status = json_string_value(json_object_get(task, "status"));
    bool final = is_final(status);
    json_decref(task);
    if (step >= min_step)
      return step;
    if (final)
      fail_msg("task %s ended at step %d before step %d", id, step, min_step);
    if (now_ms() > deadline)
      fail_msg("task %s did not reach step %d", id, min_step);
    sleep_ms(20);
  }
}

/* The task's whole event stream (it ends because the task is final), as an array of
 * {"seq","type","time","data"} (caller owns). */
static json_t *get_events(struct engine_server *s, const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s/events", id);
  struct http_response *r = es_request(s, "GET", path, NULL);
  assert_int_equal(r->status, 200);
  json_t *events = json_array();
  for (const char *p = r->body; p && *p;) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    if (len > 6 && strncmp(p, "data: ", 6) == 0) {
      json_error_t jerr;
      json_t *ev = json_loadb(p + 6, len - 6, 0, &jerr);
      if (!ev)
        fail_msg("event data is not JSON: %s", jerr.text);
      json_array_append_new(events, ev);
    }
    p = eol ? eol + 1 : NULL;
  }
  http_response_free(r);
  return events;
}

/* Every candidate of the task, the reference (step 0) included, following next_cursor
 * with pages of 2 (caller owns). */
static json_t *get_all_candidates(struct engine_server *s, const char *id) {
  json_t *all = json_array();
  char cursor[64] = "";
  for (int page = 0; page < 1000; page++) {
    char path[256];
    snprintf(path, sizeof path, "/v1/tasks/%s/candidates?limit=2%s%s", id,
             cursor[0] ? "&cursor=" : "", cursor);
    json_t *doc = es_get(s, path);
    json_t *items = json_object_get(doc, "items");
    assert_true(json_array_size(items) <= 2);
    json_array_extend(all, items);
    const char *next = json_string_value(json_object_get(doc, "next_cursor"));
    snprintf(cursor, sizeof cursor, "%s", next ? next : "");
    json_decref(doc);
    if (!next)
      return all;
  }
  fail_msg("candidate pages do not end");
  return NULL;
}

/* True when the fixture set's reference program is scripted wrong ("allfail*"). */
static bool reference_fails(const struct fixture_set *set) {
  return strncmp(set->name, "allfail", 7) == 0;
}

/* The candidates of the task's steps: all but the reference of step 0, which must come
 * first, as a program of library steps (caller owns). */
static json_t *get_candidates(struct engine_server *s, const char *id) {
  json_t *all = get_all_candidates(s, id), *ref = json_array_get(all, 0);
  assert_non_null(ref);
  assert_string_equal(json_string_value(json_object_get(ref, "step_kind")), "reference");
  assert_int_equal(json_integer_value(json_object_get(ref, "step")), 0);
  assert_true(json_is_object(json_object_get(ref, "program")));
  json_array_remove(all, 0);
  return all;
}

/* ------------------------------------------------------------------ expectations */

/* What the fixtures give for steps 1..steps: correct count and best time. */
struct expected_run {
  int steps, correct;
  double best_ms;   /* 0 when no step was correct */
};

/* What the fixtures give, with the reference of step 0 counted: it is correct at eager's
 * time, so it is the best until a fixture beats it. */
static struct expected_run expect_run(const struct fixture_set *set, int steps) {
  struct expected_run e = {.steps = steps, .correct = 1, .best_ms = EAGER_MS};
  if (reference_fails(set))
    e.correct = 0, e.best_ms = 0;
  for (int k = 1; k <= steps; k++) {
    const struct script *sc = script_at(set, k);
    if (strcmp(sc->outcome, "correct") != 0)
      continue;
    e.correct++;
    if (e.best_ms == 0 || sc->ms < e.best_ms)
      e.best_ms = sc->ms;
  }
  return e;
}

static void assert_near(double got, double want, const char *what) {
  if (!(fabs(got - want) <= EPS * (1.0 + fabs(want))))
    fail_msg("%s: got %.17g, want %.17g", what, got, want);
}

/* Index of the candidate with id among the first n of cands, or -1. */
static long candidate_index(json_t *cands, size_t n, const char *id) {
  for (size_t i = 0; id && i < n && i < json_array_size(cands); i++)
    if (strcmp(json_string_value(json_object_get(json_array_get(cands, i), "id")), id) == 0)
      return (long)i;
  return -1;
}

/* The expected reward r of candidate i (docs/architecture.md, "HTAM"): ln(t_parent/t_new) when correct, the
 * parent being the reference (eager) or the node expanded (a failed parent has no time,
 * and the loop then compares with eager); fixed penalties otherwise. */
static double expected_reward(const struct fixture_set *set, json_t *cands, size_t i) {
  const struct script *sc = script_at(set, (int)i + 1);
  if (strcmp(sc->outcome, "compile") == 0)
    return -0.5;
  if (strcmp(sc->outcome, "correctness") == 0)
    return -0.3;
  if (strcmp(sc->outcome, "crash") == 0)
    return -0.7;
  long p = candidate_index(cands, i, json_string_value(
                                         json_object_get(json_array_get(cands, i), "parent_id")));
  double t_parent = EAGER_MS;
  if (p >= 0) {
    const struct script *ps = script_at(set, (int)p + 1);
    t_parent = strcmp(ps->outcome, "correct") == 0 ? EAGER_MS / (EAGER_MS / ps->ms) : EAGER_MS;
  }
  return log(t_parent / sc->ms);
}

/* The greedy chain's parent of step i (0-based): the fastest correct earlier step, the
 * earliest among equals, when it beats the reference (eager); else -1, the reference. */
static long greedy_parent(const struct fixture_set *set, size_t i) {
  long best = -1;
  double best_ms = EAGER_MS;
  for (size_t j = 0; j < i; j++) {
    const struct script *sc = script_at(set, (int)j + 1);
    if (strcmp(sc->outcome, "correct") == 0 && sc->ms < best_ms) {
      best = (long)j;
      best_ms = sc->ms;
    }
  }
  return best;
}

/* ------------------------------------------------------------------ checks of one run */

/* What a finished task left: its task, events and candidates (all owned). */
struct run_record {
  const struct fixture_set *set;
  json_t *task, *events, *candidates;
};

/* Releases what r holds and zeroes it. */
static void run_record_clear(struct run_record *r) {
  json_decref(r->task);
  json_decref(r->events);
  json_decref(r->candidates);
  memset(r, 0, sizeof *r);
}

/* The type of event i (borrowed from events). */
static const char *ev_type(json_t *events, size_t i) {
  return json_string_value(json_object_get(json_array_get(events, i), "type"));
}

/* The step events of a run, in order (borrowed references in a new array). */
static json_t *step_events(json_t *events) {
  json_t *steps = json_array();
  size_t i;
  json_t *ev;
  json_array_foreach(events, i, ev) {
    json_t *data = json_object_get(ev, "data");
    const char *kind = json_string_value(json_object_get(data, "kind"));
    if (strcmp(ev_type(events, i), "step") == 0 && !(kind && strcmp(kind, "reference") == 0))
      json_array_append(steps, data);
  }
  return steps;
}

/* queued, running, profiled, the reference's step 0, step x steps, final, finished:
 * exactly. */
static void check_event_types(json_t *events, int steps, const char *final) {
  size_t n = json_array_size(events);
  if (n != (size_t)steps + 6) {
    char *dump = json_dumps(events, JSON_COMPACT);
    fail_msg("want %d events, got %zu: %.2000s", steps + 6, n, dump);
  }
  assert_string_equal(ev_type(events, 0), "queued");
  assert_string_equal(ev_type(events, 1), "running");
  assert_string_equal(ev_type(events, 2), "profiled");
  json_t *ref = json_object_get(json_array_get(events, 3), "data");
  assert_string_equal(ev_type(events, 3), "step");
  assert_string_equal(json_string_value(json_object_get(ref, "kind")), "reference");
  assert_int_equal(json_integer_value(json_object_get(ref, "step")), 0);
  for (int k = 0; k < steps; k++)
    assert_string_equal(ev_type(events, 4 + (size_t)k), "step");
  assert_string_equal(ev_type(events, n - 2), final);
  assert_string_equal(ev_type(events, n - 1), "finished");
  for (size_t i = 0; i < n; i++)
    assert_int_equal(json_integer_value(json_object_get(json_array_get(events, i), "seq")),
                     (json_int_t)i + 1);
}

/* The baselines from the scripted profile. */
static void check_baselines(json_t *baselines) {
  assert_true(json_is_object(baselines));
  assert_near(json_number_value(json_object_get(baselines, "eager_ms")), 2.0, "eager_ms");
  assert_near(json_number_value(json_object_get(baselines, "compile_ms")), 1.6, "compile_ms");
  assert_near(json_number_value(json_object_get(baselines, "floor_ms")), 1.0, "floor_ms");
  assert_string_equal(json_string_value(json_object_get(baselines, "family")), "softmax");
}

/* progress of the task against the fixtures. */
static void check_progress(json_t *task, const struct expected_run *e, int budget_steps) {
  json_t *p = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(p, "step")), e->steps);
  assert_int_equal(json_integer_value(json_object_get(p, "budget_steps")), budget_steps);
  assert_int_equal(json_integer_value(json_object_get(p, "candidates")), e->steps);
  assert_int_equal(json_integer_value(json_object_get(p, "correct")), e->correct);
  if (e->correct) {
    assert_near(json_number_value(json_object_get(p, "best_speedup")), EAGER_MS / e->best_ms,
                "best_speedup");
    assert_near(json_number_value(json_object_get(p, "best_ms")), e->best_ms, "best_ms");
  } else {
    assert_true(json_is_null(json_object_get(p, "best_speedup")));
    assert_true(json_is_null(json_object_get(p, "best_ms")));
  }
  check_baselines(json_object_get(task, "baselines"));
}

/* One step event against its candidate and the fixtures; *best is the running best. */
static void check_step_event(json_t *data, json_t *cand, const struct script *sc, int step,
                             int budget_steps, double *best, double reward) {
  assert_int_equal(json_integer_value(json_object_get(data, "step")), step);
  assert_int_equal(json_integer_value(json_object_get(data, "budget_steps")), budget_steps);
  assert_string_equal(json_string_value(json_object_get(data, "outcome")), sc->outcome);
  assert_string_equal(json_string_value(json_object_get(data, "candidate")),
                      json_string_value(json_object_get(cand, "id")));
  assert_true(json_equal(json_object_get(data, "direction"), json_object_get(cand, "direction")));
  assert_true(json_equal(json_object_get(data, "strategy"), json_object_get(cand, "strategy")));
  assert_true(json_equal(json_object_get(data, "kind"), json_object_get(cand, "step_kind")));
  assert_near(json_number_value(json_object_get(data, "reward")), reward, "step reward");
  if (sc->cls) {
    assert_string_equal(json_string_value(json_object_get(data, "class")), sc->cls);
    assert_true(json_is_null(json_object_get(data, "time_ms")));
    assert_true(json_is_null(json_object_get(data, "speedup")));
  } else {
    assert_true(json_is_null(json_object_get(data, "class")));
    assert_near(json_number_value(json_object_get(data, "time_ms")), sc->ms, "time_ms");
    assert_near(json_number_value(json_object_get(data, "speedup")), EAGER_MS / sc->ms, "speedup");
    if (*best == 0 || EAGER_MS / sc->ms > *best)
      *best = EAGER_MS / sc->ms;
  }
  if (*best > 0)
    assert_near(json_number_value(json_object_get(data, "best_speedup")), *best, "best_speedup");
  else
    assert_true(json_is_null(json_object_get(data, "best_speedup")));
}

/* Every step event, in order, against the candidates and the fixtures. */
static void check_step_events(const struct run_record *r, int budget_steps) {
  json_t *steps = step_events(r->events);
  assert_int_equal(json_array_size(steps), json_array_size(r->candidates));
  double best = reference_fails(r->set) ? 0 : 1.0;  /* the reference's speed-up */
  for (size_t i = 0; i < json_array_size(steps); i++)
    check_step_event(json_array_get(steps, i), json_array_get(r->candidates, i),
                     script_at(r->set, (int)i + 1), (int)i + 1, budget_steps, &best,
                     expected_reward(r->set, r->candidates, i));
  json_decref(steps);
}

/* The fixture's SCRIPT directive agrees with the table (a guard for the tables). */
static void check_directive(const char *source, const struct script *sc) {
  const char *d = source ? strstr(source, "SCRIPT ") : NULL;
  assert_non_null(d);
  d += strlen("SCRIPT ");
  if (!sc->cls) {
    assert_int_equal(strncmp(d, "correct ", 8), 0);
    assert_near(strtod(d + 8, NULL), sc->ms, "fixture time");
    return;
  }
  const char *word = strcmp(sc->outcome, "correctness") == 0 ? "wrong" : sc->outcome;
  assert_int_equal(strncmp(d, word, strlen(word)), 0);
}

/* Candidate i's stored record: fixture source, options and plan, the evaluator's
 * result, its step and task. */
static void check_candidate_body(json_t *cand, const struct fixture_set *set, size_t i,
                                 const char *task_id) {
  const struct script *sc = script_at(set, (int)i + 1);
  json_t *fixture = fixture_at(set, (int)i + 1);
  check_directive(json_string_value(json_object_get(fixture, "source")), sc);
  assert_true(json_equal(json_object_get(cand, "source"), json_object_get(fixture, "source")));
  assert_true(json_equal(json_object_get(cand, "plan"), json_object_get(fixture, "plan")));
  assert_true(json_equal(json_object_get(cand, "options"), json_object_get(fixture, "options")));
  json_decref(fixture);
  assert_int_equal(json_integer_value(json_object_get(cand, "step")), (json_int_t)i + 1);
  assert_string_equal(json_string_value(json_object_get(cand, "task_id")), task_id);
  json_t *result = json_object_get(cand, "result");
  assert_int_equal(json_is_true(json_object_get(result, "correct")), sc->cls == NULL);
  json_t *failure = json_object_get(result, "failure");
  if (sc->cls) {
    assert_string_equal(json_string_value(json_object_get(failure, "stage")), sc->outcome);
    assert_string_equal(json_string_value(json_object_get(failure, "class")), sc->cls);
  } else {
    assert_true(json_is_null(failure));
    assert_near(json_number_value(json_object_get(json_object_get(result, "time"), "median_ms")),
                sc->ms, "median_ms");
  }
}

/* True when the memory has a global node id (from GET /v1/memory/global). */
static bool has_global(json_t *globals, const char *id) {
  size_t i;
  json_t *g;
  json_array_foreach(globals, i, g) if (strcmp(json_string_value(json_object_get(g, "id")), id) == 0)
      return true;
  return false;
}

/* How many of the first n candidates are small steps from parent. */
static size_t small_children(json_t *cands, size_t n, const char *parent) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *c = json_array_get(cands, i);
    const char *p = json_string_value(json_object_get(c, "parent_id"));
    count += p && strcmp(p, parent) == 0 &&
             strcmp(json_string_value(json_object_get(c, "step_kind")), "small") == 0;
  }
  return count;
}

/* Candidate i's lineage: parent an earlier candidate (the greedy chain's one exactly),
 * direction a memory direction, strategy one of its local nodes, a small tree step
 * keeping its parent's direction. */
static void check_lineage(struct engine_server *s, const struct run_record *r, size_t i,
                          bool greedy, json_t *globals) {
  json_t *cand = json_array_get(r->candidates, i);
  const char *parent = json_string_value(json_object_get(cand, "parent_id"));
  long p = candidate_index(r->candidates, i, parent);
  assert_true(parent == NULL || p >= 0);
  const char *kind = json_string_value(json_object_get(cand, "step_kind"));
  const char *direction = json_string_value(json_object_get(cand, "direction"));
  assert_non_null(direction);
  assert_true(has_global(globals, direction));
  if (greedy) {
    assert_int_equal(p, greedy_parent(r->set, i));
    assert_string_equal(kind, p < 0 ? "large" : "small");
  } else if (strcmp(kind, "small") == 0) {
    assert_true(p >= 0);  /* the reference is always expanded by a large step */
    assert_true(json_equal(json_object_get(json_array_get(r->candidates, (size_t)p), "direction"),
                           json_object_get(cand, "direction")));
    assert_true(small_children(r->candidates, i + 1, parent) <= 2);  /* then a large step */
  } else {
    assert_string_equal(kind, "large");
  }
  const char *strategy = json_string_value(json_object_get(cand, "strategy"));
  if (strategy) {
    char path[160];
    snprintf(path, sizeof path, "/v1/memory/local/%s", strategy);
    json_t *local = es_get(s, path);
    assert_string_equal(json_string_value(json_object_get(local, "global")), direction);
    json_decref(local);
  }
}

/* Every candidate: the list against the fixtures and the lineage rules, and each one
 * through GET /v1/candidates/{id}. */
static void check_candidates(struct engine_server *s, const struct run_record *r, bool greedy) {
  json_t *doc = es_get(s, "/v1/memory/global");
  json_t *globals = json_object_get(doc, "items");
  const char *task_id = json_string_value(json_object_get(r->task, "id"));
  for (size_t i = 0; i < json_array_size(r->candidates); i++) {
    json_t *cand = json_array_get(r->candidates, i);
    check_candidate_body(cand, r->set, i, task_id);
    check_lineage(s, r, i, greedy, globals);
    assert_int_equal(candidate_index(r->candidates, json_array_size(r->candidates),
                                     json_string_value(json_object_get(cand, "id"))),
                     (long)i);  /* ids are unique */
    char path[128];
    snprintf(path, sizeof path, "/v1/candidates/%s",
             json_string_value(json_object_get(cand, "id")));
    json_t *one = es_get(s, path);
    assert_true(json_equal(one, cand));
    json_decref(one);
  }
  json_decref(doc);
}

/* The "finished" event's summary. */
static void check_finished(json_t *events, const struct expected_run *e, const char *status) {
  json_t *data = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(data, "status")), status);
  assert_int_equal(json_integer_value(json_object_get(data, "steps")), e->steps);
  assert_int_equal(json_integer_value(json_object_get(data, "correct")), e->correct);
  if (e->correct)
    assert_near(json_number_value(json_object_get(data, "best_speedup")), EAGER_MS / e->best_ms,
                "finished best_speedup");
}

/* Waits for the task to end and checks everything about it against the fixtures:
 * status, progress, baselines, events in order, step events, candidates. Fills *ret. */
static void check_run(struct engine_server *s, const char *id, const char *fixture,
                      int budget_steps, int want_steps, const char *want_status, bool greedy,
                      struct run_record *ret) {
  struct run_record r = {.set = fixture_set(fixture)};
  r.task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(r.task, "status")), want_status);
  r.events = get_events(s, id);
  r.candidates = get_candidates(s, id);
  struct expected_run e = expect_run(r.set, want_steps);
  check_progress(r.task, &e, budget_steps);
  check_event_types(r.events, want_steps, want_status);
  check_baselines(json_object_get(json_object_get(json_array_get(r.events, 2), "data"),
                                  "baselines"));
  assert_int_equal(json_array_size(r.candidates), want_steps);
  check_step_events(&r, budget_steps);
  check_candidates(s, &r, greedy);
  check_finished(r.events, &e, want_status);
  if (strcmp(want_status, "succeeded") == 0)
    assert_true(json_is_null(json_object_get(r.task, "error")));
  *ret = r;
}

/* ------------------------------------------------------------------ memory checks */

struct tally {
  char id[128];        /* direction, strategy or "from>to" */
  double n, reward, successes, improvements;
};

struct tallies {
  struct tally t[256];
  size_t n;
};

/* The tally named id in ts, added at zero when new (borrowed from ts). */
static struct tally *tally_at(struct tallies *ts, const char *id) {
  for (size_t i = 0; i < ts->n; i++)
    if (strcmp(ts->t[i].id, id) == 0)
      return &ts->t[i];
  assert_true(ts->n < sizeof ts->t / sizeof ts->t[0]);
  struct tally *t = &ts->t[ts->n++];
  memset(t, 0, sizeof *t);
  snprintf(t->id, sizeof t->id, "%s", id);
  return t;
}

/* Adds one step's edges: its prefix (the directions from the expanded node up, repeats
 * collapsed, at most 3, docs/architecture.md, "HTAM" and the search defaults), each weighted by
 * exp(-0.7 i) normalized. A tree patch that kept its node's direction (the step event's
 * direction_kept) chose no transition and writes no edge. */
static void tally_edges(struct tallies *edges, json_t *cands, size_t i, double r, bool kept) {
  if (kept)
    return;
  const char *prefix[3];
  size_t n = 0;
  json_t *cand = json_array_get(cands, i);
  const char *to = json_string_value(json_object_get(cand, "direction"));
  long p = candidate_index(cands, i, json_string_value(json_object_get(cand, "parent_id")));
  while (p >= 0 && n < 3) {
    json_t *pc = json_array_get(cands, (size_t)p);
    const char *d = json_string_value(json_object_get(pc, "direction"));
    if (!(n && strcmp(prefix[n - 1], d) == 0))
      prefix[n++] = d;
    p = candidate_index(cands, (size_t)p, json_string_value(json_object_get(pc, "parent_id")));
  }
  double alpha[3], total = 0;
  for (size_t k = 0; k < n; k++)
    total += alpha[k] = exp(-0.7 * (double)k);
  for (size_t k = 0; k < n; k++) {
    char key[128];
    snprintf(key, sizeof key, "%s>%s", prefix[k], to);
    struct tally *t = tally_at(edges, key);
    t->n += alpha[k] / total;
    t->reward += alpha[k] / total * r;
  }
}

/* Expected statistics of directions, strategies and edges from the runs' steps. */
static void tally_runs(const struct run_record *runs, size_t n_runs, struct tallies *globals,
                       struct tallies *locals, struct tallies *edges) {
  for (size_t k = 0; k < n_runs; k++) {
    json_t *steps = step_events(runs[k].events);
    for (size_t i = 0; i < json_array_size(steps); i++) {
      json_t *data = json_array_get(steps, i);
      double r = json_number_value(json_object_get(data, "reward"));
      bool correct = strcmp(json_string_value(json_object_get(data, "outcome")), "correct") == 0;
      struct tally *g = tally_at(globals, json_string_value(json_object_get(data, "direction")));
      g->n += 1;
      g->reward += r;
      g->successes += correct;
      g->improvements += correct && r > 0;
      const char *strategy = json_string_value(json_object_get(data, "strategy"));
      if (strategy) {
        struct tally *l = tally_at(locals, strategy);
        l->n += 1;
        l->reward += r;
        l->successes += correct;
      }
      tally_edges(edges, runs[k].candidates, i, r,
                  json_is_true(json_object_get(data, "direction_kept")));
    }
    json_decref(steps);
  }
}

/* stats.key of a memory record, 0 when absent. */
static double stat_of(json_t *node, const char *key) {
  return json_number_value(json_object_get(json_object_get(node, "stats"), key));
}

/* path with "?memory=ns" (or "&memory=ns" when it has a query) appended when ns is not
 * NULL, into out (256 bytes). */
static const char *ns_path(const char *path, const char *ns, char *out) {
  snprintf(out, 256, "%s%s%s", path, ns ? (strchr(path, '?') ? "&memory=" : "?memory=") : "",
           ns ? ns : "");
  return out;
}

/* GET /v1/memory/global: every direction's n, reward sum, successes and improvements
 * equal the tally (zero when no step took it). Returns the total n. */
static double check_globals(struct engine_server *s, const char *ns, struct tallies *expect) {
  char path[256];
  json_t *doc = es_get(s, ns_path("/v1/memory/global", ns, path));
  double total = 0;
  size_t i, matched = 0;
  json_t *g;
  json_array_foreach(json_object_get(doc, "items"), i, g) {
    const char *id = json_string_value(json_object_get(g, "id"));
    struct tally none = {.n = 0}, *t = &none;
    for (size_t k = 0; k < expect->n; k++)
      if (strcmp(expect->t[k].id, id) == 0)
        t = &expect->t[k], matched++;
    char what[160];
    snprintf(what, sizeof what, "global %s n", id);
    assert_near(stat_of(g, "n"), t->n, what);
    assert_near(stat_of(g, "reward_sum"), t->reward, "global reward_sum");
    assert_near(stat_of(g, "successes"), t->successes, "global successes");
    assert_near(stat_of(g, "improvements"), t->improvements, "global improvements");
    total += stat_of(g, "n");
  }
  assert_int_equal(matched, expect->n);
  json_decref(doc);
  return total;
}

/* Every local node's n, reward sum and successes equal the tally. */
static void check_locals(struct engine_server *s, const char *ns, struct tallies *expect) {
  char buf[256];
  json_t *doc = es_get(s, ns_path("/v1/memory/global", ns, buf));
  size_t i, j, matched = 0;
  json_t *g, *l;
  json_array_foreach(json_object_get(doc, "items"), i, g) {
    char path[160];
    snprintf(path, sizeof path, "/v1/memory/global/%s/local",
             json_string_value(json_object_get(g, "id")));
    json_t *locals = es_get(s, ns_path(path, ns, buf));
    json_array_foreach(json_object_get(locals, "items"), j, l) {
      const char *id = json_string_value(json_object_get(l, "id"));
      struct tally none = {.n = 0}, *t = &none;
      for (size_t k = 0; k < expect->n; k++)
        if (strcmp(expect->t[k].id, id) == 0)
          t = &expect->t[k], matched++;
      char what[160];
      snprintf(what, sizeof what, "local %s n", id);
      assert_near(stat_of(l, "n"), t->n, what);
      assert_near(stat_of(l, "reward_sum"), t->reward, "local reward_sum");
      assert_near(stat_of(l, "successes"), t->successes, "local successes");
    }
    json_decref(locals);
  }
  assert_int_equal(matched, expect->n);
  json_decref(doc);
}

/* Every edge's weighted n and reward sum equal the tally; edges no step touched stay
 * at zero. */
static void check_edges(struct engine_server *s, const char *ns, struct tallies *expect) {
  char buf[256];
  json_t *doc = es_get(s, ns_path("/v1/memory/edges", ns, buf));
  size_t i, matched = 0;
  json_t *e;
  json_array_foreach(json_object_get(doc, "items"), i, e) {
    char key[128];
    snprintf(key, sizeof key, "%s>%s", json_string_value(json_object_get(e, "from")),
             json_string_value(json_object_get(e, "to")));
    struct tally none = {.n = 0}, *t = &none;
    for (size_t k = 0; k < expect->n; k++)
      if (strcmp(expect->t[k].id, key) == 0)
        t = &expect->t[k], matched++;
    char what[200];
    snprintf(what, sizeof what, "edge %s n", key);
    assert_near(stat_of(e, "n"), t->n, what);
    snprintf(what, sizeof what, "edge %s reward_sum", key);
    assert_near(stat_of(e, "reward_sum"), t->reward, what);
  }
  assert_int_equal(matched, expect->n);
  json_decref(doc);
}

/* The newest evidence rows of every strategy a step used name this task, the step's
 * candidate and its outcome. */
static void check_evidence(struct engine_server *s, const char *ns, const struct run_record *r) {
  json_t *steps = step_events(r->events);
  const char *task_id = json_string_value(json_object_get(r->task, "id"));
  for (size_t i = 0; i < json_array_size(steps); i++) {
    json_t *data = json_array_get(steps, i);
    const char *strategy = json_string_value(json_object_get(data, "strategy"));
    if (!strategy)
      continue;
    char path[160], buf[256];
    snprintf(path, sizeof path, "/v1/memory/local/%s", strategy);
    json_t *local = es_get(s, ns_path(path, ns, buf));
    const char *cand = json_string_value(json_object_get(data, "candidate"));
    size_t k;
    json_t *row, *found = NULL;
    json_array_foreach(json_object_get(local, "evidence"), k, row) if (
        strcmp(json_string_value(json_object_get(row, "candidate_id")), cand) == 0) found = row;
    if (!found)
      fail_msg("no evidence row for candidate %s under %s", cand, strategy);
    assert_string_equal(json_string_value(json_object_get(found, "task_id")), task_id);
    assert_string_equal(json_string_value(json_object_get(found, "outcome")),
                        json_string_value(json_object_get(data, "outcome")));
    assert_near(json_number_value(json_object_get(found, "reward")),
                json_number_value(json_object_get(data, "reward")), "evidence reward");
    json_decref(local);
  }
  json_decref(steps);
}

/* The memory of namespace ns (NULL: the default) counts each step of the runs exactly
 * once: directions, strategies (with evidence rows) and weighted edges; the total n over
 * directions is total_steps. */
static void check_memory_in(struct engine_server *s, const char *ns,
                            const struct run_record *runs, size_t n_runs, int total_steps) {
  struct tallies *t = calloc(3, sizeof *t);
  assert_non_null(t);
  tally_runs(runs, n_runs, &t[0], &t[1], &t[2]);
  assert_near(check_globals(s, ns, &t[0]), total_steps, "total n over the directions");
  check_locals(s, ns, &t[1]);
  check_edges(s, ns, &t[2]);
  for (size_t k = 0; k < n_runs; k++)
    check_evidence(s, ns, &runs[k]);
  free(t);
}

static void check_memory(struct engine_server *s, const struct run_record *runs, size_t n_runs,
                         int total_steps) {
  check_memory_in(s, NULL, runs, n_runs, total_steps);
}

/* The stop reason of a finished run's summary (borrowed). */
static const char *stop_reason(const struct run_record *r) {
  json_t *events = r->events;
  json_t *data = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  return json_string_value(json_object_get(data, "stop_reason"));
}

/* ------------------------------------------------------------------ tests */

/* One policy end to end on softmax_a with a budget of 5 steps: status, events,
 * progress, candidates, and the memory counting each step once. softmax_a scripts
 * 1.6 ms, compile, 1.25 ms, wrong, 0.8 ms, so the task succeeds with 3 correct and a
 * best speed-up of 2.0/0.8 = 2.5 (single stops after step 1: 2.0/1.6 = 1.25). */
static void run_policy(const char *policy, bool greedy, int want_steps) {
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "softmax_a", policy, "test", 5, 600);
  struct run_record r;
  check_run(s, id, "softmax_a", 5, want_steps, "succeeded", greedy, &r);
  assert_string_equal(json_string_value(json_object_get(json_object_get(r.task, "options"),
                                                        "policy")), policy);
  if (greedy) {
    /* By hand: r = ln(2/1.6), -0.5, ln(1.6/1.25), -0.3, ln(1.25/0.8); sum ln(2.5) - 0.8. */
    double sum = 0;
    json_t *steps = step_events(r.events);
    for (size_t i = 0; i < json_array_size(steps); i++)
      sum += json_number_value(json_object_get(json_array_get(steps, i), "reward"));
    json_decref(steps);
    assert_near(sum, want_steps == 1 ? log(1.25) : log(2.5) - 0.8, "reward sum");
  }
  check_memory(s, &r, 1, want_steps);
  run_record_clear(&r);
  free(id);
  es_stop(s);
}

static void test_policy_single(void **state) {
  (void)state;
  run_policy("single", true, 1);
}

static void test_policy_refine(void **state) {
  (void)state;
  run_policy("refine", true, 5);
}

static void test_policy_flat(void **state) {
  (void)state;
  run_policy("flat", true, 5);
}

static void test_policy_htam(void **state) {
  (void)state;
  run_policy("htam", true, 5);
}

static void test_policy_tree(void **state) {
  (void)state;
  run_policy("tree", false, 5);
}

static void test_policy_htam_tree(void **state) {
  (void)state;
  run_policy("htam+tree", false, 5);
}

/* Three tasks one after the other on one slot: the memory's total n is 5 + 4 + 6, each
 * direction, strategy and edge counted once per step, evidence rows for every step. */
static void test_memory_counts_each_step_once(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  static const struct {
    const char *name, *policy;
    int steps;
    bool greedy;
  } plan[] = {{"softmax_a", "refine", 5, true}, {"softmax_b", "htam", 4, true},
              {"mixed", "htam+tree", 6, false}};
  char *ids[3];
  for (size_t i = 0; i < 3; i++)
    ids[i] = submit(s, plan[i].name, plan[i].policy, "test", plan[i].steps, 600);
  struct run_record runs[3];
  for (size_t i = 0; i < 3; i++)
    check_run(s, ids[i], plan[i].name, plan[i].steps, plan[i].steps, "succeeded",
              plan[i].greedy, &runs[i]);
  check_memory(s, runs, 3, 15);
  for (size_t i = 0; i < 3; i++) {
    run_record_clear(&runs[i]);
    free(ids[i]);
  }
  es_stop(s);
}

/* budget.steps is exact while new candidates remain (softmax_a's 5 files, budget 3:
 * 1.6, compile, 1.25 -> with the reference 3 correct, best 1.25 ms); a task with no
 * correct program, its reference included, ends failed with no_correct_candidate. */
static void test_budget_steps(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *a = submit(s, "softmax_a", "refine", "test", 3, 600);
  char *b = submit(s, "allfail", "htam+tree", "test", 3, 600);
  struct run_record ra, rb;
  check_run(s, a, "softmax_a", 3, 3, "succeeded", true, &ra);
  check_run(s, b, "allfail", 3, 3, "failed", false, &rb);
  assert_string_equal(stop_reason(&ra), "budget");
  json_t *error = json_object_get(rb.task, "error");
  assert_string_equal(json_string_value(json_object_get(error, "code")), "no_correct_candidate");
  struct run_record runs[2] = {ra, rb};
  check_memory(s, runs, 2, 6);
  run_record_clear(&ra);
  run_record_clear(&rb);
  free(a);
  free(b);
  es_stop(s);
}

/* budget.seconds 1 with 350 ms evaluations: the budget bounds the task's wall time, the
 * reference's evaluation included, and a step starts only when one of the mean length so
 * far ends within it (engine/budget.c). After the reference (0.35+ s) step 1 starts
 * (0.35 < 1) and ends at 0.70+ s; step 2 would end at 1.05+ s, so exactly 1 of the 10
 * allowed runs (the count holds while load, profile and a step's own overhead stay under
 * 300 ms). Counting step time only, as before, 3 ran. softmax_a succeeds (1.6 ms
 * correct); allfail fails with no_correct_candidate. */
static void test_budget_seconds(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 350);
  char *a = submit(s, "softmax_a", "htam+tree", "test", 10, 1);
  char *b = submit(s, "allfail", "refine", "test", 10, 1);
  struct run_record ra, rb;
  check_run(s, a, "softmax_a", 10, 1, "succeeded", false, &ra);
  check_run(s, b, "allfail", 10, 1, "failed", true, &rb);
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(rb.task, "error"), "code")),
      "no_correct_candidate");
  json_t *progress = json_object_get(ra.task, "progress");
  double elapsed = json_number_value(json_object_get(progress, "elapsed_s"));
  if (!(elapsed >= 0.7 && elapsed <= 1.0))
    print_error("softmax_a: elapsed_s %.3f, want 0.7 to 1.0 (reference and one step)\n",
                elapsed);
  assert_true(elapsed >= 0.7 && elapsed <= 1.0);
  struct run_record runs[2] = {ra, rb};
  check_memory(s, runs, 2, 2);
  run_record_clear(&ra);
  run_record_clear(&rb);
  free(a);
  free(b);
  es_stop(s);
}

/* Cancel after the first step: the task ends cancelled within one step (at most one
 * step event after cancel_requested), with fewer steps than its budget, and the memory
 * counts exactly the steps that ran. */
static void test_cancel_running_task(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 300);
  char *id = submit(s, "softmax_a", "htam+tree", "test", 20, 600);
  wait_step(s, id, 1);
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
  long asked = now_ms();
  json_t *task = es_json(s, "POST", path, NULL, 200);
  assert_true(json_is_true(json_object_get(task, "cancel_requested")));
  assert_string_equal(json_string_value(json_object_get(task, "status")), "running");
  json_decref(task);
  task = wait_final(s, id);
  long took = now_ms() - asked;
  assert_string_equal(json_string_value(json_object_get(task, "status")), "cancelled");
  assert_true(took < 2000);  /* one 300 ms step at most, plus polling */
  json_t *events = get_events(s, id);
  size_t n = json_array_size(events), cancel_at = 0, steps = 0, after = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(ev_type(events, i), "cancel_requested") == 0)
      cancel_at = i;
    if (strcmp(ev_type(events, i), "step") == 0 &&
        json_integer_value(json_object_get(json_object_get(json_array_get(events, i), "data"),
                                           "step")) > 0)
      steps++, after += cancel_at > 0;
  }
  assert_true(cancel_at > 0);
  assert_true(after <= 1);
  assert_true(steps >= 1 && steps < 20);
  assert_string_equal(ev_type(events, n - 2), "cancelled");
  assert_string_equal(ev_type(events, n - 1), "finished");
  json_t *p = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(p, "step")), steps);
  json_t *cands = get_candidates(s, id);
  assert_int_equal(json_array_size(cands), steps);
  struct run_record r = {.set = fixture_set("softmax_a"), .task = task, .events = events,
                         .candidates = cands};
  check_step_events(&r, 20);
  check_memory(s, &r, 1, (int)steps);
  run_record_clear(&r);
  free(id);
  es_stop(s);
}

/* True when the server's log has a line containing text. */
static bool server_log_has(const struct engine_server *s, const char *text) {
  char path[PATH_MAX + 16], line[1024];
  path_in(s, "server.log", path, sizeof path);
  FILE *f = fopen(path, "r");
  bool found = false;
  while (f && !found && fgets(line, sizeof line, f))
    found = strstr(line, text) != NULL;
  if (f)
    fclose(f);
  return found;
}

/* Lines of the evaluator log (slot 0 of GPU 0) whose operation is op. */
static int count_log_ops(const struct engine_server *s, const char *op) {
  char path[PATH_MAX + 32], line[256];
  path_in(s, "data/evaluator-0-0.log", path, sizeof path);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f && fgets(line, sizeof line, f)) {
    const char *space = strchr(line, ' ');
    if (space && strncmp(space + 1, op, strlen(op)) == 0 && space[1 + strlen(op)] == '\n')
      n++;
  }
  if (f)
    fclose(f);
  return n;
}

/* kill -9 of the server after at least two committed steps, then a restart on the same
 * data: the task resumes and ends with exactly budget.steps candidates, steps 1..5 once
 * each, the reference evaluated once, the usual event sequence (no second running or
 * profiled), and the memory counting each step once. */
static void test_resume_after_kill9(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 250);
  char *id = submit(s, "softmax_a", "htam+tree", "test", 5, 600);
  int seen = wait_step(s, id, 2);
  es_kill9(s);
  es_launch(s);
  json_t *task = get_task(s, id);
  int at_restart =
      (int)json_integer_value(json_object_get(json_object_get(task, "progress"), "step"));
  assert_true(at_restart >= seen && at_restart < 5);
  json_decref(task);
  struct run_record r;
  check_run(s, id, "softmax_a", 5, 5, "succeeded", false, &r);
  check_memory(s, &r, 1, 5);
  /* One evaluator per server run, the task loaded by each, profiled once (the profile
   * is stored). Each server run evaluates every fixture its steps reach once (a repeat
   * reuses the run's earlier result; softmax_a's 5 files cycle), plus at most the step in
   * flight at the kill. */
  assert_int_equal(count_log_ops(s, "start"), 2);
  assert_int_equal(count_log_ops(s, "load_task"), 2);
  assert_int_equal(count_log_ops(s, "profile"), 1);
  int evaluated = count_log_ops(s, "evaluate");
  assert_true(evaluated >= 1 + 5 && evaluated <= 1 + 5 + 1);
  run_record_clear(&r);
  free(id);
  es_stop(s);
}

/* SIGTERM while the reference is being evaluated (20 s a request): the server stops its
 * evaluator once the 1 s shutdown grace is over and exits cleanly at once, recording
 * nothing of that evaluation; restarted on the same data, the task evaluates its
 * reference again, then its steps, and ends like any other run: no crash recorded. */
static void test_sigterm_within_the_shutdown_grace(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 20000);
  char *id = submit(s, "softmax_a", "htam+tree", "test", 3, 600);
  long deadline = now_ms() + FINAL_TIMEOUT_MS;
  while (count_log_ops(s, "evaluate") < 1 && now_ms() < deadline)
    usleep(20000);
  assert_int_equal(count_log_ops(s, "evaluate"), 1);
  long stopped_at = now_ms();
  kill(s->pid, SIGTERM);
  int status = harness_wait_exit(s->pid, 20000);
  long took = now_ms() - stopped_at;
  assert_true(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_true(took >= 900 && took < 6000);
  s->pid = -1;
  close(s->out_fd);
  s->out_fd = -1;
  assert_true(server_log_has(s, "shutdown grace of 1 s over: stopping the evaluations still in flight"));
  assert_true(server_log_has(s, "(its evaluation in flight was stopped; it runs again)"));
  json_t *task = NULL;
  s->delay_ms = 0;
  es_launch(s);
  task = get_task(s, id);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(task, "progress"),
                                                      "step")), 0);
  json_decref(task);
  struct run_record r;
  check_run(s, id, "softmax_a", 3, 3, "succeeded", false, &r);
  assert_int_equal(count_log_ops(s, "evaluate"), 1 + 1 + 3);  /* stopped, reference, steps */
  run_record_clear(&r);
  free(id);
  es_stop(s);
}

/* The earliest and latest step-event times of a run (RFC 3339 UTC with ms, which sort
 * as text). */
static void step_span(json_t *events, const char **ret_first, const char **ret_last) {
  *ret_first = *ret_last = NULL;
  for (size_t i = 0; i < json_array_size(events); i++)
    if (strcmp(ev_type(events, i), "step") == 0) {
      const char *t = json_string_value(json_object_get(json_array_get(events, i), "time"));
      if (!*ret_first)
        *ret_first = t;
      *ret_last = t;
    }
  assert_non_null(*ret_first);
}

/* Two tasks on two slots at the same time: their steps overlap in time, and the memory
 * ends with exactly the sum of both tasks' steps, every direction, strategy and edge
 * weight accounted for (no lost update). */
static void test_concurrent_memory_updates(void **state) {
  (void)state;
  struct engine_server *s = es_start("0,1", 25);
  char *a = submit(s, "mixed", "htam+tree", "test", 6, 600);
  char *b = submit(s, "softmax_a", "refine", "test", 5, 600);
  struct run_record runs[2];
  check_run(s, a, "mixed", 6, 6, "succeeded", false, &runs[0]);
  check_run(s, b, "softmax_a", 5, 5, "succeeded", true, &runs[1]);
  const char *a0, *a1, *b0, *b1;
  step_span(runs[0].events, &a0, &a1);
  step_span(runs[1].events, &b0, &b1);
  if (!(strcmp(a0, b1) < 0 && strcmp(b0, a1) < 0))
    fail_msg("the tasks did not run at the same time: %s..%s and %s..%s", a0, a1, b0, b1);
  json_t *devices = es_get(s, "/v1/devices");
  assert_int_equal(json_array_size(json_object_get(devices, "devices")), 2);
  json_decref(devices);
  check_memory(s, runs, 2, 11);
  run_record_clear(&runs[0]);
  run_record_clear(&runs[1]);
  free(a);
  free(b);
  es_stop(s);
}

/* The evaluator aborts in step 2 (crashy: 1.6 ms, crash, 1.0 ms): the step is recorded
 * as a crash failure (stage crash, class crash/signal_6, reward -0.7), the supervisor
 * restarts the evaluator and reloads the task, and step 3 succeeds (best 2.0/1.0). */
static void test_evaluator_crash_mid_task(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "crashy", "refine", "test", 3, 600);
  struct run_record r;
  check_run(s, id, "crashy", 3, 3, "succeeded", true, &r);
  json_t *devices = es_get(s, "/v1/devices");
  json_t *dev = json_array_get(json_object_get(devices, "devices"), 0);
  assert_int_equal(json_integer_value(json_object_get(dev, "restarts")), 1);
  assert_string_equal(json_string_value(json_object_get(dev, "state")), "ready");
  json_decref(devices);
  assert_int_equal(count_log_ops(s, "start"), 2);
  assert_int_equal(count_log_ops(s, "abort"), 1);
  assert_int_equal(count_log_ops(s, "load_task"), 2);  /* replayed after the restart */
  assert_int_equal(count_log_ops(s, "profile"), 1);
  assert_int_equal(count_log_ops(s, "evaluate"), 4);  /* the reference and 3 steps */
  check_memory(s, &r, 1, 3);
  run_record_clear(&r);
  free(id);
  es_stop(s);
}

/* Runs sql on the server's database through a connection of its own. */
static void exec_in_db(const struct engine_server *s, const char *sql) {
  char path[PATH_MAX + 16];
  path_in(s, "data/opforge.db", path, sizeof path);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
    fail_msg("%s: %s", sql, err ? err : "?");
  sqlite3_close(db);
}

/* A reference program slower than eager (node by node 2.6 ms, eager 2.0) gives way to the
 * whole model as one library step (2.0 ms): step 0's candidate is that program, the
 * task's best is x1.0 of eager, never the slower x0.77, and the per-node program was
 * still evaluated (2 evaluations: node by node, the whole model; nothing new is left
 * after them, so no step is spent). */
static void test_slow_reference_gives_way_to_whole_model(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "exotic_slowref", "htam+tree", "builtin", 5, 600);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *progress = json_object_get(task, "progress");
  assert_float_equal(json_number_value(json_object_get(progress, "best_speedup")), 1.0, 1e-9);
  json_t *cands = get_all_candidates(s, id);
  assert_int_equal(json_array_size(cands), 1);
  json_t *step0 = json_array_get(cands, 0);
  assert_string_equal(json_string_value(json_object_get(step0, "step_kind")), "reference");
  json_t *steps = json_object_get(json_object_get(step0, "program"), "steps");
  assert_int_equal(json_array_size(steps), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 0), "library")),
                      "model");
  assert_float_equal(
      json_number_value(json_object_get(json_object_get(json_object_get(step0, "result"),
                                                        "time"), "median_ms")), 2.0, 1e-9);
  assert_string_equal(json_string_value(json_object_get(progress, "best_candidate")),
                      json_string_value(json_object_get(step0, "id")));
  assert_int_equal(count_log_ops(s, "evaluate"), 2);
  json_decref(cands);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* A reference program of library steps only is timed in turn with eager, and that eager
 * time (the scripted evaluator: the program's 2.0 ms + 0.1) becomes the task's: the
 * baselines say eager 2.1 ms and keep the profile's 2.0 as eager_profile_ms, the best is
 * x(2.1 / 2.0) of eager, not x1.0, and a second "profiled" event carries the new
 * baselines before step 0's. Nothing generates the FFT, so step 0 is the only candidate.
 * A candidate's own speed-up in /best (generated=true) is against the same eager time. */
static void test_reference_timed_in_turn_with_eager(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "exotic_inturn", "htam+tree", "builtin", 5, 600);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *baselines = json_object_get(task, "baselines");
  assert_float_equal(json_number_value(json_object_get(baselines, "eager_ms")), 2.1, 1e-9);
  assert_float_equal(json_number_value(json_object_get(baselines, "eager_profile_ms")), 2.0,
                     1e-9);
  json_t *progress = json_object_get(task, "progress");
  assert_float_equal(json_number_value(json_object_get(progress, "best_speedup")), 2.1 / 2.0,
                     1e-9);
  assert_float_equal(json_number_value(json_object_get(progress, "best_ms")), 2.0, 1e-9);
  json_t *events = get_events(s, id);
  static const char *const want[] = {"queued", "running", "profiled", "profiled", "step"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    assert_string_equal(ev_type(events, i), want[i]);
  json_t *again = json_object_get(json_object_get(json_array_get(events, 3), "data"),
                                  "baselines");
  assert_float_equal(json_number_value(json_object_get(again, "eager_ms")), 2.1, 1e-9);
  json_t *step0 = json_object_get(json_array_get(events, 4), "data");
  assert_float_equal(json_number_value(json_object_get(step0, "speedup")), 2.1 / 2.0, 1e-9);
  json_decref(events);
  json_decref(task);
  free(id);
  /* A generated candidate that is not the best (inturn_b's step 2, 2.5 ms): /best's
   * generated=true gives its speed-up against the task's eager time, 2.1 / 2.5, as the
   * task's own figures are, not the evaluator's 2.0 / 2.5 against the profile's. */
  id = submit(s, "inturn_b", "htam+tree", "test", 2, 600);
  json_decref(wait_final(s, id));
  char path[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=true", id);
  json_t *best = es_get(s, path);
  assert_float_equal(json_number_value(json_object_get(best, "time_ms")), 2.5, 1e-9);
  assert_float_equal(json_number_value(json_object_get(best, "speedup")), 2.1 / 2.5, 1e-9);
  json_decref(best);
  free(id);
  es_stop(s);
}

/* A commit the store refuses every time (here a trigger that RAISEs on every step's
 * candidate; in the probe, a CHECK in the memory statistics) is not retried forever: the
 * task fails with store_error after 3 refused commits in a row, each on a fresh claim
 * (the reference commits; step 1 is evaluated 3 times, so 4 evaluations), with the error
 * in GET and in its failed event, and no step committed. The worker is then free: once
 * the trigger is gone, the next task runs its 3 steps. */
static void test_store_refuses_every_commit(void **state) {
  (void)state;
  harness_sqlite_only("the refusing trigger is written in SQLite's dialect, into the file");
  struct engine_server *s = es_start("0", 0);
  exec_in_db(s, "CREATE TRIGGER refuse BEFORE INSERT ON candidates WHEN NEW.step > 0"
                " BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
  long started = now_ms();
  char *id = submit(s, "softmax_a", "htam+tree", "test", 3, 600);
  json_t *task = wait_final(s, id);
  assert_true(now_ms() - started < 30000);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "failed");
  json_t *error = json_object_get(task, "error");
  assert_string_equal(json_string_value(json_object_get(error, "code")), "store_error");
  assert_non_null(strstr(json_string_value(json_object_get(error, "message")),
                         "3 times in a row"));
  json_t *progress = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(progress, "step")), 0);
  assert_int_equal(count_log_ops(s, "evaluate"), 4);
  json_t *events = get_events(s, id);
  size_t n = json_array_size(events);
  assert_true(n >= 2);
  assert_string_equal(ev_type(events, n - 2), "failed");
  assert_string_equal(ev_type(events, n - 1), "finished");
  json_t *data = json_object_get(json_array_get(events, n - 2), "data");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(data, "error"), "code")), "store_error");
  json_decref(events);
  json_decref(task);
  exec_in_db(s, "DROP TRIGGER refuse");
  char *next = submit(s, "softmax_a", "htam+tree", "test", 3, 600);
  task = wait_final(s, next);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(task, "progress"), "step")), 3);
  json_decref(task);
  free(next);
  free(id);
  es_stop(s);
}

/* A task that fails before any step: status failed with error code want_code, the
 * events queued, running, [profiled,] failed, finished, no step and no candidate.
 * Returns the error message (caller frees). */
static char *check_failed_early(struct engine_server *s, const char *id, const char *want_code,
                                bool profiled) {
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "failed");
  json_t *error = json_object_get(task, "error");
  assert_string_equal(json_string_value(json_object_get(error, "code")), want_code);
  char *message = strdup(json_string_value(json_object_get(error, "message")));
  json_t *p = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(p, "step")), 0);
  assert_int_equal(json_integer_value(json_object_get(p, "candidates")), 0);
  assert_true(profiled ? json_is_object(json_object_get(task, "baselines"))
                       : json_is_null(json_object_get(task, "baselines")));
  json_t *events = get_events(s, id);
  static const char *const with_profile[] = {"queued", "running", "profiled", "failed",
                                             "finished"};
  static const char *const without[] = {"queued", "running", "failed", "finished"};
  const char *const *want = profiled ? with_profile : without;
  size_t n = profiled ? 5 : 4;
  assert_int_equal(json_array_size(events), n);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(ev_type(events, i), want[i]);
  json_t *data = json_object_get(json_array_get(events, n - 2), "data");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(data, "error"), "code")), want_code);
  json_t *cands = get_all_candidates(s, id);
  assert_int_equal(json_array_size(cands), 0);
  json_decref(cands);
  json_decref(events);
  json_decref(task);
  return message;
}

/* No LLM proposer in this build: the task fails at once (before profiling) with
 * proposer_unavailable. */
static void test_llm_proposer_unavailable(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "softmax_a", "htam+tree", "llm", 5, 600);
  char *message = check_failed_early(s, id, "proposer_unavailable", false);
  assert_non_null(strstr(message, "'llm'"));
  assert_int_equal(count_log_ops(s, "profile"), 0);
  free(message);
  free(id);
  es_stop(s);
}

/* No task is refused: the builtin proposer covers no FFT, so the partition keeps the op
 * as a library step, with the reason. The task evaluates its reference (graph "auto":
 * stream order or CUDA-graph replay, whichever is faster); its one library step at
 * eager's time is the whole model already, so that is not evaluated again, and nothing
 * new is left (space_exhausted, no step spent). At the scripted 2.0 ms the reference
 * does not beat eager, so the task succeeds with no_speedup and the reference as its
 * best. */
static void test_builtin_unsupported_runs_as_library(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "exotic_fft", "htam+tree", "builtin", 5, 600);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *progress = json_object_get(task, "progress");
  assert_float_equal(json_number_value(json_object_get(progress, "library_share")), 1.0, 0);
  assert_true(json_is_false(json_object_get(progress, "best_graph")));
  json_t *baselines = json_object_get(task, "baselines");
  json_t *regions = json_object_get(baselines, "regions");
  assert_int_equal(json_array_size(regions), 1);
  json_t *r0 = json_array_get(regions, 0);
  assert_string_equal(json_string_value(json_object_get(r0, "kind")), "library");
  assert_non_null(strstr(json_string_value(json_object_get(r0, "reason")),
                         "no builtin family matches"));
  assert_int_equal(json_integer_value(json_object_get(baselines, "generated_regions")), 0);
  json_t *events = get_events(s, id);
  json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")), "space_exhausted");
  assert_true(json_is_true(json_object_get(fin, "no_speedup")));
  json_t *cands = get_all_candidates(s, id);
  assert_int_equal(json_array_size(cands), 1);
  json_t *step0 = json_object_get(json_array_get(cands, 0), "program");
  assert_string_equal(json_string_value(json_object_get(step0, "graph")), "auto");
  assert_int_equal(json_array_size(json_object_get(step0, "steps")), 1);
  assert_int_equal(count_log_ops(s, "evaluate"), 1);
  json_decref(cands);
  json_decref(events);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* With the builtin proposer a step never repeats a candidate the task already evaluated:
 * every evaluated candidate is distinct and none reuses an earlier result (every one
 * fails here, since the scripted evaluator wants a SCRIPT directive, so the reference
 * stays the best and the task succeeds with it). A move that does not fit costs no step. */
static void test_builtin_steps_avoid_repeats(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "plain_softmax", "htam+tree", "builtin", 10, 600);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_decref(task);
  json_t *candidates = get_candidates(s, id);
  assert_true(json_array_size(candidates) >= 5 && json_array_size(candidates) <= 10);
  json_t *seen = json_object();
  size_t i, evaluated = 0;
  json_t *c;
  json_array_foreach(candidates, i, c) {
    assert_null(json_object_get(json_object_get(c, "result"), "reused_from"));
    if (!json_string_length(json_object_get(c, "source")))
      continue;
    json_t *pair = json_pack("[O, O]", json_object_get(c, "source"), json_object_get(c, "options"));
    char *key = json_dumps(pair, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(pair);
    assert_null(json_object_get(seen, key));
    json_object_set_new(seen, key, json_true());
    free(key);
    evaluated++;
  }
  assert_true(evaluated >= 5);
  assert_int_equal(count_log_ops(s, "evaluate"), (int)evaluated + 1);  /* + the reference */
  json_decref(seen);
  json_decref(candidates);
  free(id);
  es_stop(s);
}

/* A task whose search space is larger than its budget spends the whole budget: here every
 * builtin softmax candidate is correct, in a time fixed by its text (the scripted
 * evaluator's "timed" tasks), and the seed memory's softmax moves reach more distinct
 * candidates than 32 steps evaluate. Before nodes without moves fell back to open ones it
 * ended space_exhausted after 8 steps (with a 16-step budget, before patches tried other
 * directions); the fallback itself is shown by
 * test_refused_moves_do_not_use_up_the_retries, whose nodes run out of moves. */
static void test_open_space_spends_the_budget(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "plain_timed_softmax", "htam+tree", "builtin", 32, 600);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *events = get_events(s, id);
  json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")), "budget");
  json_t *progress = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(progress, "step")), 32);
  json_decref(events);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* The direction of the candidate whose id is id in cands (borrowed), or NULL. */
static const char *direction_of(json_t *cands, const char *id) {
  json_t *c;
  size_t i;
  json_array_foreach(cands, i, c) {
    if (id && strcmp(json_string_value(json_object_get(c, "id")), id) == 0)
      return json_string_value(json_object_get(c, "direction"));
  }
  return NULL;
}

/* A patch (small step) keeps its node's direction; when every move of that direction
 * repeats an evaluated candidate at the node, the step tries the other directions'
 * strategies before it gives the node up. Here (the timed softmax of the test above)
 * the first patches exhaust their direction's moves: later small steps change direction
 * from their parent's, and the task spends its budget. Before that fallback no small step
 * ever changed direction and the region was given up at the node (on GPU: four level-1
 * reductions ended space_exhausted after one step). */
static void test_patch_tries_other_directions_before_giving_up(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "plain_timed_softmax", "htam+tree", "builtin", 16, 600);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *progress = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(progress, "step")), 16);
  json_decref(task);
  json_t *cands = get_candidates(s, id);
  int switched = 0;
  json_t *c;
  size_t i;
  json_array_foreach(cands, i, c) {
    const char *kind = json_string_value(json_object_get(c, "step_kind"));
    const char *parent = direction_of(cands, json_string_value(json_object_get(c, "parent_id")));
    const char *own = json_string_value(json_object_get(c, "direction"));
    if (kind && strcmp(kind, "small") == 0 && parent && own && strcmp(parent, own) != 0)
      switched++;
  }
  assert_true(switched >= 1);
  json_decref(cands);
  free(id);
  es_stop(s);
}

/* A memory local for the test below: MODE set to mode (refused by the softmax family
 * unless it is one of its modes) or, with mode NULL, knob set to value. Caller owns. */
static json_t *softmax_local(const char *id, const char *knob, const char *mode, int value) {
  json_t *move = mode ? json_pack("{s:s, s:s, s:s}", "knob", "MODE", "op", "set", "value", mode)
                      : json_pack("{s:s, s:s, s:i}", "knob", knob, "op", "set", "value", value);
  return json_pack("{s:s, s:s, s:s, s:s, s:o, s:[s], s:[s]}", "id", id, "global",
                   "parallel_mapping", "name", id, "edit_pattern", "a test move", "knob_move",
                   move, "checks", "none", "families", "softmax");
}

/* A memory direction for the test below (caller owns). */
static json_t *test_global(const char *id) {
  return json_pack("{s:s, s:s, s:s, s:[s], s:[s], s:[s], s:f}", "id", id, "name", id, "intent",
                   "a test direction", "objectives", "none", "triggers", "family:softmax",
                   "risks", "none", "prior", 0.5);
}

/* Moves that do not fit the region's shapes (parse/invalid_move, refused before any
 * compile) cost nothing, so they do not count against the retry limit: here the memory's
 * only softmax moves are ten refused MODEs, then MINB=2 and BLOCK=128. The reachable
 * programs are the defaults, each valid move alone and both together: 4, so the task ends
 * space_exhausted after exactly 4 steps. With the limit at 8 tries whatever the outcome,
 * a step whose retries met the ten refusals first gave the region up (on the H200,
 * 49_Max, 51_Argmax and 52_Argmin, whose column kernel refuses most moves, ended after one
 * step at 1.09x where 1.26x had been reached). */
static void test_refused_moves_do_not_use_up_the_retries(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  json_t *locals = json_array();
  for (int i = 0; i < 10; i++) {
    char id[32], mode[32];
    snprintf(id, sizeof id, "a_refused_%d", i);
    snprintf(mode, sizeof mode, "no_such_mode_%d", i);
    json_array_append_new(locals, softmax_local(id, NULL, mode, 0));
  }
  json_array_append_new(locals, softmax_local("z_minb", "MINB", NULL, 2));
  json_array_append_new(locals, softmax_local("z_block", "BLOCK", NULL, 128));
  json_t *doc = json_pack("{s:i, s:[o,o], s:o, s:[]}", "version", 1, "globals",
                          test_global("memory_access"), test_global("parallel_mapping"),
                          "locals", locals, "edges");
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  json_decref(es_json(s, "POST", "/v1/memory/import", text, 200));
  free(text);
  char *id = submit(s, "plain_timed_softmax", "htam+tree", "builtin", 8, 600);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *progress = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(progress, "step")), 4);
  json_t *events = get_events(s, id);
  json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")), "space_exhausted");
  /* Nodes run out of moves before the space does: the descent falls back to open ones. */
  assert_true(server_log_has(s, "has no move left: expanding node"));
  json_decref(events);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* The error code of a request that must answer want (JSON error body). */
static void expect_best_error(struct engine_server *s, const char *path, long want,
                              const char *code, const char *field) {
  json_t *doc = es_json(s, "GET", path, NULL, want);
  json_t *error = json_object_get(doc, "error");
  assert_string_equal(json_string_value(json_object_get(error, "code")), code);
  if (field)
    assert_string_equal(json_string_value(json_object_get(error, "field")), field);
  json_decref(doc);
}

/* The id of the candidate of step (borrowed from cands), failing the test when none. */
static const char *candidate_of_step(json_t *cands, long long step) {
  json_t *c;
  size_t i;
  json_array_foreach(cands, i, c) {
    if (json_integer_value(json_object_get(c, "step")) == step)
      return json_string_value(json_object_get(c, "id"));
  }
  fail_msg("no candidate of step %lld", step);
  return NULL;
}

/* The best of path: asserts its candidate and time, and its speed-up eager 2.0 / time. */
static void expect_best_candidate(struct engine_server *s, const char *path,
                                  const char *candidate_id, double ms) {
  json_t *best = es_get(s, path);
  assert_string_equal(json_string_value(json_object_get(best, "candidate_id")), candidate_id);
  assert_float_equal(json_number_value(json_object_get(best, "time_ms")), ms, 1e-9);
  assert_float_equal(json_number_value(json_object_get(best, "speedup")), 2.0 / ms, 1e-9);
  json_decref(best);
}

/* GET /best?generated=true: softmax_b's step 1 is wrong and step 2 correct at 2.5 ms, so
 * the best is the reference program (2.0 ms, library steps only), which format=cuda cannot
 * express (409 conflict); generated=true answers step 2's kernel with its own figures
 * (2.5 ms, eager 2.0 / 2.5 = 0.8), as JSON and as a KernelBench file. With only the wrong
 * step, no correct candidate runs generated code: 409 no_generated_candidate, also with
 * elementwise=true (generated code, not the tolerance, is what is missing). A malformed
 * flag is 400 invalid_query. The server log's line of the wrong step ends with its
 * failure's message. */
static void test_best_generated_takes_the_fastest_kernel(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "softmax_b", "htam+tree", "test", 2, 600);
  json_decref(wait_final(s, id));
  char path[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/best", id);
  expect_best_error(s, path, 409, "conflict", "format");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=yes", id);
  expect_best_error(s, path, 400, "invalid_query", "generated");
  assert_true(server_log_has(s, "step 1/2: region all ") &&
              server_log_has(s, " -> correctness/mismatch: output:0 differs from the reference "
                                "(max_abs 0.5)\n"));
  json_t *cands = get_all_candidates(s, id);
  const char *step2 = candidate_of_step(cands, 2);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=true", id);
  expect_best_candidate(s, path, step2, 2.5);
  json_t *best = es_get(s, path);
  assert_non_null(strstr(json_string_value(json_object_get(best, "source")),
                         "SCRIPT correct 2.5"));
  json_decref(best);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=kernelbench&generated=true", id);
  struct http_response *r = es_request(s, "GET", path, NULL);
  assert_int_equal(r->status, 200);
  char header[160];
  snprintf(header, sizeof header, "# Candidate %s of task %s.", step2, id);
  assert_non_null(strstr(r->body, header));
  assert_non_null(strstr(r->body, "SCRIPT correct 2.5"));
  assert_non_null(strstr(r->body, "__global__"));
  http_response_free(r);
  json_decref(cands);
  free(id);
  id = submit(s, "softmax_b", "htam+tree", "test", 1, 600);
  json_decref(wait_final(s, id));
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=true", id);
  expect_best_error(s, path, 409, "no_generated_candidate", "generated");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=true&elementwise=true", id);
  expect_best_error(s, path, 409, "no_generated_candidate", "generated");
  free(id);
  es_stop(s);
}

/* A finished task and its KernelBench file of /best (library_export_run). */
struct library_run {
  char *id;
  json_t *cands;
  char *body;
};

/* Asserts that body, the export of fixture set name's task, holds need, with "@REF@" in it
 * replaced by reference (the reference's candidate id). */
static void expect_in_export(const char *name, const char *body, const char *need,
                             const char *reference) {
  char text[512];
  const char *at = strstr(need, "@REF@");
  if (at && reference) {
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - need), need, reference, at + 5);
    need = text;
  }
  if (!strstr(body, need))
    print_error("%s: missing from the export:\n%s\n--- the export's head:\n%.600s\n", name,
                need, body);
  assert_non_null(strstr(body, need));
}

/* Runs fixture set name for steps steps on s, then GETs /best?format=kernelbench (200
 * expected) and asserts that the file is the export of the candidate of step want_step,
 * holding every one of the NULL-terminated texts in want (expect_in_export). The caller
 * frees with library_run_free. */
static struct library_run library_export_run(struct engine_server *s, const char *name,
                                             int steps, long long want_step,
                                             const char *const *want) {
  struct library_run run = {submit(s, name, "htam+tree", "test", steps, 600), NULL, NULL};
  json_decref(wait_final(s, run.id));
  run.cands = get_all_candidates(s, run.id);
  char path[160], header[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=kernelbench", run.id);
  struct http_response *r = es_request(s, "GET", path, NULL);
  if (r->status != 200)
    print_error("GET %s: %ld %.400s\n", path, r->status, r->body);
  assert_int_equal(r->status, 200);
  assert_non_null(r->body);
  run.body = strdup(r->body);
  http_response_free(r);
  snprintf(header, sizeof header, "# Candidate %s of task %s.",
           candidate_of_step(run.cands, want_step), run.id);
  expect_in_export(name, run.body, header, NULL);
  for (size_t i = 0; want[i]; i++)
    expect_in_export(name, run.body, want[i], candidate_of_step(run.cands, 0));
  return run;
}

static void library_run_free(struct library_run *run) {
  free(run->id);
  json_decref(run->cands);
  free(run->body);
}

/* GET /best?format=kernelbench of a best that runs library steps only (the reference of
 * step 0, 2.0 ms), which must still hold a kernel where it can (KernelBench's static
 * checker refuses a file without one), at the best's speed where it can:
 * - graphok_b after 2 steps (a kernel at 2.5 ms, 25% slower; the reference's graph replay
 *   timed 1% slower than stream order): the reference, captured, staging its inputs with
 *   the kernel of _OFG_STAGE;
 * - graphok_b after 3 steps (a kernel at 2.04 ms, within 2% of 2.0): that kernel;
 * - graphslow_b (the replay 5% slower, 2.1 ms on the best's clock; the kernel at 2.5 ms):
 *   nothing within 2%, so the faster of the two, the captured reference, whose head says
 *   that no choice with a kernel was within 2%;
 * - graphoom_b (not captured for lack of memory; the kernel at 2.5 ms): the reference
 *   captured, its replay estimated at 2.04 ms (2.0 plus copying the 512 KiB input at
 *   2.62144e10 B/s: 0.04 ms), within 2%;
 * - graphfail_b after 1 step (no kernel correct, no replay timed): the reference in stream
 *   order, with no kernel, as its head says.
 * Each head names the choice's reason. generated=true still answers the fastest kernel;
 * pure=true still refuses. */
static void test_best_kernelbench_of_a_library_only_best(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  static const char *const captured[] = {
      "_OFG_CAPTURE = True\n", "ofg_stage_kernel<<<",
      "# as one CUDA graph: each call copies its inputs",
      "# The task's best, candidate @REF@ (2 ms), runs library steps only: this file\n# replays "
      "it as one CUDA graph, whose input staging is its kernel; the replay takes\n# 2.02 ms "
      "(the evaluator's timing).\n",
      NULL};
  struct library_run run = library_export_run(s, "graphok_b", 2, 0, captured);
  char path[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=kernelbench&generated=true", run.id);
  struct http_response *r = es_request(s, "GET", path, NULL);
  assert_int_equal(r->status, 200);
  char header[160];
  snprintf(header, sizeof header, "# Candidate %s of task %s.",
           candidate_of_step(run.cands, 2), run.id);
  assert_non_null(strstr(r->body, header));
  http_response_free(r);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=kernelbench&pure=true", run.id);
  expect_best_error(s, path, 409, "not_pure", "pure");
  library_run_free(&run);

  static const char *const near[] = {
      "SCRIPT correct 2.04",
      "# The task's best, candidate @REF@ (2 ms), runs library steps only;\n# this candidate "
      "runs generated code in 2.04 ms, within 2% of it.\n",
      NULL};
  run = library_export_run(s, "graphok_b", 3, 3, near);
  library_run_free(&run);

  static const char *const slower[] = {
      "_OFG_CAPTURE = True\n",
      "# 2.1 ms (the evaluator's timing);\n# no choice with a kernel was within 2% of the "
      "best.\n",
      NULL};
  run = library_export_run(s, "graphslow_b", 2, 0, slower);
  library_run_free(&run);

  static const char *const estimated[] = {
      "_OFG_CAPTURE = True\n",
      "# 2.04 ms (estimated: the evaluator could not capture it beside the other worker "
      "slots\n# for lack of device memory; the best's time plus copying the inputs).\n",
      NULL};
  run = library_export_run(s, "graphoom_b", 2, 0, estimated);
  library_run_free(&run);

  static const char *const none[] = {
      "_OFG_CAPTURE = False\n", "_OFG_STAGE = None\n",
      "it has no kernel of its own, so KernelBench's static checker refuses it", NULL};
  run = library_export_run(s, "graphfail_b", 1, 0, none);
  library_run_free(&run);
  es_stop(s);
}

/* GET /best?elementwise=true: softmax_c's steps are correct at 1.2 ms (a trial passed by
 * the float64 accuracy budget only), 1.5 ms (element-wise), 1.1 ms (by the budget only)
 * and 1.3 ms (element-wise on the task's own inputs, the robust randn trial by the
 * budget: KernelBench's eval never runs that one). The best is step 3; elementwise=true
 * answers step 4 with its own figures (1.3 ms, speed-up 2.0 / 1.3), alone, with
 * generated=true, and as a KernelBench file. After step 1 alone, the fastest element-wise
 * candidate is the reference program (library steps only: 409 conflict in format cuda),
 * and with generated=true there is none: 409 no_elementwise_candidate. A malformed flag
 * is 400 invalid_query. */
static void test_best_elementwise_skips_budget_judged_candidates(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "softmax_c", "htam+tree", "test", 4, 600);
  json_decref(wait_final(s, id));
  json_t *cands = get_all_candidates(s, id);
  char path[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/best?elementwise=1", id);
  expect_best_error(s, path, 400, "invalid_query", "elementwise");
  snprintf(path, sizeof path, "/v1/tasks/%s/best", id);
  expect_best_candidate(s, path, candidate_of_step(cands, 3), 1.1);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?elementwise=true", id);
  expect_best_candidate(s, path, candidate_of_step(cands, 4), 1.3);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=true&elementwise=true", id);
  expect_best_candidate(s, path, candidate_of_step(cands, 4), 1.3);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=kernelbench&elementwise=true", id);
  struct http_response *r = es_request(s, "GET", path, NULL);
  assert_int_equal(r->status, 200);
  assert_non_null(strstr(r->body, "SCRIPT budget-robust 1.3"));
  http_response_free(r);
  json_decref(cands);
  free(id);
  id = submit(s, "softmax_c", "htam+tree", "test", 1, 600);
  json_decref(wait_final(s, id));
  snprintf(path, sizeof path, "/v1/tasks/%s/best?elementwise=true", id);
  expect_best_error(s, path, 409, "conflict", "format");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?elementwise=true&generated=true", id);
  expect_best_error(s, path, 409, "no_elementwise_candidate", "elementwise");
  free(id);
  es_stop(s);
}

/* Under OPFORGE_SPEC_SOFT, the spec violations met along the way fail here. */
static void test_no_deferred_spec_violations(void **state) {
  (void)state;
  if (harness_deferred_violations())
    fail_msg("%zu spec violation(s) were deferred by OPFORGE_SPEC_SOFT",
             harness_deferred_violations());
}

/* Kills whatever server a failed test left behind, after showing its log. */
static int teardown(void **state) {
  (void)state;
  for (size_t i = 0; i < MAX_SERVERS; i++)
    if (g_live[i]) {
      dump_log(g_live[i]);
      es_free(g_live[i]);
    }
  return 0;
}

static int group_setup(void **state) {
  (void)state;
  const char *bin = getenv("OPFORGE_BIN"), *eval = getenv("OPFORGE_SCRIPTED_EVALUATOR");
  const char *fixtures = getenv("OPFORGE_ENGINE_FIXTURES");
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  if (!bin || !eval || (!fixtures && !root)) {
    fprintf(stderr, "set OPFORGE_BIN, OPFORGE_SCRIPTED_EVALUATOR and OPFORGE_SOURCE_ROOT "
                    "(meson test does)\n");
    return -1;
  }
  snprintf(g_evaluator, sizeof g_evaluator, "%s", eval);
  if (fixtures)
    snprintf(g_fixtures, sizeof g_fixtures, "%s", fixtures);
  else
    snprintf(g_fixtures, sizeof g_fixtures, "%s/tests/engine/fixtures", root);
  return harness_init();
}

static int group_teardown(void **state) {
  (void)state;
  harness_cleanup();
  return 0;
}

/* A step that would repeat an evaluated candidate costs no step: softmax_b's 4 files
 * replay in a cycle, so a budget of 6 gives 4 steps (each evaluated once, plus the
 * reference) and the task ends space_exhausted, not at its budget. */
static void test_repeat_costs_no_step(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit(s, "softmax_b", "refine", "test", 6, 600);
  struct run_record r;
  check_run(s, id, "softmax_b", 6, 4, "succeeded", true, &r);
  assert_string_equal(stop_reason(&r), "space_exhausted");
  assert_int_equal(count_log_ops(s, "evaluate"), 5);
  for (size_t i = 0; i < json_array_size(r.candidates); i++)
    assert_null(json_object_get(json_object_get(json_array_get(r.candidates, i), "result"),
                                "reused_from"));
  run_record_clear(&r);
  free(id);
  es_stop(s);
}

/* A task ends at_floor once its region runs within budget.stop_at_floor of the floor:
 * mixed scripts 1.5, compile, wrong, 0.5 ms; the floor is 1.0 ms, so 0.5 ms (floor/time
 * 2.0 >= 0.97) ends it after step 4 of a budget of 6. */
static void test_stop_at_floor(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:{s:i, s:f}, s:i}", "name", "mixed",
                          "reference", REFERENCE, "proposer", "test", "policy", "refine",
                          "budget", "steps", 6, "stop_at_floor", 0.97, "seed", 7);
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  json_t *task = es_json(s, "POST", "/v1/tasks", text, 202);
  free(text);
  const char *id = json_string_value(json_object_get(task, "id"));
  struct run_record r;
  check_run(s, id, "mixed", 6, 4, "succeeded", true, &r);
  assert_string_equal(stop_reason(&r), "at_floor");
  run_record_clear(&r);
  json_decref(task);
  es_stop(s);
}

/* Submits a builtin-proposer task (htam+tree, seed 7) of the scripted evaluator named
 * name with a budget of steps and stop_at_floor; its id (caller frees). */
static char *submit_builtin(struct engine_server *s, const char *name, int steps,
                            double stop_at_floor) {
  json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:{s:i, s:f}, s:i}", "name", name, "reference",
                          REFERENCE, "proposer", "builtin", "policy", "htam+tree", "budget",
                          "steps", steps, "stop_at_floor", stop_at_floor, "seed", 7);
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  json_t *task = es_json(s, "POST", "/v1/tasks", text, 202);
  free(text);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  json_decref(task);
  return id;
}

/* Outside moves (engine/loop_outside.c): the builtin pointwise region after a library
 * convolution is at its floor after step 1 (2.0 ms over 2 steps: 1.0 ms against a floor
 * of 1.0545 ms), which alone would end the task there. Its default candidate names
 * channels_last_conv_output as an outside move, so step 2 takes it (a forced choice: the
 * policy would pick another strategy), its program reads the convolution channels-last
 * (1.5 ms), and the task ends at_floor after it, its best that step (speed-up 2.0 / 1.5). */
static void test_outside_move_before_the_floor_stop(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit_builtin(s, "convtail", 6, 0.97);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(task, "progress"),
                                                      "step")), 2);
  json_t *events = get_events(s, id);
  json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")), "at_floor");
  json_t *cands = get_all_candidates(s, id);
  json_t *c;
  size_t i;
  const char *best = NULL;
  json_array_foreach(cands, i, c) {
    if (json_integer_value(json_object_get(c, "step")) != 2)
      continue;
    assert_string_equal(json_string_value(json_object_get(c, "strategy")),
                        "channels_last_conv_output");
    json_t *steps = json_object_get(json_object_get(c, "program"), "steps");
    json_t *listed = json_object_get(json_object_get(json_array_get(steps, 1), "plan"),
                                     "channels_last");
    assert_string_equal(json_string_value(json_array_get(listed, 0)), "node:conv");
    best = json_string_value(json_object_get(c, "id"));
  }
  assert_non_null(best);
  json_t *progress = json_object_get(task, "progress");
  assert_string_equal(json_string_value(json_object_get(progress, "best_candidate")), best);
  assert_float_equal(json_number_value(json_object_get(progress, "best_ms")), 1.5, 1e-9);
  assert_float_equal(json_number_value(json_object_get(progress, "best_speedup")), 2.0 / 1.5,
                     1e-9);
  json_decref(cands);
  json_decref(events);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* True when candidate c runs the generated convolution: as its program's first step, or
 * as a plain kernel (a task that is the convolution alone). */
static bool runs_generated_conv(json_t *c) {
  json_t *steps = json_object_get(json_object_get(c, "program"), "steps");
  const char *src = json_string_value(steps ? json_object_get(json_array_get(steps, 0), "source")
                                            : json_object_get(c, "source"));
  return src && strstr(src, "ofg_conv");
}

/* How many of task id's candidates run the generated convolution; their count into
 * *ret_candidates when not NULL. */
static int generated_conv_tries(struct engine_server *s, const char *id, size_t *ret_candidates) {
  json_t *cands = get_all_candidates(s, id), *c;
  size_t i;
  int tries = 0;
  json_array_foreach(cands, i, c)
    tries += runs_generated_conv(c);
  if (ret_candidates)
    *ret_candidates = json_array_size(cands);
  json_decref(cands);
  return tries;
}

/* A dense convolution that the builtin convolution family writes starts as its library
 * step (engine/partition.c, library_first): the first program runs cuDNN's convolution and
 * the generated tail (2.0 ms, the convolution 1.8 ms of it, above its region's floor of
 * 3136 B / 2.2e6 B/s = 1.43 ms). After the tail's pending outside move (channels-last,
 * 1.5 ms), the search works on the convolution, the region furthest above its floor, and
 * its generated kernel (ofg_conv, 1.2 ms) becomes the best. */
static void test_convolution_starts_as_library(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit_builtin(s, "convgen", 6, 0.0);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *r0 = json_array_get(json_object_get(json_object_get(task, "baselines"), "regions"), 0);
  assert_string_equal(json_string_value(json_object_get(r0, "kind")), "generated");
  assert_string_equal(json_string_value(json_object_get(r0, "family")), "gemm");
  assert_string_equal(json_string_value(json_object_get(r0, "starts")), "library");
  json_t *cands = get_all_candidates(s, id), *c;
  size_t i;
  const char *generated_conv = NULL;
  json_array_foreach(cands, i, c) {
    json_t *steps = json_object_get(json_object_get(c, "program"), "steps");
    if (json_integer_value(json_object_get(c, "step")) == 1) {
      assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 0),
                                                            "library")), "Conv2d");
      assert_non_null(json_object_get(json_array_get(steps, 1), "source"));
    }
    if (runs_generated_conv(c) && !generated_conv)
      generated_conv = json_string_value(json_object_get(c, "id"));
  }
  assert_non_null(generated_conv);
  json_t *progress = json_object_get(task, "progress");
  assert_float_equal(json_number_value(json_object_get(progress, "best_ms")), 1.2, 1e-9);
  json_decref(cands);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* A library-first convolution (one of two regions) whose generated kernel never beats
 * cuDNN (3.0 ms programs against 1.5) gets LIBRARY_FIRST_TRIES (1) try, then stays its
 * library step, though it stays the region furthest above its floor (1.35 ms against
 * 3136 B / 2.2e7 B/s = 0.14 ms; the tail 0.15 against 0.1): the other 11 steps of 12 work
 * on the tail. */
static void test_library_first_tries_are_capped(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit_builtin(s, "convgen_slowconv", 12, 0.97);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  size_t n = 0;
  assert_int_equal(generated_conv_tries(s, id, &n), 1);
  assert_int_equal(n, 13);
  json_t *events = get_events(s, id);
  json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")), "budget");
  json_t *progress = json_object_get(task, "progress");
  assert_float_equal(json_number_value(json_object_get(progress, "best_ms")), 1.5, 1e-9);
  json_decref(events);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* A library-first convolution whose library step runs below its region's floor (1.8 ms
 * against 2.61) is never tried generated, though its gap (-0.81 ms) is the larger of the
 * two regions' (the tail: 0.2 against 1.93): fp32 SIMT code cannot beat that. The tail's
 * outside move and the other steps work on the tail. */
static void test_convolution_below_its_floor_is_not_tried(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  char *id = submit_builtin(s, "convgen_fastcudnn", 5, 0.0);
  json_t *task = wait_final(s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  size_t n = 0;
  assert_int_equal(generated_conv_tries(s, id, &n), 0);
  assert_true(n >= 3);
  json_decref(task);
  free(id);
  es_stop(s);
}

/* A task that is one library-first convolution: its first step is an ordinary step that
 * runs the generated kernel (composing the reference again would repeat it and close the
 * region), and a generated kernel that never beats cuDNN gets LIBRARY_FIRST_TRIES_WHOLE
 * (3) tries, after which nothing is left: space_exhausted, the reference the best. */
static void test_whole_task_convolution(void **state) {
  (void)state;
  static const struct {
    const char *name;
    int tries;
    double best_ms;
    const char *stop;
  } runs[] = {{"convgen_only", 0, 1.2, NULL}, {"convgen_only_slowconv", 3, 2.4, "space_exhausted"}};
  for (size_t r = 0; r < 2; r++) {
    struct engine_server *s = es_start("0", 0);
    char *id = submit_builtin(s, runs[r].name, 8, 0.97);
    json_t *task = wait_final(s, id);
    assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
    json_t *cands = get_all_candidates(s, id), *c;
    size_t i;
    int tries = 0;
    json_array_foreach(cands, i, c) {
      if (json_integer_value(json_object_get(c, "step")) == 1)
        assert_true(runs_generated_conv(c));
      tries += runs_generated_conv(c);
    }
    if (runs[r].tries)
      assert_int_equal(tries, runs[r].tries);
    assert_float_equal(json_number_value(json_object_get(json_object_get(task, "progress"),
                                                         "best_ms")),
                       runs[r].best_ms, 1e-9);
    if (runs[r].stop) {
      json_t *events = get_events(s, id);
      json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
      assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")), runs[r].stop);
      json_decref(events);
    }
    json_decref(cands);
    json_decref(task);
    free(id);
    es_stop(s);
  }
}

/* ------------------------------------------------------------------ settings */

/* The total weighted n of the default namespace's edges. */
static double edge_weight(struct engine_server *s) {
  json_t *doc = es_get(s, "/v1/memory/edges");
  double sum = 0;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(doc, "items"), i, e)
    sum += stat_of(e, "n");
  json_decref(doc);
  return sum;
}

/* The total n of the default namespace's directions. */
static double direction_tries(struct engine_server *s) {
  json_t *doc = es_get(s, "/v1/memory/global");
  double sum = 0;
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(doc, "items"), i, g)
    sum += stat_of(g, "n");
  json_decref(doc);
  return sum;
}

/* Asserts the lineage of a tree run: parents[i] is the step whose candidate step i+1
 * expanded (0: the reference), kinds[i] 'L' or 'S'. */
static void expect_tree(const struct run_record *r, const int *parents, const char *kinds) {
  for (size_t i = 0; i < json_array_size(r->candidates); i++) {
    json_t *c = json_array_get(r->candidates, i);
    long p = candidate_index(r->candidates, i,
                             json_string_value(json_object_get(c, "parent_id")));
    const char *kind = json_string_value(json_object_get(c, "step_kind"));
    if (p + 1 != parents[i] || kind[0] != (kinds[i] == 'L' ? 'l' : 's'))
      fail_msg("step %zu: parent step %ld, kind %s; want %d, %c", i + 1, p + 1, kind,
               parents[i], kinds[i]);
  }
}

/* Per-task search settings change the choices of a scripted run. softmax_a under
 * htam+tree: the reference (2.0 ms, 1x: R0 = .509091), then 1.6 ms (1.25x: .539394),
 * compile (0), 1.25 ms (1.6x: .581818), wrong (.05), 0.8 ms. AdaExplore's descent, by
 * hand (w = .3, V the mean):
 *  1. the root is a leaf -> 0, large (forced at the root);
 *  2. root N=2, C={1 (n1 .539394)}: UCB = expand (one child of one visit), a tie -> 1;
 *  3. root N=3, C={1 (n2 .269697)}: UCB .492043 < expand .269697 + .314444 = .584141 -> 0;
 *  4. root N=4, C={1, 3 (n1 .581818)}: UCB(3) = .935041 > expand .581818 + .176611 -> 3;
 *  5. root N=5: UCB(3) (n2 .315909) = .585027 > UCB(1) .538815 and expand .506204 -> 3;
 *     at 3 N=2, C={4 (n1 .05)}: a tie -> 4.
 * So the parents are 0,1,0,3,4 whatever the kinds: large_step_prob 1 makes every step
 * large, 0 every free one small (the root's are forced large). expand_ratio 0 never
 * widens a node that has a child: the descent follows the best child to a leaf, a chain
 * 0,1,2,3,4. Each task's options and its step-0 event carry its whole settings. The
 * policy best_of_n expands the reference every time: parents 0,0,0,0,0, all large. */
static void test_search_settings_per_task(void **state) {
  (void)state;
  struct engine_server *s = es_start("0", 0);
  static const struct {
    const char *extra;
    int parents[5];
    const char *kinds;
  } plan[] = {
    {"{\"search\": {\"large_step_prob\": 1}}", {0, 1, 0, 3, 4}, "LLLLL"},
    {"{\"search\": {\"large_step_prob\": 0}}", {0, 1, 0, 3, 4}, "LSLSS"},
    {"{\"search\": {\"expand_ratio\": 0, \"large_step_prob\": 0}}", {0, 1, 2, 3, 4},
     "LSSSS"},
  };
  char *ids[3];
  for (size_t i = 0; i < 3; i++)
    ids[i] = submit_with(s, "softmax_a", "htam+tree", 5, plan[i].extra);
  for (size_t i = 0; i < 3; i++) {
    struct run_record r;
    check_run(s, ids[i], "softmax_a", 5, 5, "succeeded", false, &r);
    expect_tree(&r, plan[i].parents, plan[i].kinds);
    json_t *options = json_object_get(r.task, "options");
    json_t *search = json_object_get(options, "search");
    json_t *extra = json_loads(plan[i].extra, 0, NULL);
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(extra, "search"), key, value)
      assert_near(json_number_value(json_object_get(search, key)), json_number_value(value),
                  key);
    json_decref(extra);
    assert_near(json_number_value(json_object_get(search, "tree_c")), 0.3, "tree_c");
    assert_string_equal(json_string_value(json_object_get(search, "retrieval")),
                        "hierarchical");
    assert_string_equal(json_string_value(json_object_get(options, "memory")), "default");
    json_t *step0 = json_object_get(json_array_get(r.events, 3), "data");
    assert_true(json_equal(json_object_get(step0, "search"), search));
    assert_string_equal(json_string_value(json_object_get(step0, "memory")), "default");
    assert_string_equal(json_string_value(json_object_get(step0, "policy")), "htam+tree");
    run_record_clear(&r);
    free(ids[i]);
  }
  /* best_of_n: every step a large step from the reference, so no prefix and no edge:
   * the directions gain its 5 tries, the edges' total weight stays. */
  double weight = edge_weight(s), tries = direction_tries(s);
  char *bon = submit_with(s, "softmax_a", "best_of_n", 5, "{}");
  struct run_record r;
  check_run(s, bon, "softmax_a", 5, 5, "succeeded", false, &r);
  expect_tree(&r, (const int[]){0, 0, 0, 0, 0}, "LLLLL");
  assert_near(edge_weight(s), weight, "edge weight after best_of_n");
  assert_near(direction_tries(s), tries + 5, "direction tries after best_of_n");
  run_record_clear(&r);
  free(bon);
  /* learn false (frozen memory): the same htam+tree run as the first above, with its
   * tree, writes no direction try and no edge; its options say learn false. */
  weight = edge_weight(s);
  tries = direction_tries(s);
  char *frozen = submit_with(s, "softmax_a", "htam+tree", 5,
                             "{\"search\": {\"large_step_prob\": 1, \"learn\": false}}");
  check_run(s, frozen, "softmax_a", 5, 5, "succeeded", false, &r);
  expect_tree(&r, plan[0].parents, plan[0].kinds);
  assert_true(json_is_false(
      json_object_get(json_object_get(json_object_get(r.task, "options"), "search"), "learn")));
  assert_near(edge_weight(s), weight, "edge weight after a run that does not learn");
  assert_near(direction_tries(s), tries, "direction tries after a run that does not learn");
  run_record_clear(&r);
  free(frozen);
  es_stop(s);
}
/* The export of namespace ns without what a step may change: exported_at, every
 * record's stats, evidence and updated_at, and the edges (steps add edges). Caller owns. */
static json_t *export_shape(struct engine_server *s, const char *ns) {
  char path[256];
  json_t *doc = es_get(s, ns_path("/v1/memory/export", ns, path));
  json_object_del(doc, "exported_at");
  json_object_del(doc, "edges");
  static const char *const lists[] = {"globals", "locals"};
  for (size_t k = 0; k < 2; k++) {
    size_t i;
    json_t *rec;
    json_array_foreach(json_object_get(doc, lists[k]), i, rec) {
      json_object_del(rec, "stats");
      json_object_del(rec, "evidence");
      json_object_del(rec, "updated_at");
    }
  }
  return doc;
}

/* True when an evidence row of the export of ns names task_id. */
static bool evidence_names(struct engine_server *s, const char *ns, const char *task_id) {
  char path[256];
  json_t *doc = es_get(s, ns_path("/v1/memory/export", ns, path));
  bool found = false;
  size_t i, j;
  json_t *local, *row;
  json_array_foreach(json_object_get(doc, "locals"), i, local)
    json_array_foreach(json_object_get(local, "evidence"), j, row)
      found = found || strcmp(json_string_value(json_object_get(row, "task_id")), task_id) == 0;
  json_decref(doc);
  return found;
}

/* Two tasks in two memory namespaces at once, on two slots: arm_a (from the seed) and
 * arm_b (a copy of the default). Each namespace ends with exactly its own task's steps
 * (directions, strategies, evidence, edges), the other's task leaves no trace in it, and
 * the default namespace's export is the same before and after. A namespace a task uses
 * cannot be deleted while it runs; an unknown namespace is refused at submission. */
static void test_memory_namespaces_isolate_tasks(void **state) {
  (void)state;
  struct engine_server *s = es_start("0,1", 25);
  json_decref(es_json(s, "POST", "/v1/memory/namespaces", "{\"name\":\"arm_a\"}", 201));
  json_decref(es_json(s, "POST", "/v1/memory/namespaces",
                      "{\"name\":\"arm_b\",\"from\":\"default\"}", 201));
  json_t *before_default = es_get(s, "/v1/memory/export");
  json_object_del(before_default, "exported_at");
  json_t *before_a = export_shape(s, "arm_a"), *before_b = export_shape(s, "arm_b");
  char *a = submit_with(s, "mixed", "htam+tree", 6, "{\"memory\": \"arm_a\"}");
  char *b = submit_with(s, "softmax_a", "refine", 5, "{\"memory\": \"arm_b\"}");
  json_t *busy = es_json(s, "DELETE", "/v1/memory/namespaces/arm_a", NULL, 409);
  assert_string_equal(json_string_value(json_object_get(json_object_get(busy, "error"), "code")),
                      "conflict");
  json_decref(busy);
  json_t *unknown = es_json(s, "POST", "/v1/tasks",
                            "{\"reference\": \"class Model(x): pass\\ndef get_inputs(): "
                            "pass\\ndef get_init_inputs(): pass\\n\", \"memory\": \"arm_z\"}",
                            404);
  json_t *err = json_object_get(unknown, "error");
  assert_string_equal(json_string_value(json_object_get(err, "code")),
                      "memory_namespace_not_found");
  assert_string_equal(json_string_value(json_object_get(err, "field")), "memory");
  json_decref(unknown);
  struct run_record ra, rb;
  check_run(s, a, "mixed", 6, 6, "succeeded", false, &ra);
  check_run(s, b, "softmax_a", 5, 5, "succeeded", true, &rb);
  const char *a0, *a1, *b0, *b1;
  step_span(ra.events, &a0, &a1);
  step_span(rb.events, &b0, &b1);
  if (!(strcmp(a0, b1) < 0 && strcmp(b0, a1) < 0))
    fail_msg("the tasks did not run at the same time: %s..%s and %s..%s", a0, a1, b0, b1);
  check_memory_in(s, "arm_a", &ra, 1, 6);
  check_memory_in(s, "arm_b", &rb, 1, 5);
  assert_false(evidence_names(s, "arm_a", b));
  assert_false(evidence_names(s, "arm_b", a));
  json_t *after_default = es_get(s, "/v1/memory/export");
  json_object_del(after_default, "exported_at");
  assert_true(json_equal(before_default, after_default));
  json_t *after_a = export_shape(s, "arm_a"), *after_b = export_shape(s, "arm_b");
  assert_true(json_equal(before_a, after_a));
  assert_true(json_equal(before_b, after_b));
  json_t *events_a = json_object_get(json_array_get(ra.events, 3), "data");
  assert_string_equal(json_string_value(json_object_get(events_a, "memory")), "arm_a");
  json_t *list = es_get(s, "/v1/memory/namespaces");
  assert_int_equal(json_array_size(json_object_get(list, "items")), 3);
  json_decref(list);
  struct http_response *r = es_request(s, "DELETE", "/v1/memory/namespaces/arm_a", NULL);
  assert_int_equal(r->status, 204);
  http_response_free(r);
  json_decref(before_default);
  json_decref(after_default);
  json_decref(before_a);
  json_decref(after_a);
  json_decref(before_b);
  json_decref(after_b);
  run_record_clear(&ra);
  run_record_clear(&rb);
  free(a);
  free(b);
  es_stop(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_policy_single, teardown),
    cmocka_unit_test_teardown(test_policy_refine, teardown),
    cmocka_unit_test_teardown(test_policy_flat, teardown),
    cmocka_unit_test_teardown(test_policy_htam, teardown),
    cmocka_unit_test_teardown(test_policy_tree, teardown),
    cmocka_unit_test_teardown(test_policy_htam_tree, teardown),
    cmocka_unit_test_teardown(test_memory_counts_each_step_once, teardown),
    cmocka_unit_test_teardown(test_budget_steps, teardown),
    cmocka_unit_test_teardown(test_repeat_costs_no_step, teardown),
    cmocka_unit_test_teardown(test_stop_at_floor, teardown),
    cmocka_unit_test_teardown(test_outside_move_before_the_floor_stop, teardown),
    cmocka_unit_test_teardown(test_convolution_starts_as_library, teardown),
    cmocka_unit_test_teardown(test_library_first_tries_are_capped, teardown),
    cmocka_unit_test_teardown(test_whole_task_convolution, teardown),
    cmocka_unit_test_teardown(test_convolution_below_its_floor_is_not_tried, teardown),
    cmocka_unit_test_teardown(test_budget_seconds, teardown),
    cmocka_unit_test_teardown(test_cancel_running_task, teardown),
    cmocka_unit_test_teardown(test_resume_after_kill9, teardown),
    cmocka_unit_test_teardown(test_concurrent_memory_updates, teardown),
    cmocka_unit_test_teardown(test_evaluator_crash_mid_task, teardown),
    cmocka_unit_test_teardown(test_sigterm_within_the_shutdown_grace, teardown),
    cmocka_unit_test_teardown(test_store_refuses_every_commit, teardown),
    cmocka_unit_test_teardown(test_llm_proposer_unavailable, teardown),
    cmocka_unit_test_teardown(test_builtin_unsupported_runs_as_library, teardown),
    cmocka_unit_test_teardown(test_slow_reference_gives_way_to_whole_model, teardown),
    cmocka_unit_test_teardown(test_open_space_spends_the_budget, teardown),
    cmocka_unit_test_teardown(test_patch_tries_other_directions_before_giving_up, teardown),
    cmocka_unit_test_teardown(test_refused_moves_do_not_use_up_the_retries, teardown),
    cmocka_unit_test_teardown(test_best_generated_takes_the_fastest_kernel, teardown),
    cmocka_unit_test_teardown(test_best_kernelbench_of_a_library_only_best, teardown),
    cmocka_unit_test_teardown(test_best_elementwise_skips_budget_judged_candidates, teardown),
    cmocka_unit_test_teardown(test_reference_timed_in_turn_with_eager, teardown),
    cmocka_unit_test_teardown(test_builtin_steps_avoid_repeats, teardown),
    cmocka_unit_test_teardown(test_search_settings_per_task, teardown),
    cmocka_unit_test_teardown(test_memory_namespaces_isolate_tasks, teardown),
    cmocka_unit_test(test_no_deferred_spec_violations),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
