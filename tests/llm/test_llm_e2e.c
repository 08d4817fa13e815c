/* The LLM proposer end to end: the real opforge server with the scripted evaluator of
 * tests/engine and proposer "llm" pointed at the scripted endpoint runs a task to its end
 * under every policy; the endpoint's answers are correct, failing to compile, wrong,
 * malformed, or edits whose old text is not unique, so every kind of step shows. The key
 * never appears in the server's log, the store's files, any API response or the events,
 * not even when the endpoint quotes a wrong key back. `opforge llm check` answers 0, 1 or
 * 2. kill -9 and cancel while a request is in flight lose nothing and count nothing twice.
 * Responses are checked against the spec (tests/api/harness.c). */
#include <dirent.h>
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
#include "tests/common/child.h"
#include "tests/llm/llm_testlib.h"

#define KEY "sk-e2e-SECRET-4242-abcdefghijklmnop"
#define WRONG_KEY "sk-e2e-WRONG-9999-qrstuvwxyzABCDEF"
#define FINAL_TIMEOUT_MS 60000L

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

/* The kernel of a large step's answer, with the scripted evaluator's directive D. */
#define KERNEL(D)                                                                            \
  "```cuda\\n// SCRIPT " D " {{n}}\\nextern \\\"C\\\" __global__ void softmax_rows(const "     \
  "float* x, float* y, int cols) {\\n  float m = -1e30f;\\n  float s = 0.0f;\\n  for (int c = " \
  "threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[blockIdx.x * cols + c]);\\n  y[0] = " \
  "m + s;\\n}\\n```\\n```json\\n{\\\"launches\\\": [{\\\"kernel\\\": \\\"softmax_rows\\\", "     \
  "\\\"grid\\\": [256], \\\"block\\\": [256], \\\"args\\\": [{\\\"tensor\\\": \\\"input:0\\\"}, " \
  "{\\\"tensor\\\": \\\"output:0\\\"}, {\\\"i32\\\": 512}]}]}\\n```\\n"

#define SMALL "Answer with edits to the current source"
#define EDIT(a, b) "<old_str_1>\\nSCRIPT correct " a "\\n</old_str_1>\\n<new_str_1>\\nSCRIPT correct " b "\\n</new_str_1>"

/* The skill memory's extraction prompt (proposers/llm/prompts/skill_extract.txt). */
#define EXTRACT "Your one sentence:"

/* Small steps walk a correct kernel 1.x -> 0.9x -> 0.8x -> 0.7x; other small steps and
 * large steps cycle through the other kinds of answer. The extraction prompt after a
 * failed step gets "no guidance", so the skill memory learns nothing here. */
static const char SCRIPT[] =
    "{\"key\": \"" KEY "\", \"rules\": ["
    "{\"match\": \"" EXTRACT "\", \"replies\": [{\"content\": \"no guidance\"}]},"
    "{\"match\": [\"" SMALL "\", \"SCRIPT correct 0.8\"], \"replies\": [{\"content\": \""
    EDIT("0.8", "0.7") "\"}]},"
    "{\"match\": [\"" SMALL "\", \"SCRIPT correct 0.9\"], \"replies\": [{\"content\": \""
    EDIT("0.9", "0.8") "\"}]},"
    "{\"match\": [\"" SMALL "\", \"SCRIPT correct 1.\"], \"replies\": [{\"content\": \""
    EDIT("1.", "0.9") "\"}]},"
    "{\"match\": \"" SMALL "\", \"replies\": ["
    "  {\"content\": \"<old_str_1>float</old_str_1><new_str_1>double</new_str_1>\"},"
    "  {\"content\": \"I would unroll the loop.\"}]},"
    "{\"replies\": ["
    "  {\"content\": \"" KERNEL("correct 1.") "\", \"usage\": {\"prompt_tokens\": 2000, "
    "   \"completion_tokens\": 500}},"
    "  {\"content\": \"" KERNEL("compile") "\"},"
    "  {\"content\": \"" KERNEL("wrong") "\"},"
    "  {\"content\": \"Here is my plan: fuse the max and the sum.\"}]}]}";

static char g_evaluator[PATH_MAX];

/* Everything every API response said, for the key grep. */
static struct text g_seen;

struct llm_server {
  pid_t pid;
  int out_fd;
  char dir[PATH_MAX];
  char url[64];
};

static void path_in(const char *dir, const char *name, char *out, size_t len) {
  int n = snprintf(out, len, "%s/%s", dir, name);
  assert_true(n > 0 && (size_t)n < len);
}

static void server_spawn_llm(struct llm_server *s, const char *llm_url);

/* Starts opforge serve on a new temp dir, with the endpoint at llm_url and the key in a
 * key file, through the OPFORGE_LLM_* variables. */
static void server_start_llm(struct llm_server *s, const char *llm_url, const char *key) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "/tmp/opforge-llme2e-XXXXXX");
  assert_non_null(mkdtemp(s->dir));
  char data[PATH_MAX + 8], key_path[PATH_MAX + 8];
  path_in(s->dir, "data", data, sizeof data);
  path_in(s->dir, "key", key_path, sizeof key_path);
  assert_int_equal(mkdir(data, 0700), 0);
  char key_text[128];
  snprintf(key_text, sizeof key_text, "%s\n", key);
  llm_write_file(key_path, key_text);
  server_spawn_llm(s, llm_url);
}

