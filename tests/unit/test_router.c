/* Unit tests of routing (router.c, routes.c), bearer tokens (auth.c) and ids.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/handlers.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/origin.h"
#include "base/ids.h"
#include "server/router.h"

/* Frees the parameters router_match copied into req. */
static void release_params(struct request *req) {
  for (unsigned i = 0; i < req->n_params; i++)
    free(req->params[i]);
  memset(req->params, 0, sizeof req->params);
  req->n_params = 0;
}

/* Matches against the real table; asserts FOUND with the given pattern and handler. */
static void expect_found(const char *method, const char *path, const char *pattern,
                         handler_fn handler, struct request *req) {
  const struct route *r = NULL;
  char allow[64] = "sentinel";
  memset(req, 0, sizeof *req);
  enum route_match m =
      router_match(opforge_routes, method, path, req, &r, allow, sizeof allow);
  if (m != ROUTE_FOUND)
    fail_msg("%s %s: expected ROUTE_FOUND, got %d", method, path, (int)m);
  assert_non_null(r);
  assert_string_equal(r->method, method);
  assert_string_equal(r->pattern, pattern);
  assert_true(r->handler == handler);
}

/* Matches against table; asserts the result is want and that nothing leaked into req. */
static void expect_miss(const struct route *table, const char *method, const char *path,
                        enum route_match want, const char *want_allow) {
  struct request req;
  memset(&req, 0, sizeof req);
  const struct route *r = NULL;
  char allow[64];
  memset(allow, 'x', sizeof allow);
  enum route_match m = router_match(table, method, path, &req, &r, allow, sizeof allow);
  if (m != want)
    fail_msg("%s '%s': expected %d, got %d", method, path, (int)want, (int)m);
  assert_null(r);
  assert_int_equal(req.n_params, 0);
  assert_null(req.params[0]);
  assert_string_equal(allow, want_allow);
}

static void test_exact_routes(void **state) {
  (void)state;
  struct request req;
  expect_found("POST", "/v1/tasks", "/v1/tasks", handle_tasks_create, &req);
  assert_int_equal(req.n_params, 0);
  expect_found("GET", "/v1/tasks", "/v1/tasks", handle_tasks_list, &req);
  assert_int_equal(req.n_params, 0);
  expect_found("GET", "/healthz", "/healthz", handle_healthz, &req);
  expect_found("GET", "/readyz", "/readyz", handle_readyz, &req);
  expect_found("GET", "/metrics", "/metrics", handle_metrics, &req);
  expect_found("GET", "/openapi.json", "/openapi.json", handle_openapi, &req);
  assert_int_equal(req.n_params, 0);
}

static void test_params(void **state) {
  (void)state;
  struct request req;
  expect_found("POST", "/v1/tasks/abc/cancel", "/v1/tasks/{id}/cancel", handle_task_cancel,
               &req);
  assert_int_equal(req.n_params, 1);
  assert_string_equal(req.params[0], "abc");
  assert_null(req.params[1]);
  release_params(&req);

  const char *id = "0f8fad5b-d9cb-469f-a165-70867728950e";
  expect_found("GET", "/v1/tasks/0f8fad5b-d9cb-469f-a165-70867728950e", "/v1/tasks/{id}",
               handle_task_get, &req);
  assert_int_equal(req.n_params, 1);
  assert_string_equal(req.params[0], id);
  release_params(&req);

  expect_found("DELETE", "/v1/tasks/x", "/v1/tasks/{id}", handle_task_delete, &req);
  assert_string_equal(req.params[0], "x");
  release_params(&req);

  expect_found("GET", "/v1/tasks/t-1/events", "/v1/tasks/{id}/events", handle_task_events,
               &req);
  assert_int_equal(req.n_params, 1);
  assert_string_equal(req.params[0], "t-1");
  release_params(&req);
}

