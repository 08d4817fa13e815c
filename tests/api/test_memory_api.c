/* API tests of /v1/memory: every endpoint and error code against the real server, export
 * and import round trips, reset, auth on writes, namespaces (and a submission's memory and
 * search fields), and the `opforge memory` CLI. */
#include "tests/api/test_memory_api.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/memory.h"
#include "tests/api/harness.h"

#define FIELD_NULL "(json null)" /* expected "field" is JSON null */
#define TOKEN "memory-token-0123456789"
#define AUTH "Authorization: Bearer " TOKEN

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

/* The seed file of the source tree (caller owns it). */
static json_t *seed_file(void) {
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  assert_non_null(root);
  char *path = fmt("%s/schema/seed_memory.json", root);
  json_error_t jerr;
  json_t *doc = json_load_file(path, 0, &jerr);
  if (!doc)
    fail_msg("%s: %s", path, jerr.text);
  free(path);
  return doc;
}

/* Checks an error response: status, exact code, and field (NULL: not checked;
 * FIELD_NULL: JSON null). Writes the mismatch into why and returns false. */
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
  if (ok && field)
    ok = strcmp(field, FIELD_NULL) == 0
             ? json_is_null(got_field)
             : json_is_string(got_field) && strcmp(json_string_value(got_field), field) == 0;
  if (!ok)
    snprintf(why, whylen, "want code %s field %s, got code %s field %s", code,
             field ? field : "(any)", got_code ? got_code : "(none)",
             json_is_string(got_field) ? json_string_value(got_field)
             : json_is_null(got_field) ? FIELD_NULL
                                       : "(absent)");
  json_decref(doc);
  return ok;
}

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

/* Runs every step, reporting each mismatch with its label; fails at the end if any. */
static void run_steps(struct server *server, const struct step *steps, size_t n) {
  size_t failures = 0;
  for (size_t i = 0; i < n; i++) {
    const struct step *s = &steps[i];
    struct http_response *r = http_send(server, s->method, s->path, s->body, NULL);
    char why[512];
    if (!error_matches(r, s->status, s->code, s->field, why, sizeof why)) {
      print_error("step '%s' (%s %s): %s\n  body: %.300s\n", s->label, s->method, s->path, why,
                  r->body);
      failures++;
    }
    http_response_free(r);
  }
  if (failures) {
    print_error("%zu of %zu steps failed\n", failures, n);
    fail();
  }
}

/* Sends a request, asserts the status, and returns the JSON body (caller owns; NULL for
 * an empty body). */
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

/* Sends doc (borrowed) as the body. */
static json_t *call_json(struct server *server, const char *method, const char *path,
                         const json_t *doc, long status) {
  char *text = json_dumps(doc, JSON_COMPACT);
  assert_non_null(text);
  json_t *out = call(server, method, path, text, status);
  free(text);
  return out;
}

/* The export without exported_at. */
static json_t *export_doc(struct server *server) {
  json_t *doc = call(server, "GET", "/v1/memory/export", NULL, 200);
  assert_int_equal(json_object_del(doc, "exported_at"), 0);
  return doc;
}

static void assert_same_json(const json_t *want, const json_t *got, const char *what) {
  if (!json_equal((json_t *)want, (json_t *)got)) {
    char *a = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    char *b = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
    print_error("%s:\n want %.1500s\n  got %.1500s\n", what, a, b);
    free(a);
    free(b);
    fail();
  }
}

static const char *str(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  if (!s)
    fail_msg("member '%s' is not a string", key);
  return s;
}

/* The records of doc[list] with the members a seed record lacks removed (new array). */
static json_t *descriptive(const json_t *doc, const char *list) {
  json_t *out = json_array();
  size_t i;
  const json_t *rec;
  json_array_foreach(json_object_get(doc, list), i, rec) {
    json_t *copy = json_deep_copy(rec);
    static const char *const drop[] = {"stats", "evidence", "created_at", "updated_at",
                                       "local_count"};
    for (size_t k = 0; k < sizeof drop / sizeof *drop; k++)
      json_object_del(copy, drop[k]);
    json_array_append_new(out, copy);
  }
  return out;
}

/* Asserts that the server's memory holds exactly the seed's records with zero stats. */
static void assert_is_seed(struct server *server) {
  json_t *seed = seed_file(), *doc = export_doc(server);
  static const char *const lists[] = {"globals", "locals", "edges"};
  for (size_t k = 0; k < 3; k++) {
    json_t *got = descriptive(doc, lists[k]);
    assert_same_json(json_object_get(seed, lists[k]), got, lists[k]);
    json_decref(got);
  }
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(doc, "globals"), i, g)
    assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "n")), 0);
  json_decref(doc);
  json_decref(seed);
}

/* Sets the member at path ("locals.3.global": keys and array indexes joined by dots)
 * of doc to the JSON text value. */
static void set_path(json_t *doc, const char *path, const char *value) {
  json_t *node = doc;
  char key[64];
  for (;;) {
    size_t len = strcspn(path, ".");
    assert_true(len < sizeof key);
    memcpy(key, path, len);
    key[len] = '\0';
    if (!path[len])
      break;
    node = json_is_array(node) ? json_array_get(node, strtoul(key, NULL, 10))
                               : json_object_get(node, key);
    assert_non_null(node);
    path += len + 1;
  }
  json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
  assert_non_null(v);
  assert_int_equal(json_object_set_new(node, key, v), 0);
}

/* ---------------------------------------------------------------- fixtures */

