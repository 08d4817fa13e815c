/* API tests of request framing and the request line (issue 33, items 4, 5, 8 and 12):
 * heads that two readers could frame differently are refused with 400 invalid_header
 * and their connection closed, so bytes smuggled behind them are never answered; a NUL
 * byte in the target is refused; an absolute-form target is routed by its path, its
 * authority checked like Host; a token with blanks around it is the token; HEAD on an
 * event stream has no body. Requests go over raw sockets; each answer is checked
 * against the spec and its body compared whole. */
#include "tests/api/test_framing_api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/api/raw.h"

#define TOKEN "framing-token-0123456789"
#define UNKNOWN_ID "3f2b8c1e-9d4a-4b7e-8c21-5a6f0e9d1b23"
/* What a smuggler hides behind a request whose framing it hopes the server misreads. */
#define SMUGGLED "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

static int start_plain(void **state) {
  struct server *server = NULL;
  if (server_start(NULL, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int start_token(void **state) {
  struct server_opts opts = {.token = TOKEN};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int stop(void **state) { return server_stop(*state) == 0 ? 0 : -1; }

/* The one error body, as the server writes it (field NULL: null). */
static char *error_body(const char *code, const char *message, const char *field) {
  json_t *doc = json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", code, "message", message,
                          "field", field);
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  assert_non_null(text);
  return text;
}

/* Asserts r is exactly this error, alone on a connection the server then closed. */
static void assert_refused_and_closed(const struct raw_response *r, long status,
                                      const char *code, const char *message,
                                      const char *field) {
  char *want = error_body(code, message, field);
  bool same = r->status == status && r->body_len == strlen(want) &&
              memcmp(r->body, want, r->body_len) == 0;
  if (!same || !r->closed || raw_status_lines(r) != 1)
    print_error("want %ld %s, one answer, closed; got (closed %d):\n%.800s\n", status, want,
                r->closed, r->text);
  assert_int_equal(r->status, status);
  assert_int_equal(r->body_len, strlen(want));
  assert_memory_equal(r->body, want, r->body_len);
  assert_true(r->closed);
  assert_int_equal(raw_status_lines(r), 1);
  free(want);
}

/* ---------------------------------------------------------------- framing */

/* Each head below is refused with 400 invalid_header naming the header at fault, the
 * connection is closed, and the request smuggled behind it is never answered. */
static void test_ambiguous_framing(void **state) {
  struct server *server = *state;
  static const struct {
    const char *label, *head, *field, *message;
  } cases[] = {
    {"two Content-Length",
     "POST /v1/memory/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
     "Content-Length: 0\r\nContent-Length: 41\r\n\r\n",
     "Content-Length", "the request has 2 Content-Length headers"},
    {"two equal Content-Length",
     "POST /v1/memory/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
     "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
     "Content-Length", "the request has 2 Content-Length headers"},
    {"Content-Length and chunked",
     "POST /v1/memory/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
     "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     "Transfer-Encoding", "Content-Length and Transfer-Encoding together frame the body two ways"},
    {"unknown coding",
     "POST /v1/memory/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
     "Transfer-Encoding: gzip\r\n\r\n",
     "Transfer-Encoding", "the only transfer coding taken is one 'chunked' (HTTP/1.1)"},
    {"chunked twice",
     "POST /v1/memory/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
     "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     "Transfer-Encoding", "the only transfer coding taken is one 'chunked' (HTTP/1.1)"},
    {"chunked in HTTP/1.0",
     "POST /v1/memory/reset HTTP/1.0\r\nContent-Type: application/json\r\n"
     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     "Transfer-Encoding", "the only transfer coding taken is one 'chunked' (HTTP/1.1)"},
    {"space before the colon",
     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length : 41\r\n\r\n",
     NULL, "header name 'Content-Length ' is not a token (no space before the colon)"},
    {"folded line",
     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\r\n b\r\n\r\n",
     NULL, "a header line is folded onto the next (obsolete line folding)"},
    {"bare LF",
     "GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n",
     NULL, "a line of the request head ends in a bare LF (lines end in CR LF)"},
    {"bare LF at the end",
     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\n",
     NULL, "a line of the request head ends in a bare LF (lines end in CR LF)"},
    {"two Host",
     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
     "Host", "the request has 2 Host headers"},
    {"a CR in a value",
     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\rb\r\n\r\n",
     "X-Note", "header X-Note holds a control character"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = strlen(cases[i].head) + strlen(SMUGGLED);
    char *text = malloc(n + 1);
    assert_non_null(text);
    snprintf(text, n + 1, "%s%s", cases[i].head, SMUGGLED);
    const char *method = strncmp(text, "POST", 4) == 0 ? "POST" : "GET";
    const char *target = method[0] == 'P' ? "/v1/memory/reset" : "/healthz";
    struct raw_response r;
    print_message("%s\n", cases[i].label);
    raw_exchange_wait(server, method, target, text, n, 3000, &r);
    assert_refused_and_closed(&r, 400, "invalid_header", cases[i].message, cases[i].field);
    raw_response_clear(&r);
    free(text);
  }
  /* Nothing was reset or answered behind them, and the server serves on. */
  struct http_response *h = http_get(server, "/healthz");
  assert_int_equal(h->status, 200);
  http_response_free(h);
}

/* A NUL byte in the target cut it short (/healthz\0x was /healthz); two spaces or a
 * blank in it are not the request line of RFC 9112 either. */
static void test_request_line(void **state) {
  struct server *server = *state;
  static const char nul[] = "GET /healthz\0x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" SMUGGLED;
  struct raw_response r;
  raw_exchange_wait(server, "GET", "/healthz", nul, sizeof nul - 1, 3000, &r);
  assert_refused_and_closed(&r, 400, "invalid_header", "the request target holds a NUL byte",
                            NULL);
  raw_response_clear(&r);
  static const char *const odd[] = {"GET  /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                    "GET /healthz\t HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"};
  for (size_t i = 0; i < 2; i++) {
    raw_exchange_wait(server, "GET", "/healthz", odd[i], strlen(odd[i]), 3000, &r);
    assert_refused_and_closed(&r, 400, "invalid_header",
                              "the request line must be METHOD SP target SP version, with no "
                              "blank or control character in the target", NULL);
    raw_response_clear(&r);
  }
}

/* RFC 9112 section 3.2.2: a server must accept the absolute form. Its path is routed;
 * its authority stands for Host (421 when foreign, whatever Host says). */
static void test_absolute_form(void **state) {
  struct server *server = *state;
  unsigned port = raw_server_port(server);
  char req[256];
  struct raw_response r;
  snprintf(req, sizeof req, "GET http://127.0.0.1:%u/healthz HTTP/1.1\r\nHost: 127.0.0.1:%u"
           "\r\nConnection: close\r\n\r\n", port, port);
  raw_text(server, "GET", "/healthz", req, &r);
  assert_int_equal(r.status, 200);
  json_t *doc = json_loadb(r.body, r.body_len, 0, NULL);
  assert_string_equal(json_string_value(json_object_get(doc, "status")), "ok");
  json_decref(doc);
  raw_response_clear(&r);
  /* The authority wins over the Host header, and its path is routed with its query. */
  snprintf(req, sizeof req, "GET HTTP://localhost:%u/v1/tasks?limit=1 HTTP/1.1\r\nHost: "
           "evil.example\r\nConnection: close\r\n\r\n", port);
  raw_text(server, "GET", "/v1/tasks?limit=1", req, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"items\":[]"));
  raw_response_clear(&r);
  snprintf(req, sizeof req, "GET http://evil.example:%u/healthz HTTP/1.1\r\nHost: "
           "127.0.0.1\r\nConnection: close\r\n\r\n", port);
  raw_text(server, "GET", "/healthz", req, &r);
  char message[128];
  snprintf(message, sizeof message, "this server does not answer for host 'evil.example:%u' "
           "(--allow-host adds names)", port);
  char *want = error_body("host_not_allowed", message, "Host");
  assert_int_equal(r.status, 421);
  assert_int_equal(r.body_len, strlen(want));
  assert_memory_equal(r.body, want, r.body_len);
  free(want);
  raw_response_clear(&r);
  snprintf(req, sizeof req, "GET http://127.0.0.1:%u/v1/nothing HTTP/1.1\r\nHost: 127.0.0.1"
           "\r\nConnection: close\r\n\r\n", port);
  raw_text(server, "GET", "/v1/nothing", req, &r);
  assert_raw_error(&r, 404, "not_found");
  assert_non_null(strstr(r.body, "\"message\":\"no route for /v1/nothing\""));
  raw_response_clear(&r);
}

/* ---------------------------------------------------------------- Authorization */

/* Blanks around the Authorization value are not part of the token (RFC 9110 section
 * 5.5: a field value has no leading or trailing whitespace). */
static void test_token_whitespace(void **state) {
  struct server *server = *state;
  static const char *const values[] = {"Bearer " TOKEN " ", "Bearer " TOKEN " \t ",
                                       "Bearer  " TOKEN, "bearer " TOKEN "\t"};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    char req[512];
    snprintf(req, sizeof req, "POST /v1/tasks/%s/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Authorization: %s\r\nConnection: close\r\n\r\n", UNKNOWN_ID, values[i]);
    struct raw_response r;
    raw_text(server, "POST", "/v1/tasks/" UNKNOWN_ID "/cancel", req, &r);
    /* Past the token check: the task is what is missing. */
    if (r.status != 404)
      print_error("'%s': %.300s\n", values[i], r.text);
    assert_raw_error(&r, 404, "task_not_found");
    raw_response_clear(&r);
  }
  char req[512];
  snprintf(req, sizeof req, "POST /v1/tasks/%s/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Authorization: Bearer %s x\r\nConnection: close\r\n\r\n", UNKNOWN_ID, TOKEN);
  struct raw_response r;
  raw_text(server, "POST", "/v1/tasks/" UNKNOWN_ID "/cancel", req, &r);
  assert_raw_error(&r, 403, "forbidden");
  raw_response_clear(&r);
}

/* ---------------------------------------------------------------- HEAD */

/* HEAD on an event stream: the stream's status and headers, and not one byte after
 * them (it sent the chunked stream's end, 0 CR LF CR LF). */
static void test_head_events_no_body(void **state) {
  struct server *server = *state;
  struct http_response *created =
      http_send(server, "POST", "/v1/tasks",
                "{\"reference\":\"import torch\\nclass Model(torch.nn.Module):\\n    def "
                "forward(self, x):\\n        return x\\ndef get_inputs():\\n    return "
                "[torch.randn(4)]\\ndef get_init_inputs():\\n    return []\\n\"}",
                NULL);
  assert_int_equal(created->status, 202);
  json_t *task = http_json(created);
  char path[128], req[256];
  snprintf(path, sizeof path, "/v1/tasks/%s/events",
           json_string_value(json_object_get(task, "id")));
  json_decref(task);
  http_response_free(created);
  /* Keep-alive: a second request follows on the same connection, so stray body bytes
   * would also be read as the start of its answer. */
  snprintf(req, sizeof req, "HEAD %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
           "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
  struct raw_response r;
  raw_exchange(server, NULL, NULL, req, strlen(req), &r);
  assert_int_equal(r.status, 200);
  const char *second = strstr(r.text, "\r\n\r\n");
  assert_non_null(second);
  second += 4;
  if (strncmp(second, "HTTP/1.1 200 ", 13) != 0)
    print_error("after the HEAD answer: %.200s\n", second);
  assert_int_equal(strncmp(second, "HTTP/1.1 200 ", 13), 0);
  assert_non_null(strstr(r.text, "Content-Type: text/event-stream"));
  raw_response_clear(&r);
}

static const struct CMUnitTest tests[] = {
  cmocka_unit_test_setup_teardown(test_ambiguous_framing, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_request_line, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_absolute_form, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_token_whitespace, start_token, stop),
  cmocka_unit_test_setup_teardown(test_head_events_no_body, start_plain, stop),
};

size_t framing_api_tests(const struct CMUnitTest **ret_tests) {
  *ret_tests = tests;
  return sizeof tests / sizeof tests[0];
}
