/* API tests of GET /v1/tasks/{id}/best and `opforge best`: the refusals on a fresh task,
 * then both formats (and pure=true, which a single kernel always satisfies) for a task
 * whose store was seeded (before the server started) with a profile and a committed
 * correct step, as the loop would have left it. The store keeps a candidate's source,
 * options and plan only, so a best program (and its 409 not_pure) cannot be seeded here:
 * tests/unit/test_export_kernelbench.c covers the program export and its library-step
 * count. */
#include "tests/api/test_best_api.h"

#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/best.h"
#include "handlers/export_kernelbench.h"
#include "handlers/submission.h"
#include "store/steps.h"
#include "store/store.h"
#include "store/tasks.h"
#include "tests/api/harness.h"

#define TASK_ID "6a1f0c3e-8b2d-4f5a-9c7e-1d2b3a4c5e6f"
#define CANDIDATE_ID "2c9e7b1a-5d3f-4e8b-a6c4-0f1e2d3c4b5a"
/* A second task whose best's plan names a tensor the profile lacks: no file can be made. */
#define UNEXPORTABLE_ID "7b2e1d4f-9c3a-4e6b-8d5f-2a1b0c9d8e7f"
#define UNEXPORTABLE_CANDIDATE "4d8a2f6c-1e3b-4a7d-9f5e-6c0b1a2d3e4f"

static const char REFERENCE[] =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "class Model(nn.Module):\n"
    "    def forward(self, x):\n"
    "        return torch.relu(x)\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.randn(16, 16)]\n"
    "\n"
    "def get_init_inputs():\n"
    "    return []\n";

static const char PROFILE[] =
    "{\"name\":\"relu\",\"device\":\"cuda\","
    " \"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[16,16],\"numel\":256,"
    "             \"bytes\":1024}],"
    " \"scalar_inputs\":[],\"params\":[],"
    " \"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\",\"shape\":[16,16],\"numel\":256,"
    "              \"bytes\":1024}],"
    " \"graph\":null,\"graph_source\":null,\"eager_ms\":0.004}";

static const char SOURCE[] =
    "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
    "relu(const float* x, float* y, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = fmaxf(x[i], 0.0f);\n"
    "}\n";

static const char PLAN[] =
    "{\"launches\":[{\"kernel\":\"relu\",\"grid\":[1,1,1],\"block\":[256,1,1],\"shared_bytes\":0,"
    "\"args\":[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i64\":256}]}]}";

static const char PLAN_UNKNOWN_TENSOR[] =
    "{\"launches\":[{\"kernel\":\"relu\",\"grid\":[1,1,1],\"block\":[256,1,1],\"shared_bytes\":0,"
    "\"args\":[{\"tensor\":\"input:9\"},{\"tensor\":\"output:0\"},{\"i64\":256}]}]}";

/* ---------------------------------------------------------------- helpers */

static json_t *load(const char *text) {
  json_t *v = json_loads(text, 0, NULL);
  assert_non_null(v);
  return v;
}

/* GETs path, checks the status, and returns the response (caller frees). */
static struct http_response *get(struct server *server, const char *path, long status) {
  struct http_response *r = http_get(server, path);
  if (r->status != status)
    print_error("GET %s: want %ld, got %ld: %.400s\n", path, status, r->status, r->body);
  assert_int_equal(r->status, status);
  return r;
}

/* GETs path and checks the error's status, code and field (NULL: JSON null). */
static void expect_error(struct server *server, const char *path, long status,
                         const char *code, const char *field) {
  struct http_response *r = get(server, path, status);
  json_t *doc = http_json(r);
  json_t *err = json_object_get(doc, "error");
  assert_string_equal(json_string_value(json_object_get(err, "code")), code);
  if (field)
    assert_string_equal(json_string_value(json_object_get(err, "field")), field);
  else
    assert_true(json_is_null(json_object_get(err, "field")));
  json_decref(doc);
  http_response_free(r);
}

/* Runs `opforge best` in-process with the NULL-terminated arguments after "best". */
static int run_cli(const char *const *args) {
  char *argv[16];
  int argc = 0;
  argv[argc++] = (char *)"best";
  for (size_t i = 0; args[i] && argc < 15; i++)
    argv[argc++] = (char *)args[i];
  argv[argc] = NULL;
  fflush(stdout);
  return cli_best_main(argc, argv);
}

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long len = ftell(f);
  assert_true(len >= 0);
  rewind(f);
  char *data = malloc((size_t)len + 1);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, (size_t)len, f), (size_t)len);
  data[len] = '\0';
  fclose(f);
  return data;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* ---------------------------------------------------------------- fixtures */

