/* API tests of where requests may come from and how they must look (issue 12, items 3
 * and 4): the Host rule against DNS rebinding, cross-site writes, CORS for listed
 * origins, HEAD and OPTIONS, the media type of writes with and without a body, NUL bytes
 * and a missing Host, and the answers the HTTP library gives itself. Requests libcurl
 * would not send go over raw sockets; every response is checked against the spec. */
#include "tests/api/test_protocol_api.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/api/raw.h"

#define LISTED "http://app.example:3000"
#define UNKNOWN_ID "3f2b8c1e-9d4a-4b7e-8c21-5a6f0e9d1b23"

static const char REF_JSON[] =
    "{\"reference\":\"import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x):"
    "\\n        return x\\ndef get_inputs():\\n    return [torch.randn(4)]\\n"
    "def get_init_inputs():\\n    return []\\n\"}";

/* printf into a new string (caller frees). */
static char *fmt(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(NULL, 0, format, ap);
  va_end(ap);
  assert_true(n >= 0);
  char *out = malloc((size_t)n + 1);
  assert_non_null(out);
  va_start(ap, format);
  vsnprintf(out, (size_t)n + 1, format, ap);
  va_end(ap);
  return out;
}

/* Asserts a curl response's JSON error (status, code, field; field NULL: unchecked). */
static void assert_error(const struct http_response *r, long status, const char *code,
                         const char *field) {
  json_t *doc = http_json(r);
  json_t *err = json_object_get(doc, "error");
  const char *got = json_string_value(json_object_get(err, "code"));
  if (r->status != status || !got || strcmp(got, code) != 0)
    print_error("want %ld %s, got %ld: %.400s\n", status, code, r->status, r->body);
  assert_int_equal(r->status, status);
  assert_string_equal(got, code);
  if (field)
    assert_string_equal(json_string_value(json_object_get(err, "field")), field);
  json_decref(doc);
}

/* The server is still healthy after whatever the test sent. */
static void assert_healthy(struct server *server) {
  struct http_response *r = http_get(server, "/healthz");
  assert_int_equal(r->status, 200);
  http_response_free(r);
}

/* ---------------------------------------------------------------- fixtures */

