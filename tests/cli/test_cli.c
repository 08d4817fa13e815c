/* Tests of `opforge submit` and `opforge status`: the real binary against the real server
 * on port 0, plus the SSE parser and reconnects against a scripted fake server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/client.h"
#include "tests/common/child.h"

#define WAIT_MS 30000 /* the longest any one child may take */

/* ---- the server under test ---- */

static struct {
  char bin[PATH_MAX];
  char dir[256];       /* scratch: data dir, reference files */
  char base[64];       /* http://127.0.0.1:<port> */
  pid_t pid;
  bool have_bin;
} g;

static int group_setup(void **state) {
  (void)state;
  child_isolate();
  const char *bin = getenv("OPFORGE_BIN");
  g.have_bin = bin && access(bin, X_OK) == 0;
  snprintf(g.dir, sizeof g.dir, "/tmp/opforge-cli-XXXXXX");
  if (!mkdtemp(g.dir))
    return -1;
  if (!g.have_bin)
    return 0;
  snprintf(g.bin, sizeof g.bin, "%s", bin);
  const char *extra[] = {"--gpus", "none", NULL};
  g.pid = child_server_start(g.bin, g.dir, extra, g.base, WAIT_MS);
  return g.pid > 0 ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  return child_group_teardown(g.pid, g.dir);
}

#define NEED_SERVER()                                                                      \
  do {                                                                                     \
    if (!g.have_bin) {                                                                     \
      print_message("skipped: $OPFORGE_BIN is not set to the opforge binary\n");           \
      skip();                                                                              \
    }                                                                                      \
  } while (0)

/* ---- running the CLI ---- */

/* Runs the CLI to the end; returns the exit status and fills p's out and err. */
static int run_cli(struct proc *p, const char *const *args, const char *const *env) {
  proc_start(p, g.bin, args, env, false);
  return proc_finish(p, WAIT_MS);
}

/* Writes a file under the scratch directory; returns its path (static storage, reused). */
static const char *scratch_file(const char *name, const char *content, size_t len) {
  static char path[PATH_MAX + 256];
  snprintf(path, sizeof path, "%s/%s", g.dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(content, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  return path;
}

/* ---- talking to the server directly ---- */

/* One request to the server under test; returns the status and the parsed body (or NULL). */
static long http(const char *method, const char *path, json_t **ret_body) {
  return child_http(g.base, method, path, ret_body);
}

/* ---- shape checks ---- */

/* True when s starts with an RFC 3339 UTC time with milliseconds and then a space. */
static bool starts_with_time(const char *s) {
  static const char pattern[] = "dddd-dd-ddTdd:dd:dd.dddZ ";
  for (size_t i = 0; i < sizeof pattern - 1; i++)
    if (pattern[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pattern[i])
      return false;
  return true;
}

/* Submits child_reference_ok (written to file name) with extra args; returns the id (malloc'ed). */
static char *submit_ok(const char *name, const char *const *extra) {
  const char *path = scratch_file(name, child_reference_ok, strlen(child_reference_ok));
  const char *args[40] = {"submit", path, "--server", g.base};
  int n = 4;
  for (int i = 0; extra && extra[i]; i++)
    args[n++] = extra[i];
  args[n] = NULL;
  struct proc p;
  int rc = run_cli(&p, args, NULL);
  if (rc != 0)
    print_error("submit failed: %s", text_str(&p.err));
  assert_int_equal(rc, 0);
  assert_string_equal(text_str(&p.err), "");
  assert_int_equal(p.out.len, 37);
  assert_true(child_is_uuid_v4(p.out.s, 36));
  assert_int_equal(p.out.s[36], '\n');
  char *id = strndup(p.out.s, 36);
  proc_clear(&p);
  return id;
}

/* Splits text at '\n' (a final '\n' ends the last line). *ret_lines points into
 * *ret_copy; the caller frees both. Returns the count. */
static size_t split_lines(const char *text, char ***ret_lines, char **ret_copy) {
  char *copy = strdup(text);
  assert_non_null(copy);
  size_t n = 0, cap = 8;
  char **lines = malloc(cap * sizeof *lines);
  assert_non_null(lines);
  for (char *line = copy; *line;) {
    char *nl = strchr(line, '\n');
    if (n == cap) {
      cap *= 2;
      lines = realloc(lines, cap * sizeof *lines);
      assert_non_null(lines);
    }
    lines[n++] = line;
    if (!nl)
      break;
    *nl = '\0';
    line = nl + 1;
  }
  *ret_lines = lines;
  *ret_copy = copy;
  return n;
}

static void assert_one_line_starting(const char *text, const char *prefix) {
  if (strncmp(text, prefix, strlen(prefix)) != 0)
    print_error("expected a line starting with '%s', got '%s'\n", prefix, text);
  assert_memory_equal(text, prefix, strlen(prefix));
  assert_true(strlen(text) > strlen(prefix) + 1);
  assert_ptr_equal(strchr(text, '\n'), text + strlen(text) - 1);
}

static json_t *get_task(const char *id) {
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s", id);
  json_t *task = NULL;
  assert_int_equal(http("GET", path, &task), 200);
  assert_non_null(task);
  return task;
}

static const char *jstr(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  assert_non_null(s);
  return s;
}

/* ---- submit ---- */

static void test_submit_prints_id_and_task_exists(void **state) {
  (void)state;
  NEED_SERVER();
  char *id = submit_ok("relu_small.py", NULL);
  json_t *task = get_task(id);
  assert_string_equal(jstr(task, "id"), id);
  assert_string_equal(jstr(task, "name"), "relu_small");
  assert_string_equal(jstr(task, "status"), "queued");
  assert_string_equal(jstr(task, "reference"), child_reference_ok);
  json_decref(task);
  free(id);
}

static void test_submit_sends_options(void **state) {
  (void)state;
  NEED_SERVER();
  const char *extra[] = {"--name", "custom.v-1", "--policy", "tree", "--proposer", "test",
                         "--steps", "3", "--seconds", "60", "--precision", "bf16",
                         "--trials", "2", "--seed", "7", NULL};
  char *id = submit_ok("opts.py", extra);
  json_t *task = get_task(id);
  json_t *o = json_object_get(task, "options");
  assert_string_equal(jstr(task, "name"), "custom.v-1");
  assert_string_equal(jstr(o, "policy"), "tree");
  assert_string_equal(jstr(o, "proposer"), "test");
  assert_string_equal(jstr(o, "precision"), "bf16");
  json_t *budget = json_object_get(o, "budget");
  assert_int_equal(json_integer_value(json_object_get(budget, "steps")), 3);
  assert_int_equal(json_integer_value(json_object_get(budget, "seconds")), 60);
  assert_int_equal(json_integer_value(json_object_get(o, "trials")), 2);
  assert_int_equal(json_integer_value(json_object_get(o, "seed")), 7);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(task, "progress"),
                                                      "budget_steps")), 3);
  json_decref(task);
  free(id);
}

