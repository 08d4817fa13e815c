/* API tests: the real server on port 0, scenario tables, spec check, coverage check. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <setjmp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "tests/api/harness.h"
#include "tests/api/spec_check.h"
#include "tests/api/test_best_api.h"
#include "tests/api/test_engine_api.h"
#include "tests/api/test_memory_api.h"
#include "tests/api/test_skills_api.h"
#include "tests/api/test_protocol_api.h"
#include "tests/api/test_framing_api.h"
#include "tests/api/test_limits_api.h"

/* A minimal KernelBench program: what every valid submission carries. */
static const char REF[] =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "class Model(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "\n"
    "    def forward(self, x):\n"
    "        return torch.relu(x)\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.randn(16, 16)]\n"
    "\n"
    "def get_init_inputs():\n"
    "    return []\n";

#define REF_MAX_BYTES 262144
#define FIELD_NULL "(json null)" /* expected "field" is JSON null */
#define UNKNOWN_ID "3f2b8c1e-9d4a-4b7e-8c21-5a6f0e9d1b23"
#define TOKEN "s3cret-token-0123456789"

/* ---------------------------------------------------------------- helpers */

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

/* s with every `from` replaced by `to` (caller frees). */
static char *replace_all(const char *s, const char *from, const char *to) {
  size_t flen = strlen(from), tlen = strlen(to), count = 0;
  for (const char *p = strstr(s, from); p; p = strstr(p + flen, from))
    count++;
  char *out = malloc(strlen(s) + count * tlen + 1);
  assert_non_null(out);
  char *w = out;
  for (const char *p = s;;) {
    const char *hit = strstr(p, from);
    if (!hit) {
      memcpy(w, p, strlen(p) + 1);
      break;
    }
    memcpy(w, p, (size_t)(hit - p));
    w += hit - p;
    memcpy(w, to, tlen);
    w += tlen;
    p = hit + flen;
  }
  return out;
}

/* A string of n copies of c (caller frees). */
static char *repeat(char c, size_t n) {
  char *s = malloc(n + 1);
  assert_non_null(s);
  memset(s, c, n);
  s[n] = '\0';
  return s;
}

/* s as a JSON string literal, quotes included (caller frees). */
static char *json_quote(const char *s) {
  json_t *str = json_string(s);
  assert_non_null(str);
  char *out = json_dumps(str, JSON_ENCODE_ANY | JSON_COMPACT);
  json_decref(str);
  assert_non_null(out);
  return out;
}

/* Expands a step template: @REF@ (the valid reference as a JSON string), @N128@ and
 * @N129@ (names of that length), and {id}. Caller frees. */
static char *expand(const char *tmpl, const char *id) {
  char *ref = json_quote(REF);
  char *n128 = repeat('n', 128), *n129 = repeat('n', 129);
  char *a = replace_all(tmpl, "@REF@", ref);
  char *b = replace_all(a, "@N128@", n128);
  char *c = replace_all(b, "@N129@", n129);
  char *d = replace_all(c, "{id}", id ? id : "");
  free(ref);
  free(n128);
  free(n129);
  free(a);
  free(b);
  free(c);
  return d;
}

/* Numbers compare by value (1 equals 1.0); otherwise like json_equal. */
static bool json_same(const json_t *a, const json_t *b) {
  if (json_is_number(a) && json_is_number(b))
    return json_number_value(a) == json_number_value(b);
  if (json_is_object(a) && json_is_object(b)) {
    if (json_object_size(a) != json_object_size(b))
      return false;
    const char *key;
    json_t *va;
    json_object_foreach((json_t *)a, key, va) {
      if (!json_same(va, json_object_get(b, key)))
        return false;
    }
    return true;
  }
  if (json_is_array(a) && json_is_array(b)) {
    if (json_array_size(a) != json_array_size(b))
      return false;
    for (size_t i = 0; i < json_array_size(a); i++)
      if (!json_same(json_array_get(a, i), json_array_get(b, i)))
        return false;
    return true;
  }
  return json_equal((json_t *)a, (json_t *)b);
}

/* Asserts that value (borrowed) equals the JSON text expected. */
static void assert_json(const json_t *value, const char *expected, const char *what) {
  json_error_t jerr;
  json_t *want = json_loads(expected, JSON_DECODE_ANY, &jerr);
  assert_non_null(want);
  if (!json_same(value, want)) {
    char *got = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
    print_error("%s: expected %s\n  got %s\n", what, expected, got ? got : "?");
    free(got);
    json_decref(want);
    fail();
  }
  json_decref(want);
}

/* Checks an error response: status, exact code, and field (NULL: not checked;
 * FIELD_NULL: must be JSON null). Writes the mismatch into why and returns false. */
static bool error_matches(const struct http_response *r, long status, const char *code,
                          const char *field, char *why, size_t whylen) {
  if (r->status != status) {
    snprintf(why, whylen, "want status %ld, got %ld", status, r->status);
    return false;
  }
  if (!code)
    return true;
  json_t *doc = json_loadb(r->body, r->body_len, 0, NULL);
  json_t *err = json_object_get(doc, "error");
  const char *got_code = json_string_value(json_object_get(err, "code"));
  json_t *got_field = json_object_get(err, "field");
  bool ok = got_code && strcmp(got_code, code) == 0;
  if (ok && field) {
    ok = strcmp(field, FIELD_NULL) == 0
             ? json_is_null(got_field)
             : json_is_string(got_field) && strcmp(json_string_value(got_field), field) == 0;
  }
  if (!ok)
    snprintf(why, whylen, "want code %s field %s, got code %s field %s", code,
             field ? field : "(any)", got_code ? got_code : "(none)",
             json_is_string(got_field) ? json_string_value(got_field)
                                       : json_is_null(got_field) ? FIELD_NULL : "(absent)");
  json_decref(doc);
  return ok;
}

/* Fails the test unless r is the error (status, code, field). */
static void assert_error(const struct http_response *r, long status, const char *code,
                         const char *field) {
  char why[512];
  if (!error_matches(r, status, code, field, why, sizeof why)) {
    print_error("%s\n  body: %.400s\n", why, r->body);
    fail();
  }
}

/* One labelled step of a scenario table. */
struct step {
  const char *label;
  const char *method;
  const char *path;   /* template: {id} */
  const char *body;   /* template: @REF@, @N128@, @N129@, {id}; NULL for none */
  long status;        /* expected status */
  const char *code;   /* expected error code; NULL for a success status */
  const char *field;  /* expected error field; NULL: not checked; FIELD_NULL: null */
};

/* Runs every step, reporting each mismatch with its label, and fails the test at the
 * end when any step did not match. id fills {id}. */
static void run_steps(struct server *server, const struct step *steps, size_t n,
                      const char *id) {
  size_t failures = 0;
  for (size_t i = 0; i < n; i++) {
    const struct step *s = &steps[i];
    char *path = expand(s->path, id);
    char *body = s->body ? expand(s->body, id) : NULL;
    struct http_response *r = http_send(server, s->method, path, body, NULL);
    char why[512];
    if (!error_matches(r, s->status, s->code, s->field, why, sizeof why)) {
      print_error("step '%s' (%s %.80s): %s\n  body: %.300s\n", s->label, s->method, path, why,
                  r->body);
      failures++;
    }
    http_response_free(r);
    free(path);
    free(body);
  }
  if (failures) {
    print_error("%zu of %zu steps failed\n", failures, n);
    fail();
  }
}

/* Submits {"name": name, "reference": REF} (name may be NULL) and returns the new id
 * (caller frees), asserting 202 and the Location header. */
static char *create_task(struct server *server, const char *name) {
  char *ref = json_quote(REF);
  char *body = name ? fmt("{\"name\":\"%s\",\"reference\":%s}", name, ref)
                    : fmt("{\"reference\":%s}", ref);
  struct http_response *r = http_send(server, "POST", "/v1/tasks", body, NULL);
  if (r->status != 202)
    print_error("create_task: got %ld: %.300s\n", r->status, r->body);
  assert_int_equal(r->status, 202);
  json_t *task = http_json(r);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  assert_non_null(id);
  char *location = fmt("/v1/tasks/%s", id);
  assert_non_null(http_header(r, "Location"));
  assert_string_equal(http_header(r, "Location"), location);
  free(location);
  json_decref(task);
  http_response_free(r);
  free(body);
  free(ref);
  return id;
}

/* POSTs a cancel for id and asserts 200 with status "cancelled". */
static void cancel_task(struct server *server, const char *id) {
  char *path = fmt("/v1/tasks/%s/cancel", id);
  struct http_response *r = http_send(server, "POST", path, NULL, NULL);
  assert_int_equal(r->status, 200);
  json_t *task = http_json(r);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "cancelled");
  json_decref(task);
  http_response_free(r);
  free(path);
}

/* ---------------------------------------------------------------- fixtures */

