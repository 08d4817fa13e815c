/* Tests of `opforge store copy`: a SQLite store with real content (tasks run to their end
 * by the scripted evaluator of tests/engine, in two memory namespaces, a direction added
 * by hand, skills, a deleted task and a deleted skill, idempotency keys) copied into a
 * PostgreSQL database, then served by `opforge serve --store`, whose answers must be the
 * SQLite server's to the byte: task lists in seq order, each task, its events with their
 * seq, its candidates and best, both memories (node order, n and reward_sum exactly, the
 * evidence), the skills, and the idempotency keys (a retried `opforge tune` replays). New
 * rows then take numbers past the copied ones, the deleted ones included. Refusals: a
 * destination with tasks, one a server uses, one whose memory was used or edited, a
 * newer schema, a source a server holds; usage errors; no password is ever printed.
 * The tests that need PostgreSQL ($OPFORGE_TEST_PG, from tests/pg/cluster) skip without
 * it, saying so. */
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

#include <curl/curl.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "tests/api/harness.h"
#include "tests/common/child.h"

#define WAIT_MS 90000 /* the longest any one child may take */
#define PASSWORD "Sekr3t-pw"

static struct {
  char bin[PATH_MAX];
  char evaluator[PATH_MAX];
  char dir[256];      /* scratch */
  char src[PATH_MAX]; /* the SQLite source's data directory */
  bool have_bin, have_pg;
  bool have_source;   /* the source was made and its answers recorded */
  json_t *answers;    /* the SQLite server's answers: path -> "STATUS\nBODY" */
  pid_t servers[8];   /* started and not yet stopped (a failed test leaves them) */
} g;

/* ---- servers ---- */

/* Starts `opforge serve --data data extra...` (child_server_start), remembered until
 * server_stop_at so that a test that fails midway leaves no server behind. Returns the pid,
 * or -1 after printing why. */
static pid_t server_start_at(const char *data, const char *const *extra, char *base) {
  pid_t pid = child_server_start(g.bin, data, extra, base, WAIT_MS);
  for (size_t i = 0; pid > 0 && i < sizeof g.servers / sizeof g.servers[0]; i++)
    if (g.servers[i] <= 0) {
      g.servers[i] = pid;
      break;
    }
  return pid;
}

/* Stops a server server_start_at started; returns its exit status (-1 when killed). */
static int server_stop_at(pid_t pid) {
  for (size_t i = 0; i < sizeof g.servers / sizeof g.servers[0]; i++)
    if (g.servers[i] == pid)
      g.servers[i] = 0;
  return child_server_stop(pid);
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

/* A fixture candidate of task `task` whose evaluation the scripted evaluator takes from
 * "SCRIPT <what>" (as tests/cli/test_tune.c writes them). */
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

/* A directory under the scratch directory (made), into out. */
static void scratch_dir(const char *rel, char *out, size_t outlen) {
  snprintf(out, outlen, "%s/%s", g.dir, rel);
  assert_true(mkdir(out, 0700) == 0 || errno == EEXIST);
}

/* ---- HTTP ---- */

/* libcurl write callback: appends to a struct text. */
static size_t sink(char *ptr, size_t size, size_t nmemb, void *user) {
  text_add(user, ptr, size * nmemb);
  return size * nmemb;
}

/* One request to base + path with an optional JSON body; fails the test when no answer
 * comes. Returns the status, with the raw body in *out (the caller frees out->s). */
static long http(const char *base, const char *method, const char *path, const char *body,
                 struct text *out) {
  char url[1024];
  snprintf(url, sizeof url, "%s%s", base, path);
  memset(out, 0, sizeof *out);
  CURL *easy = curl_easy_init();
  assert_non_null(easy);
  struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, out);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT, 30L);
  if (body) {
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
  }
  assert_int_equal(curl_easy_perform(easy), CURLE_OK);
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(easy);
  curl_slist_free_all(headers);
  return status;
}

/* A request whose status must be want; returns its body parsed (NULL when empty; the
 * caller releases it). */
static json_t *http_expect(const char *base, const char *method, const char *path,
                           const char *body, long want) {
  struct text out;
  long status = http(base, method, path, body, &out);
  if (status != want)
    print_error("%s %s: %ld, want %ld: %s\n", method, path, status, want, text_str(&out));
  assert_int_equal(status, want);
  json_t *doc = out.len ? json_loads(out.s, 0, NULL) : NULL;
  free(out.s);
  return doc;
}