/* Every field of a submission has its option; the task records them. */
static void test_submit_sends_every_field(void **state) {
  (void)state;
  NEED_SERVER();
  static const char search[] = "{\"lambda\": 0.9, \"retrieval\": \"hierarchical\", \"tree_c\": 0.1}";
  char search_file[2 * PATH_MAX];
  snprintf(search_file, sizeof search_file, "%s", scratch_file("search.json", search,
                                                               strlen(search)));
  const char *extra[] = {"--policy", "best_of_n", "--memory", "default", "--search-file",
                         search_file, "--search", "retrieval=flat", "--search", "prefix_len=2",
                         "--search", "deterministic=true", "--llm-usd", "0.25",
                         "--llm-tokens", "5000", "--stop-at-floor", "0.9", "--atol", "0.002",
                         "--rtol", "0.003", "--llm-model", "m1", "--llm-temperature", "0.5",
                         "--llm-max-tokens", "2048", "--steps", "6", NULL};
  char *id = submit_ok("every.py", extra);
  json_t *task = get_task(id);
  json_t *o = json_object_get(task, "options");
  json_t *budget = json_object_get(o, "budget"), *tol = json_object_get(o, "tolerance");
  json_t *llm = json_object_get(o, "llm"), *s = json_object_get(o, "search");
  assert_string_equal(jstr(o, "policy"), "best_of_n");
  assert_string_equal(jstr(o, "memory"), "default");
  assert_float_equal(json_number_value(json_object_get(budget, "llm_usd")), 0.25, 0);
  assert_int_equal(json_integer_value(json_object_get(budget, "llm_tokens")), 5000);
  assert_float_equal(json_number_value(json_object_get(budget, "stop_at_floor")), 0.9, 0);
  assert_int_equal(json_integer_value(json_object_get(budget, "steps")), 6);
  assert_float_equal(json_number_value(json_object_get(tol, "atol")), 0.002, 0);
  assert_float_equal(json_number_value(json_object_get(tol, "rtol")), 0.003, 0);
  assert_string_equal(jstr(llm, "model"), "m1");
  assert_float_equal(json_number_value(json_object_get(llm, "temperature")), 0.5, 0);
  assert_int_equal(json_integer_value(json_object_get(llm, "max_tokens")), 2048);
  /* --search wins over the file's key; the file's other keys stay. */
  assert_string_equal(jstr(s, "retrieval"), "flat");
  assert_float_equal(json_number_value(json_object_get(s, "lambda")), 0.9, 0);
  assert_float_equal(json_number_value(json_object_get(s, "tree_c")), 0.1, 0);
  assert_int_equal(json_integer_value(json_object_get(s, "prefix_len")), 2);
  assert_true(json_is_true(json_object_get(s, "deterministic")));
  json_decref(task);
  free(id);
}

/* A value of the wrong type is the CLI's to refuse (2); a value out of range or a name
 * the server does not know is the server's (1), printed with its code, message and
 * field. */
