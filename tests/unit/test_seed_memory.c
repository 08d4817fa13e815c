/* Unit tests of the seed memory (schema/seed_memory.json): structure, vocabularies,
 * references, knob moves, family coverage; each rule is also shown to reject a broken
 * copy of the document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/htam.h"
#include "schema/memory_vocab.h"
#include "engine/tree.h"

static const char *const required_globals[] = {
  "memory_access", "data_reuse", "parallel_mapping", "reduction_strategy",
  "fusion", "instruction_throughput", "boundary_correctness", NULL};
static const char *const knobs[] = {"VEC",    "BLOCK", "ITEMS", "ROWS", "BM",
                                    "BN",     "BK",    "TM",    "TN",   "STAGES",
                                    "UNROLL", "MINB",  "SPLIT", "MODE", NULL};

/* cmocka 1.1 compares only floats: doubles are checked here to the given tolerance. */
#define assert_near(a, b, tol) near_or_fail((a), (b), (tol), #a, __FILE__, __LINE__)
static void near_or_fail(double a, double b, double tol, const char *what, const char *file,
                         int line) {
  if (!(fabs(a - b) <= tol))
    fail_msg("%s:%d: %s = %.17g, expected %.17g (tolerance %g)", file, line, what, a, b, tol);
}

/* Validation failure: the first problem found, as text. */
static char problem[512];

__attribute__((format(printf, 1, 2))) static bool bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(problem, sizeof problem, fmt, ap);
  va_end(ap);
  return false;
}

static bool in_list(const char *const *list, const char *s) {
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i], s) == 0)
      return true;
  return false;
}

/* An id: [a-z0-9_]+, short enough for a tree node's buffers. */
static bool id_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= TREE_ID_MAX)
    return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

static bool nonempty_string(const json_t *v) {
  return json_is_string(v) && json_string_length(v) > 0;
}

/* A non-empty array of non-empty strings, each accepted by known (NULL: any). */
static bool string_array(const json_t *a, const char *what, bool (*known)(const char *)) {
  if (!json_is_array(a) || json_array_size(a) == 0)
    return bad("%s: must be a non-empty array", what);
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v) {
    if (!nonempty_string(v))
      return bad("%s[%zu]: must be a non-empty string", what, i);
    if (known && !known(json_string_value(v)))
      return bad("%s[%zu]: unknown value '%s'", what, i, json_string_value(v));
    for (size_t j = 0; j < i; j++)
      if (json_equal(json_array_get(a, j), v))
        return bad("%s[%zu]: duplicate '%s'", what, i, json_string_value(v));
  }
  return true;
}

static bool check_global(const json_t *g, size_t i) {
  char what[64];
  const char *id, *name, *intent;
  json_t *objectives, *triggers, *risks;
  double prior;
  json_error_t e;
  if (json_unpack_ex((json_t *)g, &e, JSON_STRICT, "{s:s, s:s, s:s, s:o, s:o, s:o, s:F}",
                     "id", &id, "name", &name, "intent", &intent, "objectives", &objectives,
                     "triggers", &triggers, "risks", &risks, "prior", &prior) < 0)
    return bad("globals[%zu]: %s", i, e.text);
  if (!id_ok(id) || !*name || !*intent)
    return bad("globals[%zu]: id, name and intent must be non-empty (id [a-z0-9_])", i);
  if (!(prior > 0.0 && prior <= 1.0))
    return bad("globals[%zu].prior: %g outside (0, 1]", i, prior);
  snprintf(what, sizeof what, "globals[%zu].objectives", i);
  if (!string_array(objectives, what, NULL))
    return false;
  snprintf(what, sizeof what, "globals[%zu].triggers", i);
  if (!string_array(triggers, what, htam_trigger_known))
    return false;
  snprintf(what, sizeof what, "globals[%zu].risks", i);
  return string_array(risks, what, NULL);
}