/* ---- running the CLI ---- */

/* Runs `opforge args...` to its end; returns the exit status with p's out and err
 * filled (the caller clears p). */
static int run_cli(struct proc *p, const char *const *args) {
  proc_start(p, g.bin, args, NULL, false);
  return proc_finish(p, WAIT_MS);
}

/* Runs `opforge args...`, which must exit want. */
static void run_ok(const char *const *args, int want) {
  struct proc p;
  int rc = run_cli(&p, args);
  if (rc != want)
    print_error("opforge %s: exit %d, want %d\nstdout: %s\nstderr: %s\n", args[0], rc, want,
                text_str(&p.out), text_str(&p.err));
  assert_int_equal(rc, want);
  proc_clear(&p);
}

/* `opforge store copy --from sqlite:from --to to [extra...]`: the exit status, with p
 * filled. */
static int run_copy(struct proc *p, const char *from, const char *to, const char *extra) {
  char from_arg[PATH_MAX + 8];
  snprintf(from_arg, sizeof from_arg, "sqlite:%s", from);
  const char *args[] = {"store", "copy", "--from", from_arg, "--to", to,
                        extra ? "--to-password-file" : NULL, extra, NULL};
  return run_cli(p, args);
}

/* ---- PostgreSQL ---- */

/* A new database of its own for the name rel (a scratch directory that names it), into
 * url (1024 bytes). */
static void new_database(const char *rel, char *url) {
  char dir[PATH_MAX];
  scratch_dir(rel, dir, sizeof dir);
  const char *made = harness_store_for(dir);
  assert_non_null(made);
  snprintf(url, 1024, "%s", made);
}

/* url ("postgresql:///DB?...") with user and password in its authority. */
static void with_password(const char *url, char *out, size_t len) {
  const char *rest = strstr(url, "://");
  assert_non_null(rest);
  snprintf(out, len, "postgresql://opforge:" PASSWORD "@%s", rest + 3);
}

/* The first column of the first row of sql in the database at url, as text (into out,
 * 256 bytes; "" for NULL or no row). */
static void pg_value(const char *url, const char *sql, char *out) {
  PGconn *conn = PQconnectdb(url);
  if (PQstatus(conn) != CONNECTION_OK)
    fail_msg("cannot connect: %s", PQerrorMessage(conn));
  PGresult *res = PQexec(conn, sql);
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(conn));
  snprintf(out, 256, "%s", st == PGRES_TUPLES_OK && PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
  PQclear(res);
  PQfinish(conn);
}

/* Row counts of the copied tables in the database at url, as one line (out: 512 bytes). */
static void pg_counts(const char *url, char *out) {
  pg_value(url,
           "SELECT concat_ws(' ', (SELECT count(*) FROM tasks), (SELECT count(*) FROM events),"
           " (SELECT count(*) FROM candidates), (SELECT count(*) FROM global_nodes),"
           " (SELECT count(*) FROM local_evidence), (SELECT count(*) FROM skills),"
           " (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM memory_namespaces))",
           out);
}

/* ---- what a server answers ---- */

/* Records GET path of the server at base in answers: "STATUS\nBODY", with the export's
 * exported_at (the time of asking) left out. */
static void record(json_t *answers, const char *base, const char *path) {
  struct text out;
  long status = http(base, "GET", path, NULL, &out);
  const char *body = text_str(&out);
  char *stripped = NULL;
  if (strstr(path, "/export")) {
    json_t *doc = json_loads(body, 0, NULL);
    assert_non_null(doc);
    json_object_del(doc, "exported_at");
    stripped = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
  }
  struct text entry = {0};
  char head[32];
  snprintf(head, sizeof head, "%ld\n", status);
  text_add(&entry, head, strlen(head));
  text_add(&entry, stripped ? stripped : body, strlen(stripped ? stripped : body));
  json_object_set_new(answers, path, json_string(entry.s));
  free(entry.s);
  free(stripped);
  free(out.s);
}

/* Everything the server at base answers about its tasks, memory and skills. The caller
 * releases the result. */
