/* The skill memory end to end, without an LLM: the real server with the scripted evaluator
 * and the test proposer. The same compile failure (other identifiers, other line numbers)
 * on 3 tasks becomes a grouped rule with a builtin constraint (not on 2); the next task's
 * builtin proposer refuses the moves that break it, counts each refusal on the rule, and
 * compiles nothing the rule forbids; POST /v1/skills/adapt over the same tasks adds
 * nothing twice; kill -9 in the middle of a task counts no failure twice. Responses are
 * checked against the spec (tests/api/harness.c). */
#include <errno.h>
#include <limits.h>
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

#include "tests/api/harness.h"

#define FINAL_TIMEOUT_MS 60000L
#define SIGNATURE "compile/identifier_undefined: identifier <id> is undefined"

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

static char g_fixtures[PATH_MAX];
static char g_evaluator[PATH_MAX];

struct srv {
  pid_t pid;
  int out_fd;
  char dir[PATH_MAX];
  char url[64];
  long delay_ms;
};

static struct srv *g_live;

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static void dump_log(const struct srv *s) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/server.log", s->dir);
  harness_dump_log(path, 6144);
}

/* Starts (or restarts, on the same data) the server of s. */
static void launch(struct srv *s) {
  char data[PATH_MAX + 8], log[PATH_MAX + 16], delay[64];
  snprintf(data, sizeof data, "%s/data", s->dir);
  snprintf(log, sizeof log, "%s/server.log", s->dir);
  snprintf(delay, sizeof delay, "SCRIPTED_EVAL_DELAY_MS=%ld", s->delay_ms);
  static const char *const drop[] = {"OPFORGE_", "SCRIPTED_EVAL_", NULL};
  char *const extra[] = {delay, "SCRIPTED_EVAL_PROGRAM=correct 2.0", NULL};
  const char *argv[] = {getenv("OPFORGE_BIN"), "serve", "--listen", "127.0.0.1:0", "--data",
                        data, "--gpus", "0", "--evaluator", g_evaluator, "--fixtures",
                        g_fixtures, "--evaluate-deadline", "30",
                        "--sandbox-env", "SCRIPTED_EVAL_*", NULL, NULL, NULL};
  harness_add_store(argv, sizeof argv / sizeof argv[0], data);
  char **envp = harness_environment(drop, extra);
  assert_non_null(envp);
  assert_int_equal(harness_spawn(argv, envp, log, &s->pid, &s->out_fd), 0);
  free(envp);
  if (harness_wait_listening(s->out_fd, 20000, s->url, sizeof s->url) != 0) {
    dump_log(s);
    fail_msg("the server did not start");
  }
}

static struct srv *start(long delay_ms) {
  struct srv *s = calloc(1, sizeof *s);
  assert_non_null(s);
  s->delay_ms = delay_ms;
  snprintf(s->dir, sizeof s->dir, "/tmp/opforge-skills-e2e-XXXXXX");
  assert_non_null(mkdtemp(s->dir));
  char data[PATH_MAX + 8];
  snprintf(data, sizeof data, "%s/data", s->dir);
  assert_int_equal(mkdir(data, 0700), 0);
  g_live = s;
  launch(s);
  return s;
}

static void kill9(struct srv *s) {
  assert_int_equal(kill(s->pid, SIGKILL), 0);
  int status = 0;
  assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  s->pid = -1;
  close(s->out_fd);
  s->out_fd = -1;
}

static void release(struct srv *s) {
  if (!s)
    return;
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
  }
  if (s->out_fd >= 0)
    close(s->out_fd);
  harness_remove_tree(s->dir);
  if (g_live == s)
    g_live = NULL;
  free(s);
}

static void stop(struct srv *s) {
  kill(s->pid, SIGTERM);
  int status = harness_wait_exit(s->pid, 20000);
  bool clean = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!clean)
    dump_log(s);
  else
    s->pid = -1;
  release(s);
  assert_true(clean);
}

