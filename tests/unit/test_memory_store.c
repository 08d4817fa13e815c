/* Unit tests of the memory graph store: seeding, CRUD, cascade delete, validation paths,
 * import atomicity, the step update's arithmetic, concurrency and fault injection. They
 * run on SQLite, or on PostgreSQL when OPFORGE_TEST_PG is set
 * (tests/unit/store_backend.h). */
#include "store/fault.h"
#include "store/memory.h"
#include "store/store.h"
#include "store/transaction.h"
#include "tests/unit/store_backend.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SITES 5000 /* fault sites of one operation; reaching it means no convergence */

struct fixture {
  char dir[64];
  struct store *s;
};

/* ---- helpers ---- */

/* The store of dir on the backend under test; fails the test when it does not open.
 * The caller owns it. */
static struct store *open_store(const char *dir) {
  return test_store_open(dir);
}

/* A fresh store with the seed loaded. */
static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/opforge-test-memory-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  f->s = open_store(f->dir);
  bool loaded = false;
  assert_int_equal(store_memory_seed_if_empty(f->s, &loaded), STORE_OK);
  assert_true(loaded);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  store_fail_after(-1);
  store_close(f->s);
  test_store_remove(f->dir);
  free(f);
  return 0;
}

/* Parses JSON text (a test literal); caller owns the result. */
static json_t *J(const char *text) {
  json_error_t jerr;
  json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
  if (!v)
    fail_msg("bad test JSON: %s: %s", jerr.text, text);
  return v;
}

/* The seed file of the source tree; caller owns it. */
static json_t *seed_file(void) {
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  if (!root)
    fail_msg("OPFORGE_SOURCE_ROOT is not set (meson test sets it)");
  char path[1024];
  snprintf(path, sizeof path, "%s/schema/seed_memory.json", root);
  json_error_t jerr;
  json_t *doc = json_load_file(path, 0, &jerr);
  if (!doc)
    fail_msg("%s: %s", path, jerr.text);
  return doc;
}

/* The export without exported_at, for comparing two states. Caller owns it. */
static json_t *snapshot(struct store *s) {
  json_t *doc = NULL;
  assert_int_equal(store_memory_export(s, NULL, &doc), STORE_OK);
  assert_int_equal(json_object_del(doc, "exported_at"), 0);
  return doc;
}

static void assert_same_json(const json_t *a, const json_t *b);

/* Asserts that got (borrowed) equals the JSON text want. */
static void assert_json_is(const char *want, const json_t *got) {
  json_t *w = J(want);
  assert_same_json(w, got);
  json_decref(w);
}

static void assert_same_json(const json_t *a, const json_t *b) {
  if (!json_equal((json_t *)a, (json_t *)b)) {
    char *x = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
    char *y = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    print_error("want %.2000s\n got %.2000s\n", x, y);
    free(x);
    free(y);
    fail();
  }
}

/* cmocka 1.1 compares only integers: doubles are compared here, exactly. */
#define assert_double_equal(a, b) double_equal_or_fail((a), (b), #a, __FILE__, __LINE__)
static void double_equal_or_fail(double a, double b, const char *what, const char *file,
                                 int line) {
  if (a != b)
    fail_msg("%s:%d: %s = %.17g, expected %.17g", file, line, what, a, b);
}

/* A number member by path "a.b" of obj. */
static double num(const json_t *obj, const char *key, const char *sub) {
  const json_t *v = json_object_get(obj, key);
  if (sub)
    v = json_object_get(v, sub);
  if (!json_is_number(v))
    fail_msg("%s%s%s is not a number", key, sub ? "." : "", sub ? sub : "");
  return json_number_value(v);
}

static json_t *get_global(struct store *s, const char *id) {
  json_t *g = NULL;
  assert_int_equal(store_memory_global_get(s, NULL, id, &g), STORE_OK);
  return g;
}

static json_t *get_local(struct store *s, const char *id) {
  json_t *l = NULL;
  assert_int_equal(store_memory_local_get(s, NULL, id, &l), STORE_OK);
  return l;
}

static json_t *get_edge(struct store *s, const char *from, const char *to) {
  json_t *e = NULL;
  assert_int_equal(store_memory_edge_get(s, NULL, from, to, &e), STORE_OK);
  return e;
}

/* A record with only the members a seed record has (drops stats, evidence, times). */
static json_t *descriptive(const json_t *rec) {
  json_t *copy = json_deep_copy(rec);
  static const char *const drop[] = {"stats", "evidence", "created_at", "updated_at",
                                     "local_count"};
  for (size_t i = 0; i < sizeof drop / sizeof *drop; i++)
    json_object_del(copy, drop[i]);
  return copy;
}

/* ---- seeding ---- */

/* The seed's exact records come back from export, in order, with zero stats. */
static void test_seed_loaded_once(void **state) {
  struct fixture *f = *state;
  json_t *seed = seed_file(), *doc = snapshot(f->s);
  static const char *const lists[] = {"globals", "locals", "edges"};
  for (size_t k = 0; k < 3; k++) {
    const json_t *want = json_object_get(seed, lists[k]), *got = json_object_get(doc, lists[k]);
    assert_true(json_array_size(want) > 0);
    assert_int_equal(json_array_size(got), json_array_size(want));
    for (size_t i = 0; i < json_array_size(want); i++) {
      json_t *d = descriptive(json_array_get(got, i));
      assert_same_json(json_array_get(want, i), d);
      json_decref(d);
    }
  }
  json_t *g0 = json_array_get(json_object_get(doc, "globals"), 0);
  assert_json_is("{\"n\":0,\"successes\":0,\"improvements\":0,\"reward_sum\":0.0,"
                     "\"ema\":null}",
                   json_object_get(g0, "stats"));
  /* Second call, and after a reopen: nothing is loaded again. */
  bool loaded = true;
  assert_int_equal(store_memory_seed_if_empty(f->s, &loaded), STORE_OK);
  assert_false(loaded);
  store_close(f->s);
  f->s = open_store(f->dir);
  assert_int_equal(store_memory_seed_if_empty(f->s, &loaded), STORE_OK);
  assert_false(loaded);
  json_t *again = snapshot(f->s);
  assert_same_json(doc, again);
  /* Emptied on purpose: stays empty across a restart. */
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(doc, "globals"), i, g)
    assert_int_equal(store_memory_global_delete(f->s, NULL, json_string_value(json_object_get(g, "id")),
                                                true), STORE_OK);
  assert_int_equal(store_memory_seed_if_empty(f->s, &loaded), STORE_OK);
  assert_false(loaded);
  json_t *empty = snapshot(f->s);
  assert_json_is("{\"version\":1,\"globals\":[],\"locals\":[],\"edges\":[]}", empty);
  json_decref(empty);
  json_decref(again);
  json_decref(doc);
  json_decref(seed);
}