static void test_submit_refusals_name_the_field(void **state) {
  (void)state;
  NEED_SERVER();
  const char *path = scratch_file("refused.py", child_reference_ok, strlen(child_reference_ok));
  static const struct {
    const char *opt, *value;
    int status;
    const char *err;
  } cases[] = {
      {"--atol", "abc", 2, "error: --atol expects a number, got 'abc'\n"},
      {"--llm-tokens", "1.5", 2, "error: --llm-tokens expects an integer, got '1.5'\n"},
      {"--search", "novalue", 2, "error: --search expects KEY=VALUE, got 'novalue'\n"},
      {"--search-file", "/nonexistent/s.json", 2,
       "error: --search-file /nonexistent/s.json: unable to open /nonexistent/s.json: No such "
       "file or directory\n"},
      {"--atol", "2", 1,
       "error: invalid_field: tolerance.atol must be in (0, 1] (field tolerance.atol)\n"},
      {"--policy", "greedy", 1,
       "error: invalid_field: policy must be one of: single, refine, flat, htam, tree, "
       "htam+tree, best_of_n (field policy)\n"},
      {"--memory", "absent_ns", 1,
       "error: memory_namespace_not_found: no memory namespace is named 'absent_ns' (field "
       "memory)\n"},
      {"--stop-at-floor", "1.5", 1,
       "error: invalid_field: budget.stop_at_floor must be in [0, 1] (field "
       "budget.stop_at_floor)\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[] = {"submit", path, "--server", g.base, cases[i].opt, cases[i].value, NULL};
    struct proc p;
    int rc = run_cli(&p, args, NULL);
    if (rc != cases[i].status || strcmp(text_str(&p.err), cases[i].err) != 0)
      print_error("case %zu: exit %d, stderr '%s'\n", i, rc, text_str(&p.err));
    assert_int_equal(rc, cases[i].status);
    assert_string_equal(text_str(&p.err), cases[i].err);
    assert_string_equal(text_str(&p.out), "");
    proc_clear(&p);
  }
  /* An unknown search key: its path is the field. */
  const char *args[] = {"submit", path, "--server", g.base, "--search", "bogus_key=1", NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, args, NULL), 1);
  assert_one_line_starting(text_str(&p.err), "error: unknown_field: search.");
  assert_non_null(strstr(text_str(&p.err), " (field search.bogus_key)\n"));
  proc_clear(&p);
}

/* --idempotency-key: the same key and submission give the same task; another
 * submission under the key is refused. */
static void test_submit_idempotency_key(void **state) {
  (void)state;
  NEED_SERVER();
  const char *extra[] = {"--idempotency-key", "cli-test-key-1", NULL};
  char *first = submit_ok("keyed.py", extra);
  char *again = submit_ok("keyed.py", extra);
  assert_string_equal(again, first);
  const char *path = scratch_file("keyed.py", child_reference_ok, strlen(child_reference_ok));
  const char *other[] = {"submit", path, "--server", g.base, "--idempotency-key",
                         "cli-test-key-1", "--steps", "3", NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, other, NULL), 1);
  char want[256];
  snprintf(want, sizeof want,
           "error: idempotency_conflict: this Idempotency-Key was used with another "
           "submission (task %s) in the last 24 hours; use a new key (field Idempotency-Key)\n",
           first);
  assert_string_equal(text_str(&p.err), want);
  assert_string_equal(text_str(&p.out), "");
  proc_clear(&p);
  free(first);
  free(again);
}