static int start_with(void **state, const struct server_opts *opts) {
  struct server *server = NULL;
  if (server_start(opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int setup_server(void **state) {
  return start_with(state, NULL);
}

static int setup_auth_server(void **state) {
  struct server_opts opts = {.token = TOKEN};
  return start_with(state, &opts);
}

static int setup_keepalive_server(void **state) {
  static const char *const args[] = {"--sse-keepalive", "1", NULL};
  struct server_opts opts = {.extra_args = args};
  return start_with(state, &opts);
}

static int setup_small_body_server(void **state) {
  static const char *const args[] = {"--max-body", "4096", NULL};
  struct server_opts opts = {.extra_args = args};
  return start_with(state, &opts);
}

/* 200 connections at once from one client: over the default per-client limit (64). */
static int setup_crowd_server(void **state) {
  static const char *const args[] = {"--max-connections-per-ip", "256", NULL};
  struct server_opts opts = {.extra_args = args};
  return start_with(state, &opts);
}

static int setup_slow_heads_server(void **state) {
  static const char *const args[] = {"--header-deadline", "2", "--max-connections-per-ip", "8",
                                     NULL};
  struct server_opts opts = {.extra_args = args};
  return start_with(state, &opts);
}

static int setup_two_per_client_server(void **state) {
  static const char *const args[] = {"--max-connections-per-ip", "2", NULL};
  struct server_opts opts = {.extra_args = args};
  return start_with(state, &opts);
}

/* Stops the server; a non-zero exit after SIGTERM fails the test. */
static int teardown_server(void **state) {
  int rc = server_stop(*state);
  *state = NULL;
  return rc;
}

/* ---------------------------------------------------------------- spec_check itself */

/* A small document exercising every validator keyword and the response rules. */
static const char SELFTEST_DOC[] =
    "{\"openapi\":\"3.1.0\",\"info\":{\"title\":\"t\",\"version\":\"1\"},"
    "\"x-opforge-unrouted-responses\":{\"404\":{\"description\":\"nf\"}},"
    "\"paths\":{"
    " \"/x/{id}\":{\"get\":{\"responses\":{"
    "   \"200\":{\"description\":\"\",\"content\":{\"application/json\":"
    "     {\"schema\":{\"$ref\":\"#/components/schemas/T\"}}}},"
    "   \"404\":{\"description\":\"\",\"headers\":{\"H\":{\"required\":true,"
    "     \"schema\":{\"type\":\"string\",\"pattern\":\"^a+$\"}}}}}}},"
    " \"/x/lit\":{\"get\":{\"responses\":{\"204\":{\"description\":\"\"}}}},"
    " \"/s\":{\"get\":{\"responses\":{\"200\":{\"description\":\"\",\"content\":{"
    "   \"text/event-stream\":{\"schema\":{\"type\":\"object\",\"required\":[\"id\"]},"
    "   \"x-opforge-event-data\":{\"type\":\"object\",\"required\":[\"seq\",\"type\"]}}}}}}},"
    " \"/p\":{\"x-opforge-pending\":true,\"get\":{\"responses\":{\"200\":{\"description\":\"\"}}}},"
    " \"/m\":{\"get\":{\"responses\":{\"200\":{\"description\":\"\",\"content\":{"
    "   \"text/plain; version=0.0.4\":{\"schema\":{\"type\":\"string\"}}}}}}}"
    "},"
    "\"components\":{\"schemas\":{\"T\":{\"type\":\"object\",\"required\":[\"a\"],"
    " \"additionalProperties\":false,\"properties\":{"
    "  \"a\":{\"type\":[\"integer\",\"null\"],\"minimum\":1,\"maximum\":3},"
    "  \"s\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3,\"pattern\":\"^[a-z]+$\"},"
    "  \"s2\":{\"type\":\"string\",\"maxLength\":2},"
    "  \"e\":{\"enum\":[\"x\",\"y\"]},"
    "  \"c\":{\"const\":5},"
    "  \"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2},"
    "  \"o\":{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":\"number\"}]},"
    "  \"u\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"boolean\"}]},"
    "  \"n\":{\"not\":{\"type\":\"null\"}},"
    "  \"al\":{\"allOf\":[{\"type\":\"integer\"},{\"maximum\":2}]},"
    "  \"d\":{\"type\":\"string\",\"format\":\"date-time\"},"
    "  \"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "  \"x\":{\"exclusiveMinimum\":0,\"exclusiveMaximum\":1},"
    "  \"r\":{\"$ref\":\"#/components/schemas/R\"}}},"
    " \"R\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"boolean\"}},"
    "  \"additionalProperties\":{\"type\":\"integer\"}}}}}";

static struct spec *load_selftest_doc(const char *text) {
  json_error_t jerr;
  json_t *doc = json_loads(text, 0, &jerr);
  if (!doc)
    print_error("self-test document: %s at %d:%d\n", jerr.text, jerr.line, jerr.column);
  assert_non_null(doc);
  struct spec *spec = NULL;
  char err[512];
  int rc = spec_load(doc, &spec, err, sizeof err);
  json_decref(doc);
  if (rc != 0)
    print_error("spec_load: %s\n", err);
  assert_int_equal(rc, 0);
  return spec;
}

static void test_spec_validator(void **state) {
  (void)state;
  struct spec *spec = load_selftest_doc(SELFTEST_DOC);
  const json_t *t = json_object_get(
      json_object_get(json_object_get(spec_document(spec), "components"), "schemas"), "T");
  static const struct {
    const char *value;
    const char *error; /* NULL: valid; else a substring of the message */
  } cases[] = {
    {"{\"a\":1}", NULL},
    {"{\"a\":null}", NULL},
    {"{\"a\":3.0}", NULL},
    {"{}", "$: required property 'a' is missing"},
    {"{\"a\":0}", "$.a: 0 is below minimum 1"},
    {"{\"a\":4}", "above maximum"},
    {"{\"a\":1.5}", "$.a: expected type [\"integer\",\"null\"], got number"},
    {"{\"a\":\"1\"}", "got string"},
    {"{\"a\":1,\"z\":1}", "property 'z' is not allowed"},
    {"{\"a\":1,\"s\":\"ab\"}", NULL},
    {"{\"a\":1,\"s\":\"a\"}", "$.s: length 1 is below minLength 2"},
    {"{\"a\":1,\"s\":\"abcd\"}", "above maxLength 3"},
    {"{\"a\":1,\"s\":\"AB\"}", "does not match pattern"},
    {"{\"a\":1,\"s2\":\"\xc3\xa9\xc3\xa9\"}", NULL}, /* 2 code points, 4 bytes */
    {"{\"a\":1,\"s2\":\"abc\"}", "above maxLength 2"},
    {"{\"a\":1,\"e\":\"y\"}", NULL},
    {"{\"a\":1,\"e\":\"z\"}", "$.e: value \"z\" is not in enum"},
    {"{\"a\":1,\"c\":5.0}", NULL},
    {"{\"a\":1,\"c\":6}", "expected const 5"},
    {"{\"a\":1,\"l\":[\"p\",\"q\"]}", NULL},
    {"{\"a\":1,\"l\":[\"p\",1]}", "$.l[1]: expected type string"},
    {"{\"a\":1,\"l\":[\"p\",\"q\",\"r\"]}", "above maxItems 2"},
    {"{\"a\":1,\"o\":\"s\"}", NULL},
    {"{\"a\":1,\"o\":2.5}", NULL},
    {"{\"a\":1,\"o\":2}", "matches 2 oneOf branches"},
    {"{\"a\":1,\"o\":null}", "matches 0 oneOf branches"},
    {"{\"a\":1,\"u\":true}", NULL},
    {"{\"a\":1,\"u\":1}", "matches no anyOf branch"},
    {"{\"a\":1,\"n\":null}", "matches the schema under 'not'"},
    {"{\"a\":1,\"n\":0}", NULL},
    {"{\"a\":1,\"al\":2}", NULL},
    {"{\"a\":1,\"al\":3}", "above maximum 2"},
    {"{\"a\":1,\"d\":\"2026-11-29T07:42:04.123Z\"}", NULL},
    {"{\"a\":1,\"d\":\"2026-11-29 07:42\"}", "is not a valid date-time"},
    {"{\"a\":1,\"id\":\"3f2b8c1e-9d4a-4b7e-8c21-5a6f0e9d1b23\"}", NULL},
    {"{\"a\":1,\"id\":\"3f2b8c1e9d4a4b7e8c215a6f0e9d1b23\"}", "is not a valid uuid"},
    {"{\"a\":1,\"x\":0.5}", NULL},
    {"{\"a\":1,\"x\":0}", "not above exclusiveMinimum 0"},
    {"{\"a\":1,\"x\":1}", "not below exclusiveMaximum 1"},
    {"{\"a\":1,\"r\":{\"k\":true,\"extra\":3}}", NULL},
    {"{\"a\":1,\"r\":{\"k\":true,\"extra\":\"3\"}}", "$.r.extra: expected type integer"},
    {"[]", "expected type object, got array"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *value = json_loads(cases[i].value, JSON_DECODE_ANY, NULL);
    assert_non_null(value);
    char err[512] = "";
    int rc = spec_validate(spec, t, value, err, sizeof err);
    json_decref(value);
    bool ok = cases[i].error ? rc != 0 && strstr(err, cases[i].error) != NULL : rc == 0;
    if (!ok) {
      print_error("case %zu %s: want %s, got rc %d '%s'\n", i, cases[i].value,
                  cases[i].error ? cases[i].error : "valid", rc, err);
      fail();
    }
  }
  spec_free(spec);
}

/* Checks one hand-made exchange; error NULL means it must pass. */
static void expect_exchange(struct spec *spec, const char *method, const char *target,
                            long status, const char *ctype, const char *header_h,
                            const char *body, const char *error) {
  struct spec_header headers[2];
  size_t n = 0;
  if (ctype)
    headers[n++] = (struct spec_header){"content-type", ctype};
  if (header_h)
    headers[n++] = (struct spec_header){"H", header_h};
  struct spec_exchange ex = {.method = method, .target = target, .status = status,
                             .headers = headers, .n_headers = n, .body = body,
                             .body_len = body ? strlen(body) : 0};
  char err[1024] = "";
  int rc = spec_check_response(spec, &ex, err, sizeof err);
  bool ok = error ? rc != 0 && strstr(err, error) != NULL : rc == 0;
  if (!ok) {
    print_error("%s %s -> %ld: want %s, got rc %d '%s'\n", method, target, status,
                error ? error : "valid", rc, err);
    fail();
  }
}

static void test_spec_responses(void **state) {
  (void)state;
  struct spec *spec = load_selftest_doc(SELFTEST_DOC);
  const char *json = "application/json";
  expect_exchange(spec, "GET", "/x/lit", 204, NULL, NULL, NULL, NULL);
  expect_exchange(spec, "GET", "/x/lit?q=1", 204, NULL, NULL, "x", "without a body");
  expect_exchange(spec, "GET", "/x/abc", 200, "application/json; charset=utf-8", NULL,
                  "{\"a\":2}", NULL);
  expect_exchange(spec, "GET", "/x/abc", 200, json, NULL, "{\"a\":9}", "body: $.a: 9 is above");
  expect_exchange(spec, "GET", "/x/abc", 200, "text/html", NULL, "{\"a\":2}",
                  "Content-Type 'text/html' is not documented");
  expect_exchange(spec, "GET", "/x/abc", 200, NULL, NULL, "{\"a\":2}",
                  "Content-Type header is missing");
  expect_exchange(spec, "GET", "/x/abc", 200, json, NULL, "{\"a\":", "body is not JSON");
  expect_exchange(spec, "GET", "/x/abc", 404, NULL, NULL, NULL, "required header H");
  expect_exchange(spec, "GET", "/x/abc", 404, NULL, "aaa", NULL, NULL);
  expect_exchange(spec, "GET", "/x/abc", 404, NULL, "b", NULL, "header H: $: \"b\" does not");
  expect_exchange(spec, "GET", "/x/abc", 500, json, NULL, "{}",
                  "status 500 is not documented (for this operation)");
  expect_exchange(spec, "POST", "/x/abc", 405, json, NULL, "{}",
                  "path exists without this method");
  expect_exchange(spec, "GET", "/nope", 404, NULL, NULL, NULL, NULL);
  expect_exchange(spec, "GET", "/nope", 400, json, NULL, "{}", "unknown path");
  expect_exchange(spec, "GET", "/x/", 404, NULL, NULL, NULL, NULL); /* empty {id} */
  expect_exchange(spec, "GET", "/m", 200, "text/plain; version=0.0.4", NULL, "a 1\n", NULL);
  expect_exchange(spec, "GET", "/m", 200, "text/plain", NULL, "a 1\n", "not documented");
  expect_exchange(spec, "GET", "/m", 200, "text/plain; version=0.0.4", NULL, "\xff",
                  "not UTF-8");
  const char *sse_ok = "id: 1\nevent: a\ndata: {\"seq\":1,\"type\":\"a\"}\n\n"
                       ": keep-alive\n\n"
                       "id: 2\r\nevent: b\r\ndata: {\"seq\":2,\r\ndata: \"type\":\"b\"}\r\n\r\n";
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL, sse_ok, NULL);
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL,
                  "id: 3\nevent: a\ndata: {\"seq\":1,\"type\":\"a\"}\n\n", "differs from data.seq");
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL,
                  "id: 1\nevent: b\ndata: {\"seq\":1,\"type\":\"a\"}\n\n",
                  "differs from data.type");
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL,
                  "id: 1\nevent: a\ndata: {\"seq\":1}\n\n", "required property 'type'");
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL,
                  "id: 1\nevent: a\ndata: {\"seq\":1,\"type\":\"a\"}\n", "ends inside an event");
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL,
                  "id: 2\nevent: a\ndata: {\"seq\":2,\"type\":\"a\"}\n\n"
                  "id: 1\nevent: a\ndata: {\"seq\":1,\"type\":\"a\"}\n\n",
                  "does not increase");
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL, "foo: 1\n\n",
                  "unknown event-stream field 'foo'");
  /* The media type's schema describes one frame ({"id","event","data"} as strings). */
  expect_exchange(spec, "GET", "/s", 200, "text/event-stream", NULL,
                  "event: a\ndata: {\"seq\":1,\"type\":\"a\"}\n\n",
                  "event frame: $: required property 'id' is missing");
  /* /p is pending, so only it may stay unexercised. */
  FILE *devnull = fopen("/dev/null", "w");
  assert_non_null(devnull);
  assert_int_equal(spec_report_unexercised(spec, devnull), 0);
  spec_free(spec);
  spec = load_selftest_doc(SELFTEST_DOC);
  assert_int_equal(spec_report_unexercised(spec, devnull), 4);
  fclose(devnull);
  spec_free(spec);
}