/* Starts the server of s on its dir (again, after a kill -9: the same data and key). */
static void server_spawn_llm(struct llm_server *s, const char *llm_url) {
  char data[PATH_MAX + 8], log[PATH_MAX + 16], key_path[PATH_MAX + 8];
  path_in(s->dir, "data", data, sizeof data);
  path_in(s->dir, "server.log", log, sizeof log);
  path_in(s->dir, "key", key_path, sizeof key_path);
  char base[128], key_var[PATH_MAX + 32];
  snprintf(base, sizeof base, "OPFORGE_LLM_BASE_URL=%s/v1", llm_url);
  snprintf(key_var, sizeof key_var, "OPFORGE_LLM_KEY_FILE=%s", key_path);
  static const char *const drop[] = {"OPFORGE_", "SCRIPTED_EVAL_", NULL};
  char *const extra[] = {base, key_var, "OPFORGE_LLM_MODEL=scripted-model",
                         "OPFORGE_LLM_PRICE_IN=1", "OPFORGE_LLM_PRICE_OUT=2",
                         "OPFORGE_LLM_BACKOFF_MS=5", "OPFORGE_LLM_TIMEOUT=10",
                         "SCRIPTED_EVAL_PROGRAM=correct 2.0", NULL};
  const char *argv[] = {getenv("OPFORGE_BIN"), "serve", "--listen", "127.0.0.1:0", "--data",
                        data, "--gpus", "0", "--evaluator", g_evaluator,
                        "--evaluate-deadline", "30", "--sandbox-env", "SCRIPTED_EVAL_*",
                        NULL};
  char **envp = harness_environment(drop, extra);
  assert_non_null(envp);
  assert_int_equal(harness_spawn(argv, envp, log, &s->pid, &s->out_fd), 0);
  free(envp);
  if (harness_wait_listening(s->out_fd, 20000, s->url, sizeof s->url) != 0) {
    harness_dump_log(log, 4096);
    fail_msg("the server did not start");
  }
}

static void server_stop_llm(struct llm_server *s) {
  kill(s->pid, SIGTERM);
  int status = harness_wait_exit(s->pid, 20000);
  if (status == -1) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
  }
  close(s->out_fd);
  assert_true(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A request; the body is kept for the key grep. Returns the response (caller frees). */
static struct http_response *request(struct llm_server *s, const char *method, const char *path,
                                     const char *body) {
  struct http_request req = {.method = method, .path = path, .body = body, .timeout_ms = 30000};
  struct http_response *r = http_do_url(s->url, &req);
  text_add(&g_seen, r->body, r->body_len);
  text_add(&g_seen, "\n", 1);
  return r;
}

static json_t *get_json(struct llm_server *s, const char *path) {
  struct http_response *r = request(s, "GET", path, NULL);
  if (r->status != 200)
    fail_msg("GET %s: %ld %.400s", path, r->status, r->body);
  json_t *doc = http_json(r);
  http_response_free(r);
  return doc;
}

/* Submits a softmax task with proposer llm; returns its id (caller frees). */
/* Submits a task with the LLM proposer and a token budget; returns its id (caller frees). */
static char *submit_budget(struct llm_server *s, const char *name, const char *policy,
                           int steps, long long tokens) {
  json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:{s:i, s:i, s:i, s:f, s:I}, s:i}", "name", name,
                           "reference", REFERENCE, "proposer", "llm", "policy", policy, "budget",
                           "steps", steps, "seconds", 600, "stop_at_floor", 0, "llm_usd", 100.0,
                           "llm_tokens", (json_int_t)tokens, "seed", 7);
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  struct http_response *r = request(s, "POST", "/v1/tasks", text);
  free(text);
  if (r->status != 202)
    fail_msg("POST /v1/tasks: %ld %.400s", r->status, r->body);
  json_t *task = http_json(r);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  json_decref(task);
  http_response_free(r);
  return id;
}

static char *submit(struct llm_server *s, const char *name, const char *policy, int steps) {
  return submit_budget(s, name, policy, steps, 10000000);
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Waits for the task to be final; returns it (caller owns). */
static json_t *wait_final(struct llm_server *s, const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s", id);
  long deadline = now_ms() + FINAL_TIMEOUT_MS;
  for (;;) {
    json_t *task = get_json(s, path);
    const char *st = json_string_value(json_object_get(task, "status"));
    if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0)
      return task;
    json_decref(task);
    if (now_ms() > deadline) {
      char log[PATH_MAX + 16];
      path_in(s->dir, "server.log", log, sizeof log);
      harness_dump_log(log, 6000);
      fail_msg("task %s is not final after %ld ms", id, FINAL_TIMEOUT_MS);
    }
    struct timespec ts = {0, 30 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* The task's candidates (one page of up to 200; caller owns) and events (SSE data lines). */
static json_t *candidates_of(struct llm_server *s, const char *id) {
  char path[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/candidates?limit=200", id);
  json_t *doc = get_json(s, path);
  json_t *items = json_incref(json_object_get(doc, "items"));
  json_decref(doc);
  return items;
}

static json_t *events_of(struct llm_server *s, const char *id) {
  char path[160];
  snprintf(path, sizeof path, "/v1/tasks/%s/events", id);
  struct http_response *r = request(s, "GET", path, NULL);
  assert_int_equal(r->status, 200);
  json_t *events = json_array();
  for (const char *p = r->body; p && *p;) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    if (len > 6 && strncmp(p, "data: ", 6) == 0)
      json_array_append_new(events, json_loadb(p + 6, len - 6, 0, NULL));
    p = eol ? eol + 1 : NULL;
  }
  http_response_free(r);
  return events;
}

/* Counts, over the candidates, what their results were. */
struct tally {
  int correct, compile, wrong, parse, other;
  int no_source, not_unique, no_edits, not_found;
};

static void tally_candidates(json_t *cands, struct tally *t) {
  size_t i;
  json_t *c;
  json_array_foreach(cands, i, c) {
    if (json_integer_value(json_object_get(c, "step")) == 0)
      continue;  /* the reference */
    json_t *result = json_object_get(c, "result");
    json_t *failure = json_object_get(result, "failure");
    const char *stage = json_string_value(json_object_get(failure, "stage"));
    const char *cls = json_string_value(json_object_get(failure, "class"));
    if (json_is_true(json_object_get(result, "correct")))
      t->correct++;
    else if (stage && strcmp(stage, "compile") == 0)
      t->compile++;
    else if (stage && strcmp(stage, "correctness") == 0)
      t->wrong++;
    else if (stage && strcmp(stage, "parse") == 0) {
      t->parse++;
      t->no_source += strcmp(cls, "parse/no_source") == 0;
      t->not_unique += strcmp(cls, "parse/edit_not_unique") == 0;
      t->no_edits += strcmp(cls, "parse/no_edits") == 0;
      t->not_found += strcmp(cls, "parse/edit_not_found") == 0;
    } else {
      t->other++;
      char *dump = json_dumps(c, JSON_COMPACT);
      print_message("unexpected candidate: %.600s\n", dump);
      free(dump);
    }
  }
}

/* Fails when needle occurs in the file at path (binary files included). */
static void file_lacks(const char *path, const char *needle) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return;
  size_t n = strlen(needle), cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
      assert_non_null(buf);
    }
  }
  fclose(f);
  if (memmem(buf, len, needle, n))
    fail_msg("%s holds the key", path);
  free(buf);
}