static int start_cors(void **state) {
  static const char *const args[] = {"--cors-origin", LISTED, "--allow-host", "opforge.test",
                                     NULL};
  struct server_opts opts = {.extra_args = args};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int start_plain(void **state) {
  struct server *server = NULL;
  if (server_start(NULL, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int stop(void **state) { return server_stop(*state) == 0 ? 0 : -1; }

/* Submits a task and returns its id (caller frees). */
static char *new_task(struct server *server) {
  struct http_response *r = http_send(server, "POST", "/v1/tasks", REF_JSON, NULL);
  assert_int_equal(r->status, 202);
  json_t *task = http_json(r);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  json_decref(task);
  http_response_free(r);
  return id;
}

/* How many tasks the server holds. */
static size_t task_count(struct server *server) {
  struct http_response *r = http_get(server, "/v1/tasks?limit=500");
  json_t *page = http_json(r);
  size_t n = json_array_size(json_object_get(page, "items"));
  json_decref(page);
  http_response_free(r);
  return n;
}

/* ---------------------------------------------------------------- Host */

/* DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
 * Host: evil.example. Only the listen address, localhost on loopback and --allow-host
 * names are answered. */
static void test_host_header(void **state) {
  struct server *server = *state; /* --allow-host opforge.test */
  char *own = fmt("Host: 127.0.0.1:%u", (unsigned)raw_server_port(server));
  const char *const ok[] = {"Host: 127.0.0.1", "Host: localhost", "Host: LOCALHOST:1",
                            "Host: opforge.test", "Host: opforge.test:8080", own};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    const char *headers[] = {ok[i], NULL};
    struct http_request req = {.method = "GET", .path = "/healthz", .headers = headers};
    struct http_response *r = http_do(server, &req);
    if (r->status != 200)
      print_error("%s: %ld %s\n", ok[i], r->status, r->body);
    assert_int_equal(r->status, 200);
    http_response_free(r);
  }
  free(own);
  const char *const refused[] = {"Host: evil.example", "Host: evil.example:8080",
                                 "Host: 127.0.0.2", "Host: [::1]", "Host: opforge.test.evil",
                                 "Host: 127.0.0.1:80x"};
  size_t before = task_count(server);
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    const char *headers[] = {refused[i], NULL};
    struct http_request req = {.method = "GET", .path = "/v1/tasks", .headers = headers};
    struct http_response *r = http_do(server, &req);
    assert_error(r, 421, "host_not_allowed", "Host");
    http_response_free(r);
    /* A write is refused before it runs. */
    struct http_request post = {.method = "POST", .path = "/v1/tasks", .headers = headers,
                                .body = REF_JSON};
    r = http_do(server, &post);
    assert_error(r, 421, "host_not_allowed", "Host");
    http_response_free(r);
  }
  assert_int_equal(task_count(server), before);
}

/* A NUL byte inside a header value and an HTTP/1.1 request without Host are 400
 * invalid_header naming the header; HTTP/1.0 needs no Host. */
static void test_malformed_headers(void **state) {
  struct server *server = *state;
  struct raw_response r;
  static const char nul[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\0b\r\n"
                            "Connection: close\r\n\r\n";
  raw_exchange(server, "GET", "/healthz", nul, sizeof nul - 1, &r);
  assert_raw_error(&r, 400, "invalid_header");
  assert_non_null(strstr(r.body, "\"field\":\"X-Note\""));
  raw_response_clear(&r);
  raw_text(server, "GET", "/healthz", "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", &r);
  assert_raw_error(&r, 400, "invalid_header");
  assert_non_null(strstr(r.body, "\"field\":\"Host\""));
  raw_response_clear(&r);
  raw_text(server, "GET", "/healthz", "GET /healthz HTTP/1.0\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  raw_response_clear(&r);
  assert_healthy(server);
}

/* ---------------------------------------------------------------- Origin and CORS */

/* Writes from another site's page are refused (403 cross_site_refused) and change
 * nothing; the server's own origin and a --cors-origin origin may write, the latter with
 * CORS headers; reads from any origin are answered, with CORS headers only for a listed
 * one. */
static void test_cross_site_writes(void **state) {
  struct server *server = *state; /* --cors-origin http://app.example:3000 */
  char *id = new_task(server);
  size_t before = task_count(server);
  char *cancel = fmt("/v1/tasks/%s/cancel", id), *self = fmt("/v1/tasks/%s", id);
  static const char *const foreign[] = {"Origin: http://evil.example",
                                        "Origin: http://app.example:3001",
                                        "Origin: https://app.example:3000", "Origin: null"};
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
    const char *headers[] = {foreign[i], NULL};
    struct http_request reqs[] = {
      {.method = "POST", .path = "/v1/tasks", .headers = headers, .body = REF_JSON},
      {.method = "POST", .path = cancel, .headers = headers},
      {.method = "DELETE", .path = self, .headers = headers},
      {.method = "POST", .path = "/v1/memory/reset", .headers = headers},
      {.method = "PATCH", .path = "/v1/memory/global/fusion", .headers = headers,
       .body = "{\"prior\": 1}"},
    };
    for (size_t k = 0; k < sizeof reqs / sizeof reqs[0]; k++) {
      struct http_response *r = http_do(server, &reqs[k]);
      assert_error(r, 403, "cross_site_refused", "Origin");
      assert_null(http_header(r, "Access-Control-Allow-Origin"));
      http_response_free(r);
    }
    /* Reads stay open, without CORS headers. */
    struct http_request get = {.method = "GET", .path = self, .headers = headers};
    struct http_response *r = http_do(server, &get);
    assert_int_equal(r->status, 200);
    assert_null(http_header(r, "Access-Control-Allow-Origin"));
    json_t *task = http_json(r);
    assert_string_equal(json_string_value(json_object_get(task, "status")), "queued");
    json_decref(task);
    http_response_free(r);
  }
  assert_int_equal(task_count(server), before);

  /* The server's own origin (a page it served, or a tool that sets Origin). */
  char *own = fmt("Origin: %s", server_url(server));
  const char *own_headers[] = {own, NULL};
  struct http_request post = {.method = "POST", .path = "/v1/tasks", .headers = own_headers,
                              .body = REF_JSON};
  struct http_response *r = http_do(server, &post);
  assert_int_equal(r->status, 202);
  assert_null(http_header(r, "Access-Control-Allow-Origin"));
  http_response_free(r);
  free(own);

  /* A listed origin: allowed, and told so. */
  const char *listed[] = {"Origin: " LISTED, NULL};
  post.headers = listed;
  r = http_do(server, &post);
  assert_int_equal(r->status, 202);
  assert_string_equal(http_header(r, "Access-Control-Allow-Origin"), LISTED);
  assert_non_null(strstr(http_header(r, "Access-Control-Expose-Headers"), "Location"));
  assert_string_equal(http_header(r, "Vary"), "Origin");
  http_response_free(r);
  struct http_request cancel_req = {.method = "POST", .path = cancel, .headers = listed};
  r = http_do(server, &cancel_req);
  assert_int_equal(r->status, 200);
  assert_string_equal(http_header(r, "Access-Control-Allow-Origin"), LISTED);
  http_response_free(r);
  /* Errors carry them too, so the page can read why. */
  struct http_request missing = {.method = "GET", .path = "/v1/tasks/" UNKNOWN_ID,
                                 .headers = listed};
  r = http_do(server, &missing);
  assert_error(r, 404, "task_not_found", NULL);
  assert_string_equal(http_header(r, "Access-Control-Allow-Origin"), LISTED);
  http_response_free(r);
  free(cancel);
  free(self);
  free(id);
}

/* OPTIONS: 204 with Allow on a known path; a preflight from a listed origin gets the
 * Access-Control-Allow-* headers, one from another origin none (the browser then stops). */
static void test_preflight(void **state) {
  struct server *server = *state;
  const char *listed[] = {"Origin: " LISTED, "Access-Control-Request-Method: POST",
                          "Access-Control-Request-Headers: content-type, authorization", NULL};
  struct http_request req = {.method = "OPTIONS", .path = "/v1/tasks", .headers = listed};
  struct http_response *r = http_do(server, &req);
  assert_int_equal(r->status, 204);
  assert_string_equal(http_header(r, "Allow"), "POST, GET, HEAD, OPTIONS");
  assert_string_equal(http_header(r, "Access-Control-Allow-Origin"), LISTED);
  assert_string_equal(http_header(r, "Access-Control-Allow-Methods"), "POST, GET, HEAD, OPTIONS");
  assert_string_equal(http_header(r, "Access-Control-Allow-Headers"),
                      "Authorization, Content-Type, Idempotency-Key, Last-Event-ID");
  assert_string_equal(http_header(r, "Access-Control-Max-Age"), "600");
  assert_string_equal(http_header(r, "Vary"), "Origin");
  assert_int_equal(r->body_len, 0);
  http_response_free(r);

  const char *foreign[] = {"Origin: http://evil.example", "Access-Control-Request-Method: DELETE",
                           NULL};
  char *path = fmt("/v1/tasks/%s", UNKNOWN_ID);
  struct http_request other = {.method = "OPTIONS", .path = path, .headers = foreign};
  r = http_do(server, &other);
  assert_int_equal(r->status, 204);
  assert_string_equal(http_header(r, "Allow"), "GET, DELETE, HEAD, OPTIONS");
  for (size_t i = 0; i < r->n_headers; i++)
    assert_true(strncasecmp(r->headers[i].name, "Access-Control-", 15) != 0);
  http_response_free(r);
  free(path);

  struct http_request plain = {.method = "OPTIONS", .path = "/healthz"};
  r = http_do(server, &plain);
  assert_int_equal(r->status, 204);
  assert_string_equal(http_header(r, "Allow"), "GET, HEAD, OPTIONS");
  http_response_free(r);
  struct http_request unknown = {.method = "OPTIONS", .path = "/v1/nothing"};
  r = http_do(server, &unknown);
  assert_error(r, 404, "not_found", NULL);
  http_response_free(r);
}

/* ---------------------------------------------------------------- HEAD, media types */

/* HEAD answers wherever GET does, with GET's status and headers and no body. */
static void test_head(void **state) {
  struct server *server = *state;
  char *id = new_task(server);
  char *self = fmt("/v1/tasks/%s", id), *events = fmt("/v1/tasks/%s/events", id);
  static const struct {
    const char *path;
    long status;
    const char *ctype;
  } cases[] = {
    {"/healthz", 200, "application/json"},
    {"/v1/tasks", 200, "application/json"},
    {"/v1/memory/global", 200, "application/json"},
    {"/metrics", 200, "text/plain"},
    {"/openapi.json", 200, "application/json"},
    {"/v1/tasks/" UNKNOWN_ID, 404, "application/json"},
    {"/v1/tasks?limit=0", 400, "application/json"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0] + 2; i++) {
    const char *path = i < 7 ? cases[i].path : i == 7 ? self : events;
    long status = i < 7 ? cases[i].status : 200;
    const char *ctype = i < 7 ? cases[i].ctype : i == 7 ? "application/json" : "text/event-stream";
    struct http_request req = {.method = "HEAD", .path = path};
    struct http_response *r = http_do(server, &req);
    if (r->status != status)
      print_error("HEAD %s: %ld\n", path, r->status);
    assert_int_equal(r->status, status);
    assert_int_equal(r->body_len, 0);
    assert_non_null(http_header(r, "Content-Type"));
    assert_int_equal(strncmp(http_header(r, "Content-Type"), ctype, strlen(ctype)), 0);
    http_response_free(r);
  }
  struct http_request cancel = {.method = "HEAD", .path = "/v1/memory/reset"};
  struct http_response *r = http_do(server, &cancel);
  assert_int_equal(r->status, 405);
  assert_string_equal(http_header(r, "Allow"), "POST, OPTIONS");
  http_response_free(r);
  free(self);
  free(events);
  free(id);
}

/* A write's Content-Type must be JSON when present, body or not, and a body needs one:
 * an HTML form of another site posts exactly such requests. Without a body and without
 * a Content-Type (curl -X POST, the CLI) a write is fine. */
static void test_write_media_types(void **state) {
  struct server *server = *state;
  char *id = new_task(server);
  char *cancel = fmt("/v1/tasks/%s/cancel", id), *self = fmt("/v1/tasks/%s", id);
  struct raw_response rr;
  /* A form with no fields: Content-Length 0 and a form type. */
  char *form = fmt("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                   "application/x-www-form-urlencoded\r\nContent-Length: 0\r\nConnection: "
                   "close\r\n\r\n", cancel);
  raw_text(server, "POST", cancel, form, &rr);
  assert_raw_error(&rr, 415, "unsupported_media_type");
  raw_response_clear(&rr);
  free(form);
  char *text = fmt("DELETE %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                   "Content-Length: 3\r\nConnection: close\r\n\r\nx=1", self);
  raw_text(server, "DELETE", self, text, &rr);
  assert_raw_error(&rr, 415, "unsupported_media_type");
  raw_response_clear(&rr);
  free(text);
  static const char multipart[] =
      "POST /v1/memory/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data;"
      " boundary=x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  raw_text(server, "POST", "/v1/memory/reset", multipart, &rr);
  assert_raw_error(&rr, 415, "unsupported_media_type");
  raw_response_clear(&rr);
  /* Nothing happened: the task is still queued. */
  struct http_response *r = http_get(server, self);
  json_t *task = http_json(r);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "queued");
  json_decref(task);
  http_response_free(r);
  /* Bodiless writes without a Content-Type, or with JSON, are fine. */
  r = http_send(server, "POST", cancel, NULL, NULL);
  assert_int_equal(r->status, 200);
  http_response_free(r);
  const char *json_ct[] = {"Content-Type: application/json", NULL};
  r = http_send(server, "DELETE", self, NULL, json_ct);
  assert_int_equal(r->status, 204);
  http_response_free(r);
  free(cancel);
  free(self);
  free(id);
}

/* ---------------------------------------------------------------- the library's answers */

/* Requests that libmicrohttpd 0.9.75 refuses before opforge sees them get its HTML
 * answers, which the spec documents (x-opforge-common-responses); the server stays up.
 * (A Content-Length it cannot parse also gets its status line twice: the spec and the
 * README say so; this library version cannot be told otherwise.) */
static void test_library_answers(void **state) {
  struct server *server = *state;
  struct raw_response r;
  raw_text(server, "GET", "/healthz", "GET /healthz HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", &r);
  assert_int_equal(r.status, 505);
  raw_response_clear(&r);
  static const char *const bad_lengths[] = {"-1", "12x", "100000000000000000000"};
  static const long statuses[] = {400, 400, 413};
  for (size_t i = 0; i < 3; i++) {
    char *req = fmt("POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    "application/json\r\nContent-Length: %s\r\n\r\n", bad_lengths[i]);
    raw_text(server, "POST", "/v1/tasks", req, &r);
    assert_int_equal(r.status, statuses[i]);
    raw_response_clear(&r);
    free(req);
  }
  raw_text(server, "POST", "/v1/tasks",
           "POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", &r);
  assert_int_equal(r.status, 400);
  raw_response_clear(&r);
  /* Headers past the connection's memory (the URL cap plus 96 KiB). */
  size_t big = 200 * 1024;
  char *req = malloc(big + 128);
  assert_non_null(req);
  int n = snprintf(req, 128, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ");
  memset(req + n, 'a', big);
  memcpy(req + n + big, "\r\n\r\n", 5);
  raw_text(server, "GET", "/healthz", req, &r);
  assert_int_equal(r.status, 431);
  raw_response_clear(&r);
  n = snprintf(req, 128, "GET /healthz?");
  memset(req + n, 'a', big);
  memcpy(req + n + big, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 31);
  raw_text(server, "GET", "/healthz", req, &r);
  assert_int_equal(r.status, 414);
  raw_response_clear(&r);
  free(req);
  assert_healthy(server);
}


/* ---------------------------------------------------------------- spec agreement */

/* What schemathesis found valid by the spec but refused (issue 12, item 4), each now
 * agreeing with the spec one way or the other: well-formed cursors are pages, integers
 * beyond 64 bits are numbers, a NUL is refused with a clear message, ranges print as
 * integers, and an unknown direction in a prefix is a missing node. */
static void test_spec_agreement(void **state) {
  struct server *server = *state;
  char *id = new_task(server);
  struct http_response *r = http_get(server, "/v1/tasks?cursor=c1");
  assert_int_equal(r->status, 200);
  json_t *page = http_json(r);
  assert_int_equal(json_array_size(json_object_get(page, "items")), 0);
  json_decref(page);
  http_response_free(r);
  static const char *const bad_cursors[] = {"/v1/tasks?cursor=0", "/v1/tasks?cursor=c0",
                                            "/v1/tasks?cursor=c8000000000000000"};
  for (size_t i = 0; i < 3; i++) {
    r = http_get(server, bad_cursors[i]);
    assert_error(r, 400, "invalid_cursor", "cursor");
    http_response_free(r);
  }
  char *cands = fmt("/v1/tasks/%s/candidates?cursor=0", id);
  r = http_get(server, cands);
  assert_int_equal(r->status, 200);
  http_response_free(r);
  free(cands);
  static const char *const bad_cands[] = {"abc", "%C2%8C", "-1", "+1", "01",
                                          "1000000000000000000"};
  for (size_t i = 0; i < sizeof bad_cands / sizeof *bad_cands; i++) {
    cands = fmt("/v1/tasks/%s/candidates?cursor=%s", id, bad_cands[i]);
    r = http_get(server, cands);
    assert_error(r, 400, "invalid_query", "cursor");
    http_response_free(r);
    free(cands);
  }
  r = http_send(server, "POST", "/v1/tasks",
                "{\"name\":\"a\\u0000b\",\"reference\":\"x\"}", NULL);
  assert_error(r, 400, "bad_json", NULL);
  assert_non_null(strstr(r->body, "U+0000"));
  http_response_free(r);
  r = http_send(server, "POST", "/v1/tasks", "{\"seed\": -1, \"reference\": \"x\"}", NULL);
  assert_error(r, 400, "invalid_field", "seed");
  assert_non_null(strstr(r->body, "[0, 2147483647]"));
  http_response_free(r);
  r = http_get(server, "/v1/memory/score?prefix=fusion,no_such_direction");
  assert_error(r, 404, "memory_node_not_found", "prefix");
  http_response_free(r);
  /* A number below -2^63 is a number: taken where a number is, refused where an integer
   * is (the import's own 400). */
  r = http_get(server, "/v1/memory/export");
  json_t *doc = http_json(r);
  http_response_free(r);
  json_t *g = json_array_get(json_object_get(doc, "globals"), 0);
  json_object_set_new(g, "stats", json_pack("{s:i, s:i, s:i, s:f, s:f}", "n", 1, "successes",
                                            0, "improvements", 0, "reward_sum", 0.5, "ema",
                                            0.0));
  char *text = json_dumps(doc, JSON_COMPACT);
  char *wide = strstr(text, "\"reward_sum\":0.5");
  assert_non_null(wide);
  char *body = fmt("%.*s\"reward_sum\":-100000000000000000000%s", (int)(wide - text), text,
                   wide + strlen("\"reward_sum\":0.5"));
  r = http_send(server, "POST", "/v1/memory/import", body, NULL);
  assert_int_equal(r->status, 200);
  http_response_free(r);
  r = http_get(server, "/v1/memory/export");
  json_t *after = http_json(r);
  double sum = json_number_value(json_object_get(
      json_object_get(json_array_get(json_object_get(after, "globals"), 0), "stats"),
      "reward_sum"));
  assert_true(sum == -1e20);
  json_decref(after);
  http_response_free(r);
  free(body);
  char *n_wide = fmt("%.*s\"n\":-100000000000000000000%s", (int)(strstr(text, "\"n\":1") - text),
                     text, strstr(text, "\"n\":1") + strlen("\"n\":1"));
  r = http_send(server, "POST", "/v1/memory/import", n_wide, NULL);
  assert_error(r, 400, "invalid_import", "globals[0].stats.n");
  http_response_free(r);
  free(n_wide);
  free(text);
  json_decref(doc);
  free(id);
}

/* Asserts the whole body of a curl response. */
static void assert_body(const struct http_response *r, long status, const char *body) {
  if (r->status != status || strcmp(r->body, body) != 0)
    print_error("want %ld %s\n got %ld %s\n", status, body, r->status, r->body);
  assert_int_equal(r->status, status);
  assert_string_equal(r->body, body);
}

/* What schemathesis --checks all found (issue 33, item 11): every skill id of the
 * spec's pattern (16 digits) is looked up (404 when none), one beyond it is invalid; the
 * empty key is named by its JSON pointer "/", never by an empty field. */
static void test_schemathesis_findings(void **state) {
  struct server *server = *state;
  struct http_response *r = http_get(server, "/v1/skills/9007199254740993");
  assert_body(r, 404, "{\"error\":{\"code\":\"skill_not_found\",\"message\":\"no skill rule has "
                      "id 9007199254740993\",\"field\":null}}");
  http_response_free(r);
  r = http_get(server, "/v1/skills/9999999999999999");
  assert_int_equal(r->status, 404);
  http_response_free(r);
  r = http_get(server, "/v1/skills/10000000000000000");
  assert_body(r, 400, "{\"error\":{\"code\":\"invalid_id\",\"message\":\"id must be a positive "
                      "integer of at most 16 digits\",\"field\":\"id\"}}");
  http_response_free(r);
  r = http_send(server, "POST", "/v1/tasks", "{\"\": null}", NULL);
  assert_body(r, 400, "{\"error\":{\"code\":\"unknown_field\",\"message\":\" is not a known "
                      "field\",\"field\":null}}");
  http_response_free(r);
  r = http_send(server, "POST", "/v1/skills/adapt", "{\"\": 1}", NULL);
  assert_body(r, 400, "{\"error\":{\"code\":\"unknown_field\",\"message\":\": unknown key\","
                      "\"field\":\"/\"}}");
  http_response_free(r);
}

static const struct CMUnitTest tests[] = {
  cmocka_unit_test_setup_teardown(test_host_header, start_cors, stop),
  cmocka_unit_test_setup_teardown(test_malformed_headers, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_cross_site_writes, start_cors, stop),
  cmocka_unit_test_setup_teardown(test_preflight, start_cors, stop),
  cmocka_unit_test_setup_teardown(test_head, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_write_media_types, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_library_answers, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_spec_agreement, start_plain, stop),
  cmocka_unit_test_setup_teardown(test_schemathesis_findings, start_plain, stop),
};

size_t protocol_api_tests(const struct CMUnitTest **ret_tests) {
  *ret_tests = tests;
  return sizeof tests / sizeof tests[0];
}