/* spec_load refuses documents whose schemas the validator would not fully check. */
static void test_spec_lint(void **state) {
  (void)state;
  static const struct {
    const char *schema;
    const char *error;
  } cases[] = {
    {"{\"type\":\"object\",\"minProperties\":1}", "unsupported schema keyword 'minProperties'"},
    {"{\"$ref\":\"#/components/schemas/Nope\"}", "does not resolve"},
    {"{\"type\":\"string\",\"pattern\":\"([\"}", "does not compile"},
    {"{\"type\":\"strin\"}", "bad 'type'"},
    {"{\"properties\":{\"a\":{\"items\":{\"propertyNames\":true}}}}", "'propertyNames'"},
    {"{\"oneOf\":[]}", "non-empty array"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = fmt("{\"paths\":{\"/a\":{\"get\":{\"responses\":{\"200\":{\"description\":"
                     "\"\",\"content\":{\"application/json\":{\"schema\":%s}}}}}}},"
                     "\"components\":{\"schemas\":{}}}",
                     cases[i].schema);
    json_t *doc = json_loads(text, 0, NULL);
    assert_non_null(doc);
    struct spec *spec = NULL;
    char err[512] = "";
    int rc = spec_load(doc, &spec, err, sizeof err);
    json_decref(doc);
    free(text);
    if (rc == 0 || !strstr(err, cases[i].error)) {
      print_error("lint case %zu: want '%s', got rc %d '%s'\n", i, cases[i].error, rc, err);
      spec_free(spec);
      fail();
    }
  }
}

/* ---------------------------------------------------------------- the spec itself */

/* The codes an error response may carry, from its schema's
 * allOf[1].properties.error.properties.code (enum or const). Borrowed; NULL if none. */
static json_t *response_codes(const json_t *doc, const json_t *resp, json_t **ret_single) {
  const char *ref = json_string_value(json_object_get(resp, "$ref"));
  if (ref && strncmp(ref, "#/components/responses/", 23) == 0)
    resp = json_object_get(json_object_get(json_object_get(doc, "components"), "responses"),
                           ref + 23);
  json_t *schema = json_object_get(
      json_object_get(json_object_get(resp, "content"), "application/json"), "schema");
  const json_t *node = json_array_get(json_object_get(schema, "allOf"), 1);
  static const char *const walk[] = {"properties", "error", "properties", "code"};
  for (size_t i = 0; i < sizeof walk / sizeof walk[0]; i++)
    node = json_object_get(node, walk[i]);
  json_t *code = (json_t *)node;
  *ret_single = json_object_get(code, "const");
  return json_object_get(code, "enum");
}

/* Every documented error response names codes whose table status is that response's
 * status; returns the number of mismatches (printed). */
static size_t check_response_map(const json_t *doc, const json_t *responses, const char *where) {
  size_t bad = 0;
  const char *status;
  json_t *resp;
  json_object_foreach((json_t *)responses, status, resp) {
    json_t *single = NULL;
    json_t *codes = response_codes(doc, resp, &single);
    long want = strtol(status, NULL, 10);
    if (want >= 400 && !codes && !single) {
      print_error("%s %s: error response names no codes\n", where, status);
      bad++;
    }
    json_t *list = codes ? json_incref(codes) : single ? json_pack("[O]", single) : NULL;
    size_t i;
    json_t *code;
    json_array_foreach(list, i, code) {
      enum api_error e = api_error_from_code(json_string_value(code));
      if (e == API_ERR__COUNT || (long)api_error_info(e)->status != want) {
        print_error("%s %s: code %s has status %u in server/errors.c\n", where, status,
                    json_string_value(code), e == API_ERR__COUNT ? 0 : api_error_info(e)->status);
        bad++;
      }
    }
    json_decref(list);
  }
  return bad;
}

/* openapi.yaml's ErrorCode is server/errors.c's table in the same order, and each error
 * response only names codes of its own status. */
static void test_spec_matches_error_table(void **state) {
  (void)state;
  const json_t *doc = spec_document(harness_spec());
  const json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
  const json_t *codes = json_object_get(json_object_get(schemas, "ErrorCode"), "enum");
  assert_int_equal(json_array_size(codes), API_ERR__COUNT);
  for (unsigned i = 0; i < API_ERR__COUNT; i++)
    assert_string_equal(json_string_value(json_array_get(codes, i)),
                        api_error_info((enum api_error)i)->code);
  size_t bad = check_response_map(doc, json_object_get(doc, "x-opforge-unrouted-responses"),
                                  "unrouted");
  const char *tpl;
  json_t *item;
  json_object_foreach(json_object_get(doc, "paths"), tpl, item) {
    const char *method;
    json_t *op;
    json_object_foreach(item, method, op) {
      const json_t *responses = json_object_get(op, "responses");
      if (responses) {
        char *where = fmt("%s %s", method, tpl);
        bad += check_response_map(doc, responses, where);
        free(where);
      }
    }
  }
  assert_int_equal(bad, 0);
}

/* ---------------------------------------------------------------- operations */

static void test_health_ready_openapi(void **state) {
  struct server *server = *state;
  struct http_response *r = http_get(server, "/healthz");
  assert_int_equal(r->status, 200);
  json_t *doc = http_json(r);
  assert_json(doc,
              harness_pg()
                  ? "{\"status\":\"ok\",\"sandbox\":{\"mode\":\"unused\"},\"store\":\"postgresql\"}"
                  : "{\"status\":\"ok\",\"sandbox\":{\"mode\":\"unused\"},\"store\":\"sqlite\"}",
              "/healthz");
  json_decref(doc);
  http_response_free(r);

  r = http_get(server, "/readyz");
  assert_int_equal(r->status, 200);
  doc = http_json(r);
  assert_string_equal(json_string_value(json_object_get(doc, "status")), "ready");
  assert_true(json_integer_value(json_object_get(doc, "schema_version")) >= 1);
  json_decref(doc);
  http_response_free(r);

  /* The served document is the one built from openapi.yaml. */
  r = http_get(server, "/openapi.json");
  assert_int_equal(r->status, 200);
  doc = http_json(r);
  json_error_t jerr;
  json_t *built = json_load_file(harness_openapi_path(), 0, &jerr);
  assert_non_null(built);
  assert_true(json_equal(doc, built));
  json_decref(built);
  json_decref(doc);
  http_response_free(r);
}

/* ---------------------------------------------------------------- submissions */

#define SUB(label, body, code, field) {label, "POST", "/v1/tasks", body, 400, code, field}
#define SUB_OK(label, body) {label, "POST", "/v1/tasks", body, 202, NULL, NULL}

static const struct step submission_steps[] = {
  SUB_OK("minimal submission", "{\"reference\":@REF@}"),
  SUB("unknown top-level key", "{\"reference\":@REF@,\"bogus\":1}", "unknown_field", "bogus"),
  SUB("unknown key in budget", "{\"reference\":@REF@,\"budget\":{\"steps\":5,\"turbo\":true}}",
      "unknown_field", "budget.turbo"),
  SUB("unknown key in tolerance", "{\"reference\":@REF@,\"tolerance\":{\"eps\":0.1}}",
      "unknown_field", "tolerance.eps"),
  SUB("unknown key in llm", "{\"reference\":@REF@,\"llm\":{\"base_url\":\"http://x\"}}",
      "unknown_field", "llm.base_url"),
  SUB("name is a number", "{\"reference\":@REF@,\"name\":5}", "invalid_field", "name"),
  SUB("name is empty", "{\"reference\":@REF@,\"name\":\"\"}", "invalid_field", "name"),
  SUB("name has a space", "{\"reference\":@REF@,\"name\":\"bad name\"}", "invalid_field", "name"),
  SUB("name has a slash", "{\"reference\":@REF@,\"name\":\"a/b\"}", "invalid_field", "name"),
  SUB("name of 129 chars", "{\"reference\":@REF@,\"name\":\"@N129@\"}", "invalid_field", "name"),
  SUB_OK("name of 128 chars", "{\"reference\":@REF@,\"name\":\"@N128@\"}"),
  SUB_OK("name with every allowed char", "{\"reference\":@REF@,\"name\":\"36_RMS.Norm-v2\"}"),
  SUB("reference is a number", "{\"reference\":42}", "invalid_field", "reference"),
  SUB("reference is null", "{\"reference\":null}", "invalid_field", "reference"),
  SUB("reference is empty", "{\"reference\":\"\"}", "invalid_reference", "reference"),
  SUB("reference lacks class Model",
      "{\"reference\":\"def get_inputs():\\n  pass\\ndef get_init_inputs():\\n  pass\\n\"}",
      "invalid_reference", "reference"),
  SUB("reference lacks get_inputs",
      "{\"reference\":\"class Model(object):\\n  pass\\ndef get_init_inputs():\\n  pass\\n\"}",
      "invalid_reference", "reference"),
  SUB("reference lacks get_init_inputs",
      "{\"reference\":\"class Model(object):\\n  pass\\ndef get_inputs():\\n  pass\\n\"}",
      "invalid_reference", "reference"),
  SUB("reference is not UTF-8", "{\"reference\":\"class Model:\xff\"}", "bad_json", FIELD_NULL),
  SUB("missing reference", "{\"name\":\"x\"}", "missing_field", "reference"),
  SUB("empty object", "{}", "missing_field", "reference"),
  SUB("proposer unknown", "{\"reference\":@REF@,\"proposer\":\"gpt\"}", "invalid_field",
      "proposer"),
  SUB("proposer not a string", "{\"reference\":@REF@,\"proposer\":1}", "invalid_field",
      "proposer"),
  SUB_OK("proposer test", "{\"reference\":@REF@,\"proposer\":\"test\"}"),
  SUB("policy unknown", "{\"reference\":@REF@,\"policy\":\"greedy\"}", "invalid_field", "policy"),
  SUB_OK("policy tree", "{\"reference\":@REF@,\"policy\":\"tree\"}"),
  SUB("budget not an object", "{\"reference\":@REF@,\"budget\":\"x\"}", "invalid_field",
      "budget"),
  SUB("budget.steps 0", "{\"reference\":@REF@,\"budget\":{\"steps\":0}}", "invalid_field",
      "budget.steps"),
  SUB("budget.steps 1001", "{\"reference\":@REF@,\"budget\":{\"steps\":1001}}",
      "invalid_field", "budget.steps"),
  SUB("budget.steps 1.5", "{\"reference\":@REF@,\"budget\":{\"steps\":1.5}}", "invalid_field",
      "budget.steps"),
  SUB("budget.steps a string", "{\"reference\":@REF@,\"budget\":{\"steps\":\"20\"}}",
      "invalid_field", "budget.steps"),
  SUB_OK("budget.steps 1", "{\"reference\":@REF@,\"budget\":{\"steps\":1}}"),
  SUB_OK("budget.steps 1000", "{\"reference\":@REF@,\"budget\":{\"steps\":1000}}"),
  SUB("budget.seconds 0", "{\"reference\":@REF@,\"budget\":{\"seconds\":0}}", "invalid_field",
      "budget.seconds"),
  SUB("budget.seconds 86401", "{\"reference\":@REF@,\"budget\":{\"seconds\":86401}}",
      "invalid_field", "budget.seconds"),
  SUB_OK("budget.seconds 86400", "{\"reference\":@REF@,\"budget\":{\"seconds\":86400}}"),
  SUB("budget.llm_usd negative", "{\"reference\":@REF@,\"budget\":{\"llm_usd\":-0.01}}",
      "invalid_field", "budget.llm_usd"),
  SUB("budget.llm_usd 1000.01", "{\"reference\":@REF@,\"budget\":{\"llm_usd\":1000.01}}",
      "invalid_field", "budget.llm_usd"),
  SUB("budget.llm_usd a string", "{\"reference\":@REF@,\"budget\":{\"llm_usd\":\"1\"}}",
      "invalid_field", "budget.llm_usd"),
  SUB_OK("budget.llm_usd 0", "{\"reference\":@REF@,\"budget\":{\"llm_usd\":0}}"),
  SUB_OK("budget.llm_usd 1000", "{\"reference\":@REF@,\"budget\":{\"llm_usd\":1000}}"),
  SUB("precision fp16", "{\"reference\":@REF@,\"precision\":\"fp16\"}", "invalid_field",
      "precision"),
  SUB("tolerance not an object", "{\"reference\":@REF@,\"tolerance\":0.1}", "invalid_field",
      "tolerance"),
  SUB("tolerance.atol 0", "{\"reference\":@REF@,\"tolerance\":{\"atol\":0}}", "invalid_field",
      "tolerance.atol"),
  SUB("tolerance.atol 1.01", "{\"reference\":@REF@,\"tolerance\":{\"atol\":1.01}}",
      "invalid_field", "tolerance.atol"),
  SUB("tolerance.rtol a string", "{\"reference\":@REF@,\"tolerance\":{\"rtol\":\"x\"}}",
      "invalid_field", "tolerance.rtol"),
  SUB("tolerance.rtol negative", "{\"reference\":@REF@,\"tolerance\":{\"rtol\":-1e-3}}",
      "invalid_field", "tolerance.rtol"),
  SUB_OK("tolerance.atol 1", "{\"reference\":@REF@,\"tolerance\":{\"atol\":1}}"),
  SUB("trials 0", "{\"reference\":@REF@,\"trials\":0}", "invalid_field", "trials"),
  SUB("trials 51", "{\"reference\":@REF@,\"trials\":51}", "invalid_field", "trials"),
  SUB("trials true", "{\"reference\":@REF@,\"trials\":true}", "invalid_field", "trials"),
  SUB_OK("trials 50", "{\"reference\":@REF@,\"trials\":50}"),
  SUB("seed -1", "{\"reference\":@REF@,\"seed\":-1}", "invalid_field", "seed"),
  SUB("seed 2^31", "{\"reference\":@REF@,\"seed\":2147483648}", "invalid_field", "seed"),
  SUB_OK("seed 2^31-1", "{\"reference\":@REF@,\"seed\":2147483647}"),
  SUB_OK("seed 0", "{\"reference\":@REF@,\"seed\":0}"),
  SUB("llm not an object", "{\"reference\":@REF@,\"llm\":\"x\"}", "invalid_field", "llm"),
  SUB("llm.model empty", "{\"reference\":@REF@,\"llm\":{\"model\":\"\"}}", "invalid_field",
      "llm.model"),
  SUB("llm.model of 129 chars", "{\"reference\":@REF@,\"llm\":{\"model\":\"@N129@\"}}",
      "invalid_field", "llm.model"),
  SUB("llm.model a number", "{\"reference\":@REF@,\"llm\":{\"model\":5}}", "invalid_field",
      "llm.model"),
  SUB_OK("llm.model null", "{\"reference\":@REF@,\"llm\":{\"model\":null}}"),
  SUB_OK("llm.model named", "{\"reference\":@REF@,\"llm\":{\"model\":\"deepseek-reasoner\"}}"),
  SUB("body is an array", "[]", "bad_json", FIELD_NULL),
  SUB("body is truncated JSON", "{\"reference\":", "bad_json", FIELD_NULL),
  SUB("body is not JSON", "reference=1", "bad_json", FIELD_NULL),
  SUB("body is empty", "", "bad_json", FIELD_NULL),
};

static void test_submission_validation(void **state) {
  run_steps(*state, submission_steps, sizeof submission_steps / sizeof submission_steps[0],
            NULL);
}

/* Builds {"reference": REF padded with a trailing comment to exactly bytes bytes}.
 * Caller frees. */
static char *reference_of_size(size_t bytes) {
  size_t base = strlen(REF);
  assert_true(bytes > base + 2);
  char *ref = malloc(bytes + 1);
  assert_non_null(ref);
  memcpy(ref, REF, base);
  ref[base] = '#';
  memset(ref + base + 1, 'x', bytes - base - 1);
  ref[bytes] = '\0';
  return ref;
}

static void test_reference_size_limit(void **state) {
  struct server *server = *state;
  for (size_t bytes = REF_MAX_BYTES; bytes <= REF_MAX_BYTES + 1; bytes++) {
    char *ref = reference_of_size(bytes);
    char *quoted = json_quote(ref);
    char *body = fmt("{\"reference\":%s}", quoted);
    struct http_response *r = http_send(server, "POST", "/v1/tasks", body, NULL);
    if (bytes == REF_MAX_BYTES) {
      assert_int_equal(r->status, 202);
      json_t *task = http_json(r);
      assert_int_equal(json_integer_value(json_object_get(task, "reference_bytes")), bytes);
      json_decref(task);
    } else {
      assert_error(r, 400, "invalid_reference", "reference");
    }
    http_response_free(r);
    free(body);
    free(quoted);
    free(ref);
  }
}

/* The options a task reports after submitting body (with @REF@). */
static json_t *submitted_options(struct server *server, const char *tmpl) {
  char *body = expand(tmpl, NULL);
  struct http_response *r = http_send(server, "POST", "/v1/tasks", body, NULL);
  if (r->status != 202)
    print_error("%s -> %ld %.300s\n", tmpl, r->status, r->body);
  assert_int_equal(r->status, 202);
  json_t *task = http_json(r);
  json_t *options = json_incref(json_object_get(task, "options"));
  json_decref(task);
  http_response_free(r);
  free(body);
  return options;
}

/* Drops the options the server fills in itself (the effective search settings and the
 * memory namespace; tests/api/test_memory_api.c checks them) after checking they exist. */
static void drop_server_options(json_t *o) {
  assert_true(json_is_object(json_object_get(o, "search")));
  assert_string_equal(json_string_value(json_object_get(o, "memory")), "default");
  json_object_del(o, "search");
  json_object_del(o, "memory");
}

static void test_submission_defaults(void **state) {
  struct server *server = *state;
  json_t *o = submitted_options(server, "{\"reference\":@REF@}");
  drop_server_options(o);
  assert_json(o, "{\"proposer\":\"builtin\",\"policy\":\"htam+tree\","
                 "\"budget\":{\"steps\":20,\"seconds\":900,\"llm_usd\":0.5,\"stop_at_floor\":0.97},"
                 "\"precision\":\"fp32\",\"tolerance\":{\"atol\":0.0001,\"rtol\":0.0001},"
                 "\"trials\":5,\"seed\":42,\"llm\":{\"model\":null}}",
              "default options");
  json_decref(o);
  static const char *const loose[] = {"tf32", "bf16"};
  for (size_t i = 0; i < 2; i++) {
    char *tmpl = fmt("{\"reference\":@REF@,\"precision\":\"%s\"}", loose[i]);
    o = submitted_options(server, tmpl);
    assert_json(json_object_get(o, "tolerance"), "{\"atol\":0.01,\"rtol\":0.01}", loose[i]);
    json_decref(o);
    free(tmpl);
  }
  /* Partial objects keep the defaults of the keys not given. */
  o = submitted_options(server, "{\"reference\":@REF@,\"precision\":\"tf32\","
                                "\"tolerance\":{\"atol\":0.5},\"budget\":{\"steps\":3}}");
  assert_json(json_object_get(o, "tolerance"), "{\"atol\":0.5,\"rtol\":0.01}", "tolerance");
  assert_json(json_object_get(o, "budget"), "{\"steps\":3,\"seconds\":900,\"llm_usd\":0.5,\"stop_at_floor\":0.97}",
              "budget");
  json_decref(o);
  static const char full[] =
      "{\"proposer\":\"llm\",\"policy\":\"flat\","
      "\"budget\":{\"steps\":7,\"seconds\":60,\"llm_usd\":2.5,\"stop_at_floor\":0.5},"
      "\"precision\":\"bf16\","
      "\"tolerance\":{\"atol\":0.002,\"rtol\":0.003},\"trials\":9,\"seed\":7,"
      "\"llm\":{\"model\":\"deepseek-reasoner\"}}";
  char *tmpl = fmt("{\"reference\":@REF@,\"name\":\"full\",%s", full + 1);
  o = submitted_options(server, tmpl);
  drop_server_options(o);
  assert_json(o, full, "explicit options");
  json_decref(o);
  free(tmpl);
}

/* Loads the RMSNorm task from the shared KernelBench copy, or NULL (printed) when the
 * checkout has none. Caller frees. */
static char *load_kernelbench(const char *file) {
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  if (!root)
    return NULL;
  char *path = fmt("%s/../shared/kernelbench/level1/%s", root, file);
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("note: %s absent; using the built-in reference only\n", path);
    free(path);
    return NULL;
  }
  free(path);
  char *text = calloc(1, REF_MAX_BYTES + 1);
  assert_non_null(text);
  size_t n = fread(text, 1, REF_MAX_BYTES, f);
  fclose(f);
  text[n] = '\0';
  return text;
}