/* A memory that got nodes before any seeding (an import on an old store) is not
 * overwritten by the seed. */
static void test_seed_skips_nonempty(void **state) {
  (void)state;
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/opforge-test-memory-XXXXXX");
  assert_non_null(mkdtemp(dir));
  struct store *s = open_store(dir);
  json_t *body = J("{\"id\":\"mine\",\"name\":\"Mine\"}");
  assert_int_equal(store_memory_global_create(s, NULL, body, NULL, NULL), STORE_OK);
  bool loaded = true;
  assert_int_equal(store_memory_seed_if_empty(s, &loaded), STORE_OK);
  assert_false(loaded);
  json_t *items = NULL;
  assert_int_equal(store_memory_global_list(s, NULL, &items), STORE_OK);
  assert_int_equal(json_array_size(items), 1);
  json_decref(items);
  json_decref(body);
  store_close(s);
  test_store_remove(dir);
}

/* ---- CRUD ---- */

static void test_global_crud(void **state) {
  struct fixture *f = *state;
  json_t *body = J("{\"id\":\"tensor_cores\",\"name\":\"Tensor cores\",\"intent\":\"use MMA\","
                   "\"objectives\":[\"wgmma\"],\"triggers\":[\"bound:compute\",\"family:gemm\"],"
                   "\"risks\":[\"precision\"],\"prior\":0.125}");
  json_t *g = NULL;
  assert_int_equal(store_memory_global_create(f->s, NULL, body, NULL, &g), STORE_OK);
  assert_string_equal(json_string_value(json_object_get(g, "id")), "tensor_cores");
  assert_double_equal(num(g, "prior", NULL), 0.125);
  assert_json_is("{\"n\":0,\"successes\":0,\"improvements\":0,\"reward_sum\":0.0,"
                     "\"mean\":null,\"ema\":null}",
                   json_object_get(g, "stats"));
  assert_int_equal(json_integer_value(json_object_get(g, "local_count")), 0);
  json_decref(g);
  struct memory_invalid why = {0};
  assert_int_equal(store_memory_global_create(f->s, NULL, body, &why, NULL), STORE_CONFLICT);
  assert_int_equal(why.problem, MEMORY_PROBLEM_DUPLICATE);
  assert_string_equal(why.field, "id");
  json_decref(body);

  /* Ids made from names: a slug, then _2 when taken. */
  static const char *const names[][2] = {{"Tensor-Core MMA!", "tensor_core_mma"},
                                         {"tensor core  mma", "tensor_core_mma_2"},
                                         {"9 lives", "n_9_lives"},
                                         {"X", "x_x"},
                                         {"***", "node"}};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    json_t *b = json_pack("{s:s}", "name", names[i][0]);
    assert_int_equal(store_memory_global_create(f->s, NULL, b, NULL, &g), STORE_OK);
    assert_string_equal(json_string_value(json_object_get(g, "id")), names[i][1]);
    json_decref(g);
    json_decref(b);
  }
  json_t *items = NULL;
  assert_int_equal(store_memory_global_list(f->s, NULL, &items), STORE_OK);
  size_t n = json_array_size(items);
  assert_string_equal(json_string_value(json_object_get(json_array_get(items, n - 1), "id")),
                      "node");
  json_decref(items);

  /* PATCH changes only what it names. */
  json_t *patch = J("{\"name\":\"TC\",\"prior\":-1,\"triggers\":[]}");
  assert_int_equal(store_memory_global_update(f->s, NULL, "tensor_cores", patch, &g), STORE_OK);
  assert_string_equal(json_string_value(json_object_get(g, "name")), "TC");
  assert_string_equal(json_string_value(json_object_get(g, "intent")), "use MMA");
  assert_double_equal(num(g, "prior", NULL), -1.0);
  assert_int_equal(json_array_size(json_object_get(g, "triggers")), 0);
  assert_int_equal(json_array_size(json_object_get(g, "objectives")), 1);
  json_decref(g);
  assert_int_equal(store_memory_global_update(f->s, NULL, "no_such", patch, &g), STORE_NOT_FOUND);
  json_decref(patch);
  assert_int_equal(store_memory_global_get(f->s, NULL, "no_such", &g), STORE_NOT_FOUND);
  assert_int_equal(store_memory_global_delete(f->s, NULL, "tensor_cores", false), STORE_OK);
  assert_int_equal(store_memory_global_get(f->s, NULL, "tensor_cores", &g), STORE_NOT_FOUND);
  assert_int_equal(store_memory_global_delete(f->s, NULL, "tensor_cores", false), STORE_NOT_FOUND);
}