/* Every file under dir lacks needle. */
static void tree_lacks(const char *dir, const char *needle, int *ret_files) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, "key") == 0)
      continue;
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode))
      tree_lacks(path, needle, ret_files);
    else {
      file_lacks(path, needle);
      (*ret_files)++;
    }
  }
  closedir(d);
}

static const char *const POLICIES[] = {"single", "refine", "flat", "htam", "tree", "htam+tree"};

/* Every policy runs a task to its end on one server (one slot, so the tasks run one after
 * the other and the endpoint's answers come in a fixed order). */
static void test_every_policy_end_to_end(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  char *ids[6];
  for (size_t i = 0; i < 6; i++) {
    char name[64];
    snprintf(name, sizeof name, "plain_llm_%zu", i);
    ids[i] = submit(&s, name, POLICIES[i], 6);
  }
  struct tally all = {0};
  double best_ms = 1e9;
  for (size_t i = 0; i < 6; i++) {
    json_t *task = wait_final(&s, ids[i]);
    const char *status = json_string_value(json_object_get(task, "status"));
    json_t *progress = json_object_get(task, "progress");
    int steps = (int)json_integer_value(json_object_get(progress, "step"));
    print_message("%-10s %s after %d steps, best %.3f ms\n", POLICIES[i], status, steps,
                  json_number_value(json_object_get(progress, "best_ms")));
    assert_string_equal(status, "succeeded");
    double ms = json_number_value(json_object_get(progress, "best_ms"));
    best_ms = ms > 0 && ms < best_ms ? ms : best_ms;
    assert_true(steps >= 1 && steps <= 6);
    if (i == 0)
      assert_int_equal(steps, 1);  /* single: one proposal */
    json_t *cands = candidates_of(&s, ids[i]);
    assert_int_equal(json_array_size(cands), (size_t)steps + 1);
    struct tally t = {0};
    tally_candidates(cands, &t);
    assert_int_equal(t.other, 0);
    all.correct += t.correct, all.compile += t.compile, all.wrong += t.wrong;
    all.parse += t.parse, all.no_source += t.no_source, all.not_unique += t.not_unique;
    all.no_edits += t.no_edits, all.not_found += t.not_found;
    json_t *events = events_of(&s, ids[i]);
    json_t *last = json_array_get(events, json_array_size(events) - 1);
    assert_string_equal(json_string_value(json_object_get(last, "type")), "finished");
    json_decref(events);
    json_decref(cands);
    json_decref(task);
  }
  print_message("correct %d, compile %d, wrong %d, parse %d (no_source %d, edit_not_unique %d, "
                "no_edits %d, edit_not_found %d)\n", all.correct, all.compile, all.wrong,
                all.parse, all.no_source, all.not_unique, all.no_edits, all.not_found);
  assert_true(all.correct >= 6);
  assert_true(all.compile >= 1 && all.wrong >= 1 && all.no_source >= 1);
  /* Every request carried the key, the configured model and no stream. */
  json_t *reqs = scripted_llm_requests(&llm);
  assert_true(json_array_size(reqs) >= 6);
  size_t i, small = 0;
  json_t *q;
  json_array_foreach(reqs, i, q) {
    assert_string_equal(json_string_value(json_object_get(q, "auth")), "ok");
    assert_string_equal(json_string_value(json_object_get(q, "model")), "scripted-model");
    json_t *msgs = json_object_get(q, "messages");
    const char *user = json_string_value(json_object_get(json_array_get(msgs, 1), "content"));
    small += user && strstr(user, SMALL) != NULL;
  }
  /* Small steps reach the proposer only where the engine finds the region's candidate in
   * the node's program; when they do, their edits run the 1.x -> 0.9x chain. */
  print_message("%zu requests, %zu of them small steps\n", json_array_size(reqs), small);
  if (small > 0) {
    assert_true(all.not_unique + all.no_edits >= 1);
    assert_true(best_ms < 1.0);
  }
  json_decref(reqs);
  /* Reads of everything else the API shows, for the grep. */
  json_decref(get_json(&s, "/v1/tasks?limit=50"));
  json_decref(get_json(&s, "/v1/memory/global"));
  json_decref(get_json(&s, "/v1/devices"));
  struct http_response *m = request(&s, "GET", "/metrics", NULL);
  http_response_free(m);
  for (size_t k = 0; k < 6; k++)
    free(ids[k]);
  server_stop_llm(&s);
  /* The key is nowhere: not in the server's log, the store, or any response. */
  assert_null(strstr(text_str(&g_seen), KEY));
  assert_null(strstr(text_str(&g_seen), "SECRET-4242"));
  int files = 0;
  tree_lacks(s.dir, KEY, &files);
  tree_lacks(s.dir, "SECRET-4242", &files);
  assert_true(files >= 2);  /* server.log and the database at least */
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}