/* Submits source under name and checks the 202, the list item and GET of the task. */
static void create_and_read_back(struct server *server, const char *name, const char *source) {
  char *quoted = json_quote(source);
  char *body = fmt("{\"name\":\"%s\",\"reference\":%s}", name, quoted);
  struct http_response *r = http_send(server, "POST", "/v1/tasks", body, NULL);
  assert_int_equal(r->status, 202);
  json_t *created = http_json(r);
  const char *id = json_string_value(json_object_get(created, "id"));
  char *self = fmt("/v1/tasks/%s", id), *events = fmt("/v1/tasks/%s/events", id);
  assert_string_equal(http_header(r, "Location"), self);
  assert_string_equal(json_string_value(json_object_get(created, "name")), name);
  assert_string_equal(json_string_value(json_object_get(created, "status")), "queued");
  assert_false(json_is_true(json_object_get(created, "cancel_requested")));
  assert_int_equal(json_integer_value(json_object_get(created, "reference_bytes")),
                   strlen(source));
  assert_null(json_object_get(created, "reference"));
  assert_json(json_object_get(created, "progress"),
              "{\"step\":0,\"budget_steps\":20,\"best_speedup\":null,\"best_ms\":null,"
              "\"correct\":0,\"candidates\":0}",
              "progress");
  assert_true(json_is_null(json_object_get(created, "baselines")));
  assert_true(json_is_null(json_object_get(created, "error")));
  json_t *links = json_object_get(created, "links");
  assert_string_equal(json_string_value(json_object_get(links, "self")), self);
  assert_string_equal(json_string_value(json_object_get(links, "events")), events);
  http_response_free(r);

  r = http_get(server, self);
  assert_int_equal(r->status, 200);
  json_t *got = http_json(r);
  assert_string_equal(json_string_value(json_object_get(got, "reference")), source);
  json_object_del(got, "reference");
  /* No server here has worker slots (--gpus none): GET says why the task waits. */
  json_t *waiting = json_object_get(got, "waiting");
  assert_string_equal(json_string_value(json_object_get(waiting, "reason")),
                      "no live server has worker slots (each runs with --gpus none, or none "
                      "is running); the task waits for one");
  assert_true(json_is_null(json_object_get(waiting, "device")));
  assert_int_equal(json_array_size(json_object_get(waiting, "available")), 0);
  json_object_del(got, "waiting");
  assert_true(json_equal(got, created));
  json_decref(got);
  http_response_free(r);
  json_decref(created);
  free(self);
  free(events);
  free(body);
  free(quoted);
}

static void test_create_and_get(void **state) {
  struct server *server = *state;
  create_and_read_back(server, "relu", REF);
  /* reference_bytes counts bytes, not characters. */
  char *utf8 = fmt("%s# caf\xc3\xa9 \xe2\x9c\x93\n", REF);
  create_and_read_back(server, "utf8", utf8);
  free(utf8);
  char *rms = load_kernelbench("36_RMSNorm_.py");
  if (rms)
    create_and_read_back(server, "36_RMSNorm", rms);
  free(rms);
}

/* ---------------------------------------------------------------- listing */

/* GETs path and checks the page: the item names in order (space-separated) and whether
 * next_cursor is set. Returns next_cursor (caller frees) or NULL. */
static char *expect_page(struct server *server, const char *path, const char *names,
                         bool more) {
  struct http_response *r = http_get(server, path);
  if (r->status != 200)
    print_error("GET %s -> %ld %.300s\n", path, r->status, r->body);
  assert_int_equal(r->status, 200);
  json_t *page = http_json(r);
  char got[1024] = "";
  size_t used = 0, i;
  json_t *item;
  json_array_foreach(json_object_get(page, "items"), i, item) {
    used += (size_t)snprintf(got + used, sizeof got - used, "%s%s", i ? " " : "",
                             json_string_value(json_object_get(item, "name")));
    if (used >= sizeof got)
      used = sizeof got - 1;
  }
  if (strcmp(got, names) != 0)
    print_error("GET %s: items '%s', want '%s'\n", path, got, names);
  assert_string_equal(got, names);
  json_t *next = json_object_get(page, "next_cursor");
  if (more != json_is_string(next))
    print_error("GET %s: next_cursor %s, want %s\n", path, json_is_null(next) ? "null" : "set",
                more ? "set" : "null");
  assert_int_equal(more, json_is_string(next));
  char *cursor = more ? strdup(json_string_value(next)) : NULL;
  json_decref(page);
  http_response_free(r);
  return cursor;
}

/* base + "&cursor=" + the escaped cursor (caller frees). */
static char *with_cursor(const char *base, const char *cursor) {
  char *escaped = curl_easy_escape(NULL, cursor, 0);
  assert_non_null(escaped);
  char *path = fmt("%s&cursor=%s", base, escaped);
  curl_free(escaped);
  return path;
}

static void test_list_paging(void **state) {
  struct server *server = *state;
  char *ids[7];
  for (int i = 0; i < 7; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", i + 1);
    ids[i] = create_task(server, name);
  }
  char *c1 = expect_page(server, "/v1/tasks?limit=3", "t7 t6 t5", true);
  char *p2 = with_cursor("/v1/tasks?limit=3", c1);
  char *c2 = expect_page(server, p2, "t4 t3 t2", true);
  char *p3 = with_cursor("/v1/tasks?limit=3", c2);
  assert_null(expect_page(server, p3, "t1", false));
  free(c1), free(c2), free(p2), free(p3);
  assert_null(expect_page(server, "/v1/tasks", "t7 t6 t5 t4 t3 t2 t1", false));
  assert_null(expect_page(server, "/v1/tasks?limit=7", "t7 t6 t5 t4 t3 t2 t1", false));
  assert_null(expect_page(server, "/v1/tasks?limit=500", "t7 t6 t5 t4 t3 t2 t1", false));

  /* Status filter, alone and combined with paging. */
  cancel_task(server, ids[0]);
  cancel_task(server, ids[1]);
  assert_null(expect_page(server, "/v1/tasks?status=cancelled", "t2 t1", false));
  assert_null(expect_page(server, "/v1/tasks?status=succeeded", "", false));
  assert_null(expect_page(server, "/v1/tasks?status=running", "", false));
  assert_null(expect_page(server, "/v1/tasks?status=failed", "", false));
  c1 = expect_page(server, "/v1/tasks?status=queued&limit=2", "t7 t6", true);
  p2 = with_cursor("/v1/tasks?status=queued&limit=2", c1);
  c2 = expect_page(server, p2, "t5 t4", true);
  p3 = with_cursor("/v1/tasks?status=queued&limit=2", c2);
  assert_null(expect_page(server, p3, "t3", false));
  free(c1), free(c2), free(p2), free(p3);
  for (int i = 0; i < 7; i++)
    free(ids[i]);

  static const struct step bad[] = {
    {"unknown status", "GET", "/v1/tasks?status=bogus", NULL, 400, "invalid_query", "status"},
    {"limit 0", "GET", "/v1/tasks?limit=0", NULL, 400, "invalid_query", "limit"},
    {"limit 501", "GET", "/v1/tasks?limit=501", NULL, 400, "invalid_query", "limit"},
    {"limit negative", "GET", "/v1/tasks?limit=-1", NULL, 400, "invalid_query", "limit"},
    {"limit not a number", "GET", "/v1/tasks?limit=abc", NULL, 400, "invalid_query", "limit"},
    {"limit with junk", "GET", "/v1/tasks?limit=3x", NULL, 400, "invalid_query", "limit"},
    {"limit empty", "GET", "/v1/tasks?limit=", NULL, 400, "invalid_query", "limit"},
    {"garbage cursor", "GET", "/v1/tasks?cursor=garbage", NULL, 400, "invalid_cursor", "cursor"},
    {"base64 junk cursor", "GET", "/v1/tasks?cursor=eyJ4IjoxfQ", NULL, 400, "invalid_cursor",
     "cursor"},
  };
  run_steps(server, bad, sizeof bad / sizeof bad[0], NULL);
}

/* ---------------------------------------------------------------- ids, cancel, delete */