/* A request whose status must be want; returns the JSON body (caller owns; NULL when
 * empty). */
static json_t *req(struct srv *s, const char *method, const char *path, const char *body,
                   long want) {
  struct http_request r = {.method = method, .path = path, .body = body, .timeout_ms = 30000};
  struct http_response *resp = http_do_url(s->url, &r);
  if (resp->status != want)
    fail_msg("%s %s: status %ld, want %ld: %.600s", method, path, resp->status, want, resp->body);
  json_t *doc = resp->body_len ? http_json(resp) : NULL;
  http_response_free(resp);
  return doc;
}

static char *submit(struct srv *s, const char *name, const char *proposer, const char *policy,
                    int steps) {
  json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:{s:i, s:i, s:i}, s:i}", "name", name,
                           "reference", REFERENCE, "proposer", proposer, "policy", policy,
                           "budget", "steps", steps, "seconds", 600, "stop_at_floor", 0,
                           "seed", 7);
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  json_t *task = req(s, "POST", "/v1/tasks", text, 202);
  free(text);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  json_decref(task);
  return id;
}

static json_t *get_task(struct srv *s, const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s", id);
  return req(s, "GET", path, NULL, 200);
}

static json_t *wait_final(struct srv *s, const char *id) {
  long deadline = now_ms() + FINAL_TIMEOUT_MS;
  for (;;) {
    json_t *task = get_task(s, id);
    const char *st = json_string_value(json_object_get(task, "status"));
    if (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "cancelled"))
      return task;
    json_decref(task);
    if (now_ms() > deadline) {
      dump_log(s);
      fail_msg("task %s not final after %ld ms", id, FINAL_TIMEOUT_MS);
    }
    sleep_ms(30);
  }
}

static int wait_step(struct srv *s, const char *id, int min_step) {
  long deadline = now_ms() + FINAL_TIMEOUT_MS;
  for (;;) {
    json_t *task = get_task(s, id);
    int step = (int)json_integer_value(json_object_get(json_object_get(task, "progress"), "step"));
    json_decref(task);
    if (step >= min_step)
      return step;
    if (now_ms() > deadline)
      fail_msg("task %s did not reach step %d", id, min_step);
    sleep_ms(20);
  }
}

/* Runs a task to its end; it must succeed. */
static void run_task(struct srv *s, const char *name, const char *proposer, const char *policy,
                     int steps, char **ret_id) {
  char *id = submit(s, name, proposer, policy, steps);
  json_t *task = wait_final(s, id);
  if (strcmp(json_string_value(json_object_get(task, "status")), "succeeded") != 0) {
    dump_log(s);
    fail_msg("task %s (%s) ended %s", id, name, json_string_value(json_object_get(task, "status")));
  }
  json_decref(task);
  if (ret_id)
    *ret_id = id;
  else
    free(id);
}

static json_t *skills(struct srv *s) {
  json_t *list = req(s, "GET", "/v1/skills", NULL, 200);
  json_t *items = json_incref(json_object_get(list, "items"));
  json_decref(list);
  return items;
}

static json_t *skill(struct srv *s, json_int_t id) {
  char path[64];
  snprintf(path, sizeof path, "/v1/skills/%lld", (long long)id);
  return req(s, "GET", path, NULL, 200);
}

static json_int_t num(const json_t *obj, const char *key) {
  return json_integer_value(json_object_get(obj, key));
}