static void test_not_found(void **state) {
  (void)state;
  expect_miss(opforge_routes, "GET", "/v1/tasks/", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/healthz/", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "POST", "/v1/tasks/abc/cancel/", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "POST", "/v1/tasks//cancel", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/v2/tasks", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/v1/taskss", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/v1/task", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/v1", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "v1/tasks", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "//v1/tasks", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/v1/tasks/abc/nothing", ROUTE_NOT_FOUND, "");
  expect_miss(opforge_routes, "GET", "/V1/TASKS", ROUTE_NOT_FOUND, "");
}

static void test_method_not_allowed(void **state) {
  (void)state;
  expect_miss(opforge_routes, "PUT", "/v1/tasks/abc", ROUTE_METHOD_NOT_ALLOWED,
              "GET, DELETE, HEAD, OPTIONS");
  expect_miss(opforge_routes, "POST", "/v1/tasks/abc", ROUTE_METHOD_NOT_ALLOWED,
              "GET, DELETE, HEAD, OPTIONS");
  expect_miss(opforge_routes, "DELETE", "/v1/tasks", ROUTE_METHOD_NOT_ALLOWED,
              "POST, GET, HEAD, OPTIONS");
  expect_miss(opforge_routes, "GET", "/v1/tasks/abc/cancel", ROUTE_METHOD_NOT_ALLOWED,
              "POST, OPTIONS");
  expect_miss(opforge_routes, "POST", "/healthz", ROUTE_METHOD_NOT_ALLOWED,
              "GET, HEAD, OPTIONS");
  expect_miss(opforge_routes, "HEAD", "/v1/tasks/abc/cancel", ROUTE_METHOD_NOT_ALLOWED,
              "POST, OPTIONS");
  /* Methods are case-sensitive (RFC 9110). */
  expect_miss(opforge_routes, "get", "/healthz", ROUTE_METHOD_NOT_ALLOWED,
              "GET, HEAD, OPTIONS");
  /* A literal path is that resource alone, not an {id} of its sibling pattern. */
  expect_miss(opforge_routes, "PATCH", "/v1/skills/adapt", ROUTE_METHOD_NOT_ALLOWED,
              "POST, OPTIONS");
  expect_miss(opforge_routes, "DELETE", "/v1/skills/export", ROUTE_METHOD_NOT_ALLOWED,
              "GET, HEAD, OPTIONS");
  expect_miss(opforge_routes, "GET", "/v1/skills/import", ROUTE_METHOD_NOT_ALLOWED,
              "POST, OPTIONS");
}

/* HEAD is answered by the GET route; OPTIONS on a known path lists its methods. */
static void test_head_and_options(void **state) {
  (void)state;
  struct request req;
  memset(&req, 0, sizeof req);
  const struct route *r = NULL;
  char allow[64];
  assert_int_equal(router_match(opforge_routes, "HEAD", "/v1/tasks/abc/events", &req, &r,
                                allow, sizeof allow),
                   ROUTE_FOUND);
  assert_string_equal(r->method, "GET");
  assert_true(r->handler == handle_task_events);
  assert_string_equal(req.params[0], "abc");
  release_params(&req);
  expect_miss(opforge_routes, "OPTIONS", "/v1/tasks/abc", ROUTE_OPTIONS,
              "GET, DELETE, HEAD, OPTIONS");
  expect_miss(opforge_routes, "OPTIONS", "/v1/memory/reset", ROUTE_OPTIONS, "POST, OPTIONS");
  expect_miss(opforge_routes, "OPTIONS", "/nothing", ROUTE_NOT_FOUND, "");
}

static enum MHD_Result dummy_handler(struct request *req) {
  (void)req;
  return MHD_YES;
}

static const struct route test_routes[] = {
  {.method = "GET", .pattern = "/a/{x}/{y}/{z}", .handler = dummy_handler},
  {.method = "GET", .pattern = "/b/{w}/{x}/{y}/{z}", .handler = dummy_handler},
  {.method = "GET", .pattern = "/c", .handler = dummy_handler},
  {.method = "GET", .pattern = "/c", .handler = dummy_handler},
  {.method = "PATCH", .pattern = "/c", .handler = dummy_handler},
  {.method = NULL},
};

static void test_param_limits(void **state) {
  (void)state;
  struct request req;
  memset(&req, 0, sizeof req);
  const struct route *r = NULL;
  char allow[64];
  assert_int_equal(router_match(test_routes, "GET", "/a/1/22/333", &req, &r, allow,
                                sizeof allow),
                   ROUTE_FOUND);
  assert_ptr_equal(r, &test_routes[0]);
  assert_int_equal(req.n_params, 3);
  assert_string_equal(req.params[0], "1");
  assert_string_equal(req.params[1], "22");
  assert_string_equal(req.params[2], "333");
  release_params(&req);

  /* More parameters than REQUEST_MAX_PARAMS: not found, nothing leaked. */
  expect_miss(test_routes, "GET", "/b/1/2/3/4", ROUTE_NOT_FOUND, "");
  expect_miss(test_routes, "GET", "/a/1//3", ROUTE_NOT_FOUND, "");
  /* A method listed twice for one path appears once in Allow. */
  expect_miss(test_routes, "PUT", "/c", ROUTE_METHOD_NOT_ALLOWED,
              "GET, PATCH, HEAD, OPTIONS");
}

static void test_allow_truncation(void **state) {
  (void)state;
  struct request req;
  memset(&req, 0, sizeof req);
  const struct route *r = NULL;
  /* Room for "GET" only: the list is cut at a whole method, never mid-name. */
  char allow[8];
  assert_int_equal(router_match(opforge_routes, "PUT", "/v1/tasks/abc", &req, &r, allow,
                                sizeof allow),
                   ROUTE_METHOD_NOT_ALLOWED);
  assert_string_equal(allow, "GET");
}

/* Returns a config with the two test tokens. */
static void two_tokens(struct opforge_config *cfg) {
  config_defaults(cfg);
  snprintf(cfg->tokens[0], sizeof cfg->tokens[0], "%s", "alphaToken-0123456789");
  snprintf(cfg->tokens[1], sizeof cfg->tokens[1], "%s", "bravoToken-9876543210xyz");
  cfg->n_tokens = 2;
}

static void test_auth_check(void **state) {
  (void)state;
  struct opforge_config open_cfg;
  config_defaults(&open_cfg);
  assert_int_equal(auth_check(&open_cfg, NULL), AUTH_OK);
  assert_int_equal(auth_check(&open_cfg, "Bearer anything"), AUTH_OK);
  assert_int_equal(auth_check(&open_cfg, "Basic x"), AUTH_OK);

  struct opforge_config cfg;
  two_tokens(&cfg);
  assert_int_equal(auth_check(&cfg, NULL), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, ""), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, "Basic x"), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, "Basic alphaToken-0123456789"), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, "Bearer "), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, "Bearer    "), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, "Bearer"), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, "Bearerx alphaToken-0123456789"), AUTH_MISSING);
  assert_int_equal(auth_check(&cfg, "alphaToken-0123456789"), AUTH_MISSING);

  assert_int_equal(auth_check(&cfg, "Bearer wrong"), AUTH_WRONG);
  assert_int_equal(auth_check(&cfg, "Bearer alphaToken-012345678"), AUTH_WRONG);
  assert_int_equal(auth_check(&cfg, "Bearer alphaToken-01234567890"), AUTH_WRONG);
  assert_int_equal(auth_check(&cfg, "Bearer ALPHATOKEN-0123456789"), AUTH_WRONG);
  assert_int_equal(auth_check(&cfg, "Bearer bravoToken-9876543210xy"), AUTH_WRONG);

  assert_int_equal(auth_check(&cfg, "Bearer alphaToken-0123456789"), AUTH_OK);
  assert_int_equal(auth_check(&cfg, "Bearer bravoToken-9876543210xyz"), AUTH_OK);
  /* The scheme is case-insensitive (RFC 9110 section 11.1). */
  assert_int_equal(auth_check(&cfg, "bearer alphaToken-0123456789"), AUTH_OK);
  assert_int_equal(auth_check(&cfg, "BEARER bravoToken-9876543210xyz"), AUTH_OK);
}