static bool check_knob_move(const json_t *m, size_t i) {
  const char *knob, *op;
  json_t *value;
  json_error_t e;
  if (json_unpack_ex((json_t *)m, &e, JSON_STRICT, "{s:s, s:s, s:o}", "knob", &knob, "op",
                     &op, "value", &value) < 0)
    return bad("locals[%zu].knob_move: %s", i, e.text);
  if (!in_list(knobs, knob))
    return bad("locals[%zu].knob_move.knob: unknown '%s'", i, knob);
  if (strcmp(op, "set") != 0 && strcmp(op, "mul") != 0 && strcmp(op, "div") != 0)
    return bad("locals[%zu].knob_move.op: unknown '%s'", i, op);
  if (strcmp(knob, "MODE") == 0) {
    if (strcmp(op, "set") != 0 || !id_ok(json_is_string(value) ? json_string_value(value) : ""))
      return bad("locals[%zu].knob_move: MODE takes op set and a [a-z0-9_] string", i);
    return true;
  }
  if (!json_is_integer(value) || json_integer_value(value) < 1 ||
      json_integer_value(value) > 1024)
    return bad("locals[%zu].knob_move.value: %s needs an integer in 1..1024", i, knob);
  if (strcmp(op, "set") != 0 && json_integer_value(value) < 2)
    return bad("locals[%zu].knob_move.value: mul/div need a factor >= 2", i);
  return true;
}

/* Index of the global with this id, or -1. */
static int global_index(const json_t *globals, const char *id) {
  size_t i;
  json_t *g;
  json_array_foreach(globals, i, g)
    if (strcmp(json_string_value(json_object_get(g, "id")), id) == 0)
      return (int)i;
  return -1;
}

static bool check_local(const json_t *l, size_t i, const json_t *globals) {
  char what[64];
  const char *id, *global, *name, *edit;
  json_t *move, *checks, *families;
  json_error_t e;
  if (json_unpack_ex((json_t *)l, &e, JSON_STRICT, "{s:s, s:s, s:s, s:s, s:o, s:o, s:o}",
                     "id", &id, "global", &global, "name", &name, "edit_pattern", &edit,
                     "knob_move", &move, "checks", &checks, "families", &families) < 0)
    return bad("locals[%zu]: %s", i, e.text);
  if (!id_ok(id) || !*name || !*edit)
    return bad("locals[%zu]: id, name and edit_pattern must be non-empty (id [a-z0-9_])", i);
  if (global_index(globals, global) < 0)
    return bad("locals[%zu].global: no global '%s'", i, global);
  if (!check_knob_move(move, i))
    return false;
  snprintf(what, sizeof what, "locals[%zu].checks", i);
  if (!string_array(checks, what, NULL))
    return false;
  snprintf(what, sizeof what, "locals[%zu].families", i);
  return string_array(families, what, htam_family_known);
}

static bool check_edge(const json_t *ed, size_t i, const json_t *globals) {
  const char *from, *to, *when, *rationale;
  json_t *risks;
  json_error_t e;
  if (json_unpack_ex((json_t *)ed, &e, JSON_STRICT, "{s:s, s:s, s:s, s:s, s:o}", "from",
                     &from, "to", &to, "when", &when, "rationale", &rationale, "risks",
                     &risks) < 0)
    return bad("edges[%zu]: %s", i, e.text);
  if (global_index(globals, from) < 0 || global_index(globals, to) < 0)
    return bad("edges[%zu]: %s -> %s names a missing global", i, from, to);
  if (!*when || !*rationale)
    return bad("edges[%zu]: when and rationale must be non-empty", i);
  char what[64];
  snprintf(what, sizeof what, "edges[%zu].risks", i);
  return string_array(risks, what, NULL);
}

/* True when the string member key of two array elements repeats; names it. */
static bool unique_ids(const json_t *a, const char *what) {
  for (size_t i = 0; i < json_array_size(a); i++)
    for (size_t j = 0; j < i; j++)
      if (strcmp(json_string_value(json_object_get(json_array_get(a, i), "id")),
                 json_string_value(json_object_get(json_array_get(a, j), "id"))) == 0)
        return bad("%s[%zu]: duplicate id", what, i);
  return true;
}