/* budget.llm_tokens 1: the proposer cannot fit a request in what is left, sends
 * nothing, and the task ends cleanly after its reference with stop reason
 * budget_exhausted, no step spent, and no token counted. */
static void test_token_budget_stops_the_task(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  char *id = submit_budget(&s, "plain_llm_budget", "htam+tree", 5, 1);
  json_t *task = wait_final(&s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *progress = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(progress, "step")), 0);
  assert_int_equal(json_integer_value(json_object_get(progress, "llm_prompt_tokens")), 0);
  json_t *events = events_of(&s, id);
  json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")), "budget_exhausted");
  json_decref(events);
  json_decref(task);
  free(id);
  server_stop_llm(&s);
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}

/* With a wrong key the endpoint answers 401 and quotes the key it got: the endpoint's
 * failure spends no step and teaches the memory nothing; after 3 in a row the steps stop
 * (stop reason proposer_unavailable, the endpoint's message in the finished summary),
 * the task still ends succeeded on its reference, and the quoted key is nowhere. */
static void test_wrong_key_is_scrubbed(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, WRONG_KEY);
  char *id = submit(&s, "plain_llm_badkey", "refine", 2);
  json_t *task = wait_final(&s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *cands = candidates_of(&s, id);
  assert_int_equal(json_array_size(cands), 1);  /* the reference only */
  json_t *events = events_of(&s, id);
  json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
  assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")),
                      "proposer_unavailable");
  json_t *err = json_object_get(fin, "proposer_error");
  assert_string_equal(json_string_value(json_object_get(err, "class")), "parse/llm_http_401");
  assert_non_null(strstr(json_string_value(json_object_get(err, "message")),
                         "Incorrect API key provided"));
  json_decref(events);
  json_decref(cands);
  json_decref(task);
  free(id);
  server_stop_llm(&s);
  assert_null(strstr(text_str(&g_seen), WRONG_KEY));
  assert_null(strstr(text_str(&g_seen), "WRONG-9999"));
  int files = 0;
  tree_lacks(s.dir, WRONG_KEY, &files);
  tree_lacks(s.dir, "WRONG-9999", &files);
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}

/* `opforge llm check`: 0 with the model and tokens, 1 with the endpoint's error, 2
 * without an endpoint; never the key. */
static void test_llm_check(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start("{\"key\": \"" KEY "\", \"rules\": [{\"match\": \"ok\", \"replies\": ["
                     "{\"content\": \"ok\", \"usage\": {\"prompt_tokens\": 12, "
                     "\"completion_tokens\": 1}}, {\"status\": 500, \"error\": \"down\"}]}]}",
                     &llm);
  char base[128];
  snprintf(base, sizeof base, "%s/v1", llm.url);
  const char *bin = getenv("OPFORGE_BIN");
  const char *env[] = {"OPFORGE_LLM_BASE_URL", base, "OPFORGE_LLM_MODEL", "scripted-model",
                       "OPFORGE_LLM_API_KEY", KEY, "OPFORGE_LLM_PRICE_IN", "1", NULL};
  const char *args_ok[] = {"llm", "check", NULL};
  struct proc p;
  proc_start(&p, bin, args_ok, env, false);
  assert_int_equal(proc_finish(&p, 20000), 0);
  assert_non_null(strstr(text_str(&p.out), "model scripted-model"));
  assert_non_null(strstr(text_str(&p.out), "tokens 12 prompt + 1 completion"));
  assert_non_null(strstr(text_str(&p.out), "cost 0.000012 USD"));
  assert_null(strstr(text_str(&p.out), KEY));
  proc_clear(&p);
  const char *args_fail[] = {"llm", "check", "--llm-retries", "0", NULL};
  proc_start(&p, bin, args_fail, env, false);
  assert_int_equal(proc_finish(&p, 20000), 1);
  assert_non_null(strstr(text_str(&p.err), "parse/llm_server_error"));
  assert_null(strstr(text_str(&p.err), KEY));
  proc_clear(&p);
  const char *env_none[] = {"OPFORGE_LLM_BASE_URL", "", NULL};
  proc_start(&p, bin, args_ok, env_none, false);
  assert_int_equal(proc_finish(&p, 20000), 2);
  assert_non_null(strstr(text_str(&p.err), "--llm-base-url"));
  proc_clear(&p);
  const char *args_bad[] = {"llm", "check", "--llm-base-url", "ftp://x", NULL};
  proc_start(&p, bin, args_bad, env, false);
  assert_int_equal(proc_finish(&p, 20000), 2);
  proc_clear(&p);
  scripted_llm_stop(&llm);
}

/* The skill memory with an LLM: every proposal fails to compile; after each failed step
 * the extraction prompt gives a rule and the dedup prompt matches it to the kept one, so
 * three tasks (single policy, one step each) bring the rule to a score of 3 (new, then a
 * duplicate by the dedup prompt, then the same text without one), and the fourth task's
 * prompt carries it under "Common pitfalls"; the earlier prompts do not. Each task's
 * tokens include its extraction and dedup calls. */