static json_t *candidates(struct srv *s, const char *id) {
  char path[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/candidates?limit=200", id);
  json_t *doc = req(s, "GET", path, NULL, 200);
  json_t *items = json_incref(json_object_get(doc, "items"));
  json_decref(doc);
  return items;
}

/* ------------------------------------------------------------------ tests */

static void test_group_to_rule_and_builtin_refusal(void **state) {
  (void)state;
  struct srv *s = start(0);
  char *ids[3];
  static const char *const names[] = {"skills_a", "skills_b", "skills_c"};
  /* Two tasks with the failure: no rule yet. */
  for (int i = 0; i < 2; i++) {
    run_task(s, names[i], "test", "refine", 2, &ids[i]);
    json_t *items = skills(s);
    assert_int_equal(json_array_size(items), 0);
    json_decref(items);
  }
  /* The third makes the rule: grouped, scored 3, the knob its failures share and its
   * correct candidates did not have, and the failures it came from. */
  run_task(s, names[2], "test", "refine", 2, &ids[2]);
  json_t *items = skills(s);
  assert_int_equal(json_array_size(items), 1);
  json_t *rule = json_array_get(items, 0);
  json_int_t rid = num(rule, "id");
  assert_string_equal(json_string_value(json_object_get(rule, "rule")),
                      "You cannot use VEC=4 in softmax kernels.");
  assert_string_equal(json_string_value(json_object_get(rule, "origin")), "grouping");
  assert_string_equal(json_string_value(json_object_get(rule, "signature")), SIGNATURE);
  assert_string_equal(json_string_value(json_object_get(rule, "family")), "softmax");
  assert_int_equal(num(rule, "score"), 3);
  assert_int_equal(num(rule, "example_count"), 3);
  json_t *want = json_pack("{s:s, s:s, s:i, s:{s:s}}", "knob", "VEC", "op", "eq", "value", 4,
                           "when", "family", "softmax");
  assert_true(json_equal(json_object_get(rule, "constraint"), want));
  json_decref(want);
  json_decref(items);
  json_t *full = skill(s, rid);
  json_t *examples = json_object_get(full, "examples");
  assert_int_equal(json_array_size(examples), 3);
  for (size_t i = 0; i < 3; i++) {
    json_t *ex = json_array_get(examples, i);
    assert_string_equal(json_string_value(json_object_get(ex, "signature")), SIGNATURE);
    assert_string_equal(json_string_value(json_object_get(ex, "task_id")), ids[2 - i]);
  }
  json_decref(full);

  /* An adaptation pass over the same tasks finds every failure examined already. */
  char body[256];
  snprintf(body, sizeof body, "{\"tasks\":[\"%s\",\"%s\",\"%s\"]}", ids[0], ids[1], ids[2]);
  json_t *report = req(s, "POST", "/v1/skills/adapt", body, 200);
  assert_string_equal(json_string_value(json_object_get(report, "method")), "grouping");
  assert_int_equal(num(report, "failures"), 3);
  assert_int_equal(num(report, "examined"), 0);
  assert_int_equal(json_array_size(json_object_get(report, "added")), 0);
  assert_int_equal(json_array_size(json_object_get(report, "confirmed")), 0);
  json_decref(report);
  full = skill(s, rid);
  assert_int_equal(num(full, "score"), 3);
  json_decref(full);

  /* The builtin proposer's defaults for this softmax use VEC=4: the rule refuses them and
   * every move that keeps VEC=4, before anything is compiled; each refusal counts. */
  char *bid = NULL;
  run_task(s, "plain_softmax", "builtin", "htam+tree", 8, &bid);
  full = skill(s, rid);
  json_int_t refusals = num(full, "refusals");
  print_message("rule %lld: %lld refusal(s)\n", (long long)rid, (long long)refusals);
  assert_true(refusals >= 1);
  json_decref(full);
  json_t *cands = candidates(s, bid);
  size_t i, generated = 0;
  json_t *c;
  json_array_foreach(cands, i, c) {
    json_t *opts = json_object_get(c, "options");
    size_t k;
    json_t *o;
    json_array_foreach(opts, k, o) assert_string_not_equal(json_string_value(o), "-DVEC=4");
    generated += json_string_length(json_object_get(c, "source")) > 0;
  }
  print_message("builtin task: %zu candidate(s), %zu generated\n", json_array_size(cands),
                generated);
  json_decref(cands);
  /* The rule disabled: its constraint no longer applies, and refuses nothing more. */
  char path[64];
  snprintf(path, sizeof path, "/v1/skills/%lld", (long long)rid);
  json_decref(req(s, "PATCH", path, "{\"enabled\":false}", 200));
  run_task(s, "plain_softmax", "builtin", "refine", 2, NULL);
  full = skill(s, rid);
  assert_int_equal(num(full, "refusals"), refusals);
  json_decref(full);
  for (int k = 0; k < 3; k++)
    free(ids[k]);
  free(bid);
  stop(s);
}

/* kill -9 while a task's failures confirm a grouped rule: after the restart the task ends
 * with its 6 steps, and the rule gained exactly 6 (one per committed failure), each
 * example a committed candidate of the task. */
static void test_kill9_counts_no_failure_twice(void **state) {
  (void)state;
  struct srv *s = start(250);
  json_t *doc = json_pack("{s:i, s:[{s:s, s:s, s:s, s:i, s:s, s:{s:s, s:s, s:i}}]}", "version", 1,
                          "skills", "rule", "You cannot use VEC=4 in softmax kernels.",
                          "origin", "grouping", "signature", SIGNATURE, "score", 3,
                          "family", "softmax", "constraint", "knob", "VEC", "op", "eq",
                          "value", 4);
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  json_decref(req(s, "POST", "/v1/skills/import", text, 200));
  free(text);
  json_t *items = skills(s);
  json_int_t rid = num(json_array_get(items, 0), "id");
  json_decref(items);
  char *id = submit(s, "skills_kill", "test", "refine", 6);
  int seen = wait_step(s, id, 2);
  kill9(s);
  launch(s);
  json_t *task = wait_final(s, id);
  json_t *progress = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(progress, "step")), 6);
  assert_true(seen >= 2);
  json_decref(task);
  json_t *rule = skill(s, rid);
  assert_int_equal(num(rule, "score"), 3 + 6);
  assert_int_equal(num(rule, "example_count"), 6);
  json_t *cands = candidates(s, id);
  json_t *committed = json_object();
  size_t i;
  json_t *c;
  json_array_foreach(cands, i, c) json_object_set_new(committed, json_string_value(json_object_get(c, "id")),
                                                      json_true());
  json_t *ex;
  json_array_foreach(json_object_get(rule, "examples"), i, ex) {
    assert_string_equal(json_string_value(json_object_get(ex, "task_id")), id);
    assert_non_null(json_object_get(committed, json_string_value(json_object_get(ex, "candidate_id"))));
  }
  json_decref(committed);
  json_decref(cands);
  json_decref(rule);
  free(id);
  stop(s);
}