static bool check_coverage(const json_t *globals, const json_t *locals) {
  for (size_t f = 0; htam_families[f]; f++) {
    size_t count = 0, i;
    json_t *l;
    json_array_foreach(locals, i, l) {
      size_t j;
      json_t *fam;
      json_array_foreach(json_object_get(l, "families"), j, fam)
        count += strcmp(json_string_value(fam), htam_families[f]) == 0;
    }
    if (count < 3)
      return bad("family %s: only %zu locals (need 3)", htam_families[f], count);
  }
  size_t gi;
  json_t *g;
  json_array_foreach(globals, gi, g) {
    size_t count = 0, i;
    json_t *l;
    const char *id = json_string_value(json_object_get(g, "id"));
    json_array_foreach(locals, i, l)
      count += strcmp(json_string_value(json_object_get(l, "global")), id) == 0;
    if (count < 3)
      return bad("global %s: only %zu locals (need 3)", id, count);
  }
  return true;
}

static bool check_edges(const json_t *edges, const json_t *globals) {
  if (!json_is_array(edges) || json_array_size(edges) < 12)
    return bad("edges: need an array of at least 12");
  size_t i;
  json_t *ed;
  json_array_foreach(edges, i, ed) {
    if (!check_edge(ed, i, globals))
      return false;
    for (size_t j = 0; j < i; j++) {
      const json_t *o = json_array_get(edges, j);
      if (json_equal(json_object_get(o, "from"), json_object_get(ed, "from")) &&
          json_equal(json_object_get(o, "to"), json_object_get(ed, "to")))
        return bad("edges[%zu]: duplicate transition", i);
    }
  }
  return true;
}

/* Validates the whole document; on false, problem says why. */
static bool validate(const json_t *doc) {
  json_t *globals, *locals, *edges;
  json_int_t version;
  json_error_t e;
  if (json_unpack_ex((json_t *)doc, &e, JSON_STRICT, "{s:I, s:o, s:o, s:o}", "version",
                     &version, "globals", &globals, "locals", &locals, "edges", &edges) < 0)
    return bad("document: %s", e.text);
  if (version != 1)
    return bad("version: %lld, expected 1", (long long)version);
  if (!json_is_array(globals) || json_array_size(globals) != 7)
    return bad("globals: need exactly 7");
  size_t i;
  json_t *v;
  json_array_foreach(globals, i, v)
    if (!check_global(v, i))
      return false;
  if (!unique_ids(globals, "globals"))
    return false;
  for (size_t r = 0; required_globals[r]; r++)
    if (global_index(globals, required_globals[r]) < 0)
      return bad("globals: missing '%s'", required_globals[r]);
  if (!json_is_array(locals) || json_array_size(locals) < 35)
    return bad("locals: need at least 35");
  json_array_foreach(locals, i, v)
    if (!check_local(v, i, globals))
      return false;
  if (!unique_ids(locals, "locals") || !check_coverage(globals, locals))
    return false;
  return check_edges(edges, globals);
}

static json_t *load_seed(void) {
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  char path[4096];
  snprintf(path, sizeof path, "%s/schema/seed_memory.json", root ? root : ".");
  json_error_t e;
  json_t *doc = json_load_file(path, 0, &e);
  if (!doc)
    fail_msg("%s:%d: %s", path, e.line, e.text);
  return doc;
}

static void test_seed_is_valid(void **state) {
  (void)state;
  json_t *doc = load_seed();
  if (!validate(doc))
    fail_msg("seed memory: %s", problem);
  json_decref(doc);
}

/* The HTAM scorer accepts every seed global as it is (prior, triggers). */
static void test_seed_scores(void **state) {
  (void)state;
  json_t *doc = load_seed();
  json_t *globals = json_object_get(doc, "globals");
  struct htam_global g[7];
  const char *trig[7][16];
  for (size_t i = 0; i < 7; i++) {
    json_t *gj = json_array_get(globals, i);
    json_t *t = json_object_get(gj, "triggers");
    assert_true(json_array_size(t) <= 16);
    for (size_t j = 0; j < json_array_size(t); j++)
      trig[i][j] = json_string_value(json_array_get(t, j));
    g[i] = (struct htam_global){json_string_value(json_object_get(gj, "id")),
                                json_real_value(json_object_get(gj, "prior")), 0, 0.0,
                                trig[i], json_array_size(t)};
  }
  struct search_config cfg;
  search_config_defaults(&cfg);
  struct htam_state st = {"correctness", "memory", "norm"};
  struct htam_score s[7];
  assert_int_equal(htam_score(&cfg, g, 7, NULL, 0, NULL, 0, &st, s), 0);
  double total = 0.0;
  for (size_t i = 0; i < 7; i++) {
    assert_true(s[i].trigger >= 0.0 && s[i].trigger <= 1.0);
    assert_near(s[i].mu, g[i].prior, 1e-12); /* no tries: mu is the prior */
    total += s[i].pi;
  }
  assert_near(total, 1.0, 1e-12);
  /* boundary_correctness is the only global triggered by a correctness failure. */
  assert_near(s[6].trigger, 1.0 / 3.0, 1e-12);
  json_decref(doc);
}