static void test_bad_and_unknown_ids(void **state) {
  struct server *server = *state;
  static const struct step steps[] = {
    {"GET short id", "GET", "/v1/tasks/123", NULL, 400, "invalid_id", "id"},
    {"GET word id", "GET", "/v1/tasks/not-a-uuid", NULL, 400, "invalid_id", "id"},
    {"GET uuid with junk", "GET", "/v1/tasks/" UNKNOWN_ID "x", NULL, 400, "invalid_id", "id"},
    {"GET uuid without dashes", "GET", "/v1/tasks/3f2b8c1e9d4a4b7e8c215a6f0e9d1b23", NULL, 400,
     "invalid_id", "id"},
    {"GET unknown", "GET", "/v1/tasks/" UNKNOWN_ID, NULL, 404, "task_not_found", NULL},
    {"DELETE bad id", "DELETE", "/v1/tasks/123", NULL, 400, "invalid_id", "id"},
    {"DELETE unknown", "DELETE", "/v1/tasks/" UNKNOWN_ID, NULL, 404, "task_not_found", NULL},
    {"cancel bad id", "POST", "/v1/tasks/zzz/cancel", NULL, 400, "invalid_id", "id"},
    {"cancel unknown", "POST", "/v1/tasks/" UNKNOWN_ID "/cancel", NULL, 404, "task_not_found",
     NULL},
    {"events bad id", "GET", "/v1/tasks/zzz/events", NULL, 400, "invalid_id", "id"},
    {"events unknown", "GET", "/v1/tasks/" UNKNOWN_ID "/events", NULL, 404, "task_not_found",
     NULL},
  };
  run_steps(server, steps, sizeof steps / sizeof steps[0], NULL);
}

static void test_cancel_and_delete(void **state) {
  struct server *server = *state;
  char *id = create_task(server, "doomed");
  static const struct step steps[] = {
    {"cancel queued", "POST", "/v1/tasks/{id}/cancel", NULL, 200, NULL, NULL},
    {"read cancelled", "GET", "/v1/tasks/{id}", NULL, 200, NULL, NULL},
    {"cancel again", "POST", "/v1/tasks/{id}/cancel", NULL, 409, "task_finished", NULL},
    {"delete", "DELETE", "/v1/tasks/{id}", NULL, 204, NULL, NULL},
    {"read deleted", "GET", "/v1/tasks/{id}", NULL, 404, "task_not_found", NULL},
    {"delete again", "DELETE", "/v1/tasks/{id}", NULL, 404, "task_not_found", NULL},
    {"cancel deleted", "POST", "/v1/tasks/{id}/cancel", NULL, 404, "task_not_found", NULL},
    {"events of deleted", "GET", "/v1/tasks/{id}/events", NULL, 404, "task_not_found", NULL},
  };
  run_steps(server, steps, 2, id);
  /* The cancelled task reads back as cancelled, and upper case ids are folded. */
  char *upper = strdup(id);
  for (char *c = upper; *c; c++)
    *c = (char)(*c >= 'a' && *c <= 'f' ? *c - 'a' + 'A' : *c);
  char *path = fmt("/v1/tasks/%s", upper);
  struct http_response *r = http_get(server, path);
  assert_int_equal(r->status, 200);
  json_t *task = http_json(r);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "cancelled");
  assert_string_equal(json_string_value(json_object_get(task, "id")), id);
  assert_true(strcmp(json_string_value(json_object_get(task, "updated_at")),
                     json_string_value(json_object_get(task, "created_at"))) >= 0);
  json_decref(task);
  http_response_free(r);
  free(path);
  free(upper);
  run_steps(server, steps + 2, sizeof steps / sizeof steps[0] - 2, id);
  assert_null(expect_page(server, "/v1/tasks?limit=10", "", false));
  free(id);
}

/* ---------------------------------------------------------------- events */

/* One parsed Server-Sent Event (the spec check already validated the data). */
struct sse_event {
  long id;
  char type[32];
};

/* Splits an event-stream body into events; returns how many (at most max). */
static size_t parse_events(const char *body, struct sse_event *out, size_t max) {
  size_t n = 0;
  struct sse_event cur = {.id = -1};
  bool in_event = false;
  for (const char *p = body; *p;) {
    size_t len = strcspn(p, "\n");
    if (len == 0 || (len == 1 && p[0] == '\r')) {
      if (in_event && n < max)
        out[n++] = cur;
      cur = (struct sse_event){.id = -1};
      in_event = false;
    } else if (strncmp(p, "id: ", 4) == 0) {
      cur.id = strtol(p + 4, NULL, 10);
      in_event = true;
    } else if (strncmp(p, "event: ", 7) == 0) {
      size_t tlen = len - 7 < sizeof cur.type - 1 ? len - 7 : sizeof cur.type - 1;
      memcpy(cur.type, p + 7, tlen);
      cur.type[tlen] = '\0';
      in_event = true;
    }
    p += len + (p[len] == '\n');
  }
  return n;
}

/* Reads the whole event stream at path (with optional headers) and checks the events
 * against "1:queued 2:cancelled"-style text. */
static void expect_events(struct server *server, const char *path, const char *header,
                          const char *want) {
  const char *headers[] = {header, NULL};
  struct http_request req = {.method = "GET", .path = path, .headers = header ? headers : NULL,
                             .timeout_ms = 10000};
  struct http_response *r = http_do(server, &req);
  assert_int_equal(r->status, 200);
  struct sse_event events[16];
  size_t n = parse_events(r->body, events, 16);
  char got[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < n && used < sizeof got; i++)
    used += (size_t)snprintf(got + used, sizeof got - used, "%s%ld:%s", i ? " " : "",
                             events[i].id, events[i].type);
  if (strcmp(got, want) != 0)
    print_error("GET %s (%s): events '%s', want '%s'\n  body: %.600s\n", path,
                header ? header : "no header", got, want, r->body);
  assert_string_equal(got, want);
  http_response_free(r);
}

static void test_events_replay(void **state) {
  struct server *server = *state;
  char *id = create_task(server, "streamed");
  cancel_task(server, id);
  char *path = fmt("/v1/tasks/%s/events", id);
  /* The task is final, so each stream ends by itself once drained. */
  /* A task cancelled while queued ends with "finished", as every task does. */
  expect_events(server, path, NULL, "1:queued 2:cancelled 3:finished");
  expect_events(server, path, "Last-Event-ID: 0", "1:queued 2:cancelled 3:finished");
  expect_events(server, path, "Last-Event-ID: 1", "2:cancelled 3:finished");
  expect_events(server, path, "Last-Event-ID: 2", "3:finished");
  expect_events(server, path, "Last-Event-ID: 3", "");
  expect_events(server, path, "Last-Event-ID: 9223372036854775807", "");
  char *after = fmt("%s?after=1", path);
  expect_events(server, after, NULL, "2:cancelled 3:finished");
  /* Last-Event-ID wins over after, but a malformed after is not ignored. */
  expect_events(server, after, "Last-Event-ID: 2", "3:finished");
  free(after);
  after = fmt("%s?after=x", path);
  const char *wins[] = {"Last-Event-ID: 1", NULL};
  struct http_request both = {.method = "GET", .path = after, .headers = wins};
  struct http_response *rb = http_do(server, &both);
  assert_error(rb, 400, "invalid_query", "after");
  http_response_free(rb);
  free(after);
  static const char *const bad_ids[] = {"Last-Event-ID: 9223372036854775808",
                                        "Last-Event-ID: +1", "Last-Event-ID: 01",
                                        "Last-Event-ID: 1.0"};
  for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
    const char *h[] = {bad_ids[i], NULL};
    struct http_request req = {.method = "GET", .path = path, .headers = h};
    struct http_response *r = http_do(server, &req);
    assert_error(r, 400, "invalid_query", "Last-Event-ID");
    http_response_free(r);
  }
  static const struct step bad[] = {
    {"after not a number", "GET", "/v1/tasks/{id}/events?after=abc", NULL, 400,
     "invalid_query", NULL},
    {"after negative", "GET", "/v1/tasks/{id}/events?after=-1", NULL, 400, "invalid_query",
     NULL},
  };
  run_steps(server, bad, sizeof bad / sizeof bad[0], id);
  const char *headers[] = {"Last-Event-ID: x1", NULL};
  struct http_request req = {.method = "GET", .path = path, .headers = headers};
  struct http_response *r = http_do(server, &req);
  assert_error(r, 400, "invalid_query", NULL);
  http_response_free(r);
  free(path);
  free(id);
}

static void test_events_live_cancel(void **state) {
  struct server *server = *state;
  char *id = create_task(server, "watched");
  char *path = fmt("/v1/tasks/%s/events", id);
  struct http_request req = {.method = "GET", .path = path, .timeout_ms = 15000};
  struct http_stream *stream = http_stream_open(server, &req);
  /* The stream must replay "queued" and then stay open while the task waits. */
  assert_true(http_stream_wait_for(stream, "event: queued\n", 5000));
  assert_false(http_stream_wait_for(stream, "event: cancelled", 300));
  cancel_task(server, id);
  struct http_response *r = http_stream_finish(stream, 10000);
  assert_int_equal(r->status, 200);
  struct sse_event events[8];
  size_t n = parse_events(r->body, events, 8);
  assert_int_equal(n, 3);
  assert_int_equal(events[0].id, 1);
  assert_string_equal(events[0].type, "queued");
  assert_int_equal(events[1].id, 2);
  assert_string_equal(events[1].type, "cancelled");
  assert_int_equal(events[2].id, 3);
  assert_string_equal(events[2].type, "finished");
  http_response_free(r);
  free(path);
  free(id);
}

static void test_events_keepalive(void **state) {
  struct server *server = *state; /* started with --sse-keepalive 1 */
  char *id = create_task(server, "idle");
  char *path = fmt("/v1/tasks/%s/events", id);
  struct http_request req = {.method = "GET", .path = path, .timeout_ms = 15000};
  struct http_stream *stream = http_stream_open(server, &req);
  assert_true(http_stream_wait_for(stream, "event: queued\n", 5000));
  /* Nothing happens to the task, so only comments keep the connection alive. */
  if (!http_stream_wait_for(stream, "\n: keep-alive\n", 4000)) {
    print_error("no ': keep-alive' comment within 4 s with --sse-keepalive 1\n");
    fail();
  }
  cancel_task(server, id);
  struct http_response *r = http_stream_finish(stream, 10000);
  struct sse_event events[8];
  assert_int_equal(parse_events(r->body, events, 8), 3);
  assert_string_equal(events[1].type, "cancelled");
  assert_string_equal(events[2].type, "finished");
  http_response_free(r);
  free(path);
  free(id);
}

/* ---------------------------------------------------------------- auth */

/* Sends method path with an optional Authorization header and an optional body
 * template; returns the response (caller frees). */
static struct http_response *send_auth(struct server *server, const char *method,
                                       const char *path, const char *auth, const char *tmpl) {
  const char *headers[] = {auth, NULL};
  char *body = tmpl ? expand(tmpl, NULL) : NULL;
  struct http_response *r = http_send(server, method, path, body, auth ? headers : NULL);
  free(body);
  return r;
}

static void test_auth(void **state) {
  struct server *server = *state;
  static const char *const right = "Authorization: Bearer " TOKEN;
  static const struct {
    const char *label;
    const char *auth;
    long status;
    const char *code;
  } writes[] = {
    {"no token", NULL, 401, "unauthorized"},
    {"basic scheme", "Authorization: Basic dXNlcjpwYXNz", 401, "unauthorized"},
    {"empty bearer", "Authorization: Bearer ", 401, "unauthorized"},
    {"wrong token", "Authorization: Bearer wrong", 403, "forbidden"},
    {"token prefix", "Authorization: Bearer s3cret-token", 403, "forbidden"},
    {"token plus junk", "Authorization: Bearer " TOKEN "x", 403, "forbidden"},
    {"right token", "Authorization: Bearer " TOKEN, 202, NULL},
    {"scheme in lower case", "Authorization: bearer " TOKEN, 202, NULL},
  };
  size_t failures = 0;
  for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
    struct http_response *r =
        send_auth(server, "POST", "/v1/tasks", writes[i].auth, "{\"reference\":@REF@}");
    char why[512];
    if (!error_matches(r, writes[i].status, writes[i].code, FIELD_NULL, why, sizeof why)) {
      print_error("POST /v1/tasks, %s: %s\n  body: %.300s\n", writes[i].label, why, r->body);
      failures++;
    }
    http_response_free(r);
  }
  assert_int_equal(failures, 0);

  /* Reads stay open. */
  struct http_response *r = send_auth(server, "GET", "/v1/tasks", NULL, NULL);
  assert_int_equal(r->status, 200);
  json_t *page = http_json(r);
  json_t *first = json_array_get(json_object_get(page, "items"), 0);
  char *id = strdup(json_string_value(json_object_get(first, "id")));
  json_decref(page);
  http_response_free(r);
  char *self = fmt("/v1/tasks/%s", id), *cancel = fmt("/v1/tasks/%s/cancel", id);
  static const char *const reads[] = {"/healthz", "/readyz", "/metrics", "/openapi.json"};
  for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
    r = send_auth(server, "GET", reads[i], NULL, NULL);
    assert_int_equal(r->status, 200);
    http_response_free(r);
  }
  r = send_auth(server, "GET", self, NULL, NULL);
  assert_int_equal(r->status, 200);
  http_response_free(r);

  /* Cancel and delete are writes too. */
  r = send_auth(server, "POST", cancel, NULL, NULL);
  assert_error(r, 401, "unauthorized", FIELD_NULL);
  http_response_free(r);
  r = send_auth(server, "POST", cancel, "Authorization: Bearer wrong", NULL);
  assert_error(r, 403, "forbidden", FIELD_NULL);
  http_response_free(r);
  r = send_auth(server, "POST", cancel, right, NULL);
  assert_int_equal(r->status, 200);
  http_response_free(r);
  r = send_auth(server, "DELETE", self, NULL, NULL);
  assert_error(r, 401, "unauthorized", FIELD_NULL);
  http_response_free(r);
  r = send_auth(server, "DELETE", self, "Authorization: Bearer wrong", NULL);
  assert_error(r, 403, "forbidden", FIELD_NULL);
  http_response_free(r);
  r = send_auth(server, "DELETE", self, right, NULL);
  assert_int_equal(r->status, 204);
  http_response_free(r);
  free(self);
  free(cancel);
  free(id);
}