static void test_local_crud(void **state) {
  struct fixture *f = *state;
  json_t *body = J("{\"name\":\"Lane per row\",\"edit_pattern\":\"one lane group per row\","
                   "\"knob_move\":{\"knob\":\"ROWS\",\"op\":\"set\",\"value\":1},"
                   "\"checks\":[\"rows >= 32\"],\"families\":[\"norm\",\"softmax\"]}");
  json_t *l = NULL;
  assert_int_equal(store_memory_local_create(f->s, NULL, "no_such", body, NULL, &l), STORE_NOT_FOUND);
  assert_int_equal(store_memory_local_create(f->s, NULL, "parallel_mapping", body, NULL, &l),
                   STORE_OK);
  assert_string_equal(json_string_value(json_object_get(l, "id")), "lane_per_row");
  assert_string_equal(json_string_value(json_object_get(l, "global")), "parallel_mapping");
  assert_int_equal(json_array_size(json_object_get(l, "evidence")), 0);
  assert_json_is("{\"n\":0,\"successes\":0,\"reward_sum\":0.0,\"mean\":null}",
                   json_object_get(l, "stats"));
  json_decref(l);
  json_t *g = get_global(f->s, "parallel_mapping");
  json_int_t before = json_integer_value(json_object_get(g, "local_count"));
  json_decref(g);

  json_t *items = NULL;
  assert_int_equal(store_memory_local_list(f->s, NULL, "parallel_mapping", &items), STORE_OK);
  assert_int_equal((json_int_t)json_array_size(items), before);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(items, json_array_size(items) - 1), "id")),
      "lane_per_row");
  json_decref(items);
  assert_int_equal(store_memory_local_list(f->s, NULL, "no_such", &items), STORE_NOT_FOUND);

  /* Move it, clear its knob move; a move to nowhere is refused with the field. */
  struct memory_invalid why = {0};
  json_t *bad = J("{\"global\":\"no_such\"}");
  assert_int_equal(store_memory_local_update(f->s, NULL, "lane_per_row", bad, &why, &l),
                   STORE_INVALID);
  assert_string_equal(why.field, "global");
  assert_int_equal(why.problem, MEMORY_PROBLEM_REFERENCE);
  json_decref(bad);
  json_t *patch = J("{\"global\":\"fusion\",\"knob_move\":null,\"families\":[\"norm\"]}");
  assert_int_equal(store_memory_local_update(f->s, NULL, "lane_per_row", patch, NULL, &l), STORE_OK);
  assert_string_equal(json_string_value(json_object_get(l, "global")), "fusion");
  assert_true(json_is_null(json_object_get(l, "knob_move")));
  assert_string_equal(json_string_value(json_object_get(l, "name")), "Lane per row");
  assert_json_is("[\"norm\"]", json_object_get(l, "families"));
  json_decref(l);
  assert_int_equal(store_memory_local_update(f->s, NULL, "no_such", patch, NULL, &l), STORE_NOT_FOUND);
  json_decref(patch);
  assert_int_equal(store_memory_local_create(f->s, NULL, "fusion", body, &why, NULL), STORE_OK);
  json_t *dup = J("{\"id\":\"lane_per_row\",\"name\":\"again\"}");
  assert_int_equal(store_memory_local_create(f->s, NULL, "fusion", dup, &why, NULL), STORE_CONFLICT);
  assert_string_equal(why.field, "id");
  json_decref(dup);
  json_decref(body);
  assert_int_equal(store_memory_local_delete(f->s, NULL, "lane_per_row"), STORE_OK);
  assert_int_equal(store_memory_local_get(f->s, NULL, "lane_per_row", &l), STORE_NOT_FOUND);
  assert_int_equal(store_memory_local_delete(f->s, NULL, "lane_per_row"), STORE_NOT_FOUND);
  l = get_local(f->s, "lane_per_row_2");
  json_decref(l);
}

static void test_edge_crud(void **state) {
  struct fixture *f = *state;
  struct memory_invalid why = {0};
  json_t *e = NULL;
  json_t *body = J("{\"from\":\"fusion\",\"to\":\"memory_access\",\"when\":\"after fusing\","
                   "\"rationale\":\"fused kernels move more bytes\",\"risks\":[\"regs\"]}");
  assert_int_equal(store_memory_edge_create(f->s, NULL, body, &why, &e), STORE_OK);
  assert_json_is("{\"n\":0.0,\"reward_sum\":0.0,\"mean\":null}", json_object_get(e, "stats"));
  json_decref(e);
  assert_int_equal(store_memory_edge_create(f->s, NULL, body, &why, NULL), STORE_CONFLICT);
  assert_int_equal(why.problem, MEMORY_PROBLEM_DUPLICATE);
  json_decref(body);
  body = J("{\"from\":\"fusion\",\"to\":\"nowhere\"}");
  assert_int_equal(store_memory_edge_create(f->s, NULL, body, &why, NULL), STORE_INVALID);
  assert_string_equal(why.field, "to");
  json_decref(body);
  body = J("{\"from\":\"nowhere\",\"to\":\"fusion\"}");
  assert_int_equal(store_memory_edge_create(f->s, NULL, body, &why, NULL), STORE_INVALID);
  assert_string_equal(why.field, "from");
  json_decref(body);

  /* Filters: from, to, both. */
  json_t *all = NULL, *from = NULL, *to = NULL, *both = NULL;
  assert_int_equal(store_memory_edge_list(f->s, NULL, NULL, NULL, &all), STORE_OK);
  assert_int_equal(store_memory_edge_list(f->s, NULL, "fusion", NULL, &from), STORE_OK);
  assert_int_equal(store_memory_edge_list(f->s, NULL, NULL, "memory_access", &to), STORE_OK);
  assert_int_equal(store_memory_edge_list(f->s, NULL, "fusion", "memory_access", &both), STORE_OK);
  size_t n_from = 0, n_to = 0, i;
  json_t *x;
  json_array_foreach(all, i, x) {
    n_from += strcmp(json_string_value(json_object_get(x, "from")), "fusion") == 0;
    n_to += strcmp(json_string_value(json_object_get(x, "to")), "memory_access") == 0;
  }
  assert_int_equal(json_array_size(from), n_from);
  assert_int_equal(json_array_size(to), n_to);
  assert_int_equal(json_array_size(both), 1);
  assert_true(n_from >= 2 && n_to >= 2);
  json_decref(all);
  json_decref(from);
  json_decref(to);
  json_decref(both);

  json_t *patch = J("{\"rationale\":\"changed\"}");
  assert_int_equal(store_memory_edge_update(f->s, NULL, "fusion", "memory_access", patch, &e), STORE_OK);
  assert_string_equal(json_string_value(json_object_get(e, "rationale")), "changed");
  assert_string_equal(json_string_value(json_object_get(e, "when")), "after fusing");
  json_decref(e);
  assert_int_equal(store_memory_edge_update(f->s, NULL, "fusion", "fusion", patch, &e), STORE_NOT_FOUND);
  json_decref(patch);
  assert_int_equal(store_memory_edge_delete(f->s, NULL, "fusion", "memory_access"), STORE_OK);
  assert_int_equal(store_memory_edge_get(f->s, NULL, "fusion", "memory_access", &e), STORE_NOT_FOUND);
  assert_int_equal(store_memory_edge_delete(f->s, NULL, "fusion", "memory_access"), STORE_NOT_FOUND);
}

/* Records one step on global g / local l with reward r (no prefix). */
static void step(struct store *s, const char *g, const char *l, double r) {
  struct memory_step_update u = {.task_id = "t", .candidate_id = "c", .global_id = g,
                                 .local_id = l, .reward = r, .correct = r > 0,
                                 .outcome = "correct", .ema_alpha = 0.5};
  assert_int_equal(store_memory_record_step(s, &u), STORE_OK);
}