static json_t *answers_of(const char *base) {
  static const char *const fixed[] = {
      "/v1/tasks?limit=500", "/v1/tasks?limit=2", "/v1/memory/namespaces",
      "/v1/memory/global", "/v1/memory/global?memory=arm", "/v1/memory/edges",
      "/v1/memory/edges?memory=arm", "/v1/memory/export", "/v1/memory/export?memory=arm",
      "/v1/skills", "/v1/skills/export"};
  json_t *answers = json_object();
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    record(answers, base, fixed[i]);
  char path[512];
  size_t i;
  json_t *item, *list = http_expect(base, "GET", "/v1/tasks?limit=500", NULL, 200);
  json_array_foreach(json_object_get(list, "items"), i, item) {
    const char *id = json_string_value(json_object_get(item, "id"));
    static const char *const tails[] = {"", "/events", "/candidates", "/best"};
    for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
      snprintf(path, sizeof path, "/v1/tasks/%s%s", id, tails[t]);
      record(answers, base, path);
    }
  }
  json_decref(list);
  list = http_expect(base, "GET", "/v1/skills", NULL, 200);
  json_array_foreach(json_object_get(list, "items"), i, item) {
    snprintf(path, sizeof path, "/v1/skills/%lld",
             (long long)json_integer_value(json_object_get(item, "id")));
    record(answers, base, path);
  }
  json_decref(list);
  list = http_expect(base, "GET", "/v1/memory/export?memory=arm", NULL, 200);
  json_array_foreach(json_object_get(list, "locals"), i, item) {
    if (json_array_size(json_object_get(item, "evidence")) == 0)
      continue;
    snprintf(path, sizeof path, "/v1/memory/local/%s?memory=arm",
             json_string_value(json_object_get(item, "id")));
    record(answers, base, path);
  }
  json_decref(list);
  return answers;
}

/* Asserts that got holds exactly want's answers. */
static void assert_same_answers(const json_t *want, const json_t *got) {
  const char *path;
  json_t *value;
  size_t mismatches = 0;
  json_object_foreach((json_t *)want, path, value) {
    const char *w = json_string_value(value);
    const char *h = json_string_value(json_object_get(got, path));
    if (!h || strcmp(w, h) != 0) {
      print_error("GET %s differs:\n  SQLite:     %.1500s\n  PostgreSQL: %.1500s\n", path, w,
                  h ? h : "(not asked)");
      mismatches++;
    }
  }
  assert_int_equal(mismatches, 0);
  assert_int_equal(json_object_size(got), json_object_size(want));
}

/* ---- the source ---- */

/* Fills the source store through its server at base: a second namespace with a direction
 * added by hand, tasks run in both namespaces, a task and a skill deleted, skills. */
static void fill_source(const char *base) {
  const char *create[] = {"memory", "create", "arm", "--server", base, NULL};
  run_ok(create, 0);
  json_decref(http_expect(base, "POST", "/v1/memory/global?memory=arm",
                          "{\"id\": \"tile_swizzle\", \"name\": \"Tile swizzle \\u2713\","
                          " \"intent\": \"R\\u00e4umliche N\\u00e4he\", \"prior\": 0.1}",
                          201));
  char arm[PATH_MAX], plain[PATH_MAX], gone[PATH_MAX];
  snprintf(arm, sizeof arm, "%s/progs_arm", g.dir);
  snprintf(plain, sizeof plain, "%s/progs_default", g.dir);
  snprintf(gone, sizeof gone, "%s/progs_gone", g.dir);
  const char *tune_arm[] = {"tune", arm, "--server", base, "--proposer", "test", "--steps", "4",
                            "--memory", "arm", "--run-id", "copy-1", NULL};
  const char *tune_plain[] = {"tune", plain, "--server", base, "--proposer", "test", "--steps",
                              "4", "--run-id", "copy-1", NULL};
  const char *tune_gone[] = {"tune", gone, "--server", base, "--proposer", "test", "--steps",
                             "4", "--run-id", "copy-1", NULL};
  run_ok(tune_arm, 0);
  run_ok(tune_plain, 0);
  run_ok(tune_gone, 0);
  /* The last task goes: the copy must not hand its seq out again. */
  json_t *list = http_expect(base, "GET", "/v1/tasks?limit=1", NULL, 200);
  char path[256];
  snprintf(path, sizeof path, "/v1/tasks/%s",
           json_string_value(json_object_get(json_array_get(json_object_get(list, "items"), 0),
                                             "id")));
  json_decref(list);
  json_decref(http_expect(base, "DELETE", path, NULL, 204));
  json_decref(http_expect(base, "POST", "/v1/skills",
                          "{\"rule\": \"You cannot launch more than 1024 threads per block.\"}",
                          201));
  json_decref(http_expect(base, "POST", "/v1/skills",
                          "{\"rule\": \"You cannot read past the end of a row.\", \"score\": 4,"
                          " \"family\": \"softmax\", \"enabled\": false}",
                          201));
  json_decref(http_expect(base, "POST", "/v1/skills",
                          "{\"rule\": \"You cannot skip the tail of a vector loop.\"}", 201));
  json_decref(http_expect(base, "DELETE", "/v1/skills/3", NULL, 204));
}