/* Mutates a fresh copy of the seed with edit, and expects validate to name want. */
static void expect_rejected(void (*edit)(json_t *doc), const char *want) {
  json_t *doc = load_seed();
  edit(doc);
  if (validate(doc))
    fail_msg("a broken seed passed (expected: %s)", want);
  if (!strstr(problem, want))
    fail_msg("problem '%s' does not mention '%s'", problem, want);
  json_decref(doc);
}

static json_t *local_at(json_t *doc, size_t i) {
  return json_array_get(json_object_get(doc, "locals"), i);
}
static void edit_parent(json_t *d) {
  json_object_set_new(local_at(d, 3), "global", json_string("memory"));
}
static void edit_family(json_t *d) {
  json_array_append_new(json_object_get(local_at(d, 0), "families"), json_string("conv"));
}
static void edit_knob(json_t *d) {
  json_object_set_new(json_object_get(local_at(d, 1), "knob_move"), "knob", json_string("WARPS"));
}
static void edit_mode_value(json_t *d) {
  json_t *m = json_object_get(local_at(d, 0), "knob_move");
  json_object_set_new(m, "knob", json_string("MODE"));
  json_object_set_new(m, "op", json_string("mul"));
}
static void edit_dup_id(json_t *d) {
  json_object_set(local_at(d, 5), "id", json_object_get(local_at(d, 4), "id"));
}
static void edit_trigger(json_t *d) {
  json_t *g = json_array_get(json_object_get(d, "globals"), 2);
  json_array_append_new(json_object_get(g, "triggers"), json_string("failure:segfault"));
}
static void edit_edge(json_t *d) {
  json_object_set_new(json_array_get(json_object_get(d, "edges"), 0), "to",
                      json_string("nowhere"));
}
static void edit_empty_checks(json_t *d) {
  json_array_clear(json_object_get(local_at(d, 7), "checks"));
}
static void edit_extra_key(json_t *d) {
  json_object_set_new(local_at(d, 2), "note", json_string("x"));
}
/* Takes "scan" out of every local, dropping the locals that apply to scans only. */
static void edit_coverage(json_t *d) {
  json_t *locals = json_object_get(d, "locals");
  for (size_t i = json_array_size(locals); i-- > 0;) {
    json_t *f = json_object_get(json_array_get(locals, i), "families");
    for (size_t j = json_array_size(f); j-- > 0;)
      if (strcmp(json_string_value(json_array_get(f, j)), "scan") == 0)
        json_array_remove(f, j);
    if (json_array_size(f) == 0)
      json_array_remove(locals, i);
  }
}

static void test_rules_reject(void **state) {
  (void)state;
  expect_rejected(edit_parent, "no global 'memory'");
  expect_rejected(edit_family, "unknown value 'conv'");
  expect_rejected(edit_knob, "unknown 'WARPS'");
  expect_rejected(edit_mode_value, "MODE takes op set");
  expect_rejected(edit_dup_id, "locals[5]: duplicate id");
  expect_rejected(edit_trigger, "failure:segfault");
  expect_rejected(edit_edge, "missing global");
  expect_rejected(edit_empty_checks, "locals[7].checks");
  expect_rejected(edit_extra_key, "locals[2]");
  expect_rejected(edit_coverage, "family scan");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_seed_is_valid),
    cmocka_unit_test(test_seed_scores),
    cmocka_unit_test(test_rules_reject),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