static void test_cascade_delete(void **state) {
  struct fixture *f = *state;
  json_t *g = get_global(f->s, "memory_access");
  json_int_t locals = json_integer_value(json_object_get(g, "local_count"));
  assert_true(locals > 0);
  json_decref(g);
  json_t *before = snapshot(f->s);
  step(f->s, "memory_access", "vector_float4", 0.5);
  assert_int_equal(store_memory_global_delete(f->s, NULL, "memory_access", false), STORE_CONFLICT);
  json_t *mid = snapshot(f->s);
  assert_int_equal(store_memory_global_delete(f->s, NULL, "memory_access", true), STORE_OK);
  json_t *after = snapshot(f->s);
  /* Gone: the node, its locals with their evidence, and every edge from or to it. */
  size_t i;
  json_t *x;
  json_array_foreach(json_object_get(after, "globals"), i, x)
    assert_string_not_equal(json_string_value(json_object_get(x, "id")), "memory_access");
  json_array_foreach(json_object_get(after, "locals"), i, x)
    assert_string_not_equal(json_string_value(json_object_get(x, "global")), "memory_access");
  size_t touching = 0;
  json_array_foreach(json_object_get(mid, "edges"), i, x)
    touching += strcmp(json_string_value(json_object_get(x, "from")), "memory_access") == 0 ||
                strcmp(json_string_value(json_object_get(x, "to")), "memory_access") == 0;
  assert_true(touching > 0);
  assert_int_equal(json_array_size(json_object_get(after, "edges")),
                   json_array_size(json_object_get(mid, "edges")) - touching);
  assert_int_equal(json_array_size(json_object_get(after, "locals")),
                   json_array_size(json_object_get(before, "locals")) - (size_t)locals);
  assert_int_equal(json_array_size(json_object_get(after, "globals")),
                   json_array_size(json_object_get(before, "globals")) - 1);
  json_t *l = NULL;
  assert_int_equal(store_memory_local_get(f->s, NULL, "vector_float4", &l), STORE_NOT_FOUND);
  json_decref(before);
  json_decref(mid);
  json_decref(after);
}

/* ---- validation ---- */

struct vcase {
  int which; /* 0 global, 1 local, 2 edge */
  enum memory_mode mode;
  const char *body;
  enum memory_problem problem; /* 0: valid */
  const char *field;
};

static void test_validation_fields(void **state) {
  (void)state;
  static const struct vcase cases[] = {
    {0, MEMORY_CREATE, "{\"name\":\"ok\"}", 0, NULL},
    {0, MEMORY_CREATE, "{}", MEMORY_PROBLEM_MISSING, "name"},
    {0, MEMORY_CREATE, "{\"name\":\"\"}", MEMORY_PROBLEM_INVALID, "name"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"bogus\":1}", MEMORY_PROBLEM_UNKNOWN, "bogus"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"stats\":{}}", MEMORY_PROBLEM_INVALID, "stats"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"id\":\"Bad\"}", MEMORY_PROBLEM_INVALID, "id"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"id\":\"a\"}", MEMORY_PROBLEM_INVALID, "id"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"triggers\":[\"bound:memory\",\"nope\"]}",
     MEMORY_PROBLEM_INVALID, "triggers[1]"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"triggers\":[\"bound:memory\",\"bound:memory\"]}",
     MEMORY_PROBLEM_INVALID, "triggers[1]"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"prior\":5.5}", MEMORY_PROBLEM_INVALID, "prior"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"prior\":\"1\"}", MEMORY_PROBLEM_INVALID, "prior"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"objectives\":\"a\"}", MEMORY_PROBLEM_INVALID,
     "objectives"},
    {0, MEMORY_CREATE, "{\"name\":\"x\",\"risks\":[\"\"]}", MEMORY_PROBLEM_INVALID, "risks[0]"},
    {0, MEMORY_PATCH, "{}", 0, NULL},
    {0, MEMORY_PATCH, "{\"id\":\"abc\"}", MEMORY_PROBLEM_INVALID, "id"},
    {0, MEMORY_PATCH, "{\"local_count\":1}", MEMORY_PROBLEM_INVALID, "local_count"},
    {0, MEMORY_IMPORT, "{\"name\":\"x\"}", MEMORY_PROBLEM_MISSING, "id"},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"global\":\"fusion\"}", MEMORY_PROBLEM_INVALID, "global"},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"knob_move\":{\"knob\":\"VEC\",\"op\":\"pow\","
                       "\"value\":4}}", MEMORY_PROBLEM_INVALID, "knob_move.op"},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"knob_move\":{\"knob\":\"vec\",\"op\":\"set\","
                       "\"value\":4}}", MEMORY_PROBLEM_INVALID, "knob_move.knob"},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"knob_move\":{\"knob\":\"VEC\",\"op\":\"mul\","
                       "\"value\":1}}", MEMORY_PROBLEM_INVALID, "knob_move.value"},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"knob_move\":{\"knob\":\"MODE\",\"op\":\"set\","
                       "\"value\":\"warp\"}}", 0, NULL},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"knob_move\":{\"knob\":\"VEC\",\"op\":\"set\"}}",
     MEMORY_PROBLEM_MISSING, "knob_move.value"},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"knob_move\":{\"knob\":\"VEC\",\"op\":\"set\","
                       "\"value\":4,\"y\":1}}", MEMORY_PROBLEM_UNKNOWN, "knob_move.y"},
    {1, MEMORY_CREATE, "{\"name\":\"x\",\"families\":[\"conv\"]}", MEMORY_PROBLEM_INVALID,
     "families[0]"},
    {1, MEMORY_PATCH, "{\"global\":\"Fusion\"}", MEMORY_PROBLEM_INVALID, "global"},
    {1, MEMORY_IMPORT, "{\"id\":\"ab\",\"name\":\"x\"}", MEMORY_PROBLEM_MISSING, "global"},
    {1, MEMORY_IMPORT, "{\"id\":\"ab\",\"global\":\"cd\",\"name\":\"x\",\"stats\":{\"n\":1,"
                       "\"successes\":2,\"reward_sum\":0}}", MEMORY_PROBLEM_INVALID,
     "stats.successes"},
    {1, MEMORY_IMPORT, "{\"id\":\"ab\",\"global\":\"cd\",\"name\":\"x\",\"evidence\":[{"
                       "\"reward\":1,\"outcome\":\"\"}]}", MEMORY_PROBLEM_INVALID,
     "evidence[0].outcome"},
    {2, MEMORY_CREATE, "{\"from\":\"ab\"}", MEMORY_PROBLEM_MISSING, "to"},
    {2, MEMORY_CREATE, "{\"from\":\"ab\",\"to\":\"cd\",\"when\":7}", MEMORY_PROBLEM_INVALID,
     "when"},
    {2, MEMORY_PATCH, "{\"from\":\"ab\"}", MEMORY_PROBLEM_INVALID, "from"},
    {2, MEMORY_PATCH, "{\"risks\":[\"a\",\"a\"]}", 0, NULL},
    {2, MEMORY_IMPORT, "{\"from\":\"ab\",\"to\":\"cd\",\"stats\":{\"n\":-1,\"reward_sum\":0}}",
     MEMORY_PROBLEM_INVALID, "stats.n"},
  };
  size_t failures = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const struct vcase *c = &cases[i];
    json_t *body = J(c->body);
    struct memory_invalid why = {0};
    int rc = c->which == 0   ? memory_check_global(body, c->mode, "", &why)
             : c->which == 1 ? memory_check_local(body, c->mode, "", &why)
                             : memory_check_edge(body, c->mode, "", &why);
    bool ok = c->problem == 0 ? rc == 0
                              : rc == -1 && why.problem == c->problem &&
                                    strcmp(why.field, c->field) == 0;
    if (!ok) {
      print_error("case %zu %s: rc %d problem %d field '%s' (%s)\n", i, c->body, rc,
                  (int)why.problem, why.field, why.message);
      failures++;
    }
    json_decref(body);
  }
  assert_int_equal(failures, 0);
  assert_true(memory_id_valid("ab"));
  assert_false(memory_id_valid("a"));
  assert_false(memory_id_valid("_ab"));
  char id65[66];
  memset(id65, 'a', 65);
  id65[65] = '\0';
  assert_false(memory_id_valid(id65));
  id65[64] = '\0';
  assert_true(memory_id_valid(id65));
}