static void test_auth_token_equal(void **state) {
  (void)state;
  assert_true(auth_token_equal("abcdefghijklmnop", "abcdefghijklmnop"));
  assert_false(auth_token_equal("abcdefghijklmno", "abcdefghijklmnop"));   /* prefix */
  assert_false(auth_token_equal("abcdefghijklmnopq", "abcdefghijklmnop")); /* longer */
  assert_false(auth_token_equal("bcdefghijklmnop", "abcdefghijklmnop"));   /* suffix */
  assert_false(auth_token_equal("Xbcdefghijklmnop", "abcdefghijklmnop"));  /* first */
  assert_false(auth_token_equal("abcdefghijklmnoX", "abcdefghijklmnop"));  /* last */
  assert_false(auth_token_equal("", "abcdefghijklmnop"));
  assert_false(auth_token_equal("abcdefghijklmnop", ""));

  /* Tokens go up to 127 characters; a longer candidate with the same start never matches. */
  char tok[128], cand[300];
  memset(tok, 't', 127);
  tok[127] = '\0';
  assert_true(auth_token_equal(tok, tok));
  memset(cand, 't', sizeof cand - 1);
  cand[sizeof cand - 1] = '\0';
  assert_false(auth_token_equal(cand, tok));
  cand[128] = '\0';
  assert_false(auth_token_equal(cand, tok));
  cand[127] = '\0';
  assert_true(auth_token_equal(cand, tok));
  cand[126] = '\0';
  assert_false(auth_token_equal(cand, tok));
}