/* ---------------------------------------------------------------- routing and limits */

/* Asserts a 405 whose Allow header lists exactly the methods in want (comma-separated,
 * any order). */
static void expect_405(struct server *server, const char *method, const char *path,
                       const char *want) {
  struct http_response *r = http_send(server, method, path, NULL, NULL);
  assert_error(r, 405, "method_not_allowed", NULL);
  const char *allow = http_header(r, "Allow");
  assert_non_null(allow);
  char got[128], wanted[128];
  size_t g = 0, w = 0;
  /* Compare as sets: sort the tokens of both by a fixed method order. */
  static const char *const order[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", NULL};
  got[0] = wanted[0] = '\0';
  for (size_t i = 0; order[i]; i++) {
    const char *token = order[i];
    bool in_got = false, in_want = false;
    for (const char *p = allow; *p; p += strspn(p, ", ")) {
      size_t len = strcspn(p, ", ");
      in_got = in_got || (len == strlen(token) && strncmp(p, token, len) == 0);
      p += len;
    }
    for (const char *p = want; *p; p += strspn(p, ", ")) {
      size_t len = strcspn(p, ", ");
      in_want = in_want || (len == strlen(token) && strncmp(p, token, len) == 0);
      p += len;
    }
    if (in_got)
      g += (size_t)snprintf(got + g, sizeof got - g, "%s ", token);
    if (in_want)
      w += (size_t)snprintf(wanted + w, sizeof wanted - w, "%s ", token);
  }
  if (strcmp(got, wanted) != 0)
    print_error("%s %s: Allow '%s', want '%s'\n", method, path, allow, want);
  assert_string_equal(got, wanted);
  http_response_free(r);
}

static void test_not_found_vs_method_not_allowed(void **state) {
  struct server *server = *state;
  static const struct step steps[] = {
    {"unknown path", "GET", "/v1/nope", NULL, 404, "not_found", FIELD_NULL},
    {"root", "GET", "/", NULL, 404, "not_found", FIELD_NULL},
    {"trailing slash", "GET", "/v1/tasks/", NULL, 404, "not_found", FIELD_NULL},
    {"too deep", "GET", "/v1/tasks/" UNKNOWN_ID "/events/1", NULL, 404, "not_found", FIELD_NULL},
    {"unknown version", "GET", "/v2/tasks", NULL, 404, "not_found", FIELD_NULL},
    {"POST to unknown path", "POST", "/v1/nope", "{}", 404, "not_found", FIELD_NULL},
  };
  run_steps(server, steps, sizeof steps / sizeof steps[0], NULL);
  /* Allow lists HEAD wherever GET is, and OPTIONS everywhere. */
  expect_405(server, "PUT", "/v1/tasks", "GET, HEAD, OPTIONS, POST");
  expect_405(server, "DELETE", "/v1/tasks", "GET, HEAD, OPTIONS, POST");
  expect_405(server, "PATCH", "/v1/tasks/" UNKNOWN_ID, "GET, HEAD, OPTIONS, DELETE");
  expect_405(server, "GET", "/v1/tasks/" UNKNOWN_ID "/cancel", "OPTIONS, POST");
  expect_405(server, "POST", "/v1/tasks/" UNKNOWN_ID "/events", "GET, HEAD, OPTIONS");
  expect_405(server, "DELETE", "/healthz", "GET, HEAD, OPTIONS");
  expect_405(server, "POST", "/metrics", "GET, HEAD, OPTIONS");
  expect_405(server, "PUT", "/openapi.json", "GET, HEAD, OPTIONS");
}

/* A submission of exactly size bytes: REF padded with a comment (caller frees). */
static char *submission_of_size(size_t size) {
  char *quoted = json_quote(REF);
  /* {"name":"cap","reference":"<REF>#xxx"} : the pad goes before the closing quote. */
  size_t fixed = strlen("{\"name\":\"cap\",\"reference\":}") + strlen(quoted) + 1;
  assert_true(size > fixed);
  char *pad = repeat('x', size - fixed);
  quoted[strlen(quoted) - 1] = '\0'; /* drop the closing quote */
  char *body = fmt("{\"name\":\"cap\",\"reference\":%s#%s\"}", quoted, pad);
  assert_int_equal(strlen(body), size);
  free(pad);
  free(quoted);
  return body;
}

/* A TCP connection to the server (listening on 127.0.0.1) from the loopback address
 * source ("127.0.0.2": the whole 127/8 is local on Linux), so one test can play two
 * clients. The caller closes it. */
static int connect_from(struct server *server, const char *source) {
  const char *url = server_url(server);
  const char *colon = strrchr(url, ':');
  assert_non_null(colon);
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)strtol(colon + 1, NULL, 10))};
  struct sockaddr_in from = {.sin_family = AF_INET};
  assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr), 1);
  assert_int_equal(inet_pton(AF_INET, source, &from.sin_addr), 1);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof from), 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  return fd;
}

/* An idle TCP connection to the server (the caller closes it). */
static int open_idle_connection(struct server *server) {
  return connect_from(server, "127.0.0.1");
}

/* The limit_trips counter of one limit in /metrics (asked again while the client's
 * closed connections still count against it). */
static long limit_trips(struct server *server, const char *limit) {
  struct http_response *r = NULL;
  for (int i = 0; i < 100; i++) {
    http_response_free(r);
    r = http_get(server, "/metrics");
    if (r->status != 429)
      break;
    usleep(20 * 1000);
  }
  char *key = fmt("opforge_limit_trips_total{limit=\"%s\"} ", limit);
  const char *at = r->body ? strstr(r->body, key) : NULL;
  long n = at ? strtol(at + strlen(key), NULL, 10) : -1;
  free(key);
  http_response_free(r);
  return n;
}

/* True when the server has closed fd: end of stream or a reset (poll waits up to
 * wait_ms). Anything the server sent before is read and dropped. */
static bool closed_by_server(int fd, int wait_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, wait_ms) <= 0)
    return false;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
      return true;
    if (n < 0)
      return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
  }
}

static long ms_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* With --max-connections-per-ip 2, a request on a third open connection from the same
 * client is answered 429 too_many_requests with Retry-After (not dropped), the trip is
 * counted, and once connections close the same request succeeds. */
static void test_connections_per_client(void **state) {
  struct server *server = *state;
  long trips = limit_trips(server, "connections");
  assert_int_equal(trips, 0);
  int a = open_idle_connection(server), b = open_idle_connection(server);
  struct http_response *r = NULL;
  /* MHD counts a connection once its thread accepts it: give the two a moment. */
  for (int i = 0; i < 100; i++) {
    http_response_free(r);
    r = http_get(server, "/healthz");
    if (r->status == 429)
      break;
    usleep(20 * 1000);
  }
  assert_error(r, 429, "too_many_requests", FIELD_NULL);
  assert_string_equal(http_header(r, "Retry-After"), "1");
  json_t *doc = http_json(r);
  assert_non_null(strstr(json_string_value(json_object_get(json_object_get(doc, "error"),
                                                           "message")),
                         "the limit is 2"));
  json_decref(doc);
  http_response_free(r);
  /* A refused request with a body is read whole before the answer, so the client gets
   * the 429 rather than a connection reset with its body unread. */
  char *big = repeat(' ', 900 * 1024);
  big[0] = '{';
  big[900 * 1024 - 1] = '}';
  for (int i = 0; i < 5; i++) {
    r = http_send(server, "POST", "/v1/tasks", big, NULL); /* fails on a transport error */
    assert_error(r, 429, "too_many_requests", FIELD_NULL);
    assert_string_equal(http_header(r, "Connection"), "close");
    http_response_free(r);
  }
  free(big);
  close(a);
  close(b);
  r = NULL;
  for (int i = 0; i < 100; i++) {
    http_response_free(r);
    r = http_get(server, "/healthz");
    if (r->status == 200)
      break;
    usleep(20 * 1000);
  }
  assert_int_equal(r->status, 200);
  http_response_free(r);
  assert_true(limit_trips(server, "connections") >= 1);
}


/* Item 2 of issue 12: one address cannot take the server. With --header-deadline 2 and
 * --max-connections-per-ip 8, 127.0.0.2 opens 20 connections and trickles a request head
 * one byte every 300 ms (well inside the 30 s idle timeout, which every byte restarts).
 * Meanwhile 127.0.0.1 is served, 127.0.0.2's complete request gets 429 (read cleanly,
 * then its connection closes), and the trickling connections are all closed between 2
 * and about 3 s after they opened, which /metrics counts. Then 127.0.0.2 is served again. */