#define RULE "You cannot index past the end of a row."
static const char SKILL_SCRIPT[] =
    "{\"key\": \"" KEY "\", \"rules\": ["
    "{\"match\": \"" EXTRACT "\", \"replies\": [{\"content\": \"" RULE "\"},"
    "  {\"content\": \"You cannot read beyond the end of a row.\"}]},"
    "{\"match\": \"Kept rules:\", \"replies\": [{\"content\": "
    "  \"{\\\"duplicate\\\": true, \\\"match\\\": 1, \\\"confidence\\\": 0.9}\"}]},"
    "{\"replies\": [{\"content\": \"" KERNEL("compile") "\", \"usage\": {\"prompt_tokens\": 1000,"
    "  \"completion_tokens\": 200}}]}]}";

static void test_skill_rule_reaches_next_prompt(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(SKILL_SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  static const long long want_prompt[] = {1000 + 100, 1000 + 100 + 100, 1000 + 100};
  static const long long want_completion[] = {200 + 50, 200 + 50 + 50, 200 + 50};
  static const long long want_score[] = {1, 2, 3};
  for (int i = 0; i < 4; i++) {
    char name[64];
    snprintf(name, sizeof name, "plain_llm_skill_%d", i);
    char *id = submit(&s, name, "single", 1);
    json_t *task = wait_final(&s, id);
    json_t *progress = json_object_get(task, "progress");
    json_t *list = get_json(&s, "/v1/skills");
    json_t *items = json_object_get(list, "items");
    assert_int_equal(json_array_size(items), 1);
    json_t *rule = json_array_get(items, 0);
    assert_string_equal(json_string_value(json_object_get(rule, "rule")), RULE);
    assert_string_equal(json_string_value(json_object_get(rule, "origin")), "llm");
    assert_string_equal(json_string_value(json_object_get(rule, "family")), "softmax");
    if (i < 3) {
      assert_int_equal(json_integer_value(json_object_get(progress, "llm_prompt_tokens")),
                       want_prompt[i]);
      assert_int_equal(json_integer_value(json_object_get(progress, "llm_completion_tokens")),
                       want_completion[i]);
      assert_int_equal(json_integer_value(json_object_get(rule, "score")), want_score[i]);
    }
    json_decref(list);
    json_decref(task);
    free(id);
  }
  /* The proposals' prompts: only the fourth carries the rule, as a common pitfall. */
  json_t *reqs = scripted_llm_requests(&llm);
  size_t i, proposals = 0, extractions = 0, dedups = 0;
  json_t *q;
  json_array_foreach(reqs, i, q) {
    json_t *msgs = json_object_get(q, "messages");
    const char *user = json_string_value(json_object_get(json_array_get(msgs, 1), "content"));
    assert_non_null(user);
    if (strstr(user, EXTRACT)) {
      extractions++;
      continue;
    }
    if (strstr(user, "Kept rules:")) {
      dedups++;
      assert_non_null(strstr(user, "1. " RULE));
      continue;
    }
    proposals++;
    bool pitfall = strstr(user, "## Common pitfalls") && strstr(user, "- " RULE);
    if (proposals < 4)
      assert_false(pitfall);
    else
      assert_true(pitfall);
  }
  assert_int_equal(proposals, 4);
  assert_int_equal(extractions, 4);
  assert_int_equal(dedups, 2);
  json_decref(reqs);
  server_stop_llm(&s);
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}


/* ---- the budget that holds, the calls per step, and what each arm's prompts hold ---- */

/* Posts a task of the given options (a JSON object text without the reference, which is
 * added); returns its id (caller frees). */
static char *submit_options(struct llm_server *s, const char *name, const char *options) {
  json_t *body = json_loads(options, 0, NULL);
  assert_non_null(body);
  json_object_set_new(body, "name", json_string(name));
  json_object_set_new(body, "reference", json_string(REFERENCE));
  json_object_set_new(body, "proposer", json_string("llm"));
  json_object_set_new(body, "seed", json_integer(7));
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  struct http_response *r = request(s, "POST", "/v1/tasks", text);
  free(text);
  if (r->status != 202)
    fail_msg("POST /v1/tasks: %ld %.400s", r->status, r->body);
  json_t *task = http_json(r);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  json_decref(task);
  http_response_free(r);
  return id;
}

/* Every answer bills the worst case: a token per prompt byte and the whole max_tokens. */
static const char MAX_SCRIPT[] =
    "{\"key\": \"" KEY "\", \"rules\": ["
    "{\"match\": \"" EXTRACT "\", \"replies\": [{\"content\": \"no guidance\", \"usage\": \"max\"}]},"
    "{\"replies\": [{\"content\": \"" KERNEL("compile") "\", \"usage\": \"max\"},"
    "  {\"content\": \"" KERNEL("correct 1.") "\", \"usage\": \"max\"}]}]}";

/* The task's spend never passes its budget, dollars or tokens, even when the endpoint
 * bills every call its worst case; the task stops budget_exhausted. */
static void test_budget_holds_at_the_worst_case(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(MAX_SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  /* 1 and 2 USD a million tokens (server_spawn_llm): 0.05 USD is a few calls. */
  char *by_usd = submit_options(&s, "plain_llm_usd", "{\"policy\": \"htam+tree\", \"budget\": "
                                "{\"steps\": 30, \"llm_usd\": 0.05, \"stop_at_floor\": 0}}");
  char *by_tokens = submit_options(&s, "plain_llm_tokens", "{\"policy\": \"htam+tree\", "
                                   "\"budget\": {\"steps\": 30, \"llm_tokens\": 60000, "
                                   "\"stop_at_floor\": 0}}");
  const char *ids[] = {by_usd, by_tokens};
  for (int k = 0; k < 2; k++) {
    json_t *task = wait_final(&s, ids[k]);
    json_t *p = json_object_get(task, "progress");
    double usd = json_number_value(json_object_get(p, "llm_cost_usd"));
    long long tokens = json_integer_value(json_object_get(p, "llm_prompt_tokens")) +
                       json_integer_value(json_object_get(p, "llm_completion_tokens"));
    print_message("%s: %lld tokens, %.6f USD, %lld steps\n", k ? "tokens" : "usd", tokens,
                  usd, (long long)json_integer_value(json_object_get(p, "step")));
    assert_true(tokens > 0);  /* calls were made */
    if (k == 0)
      assert_true(usd <= 0.05 + 1e-12);
    else
      assert_true(tokens <= 60000);
    json_t *events = events_of(&s, ids[k]);
    json_t *fin = json_object_get(json_array_get(events, json_array_size(events) - 1), "data");
    assert_string_equal(json_string_value(json_object_get(fin, "stop_reason")),
                        "budget_exhausted");
    json_decref(events);
    json_decref(task);
  }
  free(by_usd);
  free(by_tokens);
  server_stop_llm(&s);
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}

/* The same correct kernel every time (no request number in it): after the first step
 * every proposal repeats it. */
static const char SAME_SCRIPT[] =
    "{\"key\": \"" KEY "\", \"rules\": [{\"replies\": [{\"content\": \""
    "```cuda\\n// SCRIPT correct 1.5\\nextern \\\"C\\\" __global__ void softmax_rows(const "
    "float* x, float* y, int cols) {\\n  y[0] = x[0] + (float)cols;\\n}\\n```\\n```json\\n"
    "{\\\"launches\\\": [{\\\"kernel\\\": \\\"softmax_rows\\\", \\\"grid\\\": [256], "
    "\\\"block\\\": [256], \\\"args\\\": [{\\\"tensor\\\": \\\"input:0\\\"}, "
    "{\\\"tensor\\\": \\\"output:0\\\"}, {\\\"i32\\\": 512}]}]}\\n```\\n\"}]}]}";

/* search.max_calls_per_step caps the calls of a step, the retries of a repeated program
 * included (large steps only: a small step would ask for edits, which this answer does not
 * give). The first step's kernel is new; then the tree's two nodes (the reference and
 * step 1) each get a step whose proposal repeats it and whose retries under the other
 * strategies repeat it too, until the step's calls run out; once no node has a move left
 * the steps end without a call (space_exhausted). With a cap of 1: 1 + 1 + 1 calls; with
 * 3: 1 + 3 + 3. Without the cap each of those steps made up to 17. */
static void test_calls_per_step_are_capped(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(SAME_SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  static const int caps[] = {1, 3}, want[] = {3, 7};
  size_t before = 0;
  for (int k = 0; k < 2; k++) {
    char options[300];
    snprintf(options, sizeof options, "{\"policy\": \"htam+tree\", \"budget\": {\"steps\": 30, "
             "\"stop_at_floor\": 0}, \"search\": {\"max_calls_per_step\": %d, \"steps\": "
             "\"large\"}}", caps[k]);
    char *id = submit_options(&s, k ? "plain_llm_calls_3" : "plain_llm_calls_1", options);
    json_t *task = wait_final(&s, id);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(task, "progress"),
                                                        "step")), 1);
    json_t *reqs = scripted_llm_requests(&llm);
    assert_int_equal(json_array_size(reqs) - before, want[k]);
    before = json_array_size(reqs);
    json_decref(reqs);
    json_decref(task);
    free(id);
  }
  server_stop_llm(&s);
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}

