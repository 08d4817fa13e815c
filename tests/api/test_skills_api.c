/* API tests of /v1/skills: every endpoint and error code against the real server (every
 * response checked against the spec), export and import round trips, the adaptation pass
 * over finished tasks and its refusals, auth on writes, and the `opforge skills` CLI. */
#include "tests/api/test_skills_api.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/skills.h"
#include "tests/api/harness.h"

#define FIELD_NULL "(json null)"
#define TOKEN "skills-token-0123456789"
#define AUTH "Authorization: Bearer " TOKEN

#define RULE_A "You cannot use VEC=4 in softmax kernels when the inner size is not a multiple of 4."
#define RULE_B "You cannot call __syncthreads() inside divergent branches."

/* One labelled request and what it must get. */
struct step {
  const char *label;
  const char *method;
  const char *path;
  const char *body;   /* NULL for none */
  long status;
  const char *code;   /* NULL for a success status */
  const char *field;  /* NULL: not checked; FIELD_NULL: null */
};

/* Whether r has status, code and field; the mismatch in why. */
static bool matches(const struct http_response *r, const struct step *s, char *why, size_t len) {
  if (r->status != s->status) {
    snprintf(why, len, "want status %ld, got %ld", s->status, r->status);
    return false;
  }
  if (!s->code)
    return true;
  json_t *doc = json_loadb(r->body, r->body_len, 0, NULL);
  json_t *err = json_object_get(doc, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  json_t *field = json_object_get(err, "field");
  bool ok = code && strcmp(code, s->code) == 0;
  if (ok && s->field)
    ok = strcmp(s->field, FIELD_NULL) == 0
             ? json_is_null(field)
             : json_is_string(field) && strcmp(json_string_value(field), s->field) == 0;
  if (!ok)
    snprintf(why, len, "want %s/%s, got %s/%s", s->code, s->field ? s->field : "(any)",
             code ? code : "(none)", json_is_string(field) ? json_string_value(field) : "(null)");
  json_decref(doc);
  return ok;
}

static void run_steps(struct server *server, const struct step *steps, size_t n) {
  size_t failures = 0;
  for (size_t i = 0; i < n; i++) {
    struct http_response *r = http_send(server, steps[i].method, steps[i].path, steps[i].body,
                                        NULL);
    char why[512];
    if (!matches(r, &steps[i], why, sizeof why)) {
      print_error("step '%s' (%s %s): %s\n  body: %.300s\n", steps[i].label, steps[i].method,
                  steps[i].path, why, r->body);
      failures++;
    }
    http_response_free(r);
  }
  if (failures)
    fail_msg("%zu of %zu steps failed", failures, n);
}

static json_t *call(struct server *server, const char *method, const char *path,
                    const char *body, long status) {
  struct http_response *r = http_send(server, method, path, body, NULL);
  if (r->status != status)
    print_error("%s %s: want %ld, got %ld: %.400s\n", method, path, status, r->status, r->body);
  assert_int_equal(r->status, status);
  json_t *doc = r->body_len ? http_json(r) : NULL;
  http_response_free(r);
  return doc;
}

static json_t *call_json(struct server *server, const char *method, const char *path,
                         const json_t *doc, long status) {
  char *text = json_dumps(doc, JSON_COMPACT);
  json_t *out = call(server, method, path, text, status);
  free(text);
  return out;
}

static json_int_t num(const json_t *obj, const char *key) {
  return json_integer_value(json_object_get(obj, key));
}

static int setup_server(void **state) {
  struct server_opts opts = {0};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int setup_auth_server(void **state) {
  struct server_opts opts = {.token = TOKEN};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int teardown_server(void **state) {
  int rc = server_stop(*state);
  *state = NULL;
  return rc;
}

/* ---------------------------------------------------------------- tests */

static void test_skills_crud(void **state) {
  struct server *server = *state;
  json_t *list = call(server, "GET", "/v1/skills", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 0);
  json_decref(list);
  /* Create: 201, Location, defaults. */
  struct http_response *r = http_send(server, "POST", "/v1/skills",
                                      "{\"rule\":\"" RULE_A "\",\"family\":\"softmax\","
                                      "\"score\":3,\"constraint\":{\"knob\":\"VEC\",\"op\":"
                                      "\"eq\",\"value\":4,\"when\":{\"family\":\"softmax\","
                                      "\"inner_not_multiple_of\":4}}}",
                                      NULL);
  assert_int_equal(r->status, 201);
  json_t *a = http_json(r);
  char location[64];
  snprintf(location, sizeof location, "/v1/skills/%lld", (long long)num(a, "id"));
  assert_string_equal(http_header(r, "Location"), location);
  http_response_free(r);
  assert_string_equal(json_string_value(json_object_get(a, "origin")), "user");
  assert_int_equal(num(a, "score"), 3);
  assert_true(json_is_true(json_object_get(a, "enabled")));
  assert_int_equal(json_array_size(json_object_get(a, "examples")), 0);
  json_t *b = call(server, "POST", "/v1/skills", "{\"rule\":\"" RULE_B "\"}", 201);
  assert_true(json_is_null(json_object_get(b, "family")));
  assert_int_equal(num(b, "score"), 1);
  /* Get, filters. */
  json_t *got = call(server, "GET", location, NULL, 200);
  assert_string_equal(json_string_value(json_object_get(got, "rule")), RULE_A);
  json_decref(got);
  list = call(server, "GET", "/v1/skills?family=gemm", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1); /* b: every family */
  json_decref(list);
  list = call(server, "GET", "/v1/skills?family=softmax&enabled=true", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 2);
  json_decref(list);
  /* Disable and enable through PATCH; other edits. */
  json_t *p = call(server, "PATCH", location, "{\"enabled\":false}", 200);
  assert_true(json_is_false(json_object_get(p, "enabled")));
  json_decref(p);
  list = call(server, "GET", "/v1/skills?enabled=false", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  json_decref(list);
  p = call(server, "PATCH", location,
           "{\"enabled\":true,\"score\":7,\"constraint\":null,\"family\":null,"
           "\"rule\":\"You cannot use VEC=4 here.\"}", 200);
  assert_true(json_is_true(json_object_get(p, "enabled")));
  assert_int_equal(num(p, "score"), 7);
  assert_true(json_is_null(json_object_get(p, "constraint")));
  assert_string_equal(json_string_value(json_object_get(p, "rule")), "You cannot use VEC=4 here.");
  json_decref(p);
  char bpath[64];
  snprintf(bpath, sizeof bpath, "/v1/skills/%lld", (long long)num(b, "id"));
  json_decref(call(server, "DELETE", bpath, NULL, 204));
  list = call(server, "GET", "/v1/skills", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  json_decref(list);
  /* Bad input, with exact codes and fields. */
  const struct step steps[] = {
    {"get unknown", "GET", "/v1/skills/999", NULL, 404, "skill_not_found", FIELD_NULL},
    {"get bad id", "GET", "/v1/skills/abc", NULL, 400, "invalid_id", "id"},
    {"get zero id", "GET", "/v1/skills/0", NULL, 400, "invalid_id", "id"},
    {"get signed id", "GET", "/v1/skills/-3", NULL, 400, "invalid_id", "id"},
    {"get huge id", "GET", "/v1/skills/99999999999999999999", NULL, 400, "invalid_id", "id"},
    {"patch unknown", "PATCH", "/v1/skills/999", "{\"score\":2}", 404, "skill_not_found", NULL},
    {"patch bad id", "PATCH", "/v1/skills/x1", "{\"score\":2}", 400, "invalid_id", "id"},
    {"delete unknown", "DELETE", bpath, NULL, 404, "skill_not_found", NULL},
    {"delete bad id", "DELETE", "/v1/skills/1e3", NULL, 400, "invalid_id", "id"},
    {"list bad family", "GET", "/v1/skills?family=conv", NULL, 400, "invalid_query", "family"},
    {"list bad enabled", "GET", "/v1/skills?enabled=yes", NULL, 400, "invalid_query", "enabled"},
    {"create not json", "POST", "/v1/skills", "{nope", 400, "bad_json", NULL},
    {"create array", "POST", "/v1/skills", "[]", 400, "bad_json", NULL},
    {"create no rule", "POST", "/v1/skills", "{\"score\":2}", 400, "missing_field", "rule"},
    {"create bad rule", "POST", "/v1/skills", "{\"rule\":\"Avoid VEC=4.\"}", 400,
     "invalid_field", "rule"},
    {"create unknown key", "POST", "/v1/skills", "{\"rule\":\"You cannot x.\",\"weight\":1}", 400,
     "unknown_field", "weight"},
    {"create read-only", "POST", "/v1/skills", "{\"rule\":\"You cannot x.\",\"refusals\":1}", 400,
     "invalid_field", "refusals"},
    {"create bad score", "POST", "/v1/skills", "{\"rule\":\"You cannot x.\",\"score\":-2}", 400,
     "invalid_field", "score"},
    {"create bad family", "POST", "/v1/skills", "{\"rule\":\"You cannot x.\",\"family\":\"fft\"}",
     400, "invalid_field", "family"},
    {"create bad knob", "POST", "/v1/skills",
     "{\"rule\":\"You cannot x.\",\"constraint\":{\"knob\":\"WARPS\",\"op\":\"eq\",\"value\":1}}",
     400, "invalid_field", "constraint.knob"},
    {"create missing op", "POST", "/v1/skills",
     "{\"rule\":\"You cannot x.\",\"constraint\":{\"knob\":\"VEC\",\"value\":1}}", 400,
     "missing_field", "constraint.op"},
    {"create bad condition", "POST", "/v1/skills",
     "{\"rule\":\"You cannot x.\",\"constraint\":{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4,"
     "\"when\":{\"rows_lt\":3}}}", 400, "unknown_field", "constraint.when.rows_lt"},
    {"patch bad enabled", "PATCH", location, "{\"enabled\":\"no\"}", 400, "invalid_field",
     "enabled"},
    {"patch id", "PATCH", location, "{\"id\":5}", 400, "invalid_field", "id"},
    {"patch origin", "PATCH", location, "{\"origin\":\"llm\"}", 400, "invalid_field", "origin"},
    {"post on id", "POST", location, "{}", 405, "method_not_allowed", NULL},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);
  json_decref(a);
  json_decref(b);
}

static void test_skills_export_import(void **state) {
  struct server *server = *state;
  json_decref(call(server, "POST", "/v1/skills", "{\"rule\":\"" RULE_A "\",\"score\":4}", 201));
  json_decref(call(server, "POST", "/v1/skills", "{\"rule\":\"" RULE_B "\",\"family\":\"norm\"}",
                   201));
  json_t *doc = call(server, "GET", "/v1/skills/export", NULL, 200);
  assert_int_equal(num(doc, "version"), 1);
  assert_int_equal(json_array_size(json_object_get(doc, "skills")), 2);
  /* The export imports back to the same export. */
  json_t *counts = call_json(server, "POST", "/v1/skills/import", doc, 200);
  assert_int_equal(num(counts, "skills"), 2);
  assert_int_equal(num(counts, "examples"), 0);
  json_decref(counts);
  json_t *again = call(server, "GET", "/v1/skills/export", NULL, 200);
  assert_true(json_equal(json_object_get(doc, "skills"), json_object_get(again, "skills")));
  json_decref(again);
  /* A seed-like document replaces every rule. */
  counts = call(server, "POST", "/v1/skills/import",
                "{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"score\":5,"
                "\"constraint\":{\"knob\":\"MODE\",\"op\":\"eq\",\"value\":\"online\"}}]}", 200);
  assert_int_equal(num(counts, "skills"), 1);
  json_decref(counts);
  json_t *list = call(server, "GET", "/v1/skills", NULL, 200);
  json_t *only = json_array_get(json_object_get(list, "items"), 0);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  assert_string_equal(json_string_value(json_object_get(only, "origin")), "import");
  assert_int_equal(num(only, "score"), 5);
  json_decref(list);
  /* Refused documents name the first bad field and change nothing. */
  const struct step steps[] = {
    {"import not json", "POST", "/v1/skills/import", "{x", 400, "bad_json", NULL},
    {"import no version", "POST", "/v1/skills/import", "{\"skills\":[]}", 400, "invalid_import",
     "version"},
    {"import no skills", "POST", "/v1/skills/import", "{\"version\":1}", 400, "invalid_import",
     "skills"},
    {"import unknown top", "POST", "/v1/skills/import",
     "{\"version\":1,\"skills\":[],\"globals\":[]}", 400, "invalid_import", "globals"},
    {"import bad rule", "POST", "/v1/skills/import",
     "{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\"},{\"rule\":\"nope\"}]}", 400,
     "invalid_import", "skills[1].rule"},
    {"import bad op", "POST", "/v1/skills/import",
     "{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"constraint\":{\"knob\":\"VEC\","
     "\"op\":\"is\",\"value\":1}}]}", 400, "invalid_import", "skills[0].constraint.op"},
    {"import duplicate id", "POST", "/v1/skills/import",
     "{\"version\":1,\"skills\":[{\"rule\":\"You cannot x.\",\"id\":2},{\"rule\":\"You cannot "
     "y.\",\"id\":2}]}", 400, "invalid_import", "skills[1].id"},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);
  list = call(server, "GET", "/v1/skills", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  json_decref(list);
  json_decref(doc);
}

/* Without a GPU tasks stay queued; a cancelled one is finished, with no failures to learn
 * from. The pass over finished tasks with failures is tested end to end in tests/engine. */
static void test_skills_adapt(void **state) {
  struct server *server = *state;
  const char *reference = "class Model(nn.Module):\\n  pass\\ndef get_inputs():\\n  return []\\n"
                          "def get_init_inputs():\\n  return []\\n";
  char body[512];
  snprintf(body, sizeof body, "{\"reference\":\"%s\"}", reference);
  json_t *queued = call(server, "POST", "/v1/tasks", body, 202);
  json_t *done = call(server, "POST", "/v1/tasks", body, 202);
  const char *qid = json_string_value(json_object_get(queued, "id"));
  const char *did = json_string_value(json_object_get(done, "id"));
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s/cancel", did);
  json_decref(call(server, "POST", path, NULL, 200));
  char ok[128], running[128], both[256];
  snprintf(ok, sizeof ok, "{\"tasks\":[\"%s\"]}", did);
  snprintf(running, sizeof running, "{\"tasks\":[\"%s\"]}", qid);
  snprintf(both, sizeof both, "{\"tasks\":[\"%s\",\"%s\"]}", did, did);
  json_t *report = call(server, "POST", "/v1/skills/adapt", ok, 200);
  assert_string_equal(json_string_value(json_object_get(report, "method")), "grouping");
  assert_int_equal(num(report, "tasks"), 1);
  assert_int_equal(num(report, "failures"), 0);
  assert_int_equal(json_array_size(json_object_get(report, "added")), 0);
  assert_int_equal(json_array_size(json_object_get(report, "confirmed")), 0);
  json_decref(report);
  const struct step steps[] = {
    {"not finished", "POST", "/v1/skills/adapt", running, 409, "task_not_finished", "tasks"},
    {"unknown task", "POST", "/v1/skills/adapt",
     "{\"tasks\":[\"00000000-0000-4000-8000-000000000000\"]}", 404, "task_not_found", "tasks"},
    {"listed twice", "POST", "/v1/skills/adapt", both, 400, "invalid_field", "tasks[1]"},
    {"not a uuid", "POST", "/v1/skills/adapt", "{\"tasks\":[\"abc\"]}", 400, "invalid_field",
     "tasks[0]"},
    {"empty", "POST", "/v1/skills/adapt", "{\"tasks\":[]}", 400, "invalid_field", "tasks"},
    {"not a list", "POST", "/v1/skills/adapt", "{\"tasks\":\"x\"}", 400, "invalid_field", "tasks"},
    {"missing", "POST", "/v1/skills/adapt", "{}", 400, "missing_field", "tasks"},
    {"unknown key", "POST", "/v1/skills/adapt", "{\"tasks\":[],\"all\":true}", 400,
     "unknown_field", "all"},
    {"not json", "POST", "/v1/skills/adapt", "tasks", 400, "bad_json", NULL},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);
  json_decref(queued);
  json_decref(done);
}

static void test_skills_auth(void **state) {
  struct server *server = *state;
  static const struct {
    const char *method, *path, *body;
  } writes[] = {
    {"POST", "/v1/skills", "{\"rule\":\"You cannot x.\"}"},
    {"PATCH", "/v1/skills/1", "{\"score\":2}"},
    {"DELETE", "/v1/skills/1", NULL},
    {"POST", "/v1/skills/import", "{\"version\":1,\"skills\":[]}"},
    {"POST", "/v1/skills/adapt", "{\"tasks\":[]}"},
  };
  static const char *const wrong[] = {"Authorization: Bearer nope", NULL};
  for (size_t i = 0; i < sizeof writes / sizeof *writes; i++) {
    struct step s401 = {"no token", writes[i].method, writes[i].path, writes[i].body, 401,
                        "unauthorized", FIELD_NULL};
    struct step s403 = {"wrong token", writes[i].method, writes[i].path, writes[i].body, 403,
                        "forbidden", FIELD_NULL};
    char why[256];
    struct http_response *r = http_send(server, writes[i].method, writes[i].path,
                                        writes[i].body, NULL);
    if (!matches(r, &s401, why, sizeof why))
      fail_msg("%s %s without a token: %s", writes[i].method, writes[i].path, why);
    http_response_free(r);
    r = http_send(server, writes[i].method, writes[i].path, writes[i].body, wrong);
    if (!matches(r, &s403, why, sizeof why))
      fail_msg("%s %s with a wrong token: %s", writes[i].method, writes[i].path, why);
    http_response_free(r);
  }
  static const char *const right[] = {AUTH, NULL};
  struct http_response *r = http_send(server, "POST", "/v1/skills", "{\"rule\":\"You cannot x.\"}",
                                      right);
  assert_int_equal(r->status, 201);
  http_response_free(r);
  json_t *list = call(server, "GET", "/v1/skills", NULL, 200); /* reads are open */
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  json_decref(list);
}

/* Runs `opforge skills a1 a2 a3 --server URL` in this process; *ret_out is its stdout. */
static int run_cli(struct server *server, char **ret_out, const char *a1, const char *a2,
                   const char *a3) {
  char *argv[8] = {"skills"};
  int argc = 1;
  const char *args[] = {a1, a2, a3};
  for (size_t i = 0; i < 3 && args[i]; i++)
    argv[argc++] = (char *)args[i];
  argv[argc++] = "--server";
  argv[argc++] = (char *)server_url(server);
  char path[] = "/tmp/opforge-cli-out-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stdout);
  int saved = dup(1);
  assert_true(saved >= 0 && dup2(fd, 1) == 1);
  int rc = cli_skills_main(argc, argv);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  off_t size = lseek(fd, 0, SEEK_END);
  char *out = calloc(1, (size_t)size + 1);
  assert_non_null(out);
  assert_int_equal(pread(fd, out, (size_t)size, 0), size);
  close(fd);
  unlink(path);
  *ret_out = out;
  return rc;
}

static void test_skills_cli(void **state) {
  struct server *server = *state;
  unsetenv("OPFORGE_TOKEN");
  unsetenv("OPFORGE_TOKEN_FILE");
  char *out = NULL;
  assert_int_equal(run_cli(server, &out, "list", NULL, NULL), 0);
  assert_non_null(strstr(out, "no skill rules"));
  free(out);
  json_decref(call(server, "POST", "/v1/skills",
                   "{\"rule\":\"" RULE_A "\",\"family\":\"softmax\",\"score\":3,\"constraint\":"
                   "{\"knob\":\"VEC\",\"op\":\"eq\",\"value\":4}}", 201));
  json_decref(call(server, "POST", "/v1/skills", "{\"rule\":\"" RULE_B "\",\"family\":\"gemm\"}",
                   201));
  assert_int_equal(run_cli(server, &out, "list", NULL, NULL), 0);
  assert_non_null(strstr(out, RULE_A " [constraint]"));
  assert_non_null(strstr(out, RULE_B));
  free(out);
  assert_int_equal(run_cli(server, &out, "list", "--family", "norm"), 0);
  assert_non_null(strstr(out, "no skill rules"));
  free(out);
  char file[] = "/tmp/opforge-skills-export-XXXXXX";
  int fd = mkstemp(file);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(run_cli(server, &out, "export", "-o", file), 0);
  free(out);
  json_error_t jerr;
  json_t *doc = json_load_file(file, 0, &jerr);
  assert_non_null(doc);
  assert_int_equal(json_array_size(json_object_get(doc, "skills")), 2);
  /* Import a changed file; the server then serves the change. */
  json_array_remove(json_object_get(doc, "skills"), 1);
  assert_int_equal(json_dump_file(doc, file, 0), 0);
  assert_int_equal(run_cli(server, &out, "import", file, NULL), 0);
  assert_non_null(strstr(out, "imported: 1 skill rules, 0 examples"));
  free(out);
  json_t *list = call(server, "GET", "/v1/skills", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  json_decref(list);
  /* A refused import exits 1; usage errors 2. */
  json_object_set_new(doc, "version", json_integer(3));
  assert_int_equal(json_dump_file(doc, file, 0), 0);
  assert_int_equal(run_cli(server, &out, "import", file, NULL), 1);
  free(out);
  assert_int_equal(run_cli(server, &out, "import", NULL, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "import", "/nonexistent/x.json", NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "frobnicate", NULL, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "list", "-o", file), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "export", "--family", "norm"), 2);
  free(out);
  unlink(file);
  json_decref(doc);
}

#define WITH(server_setup, test) \
  cmocka_unit_test_setup_teardown(test, server_setup, teardown_server)

size_t skills_api_tests(const struct CMUnitTest **ret_tests) {
  static const struct CMUnitTest tests[] = {
    WITH(setup_server, test_skills_crud),
    WITH(setup_server, test_skills_export_import),
    WITH(setup_server, test_skills_adapt),
    WITH(setup_auth_server, test_skills_auth),
    WITH(setup_server, test_skills_cli),
  };
  *ret_tests = tests;
  return sizeof tests / sizeof *tests;
}