/* Makes the SQLite source with the scripted server and records its answers. Returns 0,
 * or -1 after printing why. */
static int make_source(void) {
  write_fixture("alpha", 1, "correct 1.0");
  write_fixture("gamma", 1, "compile");
  write_fixture("gamma", 2, "correct 1.6");
  write_fixture("epsilon", 1, "compile");
  write_fixture("epsilon", 2, "correct 1.8");
  write_fixture("epsilon", 3, "correct 1.6");
  write_fixture("epsilon", 4, "correct 1.25");
  write_fixture("beta", 1, "correct 1.25");
  write_fixture("delta", 1, "correct 1.25");
  program("progs_arm/alpha.py");
  program("progs_arm/gamma.py");
  program("progs_arm/epsilon.py");
  program("progs_default/beta.py");
  program("progs_gone/delta.py");
  char fixtures[PATH_MAX], base[64];
  snprintf(g.src, sizeof g.src, "%s/src", g.dir);
  snprintf(fixtures, sizeof fixtures, "%s/fixtures", g.dir);
  const char *extra[] = {"--gpus", "0", "--evaluator", g.evaluator, "--fixtures", fixtures,
                         "--evaluate-deadline", "30", "--sandbox-env", "SCRIPTED_EVAL_*", NULL};
  pid_t pid = server_start_at(g.src, extra, base);
  if (pid <= 0)
    return -1;
  fill_source(base);
  g.answers = answers_of(base);
  if (server_stop_at(pid) != 0) {
    print_error("the source's server did not exit 0\n");
    return -1;
  }
  g.have_source = true;
  return 0;
}

/* ---- set-up ---- */

/* Finds the binaries and, with PostgreSQL and the scripted evaluator at hand, makes the
 * source every PostgreSQL test copies. */
static int group_setup(void **state) {
  (void)state;
  child_isolate();
  unsetenv("GITHUB_RUN_ID"), unsetenv("CI_PIPELINE_ID"), unsetenv("BUILD_TAG");
  unsetenv("OPFORGE_RUN_ID");
  const char *bin = getenv("OPFORGE_BIN"), *eval = getenv("OPFORGE_SCRIPTED_EVALUATOR");
  g.have_bin = bin && access(bin, X_OK) == 0;
  g.have_pg = harness_pg();
  snprintf(g.dir, sizeof g.dir, "/tmp/opforge-copy-XXXXXX");
  if (!mkdtemp(g.dir))
    return -1;
  if (!g.have_bin)
    return 0;
  snprintf(g.bin, sizeof g.bin, "%s", bin);
  if (!g.have_pg || !eval || access(eval, X_OK) != 0)
    return 0;
  snprintf(g.evaluator, sizeof g.evaluator, "%s", eval);
  /* cmocka's assertions in a group set-up end the whole run: they stand for a failure. */
  return make_source();
}

/* Frees the recorded answers and removes the scratch directory. */
static int group_teardown(void **state) {
  (void)state;
  json_decref(g.answers);
  for (size_t i = 0; i < sizeof g.servers / sizeof g.servers[0]; i++)
    if (g.servers[i] > 0)
      child_server_stop(g.servers[i]);
  return child_group_teardown(-1, g.dir);
}

#define NEED_BIN()                                                                         \
  do {                                                                                     \
    if (!g.have_bin) {                                                                     \
      print_message("skipped: $OPFORGE_BIN is not set to the opforge binary\n");          \
      skip();                                                                              \
    }                                                                                      \
  } while (0)

#define NEED_PG()                                                                          \
  do {                                                                                     \
    NEED_BIN();                                                                            \
    if (!g.have_pg) {                                                                      \
      print_message("skipped: $OPFORGE_TEST_PG is not set (tests/pg/cluster start DIR "    \
                    "prints the admin URL of a throwaway PostgreSQL cluster)\n");          \
      skip();                                                                              \
    }                                                                                      \
    if (!g.have_source) {                                                                  \
      print_message("skipped: $OPFORGE_SCRIPTED_EVALUATOR is not set\n");                  \
      skip();                                                                              \
    }                                                                                      \
  } while (0)