/* The user messages of requests [from, to) of the log (a new array; caller owns). */
static json_t *prompts_between(json_t *reqs, size_t from, size_t to) {
  json_t *out = json_array();
  for (size_t i = from; i < to; i++) {
    json_t *msgs = json_object_get(json_array_get(reqs, i), "messages");
    json_array_append(out, json_object_get(json_array_get(msgs, 1), "content"));
  }
  return out;
}

/* How many of prompts hold needle. */
static size_t holding(json_t *prompts, const char *needle) {
  size_t n = 0, i;
  json_t *p;
  json_array_foreach(prompts, i, p) n += strstr(json_string_value(p), needle) != NULL;
  return n;
}

/* One arm: its options, and what its proposal prompts must hold (every one or none). */
struct arm_case {
  const char *name, *options;
  const char *const *present;  /* each in at least one proposal prompt; NULL-ended */
  const char *const *absent;   /* in none; NULL-ended */
};

#define MEM_DIRECTION "Optimize in this direction:"
#define MEM_STRATEGY "Strategy to apply:"
#define MEM_OTHERS "Other strategies of this direction"
#define MEM_RECORD "tries, "
#define MEM_UNTRIED "not tried yet"
#define PITFALLS "## Common pitfalls"
#define POOL "### Kernel 1"

static const char *const P_FULL[] = {MEM_DIRECTION, MEM_STRATEGY, PITFALLS, NULL};
static const char *const A_NONE[] = {NULL};
static const char *const A_REFINE[] = {MEM_DIRECTION, MEM_STRATEGY, MEM_OTHERS, MEM_RECORD,
                                       MEM_UNTRIED, PITFALLS, "Direction: ", NULL};