struct seeded {
  char dir[PATH_MAX];
  struct server *server;
};

/* Writes a finished task, its profile and one committed correct step (candidate_id with
 * plan) into the store s. */
static void seed_task(struct store *s, const char *task_id, const char *candidate_id,
                      const char *plan) {
  json_t *body = json_pack("{s:s, s:s}", "name", "relu", "reference", REFERENCE), *task = NULL;
  struct submission sub = {0};
  struct validation_error verr;
  assert_int_equal(submission_parse(body, &sub, &verr), 0);
  assert_int_equal(store_task_insert(s, task_id, sub.name, sub.options, sub.reference, &task),
                   STORE_OK);
  json_t *profile = load(PROFILE), *baselines = load("{\"eager_ms\":0.004}");
  assert_int_equal(store_task_profile_set(s, task_id, profile, baselines), STORE_OK);
  json_t *candidate = json_pack(
      "{s:s, s:n, s:s, s:[s], s:o, s:{s:b}, s:s, s:n, s:s}", "id", candidate_id, "parent_id",
      "source", SOURCE, "options", "-DBLOCK=256", "plan", load(plan), "result", "correct", 1,
      "direction", "vectorize", "strategy", "step_kind", "small");
  json_t *progress = json_pack("{s:i, s:i, s:f, s:f, s:i, s:i, s:s}", "step", 1, "budget_steps",
                               20, "best_speedup", 1.5, "best_ms", 0.0025, "correct", 1,
                               "candidates", 1, "best_candidate", candidate_id);
  json_t *rows = json_array(), *event = json_object();
  struct step_commit c = {.task_id = task_id, .step = 1, .candidate = candidate,
                          .tree_rows = rows, .progress = progress, .event_data = event};
  assert_int_equal(store_step_commit(s, &c), STORE_OK);
  assert_int_equal(store_task_finish(s, task_id, "succeeded", NULL, NULL), STORE_OK);
  json_decref(event);
  json_decref(rows);
  json_decref(progress);
  json_decref(candidate);
  json_decref(baselines);
  json_decref(profile);
  json_decref(task);
  submission_clear(&sub);
  json_decref(body);
}

/* Writes the two tasks into DIR's store. */
static void seed_store(const char *dir) {
  struct store *s = NULL;
  char err[256];
  const char *pg = harness_store_for(dir);
  if (pg)
    assert_int_equal(store_open_pg(pg, NULL, &s, err, sizeof err), STORE_OK);
  else
    assert_int_equal(store_open(dir, &s, err, sizeof err), STORE_OK);
  seed_task(s, TASK_ID, CANDIDATE_ID, PLAN);
  seed_task(s, UNEXPORTABLE_ID, UNEXPORTABLE_CANDIDATE, PLAN_UNKNOWN_TENSOR);
  store_close(s);
}

static int start_seeded(void **state) {
  struct seeded *sd = calloc(1, sizeof *sd);
  if (!sd)
    return -1;
  snprintf(sd->dir, sizeof sd->dir, "/tmp/opforge-best-XXXXXX");
  if (!mkdtemp(sd->dir)) {
    free(sd);
    return -1;
  }
  *state = sd;
  seed_store(sd->dir);
  /* The later --data wins over the harness's own. */
  static const char *extra[4];
  extra[0] = "--data";
  extra[1] = sd->dir;
  extra[2] = NULL;
  struct server_opts opts = {.extra_args = extra};
  return server_start(&opts, &sd->server);
}