/* ---- the copy ---- */

/* Checks the copy's stdout: a line per table in copy order, then the summary naming the
 * source and the destination (password hidden); tasks, namespaces and skills as made. */
static void check_copy_output(const char *out, const char *shown_to) {
  static const char *const tables[] = {
      "tasks", "events", "candidates", "tree_nodes", "memory_meta", "memory_namespaces",
      "global_nodes", "local_nodes", "local_evidence", "edges", "skills", "skill_examples",
      "idempotency_keys"};
  long long total = 0;
  const char *line = out;
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    size_t len = strlen(tables[i]);
    assert_memory_equal(line, tables[i], len);
    assert_memory_equal(line + len, ": ", 2);
    char *end = NULL;
    long long n = strtoll(line + len + 2, &end, 10);
    assert_true(strncmp(end, n == 1 ? " row\n" : " rows\n", n == 1 ? 5 : 6) == 0);
    long long want = strcmp(tables[i], "tasks") == 0               ? 4
                     : strcmp(tables[i], "memory_namespaces") == 0 ? 2
                     : strcmp(tables[i], "skills") == 0            ? 2
                     : strcmp(tables[i], "idempotency_keys") == 0  ? 5
                                                                   : -1;
    if (want >= 0)
      assert_int_equal(n, want);
    else if (strcmp(tables[i], "tree_nodes") != 0 && strcmp(tables[i], "skill_examples") != 0)
      assert_true(n > 0);
    total += n;
    line = strchr(line, '\n') + 1;
  }
  char summary[PATH_MAX + 2048];
  snprintf(summary, sizeof summary, "copied %lld rows from %s/opforge.db to %s (schema version ",
           total, g.src, shown_to);
  assert_memory_equal(line, summary, strlen(summary));
  assert_string_equal(strchr(line, '\n'), "\n");
}

/* url with "opforge:" PASSWORD "@" shown as the store shows it. */
static void shown(const char *url, char *out, size_t len) {
  const char *rest = strstr(url, "://");
  snprintf(out, len, "postgresql://opforge:***@%s", rest + 3);
}

/* A new server on the PostgreSQL database url (--gpus none); its base URL into base. */
static pid_t pg_server(const char *rel, const char *url, char *base) {
  char data[PATH_MAX];
  snprintf(data, sizeof data, "%s/%s", g.dir, rel);
  const char *extra[] = {"--gpus", "none", "--store", url, NULL};
  pid_t pid = server_start_at(data, extra, base);
  assert_true(pid > 0);
  return pid;
}

/* New rows in the copy at url (served at base) take numbers past the copied ones, past
 * the deleted ones too (task 5, skill 3), and list after them. */
static void check_new_rows_follow(const char *base, const char *url) {
  struct proc p;
  char beta[PATH_MAX], seq[256];
  snprintf(beta, sizeof beta, "%s/progs_default/beta.py", g.dir);
  const char *submit[] = {"submit", beta, "--server", base, NULL};
  assert_int_equal(run_cli(&p, submit), 0);
  char query[512];
  snprintf(query, sizeof query, "SELECT seq FROM tasks WHERE id = '%.36s'", text_str(&p.out));
  proc_clear(&p);
  pg_value(url, query, seq);
  assert_string_equal(seq, "6");
  json_t *skill = http_expect(base, "POST", "/v1/skills",
                              "{\"rule\": \"You cannot write past the output.\"}", 201);
  assert_int_equal(json_integer_value(json_object_get(skill, "id")), 4);
  json_decref(skill);
  json_decref(http_expect(base, "POST", "/v1/memory/global?memory=arm",
                          "{\"id\": \"after_copy\", \"name\": \"After the copy\"}", 201));
  json_t *list = http_expect(base, "GET", "/v1/memory/global?memory=arm", NULL, 200);
  json_t *items = json_object_get(list, "items");
  assert_string_equal(json_string_value(json_object_get(
                          json_array_get(items, json_array_size(items) - 1), "id")),
                      "after_copy");
  json_decref(list);
}

/* The copy into a new database answers as the SQLite server did; a retried tune replays
 * its tasks; new tasks, skills and directions come after the copied ones. */