static const char *const P_NOLOCAL[] = {MEM_DIRECTION, PITFALLS, NULL};
static const char *const A_NOLOCAL[] = {MEM_STRATEGY, MEM_OTHERS, MEM_RECORD, MEM_UNTRIED, NULL};
static const char *const A_NOSKILLS[] = {PITFALLS, NULL};
static const char *const P_BESTOFN[] = {MEM_DIRECTION, NULL};
static const char *const A_BESTOFN[] = {POOL, NULL};
static const char *const A_LARGE[] = {SMALL, NULL};
static const char *const P_SMALL[] = {SMALL, NULL};

/* Each arm runs one task alone on the server (its requests are the log's between two
 * counts), and its prompts hold what the arm's row of docs/architecture.md's table says.
 * A skill rule scored 5 is in the store, so pitfalls show where skills are read. */
static void test_arms_prompts_hold_what_they_name(void **state) {
  (void)state;
  static const struct arm_case arms[] = {
    {"full", "{\"policy\": \"htam+tree\"}", P_FULL, A_NONE},
    {"noprefix", "{\"policy\": \"htam+tree\", \"search\": {\"prefix_len\": 0}}", P_FULL, A_NONE},
    {"lastonly", "{\"policy\": \"htam+tree\", \"search\": {\"prefix_len\": 1}}", P_FULL, A_NONE},
    {"nolocal", "{\"policy\": \"htam+tree\", \"search\": {\"local_memory\": false}}", P_NOLOCAL,
     A_NOLOCAL},
    {"flat", "{\"policy\": \"htam+tree\", \"search\": {\"retrieval\": \"flat\"}}", P_FULL, A_NONE},
    {"refine", "{\"policy\": \"refine\"}", A_NONE, A_REFINE},
    {"noskills", "{\"policy\": \"htam+tree\", \"search\": {\"skills\": false}}", A_NONE,
     A_NOSKILLS},
    {"bestofn", "{\"policy\": \"best_of_n\"}", P_BESTOFN, A_BESTOFN},
    {"htam", "{\"policy\": \"htam\"}", P_FULL, A_NONE},
    {"large", "{\"policy\": \"htam+tree\", \"search\": {\"steps\": \"large\"}}", A_NONE, A_LARGE},
    {"small", "{\"policy\": \"htam+tree\", \"search\": {\"steps\": \"small\"}}", P_SMALL, A_NONE},
  };
  struct scripted_llm llm;
  scripted_llm_start(SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  struct http_response *r = request(&s, "POST", "/v1/skills",
                                    "{\"rule\": \"You cannot read past the end of a row.\", "
                                    "\"score\": 5}");
  assert_int_equal(r->status, 201);
  http_response_free(r);
  size_t before = 0;
  for (size_t a = 0; a < sizeof arms / sizeof arms[0]; a++) {
    char name[64], options[400];
    snprintf(name, sizeof name, "plain_llm_arm_%s", arms[a].name);
    json_t *o = json_loads(arms[a].options, 0, NULL);
    json_object_set_new(o, "budget", json_pack("{s:i, s:i}", "steps", 6, "stop_at_floor", 0));
    char *text = json_dumps(o, JSON_COMPACT);
    snprintf(options, sizeof options, "%s", text);
    free(text);
    json_decref(o);
    char *id = submit_options(&s, name, options);
    json_decref(wait_final(&s, id));
    free(id);
    json_t *reqs = scripted_llm_requests(&llm);
    size_t after = json_array_size(reqs);
    json_t *all = prompts_between(reqs, before, after), *proposals = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(all, i, p) if (!strstr(json_string_value(p), EXTRACT))
      json_array_append(proposals, p);
    print_message("%-9s %zu proposal prompts\n", arms[a].name, json_array_size(proposals));
    assert_true(json_array_size(proposals) >= 1);
    for (const char *const *n = arms[a].present; *n; n++)
      if (holding(proposals, *n) == 0)
        fail_msg("arm %s: no prompt holds '%s'", arms[a].name, *n);
    for (const char *const *n = arms[a].absent; *n; n++)
      if (holding(proposals, *n) != 0)
        fail_msg("arm %s: %zu prompt(s) hold '%s'", arms[a].name, holding(proposals, *n), *n);
    json_decref(all);
    json_decref(proposals);
    json_decref(reqs);
    before = after;
  }
  /* single: one large step, one proposal. */
  char *id = submit_options(&s, "plain_llm_arm_single", "{\"policy\": \"single\"}");
  json_decref(wait_final(&s, id));
  free(id);
  json_t *reqs = scripted_llm_requests(&llm);
  json_t *all = prompts_between(reqs, before, json_array_size(reqs));
  assert_int_equal(json_array_size(all) - holding(all, EXTRACT), 1);
  json_decref(all);
  json_decref(reqs);
  server_stop_llm(&s);
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}

/* `opforge ablate --proposer llm --arms all` over three programs against the scripted
 * endpoint: every arm's tasks end, and the table has a row per arm and program and a
 * summary line per arm. (What each arm's prompts hold is the test above.) */
static void test_ablate_every_arm_with_the_llm(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  char files[3][PATH_MAX + 32];
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "plain_llm_prog%d.py", i);
    path_in(s.dir, name, files[i], sizeof files[i]);
    llm_write_file(files[i], REFERENCE);
  }
  const char *args[] = {"ablate", files[0], files[1], files[2], "--proposer", "llm", "--arms",
                        "all", "--steps", "2", "--server", s.url, "--wait-limit", "600", NULL};
  struct proc p;
  proc_start(&p, getenv("OPFORGE_BIN"), args, NULL, false);
  int rc = proc_finish(&p, 900000);
  const char *out = text_str(&p.out);
  if (rc != 0)
    fail_msg("ablate exited %d:\n%s\n%s", rc, out, text_str(&p.err));
  static const char *const arms[] = {"full", "noprefix", "lastonly", "nolocal", "flat",
                                     "refine", "noskills", "bestofn", "htam", "single",
                                     "large", "small"};
  for (size_t i = 0; i < sizeof arms / sizeof arms[0]; i++) {
    char row[64];
    snprintf(row, sizeof row, "\n%s ", arms[i]);
    if (!strstr(out, row))
      fail_msg("no line for arm %s in:\n%s", arms[i], out);
  }
  print_message("%s", out);
  proc_clear(&p);
  server_stop_llm(&s);
  harness_remove_tree(s.dir);
  scripted_llm_stop(&llm);
}