/* ---- import ---- */

/* One way to break an exported document, and where the error must point. */
struct breakage {
  const char *what;
  void (*apply)(json_t *doc);
  enum memory_problem problem;
  const char *field;
};

static json_t *at(json_t *doc, const char *list, size_t i) {
  return json_array_get(json_object_get(doc, list), i);
}

static void b_local_ref(json_t *d) {
  json_object_set_new(at(d, "locals", 3), "global", json_string("nowhere"));
}
static void b_dup_global(json_t *d) {
  json_object_set(at(d, "globals", 1), "id", json_object_get(at(d, "globals", 0), "id"));
}
static void b_dup_local(json_t *d) {
  json_object_set(at(d, "locals", 5), "id", json_object_get(at(d, "locals", 2), "id"));
}
static void b_edge_from(json_t *d) {
  json_object_set_new(at(d, "edges", 2), "from", json_string("nowhere"));
}
static void b_dup_edge(json_t *d) {
  json_t *edges = json_object_get(d, "edges");
  json_array_append_new(edges, json_deep_copy(json_array_get(edges, 0)));
}
static void b_version(json_t *d) {
  json_object_set_new(d, "version", json_integer(2));
}
static void b_top_key(json_t *d) {
  json_object_set_new(d, "bogus", json_true());
}
static void b_no_locals(json_t *d) {
  json_object_del(d, "locals");
}
static void b_globals_type(json_t *d) {
  json_object_set_new(d, "globals", json_object());
}
static void b_ema(json_t *d) {
  json_object_set_new(json_object_get(at(d, "globals", 4), "stats"), "ema", json_real(0.5));
}
static void b_evidence(json_t *d) {
  json_t *ev = json_array_get(json_object_get(at(d, "locals", 0), "evidence"), 0);
  json_object_set_new(ev, "reward", json_string("x"));
}
static void b_family(json_t *d) {
  json_array_append_new(json_object_get(at(d, "locals", 7), "families"), json_string("conv"));
}
static void b_time(json_t *d) {
  json_object_set_new(at(d, "edges", 1), "created_at", json_string("yesterday"));
}

/* Every refused import names the first bad field and leaves the memory as it was. */
static void test_import_validation(void **state) {
  struct fixture *f = *state;
  step(f->s, "memory_access", "vector_float4", 0.75); /* evidence for locals[0] */
  static const struct breakage cases[] = {
    {"dangling local", b_local_ref, MEMORY_PROBLEM_REFERENCE, "locals[3].global"},
    {"duplicate global", b_dup_global, MEMORY_PROBLEM_DUPLICATE, "globals[1].id"},
    {"duplicate local", b_dup_local, MEMORY_PROBLEM_DUPLICATE, "locals[5].id"},
    {"dangling edge", b_edge_from, MEMORY_PROBLEM_REFERENCE, "edges[2].from"},
    {"duplicate edge", b_dup_edge, MEMORY_PROBLEM_DUPLICATE, NULL},
    {"version", b_version, MEMORY_PROBLEM_INVALID, "version"},
    {"unknown key", b_top_key, MEMORY_PROBLEM_UNKNOWN, "bogus"},
    {"no locals", b_no_locals, MEMORY_PROBLEM_MISSING, "locals"},
    {"globals not array", b_globals_type, MEMORY_PROBLEM_INVALID, "globals"},
    {"ema without tries", b_ema, MEMORY_PROBLEM_INVALID, "globals[4].stats.ema"},
    {"evidence reward", b_evidence, MEMORY_PROBLEM_INVALID, "locals[0].evidence[0].reward"},
    {"unknown family", b_family, MEMORY_PROBLEM_INVALID, NULL},
    {"bad time", b_time, MEMORY_PROBLEM_INVALID, "edges[1].created_at"},
  };
  json_t *before = snapshot(f->s);
  size_t n_edges = json_array_size(json_object_get(before, "edges"));
  size_t n_families = json_array_size(json_object_get(at(before, "locals", 7), "families"));
  char dup_edge[32], family[48];
  snprintf(dup_edge, sizeof dup_edge, "edges[%zu]", n_edges);
  snprintf(family, sizeof family, "locals[7].families[%zu]", n_families);
  size_t failures = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    json_t *doc = json_deep_copy(before);
    cases[i].apply(doc);
    const char *field = cases[i].field ? cases[i].field
                        : cases[i].apply == b_dup_edge ? dup_edge : family;
    struct memory_invalid why = {0};
    json_t *counts = NULL;
    int rc = store_memory_import(f->s, NULL, doc, &why, &counts);
    if (rc != STORE_INVALID || why.problem != cases[i].problem || strcmp(why.field, field) != 0) {
      print_error("%s: rc %d problem %d field '%s' (%s), want field '%s'\n", cases[i].what, rc,
                  (int)why.problem, why.field, why.message, field);
      failures++;
    }
    assert_null(counts);
    json_t *after = snapshot(f->s);
    if (!json_equal(before, after)) {
      print_error("%s: the memory changed\n", cases[i].what);
      failures++;
    }
    json_decref(after);
    json_decref(doc);
  }
  assert_int_equal(failures, 0);
  json_decref(before);
}