static int stop_seeded(void **state) {
  struct seeded *sd = *state;
  if (!sd)
    return 0;
  int rc = server_stop(sd->server) == 0 ? 0 : -1;
  nftw(sd->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(sd);
  return rc;
}

static int start_plain(void **state) {
  struct server_opts opts = {0};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int stop_plain(void **state) { return server_stop(*state) == 0 ? 0 : -1; }

/* ---------------------------------------------------------------- tests */

static void test_best_refusals(void **state) {
  struct server *server = *state;
  char body[1024], path[160];
  json_t *ref = json_string(REFERENCE);
  char *ref_text = json_dumps(ref, JSON_ENCODE_ANY);
  snprintf(body, sizeof body, "{\"reference\":%s}", ref_text);
  free(ref_text);
  json_decref(ref);
  struct http_response *r = http_send(server, "POST", "/v1/tasks", body, NULL);
  assert_int_equal(r->status, 202);
  json_t *task = http_json(r);
  http_response_free(r);
  const char *id = json_string_value(json_object_get(task, "id"));
  snprintf(path, sizeof path, "/v1/tasks/%s/best", id);
  expect_error(server, path, 409, "no_correct_candidate", NULL);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=kernelbench", id);
  expect_error(server, path, 409, "no_correct_candidate", NULL);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=pdf", id);
  expect_error(server, path, 400, "invalid_query", "format");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=", id);
  expect_error(server, path, 400, "invalid_query", "format");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?pure=yes", id);
  expect_error(server, path, 400, "invalid_query", "pure");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?format=kernelbench&pure=", id);
  expect_error(server, path, 400, "invalid_query", "pure");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?pure=true", id);
  expect_error(server, path, 409, "no_correct_candidate", NULL);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=1", id);
  expect_error(server, path, 400, "invalid_query", "generated");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=true", id);
  expect_error(server, path, 409, "no_correct_candidate", NULL);
  snprintf(path, sizeof path, "/v1/tasks/%s/best?elementwise=yes", id);
  expect_error(server, path, 400, "invalid_query", "elementwise");
  snprintf(path, sizeof path, "/v1/tasks/%s/best?generated=true&elementwise=true", id);
  expect_error(server, path, 409, "no_correct_candidate", NULL);
  expect_error(server, "/v1/tasks/" TASK_ID "/best", 404, "task_not_found", NULL);
  expect_error(server, "/v1/tasks/not-a-uuid/best?format=cuda", 400, "invalid_id", "id");
  /* The CLI: refused by the server (1), bad usage (2). */
  const char *refused[] = {id, "--server", server_url(server), NULL};
  assert_int_equal(run_cli(refused), 1);
  const char *bad_format[] = {id, "--format", "pdf", "--server", server_url(server), NULL};
  assert_int_equal(run_cli(bad_format), 2);
  const char *no_id[] = {"--server", server_url(server), NULL};
  assert_int_equal(run_cli(no_id), 2);
  json_decref(task);
}

/* The JSON answer of format=cuda, checked field by field against what was seeded. */
static json_t *check_cuda(struct server *server, const char *path) {
  struct http_response *r = get(server, path, 200);
  json_t *best = http_json(r);
  http_response_free(r);
  assert_int_equal(json_object_size(best), 7);
  assert_string_equal(json_string_value(json_object_get(best, "task_id")), TASK_ID);
  assert_string_equal(json_string_value(json_object_get(best, "candidate_id")), CANDIDATE_ID);
  assert_float_equal(json_number_value(json_object_get(best, "speedup")), 1.5, 0);
  assert_float_equal(json_number_value(json_object_get(best, "time_ms")), 0.0025, 0);
  assert_string_equal(json_string_value(json_object_get(best, "source")), SOURCE);
  json_t *options = load("[\"-DBLOCK=256\"]"), *plan = load(PLAN);
  assert_true(json_equal(json_object_get(best, "options"), options));
  assert_true(json_equal(json_object_get(best, "plan"), plan));
  json_decref(plan);
  json_decref(options);
  return best;
}

/* What the kernelbench answer must be: the export of the stored candidate (caller frees). */
static char *expected_export(struct server *server) {
  struct http_response *r = get(server, "/v1/candidates/" CANDIDATE_ID, 200);
  json_t *candidate = http_json(r), *profile = load(PROFILE);
  http_response_free(r);
  char *text = NULL, err[256] = "";
  assert_int_equal(export_kernelbench(profile, candidate, &text, err, sizeof err), 0);
  json_decref(profile);
  json_decref(candidate);
  return text;
}

static void test_best_exports(void **state) {
  struct seeded *sd = *state;
  struct server *server = sd->server;
  json_t *best = check_cuda(server, "/v1/tasks/" TASK_ID "/best");
  json_t *again = check_cuda(server, "/v1/tasks/" TASK_ID "/best?format=cuda");
  assert_true(json_equal(best, again));
  json_decref(again);
  /* A single kernel is generated code only: pure=true changes nothing. */
  again = check_cuda(server, "/v1/tasks/" TASK_ID "/best?pure=true");
  assert_true(json_equal(best, again));
  json_decref(again);
  json_decref(check_cuda(server, "/v1/tasks/" TASK_ID "/best?format=cuda&pure=false"));
  /* Upper-case ids are folded, as everywhere. */
  json_decref(check_cuda(server, "/v1/tasks/6A1F0C3E-8B2D-4F5A-9C7E-1D2B3A4C5E6F/best"));

  struct http_response *r = get(server, "/v1/tasks/" TASK_ID "/best?format=kernelbench", 200);
  assert_string_equal(http_header(r, "Content-Type"), "text/x-python; charset=utf-8");
  assert_string_equal(http_header(r, "Content-Disposition"),
                      "attachment; filename=\"relu_opforge.py\"");
  char *want = expected_export(server);
  assert_string_equal(r->body, want);
  /* The reference is not repeated: the file is exec'd after it. */
  assert_null(strstr(r->body, "class Model("));
  assert_null(strstr(r->body, "def get_inputs("));
  assert_non_null(strstr(r->body, "if \"Model\" not in globals():\n"));
  assert_non_null(strstr(r->body, "#define BLOCK 256\n"));
  assert_non_null(strstr(r->body, "dim3(1, 1, 1), dim3(256, 1, 1), ofg_args, 0, ofg_stream);"));

  struct http_response *pure =
      get(server, "/v1/tasks/" TASK_ID "/best?format=kernelbench&pure=true", 200);
  assert_string_equal(pure->body, want);
  http_response_free(pure);
  /* The best already runs generated code: generated=true changes nothing either. */
  struct http_response *generated =
      get(server, "/v1/tasks/" TASK_ID "/best?format=kernelbench&generated=true", 200);
  assert_string_equal(generated->body, want);
  http_response_free(generated);
  /* Its trial passed element-wise: elementwise=true changes nothing. */
  generated = get(server, "/v1/tasks/" TASK_ID "/best?format=kernelbench&elementwise=true", 200);
  assert_string_equal(generated->body, want);
  http_response_free(generated);

  /* The CLI writes the same bytes, and the same JSON. */
  char out[PATH_MAX + 16];
  snprintf(out, sizeof out, "%s/export.py", sd->dir);
  const char *kb[] = {TASK_ID, "--format", "kernelbench", "-o", out, "--server",
                      server_url(server), NULL};
  assert_int_equal(run_cli(kb), 0);
  char *written = read_all(out);
  assert_string_equal(written, r->body);
  free(written);
  const char *kb_generated[] = {TASK_ID, "--format", "kernelbench", "--generated",
                                "--elementwise", "-o", out, "--server", server_url(server),
                                NULL};
  assert_int_equal(run_cli(kb_generated), 0);
  written = read_all(out);
  assert_string_equal(written, r->body);
  free(written);
  snprintf(out, sizeof out, "%s/best.json", sd->dir);
  const char *cuda[] = {TASK_ID, "--output", out, "--server", server_url(server), NULL};
  assert_int_equal(run_cli(cuda), 0);
  written = read_all(out);
  json_t *from_cli = load(written);
  assert_true(json_equal(from_cli, best));
  assert_int_equal(written[strlen(written) - 1], '\n');
  json_decref(from_cli);
  free(written);
  free(want);
  http_response_free(r);
  json_decref(best);
}

/* A best whose KernelBench file cannot be made from the task's records (here a plan
 * naming a tensor the profile lacks) is 409 not_exportable with the reason, not 500;
 * as JSON it is still answered. */
static void test_best_not_exportable(void **state) {
  struct seeded *sd = *state;
  struct http_response *r =
      get(sd->server, "/v1/tasks/" UNEXPORTABLE_ID "/best?format=kernelbench", 409);
  static const char want[] =
      "{\"error\":{\"code\":\"not_exportable\",\"message\":\"the best candidate cannot be "
      "exported as a KernelBench file: launch 0 arg 0: unknown tensor 'input:9'\","
      "\"field\":\"format\"}}";
  if (strcmp(r->body, want) != 0)
    print_error("got %s\n", r->body);
  assert_string_equal(r->body, want);
  http_response_free(r);
  r = get(sd->server, "/v1/tasks/" UNEXPORTABLE_ID "/best", 200);
  http_response_free(r);
}

static const struct CMUnitTest tests[] = {
  cmocka_unit_test_setup_teardown(test_best_refusals, start_plain, stop_plain),
  cmocka_unit_test_setup_teardown(test_best_exports, start_seeded, stop_seeded),
  cmocka_unit_test_setup_teardown(test_best_not_exportable, start_seeded, stop_seeded),
};

size_t best_api_tests(const struct CMUnitTest **ret_tests) {
  *ret_tests = tests;
  return sizeof tests / sizeof tests[0];
}