static void test_copy_round_trip(void **state) {
  (void)state;
  NEED_PG();
  char url[1024], to[1200], to_shown[1200], base[64];
  new_database("db_round_trip", url);
  with_password(url, to, sizeof to);
  shown(url, to_shown, sizeof to_shown);
  struct proc p;
  int rc = run_copy(&p, g.src, to, NULL);
  if (rc != 0)
    print_error("exit %d\nstdout: %s\nstderr: %s\n", rc, text_str(&p.out), text_str(&p.err));
  assert_int_equal(rc, 0);
  assert_string_equal(text_str(&p.err), "");
  check_copy_output(text_str(&p.out), to_shown);
  assert_null(strstr(text_str(&p.out), PASSWORD));
  proc_clear(&p);

  pid_t pid = pg_server("pg_round_trip", url, base);
  json_t *got = answers_of(base);
  assert_same_answers(g.answers, got);
  json_decref(got);

  /* The idempotency keys came along: the same run replays its tasks. */
  char arm[PATH_MAX];
  snprintf(arm, sizeof arm, "%s/progs_arm", g.dir);
  const char *again[] = {"tune", arm, "--server", base, "--proposer", "test", "--steps", "4",
                         "--memory", "arm", "--run-id", "copy-1", NULL};
  assert_int_equal(run_cli(&p, again), 0);
  assert_non_null(strstr(text_str(&p.out), "submitted: new 0, replayed 3, reused 0\n"));
  proc_clear(&p);
  json_t *list = http_expect(base, "GET", "/v1/tasks?limit=500", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 4);
  json_decref(list);

  check_new_rows_follow(base, url);
  assert_int_equal(server_stop_at(pid), 0);
}


/* A destination with tasks is refused, and nothing in it changes. */
static void test_refuses_destination_with_tasks(void **state) {
  (void)state;
  NEED_PG();
  char url[1024], before[256], after[256];
  new_database("db_twice", url);
  struct proc p;
  assert_int_equal(run_copy(&p, g.src, url, NULL), 0);
  proc_clear(&p);
  pg_counts(url, before);
  assert_int_equal(run_copy(&p, g.src, url, NULL), 1);
  assert_string_equal(text_str(&p.out), "");
  assert_string_equal(text_str(&p.err), "error: the destination is not empty: it holds 4 rows "
                                        "in tasks; copy into a new database\n");
  proc_clear(&p);
  pg_counts(url, after);
  assert_string_equal(after, before);
}

/* A destination a server uses is refused; once it stopped, its untouched seed memory is
 * replaced by the source's. */
static void test_refuses_live_server_then_replaces_seed(void **state) {
  (void)state;
  NEED_PG();
  char url[1024], base[64], before[256], after[256];
  new_database("db_live", url);
  pid_t pid = pg_server("pg_live", url, base);
  pg_counts(url, before);
  struct proc p;
  assert_int_equal(run_copy(&p, g.src, url, NULL), 1);
  const char *err = text_str(&p.err);
  static const char head[] = "error: the destination is in use: server ";
  assert_memory_equal(err, head, strlen(head));
  const char *tail = "; stop every server that uses it first\n";
  assert_true(strlen(err) > strlen(tail));
  assert_string_equal(err + strlen(err) - strlen(tail), tail);
  assert_string_equal(text_str(&p.out), "");
  proc_clear(&p);
  pg_counts(url, after);
  assert_string_equal(after, before);
  assert_int_equal(server_stop_at(pid), 0);

  assert_int_equal(run_copy(&p, g.src, url, NULL), 0);
  assert_non_null(strstr(text_str(&p.out), "\nmemory_namespaces: 2 rows\n"));
  proc_clear(&p);
  pid = pg_server("pg_live", url, base);
  json_t *got = answers_of(base);
  assert_same_answers(g.answers, got);
  json_decref(got);
  assert_int_equal(server_stop_at(pid), 0);
}