/* export -> change -> import -> export gives the changed document, stats and evidence
 * included; reset goes back to the seed with zero stats. */
static void test_import_round_trip_and_reset(void **state) {
  struct fixture *f = *state;
  json_t *seeded = snapshot(f->s);
  step(f->s, "fusion", NULL, 0.5);
  step(f->s, "memory_access", "vector_float4", -0.25);
  json_t *doc = snapshot(f->s);
  json_object_set_new(at(doc, "globals", 0), "name", json_string("Renamed"));
  json_array_remove(json_object_get(doc, "edges"), 0);
  json_object_set_new(doc, "exported_at", json_string("2026-01-02T03:04:05.678Z"));
  json_t *counts = NULL;
  struct memory_invalid why = {0};
  int rc = store_memory_import(f->s, NULL, doc, &why, &counts);
  if (rc != STORE_OK)
    fail_msg("import: %d %s", rc, why.message);
  json_t *want_counts = json_pack("{s:I, s:I, s:I, s:I}", "globals",
                                  (json_int_t)json_array_size(json_object_get(doc, "globals")),
                                  "locals",
                                  (json_int_t)json_array_size(json_object_get(doc, "locals")),
                                  "edges",
                                  (json_int_t)json_array_size(json_object_get(doc, "edges")),
                                  "evidence", (json_int_t)1);
  assert_same_json(want_counts, counts);
  json_decref(want_counts);
  json_decref(counts);
  json_object_del(doc, "exported_at");
  json_t *after = snapshot(f->s);
  assert_same_json(doc, after);
  json_t *g = get_global(f->s, "fusion");
  assert_double_equal(num(g, "stats", "reward_sum"), 0.5);
  assert_double_equal(num(g, "stats", "ema"), 0.5);
  json_decref(g);

  assert_int_equal(store_memory_reset(f->s, NULL, &counts), STORE_OK);
  assert_int_equal(json_integer_value(json_object_get(counts, "evidence")), 0);
  json_decref(counts);
  json_t *reset = snapshot(f->s);
  /* Same records as the first seeding, timestamps aside. */
  static const char *const lists[] = {"globals", "locals", "edges"};
  for (size_t k = 0; k < 3; k++) {
    json_t *a = json_object_get(seeded, lists[k]), *b = json_object_get(reset, lists[k]);
    assert_int_equal(json_array_size(a), json_array_size(b));
    for (size_t i = 0; i < json_array_size(a); i++) {
      json_t *x = json_deep_copy(json_array_get(a, i)), *y = json_deep_copy(json_array_get(b, i));
      json_object_del(x, "created_at");
      json_object_del(x, "updated_at");
      json_object_del(y, "created_at");
      json_object_del(y, "updated_at");
      assert_same_json(x, y);
      json_decref(x);
      json_decref(y);
    }
  }
  json_decref(reset);
  json_decref(after);
  json_decref(doc);
  json_decref(seeded);
}

/* ---- the step update ---- */

/* Hand computation (a = 0.25; prefix parallel_mapping 0.5, fusion 0.25, nowhere 0.25):
 *   step 1: r = 1.0,  correct, improved:  n 1, sum 1.0,  ema 1.0
 *   step 2: r = -0.5, wrong:              n 2, sum 0.5,  ema 0.75*1.0 + 0.25*-0.5 = 0.625
 *   step 3: r = 0.25, correct:            n 3, sum 0.75, ema 0.75*0.625 + 0.25*0.25 = 0.53125
 *   successes 2, improvements 1, mean 0.25.
 *   edge parallel_mapping -> memory_access (seeded): n 3*0.5 = 1.5,
 *     sum 0.5*(1.0 - 0.5 + 0.25) = 0.375;
 *   edge fusion -> memory_access (new): n 0.75, sum 0.25*0.75 = 0.1875, empty texts;
 *   "nowhere" names no node: no edge. Every value is exact in binary. */