static void test_slow_heads_one_address(void **state) {
  struct server *server = *state; /* --header-deadline 2 --max-connections-per-ip 8 */
  enum { SLOW = 20 };
  int fds[SLOW];
  long opened = ms_now();
  for (int i = 0; i < SLOW; i++) {
    fds[i] = connect_from(server, "127.0.0.2");
    static const char start[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    assert_int_equal(send(fds[i], start, sizeof start - 1, MSG_NOSIGNAL), sizeof start - 1);
  }
  char *url = fmt("%s/healthz", server_url(server));
  int served = 0, refused = 0;
  bool closed[SLOW] = {false};
  long closed_at[SLOW] = {0};
  while (ms_now() - opened < 4500) {
    for (int i = 0; i < SLOW; i++) {
      if (closed[i])
        continue;
      if (send(fds[i], "a", 1, MSG_NOSIGNAL) != 1 || closed_by_server(fds[i], 0)) {
        closed[i] = true;
        closed_at[i] = ms_now() - opened;
      }
    }
    if (ms_now() - opened < 1500) {
      /* The other address is served while this one is at its limit. */
      struct http_response *r = http_get(server, "/healthz");
      served += r->status == 200;
      http_response_free(r);
      /* A complete request from the full address: 429, answered whole. */
      int fd = connect_from(server, "127.0.0.2");
      static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
      assert_int_equal(send(fd, req, sizeof req - 1, MSG_NOSIGNAL), sizeof req - 1);
      char buf[2048] = "";
      size_t got = 0;
      ssize_t n;
      while (got < sizeof buf - 1 && (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
        got += (size_t)n;
      refused += strncmp(buf, "HTTP/1.1 429 ", 13) == 0 && strstr(buf, "too_many_requests") &&
                 strstr(buf, "Connection: close");
      close(fd);
    }
    usleep(300 * 1000);
  }
  free(url);
  int early = 0, open_still = 0;
  for (int i = 0; i < SLOW; i++) {
    if (!closed[i])
      open_still++;
    else if (closed_at[i] < 1900)
      early++;
    close(fds[i]);
  }
  print_message("served %d, refused %d; slow connections closed at", served, refused);
  for (int i = 0; i < SLOW; i++)
    print_message(" %ld", closed_at[i]);
  print_message(" ms\n");
  assert_true(served >= 3);
  assert_true(refused >= 3);
  assert_int_equal(open_still, 0);
  assert_int_equal(early, 0);
  assert_true(limit_trips(server, "header_deadline") >= SLOW);
  /* Its slots are free again. */
  int fd = connect_from(server, "127.0.0.2");
  static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"
                            "\r\n\r\n";
  assert_int_equal(send(fd, req, sizeof req - 1, MSG_NOSIGNAL), sizeof req - 1);
  char buf[1024] = "";
  assert_true(recv(fd, buf, sizeof buf - 1, 0) > 12);
  assert_int_equal(strncmp(buf, "HTTP/1.1 200 ", 13), 0);
  close(fd);
}

static void test_body_cap(void **state) {
  struct server *server = *state; /* started with --max-body 4096 */
  char *body = submission_of_size(4096);
  struct http_response *r = http_send(server, "POST", "/v1/tasks", body, NULL);
  if (r->status != 202)
    print_error("body of exactly 4096 bytes: %ld %.300s\n", r->status, r->body);
  assert_int_equal(r->status, 202);
  json_t *task = http_json(r);
  char *self = fmt("/v1/tasks/%s", json_string_value(json_object_get(task, "id")));
  json_decref(task);
  http_response_free(r);
  /* It was parsed whole: the stored reference is the padded one. */
  r = http_get(server, self);
  json_t *doc = http_json(r);
  json_t *sent = json_loads(body, 0, NULL);
  assert_string_equal(json_string_value(json_object_get(doc, "reference")),
                      json_string_value(json_object_get(sent, "reference")));
  json_decref(sent);
  json_decref(doc);
  http_response_free(r);
  free(self);
  free(body);

  body = submission_of_size(4097);
  r = http_send(server, "POST", "/v1/tasks", body, NULL);
  assert_error(r, 413, "body_too_large", FIELD_NULL);
  http_response_free(r);
  /* Without Content-Length the cap holds while reading. */
  struct http_request chunked = {.method = "POST", .path = "/v1/tasks", .body = body,
                                 .chunked = true};
  r = http_do(server, &chunked);
  assert_error(r, 413, "body_too_large", FIELD_NULL);
  http_response_free(r);
  free(body);
  body = submission_of_size(4096);
  chunked.body = body;
  r = http_do(server, &chunked);
  assert_int_equal(r->status, 202);
  http_response_free(r);
  free(body);
}

static void test_url_too_long(void **state) {
  struct server *server = *state;
  /* The cap (8192 by default) counts the request target, query included. */
  static const struct {
    const char *prefix;
    size_t size;
    long status;
  } cases[] = {
    {"/v1/tasks?pad=", 8192, 200},
    {"/v1/tasks?pad=", 8193, 414},
    {"/v1/tasks?pad=", 64 * 1024, 414},
    {"/v1/nope/", 64 * 1024, 414},
    {"/healthz?", 64 * 1024, 414},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t plen = strlen(cases[i].prefix);
    char *pad = repeat('a', cases[i].size - plen);
    char *path = fmt("%s%s", cases[i].prefix, pad);
    struct http_response *r = http_get(server, path);
    if (cases[i].status == 414)
      assert_error(r, 414, "url_too_long", FIELD_NULL);
    else
      assert_int_equal(r->status, cases[i].status);
    http_response_free(r);
    free(path);
    free(pad);
  }
  /* The server still answers normally afterwards. */
  struct http_response *r = http_get(server, "/healthz");
  assert_int_equal(r->status, 200);
  http_response_free(r);
}

static void test_slow_client(void **state) {
  struct server *server = *state;
  char *quoted = json_quote(REF);
  char *body = fmt("{\"name\":\"slow\",\"reference\":%s}", quoted);
  for (int mode = 0; mode < 2; mode++) {
    struct http_request req = {.method = "POST", .path = "/v1/tasks", .body = body,
                               .chunked = mode == 1, .slow_chunk = 16, .slow_pause_ms = 15,
                               .timeout_ms = 30000};
    struct http_response *r = http_do(server, &req);
    assert_int_equal(r->status, 202);
    json_t *task = http_json(r);
    char *self = fmt("/v1/tasks/%s", json_string_value(json_object_get(task, "id")));
    json_decref(task);
    http_response_free(r);
    r = http_get(server, self);
    json_t *doc = http_json(r);
    assert_string_equal(json_string_value(json_object_get(doc, "reference")), REF);
    json_decref(doc);
    http_response_free(r);
    free(self);
  }
  free(body);
  free(quoted);
}

static void test_concurrent_requests(void **state) {
  struct server *server = *state;
  enum { N = 200 };
  char *quoted = json_quote(REF);
  char *body = fmt("{\"name\":\"crowd\",\"reference\":%s}", quoted);
  struct http_request reqs[N];
  long want[N];
  size_t posts = 0;
  for (size_t i = 0; i < N; i++) {
    static const char *const paths[] = {"/healthz", "/v1/tasks", "/v1/tasks"};
    reqs[i] = (struct http_request){.method = i % 3 == 2 ? "POST" : "GET", .path = paths[i % 3],
                                    .body = i % 3 == 2 ? body : NULL, .timeout_ms = 30000};
    want[i] = i % 3 == 2 ? 202 : 200;
    posts += i % 3 == 2;
  }
  struct http_response **rs = http_do_all(server, reqs, N);
  size_t wrong = 0;
  json_t *ids = json_object();
  for (size_t i = 0; i < N; i++) {
    if (rs[i]->status != want[i]) {
      if (wrong++ < 5)
        print_error("request %zu %s %s: %ld, want %ld: %.200s\n", i, reqs[i].method,
                    reqs[i].path, rs[i]->status, want[i], rs[i]->body);
      continue;
    }
    if (want[i] == 202) {
      json_t *task = http_json(rs[i]);
      json_object_set_new(ids, json_string_value(json_object_get(task, "id")), json_true());
      json_decref(task);
    }
  }
  http_responses_free(rs, N);
  assert_int_equal(wrong, 0);
  assert_int_equal(json_object_size(ids), posts); /* distinct ids */
  /* Every accepted task is stored. */
  struct http_response *r = http_get(server, "/v1/tasks?limit=500");
  json_t *page = http_json(r);
  size_t i;
  json_t *item;
  assert_int_equal(json_array_size(json_object_get(page, "items")), posts);
  json_array_foreach(json_object_get(page, "items"), i, item) {
    assert_non_null(json_object_get(ids, json_string_value(json_object_get(item, "id"))));
  }
  json_decref(page);
  http_response_free(r);
  json_decref(ids);
  free(body);
  free(quoted);
}

/* ---------------------------------------------------------------- data directory */

/* The text of a small file (caller frees); "" when it cannot be read. */
static char *read_small_file(const char *path) {
  FILE *f = fopen(path, "r");
  char *text = calloc(1, 65536);
  assert_non_null(text);
  if (f) {
    size_t n = fread(text, 1, 65535, f);
    text[n] = '\0';
    fclose(f);
  }
  return text;
}

/* A second `opforge serve` on a data directory that a running server owns refuses to
 * start (exit status 2) with a message naming the owner's pid, before it touches the
 * store; the first server goes on working. */
static void test_data_dir_has_one_owner(void **state) {
  struct server *server = *state;
  char *before = create_task(server, "owned");
  char log[PATH_MAX + 32];
  snprintf(log, sizeof log, "%s/second-server.log", server_data_dir(server));
  const char *argv[] = {getenv("OPFORGE_BIN"), "serve", "--listen", "127.0.0.1:0", "--data",
                        server_data_dir(server), "--gpus", "none", NULL};
  pid_t pid = -1;
  int out = -1;
  assert_int_equal(harness_spawn(argv, NULL, log, &pid, &out), 0);
  int status = harness_wait_exit(pid, 10000);
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  char line[256] = "";
  ssize_t n = read(out, line, sizeof line - 1);
  close(out);
  line[n > 0 ? n : 0] = '\0';
  char *text = read_small_file(log);
  char *want = fmt("another opforge server (pid %ld)", (long)server_pid(server));
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 2 || !strstr(text, want))
    print_error("second server: wait status %d, stdout '%s', log:\n%s\n", status, line, text);
  assert_true(status != -1 && WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 2);
  assert_non_null(strstr(text, want));
  assert_null(strstr(line, "listening"));
  free(want);
  free(text);
  /* The owner is untouched: it answers, its task is still queued, it takes new ones. */
  struct http_response *r = http_get(server, "/readyz");
  assert_int_equal(r->status, 200);
  http_response_free(r);
  char *path = fmt("/v1/tasks/%s", before);
  r = http_get(server, path);
  json_t *task = http_json(r);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "queued");
  json_decref(task);
  http_response_free(r);
  free(path);
  free(before);
  free(create_task(server, "after"));
}

/* ---------------------------------------------------------------- metrics */

/* The value of the sample whose series text (name and labels) is exactly series; fails
 * the test when absent. */
static double metric_value(const char *text, const char *series) {
  size_t len = strlen(series);
  for (const char *line = text; *line;) {
    if (strncmp(line, series, len) == 0 && line[len] == ' ')
      return strtod(line + len + 1, NULL);
    size_t n = strcspn(line, "\n");
    line += n + (line[n] == '\n');
  }
  print_error("metric sample %s is missing\n", series);
  fail();
  return 0;
}

/* GET /v1/servers lists this server alone (no other shares the store), without worker
 * slots or device classes; a submission's device class is upper-cased into its options,
 * a malformed one is refused, and GET of a task naming one says no live server serves it. */
static void test_servers_and_device_classes(void **state) {
  struct server *server = *state;
  struct http_response *r = http_get(server, "/v1/servers");
  assert_int_equal(r->status, 200);
  json_t *body = http_json(r);
  assert_string_equal(json_string_value(json_object_get(body, "store")),
                      harness_pg() ? "postgresql" : "sqlite");
  assert_int_equal(json_integer_value(json_object_get(body, "lease_seconds")), 60);
  json_t *servers = json_object_get(body, "servers");
  assert_int_equal(json_array_size(servers), 1);
  json_t *me = json_array_get(servers, 0);
  assert_true(json_is_true(json_object_get(me, "this")));
  assert_int_equal(json_integer_value(json_object_get(me, "pid")), server_pid(server));
  assert_int_equal(json_integer_value(json_object_get(me, "slots")), 0);
  assert_int_equal(json_array_size(json_object_get(me, "devices")), 0);
  assert_int_equal(json_array_size(json_object_get(me, "gpus")), 0);
  assert_int_equal(json_array_size(json_object_get(me, "tasks")), 0);
  const char *instance = json_string_value(json_object_get(me, "instance"));
  char pid_part[32];
  snprintf(pid_part, sizeof pid_part, ":%ld:", (long)server_pid(server));
  assert_non_null(strstr(instance, pid_part));
  json_decref(body);
  http_response_free(r);

  static const char *const bad[] = {"\"H 200\"", "\"\"", "\"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456\"",
                                    "7", NULL};
  char *ref = json_quote(REF);
  for (const char *const *b = bad; *b; b++) {
    char *req = fmt("{\"name\":\"d\",\"device\":%s,\"reference\":%s}", *b, ref);
    r = http_send(server, "POST", "/v1/tasks", req, NULL);
    assert_error(r, 400, "invalid_field", "device");
    http_response_free(r);
    free(req);
  }
  char *req = fmt("{\"name\":\"d\",\"device\":\"h200-sxm\",\"reference\":%s}", ref);
  r = http_send(server, "POST", "/v1/tasks", req, NULL);
  assert_int_equal(r->status, 202);
  json_t *created = http_json(r);
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(created, "options"), "device")),
      "H200-SXM");
  char *self = fmt("%s", json_string_value(json_object_get(json_object_get(created, "links"), "self")));
  http_response_free(r);
  r = http_get(server, self);
  assert_int_equal(r->status, 200);
  json_t *got = http_json(r);
  json_t *waiting = json_object_get(got, "waiting");
  assert_string_equal(json_string_value(json_object_get(waiting, "reason")),
                      "no live server has worker slots, so none serves device class "
                      "'H200-SXM'; the task waits for one that does");
  assert_string_equal(json_string_value(json_object_get(waiting, "device")), "H200-SXM");
  json_decref(got);
  json_decref(created);
  http_response_free(r);
  free(self);
  free(req);
  free(ref);
}

static void test_metrics(void **state) {
  struct server *server = *state;
  for (int i = 0; i < 3; i++)
    http_response_free(http_get(server, "/v1/tasks"));
  long page_trips = limit_trips(server, "page");
  http_response_free(http_get(server, "/v1/tasks?limit=0"));
  /* A malformed limit is a 400, not the page limit tripping; one over the cap is. */
  http_response_free(http_get(server, "/v1/tasks?limit=abc"));
  assert_int_equal(limit_trips(server, "page"), page_trips);
  http_response_free(http_get(server, "/v1/tasks?limit=100000"));
  assert_int_equal(limit_trips(server, "page"), page_trips + 1);
  char *ids[3];
  for (int i = 0; i < 3; i++)
    ids[i] = create_task(server, "metered");
  cancel_task(server, ids[0]);
  struct http_response *r = http_get(server, "/metrics");
  assert_int_equal(r->status, 200);
  const char *m = r->body;
  assert_true(metric_value(m, "opforge_http_requests_total{route=\"/v1/tasks\",method=\"GET\","
                              "status=\"200\"}") == 3);
  assert_true(metric_value(m, "opforge_http_requests_total{route=\"/v1/tasks\",method=\"GET\","
                              "status=\"400\"}") == 3);
  assert_true(metric_value(m, "opforge_http_requests_total{route=\"/v1/tasks\",method=\"POST\","
                              "status=\"202\"}") == 3);
  assert_true(metric_value(m, "opforge_tasks{status=\"queued\"}") == 2);
  assert_true(metric_value(m, "opforge_tasks{status=\"cancelled\"}") == 1);
  /* --gpus none: no evaluator, so nothing was ever restarted */
  assert_true(metric_value(m, "opforge_evaluator_restarts_total") == 0);
  assert_non_null(strstr(m, "# TYPE opforge_http_requests_total counter\n"));
  assert_non_null(strstr(m, "# TYPE opforge_http_request_duration_seconds histogram\n"));
  /* The histogram has buckets ending in +Inf, and the +Inf bucket equals the count. */
  const char *inf = strstr(m, "opforge_http_request_duration_seconds_bucket{");
  assert_non_null(inf);
  inf = strstr(m, "le=\"+Inf\"}");
  assert_non_null(inf);
  assert_non_null(strstr(m, "opforge_http_request_duration_seconds_sum"));
  assert_non_null(strstr(m, "opforge_http_request_duration_seconds_count"));
  http_response_free(r);
  for (int i = 0; i < 3; i++)
    free(ids[i]);
}

/* ---------------------------------------------------------------- media types */

