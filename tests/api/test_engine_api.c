/* API tests of GET /v1/memory/score (checked against an independent recomputation from the
 * exported memory), the candidate endpoints and GET /v1/devices. */
#include "tests/api/test_engine_api.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/api/harness.h"

/* Sends a request and checks its status; returns the JSON body (caller owns) or NULL. */
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

/* Checks a 4xx error's code and field. */
static void expect_error(struct server *server, const char *path, long status,
                         const char *code, const char *field) {
  json_t *doc = call(server, "GET", path, NULL, status);
  json_t *err = json_object_get(doc, "error");
  assert_string_equal(json_string_value(json_object_get(err, "code")), code);
  if (field)
    assert_string_equal(json_string_value(json_object_get(err, "field")), field);
  json_decref(doc);
}

static int start(void **state) {
  struct server_opts opts = {0};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int stop(void **state) { return server_stop(*state) == 0 ? 0 : -1; }

/* Sets stats on the exported memory so that every score term is non-trivial. */
static void plant_stats(json_t *doc) {
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(doc, "globals"), i, g) {
    if (i < 3)
      json_object_set_new(g, "stats", json_pack("{s:i, s:i, s:i, s:f, s:f}", "n", (int)(i + 2),
                                                "successes", 1, "improvements", 1, "reward_sum",
                                                0.25 * (double)(i + 1) - 0.2, "ema", 0.1));
  }
  json_t *e;
  json_array_foreach(json_object_get(doc, "edges"), i, e) {
    if (i < 4)
      json_object_set_new(e, "stats", json_pack("{s:f, s:f}", "n", 1.5 + (double)i, "reward_sum",
                                                0.3 - 0.2 * (double)i));
  }
}

static const json_t *find_by(const json_t *array, const char *key, const char *value) {
  size_t i;
  json_t *item;
  json_array_foreach(array, i, item) if (strcmp(json_string_value(json_object_get(item, key)),
                                                value) == 0) return item;
  return NULL;
}

static double num(const json_t *obj, const char *key) {
  return json_number_value(json_object_get(obj, key));
}

/* docs/architecture.md, "HTAM", written again here from the formulas, over the exported memory:
 * mu_b = (n_b m_b + k0 prior_b)/(n_b + k0); U(a->b) = (n_ab m_ab + k mu_b)/(n_ab + k);
 * alpha_i = e^{-lambda(i-1)} / sum_j e^{-lambda(j-1)}; s(b) = sum_i alpha_i U(p_i->b)
 * (mu_b without a prefix) + beta trigger(b) + c sqrt(ln(N+1)/(n_b+1)); pi = softmax(s/tau).
 * With only the family given, trigger(b) is 1 when b lists "family:<F>", else 0. */
static void recompute(const json_t *doc, const char *const *prefix, size_t np,
                      const char *family, const json_t *cfg, double *ret_s, size_t n) {
  double k0 = num(cfg, "k0"), k = num(cfg, "k"), lambda = num(cfg, "lambda");
  double beta = num(cfg, "beta"), c = num(cfg, "c"), N = 0, alpha[8], norm = 0;
  const json_t *globals = json_object_get(doc, "globals"), *edges = json_object_get(doc, "edges");
  for (size_t b = 0; b < n; b++)
    N += num(json_object_get(json_array_get(globals, b), "stats"), "n");
  for (size_t i = 0; i < np; i++)
    norm += alpha[i] = exp(-lambda * (double)i);
  char trig[64];
  snprintf(trig, sizeof trig, "family:%s", family);
  for (size_t b = 0; b < n; b++) {
    const json_t *g = json_array_get(globals, b), *st = json_object_get(g, "stats");
    double nb = num(st, "n"), sum = num(st, "reward_sum");
    double mu = (sum + k0 * num(g, "prior")) / (nb + k0), transition = np ? 0 : mu;
    for (size_t i = 0; i < np; i++) {
      double nab = 0, sab = 0;
      size_t e;
      json_t *edge;
      json_array_foreach(edges, e, edge) {
        if (strcmp(json_string_value(json_object_get(edge, "from")), prefix[i]) == 0 &&
            strcmp(json_string_value(json_object_get(edge, "to")),
                   json_string_value(json_object_get(g, "id"))) == 0) {
          nab = num(json_object_get(edge, "stats"), "n");
          sab = num(json_object_get(edge, "stats"), "reward_sum");
        }
      }
      transition += alpha[i] / norm * (sab + k * mu) / (nab + k);
    }
    double trigger = 0;
    size_t t;
    json_t *tv;
    json_array_foreach(json_object_get(g, "triggers"), t, tv) if (strcmp(json_string_value(tv),
                                                                         trig) == 0) trigger = 1;
    ret_s[b] = transition + beta * trigger + c * sqrt(log(N + 1) / (nb + 1));
  }
}