static int group_setup(void **state) {
  (void)state;
  child_isolate();
  const char *ev = getenv("OPFORGE_SCRIPTED_EVALUATOR");
  if (!ev || harness_init() != 0)
    return -1;
  snprintf(g_evaluator, sizeof g_evaluator, "%s", ev);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  free(g_seen.s);
  harness_cleanup();
  return 0;
}

/* Every answer a correct kernel, each 1.5 s late, so a request is in flight most of the
 * time. */
static const char SLOW_SCRIPT[] =
    "{\"key\": \"" KEY "\", \"rules\": [{\"replies\": [{\"content\": \"" KERNEL("correct 1.")
    "\", \"delay_ms\": 1500}]}]}";

/* Waits until the endpoint has received at least n requests; returns how many. */
static size_t wait_requests(const struct scripted_llm *llm, size_t n) {
  long deadline = now_ms() + 20000;
  for (;;) {
    json_t *reqs = scripted_llm_requests(llm);
    size_t got = json_array_size(reqs);
    json_decref(reqs);
    if (got >= n)
      return got;
    if (now_ms() > deadline)
      fail_msg("the endpoint got %zu requests, not %zu", got, n);
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* The task's step events after the reference, checked: steps 1..n, each once, in order.
 * Returns n. */
static int step_events_once(struct llm_server *s, const char *id) {
  json_t *events = events_of(s, id);
  size_t i;
  json_t *e;
  int n = 0;
  json_array_foreach(events, i, e) {
    const char *type = json_string_value(json_object_get(e, "type"));
    if (!type || strcmp(type, "step") != 0)
      continue;
    json_t *step = json_object_get(json_object_get(e, "data"), "step");
    assert_true(json_is_integer(step));
    if (json_integer_value(step) == 0)
      continue;  /* the reference */
    assert_int_equal(json_integer_value(step), ++n);
  }
  json_decref(events);
  return n;
}

/* kill -9 while step 2's request is in flight: after a restart on the same data the task
 * resumes and ends with steps 1, 2, 3 each committed once (4 candidates with the
 * reference), the tokens of exactly those 3 requests (100 + 50 each) and 4 requests in all
 * (the killed one is redone). Then a cancel while a request is in flight ends the task
 * cancelled; what it committed stays, each step once. */
static void test_kill9_and_cancel_mid_request(void **state) {
  (void)state;
  struct scripted_llm llm;
  scripted_llm_start(SLOW_SCRIPT, &llm);
  struct llm_server s;
  server_start_llm(&s, llm.url, KEY);
  char *id = submit(&s, "plain_llm_kill", "htam+tree", 3);
  wait_requests(&llm, 2);
  struct timespec ts = {0, 300 * 1000000L};
  nanosleep(&ts, NULL);
  assert_int_equal(kill(s.pid, SIGKILL), 0);
  assert_int_equal(waitpid(s.pid, NULL, 0), s.pid);
  close(s.out_fd);
  server_spawn_llm(&s, llm.url);
  json_t *task = wait_final(&s, id);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "succeeded");
  json_t *progress = json_object_get(task, "progress");
  assert_int_equal(json_integer_value(json_object_get(progress, "step")), 3);
  assert_int_equal(json_integer_value(json_object_get(progress, "llm_prompt_tokens")), 300);
  assert_int_equal(json_integer_value(json_object_get(progress, "llm_completion_tokens")), 150);
  json_t *cands = candidates_of(&s, id);
  assert_int_equal(json_array_size(cands), 4);
  json_decref(cands);
  assert_int_equal(step_events_once(&s, id), 3);
  assert_int_equal(wait_requests(&llm, 4), 4);
  json_decref(task);
  free(id);

  id = submit(&s, "plain_llm_cancel", "htam+tree", 5);
  wait_requests(&llm, 5);
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
  long asked = now_ms();
  struct http_response *r = request(&s, "POST", path, NULL);
  assert_int_equal(r->status, 200);
  http_response_free(r);
  task = wait_final(&s, id);
  assert_true(now_ms() - asked < 10000);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "cancelled");
  int steps = (int)json_integer_value(json_object_get(json_object_get(task, "progress"), "step"));
  assert_true(steps <= 1);
  cands = candidates_of(&s, id);
  assert_int_equal(json_array_size(cands), (size_t)steps + 1);
  json_decref(cands);
  assert_int_equal(step_events_once(&s, id), steps);
  json_decref(task);
  free(id);
  server_stop_llm(&s);
  scripted_llm_stop(&llm);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_every_policy_end_to_end),
    cmocka_unit_test(test_wrong_key_is_scrubbed),
    cmocka_unit_test(test_token_budget_stops_the_task),
    cmocka_unit_test(test_llm_check),
    cmocka_unit_test(test_skill_rule_reaches_next_prompt),
    cmocka_unit_test(test_kill9_and_cancel_mid_request),
    cmocka_unit_test(test_budget_holds_at_the_worst_case),
    cmocka_unit_test(test_calls_per_step_are_capped),
    cmocka_unit_test(test_arms_prompts_hold_what_they_name),
    cmocka_unit_test(test_ablate_every_arm_with_the_llm),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