static void test_submit_sanitizes_default_name(void **state) {
  (void)state;
  NEED_SERVER();
  static const struct { const char *file, *name; } cases[] = {
      {"my kernel+v2.py", "my_kernel_v2"},
      {"r\xc3\xa9seau.py", "r_seau"}, /* one '_' per character, not per byte */
      {"plain", "plain"},
      {".py", "task"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *id = submit_ok(cases[i].file, NULL);
    json_t *task = get_task(id);
    assert_string_equal(jstr(task, "name"), cases[i].name);
    json_decref(task);
    free(id);
  }
}

static void test_submit_kernelbench_relu(void **state) {
  (void)state;
  NEED_SERVER();
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/../shared/kernelbench/level1/19_ReLU.py", root ? root : ".");
  if (access(path, R_OK) != 0) {
    print_message("skipped: %s is absent (no ../shared/kernelbench)\n", path);
    skip();
  }
  struct proc p;
  const char *args[] = {"submit", path, "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, args, NULL), 0);
  assert_int_equal(p.out.len, 37);
  char *id = strndup(p.out.s, 36);
  json_t *task = get_task(id);
  assert_string_equal(jstr(task, "name"), "19_ReLU");
  json_decref(task);
  free(id);
  proc_clear(&p);
}

static void test_submit_missing_file(void **state) {
  (void)state;
  NEED_SERVER();
  char path[PATH_MAX + 16], want[PATH_MAX + 128];
  snprintf(path, sizeof path, "%s/absent.py", g.dir);
  snprintf(want, sizeof want, "error: cannot read %s: No such file or directory\n", path);
  struct proc p;
  const char *args[] = {"submit", path, "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, args, NULL), 2);
  assert_string_equal(text_str(&p.out), "");
  assert_string_equal(text_str(&p.err), want);
  proc_clear(&p);
}

/* A valid reference padded with a comment to exactly size bytes. */
static char *padded_reference(size_t size) {
  char *buf = malloc(size);
  assert_non_null(buf);
  size_t head = strlen(child_reference_ok);
  memcpy(buf, child_reference_ok, head);
  buf[head] = '#';
  memset(buf + head + 1, 'x', size - head - 2);
  buf[size - 1] = '\n';
  return buf;
}

static void test_submit_size_limit(void **state) {
  (void)state;
  NEED_SERVER();
  char *at_limit = padded_reference(262144);
  const char *path = scratch_file("at_limit.py", at_limit, 262144);
  struct proc p;
  const char *args[] = {"submit", path, "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, args, NULL), 0);
  assert_true(child_is_uuid_v4(text_str(&p.out), p.out.len - 1));
  proc_clear(&p);
  free(at_limit);

  char *over = padded_reference(262145);
  path = scratch_file("over_limit.py", over, 262145);
  char want[2 * PATH_MAX];
  snprintf(want, sizeof want,
           "error: %s is larger than 262144 bytes (256 KiB), the limit for a reference\n", path);
  const char *args2[] = {"submit", path, "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, args2, NULL), 2);
  assert_string_equal(text_str(&p.out), "");
  assert_string_equal(text_str(&p.err), want);
  proc_clear(&p);
  free(over);
}

static void test_submit_invalid_reference(void **state) {
  (void)state;
  NEED_SERVER();
  static const char src[] = "import torch\nclass Model:\n    pass\n"
                            "def get_init_inputs():\n    return []\n";
  const char *path = scratch_file("no_inputs.py", src, strlen(src));
  struct proc p;
  const char *args[] = {"submit", path, "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, args, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_one_line_starting(text_str(&p.err), "error: invalid_reference: ");
  proc_clear(&p);
}

static void test_submit_bad_options(void **state) {
  (void)state;
  NEED_SERVER();
  const char *path = scratch_file("opts_bad.py", child_reference_ok, strlen(child_reference_ok));
  struct proc p;
  const char *not_int[] = {"submit", path, "--server", g.base, "--steps", "abc", NULL};
  assert_int_equal(run_cli(&p, not_int, NULL), 2);
  assert_string_equal(text_str(&p.err), "error: --steps expects an integer, got 'abc'\n");
  proc_clear(&p);

  const char *out_of_range[] = {"submit", path, "--server", g.base, "--steps", "0", NULL};
  assert_int_equal(run_cli(&p, out_of_range, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_one_line_starting(text_str(&p.err), "error: invalid_field: ");
  proc_clear(&p);

  const char *unknown[] = {"submit", path, "--bogus", NULL};
  assert_int_equal(run_cli(&p, unknown, NULL), 2);
  assert_memory_equal(text_str(&p.err), "error: unknown option '--bogus'\nusage: ", 39);
  proc_clear(&p);

  const char *no_file[] = {"submit", "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, no_file, NULL), 2);
  assert_memory_equal(text_str(&p.err), "error: missing FILE.py\nusage: ", 30);
  proc_clear(&p);

  const char *no_value[] = {"submit", path, "--name", NULL};
  assert_int_equal(run_cli(&p, no_value, NULL), 2);
  assert_string_equal(text_str(&p.err), "error: --name needs a value\n");
  proc_clear(&p);
}

/* ---- status ---- */

/* Finds the table row of id in out and checks its cells. */
static void assert_row(const char *out, const char *id, const char *name, const char *status) {
  const char *row = strstr(out, id);
  assert_non_null(row);
  assert_true(row == out || row[-1] == '\n');
  char cid[64], cname[160], cstatus[32], cstep[32], cbest[32], ccreated[64];
  assert_int_equal(sscanf(row, "%63s %159s %31s %31s %31s %63s", cid, cname, cstatus, cstep,
                          cbest, ccreated), 6);
  assert_string_equal(cid, id);
  assert_string_equal(cname, name);
  assert_string_equal(cstatus, status);
  assert_string_equal(cstep, "0/20");
  assert_string_equal(cbest, "-");
  char created[80];
  snprintf(created, sizeof created, "%s ", ccreated);
  assert_true(starts_with_time(created));
}

static void test_status_table(void **state) {
  (void)state;
  NEED_SERVER();
  char *older = submit_ok("table_a.py", NULL);
  char *newer = submit_ok("table_b.py", NULL);
  struct proc p;
  const char *args[] = {"status", "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, args, NULL), 0);
  assert_string_equal(text_str(&p.err), "");
  const char *out = text_str(&p.out);
  char head[6][16];
  assert_int_equal(sscanf(out, "%15s %15s %15s %15s %15s %15s", head[0], head[1], head[2],
                          head[3], head[4], head[5]), 6);
  const char *want[] = {"ID", "NAME", "STATUS", "STEP", "BEST", "CREATED"};
  for (int i = 0; i < 6; i++)
    assert_string_equal(head[i], want[i]);
  assert_row(out, older, "table_a", "queued");
  assert_row(out, newer, "table_b", "queued");
  assert_true(strstr(out, newer) < strstr(out, older)); /* newest first */
  proc_clear(&p);
  free(older);
  free(newer);
}

static void test_status_limit_and_filter(void **state) {
  (void)state;
  NEED_SERVER();
  char *keep = submit_ok("filter_keep.py", NULL);
  char *gone = submit_ok("filter_gone.py", NULL);
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s/cancel", gone);
  json_t *body = NULL;
  assert_int_equal(http("POST", path, &body), 200);
  json_decref(body);

  struct proc p;
  const char *limited[] = {"status", "--server", g.base, "--limit", "1", NULL};
  assert_int_equal(run_cli(&p, limited, NULL), 0);
  char **lines, *copy;
  assert_int_equal(split_lines(text_str(&p.out), &lines, &copy), 2);
  assert_memory_equal(lines[1], gone, 36);
  assert_string_equal(text_str(&p.err), "note: more tasks exist; list more with --limit\n");
  free(lines), free(copy), proc_clear(&p);

  const char *cancelled[] = {"status", "--server", g.base, "--status", "cancelled", NULL};
  assert_int_equal(run_cli(&p, cancelled, NULL), 0);
  assert_row(text_str(&p.out), gone, "filter_gone", "cancelled");
  assert_null(strstr(text_str(&p.out), keep));
  assert_null(strstr(text_str(&p.out), " queued "));
  proc_clear(&p);

  const char *bogus[] = {"status", "--server", g.base, "--status", "bogus", NULL};
  assert_int_equal(run_cli(&p, bogus, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_one_line_starting(text_str(&p.err), "error: invalid_query: ");
  proc_clear(&p);

  const char *mixed[] = {"status", keep, "--server", g.base, "--limit", "3", NULL};
  assert_int_equal(run_cli(&p, mixed, NULL), 2);
  assert_string_equal(text_str(&p.err),
                      "error: --status and --limit apply to the list, not to one task\n");
  proc_clear(&p);
  free(keep);
  free(gone);
}

static void test_status_one_task(void **state) {
  (void)state;
  NEED_SERVER();
  char *id = submit_ok("one_task.py", NULL);
  struct proc p;
  const char *args[] = {"status", id, "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, args, NULL), 0);
  assert_string_equal(text_str(&p.err), "");
  char want[256];
  snprintf(want, sizeof want,
           "id:               %s\n"
           "name:             one_task\n"
           "status:           queued\n"
           "cancel requested: no\n",
           id);
  assert_memory_equal(text_str(&p.out), want, strlen(want));
  const char *out = text_str(&p.out);
  assert_non_null(strstr(out, "\nstep:             0/20\n"));
  assert_non_null(strstr(out, "\nbest speed-up:    -\n"));
  assert_non_null(strstr(out, "\npolicy:           htam+tree\n"));
  assert_non_null(strstr(out, "\nbudget steps:     20\n"));
  assert_non_null(strstr(out, "\natol:             0.0001\n"));
  char bytes[64];
  snprintf(bytes, sizeof bytes, "\nreference bytes:  %zu\n", strlen(child_reference_ok));
  assert_non_null(strstr(out, bytes));
  proc_clear(&p);
  free(id);
}

static void test_status_errors(void **state) {
  (void)state;
  NEED_SERVER();
  struct proc p;
  const char *unknown[] = {"status", "0b7d4c1e-8f2a-4c3b-9d5e-6f7a8b9c0d1e", "--server", g.base,
                           NULL};
  assert_int_equal(run_cli(&p, unknown, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_one_line_starting(text_str(&p.err), "error: task_not_found: ");
  proc_clear(&p);

  const char *malformed[] = {"status", "not-a-uuid", "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, malformed, NULL), 1);
  assert_one_line_starting(text_str(&p.err), "error: invalid_id: ");
  proc_clear(&p);

  /* A slash in the id must stay inside the one path segment. */
  const char *slashed[] = {"status", "../../healthz", "--server", g.base, NULL};
  assert_int_equal(run_cli(&p, slashed, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_true(strncmp(text_str(&p.err), "error: invalid_id: ", 19) == 0 ||
              strncmp(text_str(&p.err), "error: not_found: ", 18) == 0);
  proc_clear(&p);
}

static void test_server_from_environment(void **state) {
  (void)state;
  NEED_SERVER();
  char with_slash[80];
  snprintf(with_slash, sizeof with_slash, "%s/", g.base);
  const char *env[] = {"OPFORGE_SERVER", with_slash, NULL};
  const char *args[] = {"status", "--limit", "1", NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, args, env), 0);
  assert_memory_equal(text_str(&p.out), "ID ", 3);
  proc_clear(&p);
}

/* ---- submit --wait ---- */

/* Starts submit --wait (and extra, when not NULL), cancels the task delay_ms after its id
 * is out, and returns the exit status with p holding the output; *ret_id gets the id
 * (malloc'ed). */
static int submit_wait_and_cancel(struct proc *p, bool pty, int delay_ms, char **ret_id,
                                  const char *extra) {
  const char *path = scratch_file("wait_me.py", child_reference_ok, strlen(child_reference_ok));
  const char *args[] = {"submit", path, "--server", g.base, "--wait", extra, NULL};
  proc_start(p, g.bin, args, NULL, pty);
  assert_true(proc_pump(p, "\n", WAIT_MS));
  assert_true(p->out.len >= 37);
  assert_true(child_is_uuid_v4(p->out.s, 36));
  char *id = strndup(p->out.s, 36);
  usleep((useconds_t)delay_ms * 1000);
  char path_cancel[128];
  snprintf(path_cancel, sizeof path_cancel, "/v1/tasks/%s/cancel", id);
  json_t *body = NULL;
  assert_int_equal(http("POST", path_cancel, &body), 200);
  json_decref(body);
  *ret_id = id;
  return proc_finish(p, WAIT_MS);
}

/* Off a terminal: the id, then one readable line per event that says something, and no
 * carriage return or escape code anywhere. */
static void test_wait_plain_lines(void **state) {
  (void)state;
  NEED_SERVER();
  struct proc p;
  char *id = NULL;
  /* Late enough that the stream is usually waiting: the event must wake it. */
  assert_int_equal(submit_wait_and_cancel(&p, false, 500, &id, NULL), 1);
  assert_string_equal(text_str(&p.err), "");
  char want[256];
  snprintf(want, sizeof want, "%s\n[wait_me] queued\n[wait_me] cancelled after 0 steps\n", id);
  assert_string_equal(text_str(&p.out), want);
  assert_null(strchr(text_str(&p.out), '\r'));
  assert_null(strchr(text_str(&p.out), '\033'));
  free(id), proc_clear(&p);
}

/* --events: the id, then each event's JSON as the server sent it, one per line. */
static void test_wait_raw_events(void **state) {
  (void)state;
  NEED_SERVER();
  struct proc p;
  char *id = NULL;
  assert_int_equal(submit_wait_and_cancel(&p, false, 300, &id, "--events"), 1);
  assert_string_equal(text_str(&p.err), "");
  char **lines, *copy;
  size_t n = split_lines(text_str(&p.out), &lines, &copy);
  if (n != 4)
    print_error("stdout was:\n%s", text_str(&p.out));
  assert_int_equal(n, 4); /* every task's stream ends with "finished" (issue 12) */
  assert_string_equal(lines[0], id);
  static const char *const types[] = {"queued", "cancelled", "finished"};
  for (size_t i = 0; i < 3; i++) {
    json_t *event = json_loads(lines[i + 1], 0, NULL);
    assert_non_null(event);
    assert_string_equal(jstr(event, "type"), types[i]);
    assert_int_equal(json_integer_value(json_object_get(event, "seq")), (json_int_t)i + 1);
    char time_text[64];
    snprintf(time_text, sizeof time_text, "%s ", jstr(event, "time"));
    assert_true(starts_with_time(time_text));
    assert_true(json_is_object(json_object_get(event, "data")));
    json_decref(event);
  }
  free(lines), free(copy), free(id), proc_clear(&p);
}

/* On a terminal: the live line (name, state, erased to the end of the line), redrawn in
 * place, then the task's final line; never the plain event lines. */
static void test_wait_terminal_progress_line(void **state) {
  (void)state;
  NEED_SERVER();
  struct proc p;
  char *id = NULL;
  assert_int_equal(submit_wait_and_cancel(&p, true, 1200, &id, NULL), 1);
  const char *out = text_str(&p.out);
  char first[64];
  snprintf(first, sizeof first, "%s\r\n", id); /* the pty turns \n into \r\n */
  assert_memory_equal(out, first, strlen(first));
  assert_non_null(strstr(out, "wait_me  queued  0:0"));
  assert_non_null(strstr(out, "\033[K\r\n\033[1A\r\033[J")); /* erased and redrawn */
  static const char last[] = "\033[1A\r\033[J[wait_me] cancelled after 0 steps\r\n";
  if (p.out.len < sizeof last - 1 || strcmp(out + p.out.len - (sizeof last - 1), last) != 0)
    print_error("terminal output was: %s\n", out);
  assert_true(p.out.len >= sizeof last - 1);
  assert_string_equal(out + p.out.len - (sizeof last - 1), last);
  assert_null(strstr(out, "[wait_me] queued")); /* no plain event lines on a terminal */
  free(id), proc_clear(&p);
}

/* ---- unreachable servers ---- */

static void test_unreachable_server(void **state) {
  (void)state;
  NEED_SERVER();
  char url[64], prefix[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", child_dead_port());
  snprintf(prefix, sizeof prefix, "error: cannot reach %s: ", url);
  const char *path = scratch_file("unreach.py", child_reference_ok, strlen(child_reference_ok));
  struct proc p;
  const char *submit[] = {"submit", path, "--server", url, NULL};
  assert_int_equal(run_cli(&p, submit, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_one_line_starting(text_str(&p.err), prefix);
  proc_clear(&p);

  const char *status[] = {"status", "--server", url, NULL};
  assert_int_equal(run_cli(&p, status, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_one_line_starting(text_str(&p.err), prefix);
  proc_clear(&p);
}

/* ---- tokens ---- */

static void test_tokens(void **state) {
  (void)state;
  NEED_SERVER();
  static const char token[] = "0123456789abcdef-cli-test";
  char data[PATH_MAX], tokfile[PATH_MAX + 16], base[64];
  snprintf(data, sizeof data, "%s/tokdata", g.dir);
  assert_int_equal(mkdir(data, 0700), 0);
  snprintf(tokfile, sizeof tokfile, "%s/tokens", data);
  FILE *f = fopen(tokfile, "w");
  assert_non_null(f);
  fprintf(f, "# the test's token\n\n%s\n", token);
  fclose(f);
  const char *extra[] = {"--gpus", "none", "--token-file", tokfile, NULL};
  pid_t pid = child_server_start(g.bin, data, extra, base, WAIT_MS);
  assert_true(pid > 0);
  const char *path = scratch_file("tok.py", child_reference_ok, strlen(child_reference_ok));
  struct proc p;
  const char *plain[] = {"submit", path, "--server", base, NULL};
  assert_int_equal(run_cli(&p, plain, NULL), 1);
  assert_one_line_starting(text_str(&p.err), "error: unauthorized: ");
  proc_clear(&p);

  const char *wrong_env[] = {"OPFORGE_TOKEN", "wrong-wrong-wrong-wrong", NULL};
  assert_int_equal(run_cli(&p, plain, wrong_env), 1);
  assert_one_line_starting(text_str(&p.err), "error: forbidden: ");
  proc_clear(&p);

  const char *right_env[] = {"OPFORGE_TOKEN", token, NULL};
  assert_int_equal(run_cli(&p, plain, right_env), 0);
  assert_int_equal(p.out.len, 37);
  proc_clear(&p);

  /* The file wins over the variable. */
  const char *with_file[] = {"submit", path, "--server", base, "--token-file", tokfile, NULL};
  assert_int_equal(run_cli(&p, with_file, wrong_env), 0);
  assert_int_equal(p.out.len, 37);
  proc_clear(&p);

  const char *no_file[] = {"submit", path, "--server", base, "--token-file", "/nonexistent/t",
                           NULL};
  assert_int_equal(run_cli(&p, no_file, NULL), 2);
  assert_string_equal(text_str(&p.err),
                      "error: cannot read token file /nonexistent/t: No such file or directory\n");
  proc_clear(&p);
  assert_int_equal(child_server_stop(pid), 0);
}

/* ---- the SSE parser ---- */

struct seen {
  struct text log; /* one "id|type|data\n" per event */
  int stop_after;  /* stop (return 1) once this many events came; 0: never */
  int count;
};

static int record_event(const struct cli_sse_event *ev, void *user) {
  struct seen *s = user;
  char line[512];
  snprintf(line, sizeof line, "%s|%s|%s\n", ev->id, ev->type, ev->data);
  assert_int_equal(strlen(ev->data), ev->data_len);
  text_add(&s->log, line, strlen(line));
  s->count++;
  return s->stop_after && s->count >= s->stop_after ? 1 : 0;
}

/* Every line-end style, a BOM, comments, multi-line data, ids, retry, unknown fields,
 * an id-only block, and a final event cut off by the end of the stream. */
static const char *const sse_chunks[] = {
    "\xEF\xBB\xBF: comment\r",
    "\nid: 7\nevent: step\ndata: {\"a\":1}\r\n",
    "data:second line\r",
    "\r",
    "id: 8\n\n",
    "data\n\n",
    "retry: 1500\nretry: x\nunknown: y\nid\n",
    "data: a\r\nevent: e2\r\n\r\n",
    "id: 99\nevent: cut\ndata: never dispatched",
};

static const char sse_expected[] = "7|step|{\"a\":1}\nsecond line\n"
                                   "8|message|\n"
                                   "|e2|a\n";

static void test_sse_parser_rules(void **state) {
  (void)state;
  struct seen whole = {0}, bytes = {0};
  struct cli_sse_parser *p = cli_sse_parser_new(record_event, &whole, NULL);
  struct cli_sse_parser *q = cli_sse_parser_new(record_event, &bytes, NULL);
  assert_non_null(p);
  assert_non_null(q);
  for (size_t i = 0; i < sizeof sse_chunks / sizeof sse_chunks[0]; i++) {
    assert_int_equal(cli_sse_parser_feed(p, sse_chunks[i], strlen(sse_chunks[i])), 0);
    for (const char *c = sse_chunks[i]; *c; c++) /* every split point */
      assert_int_equal(cli_sse_parser_feed(q, c, 1), 0);
  }
  assert_string_equal(text_str(&whole.log), sse_expected);
  assert_string_equal(text_str(&bytes.log), sse_expected);
  /* "id" with no value reset it; the 99 of the cut block does not count. */
  assert_string_equal(cli_sse_parser_last_id(p), "");
  assert_string_equal(cli_sse_parser_last_id(q), "");
  assert_int_equal(cli_sse_parser_retry_ms(p), 1500);
  cli_sse_parser_free(p);
  cli_sse_parser_free(q);
  cli_sse_parser_free(NULL);
  free(whole.log.s);
  free(bytes.log.s);
}

static void test_sse_parser_stop_and_limits(void **state) {
  (void)state;
  struct seen s = {.stop_after = 1};
  struct cli_sse_parser *p = cli_sse_parser_new(record_event, &s, "41");
  static const char two[] = "data: one\n\ndata: two\n\n";
  assert_int_equal(cli_sse_parser_feed(p, two, strlen(two)), 1);
  assert_string_equal(text_str(&s.log), "41|message|one\n");
  cli_sse_parser_free(p);

  p = cli_sse_parser_new(record_event, &s, NULL);
  size_t big = CLI_SSE_MAX_EVENT + 1;
  char *line = malloc(big);
  assert_non_null(line);
  memset(line, 'x', big);
  memcpy(line, "data: ", 6);
  assert_int_equal(cli_sse_parser_feed(p, line, big), -1);
  cli_sse_parser_free(p);
  free(line);
  free(s.log.s);
}

/* ---- reconnects, against a scripted server ---- */

/* Serves replies[i] to the i-th connection after reading its request into requests[i]. */
struct fake {
  int fd;
  int port;
  int n;
  const char *replies[4];
  struct text requests[4];
};

static void *fake_main(void *arg) {
  struct fake *f = arg;
  for (int i = 0; i < f->n; i++) {
    int conn = accept(f->fd, NULL, NULL);
    if (conn < 0)
      break;
    char buf[4096];
    while (!strstr(text_str(&f->requests[i]), "\r\n\r\n")) {
      ssize_t n = read(conn, buf, sizeof buf);
      if (n <= 0)
        break;
      text_add(&f->requests[i], buf, (size_t)n);
    }
    size_t len = strlen(f->replies[i]);
    if (write(conn, f->replies[i], len) != (ssize_t)len)
      break;
    close(conn);
  }
  return NULL;
}

static void fake_start(struct fake *f, pthread_t *thread) {
  f->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(f->fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(f->fd, 8), 0);
  assert_int_equal(getsockname(f->fd, (struct sockaddr *)&sa, &len), 0);
  f->port = ntohs(sa.sin_port);
  assert_int_equal(pthread_create(thread, NULL, fake_main, f), 0);
}

/* Waits for the script to end; the recorded requests stay until fake_clear. */
static void fake_stop(struct fake *f, pthread_t thread) {
  pthread_join(thread, NULL);
  close(f->fd);
}

static void fake_clear(struct fake *f) {
  for (int i = 0; i < 4; i++)
    free(f->requests[i].s);
}

#define SSE_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" \
                 "Transfer-Encoding: chunked\r\n\r\n"

static struct cli_client *fake_client(const struct fake *f) {
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
  struct cli_client *c = NULL;
  assert_int_equal(cli_client_new(url, NULL, &c), 0);
  cli_client_set_retry(c, 3, 10);
  return c;
}

static void test_sse_reconnects_with_last_event_id(void **state) {
  (void)state;
  /* The first stream dies inside its chunked body; a 503 follows; the third ends cleanly. */
  struct fake f = {.n = 3, .replies = {
      SSE_HEAD "3d\r\nid: 1\nevent: queued\ndata: {}\n\nid: 2\nevent: running\ndata: {}\n\n\r\n"
               "40\r\nid: 3\nevent: lost",
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Content-Length: 61\r\n\r\n"
      "{\"error\":{\"code\":\"store_busy\",\"message\":\"busy\",\"field\":null}}",
      SSE_HEAD "21\r\nid: 3\nevent: cancelled\ndata: {}\n\n\r\n0\r\n\r\n"}};
  pthread_t thread;
  fake_start(&f, &thread);
  struct cli_client *c = fake_client(&f);
  struct seen s = {0};
  char last[CLI_SSE_ID_MAX] = "";
  assert_int_equal(cli_sse_follow(c, "/v1/tasks/t/events", last, record_event, &s),
                   CLI_SSE_ENDED);
  fake_stop(&f, thread);
  assert_string_equal(text_str(&s.log), "1|queued|{}\n2|running|{}\n3|cancelled|{}\n");
  assert_string_equal(last, "3");
  assert_null(strstr(text_str(&f.requests[0]), "Last-Event-ID"));
  assert_non_null(strstr(text_str(&f.requests[0]), "\r\nAccept: text/event-stream\r\n"));
  assert_non_null(strstr(text_str(&f.requests[1]), "\r\nLast-Event-ID: 2\r\n"));
  assert_non_null(strstr(text_str(&f.requests[2]), "\r\nLast-Event-ID: 2\r\n"));
  fake_clear(&f);
  free(s.log.s);
  cli_client_free(c);
}

/* Runs fn with stderr going to a file; returns what it wrote (malloc'ed). */
static char *capture_stderr(int (*fn)(void *), void *arg, int *ret_rc) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/stderr.txt", g.dir);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true(saved >= 0 && fd >= 0);
  dup2(fd, STDERR_FILENO);
  *ret_rc = fn(arg);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  char *text = calloc(1, 4096);
  assert_non_null(text);
  assert_true(pread(fd, text, 4095, 0) >= 0);
  close(fd);
  return text;
}

static int follow_fake(void *arg) {
  struct cli_client *c = arg;
  struct seen s = {0};
  char last[CLI_SSE_ID_MAX] = "5";
  int rc = cli_sse_follow(c, "/v1/tasks/t/events", last, record_event, &s);
  assert_int_equal(s.count, 0);
  assert_string_equal(last, "5");
  return rc;
}

static void test_sse_client_errors_are_final(void **state) {
  (void)state;
  struct fake f = {.n = 1, .replies = {
      "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 72\r\n\r\n"
      "{\"error\":{\"code\":\"task_not_found\",\"message\":\"no task t\",\"field\":null}}  "}};
  pthread_t thread;
  fake_start(&f, &thread);
  struct cli_client *c = fake_client(&f);
  int rc;
  char *err = capture_stderr(follow_fake, c, &rc);
  fake_stop(&f, thread);
  fake_clear(&f);
  assert_int_equal(rc, -1);
  assert_string_equal(err, "error: task_not_found: no task t\n");
  free(err);
  cli_client_free(c);

  /* Nobody listening: retried three times, then reported. */
  char url[64], want[160];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", child_dead_port());
  assert_int_equal(cli_client_new(url, NULL, &c), 0);
  cli_client_set_retry(c, 3, 10);
  err = capture_stderr(follow_fake, c, &rc);
  assert_int_equal(rc, -1);
  snprintf(want, sizeof want, "error: cannot reach %s: ", url);
  assert_one_line_starting(err, want);
  free(err);
  cli_client_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sse_parser_rules),
      cmocka_unit_test(test_sse_parser_stop_and_limits),
      cmocka_unit_test(test_sse_reconnects_with_last_event_id),
      cmocka_unit_test(test_sse_client_errors_are_final),
      cmocka_unit_test(test_submit_prints_id_and_task_exists),
      cmocka_unit_test(test_submit_sends_options),
      cmocka_unit_test(test_submit_sends_every_field),
      cmocka_unit_test(test_submit_refusals_name_the_field),
      cmocka_unit_test(test_submit_idempotency_key),
      cmocka_unit_test(test_submit_sanitizes_default_name),
      cmocka_unit_test(test_submit_kernelbench_relu),
      cmocka_unit_test(test_submit_missing_file),
      cmocka_unit_test(test_submit_size_limit),
      cmocka_unit_test(test_submit_invalid_reference),
      cmocka_unit_test(test_submit_bad_options),
      cmocka_unit_test(test_status_table),
      cmocka_unit_test(test_status_limit_and_filter),
      cmocka_unit_test(test_status_one_task),
      cmocka_unit_test(test_status_errors),
      cmocka_unit_test(test_server_from_environment),
      cmocka_unit_test(test_wait_plain_lines),
      cmocka_unit_test(test_wait_raw_events),
      cmocka_unit_test(test_wait_terminal_progress_line),
      cmocka_unit_test(test_unreachable_server),
      cmocka_unit_test(test_tokens),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