/* A destination whose memory was used or edited is refused, saying how. */
static void test_refuses_touched_memory(void **state) {
  (void)state;
  NEED_PG();
  static const struct {
    const char *method, *path, *body;
    long status;
    const char *why;
  } cases[] = {
      {"POST", "/v1/memory/namespaces", "{\"name\": \"mine\"}", 201, "namespace 'mine'"},
      {"PATCH", "/v1/memory/global/memory_access", "{\"prior\": 0.5}", 200,
       "direction 'memory_access' was tried, edited or added"},
      {"DELETE", "/v1/memory/edges/memory_access/parallel_mapping", NULL, 204,
       "records of the seed were removed"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char rel[32], url[1024], base[64], before[256], after[256], want[512];
    snprintf(rel, sizeof rel, "db_touched_%zu", i);
    new_database(rel, url);
    pid_t pid = pg_server(rel, url, base);
    json_decref(http_expect(base, cases[i].method, cases[i].path, cases[i].body,
                            cases[i].status));
    assert_int_equal(server_stop_at(pid), 0);
    pg_counts(url, before);
    struct proc p;
    assert_int_equal(run_copy(&p, g.src, url, NULL), 1);
    snprintf(want, sizeof want, "error: the destination is not empty: its memory is not the "
             "untouched seed (%s); copy into a new database\n", cases[i].why);
    assert_string_equal(text_str(&p.err), want);
    assert_string_equal(text_str(&p.out), "");
    proc_clear(&p);
    pg_counts(url, after);
    assert_string_equal(after, before);
  }
}

/* A destination a newer opforge migrated is refused, and left as it was. */
static void test_refuses_newer_schema(void **state) {
  (void)state;
  NEED_PG();
  char url[1024], value[256];
  new_database("db_newer", url);
  pg_value(url, "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at TEXT NOT NULL)", value);
  pg_value(url, "INSERT INTO schema_migrations VALUES (99, '0099_future.sql',"
                " '2030-01-01T00:00:00.000Z')", value);
  struct proc p;
  assert_int_equal(run_copy(&p, g.src, url, NULL), 1);
  char want[1400];
  snprintf(want, sizeof want, "error: --to: %s has schema version 99, newer than this build's ",
           url);
  const char *err = strstr(text_str(&p.err), "error: ");
  assert_non_null(err);
  assert_memory_equal(err, want, strlen(want));
  assert_string_equal(text_str(&p.out), "");
  proc_clear(&p);
  pg_value(url, "SELECT concat_ws(' ', (SELECT count(*) FROM schema_migrations),"
                " to_regclass('tasks') IS NULL)", value);
  assert_string_equal(value, "1 t");
}

/* No password reaches the output: not from the URL (either form), not from the file. */
static void test_password_never_printed(void **state) {
  (void)state;
  NEED_PG();
  char url[1024], to[1200], bad[1200], file[PATH_MAX];
  new_database("db_password", url);
  /* A database that does not exist, with the password in the authority, then in the
   * query. */
  with_password(url, to, sizeof to);
  char *db = strstr(to, "/opf_");
  assert_non_null(db);
  snprintf(bad, sizeof bad, "%.*s/no_such_db%s", (int)(db - to), to, strchr(db, '?'));
  struct proc p;
  assert_int_equal(run_copy(&p, g.src, bad, NULL), 1);
  assert_null(strstr(text_str(&p.out), PASSWORD));
  assert_null(strstr(text_str(&p.err), PASSWORD));
  assert_non_null(strstr(text_str(&p.err), "error: --to: "));
  proc_clear(&p);
  snprintf(bad, sizeof bad, "%s&password=" PASSWORD, url);
  char *name = strstr(bad, "/opf_");
  memcpy(name, "/opf_nonexistent_", 17); /* same length: a database nobody made */
  assert_int_equal(run_copy(&p, g.src, bad, NULL), 1);
  assert_null(strstr(text_str(&p.out), PASSWORD));
  assert_null(strstr(text_str(&p.err), PASSWORD));
  proc_clear(&p);
  /* --to-password-file: the copy goes through (the test cluster trusts its users). */
  scratch_file("password", PASSWORD "-file\n", file, sizeof file);
  assert_int_equal(run_copy(&p, g.src, url, file), 0);
  assert_null(strstr(text_str(&p.out), PASSWORD));
  assert_string_equal(text_str(&p.err), "");
  proc_clear(&p);
}

/* ---- without PostgreSQL ---- */

/* Usage errors exit 2 with their message, and echo no --to value. */
static void test_usage_errors(void **state) {
  (void)state;
  NEED_BIN();
  char absent[PATH_MAX], absent_from[PATH_MAX + 8], want_absent[PATH_MAX * 2];
  char nofile[PATH_MAX], want_nofile[PATH_MAX * 2];
  snprintf(absent, sizeof absent, "%s/absent", g.dir);
  snprintf(absent_from, sizeof absent_from, "sqlite:%s", absent);
  snprintf(want_absent, sizeof want_absent,
           "error: --from: %s/opforge.db: No such file or directory\n", absent);
  snprintf(nofile, sizeof nofile, "%s/nofile", g.dir);
  snprintf(want_nofile, sizeof want_nofile,
           "error: --to-password-file: cannot open '%s': No such file or directory\n", nofile);
  const char *pg = "postgresql:///x?host=/nonexistent";
  struct {
    const char *args[12];
    const char *err;
    bool then_usage;
  } cases[] = {
      {{"store", NULL}, "", true},
      {{"store", "move", NULL}, "error: unknown store command 'move'\n", true},
      {{"store", "copy", "--to", pg, NULL}, "error: --from is required\n", true},
      {{"store", "copy", "--from", "sqlite:/x", NULL}, "error: --to is required\n", true},
      {{"store", "copy", "--from", "sqlite:/x", "--to", pg, "extra", NULL},
       "error: store copy takes no operands\n", true},
      {{"store", "copy", "--bogus", NULL}, "error: unknown option '--bogus'\n", true},
      {{"store", "copy", "--from", "/x", "--to", pg, NULL},
       "error: --from: expected sqlite:DIR, the data directory holding opforge.db\n", false},
      {{"store", "copy", "--from", "sqlite:", "--to", pg, NULL},
       "error: --from: expected sqlite:DIR, the data directory holding opforge.db\n", false},
      {{"store", "copy", "--from", "sqlite:/x", "--to", "mysql://u:" PASSWORD "@h/x", NULL},
       "error: --to: expected a postgresql:// or postgres:// URL\n", false},
      {{"store", "copy", "--from", "sqlite:/x", "--to", "sqlite:/y", NULL},
       "error: --to: expected a postgresql:// or postgres:// URL\n", false},
      {{"store", "copy", "--from", absent_from, "--to", pg, NULL}, want_absent, false},
      {{"store", "copy", "--from", "sqlite:/x", "--to", pg, "--to-password-file", nofile, NULL},
       want_nofile, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct proc p;
    int rc = run_cli(&p, cases[i].args);
    const char *err = text_str(&p.err), *want = cases[i].err;
    static const char usage[] = "usage: opforge store copy --from sqlite:DIR --to ";
    bool ok = rc == 2 && strcmp(text_str(&p.out), "") == 0 &&
              (cases[i].then_usage
                   ? strncmp(err, want, strlen(want)) == 0 &&
                         strncmp(err + strlen(want), usage, strlen(usage)) == 0
                   : strcmp(err, want) == 0);
    if (!ok)
      print_error("case %zu: exit %d, stderr '%s', want '%s'\n", i, rc, err, want);
    assert_true(ok);
    assert_null(strstr(err, PASSWORD));
    proc_clear(&p);
  }
  /* --help on stdout, exit 0; the command list names it. */
  const char *help[] = {"store", "copy", "--help", NULL};
  struct proc p;
  assert_int_equal(run_cli(&p, help), 0);
  assert_memory_equal(text_str(&p.out), "usage: opforge store copy", 25);
  assert_non_null(strstr(text_str(&p.out), "untouched seed"));
  proc_clear(&p);
  const char *top[] = {"--help", NULL};
  assert_int_equal(run_cli(&p, top), 0);
  assert_non_null(strstr(text_str(&p.out), "\n  store      copy a SQLite store into PostgreSQL"));
  proc_clear(&p);
}

/* A source a server runs on is refused before anything is opened. */
static void test_refuses_source_in_use(void **state) {
  (void)state;
  NEED_BIN();
  char data[PATH_MAX], base[64], want[PATH_MAX + 128];
  snprintf(data, sizeof data, "%s/busy", g.dir);
  const char *extra[] = {"--gpus", "none", NULL};
  pid_t pid = server_start_at(data, extra, base);
  assert_true(pid > 0);
  struct proc p;
  int rc = run_copy(&p, data, "postgresql:///x?host=/nonexistent", NULL);
  snprintf(want, sizeof want, "error: --from: %s is in use by a running opforge server (pid %ld);"
           " stop it first\n", data, (long)pid);
  assert_int_equal(rc, 1);
  assert_string_equal(text_str(&p.err), want);
  assert_string_equal(text_str(&p.out), "");
  proc_clear(&p);
  assert_int_equal(server_stop_at(pid), 0);
}

/* The usage tests first: they need no PostgreSQL. */
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_refuses_source_in_use),
      cmocka_unit_test(test_copy_round_trip),
      cmocka_unit_test(test_refuses_destination_with_tasks),
      cmocka_unit_test(test_refuses_live_server_then_replaces_seed),
      cmocka_unit_test(test_refuses_touched_memory),
      cmocka_unit_test(test_refuses_newer_schema),
      cmocka_unit_test(test_password_never_printed),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