static void test_media_types(void **state) {
  struct server *server = *state;
  char *body = expand("{\"reference\":@REF@}", NULL);
  static const struct {
    const char *ctype;
    long status;
    const char *code;
  } cases[] = {
    {"application/json", 202, NULL},
    {"application/json; charset=utf-8", 202, NULL},
    {"Application/JSON", 202, NULL},
    {"", 415, "unsupported_media_type"}, /* a body needs its Content-Type */
    {"text/plain", 415, "unsupported_media_type"},
    {"application/x-www-form-urlencoded", 415, "unsupported_media_type"},
    {"application/jsonp", 415, "unsupported_media_type"},
  };
  size_t failures = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct http_request req = {.method = "POST", .path = "/v1/tasks", .body = body,
                               .content_type = cases[i].ctype};
    struct http_response *r = http_do(server, &req);
    char why[512];
    if (!error_matches(r, cases[i].status, cases[i].code,
                       cases[i].code ? "Content-Type" : NULL, why, sizeof why)) {
      print_error("Content-Type '%s': %s\n  body: %.300s\n", cases[i].ctype, why, r->body);
      failures++;
    }
    http_response_free(r);
  }
  free(body);
  assert_int_equal(failures, 0);
}

/* ---------------------------------------------------------------- idempotency */

/* POSTs body to /v1/tasks with "Idempotency-Key: key" (key NULL: no header; a key ending
 * in ';' is sent as curl's empty header), on server or, when base is set, the server at
 * base. The caller frees the response. */
static struct http_response *post_keyed(struct server *server, const char *base,
                                        const char *body, const char *key) {
  char *header = key ? fmt(key[strlen(key) - 1] == ';' ? "Idempotency-Key;" :
                           "Idempotency-Key: %s", key) : NULL;
  const char *headers[] = {header, NULL};
  struct http_request req = {.method = "POST", .path = "/v1/tasks", .body = body,
                             .headers = key ? headers : NULL};
  struct http_response *r = base ? http_do_url(base, &req) : http_do(server, &req);
  free(header);
  return r;
}

/* Asserts r is status (200 or 202) with a task and its Location; returns the id (caller
 * frees). */
static char *keyed_task_id(const struct http_response *r, long status) {
  if (r->status != status)
    print_error("want %ld, got %ld: %.300s\n", status, r->status, r->body);
  assert_int_equal(r->status, status);
  json_t *task = http_json(r);
  char *id = strdup(json_string_value(json_object_get(task, "id")));
  assert_non_null(id);
  char *location = fmt("/v1/tasks/%s", id);
  assert_non_null(http_header(r, "Location"));
  assert_string_equal(http_header(r, "Location"), location);
  assert_null(json_object_get(task, "reference"));
  free(location);
  json_decref(task);
  return id;
}

/* The number of tasks the server (or the one at base) holds. */
static size_t task_total(struct server *server, const char *base) {
  struct http_request req = {.method = "GET", .path = "/v1/tasks?limit=500"};
  struct http_response *r = base ? http_do_url(base, &req) : http_do(server, &req);
  assert_int_equal(r->status, 200);
  json_t *page = http_json(r);
  size_t n = json_array_size(json_object_get(page, "items"));
  json_decref(page);
  http_response_free(r);
  return n;
}

/* A key replays its task (200, whatever the key order and spacing of the body), refuses
 * another body (409), is checked (400), and is free again once its task is deleted. */
static void test_idempotency_key(void **state) {
  struct server *server = *state;
  char *ref = json_quote(REF);
  char *a = fmt("{\"name\":\"idem\",\"reference\":%s}", ref);
  char *a_reordered = fmt("{ \"reference\" : %s ,\n \"name\" : \"idem\" }", ref);
  char *b = fmt("{\"name\":\"idem2\",\"reference\":%s}", ref);
  struct http_response *r = post_keyed(server, NULL, a, "ci-run-7/alpha.py");
  char *first = keyed_task_id(r, 202);
  http_response_free(r);
  r = post_keyed(server, NULL, a, "ci-run-7/alpha.py");
  char *again = keyed_task_id(r, 200);
  assert_string_equal(again, first);
  http_response_free(r);
  r = post_keyed(server, NULL, a_reordered, "ci-run-7/alpha.py");
  char *reordered = keyed_task_id(r, 200);
  assert_string_equal(reordered, first);
  http_response_free(r);
  r = post_keyed(server, NULL, b, "ci-run-7/alpha.py");
  assert_error(r, 409, "idempotency_conflict", "Idempotency-Key");
  http_response_free(r);
  r = post_keyed(server, NULL, "{\"name\":", "ci-run-7/alpha.py");
  assert_error(r, 400, "bad_json", NULL);
  http_response_free(r);
  assert_int_equal(task_total(server, NULL), 1);

  /* Another key, or none, is another submission. */
  r = post_keyed(server, NULL, a, "ci-run-8/alpha.py");
  char *other = keyed_task_id(r, 202);
  assert_string_not_equal(other, first);
  http_response_free(r);
  for (int i = 0; i < 2; i++) {
    r = post_keyed(server, NULL, a, NULL);
    free(keyed_task_id(r, 202));
    http_response_free(r);
  }
  assert_int_equal(task_total(server, NULL), 4);

  /* 1 to 128 visible ASCII characters. */
  char *k128 = repeat('k', 128), *k129 = repeat('k', 129);
  const char *bad[] = {";", k129, "two words", "caf\xc3\xa9", "tab\there"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    r = post_keyed(server, NULL, a, bad[i]);
    assert_error(r, 400, "invalid_header", "Idempotency-Key");
    http_response_free(r);
  }
  r = post_keyed(server, NULL, a, k128);
  free(keyed_task_id(r, 202));
  http_response_free(r);
  assert_int_equal(task_total(server, NULL), 5);

  /* A key whose task was deleted names nothing. */
  char *path = fmt("/v1/tasks/%s", first);
  r = http_send(server, "DELETE", path, NULL, NULL);
  assert_int_equal(r->status, 204);
  http_response_free(r);
  r = post_keyed(server, NULL, b, "ci-run-7/alpha.py");
  char *after = keyed_task_id(r, 202);
  assert_string_not_equal(after, first);
  http_response_free(r);
  free(path), free(after), free(k128), free(k129), free(other), free(reordered);
  free(again), free(first), free(a), free(a_reordered), free(b), free(ref);
}

/* Starts `opforge serve --gpus none` on data (kept between starts) and writes its base
 * URL into url (64 bytes). Returns the pid. */
static pid_t start_on(const char *data, char *url) {
  const char *argv[] = {getenv("OPFORGE_BIN"), "serve", "--listen", "127.0.0.1:0", "--data",
                        data, "--gpus", "none", NULL};
  static const char *const drop[] = {"OPFORGE_", NULL};
  char **envp = harness_environment(drop, NULL);
  char *log = fmt("%s/server.log", data);
  pid_t pid = -1;
  int out = -1;
  assert_non_null(envp);
  assert_int_equal(harness_spawn(argv, envp, log, &pid, &out), 0);
  free(envp);
  if (harness_wait_listening(out, 20000, url, 64) != 0) {
    harness_dump_log(log, 4000);
    fail();
  }
  close(out);
  free(log);
  return pid;
}

/* SIGTERM, and asserts a clean exit. */
static void stop_on(pid_t pid) {
  kill(pid, SIGTERM);
  int status = harness_wait_exit(pid, 20000);
  assert_true(status != -1 && WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* Runs sql on the store at data while no server holds it. */
static void store_sql(const char *data, const char *sql) {
  char *path = fmt("%s/opforge.db", data);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK)
    print_error("%s: %s\n", sql, err ? err : "?");
  sqlite3_free(err);
  assert_int_equal(rc, SQLITE_OK);
  sqlite3_close(db);
  free(path);
}

/* Keys live in the store: a restarted server still replays and refuses; a key 24 hours
 * old is free. */
static void test_idempotency_across_restart(void **state) {
  (void)state;
  char dir[] = "/tmp/opforge-idem-XXXXXX", url[64];
  assert_non_null(mkdtemp(dir));
  char *data = fmt("%s/data", dir);
  char *ref = json_quote(REF);
  char *a = fmt("{\"name\":\"kept\",\"reference\":%s}", ref);
  char *b = fmt("{\"name\":\"other\",\"reference\":%s}", ref);
  assert_int_equal(mkdir(data, 0700), 0);
  pid_t pid = start_on(data, url);
  struct http_response *r = post_keyed(NULL, url, a, "restart-key");
  char *id = keyed_task_id(r, 202);
  http_response_free(r);
  stop_on(pid);

  pid = start_on(data, url);
  r = post_keyed(NULL, url, a, "restart-key");
  char *replayed = keyed_task_id(r, 200);
  assert_string_equal(replayed, id);
  http_response_free(r);
  r = post_keyed(NULL, url, b, "restart-key");
  assert_error(r, 409, "idempotency_conflict", "Idempotency-Key");
  http_response_free(r);
  assert_int_equal(task_total(NULL, url), 1);
  stop_on(pid);

  /* 24 hours later the key is free, and the new submission holds it. */
  store_sql(data, "UPDATE idempotency_keys SET created_ms = created_ms - 86400000");
  pid = start_on(data, url);
  r = post_keyed(NULL, url, b, "restart-key");
  char *fresh = keyed_task_id(r, 202);
  assert_string_not_equal(fresh, id);
  http_response_free(r);
  r = post_keyed(NULL, url, b, "restart-key");
  char *fresh_again = keyed_task_id(r, 200);
  assert_string_equal(fresh_again, fresh);
  http_response_free(r);
  assert_int_equal(task_total(NULL, url), 2);
  stop_on(pid);
  store_sql(data, "SELECT 1"); /* the file is still a database */
  harness_remove_tree(dir);
  free(fresh_again), free(fresh), free(replayed), free(id), free(a), free(b), free(ref);
  free(data);
}

/* ---------------------------------------------------------------- coverage */

static void test_spec_coverage(void **state) {
  (void)state;
  spec_report_coverage(harness_spec(), stdout);
  assert_int_equal(spec_report_unexercised(harness_spec(), stderr), 0);
  assert_int_equal(harness_deferred_violations(), 0);
}

static int group_setup(void **state) {
  (void)state;
  return harness_init();
}

static int group_teardown(void **state) {
  (void)state;
  harness_cleanup();
  return 0;
}

#define WITH(server_setup, test) \
  cmocka_unit_test_setup_teardown(test, server_setup, teardown_server)

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_spec_validator),
    cmocka_unit_test(test_spec_responses),
    cmocka_unit_test(test_spec_lint),
    cmocka_unit_test(test_spec_matches_error_table),
    WITH(setup_server, test_health_ready_openapi),
    WITH(setup_server, test_submission_validation),
    WITH(setup_server, test_reference_size_limit),
    WITH(setup_server, test_submission_defaults),
    WITH(setup_server, test_create_and_get),
    WITH(setup_server, test_list_paging),
    WITH(setup_server, test_bad_and_unknown_ids),
    WITH(setup_server, test_cancel_and_delete),
    WITH(setup_server, test_events_replay),
    WITH(setup_server, test_events_live_cancel),
    WITH(setup_keepalive_server, test_events_keepalive),
    WITH(setup_auth_server, test_auth),
    WITH(setup_server, test_not_found_vs_method_not_allowed),
    WITH(setup_small_body_server, test_body_cap),
    WITH(setup_two_per_client_server, test_connections_per_client),
    WITH(setup_slow_heads_server, test_slow_heads_one_address),
    WITH(setup_server, test_url_too_long),
    WITH(setup_server, test_slow_client),
    WITH(setup_crowd_server, test_concurrent_requests),
    WITH(setup_server, test_servers_and_device_classes),
    WITH(setup_server, test_metrics),
    WITH(setup_server, test_data_dir_has_one_owner),
    WITH(setup_server, test_media_types),
    WITH(setup_server, test_idempotency_key),
    cmocka_unit_test(test_idempotency_across_restart),
    cmocka_unit_test(test_spec_coverage),
  };
  /* The suites of other files run before the coverage check, which stays last. */
  enum { GROUPS = 7 };
  const struct CMUnitTest *groups[GROUPS] = {NULL};
  size_t sizes[GROUPS] = {memory_api_tests(&groups[0]), engine_api_tests(&groups[1]),
                          best_api_tests(&groups[2]), protocol_api_tests(&groups[3]),
                          skills_api_tests(&groups[4]), framing_api_tests(&groups[5]),
                          limits_api_tests(&groups[6])};
  size_t n_base = sizeof tests / sizeof tests[0], n_all = n_base;
  for (size_t g = 0; g < GROUPS; g++)
    n_all += sizes[g];
  struct CMUnitTest *all = calloc(n_all, sizeof *all);
  if (!all)
    return 1;
  memcpy(all, tests, (n_base - 1) * sizeof *all);
  size_t at = n_base - 1;
  for (size_t g = 0; g < GROUPS; g++) {
    memcpy(all + at, groups[g], sizes[g] * sizeof *all);
    at += sizes[g];
  }
  all[n_all - 1] = tests[n_base - 1];
  /* For debugging one test: OPFORGE_API_TEST_FILTER=test_auth (the coverage check then
   * fails, as it should for a partial run). */
  const char *filter = getenv("OPFORGE_API_TEST_FILTER");
  if (filter)
    cmocka_set_test_filter(filter);
  int rc = _cmocka_run_group_tests("test_api", all, n_all, group_setup,
                                   group_teardown);
  free(all);
  return rc;
}