static void test_score_matches_recomputation(void **state) {
  struct server *server = *state;
  json_t *doc = call(server, "GET", "/v1/memory/export", NULL, 200);
  plant_stats(doc);
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(call(server, "POST", "/v1/memory/import", text, 200));
  free(text);
  json_decref(doc);
  doc = call(server, "GET", "/v1/memory/export", NULL, 200);
  const json_t *edges = json_object_get(doc, "edges");
  const char *p0 = json_string_value(json_object_get(json_array_get(edges, 0), "from"));
  const char *p1 = json_string_value(json_object_get(json_array_get(edges, 1), "from"));
  char path[256];
  snprintf(path, sizeof path, "/v1/memory/score?prefix=%s,%s&family=softmax", p0, p1);
  json_t *score = call(server, "GET", path, NULL, 200);
  const json_t *scores = json_object_get(score, "scores");
  size_t n = json_array_size(json_object_get(doc, "globals"));
  assert_int_equal(json_array_size(scores), n);
  double *want = calloc(n, sizeof *want), zmax = -INFINITY, z = 0;
  const char *prefix[2] = {p0, p1};
  recompute(doc, prefix, 2, "softmax", json_object_get(score, "config"), want, n);
  double tau = num(json_object_get(score, "config"), "tau");
  for (size_t b = 0; b < n; b++)
    zmax = fmax(zmax, want[b] / tau);
  for (size_t b = 0; b < n; b++)
    z += exp(want[b] / tau - zmax);
  for (size_t b = 0; b < n; b++) {
    const char *id = json_string_value(json_object_get(json_array_get(json_object_get(doc, "globals"), b), "id"));
    const json_t *got = find_by(scores, "direction", id);
    assert_non_null(got);
    assert_float_equal(num(got, "score"), want[b], 1e-9);
    assert_float_equal(num(got, "pi"), exp(want[b] / tau - zmax) / z, 1e-9);
    assert_int_equal(json_array_size(json_object_get(got, "terms")), 2);
  }
  free(want);
  json_decref(score);
  json_decref(doc);
}

static void test_score_rejects_bad_queries(void **state) {
  struct server *server = *state;
  expect_error(server, "/v1/memory/score?prefix=no_such_direction", 404, "memory_node_not_found",
               "prefix");
  expect_error(server, "/v1/memory/score?prefix=Bad-Id", 400, "invalid_query", "prefix");
  expect_error(server, "/v1/memory/score?prefix=fusion,,tiling", 400, "invalid_query", "prefix");
  expect_error(server, "/v1/memory/score?family=convolution", 400, "invalid_query", "family");
  expect_error(server, "/v1/memory/score?bound=disk", 400, "invalid_query", "bound");
  expect_error(server, "/v1/memory/score?failure=oops", 400, "invalid_query", "failure");
  json_t *plain = call(server, "GET", "/v1/memory/score", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(plain, "prefix")), 0);
  json_decref(plain);
}

static void test_candidates_and_devices(void **state) {
  struct server *server = *state;
  const char *source = "class Model(nn.Module):\\n  pass\\ndef get_inputs():\\n  return []\\n"
                       "def get_init_inputs():\\n  return []\\n";
  char body[512];
  snprintf(body, sizeof body, "{\"reference\":\"%s\"}", source);
  json_t *task = call(server, "POST", "/v1/tasks", body, 202);
  char path[128];
  snprintf(path, sizeof path, "/v1/tasks/%s/candidates",
           json_string_value(json_object_get(task, "id")));
  json_t *list = call(server, "GET", path, NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 0);
  assert_true(json_is_null(json_object_get(list, "next_cursor")));
  json_decref(list);
  char bad[160];
  snprintf(bad, sizeof bad, "%s?limit=0", path);
  expect_error(server, bad, 400, "invalid_query", "limit");
  snprintf(bad, sizeof bad, "%s?cursor=x", path);
  expect_error(server, bad, 400, "invalid_query", "cursor");
  json_decref(task);
  expect_error(server, "/v1/tasks/00000000-0000-4000-8000-000000000000/candidates", 404,
               "task_not_found", NULL);
  expect_error(server, "/v1/tasks/nope/candidates", 400, "invalid_id", "id");
  expect_error(server, "/v1/candidates/00000000-0000-4000-8000-000000000000", 404,
               "candidate_not_found", NULL);
  expect_error(server, "/v1/candidates/nope", 400, "invalid_id", "id");
  json_t *devices = call(server, "GET", "/v1/devices", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(devices, "devices")), 0);
  json_decref(devices);
}

static const struct CMUnitTest tests[] = {
  cmocka_unit_test_setup_teardown(test_score_matches_recomputation, start, stop),
  cmocka_unit_test_setup_teardown(test_score_rejects_bad_queries, start, stop),
  cmocka_unit_test_setup_teardown(test_candidates_and_devices, start, stop),
};

size_t engine_api_tests(const struct CMUnitTest **ret_tests) {
  *ret_tests = tests;
  return sizeof tests / sizeof tests[0];
}