static void test_auth_is_write(void **state) {
  (void)state;
  assert_true(auth_is_write("POST"));
  assert_true(auth_is_write("PUT"));
  assert_true(auth_is_write("PATCH"));
  assert_true(auth_is_write("DELETE"));
  assert_false(auth_is_write("GET"));
  assert_false(auth_is_write("HEAD"));
  assert_false(auth_is_write("OPTIONS"));
}

static void test_id_valid(void **state) {
  (void)state;
  assert_true(id_valid("0f8fad5b-d9cb-469f-a165-70867728950e"));
  assert_true(id_valid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
  assert_true(id_valid("00000000-0000-0000-0000-000000000000"));
  assert_false(id_valid(NULL));
  assert_false(id_valid(""));
  assert_false(id_valid("0f8fad5b-d9cb-469f-a165-70867728950"));    /* 35 */
  assert_false(id_valid("0f8fad5b-d9cb-469f-a165-70867728950ee"));  /* 37 */
  assert_false(id_valid("0f8fad5bd-9cb-469f-a165-70867728950e"));   /* dash moved */
  assert_false(id_valid("0f8fad5b-d9cb-469f-a165x70867728950e"));   /* no dash */
  assert_false(id_valid("0f8fad5b-d9cb-469f-a165-70867728950g"));   /* not hex */
  assert_false(id_valid("0f8fad5b0d9cb0469f0a165070867728950e"));   /* digits for dashes */
  assert_false(id_valid("{f8fad5b-d9cb-469f-a165-70867728950}"));
  assert_false(id_valid("0f8fad5b-d9cb-469f-a165-70867728950 "));
  assert_false(id_valid("abc"));
  assert_false(id_valid("../../../../../../../../../etc/passwd"));
}

static void test_id_new(void **state) {
  (void)state;
  enum { N = 64 };
  char ids[N][ID_LEN + 1];
  for (int i = 0; i < N; i++) {
    memset(ids[i], 'Z', sizeof ids[i]);
    id_new(ids[i]);
    assert_int_equal(strlen(ids[i]), ID_LEN);
    assert_true(id_valid(ids[i]));
    for (int c = 0; c < ID_LEN; c++)
      assert_false(isupper((unsigned char)ids[i][c]));
    assert_int_equal(ids[i][14], '4');                  /* version 4 */
    assert_non_null(strchr("89ab", ids[i][19]));         /* RFC 4122 variant */
    for (int j = 0; j < i; j++)
      assert_string_not_equal(ids[i], ids[j]);
  }
}


/* The Host rule against DNS rebinding, per listen address, and the Origin rules. */
static void test_host_and_origin_rules(void **state) {
  (void)state;
  struct opforge_config cfg;
  config_defaults(&cfg); /* 127.0.0.1 */
  static const char *const ok_local[] = {"127.0.0.1", "127.0.0.1:8080", "localhost",
                                         "LocalHost:1"};
  for (size_t i = 0; i < sizeof ok_local / sizeof *ok_local; i++)
    if (!origin_host_allowed(&cfg, ok_local[i]))
      fail_msg("listen 127.0.0.1: Host %s refused", ok_local[i]);
  static const char *const bad_local[] = {"evil.example", "127.0.0.2", "[::1]", "10.0.0.1",
                                          "127.0.0.1:80x", "", ":80", "[127.0.0.1]",
                                          "localhost.evil.example", "127.000.0.1"};
  for (size_t i = 0; i < sizeof bad_local / sizeof *bad_local; i++)
    if (origin_host_allowed(&cfg, bad_local[i]))
      fail_msg("listen 127.0.0.1: Host '%s' allowed", bad_local[i]);
  snprintf(cfg.listen_host, sizeof cfg.listen_host, "localhost");
  assert_true(origin_host_allowed(&cfg, "localhost:8080"));
  assert_true(origin_host_allowed(&cfg, "127.0.0.1:8080"));
  assert_true(origin_host_allowed(&cfg, "[::1]:8080"));
  assert_false(origin_host_allowed(&cfg, "192.168.1.2"));
  snprintf(cfg.listen_host, sizeof cfg.listen_host, "0.0.0.0");
  assert_true(origin_host_allowed(&cfg, "192.168.1.2:8080"));
  assert_true(origin_host_allowed(&cfg, "[fe80::1]"));
  assert_true(origin_host_allowed(&cfg, "localhost"));
  assert_false(origin_host_allowed(&cfg, "evil.example"));
  snprintf(cfg.listen_host, sizeof cfg.listen_host, "[::1]");
  assert_true(origin_host_allowed(&cfg, "[::1]:9"));
  assert_true(origin_host_allowed(&cfg, "[0:0::1]"));
  assert_true(origin_host_allowed(&cfg, "localhost"));
  assert_false(origin_host_allowed(&cfg, "127.0.0.1"));
  snprintf(cfg.allow_hosts[cfg.n_allow_hosts++], sizeof cfg.allow_hosts[0], "opforge.internal");
  assert_true(origin_host_allowed(&cfg, "OPFORGE.internal:443"));
  assert_false(origin_host_allowed(&cfg, "opforge.internal.evil"));

  snprintf(cfg.cors_origins[cfg.n_cors_origins++], sizeof cfg.cors_origins[0],
           "https://app.example:8443");
  assert_true(origin_cors_listed(&cfg, "https://app.example:8443"));
  assert_true(origin_cors_listed(&cfg, "HTTPS://APP.example:8443"));
  assert_false(origin_cors_listed(&cfg, "https://app.example"));
  assert_false(origin_cors_listed(&cfg, NULL));
  assert_true(origin_is_own("http://127.0.0.1:8080", "127.0.0.1:8080"));
  assert_true(origin_is_own("https://Opforge.internal", "opforge.internal"));
  assert_false(origin_is_own("http://127.0.0.1:8081", "127.0.0.1:8080"));
  assert_false(origin_is_own("null", "127.0.0.1:8080"));
  assert_false(origin_is_own("http://127.0.0.1:8080", NULL));
  assert_false(origin_is_own("ftp://127.0.0.1:8080", "127.0.0.1:8080"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_exact_routes),
    cmocka_unit_test(test_params),
    cmocka_unit_test(test_not_found),
    cmocka_unit_test(test_method_not_allowed),
    cmocka_unit_test(test_head_and_options),
    cmocka_unit_test(test_host_and_origin_rules),
    cmocka_unit_test(test_param_limits),
    cmocka_unit_test(test_allow_truncation),
    cmocka_unit_test(test_auth_check),
    cmocka_unit_test(test_auth_token_equal),
    cmocka_unit_test(test_auth_is_write),
    cmocka_unit_test(test_id_valid),
    cmocka_unit_test(test_id_new),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