static void test_no_deferred_spec_violations(void **state) {
  (void)state;
  if (harness_deferred_violations())
    fail_msg("%zu spec violation(s) were deferred by OPFORGE_SPEC_SOFT",
             harness_deferred_violations());
}

static int teardown(void **state) {
  (void)state;
  if (g_live) {
    dump_log(g_live);
    release(g_live);
  }
  return 0;
}

static int group_setup(void **state) {
  (void)state;
  const char *bin = getenv("OPFORGE_BIN"), *eval = getenv("OPFORGE_SCRIPTED_EVALUATOR");
  const char *fixtures = getenv("OPFORGE_ENGINE_FIXTURES");
  if (!bin || !eval || !fixtures) {
    fprintf(stderr, "set OPFORGE_BIN, OPFORGE_SCRIPTED_EVALUATOR and OPFORGE_ENGINE_FIXTURES "
                    "(meson test does)\n");
    return -1;
  }
  snprintf(g_evaluator, sizeof g_evaluator, "%s", eval);
  snprintf(g_fixtures, sizeof g_fixtures, "%s", fixtures);
  return harness_init();
}

static int group_teardown(void **state) {
  (void)state;
  harness_cleanup();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_group_to_rule_and_builtin_refusal, teardown),
    cmocka_unit_test_teardown(test_kill9_counts_no_failure_twice, teardown),
    cmocka_unit_test(test_no_deferred_spec_violations),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