static void test_record_step_arithmetic(void **state) {
  struct fixture *f = *state;
  json_t *seeded_edge = get_edge(f->s, "parallel_mapping", "memory_access");
  const double rewards[] = {1.0, -0.5, 0.25};
  for (int i = 0; i < 3; i++) {
    struct memory_step_update u = {
        .task_id = "task-1", .candidate_id = i == 2 ? NULL : "cand", .global_id = "memory_access",
        .local_id = "vector_float4", .reward = rewards[i], .correct = rewards[i] > 0,
        .improved = i == 0, .outcome = rewards[i] > 0 ? "correct" : "incorrect",
        .note = i == 1 ? "max abs diff 0.3" : NULL, .ema_alpha = 0.25, .n_prefix = 3,
        .prefix = {"parallel_mapping", "fusion", "nowhere"}, .alpha = {0.5, 0.25, 0.25}};
    assert_int_equal(store_memory_record_step(f->s, &u), STORE_OK);
  }
  json_t *g = get_global(f->s, "memory_access");
  assert_json_is("{\"n\":3,\"successes\":2,\"improvements\":1,\"reward_sum\":0.75,"
                     "\"mean\":0.25,\"ema\":0.53125}",
                   json_object_get(g, "stats"));
  json_decref(g);
  json_t *l = get_local(f->s, "vector_float4");
  assert_json_is("{\"n\":3,\"successes\":2,\"reward_sum\":0.75,\"mean\":0.25}",
                   json_object_get(l, "stats"));
  json_t *ev = json_object_get(l, "evidence");
  assert_int_equal(json_array_size(ev), 3);
  json_t *newest = json_deep_copy(json_array_get(ev, 0));
  json_t *middle = json_deep_copy(json_array_get(ev, 1));
  json_object_del(newest, "created_at");
  json_object_del(middle, "created_at");
  assert_json_is("{\"task_id\":\"task-1\",\"candidate_id\":null,\"reward\":0.25,"
                     "\"outcome\":\"correct\",\"note\":null}", newest);
  assert_json_is("{\"task_id\":\"task-1\",\"candidate_id\":\"cand\",\"reward\":-0.5,"
                     "\"outcome\":\"incorrect\",\"note\":\"max abs diff 0.3\"}", middle);
  json_decref(newest);
  json_decref(middle);
  json_decref(l);
  json_t *e = get_edge(f->s, "parallel_mapping", "memory_access");
  assert_json_is("{\"n\":1.5,\"reward_sum\":0.375,\"mean\":0.25}", json_object_get(e, "stats"));
  assert_string_equal(json_string_value(json_object_get(e, "rationale")),
                      json_string_value(json_object_get(seeded_edge, "rationale")));
  json_decref(e);
  json_decref(seeded_edge);
  e = get_edge(f->s, "fusion", "memory_access");
  assert_json_is("{\"n\":0.75,\"reward_sum\":0.1875,\"mean\":0.25}", json_object_get(e, "stats"));
  assert_string_equal(json_string_value(json_object_get(e, "when")), "");
  assert_int_equal(json_array_size(json_object_get(e, "risks")), 0);
  json_decref(e);
  json_t *none = NULL;
  assert_int_equal(store_memory_edge_list(f->s, NULL, "nowhere", NULL, &none), STORE_OK);
  assert_int_equal(json_array_size(none), 0);
  json_decref(none);
}

static void test_record_step_refusals(void **state) {
  struct fixture *f = *state;
  json_t *before = snapshot(f->s);
  struct memory_step_update u = {.global_id = "nowhere", .reward = 0.5, .outcome = "correct",
                                 .ema_alpha = 0.3, .n_prefix = 1, .prefix = {"fusion"},
                                 .alpha = {1.0}};
  assert_int_equal(store_memory_record_step(f->s, &u), STORE_NOT_FOUND);
  u.global_id = "fusion";
  u.reward = NAN;
  assert_int_equal(store_memory_record_step(f->s, &u), STORE_INVALID);
  u.reward = 0.5;
  u.ema_alpha = 0;
  assert_int_equal(store_memory_record_step(f->s, &u), STORE_INVALID);
  u.ema_alpha = 0.3;
  u.n_prefix = MEMORY_STEP_MAX_PREFIX + 1;
  assert_int_equal(store_memory_record_step(f->s, &u), STORE_INVALID);
  u.n_prefix = 1;
  u.alpha[0] = -0.1;
  assert_int_equal(store_memory_record_step(f->s, &u), STORE_INVALID);
  u.alpha[0] = 1.0;
  u.outcome = "";
  assert_int_equal(store_memory_record_step(f->s, &u), STORE_INVALID);
  json_t *after = snapshot(f->s);
  assert_same_json(before, after);
  json_decref(after);
  /* A deleted local is skipped; the global still counts. */
  u.outcome = "correct";
  u.local_id = "no_such_local";
  assert_int_equal(store_memory_record_step(f->s, &u), STORE_OK);
  json_t *g = get_global(f->s, "fusion");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "n")), 1);
  json_decref(g);
  json_decref(before);
}

/* Inside a caller's transaction the update joins it: a rollback takes it back. */
struct joined {
  int result;
  int inner;
};

static int joined_tx(struct store *s, void *arg) {
  struct joined *j = arg;
  struct memory_step_update u = {.global_id = "fusion", .reward = 0.5, .outcome = "correct",
                                 .ema_alpha = 0.3};
  j->inner = store_memory_record_step(s, &u);
  return j->result;
}

static void test_record_step_joins_transaction(void **state) {
  struct fixture *f = *state;
  struct joined j = {.result = STORE_CONFLICT};
  assert_int_equal(store_transaction(f->s, joined_tx, &j), STORE_CONFLICT);
  assert_int_equal(j.inner, STORE_OK);
  json_t *g = get_global(f->s, "fusion");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "n")), 0);
  json_decref(g);
  j.result = STORE_OK;
  assert_int_equal(store_transaction(f->s, joined_tx, &j), STORE_OK);
  g = get_global(f->s, "fusion");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "n")), 1);
  json_decref(g);
}

/* Only the newest MEMORY_EVIDENCE_KEEP rows stay; GET shows MEMORY_EVIDENCE_SHOWN. */
static void test_evidence_trim(void **state) {
  struct fixture *f = *state;
  int total = MEMORY_EVIDENCE_KEEP + 7;
  for (int i = 1; i <= total; i++)
    step(f->s, "memory_access", "vector_float4", (double)i);
  json_t *l = get_local(f->s, "vector_float4");
  json_t *ev = json_object_get(l, "evidence");
  assert_int_equal(json_array_size(ev), MEMORY_EVIDENCE_SHOWN);
  assert_double_equal(num(json_array_get(ev, 0), "reward", NULL), (double)total);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(l, "stats"), "n")), total);
  json_decref(l);
  json_t *doc = snapshot(f->s);
  json_t *rows = json_object_get(at(doc, "locals", 0), "evidence");
  assert_string_equal(json_string_value(json_object_get(at(doc, "locals", 0), "id")),
                      "vector_float4");
  assert_int_equal(json_array_size(rows), MEMORY_EVIDENCE_KEEP);
  assert_double_equal(num(json_array_get(rows, 0), "reward", NULL), (double)(total - MEMORY_EVIDENCE_KEEP + 1));
  json_decref(doc);
}

/* ---- concurrency ---- */

#define THREADS 4
#define STEPS 100

struct worker {
  struct store *s;
  int index;
  int failures;
};