/* A fresh server as it starts (the seed loaded by serve at start). */
static int setup_fresh_server(void **state) {
  struct server *server = NULL;
  if (server_start(NULL, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

/* A server whose memory was reset to the seed, so the tests below depend only on the
 * memory endpoints; `token` (may be NULL) is written to its token file. */
static int start_reset(void **state, const char *token) {
  struct server_opts opts = {.token = token};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  const char *const headers[] = {AUTH, NULL};
  struct http_response *r =
      http_send(server, "POST", "/v1/memory/reset", NULL, token ? headers : NULL);
  long status = r->status;
  http_response_free(r);
  *state = server;
  if (status != 200) {
    print_error("POST /v1/memory/reset in setup: %ld\n", status);
    return -1;
  }
  return 0;
}

static int setup_server(void **state) {
  return start_reset(state, NULL);
}

static int setup_auth_server(void **state) {
  return start_reset(state, TOKEN);
}

static int teardown_server(void **state) {
  int rc = server_stop(*state);
  *state = NULL;
  return rc;
}

/* ---------------------------------------------------------------- tests */

/* A new server loads the seed once: the lists equal schema/seed_memory.json. */
static void test_memory_seeded_at_start(void **state) {
  struct server *server = *state;
  json_t *seed = seed_file();
  json_t *list = call(server, "GET", "/v1/memory/global", NULL, 200);
  json_t *items = json_object_get(list, "items");
  assert_int_equal(json_array_size(items), json_array_size(json_object_get(seed, "globals")));
  size_t i;
  json_t *g;
  json_array_foreach(items, i, g) {
    const char *id = str(g, "id");
    assert_string_equal(id, str(json_array_get(json_object_get(seed, "globals"), i), "id"));
    json_int_t locals = 0;
    size_t j;
    json_t *l;
    json_array_foreach(json_object_get(seed, "locals"), j, l)
      locals += strcmp(str(l, "global"), id) == 0;
    assert_int_equal(json_integer_value(json_object_get(g, "local_count")), locals);
  }
  json_decref(list);
  list = call(server, "GET", "/v1/memory/edges", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")),
                   json_array_size(json_object_get(seed, "edges")));
  json_decref(list);
  json_decref(seed);
  assert_is_seed(server);
}

static void test_memory_global_endpoints(void **state) {
  struct server *server = *state;
  struct http_response *r = http_send(server, "POST", "/v1/memory/global",
                                      "{\"name\":\"Tensor Cores!\",\"triggers\":"
                                      "[\"bound:compute\"],\"prior\":0.5}", NULL);
  assert_int_equal(r->status, 201);
  assert_non_null(http_header(r, "Location"));
  assert_string_equal(http_header(r, "Location"), "/v1/memory/global/tensor_cores");
  json_t *g = http_json(r);
  assert_string_equal(str(g, "id"), "tensor_cores");
  assert_int_equal(json_integer_value(json_object_get(g, "local_count")), 0);
  json_decref(g);
  http_response_free(r);
  static const struct step steps[] = {
    {"duplicate id", "POST", "/v1/memory/global", "{\"id\":\"tensor_cores\",\"name\":\"x\"}",
     409, "already_exists", "id"},
    {"no name", "POST", "/v1/memory/global", "{}", 400, "missing_field", "name"},
    {"unknown key", "POST", "/v1/memory/global", "{\"name\":\"x\",\"bogus\":1}", 400,
     "unknown_field", "bogus"},
    {"prior out of range", "POST", "/v1/memory/global", "{\"name\":\"x\",\"prior\":9}", 400,
     "invalid_field", "prior"},
    {"unknown trigger", "POST", "/v1/memory/global",
     "{\"name\":\"x\",\"triggers\":[\"bound:memory\",\"nope\"]}", 400, "invalid_field",
     "triggers[1]"},
    {"bad id in body", "POST", "/v1/memory/global", "{\"name\":\"x\",\"id\":\"Bad\"}", 400,
     "invalid_field", "id"},
    {"stats are read-only", "POST", "/v1/memory/global", "{\"name\":\"x\",\"stats\":{}}", 400,
     "invalid_field", "stats"},
    {"not JSON", "POST", "/v1/memory/global", "{name", 400, "bad_json", FIELD_NULL},
    {"not an object", "POST", "/v1/memory/global", "[1]", 400, "bad_json", FIELD_NULL},
    {"get", "GET", "/v1/memory/global/tensor_cores", NULL, 200, NULL, NULL},
    {"get bad id", "GET", "/v1/memory/global/Bad", NULL, 400, "invalid_id", "id"},
    {"get unknown", "GET", "/v1/memory/global/no_such_node", NULL, 404,
     "memory_node_not_found", FIELD_NULL},
    {"patch", "PATCH", "/v1/memory/global/tensor_cores", "{\"intent\":\"mma\",\"prior\":-0.25}",
     200, NULL, NULL},
    {"patch stats", "PATCH", "/v1/memory/global/tensor_cores", "{\"stats\":{\"n\":5}}", 400,
     "invalid_field", "stats"},
    {"patch id", "PATCH", "/v1/memory/global/tensor_cores", "{\"id\":\"other\"}", 400,
     "invalid_field", "id"},
    {"patch empty name", "PATCH", "/v1/memory/global/tensor_cores", "{\"name\":\"\"}", 400,
     "invalid_field", "name"},
    {"patch unknown", "PATCH", "/v1/memory/global/no_such_node", "{\"name\":\"y\"}", 404,
     "memory_node_not_found", FIELD_NULL},
    {"patch bad id", "PATCH", "/v1/memory/global/a", "{\"name\":\"y\"}", 400, "invalid_id", "id"},
    {"delete bad cascade", "DELETE", "/v1/memory/global/tensor_cores?cascade=yes", NULL, 400,
     "invalid_query", "cascade"},
    {"delete bad id", "DELETE", "/v1/memory/global/9lives", NULL, 400, "invalid_id", "id"},
    {"delete", "DELETE", "/v1/memory/global/tensor_cores", NULL, 204, NULL, NULL},
    {"delete again", "DELETE", "/v1/memory/global/tensor_cores", NULL, 404,
     "memory_node_not_found", FIELD_NULL},
    {"delete with locals", "DELETE", "/v1/memory/global/memory_access", NULL, 409,
     "has_local_nodes", FIELD_NULL},
    {"delete with locals, cascade=false", "DELETE",
     "/v1/memory/global/memory_access?cascade=false", NULL, 409, "has_local_nodes", FIELD_NULL},
    {"cascade", "DELETE", "/v1/memory/global/memory_access?cascade=true", NULL, 204, NULL, NULL},
    {"its local is gone", "GET", "/v1/memory/local/vector_float4", NULL, 404,
     "memory_node_not_found", FIELD_NULL},
    {"its edges are gone", "GET", "/v1/memory/edges/memory_access/parallel_mapping", NULL, 404,
     "edge_not_found", FIELD_NULL},
    {"wrong method", "PUT", "/v1/memory/global", "{}", 405, "method_not_allowed", FIELD_NULL},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);
  /* The cascade took every edge to memory_access too. */
  json_t *list = call(server, "GET", "/v1/memory/edges?to=memory_access", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 0);
  json_decref(list);
}

static void test_memory_global_patch_keeps_stats(void **state) {
  struct server *server = *state;
  json_t *before = call(server, "GET", "/v1/memory/global/fusion", NULL, 200);
  json_t *after = call(server, "PATCH", "/v1/memory/global/fusion",
                       "{\"name\":\"Fusion!\",\"risks\":[\"registers\"]}", 200);
  assert_string_equal(str(after, "name"), "Fusion!");
  assert_same_json(json_object_get(before, "intent"), json_object_get(after, "intent"), "intent");
  assert_same_json(json_object_get(before, "stats"), json_object_get(after, "stats"), "stats");
  assert_same_json(json_object_get(before, "prior"), json_object_get(after, "prior"), "prior");
  json_t *risks = json_pack("[s]", "registers");
  assert_same_json(risks, json_object_get(after, "risks"), "risks");
  json_decref(risks);
  json_decref(before);
  json_decref(after);
}

static void test_memory_local_endpoints(void **state) {
  struct server *server = *state;
  json_t *list = call(server, "GET", "/v1/memory/global/fusion/local", NULL, 200);
  json_t *g = call(server, "GET", "/v1/memory/global/fusion", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")),
                   json_integer_value(json_object_get(g, "local_count")));
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(list, "items"), i, l)
    assert_string_equal(str(l, "global"), "fusion");
  json_decref(list);
  json_decref(g);
  struct http_response *r = http_send(
      server, "POST", "/v1/memory/global/fusion/local",
      "{\"name\":\"Fuse bias add\",\"families\":[\"gemm\"],"
      "\"knob_move\":{\"knob\":\"MODE\",\"op\":\"set\",\"value\":\"fused\"}}", NULL);
  assert_int_equal(r->status, 201);
  assert_string_equal(http_header(r, "Location"), "/v1/memory/local/fuse_bias_add");
  l = http_json(r);
  assert_string_equal(str(l, "global"), "fusion");
  assert_int_equal(json_array_size(json_object_get(l, "evidence")), 0);
  json_decref(l);
  http_response_free(r);
  static const struct step steps[] = {
    {"list bad id", "GET", "/v1/memory/global/X/local", NULL, 400, "invalid_id", "id"},
    {"list unknown", "GET", "/v1/memory/global/no_such_node/local", NULL, 404,
     "memory_node_not_found", FIELD_NULL},
    {"create under unknown", "POST", "/v1/memory/global/no_such_node/local", "{\"name\":\"x\"}",
     404, "memory_node_not_found", FIELD_NULL},
    {"create bad parent id", "POST", "/v1/memory/global/X/local", "{\"name\":\"x\"}", 400,
     "invalid_id", "id"},
    {"global in body", "POST", "/v1/memory/global/fusion/local",
     "{\"name\":\"x\",\"global\":\"fusion\"}", 400, "invalid_field", "global"},
    {"bad knob value", "POST", "/v1/memory/global/fusion/local",
     "{\"name\":\"x\",\"knob_move\":{\"knob\":\"VEC\",\"op\":\"mul\",\"value\":1}}", 400,
     "invalid_field", "knob_move.value"},
    {"knob without value", "POST", "/v1/memory/global/fusion/local",
     "{\"name\":\"x\",\"knob_move\":{\"knob\":\"VEC\",\"op\":\"set\"}}", 400, "missing_field",
     "knob_move.value"},
    {"unknown family", "POST", "/v1/memory/global/fusion/local",
     "{\"name\":\"x\",\"families\":[\"conv\"]}", 400, "invalid_field", "families[0]"},
    {"duplicate", "POST", "/v1/memory/global/fusion/local",
     "{\"id\":\"fuse_bias_add\",\"name\":\"x\"}", 409, "already_exists", "id"},
    {"get", "GET", "/v1/memory/local/fuse_bias_add", NULL, 200, NULL, NULL},
    {"get bad id", "GET", "/v1/memory/local/Fuse", NULL, 400, "invalid_id", "id"},
    {"get unknown", "GET", "/v1/memory/local/no_such_node", NULL, 404, "memory_node_not_found",
     FIELD_NULL},
    {"move", "PATCH", "/v1/memory/local/fuse_bias_add", "{\"global\":\"memory_access\"}", 200,
     NULL, NULL},
    {"move to nowhere", "PATCH", "/v1/memory/local/fuse_bias_add", "{\"global\":\"no_such\"}",
     404, "memory_node_not_found", "global"},
    {"drop knob", "PATCH", "/v1/memory/local/fuse_bias_add", "{\"knob_move\":null}", 200, NULL,
     NULL},
    {"patch bad", "PATCH", "/v1/memory/local/fuse_bias_add", "{\"checks\":[1]}", 400,
     "invalid_field", "checks[0]"},
    {"patch stats", "PATCH", "/v1/memory/local/fuse_bias_add", "{\"stats\":{}}", 400,
     "invalid_field", "stats"},
    {"patch unknown", "PATCH", "/v1/memory/local/no_such_node", "{\"name\":\"x\"}", 404,
     "memory_node_not_found", FIELD_NULL},
    {"patch bad id", "PATCH", "/v1/memory/local/-x", "{\"name\":\"x\"}", 400, "invalid_id", "id"},
    {"delete bad id", "DELETE", "/v1/memory/local/A", NULL, 400, "invalid_id", "id"},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);
  l = call(server, "GET", "/v1/memory/local/fuse_bias_add", NULL, 200);
  assert_string_equal(str(l, "global"), "memory_access");
  assert_true(json_is_null(json_object_get(l, "knob_move")));
  assert_string_equal(str(l, "name"), "Fuse bias add");
  json_decref(l);
  json_decref(call(server, "DELETE", "/v1/memory/local/fuse_bias_add", NULL, 204));
  static const struct step gone[] = {
    {"deleted", "GET", "/v1/memory/local/fuse_bias_add", NULL, 404, "memory_node_not_found",
     FIELD_NULL},
    {"delete again", "DELETE", "/v1/memory/local/fuse_bias_add", NULL, 404,
     "memory_node_not_found", FIELD_NULL},
  };
  run_steps(server, gone, sizeof gone / sizeof *gone);
}

static void test_memory_edge_endpoints(void **state) {
  struct server *server = *state;
  json_t *list = call(server, "GET", "/v1/memory/edges?from=memory_access", NULL, 200);
  size_t i, from_count = json_array_size(json_object_get(list, "items"));
  json_t *e;
  assert_true(from_count >= 2);
  json_array_foreach(json_object_get(list, "items"), i, e)
    assert_string_equal(str(e, "from"), "memory_access");
  json_decref(list);
  list = call(server, "GET", "/v1/memory/edges?from=memory_access&to=parallel_mapping", NULL, 200);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  json_decref(list);
  struct http_response *r = http_send(server, "POST", "/v1/memory/edges",
                                      "{\"from\":\"fusion\",\"to\":\"memory_access\","
                                      "\"rationale\":\"fused kernels move more bytes\"}", NULL);
  assert_int_equal(r->status, 201);
  assert_string_equal(http_header(r, "Location"), "/v1/memory/edges/fusion/memory_access");
  e = http_json(r);
  json_t *zero = json_pack("{s:f, s:f, s:n}", "n", 0.0, "reward_sum", 0.0, "mean");
  assert_same_json(zero, json_object_get(e, "stats"), "new edge stats");
  json_decref(zero);
  json_decref(e);
  http_response_free(r);
  static const struct step steps[] = {
    {"filter bad from", "GET", "/v1/memory/edges?from=Bad", NULL, 400, "invalid_query", "from"},
    {"filter bad to", "GET", "/v1/memory/edges?to=x", NULL, 400, "invalid_query", "to"},
    {"duplicate", "POST", "/v1/memory/edges", "{\"from\":\"fusion\",\"to\":\"memory_access\"}",
     409, "already_exists", FIELD_NULL},
    {"to unknown", "POST", "/v1/memory/edges", "{\"from\":\"fusion\",\"to\":\"no_such\"}", 404,
     "memory_node_not_found", "to"},
    {"from unknown", "POST", "/v1/memory/edges", "{\"from\":\"no_such\",\"to\":\"fusion\"}", 404,
     "memory_node_not_found", "from"},
    {"no to", "POST", "/v1/memory/edges", "{\"from\":\"fusion\"}", 400, "missing_field", "to"},
    {"stats read-only", "POST", "/v1/memory/edges",
     "{\"from\":\"fusion\",\"to\":\"fusion\",\"stats\":{}}", 400, "invalid_field", "stats"},
    {"risks not strings", "POST", "/v1/memory/edges",
     "{\"from\":\"fusion\",\"to\":\"fusion\",\"risks\":\"x\"}", 400, "invalid_field", "risks"},
    {"get", "GET", "/v1/memory/edges/fusion/memory_access", NULL, 200, NULL, NULL},
    {"get missing", "GET", "/v1/memory/edges/fusion/fusion", NULL, 404, "edge_not_found",
     FIELD_NULL},
    {"get bad from", "GET", "/v1/memory/edges/Bad/fusion", NULL, 400, "invalid_id", "from"},
    {"get bad to", "GET", "/v1/memory/edges/fusion/Bad", NULL, 400, "invalid_id", "to"},
    {"patch", "PATCH", "/v1/memory/edges/fusion/memory_access", "{\"when\":\"after fusing\"}",
     200, NULL, NULL},
    {"patch from", "PATCH", "/v1/memory/edges/fusion/memory_access", "{\"from\":\"fusion\"}",
     400, "invalid_field", "from"},
    {"patch missing", "PATCH", "/v1/memory/edges/fusion/fusion", "{\"when\":\"x\"}", 404,
     "edge_not_found", FIELD_NULL},
    {"patch bad id", "PATCH", "/v1/memory/edges/fusion/F", "{\"when\":\"x\"}", 400, "invalid_id",
     "to"},
    {"delete bad id", "DELETE", "/v1/memory/edges/F/fusion", NULL, 400, "invalid_id", "from"},
    {"delete", "DELETE", "/v1/memory/edges/fusion/memory_access", NULL, 204, NULL, NULL},
    {"delete again", "DELETE", "/v1/memory/edges/fusion/memory_access", NULL, 404,
     "edge_not_found", FIELD_NULL},
    {"wrong method", "POST", "/v1/memory/edges/fusion/memory_access", "{}", 405,
     "method_not_allowed", FIELD_NULL},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);
}

/* export -> change -> import -> export; refused imports change nothing; reset. */
static void test_memory_export_import_reset(void **state) {
  struct server *server = *state;
  json_t *original = export_doc(server);
  json_t *doc = json_deep_copy(original);
  json_t *g0 = json_array_get(json_object_get(doc, "globals"), 0);
  json_object_set_new(g0, "name", json_string("Renamed direction"));
  json_object_set_new(g0, "stats", json_pack("{s:i, s:i, s:i, s:f, s:f}", "n", 4, "successes", 3,
                                             "improvements", 1, "reward_sum", 0.5, "ema", 0.25));
  json_t *edges = json_object_get(doc, "edges");
  json_array_remove(edges, json_array_size(edges) - 1);
  json_t *l0 = json_array_get(json_object_get(doc, "locals"), 0);
  json_object_set_new(l0, "stats", json_pack("{s:i, s:i, s:f}", "n", 2, "successes", 1,
                                             "reward_sum", 0.75));
  json_object_set_new(l0, "evidence",
                      json_pack("[{s:s, s:n, s:f, s:s, s:s, s:s}]", "task_id", "t1",
                                "candidate_id", "reward", 0.75, "outcome", "correct", "note",
                                "fast", "created_at", "2026-01-02T03:04:05.678Z"));
  json_t *counts = call_json(server, "POST", "/v1/memory/import", doc, 200);
  json_t *want = json_pack("{s:I, s:I, s:I, s:i}", "globals",
                           (json_int_t)json_array_size(json_object_get(doc, "globals")), "locals",
                           (json_int_t)json_array_size(json_object_get(doc, "locals")), "edges",
                           (json_int_t)json_array_size(edges), "evidence", 1);
  assert_same_json(want, counts, "import counts");
  json_decref(want);
  json_decref(counts);
  json_t *after = export_doc(server);
  assert_same_json(doc, after, "export after import");
  json_decref(after);
  json_t *g = call(server, "GET", "/v1/memory/global/memory_access", NULL, 200);
  json_t *mean = json_object_get(json_object_get(g, "stats"), "mean");
  assert_true(json_is_number(mean) && json_number_value(mean) == 0.125);
  json_decref(g);

  /* Refused documents: one error naming the field, and no change. A reference to a node
   * the document lacks is 404 and a repeated id 409, as for single records. */
  static const struct {
    const char *label, *path, *value, *field;
    long status;
    const char *code;
  } bad[] = {
    {"dangling local", "locals.3.global", "\"nowhere\"", "locals[3].global", 404,
     "memory_node_not_found"},
    {"dangling edge", "edges.1.to", "\"nowhere\"", "edges[1].to", 404, "memory_node_not_found"},
    {"duplicate global", "globals.2.id", "\"memory_access\"", "globals[2].id", 409,
     "already_exists"},
    {"bad version", "version", "2", "version", 400, "invalid_import"},
    {"bad prior", "globals.1.prior", "\"high\"", "globals[1].prior", 400, "invalid_import"},
    {"bad evidence", "locals.0.evidence.0.outcome", "7", "locals[0].evidence[0].outcome", 400,
     "invalid_import"},
  };
  size_t failures = 0;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    json_t *broken = json_deep_copy(doc);
    set_path(broken, bad[i].path, bad[i].value);
    char *text = json_dumps(broken, JSON_COMPACT);
    struct http_response *r = http_send(server, "POST", "/v1/memory/import", text, NULL);
    char why[512];
    if (!error_matches(r, bad[i].status, bad[i].code, bad[i].field, why, sizeof why)) {
      print_error("%s: %s\n  body: %.300s\n", bad[i].label, why, r->body);
      failures++;
    }
    http_response_free(r);
    free(text);
    json_decref(broken);
    json_t *now = export_doc(server);
    if (!json_equal(now, doc)) {
      print_error("%s: the memory changed\n", bad[i].label);
      failures++;
    }
    json_decref(now);
  }
  assert_int_equal(failures, 0);
  static const struct step steps[] = {
    {"not JSON", "POST", "/v1/memory/import", "{\"version\":", 400, "bad_json", FIELD_NULL},
    {"empty document", "POST", "/v1/memory/import", "{}", 400, "invalid_import", "version"},
    {"unknown key", "POST", "/v1/memory/import",
     "{\"version\":1,\"globals\":[],\"locals\":[],\"edges\":[],\"x\":1}", 400, "invalid_import",
     "x"},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);

  /* The seed document itself imports as it is. */
  json_t *seed = seed_file();
  counts = call_json(server, "POST", "/v1/memory/import", seed, 200);
  assert_int_equal(json_integer_value(json_object_get(counts, "edges")),
                   json_array_size(json_object_get(seed, "edges")));
  json_decref(counts);
  assert_is_seed(server);
  json_decref(seed);
  json_decref(call_json(server, "POST", "/v1/memory/import", doc, 200));

  counts = call(server, "POST", "/v1/memory/reset", NULL, 200);
  assert_int_equal(json_integer_value(json_object_get(counts, "evidence")), 0);
  json_decref(counts);
  assert_is_seed(server);
  json_decref(doc);
  json_decref(original);
}

/* Writes need the token; reads do not. */
static void test_memory_auth(void **state) {
  struct server *server = *state;
  static const struct {
    const char *method, *path, *body;
  } writes[] = {
    {"POST", "/v1/memory/global", "{\"name\":\"x\"}"},
    {"PATCH", "/v1/memory/global/fusion", "{\"name\":\"x\"}"},
    {"DELETE", "/v1/memory/global/fusion", NULL},
    {"POST", "/v1/memory/global/fusion/local", "{\"name\":\"x\"}"},
    {"PATCH", "/v1/memory/local/vector_float4", "{\"name\":\"x\"}"},
    {"DELETE", "/v1/memory/local/vector_float4", NULL},
    {"POST", "/v1/memory/edges", "{\"from\":\"fusion\",\"to\":\"fusion\"}"},
    {"PATCH", "/v1/memory/edges/memory_access/fusion", "{\"when\":\"x\"}"},
    {"DELETE", "/v1/memory/edges/memory_access/fusion", NULL},
    {"POST", "/v1/memory/import", "{}"},
    {"POST", "/v1/memory/reset", NULL},
  };
  static const char *const wrong[] = {"Authorization: Bearer nope", NULL};
  size_t failures = 0;
  for (size_t i = 0; i < sizeof writes / sizeof *writes; i++) {
    char why[512];
    struct http_response *r = http_send(server, writes[i].method, writes[i].path,
                                        writes[i].body, NULL);
    if (!error_matches(r, 401, "unauthorized", FIELD_NULL, why, sizeof why)) {
      print_error("%s %s without a token: %s\n", writes[i].method, writes[i].path, why);
      failures++;
    }
    http_response_free(r);
    r = http_send(server, writes[i].method, writes[i].path, writes[i].body, wrong);
    if (!error_matches(r, 403, "forbidden", FIELD_NULL, why, sizeof why)) {
      print_error("%s %s with a wrong token: %s\n", writes[i].method, writes[i].path, why);
      failures++;
    }
    http_response_free(r);
  }
  assert_int_equal(failures, 0);
  static const char *const right[] = {AUTH, NULL};
  struct http_response *r = http_send(server, "POST", "/v1/memory/reset", NULL, right);
  assert_int_equal(r->status, 200);
  http_response_free(r);
  r = http_send(server, "GET", "/v1/memory/export", NULL, NULL);
  assert_int_equal(r->status, 200);
  http_response_free(r);
}

/* ---------------------------------------------------------------- the CLI */

/* Runs `opforge memory ARGS --server URL` in-process with stdout captured into *ret_out
 * (caller frees). Returns the exit status. */
static int run_cli(struct server *server, char **ret_out, const char *a1, const char *a2,
                   const char *a3, const char *a4) {
  char *argv[10] = {"memory"};
  int argc = 1;
  const char *args[] = {a1, a2, a3, a4};
  for (size_t i = 0; i < 4 && args[i]; i++)
    argv[argc++] = (char *)args[i];
  argv[argc++] = "--server";
  argv[argc++] = (char *)server_url(server);
  char path[] = "/tmp/opforge-cli-out-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stdout);
  int saved = dup(1);
  assert_true(saved >= 0 && dup2(fd, 1) == 1);
  int rc = cli_memory_main(argc, argv);
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

static void test_memory_cli(void **state) {
  struct server *server = *state;
  unsetenv("OPFORGE_TOKEN");
  unsetenv("OPFORGE_TOKEN_FILE");
  char file[] = "/tmp/opforge-memory-export-XXXXXX";
  int fd = mkstemp(file);
  assert_true(fd >= 0);
  close(fd);
  char *out = NULL;
  assert_int_equal(run_cli(server, &out, "export", "-o", file, NULL), 0);
  free(out);
  json_error_t jerr;
  json_t *doc = json_load_file(file, 0, &jerr);
  assert_non_null(doc);
  json_object_del(doc, "exported_at");
  json_t *live = export_doc(server);
  assert_same_json(live, doc, "exported file");
  json_decref(live);

  /* Import a changed file; the server then serves the change. */
  json_object_set_new(json_array_get(json_object_get(doc, "globals"), 1), "intent",
                      json_string("changed by the CLI"));
  assert_int_equal(json_dump_file(doc, file, JSON_INDENT(2)), 0);
  assert_int_equal(run_cli(server, &out, "import", file, NULL, NULL), 0);
  assert_non_null(strstr(out, "imported: "));
  free(out);
  json_t *g = call(server, "GET", "/v1/memory/global/data_reuse", NULL, 200);
  assert_string_equal(str(g, "intent"), "changed by the CLI");
  json_decref(g);

  /* show: the table, a global with its locals, a local, an unknown id. */
  assert_int_equal(run_cli(server, &out, "show", NULL, NULL, NULL), 0);
  assert_non_null(strstr(out, "memory_access"));
  assert_non_null(strstr(out, "LOCALS"));
  free(out);
  assert_int_equal(run_cli(server, &out, "show", "memory_access", NULL, NULL), 0);
  assert_non_null(strstr(out, "local vector_float4"));
  assert_non_null(strstr(out, "edge -> parallel_mapping"));
  free(out);
  assert_int_equal(run_cli(server, &out, "show", "vector_float4", NULL, NULL), 0);
  assert_non_null(strstr(out, "knob move: VEC set 4"));
  free(out);
  assert_int_equal(run_cli(server, &out, "show", "no_such_node", NULL, NULL), 1);
  free(out);

  /* A refused import exits 1; an unreadable or non-JSON file 2; reset restores. */
  json_object_set_new(json_array_get(json_object_get(doc, "locals"), 0), "global",
                      json_string("nowhere"));
  assert_int_equal(json_dump_file(doc, file, 0), 0);
  assert_int_equal(run_cli(server, &out, "import", file, NULL, NULL), 1);
  free(out);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fputs("{not json", f);
  fclose(f);
  assert_int_equal(run_cli(server, &out, "import", file, NULL, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "import", "/nonexistent/file.json", NULL, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "import", NULL, NULL, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "frobnicate", NULL, NULL, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "show", "-o", file, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "reset", NULL, NULL, NULL), 0);
  assert_non_null(strstr(out, "reset to the seed: "));
  free(out);
  assert_is_seed(server);

  /* Namespaces: create, list, work in one with --memory, delete. */
  assert_int_equal(run_cli(server, &out, "create", "cli_ns", "--from", "empty"), 0);
  assert_string_equal(out, "created memory namespace cli_ns from empty: 0 global nodes, 0 "
                           "local nodes, 0 edges\n");
  free(out);
  assert_int_equal(run_cli(server, &out, "namespaces", NULL, NULL, NULL), 0);
  assert_non_null(strstr(out, "\ncli_ns "));
  assert_non_null(strstr(out, "\ndefault "));
  free(out);
  assert_int_equal(run_cli(server, &out, "show", "--memory", "cli_ns", NULL), 0);
  assert_string_equal(out, "the memory is empty\n");
  free(out);
  assert_int_equal(run_cli(server, &out, "reset", "--memory", "cli_ns", NULL), 0);
  free(out);
  assert_int_equal(run_cli(server, &out, "show", "fusion", "--memory", "cli_ns"), 0);
  assert_non_null(strstr(out, "global fusion: "));
  free(out);
  assert_int_equal(run_cli(server, &out, "export", "--memory", "nope", NULL), 1);
  free(out);
  assert_int_equal(run_cli(server, &out, "create", NULL, NULL, NULL), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "delete", "cli_ns", "--memory", "x"), 2);
  free(out);
  assert_int_equal(run_cli(server, &out, "delete", "cli_ns", NULL, NULL), 0);
  assert_string_equal(out, "deleted memory namespace cli_ns\n");
  free(out);
  assert_int_equal(run_cli(server, &out, "delete", "cli_ns", NULL, NULL), 1);
  free(out);
  unlink(file);
  json_decref(doc);
}

/* ---------------------------------------------------------------- namespaces */

#define REF_BODY "\"reference\":\"class Model(x): pass\\ndef get_inputs(): pass\\n" \
                 "def get_init_inputs(): pass\\n\""

/* Namespaces: create from the seed, empty or a copy; ?memory= on the memory routes
 * (writes stay in their namespace); unknown and malformed names; delete; and the
 * submission's memory and search fields. */
static void test_memory_namespaces(void **state) {
  struct server *server = *state;
  json_t *list = call(server, "GET", "/v1/memory/namespaces", NULL, 200);
  json_t *one = json_array_get(json_object_get(list, "items"), 0);
  assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
  assert_string_equal(str(one, "name"), "default");
  assert_string_equal(str(one, "origin"), "seed");
  json_t *seed = seed_file();
  assert_int_equal(json_integer_value(json_object_get(one, "globals")),
                   json_array_size(json_object_get(seed, "globals")));
  assert_int_equal(json_integer_value(json_object_get(one, "locals")),
                   json_array_size(json_object_get(seed, "locals")));
  json_decref(list);
  struct http_response *r =
      http_send(server, "POST", "/v1/memory/namespaces", "{\"name\":\"arm_a\"}", NULL);
  assert_int_equal(r->status, 201);
  assert_string_equal(http_header(r, "Location"), "/v1/memory/namespaces/arm_a");
  one = http_json(r);
  assert_string_equal(str(one, "origin"), "seed");
  assert_int_equal(json_integer_value(json_object_get(one, "edges")),
                   json_array_size(json_object_get(seed, "edges")));
  json_decref(one);
  http_response_free(r);
  json_decref(seed);
  static const struct step steps[] = {
    {"empty", "POST", "/v1/memory/namespaces", "{\"name\":\"arm_e\",\"from\":\"empty\"}", 201,
     NULL, NULL},
    {"copy", "POST", "/v1/memory/namespaces", "{\"name\":\"arm-c\",\"from\":\"arm_a\"}", 201,
     NULL, NULL},
    {"taken", "POST", "/v1/memory/namespaces", "{\"name\":\"arm_a\"}", 409, "already_exists",
     "name"},
    {"bad name", "POST", "/v1/memory/namespaces", "{\"name\":\"Arm\"}", 400, "invalid_field",
     "name"},
    {"reserved name", "POST", "/v1/memory/namespaces", "{\"name\":\"seed\"}", 400,
     "invalid_field", "name"},
    {"no name", "POST", "/v1/memory/namespaces", "{\"from\":\"seed\"}", 400, "missing_field",
     "name"},
    {"unknown key", "POST", "/v1/memory/namespaces", "{\"name\":\"x1\",\"copy\":true}", 400,
     "unknown_field", "copy"},
    {"from nothing", "POST", "/v1/memory/namespaces", "{\"name\":\"x1\",\"from\":\"nope\"}",
     404, "memory_namespace_not_found", "from"},
    {"from a number", "POST", "/v1/memory/namespaces", "{\"name\":\"x1\",\"from\":5}", 400,
     "invalid_field", "from"},
    {"not JSON", "POST", "/v1/memory/namespaces", "{", 400, "bad_json", FIELD_NULL},
    {"get", "GET", "/v1/memory/namespaces/arm-c", NULL, 200, NULL, NULL},
    {"get unknown", "GET", "/v1/memory/namespaces/nope", NULL, 404,
     "memory_namespace_not_found", FIELD_NULL},
    {"get bad", "GET", "/v1/memory/namespaces/Nope", NULL, 400, "invalid_id", "name"},
    {"empty lists", "GET", "/v1/memory/global?memory=arm_e", NULL, 200, NULL, NULL},
    {"unknown ns", "GET", "/v1/memory/global?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"bad ns", "GET", "/v1/memory/global?memory=No!", NULL, 400, "invalid_query", "memory"},
    {"unknown ns, node", "GET", "/v1/memory/global/fusion?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"unknown ns, local", "GET", "/v1/memory/local/vector_float4?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"unknown ns, edges", "GET", "/v1/memory/edges?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"unknown ns, edge", "GET", "/v1/memory/edges/fusion/data_reuse?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"unknown ns, export", "GET", "/v1/memory/export?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"unknown ns, score", "GET", "/v1/memory/score?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"unknown ns, reset", "POST", "/v1/memory/reset?memory=nope", NULL, 404,
     "memory_namespace_not_found", "memory"},
    {"unknown ns, import", "POST", "/v1/memory/import?memory=nope", "{}", 404,
     "memory_namespace_not_found", "memory"},
    {"bad ns, export", "GET", "/v1/memory/export?memory=seed", NULL, 400, "invalid_query",
     "memory"},
    {"write in arm_e", "POST", "/v1/memory/global?memory=arm_e", "{\"name\":\"Only here\"}",
     201, NULL, NULL},
    {"not in default", "GET", "/v1/memory/global/only_here", NULL, 404, "memory_node_not_found",
     FIELD_NULL},
    {"not in arm_a", "GET", "/v1/memory/global/only_here?memory=arm_a", NULL, 404,
     "memory_node_not_found", FIELD_NULL},
    {"in arm_e", "GET", "/v1/memory/global/only_here?memory=arm_e", NULL, 200, NULL, NULL},
    {"edit in arm_a", "PATCH", "/v1/memory/global/fusion?memory=arm_a", "{\"intent\":\"a\"}",
     200, NULL, NULL},
    {"local in arm_e", "POST", "/v1/memory/global/only_here/local?memory=arm_e",
     "{\"name\":\"Mine\"}", 201, NULL, NULL},
    {"edge in arm_a", "DELETE", "/v1/memory/edges/fusion/data_reuse?memory=arm_a", NULL, 204,
     NULL, NULL},
    {"score in arm_a", "GET", "/v1/memory/score?memory=arm_a&prefix=fusion", NULL, 200, NULL,
     NULL},
    {"reset arm-c", "POST", "/v1/memory/reset?memory=arm-c", NULL, 200, NULL, NULL},
    {"delete default", "DELETE", "/v1/memory/namespaces/default", NULL, 409, "conflict", "name"},
    {"delete bad", "DELETE", "/v1/memory/namespaces/A", NULL, 400, "invalid_id", "name"},
    {"unknown search key", "POST", "/v1/tasks", "{" REF_BODY ",\"search\":{\"bogus\":1}}", 400,
     "unknown_field", "search.bogus"},
    {"search out of range", "POST", "/v1/tasks", "{" REF_BODY ",\"search\":{\"tau\":0}}", 400,
     "invalid_field", "search.tau"},
    {"search enum", "POST", "/v1/tasks", "{" REF_BODY ",\"search\":{\"retrieval\":\"tree\"}}",
     400, "invalid_field", "search.retrieval"},
    {"search not an object", "POST", "/v1/tasks", "{" REF_BODY ",\"search\":5}", 400,
     "invalid_field", "search"},
    {"memory malformed", "POST", "/v1/tasks", "{" REF_BODY ",\"memory\":\"No!\"}", 400,
     "invalid_field", "memory"},
    {"memory unknown", "POST", "/v1/tasks", "{" REF_BODY ",\"memory\":\"nope\"}", 404,
     "memory_namespace_not_found", "memory"},
    {"best_of_n", "POST", "/v1/tasks", "{" REF_BODY ",\"policy\":\"best_of_n\"}", 202, NULL,
     NULL},
  };
  run_steps(server, steps, sizeof steps / sizeof *steps);
  /* The edits stayed in their namespaces: the default is still the seed, arm-c too (it
   * was reset), arm_a lost an edge and changed an intent, arm_e has one node. */
  assert_is_seed(server);
  json_t *a = call(server, "GET", "/v1/memory/global/fusion?memory=arm_a", NULL, 200);
  assert_string_equal(str(a, "intent"), "a");
  json_decref(a);
  json_t *e = call(server, "GET", "/v1/memory/namespaces/arm_e", NULL, 200);
  assert_int_equal(json_integer_value(json_object_get(e, "globals")), 1);
  assert_int_equal(json_integer_value(json_object_get(e, "locals")), 1);
  json_decref(e);
  json_t *c = call(server, "GET", "/v1/memory/export?memory=arm-c", NULL, 200);
  json_t *d = call(server, "GET", "/v1/memory/export", NULL, 200);
  json_t *cg = descriptive(c, "globals"), *dg = descriptive(d, "globals");
  assert_same_json(dg, cg, "arm-c reset to the seed");
  json_decref(cg);
  json_decref(dg);
  /* Import into one namespace: arm_e becomes the default's export. */
  json_object_del(d, "exported_at");
  json_decref(call_json(server, "POST", "/v1/memory/import?memory=arm_e", d, 200));
  json_t *imported = call(server, "GET", "/v1/memory/export?memory=arm_e", NULL, 200);
  json_object_del(imported, "exported_at");
  assert_same_json(d, imported, "import into arm_e");
  json_decref(imported);
  json_decref(c);
  json_decref(d);
  /* A task records its namespace and its whole search settings; the namespace of a
   * queued task cannot be deleted. */
  json_t *task = call(server, "POST", "/v1/tasks",
                      "{" REF_BODY ",\"memory\":\"arm-c\",\"search\":{\"prefix_len\":0,"
                      "\"retrieval\":\"flat\"}}", 202);
  json_t *options = json_object_get(task, "options");
  assert_string_equal(str(options, "memory"), "arm-c");
  json_t *search = json_object_get(options, "search");
  assert_int_equal(json_integer_value(json_object_get(search, "prefix_len")), 0);
  assert_string_equal(str(search, "retrieval"), "flat");
  assert_true(json_real_value(json_object_get(search, "tree_c")) == 0.3);
  assert_true(json_is_true(json_object_get(search, "local_memory")));
  json_decref(task);
  static const struct step ends[] = {
    {"in use", "DELETE", "/v1/memory/namespaces/arm-c", NULL, 409, "conflict", "name"},
    {"delete", "DELETE", "/v1/memory/namespaces/arm_a", NULL, 204, NULL, NULL},
    {"delete again", "DELETE", "/v1/memory/namespaces/arm_a", NULL, 404,
     "memory_namespace_not_found", FIELD_NULL},
    {"gone", "GET", "/v1/memory/global?memory=arm_a", NULL, 404, "memory_namespace_not_found",
     "memory"},
  };
  run_steps(server, ends, sizeof ends / sizeof *ends);
}

#define WITH(server_setup, test) \
  cmocka_unit_test_setup_teardown(test, server_setup, teardown_server)

size_t memory_api_tests(const struct CMUnitTest **ret_tests) {
  static const struct CMUnitTest tests[] = {
    WITH(setup_fresh_server, test_memory_seeded_at_start),
    WITH(setup_server, test_memory_global_endpoints),
    WITH(setup_server, test_memory_global_patch_keeps_stats),
    WITH(setup_server, test_memory_local_endpoints),
    WITH(setup_server, test_memory_edge_endpoints),
    WITH(setup_server, test_memory_export_import_reset),
    WITH(setup_auth_server, test_memory_auth),
    WITH(setup_server, test_memory_cli),
    WITH(setup_server, test_memory_namespaces),
  };
  *ret_tests = tests;
  return sizeof tests / sizeof *tests;
}