/* r = ((index*STEPS + i) % 8) * 0.125: exact in binary, so the sum is exact in any order. */
static void *worker_main(void *arg) {
  struct worker *w = arg;
  for (int i = 0; i < STEPS; i++) {
    struct memory_step_update u = {.global_id = "data_reuse", .local_id = NULL,
                                   .reward = ((w->index * STEPS + i) % 8) * 0.125,
                                   .correct = i % 2 == 0, .outcome = "correct",
                                   .ema_alpha = 0.5, .n_prefix = 1, .prefix = {"fusion"},
                                   .alpha = {0.5}};
    if (store_memory_record_step(w->s, &u) != STORE_OK)
      w->failures++;
  }
  return NULL;
}

static void test_concurrent_steps(void **state) {
  struct fixture *f = *state;
  pthread_t threads[THREADS];
  struct worker workers[THREADS];
  double want_sum = 0;
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (struct worker){.s = f->s, .index = t};
    for (int i = 0; i < STEPS; i++)
      want_sum += ((t * STEPS + i) % 8) * 0.125;
    assert_int_equal(pthread_create(&threads[t], NULL, worker_main, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) {
    assert_int_equal(pthread_join(threads[t], NULL), 0);
    assert_int_equal(workers[t].failures, 0);
  }
  json_t *g = get_global(f->s, "data_reuse");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "n")),
                   THREADS * STEPS);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "successes")),
                   THREADS * STEPS / 2);
  assert_double_equal(num(g, "stats", "reward_sum"), want_sum);
  assert_double_equal(want_sum, 175.0); /* 400 steps, 50 of each k/8 for k = 0..7: 50*28/8 */
  json_decref(g);
  json_t *e = get_edge(f->s, "fusion", "data_reuse");
  assert_double_equal(num(e, "stats", "n"), THREADS * STEPS * 0.5);
  assert_double_equal(num(e, "stats", "reward_sum"), want_sum * 0.5);
  json_decref(e);
}

/* ---- fault injection ---- */

/* Fails the 0th, 1st, ... fault site of op until it runs clean; after each failure the
 * memory must equal before. Returns the number of sites. */
static int faults(struct fixture *f, int (*op)(struct fixture *), const json_t *before) {
  for (int n = 0; n < MAX_SITES; n++) {
    store_fail_after(n);
    int rc = op(f);
    bool fired = store_fault_injected();
    store_fail_after(-1);
    if (!fired) {
      assert_int_equal(rc, STORE_OK);
      return n;
    }
    if (rc != STORE_ERROR)
      fail_msg("fault site %d: status %d, want STORE_ERROR", n, rc);
    json_t *now = snapshot(f->s);
    if (!json_equal((json_t *)before, now))
      fail_msg("fault site %d changed the memory", n);
    json_decref(now);
  }
  fail_msg("still faulting after %d sites", MAX_SITES);
  return -1;
}

static json_t *g_import_doc;

static int import_op(struct fixture *f) {
  json_t *counts = NULL;
  int rc = store_memory_import(f->s, NULL, g_import_doc, NULL, &counts);
  assert_true(rc == STORE_OK ? counts != NULL : counts == NULL);
  json_decref(counts);
  return rc;
}

static int step_op(struct fixture *f) {
  struct memory_step_update u = {.task_id = "t", .global_id = "fusion", .local_id = "epilogue_fusion",
                                 .reward = 0.5, .correct = true, .outcome = "correct",
                                 .ema_alpha = 0.3, .n_prefix = 2,
                                 .prefix = {"memory_access", "data_reuse"}, .alpha = {0.75, 0.25}};
  return store_memory_record_step(f->s, &u);
}

static int reset_op(struct fixture *f) {
  json_t *counts = NULL;
  int rc = store_memory_reset(f->s, NULL, &counts);
  json_decref(counts);
  return rc;
}

static void test_faults_import(void **state) {
  struct fixture *f = *state;
  step(f->s, "memory_access", "vector_float4", 0.5);
  json_t *before = snapshot(f->s);
  g_import_doc = json_deep_copy(before);
  json_object_set_new(at(g_import_doc, "globals", 2), "name", json_string("Changed"));
  int sites = faults(f, import_op, before);
  assert_true(sites > 10);
  json_t *after = snapshot(f->s);
  assert_same_json(g_import_doc, after);
  json_decref(after);
  json_decref(g_import_doc);
  g_import_doc = NULL;
  json_decref(before);
}

static void test_faults_record_step_and_reset(void **state) {
  struct fixture *f = *state;
  json_t *l = NULL;
  if (store_memory_local_get(f->s, NULL, "epilogue_fusion", &l) != STORE_OK)
    fail_msg("the seed has no local 'epilogue_fusion' under fusion; update this test");
  json_decref(l);
  json_t *before = snapshot(f->s);
  assert_true(faults(f, step_op, before) > 5);
  json_t *g = get_global(f->s, "fusion");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "n")), 1);
  json_decref(g);
  json_t *e = get_edge(f->s, "memory_access", "fusion");
  assert_double_equal(num(e, "stats", "n"), 0.75);
  json_decref(e);
  json_decref(before);
  before = snapshot(f->s);
  assert_true(faults(f, reset_op, before) > 5);
  g = get_global(f->s, "fusion");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(g, "stats"), "n")), 0);
  json_decref(g);
  json_decref(before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_seed_loaded_once, setup, teardown),
    cmocka_unit_test(test_seed_skips_nonempty),
    cmocka_unit_test_setup_teardown(test_global_crud, setup, teardown),
    cmocka_unit_test_setup_teardown(test_local_crud, setup, teardown),
    cmocka_unit_test_setup_teardown(test_edge_crud, setup, teardown),
    cmocka_unit_test_setup_teardown(test_cascade_delete, setup, teardown),
    cmocka_unit_test(test_validation_fields),
    cmocka_unit_test_setup_teardown(test_import_validation, setup, teardown),
    cmocka_unit_test_setup_teardown(test_import_round_trip_and_reset, setup, teardown),
    cmocka_unit_test_setup_teardown(test_record_step_arithmetic, setup, teardown),
    cmocka_unit_test_setup_teardown(test_record_step_refusals, setup, teardown),
    cmocka_unit_test_setup_teardown(test_record_step_joins_transaction, setup, teardown),
    cmocka_unit_test_setup_teardown(test_evidence_trim, setup, teardown),
    cmocka_unit_test_setup_teardown(test_concurrent_steps, setup, teardown),
    cmocka_unit_test_setup_teardown(test_faults_import, setup, teardown),
    cmocka_unit_test_setup_teardown(test_faults_record_step_and_reset, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
