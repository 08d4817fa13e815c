/* Unit tests of the store: migrations, tasks, paging, events, threads, busy retry,
 * persistent failures. They run on SQLite, or on PostgreSQL when OPFORGE_TEST_PG is set
 * (tests/unit/store_backend.h); the few that need SQLite's file say why they skip. */
#include "store/connection.h"
#include "store/events.h"
#include "store/fault.h"
#include "store/idempotency.h"
#include "store/servers.h"
#include "store/steps.h"
#include "store/store.h"
#include "store/tasks.h"
#include "store/transaction.h"
#include "base/embedded.h"
#include "tests/unit/store_backend.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Generated from schema/meson.build's lists: SQLite's and PostgreSQL's. */
extern const struct embedded_file opforge_migrations[];
extern const struct embedded_file opforge_migrations_pg[];

struct fixture {
  char dir[64];
  struct store *s;
};

/* ---- helpers ---- */

static void make_dir(char dir[64]) {
  snprintf(dir, 64, "/tmp/opforge-test-store-XXXXXX");
  assert_non_null(mkdtemp(dir));
}

/* The store of dir on the backend under test (SQLite, or PostgreSQL with
 * OPFORGE_TEST_PG); fails the test when it does not open. The caller owns it. */
static struct store *open_store(const char *dir) {
  return test_store_open(dir);
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  make_dir(f->dir);
  f->s = open_store(f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  store_close(f->s);
  test_store_remove(f->dir);
  free(f);
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    continue;
}

/* Deterministic UUID-shaped ids: n = 1 gives ...000000000001. */
static void task_id(char buf[40], int n) {
  snprintf(buf, 40, "00000000-0000-4000-8000-%012d", n);
}

/* The normalized options of a submission with budget.steps = steps. */
static json_t *options_with_steps(int steps) {
  json_t *o = json_pack("{s:s, s:s, s:{s:i, s:i, s:f}, s:s, s:{s:f, s:f}, s:i, s:i, s:{s:n}}",
                        "proposer", "builtin", "policy", "htam+tree", "budget", "steps", steps,
                        "seconds", 900, "llm_usd", 0.5, "precision", "fp32", "tolerance",
                        "atol", 1e-4, "rtol", 1e-4, "trials", 5, "seed", 42, "llm", "model");
  assert_non_null(o);
  return o;
}

static const char REFERENCE[] = "class Model:\n  pass\ndef get_inputs(): return []\n"
                                "def get_init_inputs(): return []\n";

static void insert_n(struct store *s, int n) {
  char id[40], name[32];
  task_id(id, n);
  snprintf(name, sizeof name, "task_%d", n);
  json_t *options = options_with_steps(20);
  assert_int_equal(store_task_insert(s, id, name, options, REFERENCE, NULL), STORE_OK);
  json_decref(options);
}

/* Checks "YYYY-MM-DDTHH:MM:SS.mmmZ". */
static void assert_time_format(const char *t) {
  assert_non_null(t);
  assert_int_equal(strlen(t), 24);
  for (int i = 0; i < 24; i++) {
    char want = "dddd-dd-ddTdd:dd:dd.dddZ"[i];
    if (want == 'd')
      assert_true(t[i] >= '0' && t[i] <= '9');
    else
      assert_int_equal(t[i], want);
  }
}

/* Checks that the task's event log is exactly types[0..n-1] with seq 1..n. */
static void assert_events(struct store *s, const char *id, const char *const *types, size_t n) {
  json_t *events = NULL;
  assert_int_equal(store_events_after(s, id, 0, 1000, &events), STORE_OK);
  assert_int_equal(json_array_size(events), n);
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(events, i);
    assert_int_equal(json_integer_value(json_object_get(e, "seq")), i + 1);
    assert_string_equal(json_string_value(json_object_get(e, "type")), types[i]);
    assert_time_format(json_string_value(json_object_get(e, "time")));
    assert_true(json_is_object(json_object_get(e, "data")));
  }
  json_decref(events);
}

static const char *task_status(struct store *s, const char *id, char buf[16]) {
  json_t *task = NULL;
  assert_int_equal(store_task_get(s, id, false, &task), STORE_OK);
  snprintf(buf, 16, "%s", json_string_value(json_object_get(task, "status")));
  json_decref(task);
  return buf;
}

/* Lists one page and checks its ids (by n) and whether a next cursor came back. */
static char *assert_page(struct store *s, const char *status, int limit, const char *cursor,
                         const int *want, size_t nwant, bool want_next) {
  json_t *items = NULL;
  char *next = NULL;
  assert_int_equal(store_task_list(s, status, limit, cursor, &items, &next), STORE_OK);
  assert_int_equal(json_array_size(items), nwant);
  for (size_t i = 0; i < nwant; i++) {
    char id[40];
    task_id(id, want[i]);
    json_t *task = json_array_get(items, i);
    assert_string_equal(json_string_value(json_object_get(task, "id")), id);
    assert_null(json_object_get(task, "reference"));
  }
  json_decref(items);
  if (want_next)
    assert_non_null(next);
  else
    assert_null(next);
  return next;
}

/* ---- migrations ---- */

/* The number of the last embedded migration of the backend under test; *ret_count gets
 * how many there are. */
static int last_migration(int *ret_count) {
  int count = 0;
  const char *last = NULL;
  const struct embedded_file *list = test_pg() ? opforge_migrations_pg : opforge_migrations;
  for (const struct embedded_file *f = list; f->name; f++, count++)
    last = f->name;
  assert_non_null(last);
  *ret_count = count;
  return (int)strtol(last, NULL, 10);
}

static void test_migrations_applied_and_recorded(void **state) {
  struct fixture *f = *state;
  int count = 0;
  int last = last_migration(&count);
  assert_true(last >= 1);
  assert_int_equal(store_schema_version(f->s), last);
  assert_true(store_ready(f->s));
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM schema_migrations"), count);
  assert_int_equal(test_raw_count(f->dir, "SELECT version FROM schema_migrations WHERE"
                                          " name = '0001_tasks.sql'"), 1);
  if (test_pg()) {
    assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM pg_class WHERE relname IN"
                                            " ('tasks','events','candidates','tasks_status_seq')"
                                            " AND relnamespace = 'public'::regnamespace"), 4);
    assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM information_schema.columns"
                                            " WHERE table_schema = 'public' AND table_name ="
                                            " 'tasks' AND column_name IN ('claimed_by','step')"),
                     2);
  } else {
    assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM sqlite_master WHERE name IN"
                                            " ('tasks','events','candidates','tasks_status_seq')"),
                     4);
    assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM pragma_table_info('tasks')"
                                            " WHERE name IN ('claimed_by','step')"), 2);
    char mode[16]; /* PostgreSQL has no journal mode: its WAL is the server's */
    test_raw_text(f->dir, "PRAGMA journal_mode", mode, sizeof mode);
    assert_string_equal(mode, "wal");
  }
  char applied[32], again[32];
  test_raw_text(f->dir, "SELECT applied_at FROM schema_migrations WHERE version = 1", applied,
                sizeof applied);
  assert_time_format(applied);
  insert_n(f->s, 1);

  /* Re-open: nothing applied twice, nothing lost. */
  store_close(f->s);
  f->s = open_store(f->dir);
  assert_int_equal(store_schema_version(f->s), last);
  assert_true(store_ready(f->s));
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM schema_migrations"), count);
  test_raw_text(f->dir, "SELECT applied_at FROM schema_migrations WHERE version = 1", again,
                sizeof again);
  assert_string_equal(again, applied);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM tasks"), 1);
}

static void test_newer_database_is_refused(void **state) {
  struct fixture *f = *state;
  store_close(f->s);
  f->s = NULL;
  test_raw_exec(f->dir, "INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'x')");
  struct store *s = NULL;
  char err[256] = "";
  assert_int_equal(test_store_try_open(f->dir, &s, err, sizeof err), STORE_ERROR);
  assert_null(s);
  assert_non_null(strstr(err, "newer"));
  test_raw_exec(f->dir, "DELETE FROM schema_migrations WHERE version = 9999");
  f->s = open_store(f->dir);
  assert_true(store_ready(f->s));
}

/* ---- tasks ---- */

static void test_insert_and_get_shape(void **state) {
  struct fixture *f = *state;
  char id[40];
  task_id(id, 1);
  json_t *options = options_with_steps(7);
  json_t *task = NULL;
  assert_int_equal(store_task_insert(f->s, id, "36_RMSNorm", options, REFERENCE, &task),
                   STORE_OK);
  const char *created = json_string_value(json_object_get(task, "created_at"));
  assert_time_format(created);
  assert_string_equal(json_string_value(json_object_get(task, "updated_at")), created);
  json_t *expected = json_pack(
      "{s:s, s:s, s:s, s:b, s:O, s:I, s:{s:i, s:i, s:n, s:n, s:i, s:i}, s:n, s:n,"
      " s:{s:s, s:s}}", "id", id, "name", "36_RMSNorm", "status", "queued",
      "cancel_requested", 0, "options", options, "reference_bytes",
      (json_int_t)strlen(REFERENCE), "progress", "step", 0, "budget_steps", 7, "best_speedup",
      "best_ms", "correct", 0, "candidates", 0, "baselines", "error", "links", "self",
      "/v1/tasks/00000000-0000-4000-8000-000000000001", "events",
      "/v1/tasks/00000000-0000-4000-8000-000000000001/events");
  json_t *got = json_deep_copy(task);
  json_object_del(got, "created_at");
  json_object_del(got, "updated_at");
  assert_true(json_equal(got, expected));
  json_decref(got);

  json_t *full = NULL;
  assert_int_equal(store_task_get(f->s, id, true, &full), STORE_OK);
  assert_string_equal(json_string_value(json_object_get(full, "reference")), REFERENCE);
  json_object_del(full, "reference");
  assert_true(json_equal(full, task));
  json_decref(full);
  json_t *plain = NULL;
  assert_int_equal(store_task_get(f->s, id, false, &plain), STORE_OK);
  assert_true(json_equal(plain, task));
  json_decref(plain);

  const char *types[] = {"queued"};
  assert_events(f->s, id, types, 1);
  json_t *dup = NULL;
  assert_int_equal(store_task_insert(f->s, id, "again", options, REFERENCE, &dup),
                   STORE_CONFLICT);
  assert_null(dup);
  char other[40];
  task_id(other, 2);
  json_t *missing = NULL;
  assert_int_equal(store_task_get(f->s, other, false, &missing), STORE_NOT_FOUND);
  assert_null(missing);
  json_decref(expected);
  json_decref(task);
  json_decref(options);
}

static void test_list_three_pages_newest_first(void **state) {
  struct fixture *f = *state;
  for (int n = 1; n <= 7; n++)
    insert_n(f->s, n);
  const int page1[] = {7, 6, 5}, page2[] = {4, 3, 2}, page3[] = {1};
  char *c1 = assert_page(f->s, NULL, 3, NULL, page1, 3, true);
  char *c2 = assert_page(f->s, NULL, 3, c1, page2, 3, true);
  assert_string_not_equal(c1, c2);
  char *c3 = assert_page(f->s, NULL, 3, c2, page3, 1, false);
  assert_null(c3);
  /* A cursor stays valid while newer tasks arrive. */
  insert_n(f->s, 8);
  char *again = assert_page(f->s, NULL, 3, c1, page2, 3, true);
  assert_string_equal(again, c2);
  free(again);
  free(c2);
  const int all[] = {8, 7, 6, 5, 4, 3, 2, 1};
  assert_page(f->s, NULL, 500, NULL, all, 8, false);
  free(c1);
}

static void test_list_status_filter(void **state) {
  struct fixture *f = *state;
  for (int n = 1; n <= 7; n++)
    insert_n(f->s, n);
  char id[40];
  task_id(id, 2);
  assert_int_equal(store_task_set_status(f->s, id, "running", NULL), STORE_OK);
  task_id(id, 5);
  assert_int_equal(store_task_set_status(f->s, id, "running", NULL), STORE_OK);
  task_id(id, 3);
  json_t *task = NULL;
  assert_int_equal(store_task_cancel(f->s, id, &task), STORE_OK);
  json_decref(task);

  const int q1[] = {7, 6}, q2[] = {4, 1}, running[] = {5, 2}, cancelled[] = {3};
  char *c = assert_page(f->s, "queued", 2, NULL, q1, 2, true);
  assert_page(f->s, "queued", 2, c, q2, 2, false);
  free(c);
  assert_page(f->s, "running", 10, NULL, running, 2, false);
  assert_page(f->s, "cancelled", 10, NULL, cancelled, 1, false);
  assert_page(f->s, "failed", 10, NULL, NULL, 0, false);

  json_t *items = NULL;
  char *next = NULL;
  assert_int_equal(store_task_list(f->s, "paused", 10, NULL, &items, &next), STORE_INVALID);
  assert_int_equal(store_task_list(f->s, "", 10, NULL, &items, &next), STORE_INVALID);
  assert_int_equal(store_task_list(f->s, "Queued", 10, NULL, &items, &next), STORE_INVALID);
  assert_int_equal(store_task_list(f->s, NULL, 0, NULL, &items, &next), STORE_INVALID);
  assert_int_equal(store_task_list(f->s, NULL, 501, NULL, &items, &next), STORE_INVALID);
  assert_null(items);
  assert_null(next);
}

static void test_bad_cursor(void **state) {
  struct fixture *f = *state;
  for (int n = 1; n <= 3; n++)
    insert_n(f->s, n);
  const int page1[] = {3};
  char *good = assert_page(f->s, NULL, 1, NULL, page1, 1, true);
  /* Exactly the spec's ^c([1-9a-f][0-9a-f]{0,14}|[1-7][0-9a-f]{15})$ is accepted. */
  const char *fixed[] = {"", "c", "0", "x12", "C2", "cg5", "c-15", "c0", "c01", "c1x", "c 2",
                         "c\t1", "c12345678901234567", "c8000000000000000", "cffffffffffffffff",
                         "c12345678901234567890"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
    json_t *items = NULL;
    char *next = NULL;
    if (store_task_list(f->s, NULL, 10, fixed[i], &items, &next) != STORE_INVALID)
      fail_msg("cursor '%s' was accepted", fixed[i]);
    assert_null(items);
    assert_null(next);
  }
  /* A well-formed cursor the server never handed out is a page like any other. */
  assert_page(f->s, NULL, 10, "c1", NULL, 0, false);
  const int all[] = {3, 2, 1};
  assert_page(f->s, NULL, 10, "c7fffffffffffffff", all, 3, false);
  const int rest[] = {2, 1};
  assert_page(f->s, NULL, 10, good, rest, 2, false);
  free(good);
}

static void test_cancel_queued(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40];
  task_id(id, 1);
  json_t *task = NULL;
  assert_int_equal(store_task_cancel(f->s, id, &task), STORE_OK);
  assert_string_equal(json_string_value(json_object_get(task, "status")), "cancelled");
  assert_true(json_is_true(json_object_get(task, "cancel_requested")));
  json_decref(task);
  /* Like every task's, its log ends with "finished" (the engine's summary shape). */
  const char *types[] = {"queued", "cancelled", "finished"};
  assert_events(f->s, id, types, 3);
  json_t *events = NULL;
  assert_int_equal(store_events_after(f->s, id, 2, 10, &events), STORE_OK);
  json_t *data = json_object_get(json_array_get(events, 0), "data");
  assert_string_equal(json_string_value(json_object_get(data, "status")), "cancelled");
  assert_int_equal(json_integer_value(json_object_get(data, "steps")), 0);
  assert_int_equal(json_integer_value(json_object_get(data, "correct")), 0);
  json_decref(events);

  task = NULL;
  assert_int_equal(store_task_cancel(f->s, id, &task), STORE_CONFLICT);
  assert_null(task);
  assert_events(f->s, id, types, 3);
  char unknown[40];
  task_id(unknown, 99);
  assert_int_equal(store_task_cancel(f->s, unknown, &task), STORE_NOT_FOUND);
  assert_null(task);
}

static void test_cancel_running_and_final(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40];
  task_id(id, 1);
  assert_int_equal(store_task_set_status(f->s, id, "running", NULL), STORE_OK);
  for (int i = 0; i < 2; i++) { /* the second cancel is a no-op */
    json_t *task = NULL;
    assert_int_equal(store_task_cancel(f->s, id, &task), STORE_OK);
    assert_string_equal(json_string_value(json_object_get(task, "status")), "running");
    assert_true(json_is_true(json_object_get(task, "cancel_requested")));
    json_decref(task);
  }
  const char *types[] = {"queued", "running", "cancel_requested", "succeeded"};
  assert_events(f->s, id, types, 3);
  assert_int_equal(store_task_set_status(f->s, id, "succeeded", NULL), STORE_OK);
  assert_events(f->s, id, types, 4);
  json_t *task = NULL;
  assert_int_equal(store_task_cancel(f->s, id, &task), STORE_CONFLICT);
  assert_null(task);

  insert_n(f->s, 2);
  task_id(id, 2);
  json_t *error = json_pack("{s:s, s:s}", "code", "no_gpu", "message", "no GPU");
  assert_int_equal(store_task_set_status(f->s, id, "failed", error), STORE_OK);
  assert_int_equal(store_task_cancel(f->s, id, &task), STORE_CONFLICT);
  assert_int_equal(store_task_get(f->s, id, false, &task), STORE_OK);
  assert_true(json_equal(json_object_get(task, "error"), error));
  json_decref(task);
  json_t *events = NULL;
  assert_int_equal(store_events_after(f->s, id, 1, 10, &events), STORE_OK);
  assert_int_equal(json_array_size(events), 1);
  json_t *e = json_array_get(events, 0);
  assert_string_equal(json_string_value(json_object_get(e, "type")), "failed");
  assert_true(json_equal(json_object_get(json_object_get(e, "data"), "error"), error));
  json_decref(events);
  json_decref(error);
}

static void test_set_status_rules_and_progress(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40], unknown[40];
  task_id(id, 1);
  task_id(unknown, 99);
  assert_int_equal(store_task_set_status(f->s, id, "paused", NULL), STORE_INVALID);
  assert_int_equal(store_task_set_status(f->s, id, "queued", NULL), STORE_CONFLICT);
  assert_int_equal(store_task_set_status(f->s, unknown, "running", NULL), STORE_NOT_FOUND);
  assert_int_equal(store_task_set_status(f->s, id, "running", NULL), STORE_OK);
  assert_int_equal(store_task_set_status(f->s, id, "running", NULL), STORE_CONFLICT);

  json_t *progress = json_pack("{s:i, s:i, s:f, s:f, s:i, s:i}", "step", 3, "budget_steps",
                               20, "best_speedup", 1.5, "best_ms", 2.25, "correct", 2,
                               "candidates", 3);
  json_t *baselines = json_pack("{s:f, s:f}", "eager_ms", 3.5, "compile_ms", 2.75);
  assert_int_equal(store_task_update_progress(f->s, id, progress, NULL), STORE_OK);
  assert_int_equal(store_task_update_progress(f->s, id, NULL, baselines), STORE_OK);
  assert_int_equal(store_task_update_progress(f->s, id, NULL, NULL), STORE_OK);
  assert_int_equal(store_task_update_progress(f->s, unknown, progress, NULL), STORE_NOT_FOUND);
  json_t *array = json_array();
  assert_int_equal(store_task_update_progress(f->s, id, array, NULL), STORE_INVALID);
  json_decref(array);
  json_t *task = NULL;
  assert_int_equal(store_task_get(f->s, id, false, &task), STORE_OK);
  assert_true(json_equal(json_object_get(task, "progress"), progress));
  assert_true(json_equal(json_object_get(task, "baselines"), baselines));
  assert_true(json_is_null(json_object_get(task, "error")));
  json_decref(task);
  const char *types[] = {"queued", "running"};
  assert_events(f->s, id, types, 2);
  /* running may go back to queued (resume after a restart). */
  assert_int_equal(store_task_set_status(f->s, id, "queued", NULL), STORE_OK);
  char status[16];
  assert_string_equal(task_status(f->s, id, status), "queued");
  json_decref(progress);
  json_decref(baselines);
}

static void test_delete(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  insert_n(f->s, 2);
  char id[40], other[40];
  task_id(id, 1);
  task_id(other, 2);
  assert_int_equal(store_task_set_status(f->s, id, "running", NULL), STORE_OK);
  assert_int_equal(db_exec(store_db(f->s),
                           "INSERT INTO candidates (id, task_id, seq, step, source,"
                           " created_at) VALUES ('k1', '00000000-0000-4000-8000-"
                           "000000000001', 1, 1, 'src', 'now')"),
                   DB_OK);
  assert_int_equal(store_task_delete(f->s, id), STORE_CONFLICT);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM candidates"), 1);
  assert_int_equal(store_task_set_status(f->s, id, "failed", NULL), STORE_OK);
  assert_int_equal(store_task_delete(f->s, id), STORE_OK);

  json_t *task = NULL;
  assert_int_equal(store_task_get(f->s, id, false, &task), STORE_NOT_FOUND);
  json_t *events = NULL;
  assert_int_equal(store_events_after(f->s, id, 0, 10, &events), STORE_OK);
  assert_int_equal(json_array_size(events), 0);
  json_decref(events);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM events WHERE task_id ="
                                          " '00000000-0000-4000-8000-000000000001'"), 0);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM candidates"), 0);
  assert_int_equal(store_task_delete(f->s, id), STORE_NOT_FOUND);
  /* The other task and its events are untouched. */
  const char *types[] = {"queued"};
  assert_events(f->s, other, types, 1);
  assert_int_equal(store_task_delete(f->s, other), STORE_OK); /* queued may be deleted */
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM events"), 0);
}

static void test_counts(void **state) {
  struct fixture *f = *state;
  json_t *counts = NULL;
  assert_int_equal(store_task_counts(f->s, &counts), STORE_OK);
  json_t *zero = json_pack("{s:i, s:i, s:i, s:i, s:i}", "queued", 0, "running", 0,
                           "succeeded", 0, "failed", 0, "cancelled", 0);
  assert_true(json_equal(counts, zero));
  json_decref(counts);
  json_decref(zero);
  for (int n = 1; n <= 7; n++)
    insert_n(f->s, n);
  const char *moves[][2] = {{"running", NULL}, {"running", "succeeded"}, {"running", "failed"},
                            {"failed", NULL}};
  for (int i = 0; i < 4; i++) {
    char id[40];
    task_id(id, i + 1);
    for (int j = 0; j < 2 && moves[i][j]; j++)
      assert_int_equal(store_task_set_status(f->s, id, moves[i][j], NULL), STORE_OK);
  }
  char id[40];
  task_id(id, 5);
  json_t *task = NULL;
  assert_int_equal(store_task_cancel(f->s, id, &task), STORE_OK);
  json_decref(task);
  assert_int_equal(store_task_counts(f->s, &counts), STORE_OK);
  json_t *want = json_pack("{s:i, s:i, s:i, s:i, s:i}", "queued", 2, "running", 1,
                           "succeeded", 1, "failed", 2, "cancelled", 1);
  assert_true(json_equal(counts, want));
  json_decref(counts);
  json_decref(want);
}

/* ---- events ---- */

static int append_then_fail(struct store *s, void *arg) {
  int64_t seq = 0;
  int rc = store_event_append(s, arg, "inside", NULL, &seq);
  assert_int_equal(rc, STORE_OK);
  assert_int_equal(seq, 2);
  return STORE_CONFLICT;
}

static void test_events(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40], unknown[40];
  task_id(id, 1);
  task_id(unknown, 99);
  json_t *data = json_pack("{s:i, s:s}", "step", 4, "note", "x");
  for (int i = 2; i <= 5; i++) {
    int64_t seq = 0;
    assert_int_equal(store_event_append(f->s, id, "step", i == 3 ? data : NULL, &seq), STORE_OK);
    assert_int_equal(seq, i);
  }
  json_t *events = NULL;
  assert_int_equal(store_events_after(f->s, id, 2, 2, &events), STORE_OK);
  assert_int_equal(json_array_size(events), 2);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(events, 0), "seq")), 3);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(events, 1), "seq")), 4);
  assert_true(json_equal(json_object_get(json_array_get(events, 0), "data"), data));
  assert_int_equal(json_object_size(json_object_get(json_array_get(events, 1), "data")), 0);
  json_decref(events);
  assert_int_equal(store_events_after(f->s, id, 5, 10, &events), STORE_OK);
  assert_int_equal(json_array_size(events), 0);
  json_decref(events);

  int64_t seq = -1;
  assert_int_equal(store_event_append(f->s, unknown, "step", NULL, &seq), STORE_NOT_FOUND);
  assert_int_equal(seq, -1);
  assert_int_equal(store_event_append(f->s, id, "", NULL, &seq), STORE_INVALID);
  json_t *array = json_array();
  assert_int_equal(store_event_append(f->s, id, "step", array, &seq), STORE_INVALID);
  json_decref(array);
  json_decref(data);

  /* An append inside a transaction joins it and rolls back with it. */
  insert_n(f->s, 2);
  char second[40];
  task_id(second, 2);
  assert_int_equal(store_transaction(f->s, append_then_fail, second), STORE_CONFLICT);
  const char *types[] = {"queued"};
  assert_events(f->s, second, types, 1);
}

/* ---- connections and threads ---- */

static const char SQL_ONE[] = "SELECT 1";

struct conn_probe {
  struct store *s;
  struct db *db;
  struct db_stmt *stmt;
};

static void *probe_thread(void *arg) {
  struct conn_probe *p = arg;
  p->db = store_db(p->s);
  p->stmt = store_stmt(p->s, SQL_ONE);
  return NULL;
}

static void test_connection_per_thread_and_stmt_cache(void **state) {
  struct fixture *f = *state;
  struct db *db = store_db(f->s);
  assert_non_null(db);
  assert_ptr_equal(store_db(f->s), db);
  struct db_stmt *st = store_stmt(f->s, SQL_ONE);
  assert_non_null(st);
  assert_ptr_equal(store_stmt(f->s, SQL_ONE), st);
  assert_ptr_equal(db_handle(st), db);
  if (!test_pg()) { /* SQLite's foreign keys are off unless a connection turns them on;
                       PostgreSQL's are always enforced */
    assert_int_equal(test_raw_count(f->dir, "PRAGMA foreign_keys"), 0); /* raw: default */
    struct db_stmt *fk = store_stmt(f->s, "PRAGMA foreign_keys");
    assert_int_equal(db_step(fk), DB_ROW);
    assert_int_equal(db_column_int(fk, 0), 1);
    db_reset(fk);
  }

  struct conn_probe p = {.s = f->s};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, probe_thread, &p), 0);
  pthread_join(t, NULL);
  assert_non_null(p.db);
  assert_ptr_not_equal(p.db, db);
  assert_ptr_equal(db_handle(p.stmt), p.db);
  assert_ptr_not_equal(p.stmt, st);
}

static void test_reopen_many_times_in_one_thread(void **state) {
  struct fixture *f = *state;
  char other_dir[64];
  make_dir(other_dir);
  struct store *other = open_store(other_dir);
  for (int n = 1; n <= 20; n++) {
    store_close(f->s);
    f->s = open_store(f->dir);
    insert_n(f->s, n);
    json_t *counts = NULL;
    assert_int_equal(store_task_counts(f->s, &counts), STORE_OK);
    assert_int_equal(json_integer_value(json_object_get(counts, "queued")), n);
    json_decref(counts);
    assert_ptr_not_equal(store_db(f->s), store_db(other));
  }
  json_t *counts = NULL;
  assert_int_equal(store_task_counts(other, &counts), STORE_OK);
  assert_int_equal(json_integer_value(json_object_get(counts, "queued")), 0);
  json_decref(counts);
  store_close(other);
  test_store_remove(other_dir);
}

#define THREADS 8
#define PER_THREAD 50
#define SHARED_PER_THREAD 25

struct inserter {
  struct store *s;
  int index;
  const char *shared;
  int failures;
};

static void *insert_thread(void *arg) {
  struct inserter *w = arg;
  json_t *options = json_pack("{s:{s:i}}", "budget", "steps", 5);
  for (int i = 0; i < PER_THREAD; i++) {
    char id[40];
    task_id(id, 1000 + w->index * PER_THREAD + i);
    int64_t seq = 0;
    if (store_task_insert(w->s, id, "t", options, REFERENCE, NULL) != STORE_OK ||
        store_event_append(w->s, id, "step", NULL, &seq) != STORE_OK || seq != 2)
      w->failures++;
    if (i < SHARED_PER_THREAD && store_event_append(w->s, w->shared, "step", NULL, NULL) !=
                                     STORE_OK)
      w->failures++;
  }
  json_decref(options);
  return NULL;
}

static void test_concurrent_inserts(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char shared[40];
  task_id(shared, 1);
  pthread_t threads[THREADS];
  struct inserter workers[THREADS];
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (struct inserter){.s = f->s, .index = i, .shared = shared};
    assert_int_equal(pthread_create(&threads[i], NULL, insert_thread, &workers[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    assert_int_equal(workers[i].failures, 0);
  }
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM tasks"),
                   THREADS * PER_THREAD + 1);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(DISTINCT id) FROM tasks"
                                          " WHERE name = 't'"),
                   THREADS * PER_THREAD);
  /* Every task's log is exactly 1..n: count == max and no duplicates (primary key). */
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM (SELECT task_id FROM events"
                                          " GROUP BY task_id HAVING COUNT(*) != MAX(seq)"
                                          " OR MIN(seq) != 1) AS broken"),
                   0);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM events WHERE task_id != "
                                          "'00000000-0000-4000-8000-000000000001'"),
                   2 * THREADS * PER_THREAD);
  assert_int_equal(test_raw_count(f->dir, "SELECT MAX(seq) FROM events WHERE task_id = "
                                          "'00000000-0000-4000-8000-000000000001'"),
                   1 + THREADS * SHARED_PER_THREAD);
  json_t *items = NULL;
  char *next = NULL;
  assert_int_equal(store_task_list(f->s, "queued", 500, NULL, &items, &next), STORE_OK);
  assert_int_equal(json_array_size(items), THREADS * PER_THREAD + 1);
  assert_null(next);
  json_decref(items);
}

/* ---- busy retry ---- */

struct locker {
  char path[128];
  long hold_ms;        /* at most this long ... */
  atomic_int release;  /* ... or until this is set */
  atomic_int locked;   /* 1 once the lock is held, -1 if it could not be taken */
  double released_at;  /* now_ms() after the lock was let go */
};

/* Holds the write lock from a second, raw connection. */
static void *lock_thread(void *arg) {
  struct locker *l = arg;
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(l->path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
      sqlite3_exec(db, "BEGIN IMMEDIATE; INSERT INTO schema_migrations VALUES"
                       " (100000, 'lock', 'x')", NULL, NULL, NULL) == SQLITE_OK) {
    double start = now_ms();
    atomic_store(&l->locked, 1);
    while (!atomic_load(&l->release) && now_ms() - start < (double)l->hold_ms)
      sleep_ms(1);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  } else {
    atomic_store(&l->locked, -1);
  }
  l->released_at = now_ms();
  sqlite3_close(db);
  return NULL;
}

struct tx_probe {
  const char *id;
  int calls;
  int busy_first; /* calls that report busy before succeeding */
};

static int append_in_tx(struct store *s, void *arg) {
  struct tx_probe *p = arg;
  p->calls++;
  if (store_event_append(s, p->id, "tx", NULL, NULL) != STORE_OK)
    return STORE_ERROR;
  return p->calls <= p->busy_first ? STORE_BUSY : STORE_OK;
}

/* Runs append_in_tx while another connection holds the write lock for hold_ms (or until
 * the transaction returns); the store's busy timeout is cut to 10 ms so that only the
 * retry loop, not SQLite's own wait, can ride out the lock. *ret_late says whether the
 * transaction returned after the lock was let go. */
static int tx_against_lock(struct fixture *f, long hold_ms, double *ret_elapsed,
                           bool *ret_late, struct tx_probe *probe) {
  struct locker l = {.hold_ms = hold_ms};
  snprintf(l.path, sizeof l.path, "%s/opforge.db", f->dir);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, lock_thread, &l), 0);
  while (atomic_load(&l.locked) == 0)
    sleep_ms(1);
  assert_int_equal(atomic_load(&l.locked), 1);
  db_sqlite_busy_timeout(store_db(f->s), 10);
  double t0 = now_ms();
  int rc = store_transaction(f->s, append_in_tx, probe);
  double end = now_ms();
  atomic_store(&l.release, 1);
  db_sqlite_busy_timeout(store_db(f->s), 5000);
  pthread_join(t, NULL);
  *ret_elapsed = end - t0;
  *ret_late = end >= l.released_at;
  return rc;
}

/* Why the two tests below skip under PostgreSQL. */
static const char WHY_SQLITE_LOCK[] =
    "holds SQLite's write lock from a second raw connection and cuts SQLite's busy timeout;"
    " PostgreSQL has neither: a transaction there waits up to the connection's lock_timeout"
    " (5 s) for another session's row lock, and a conflict is a serialization failure,"
    " retried like STORE_BUSY (test_transaction_reruns_fn_on_busy)";

static void test_transaction_retries_busy(void **state) {
  test_sqlite_only(WHY_SQLITE_LOCK);
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40];
  task_id(id, 1);
  struct tx_probe probe = {.id = id};
  double elapsed = 0;
  bool late = false;
  assert_int_equal(tx_against_lock(f, 200, &elapsed, &late, &probe), STORE_OK);
  assert_true(late); /* it waited the lock out */
  assert_int_equal(probe.calls, 1);
  const char *types[] = {"queued", "tx"};
  assert_events(f->s, id, types, 2);
}

static void test_transaction_busy_is_bounded(void **state) {
  test_sqlite_only(WHY_SQLITE_LOCK);
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40];
  task_id(id, 1);
  struct tx_probe probe = {.id = id};
  double elapsed = 0;
  bool late = true;
  assert_int_equal(tx_against_lock(f, 20000, &elapsed, &late, &probe), STORE_BUSY);
  assert_false(late);
  assert_true(elapsed >= 500); /* the backoff sleeps alone add up to 565 ms */
  assert_true(elapsed < 10000);
  assert_int_equal(probe.calls, 0);
  const char *types[] = {"queued"};
  assert_events(f->s, id, types, 1);
}

static void test_transaction_reruns_fn_on_busy(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40];
  task_id(id, 1);
  struct tx_probe probe = {.id = id, .busy_first = 2};
  assert_int_equal(store_transaction(f->s, append_in_tx, &probe), STORE_OK);
  assert_int_equal(probe.calls, 3);
  /* The two busy attempts were rolled back: one event, seq 2. */
  const char *types[] = {"queued", "tx"};
  assert_events(f->s, id, types, 2);
  probe = (struct tx_probe){.id = id, .busy_first = 100};
  assert_int_equal(store_transaction(f->s, append_in_tx, &probe), STORE_BUSY);
  /* store/transaction.c's attempts: TX_ATTEMPTS (SQLite waits inside each one) or
   * TX_ATTEMPTS_PG (PostgreSQL's conflicts fail at once). */
  assert_int_equal(probe.calls, test_pg() ? 30 : 8);
  assert_events(f->s, id, types, 2);
}


/* ---- durability (issue 12, item 5) ---- */

/* Fsyncs done so far for committed transactions. */
static uint64_t syncs(struct store *s) {
  pthread_mutex_lock(&s->durable.lock);
  uint64_t n = s->durable.syncs;
  pthread_mutex_unlock(&s->durable.lock);
  return n;
}

struct committer {
  struct store *s;
  int first, count;
  atomic_int failures;
};

static void *commit_thread(void *arg) {
  struct committer *c = arg;
  for (int i = 0; i < c->count; i++) {
    char id[40], name[32];
    task_id(id, c->first + i);
    snprintf(name, sizeof name, "durable_%d", c->first + i);
    json_t *options = options_with_steps(5);
    if (store_task_insert(c->s, id, name, options, REFERENCE, NULL) != STORE_OK)
      atomic_fetch_add(&c->failures, 1);
    json_decref(options);
  }
  return NULL;
}

/* A transaction that returns STORE_OK was synced to disk first (an accepted task
 * survives a power loss, not only a crash of the server); transactions committing at
 * the same time share a sync (group commit), so there are fewer syncs than commits.
 * The syncs are SQLite's (store/durable.c: an fdatasync of the WAL file); PostgreSQL's
 * COMMIT is durable when it returns, so there only the concurrent commits are checked. */
static void test_commits_are_durable(void **state) {
  struct fixture *f = *state;
  bool sqlite = !test_pg();
  uint64_t before = syncs(f->s);
  for (int i = 1; i <= 5; i++) {
    insert_n(f->s, i);
    if (sqlite)
      assert_int_equal(syncs(f->s), before + (uint64_t)i); /* alone: one sync each */
  }
  json_t *task = NULL;
  assert_int_equal(store_task_get(f->s, "00000000-0000-4000-8000-000000000001", false, &task),
                   STORE_OK); /* reads sync nothing */
  json_decref(task);
  if (sqlite)
    assert_int_equal(syncs(f->s), before + 5);

  enum { COMMITTERS = 8, EACH = 25 };
  struct committer c[COMMITTERS];
  pthread_t t[COMMITTERS];
  before = syncs(f->s);
  for (int i = 0; i < COMMITTERS; i++) {
    c[i] = (struct committer){.s = f->s, .first = 100 + i * EACH, .count = EACH};
    assert_int_equal(pthread_create(&t[i], NULL, commit_thread, &c[i]), 0);
  }
  for (int i = 0; i < COMMITTERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&c[i].failures), 0);
  }
  uint64_t used = syncs(f->s) - before;
  print_message("%d concurrent commits took %llu syncs\n", COMMITTERS * EACH,
                (unsigned long long)used);
  if (sqlite)
    assert_true(used >= 1 && used <= COMMITTERS * EACH);
  else
    assert_int_equal(used, 0);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM tasks"),
                   5 + COMMITTERS * EACH);
}

/* ---- claims: owners and leases (issue 12, item 1) ---- */

/* The claim_instance of task n (raw), or "" for NULL. */
static void claim_owner(const char *dir, int n, char buf[128]) {
  char id[40], *sql;
  task_id(id, n);
  assert_true(asprintf(&sql, "SELECT COALESCE(claim_instance, '') || '|' ||"
                             " COALESCE(claimed_by, '') FROM tasks WHERE id = '%s'", id) > 0);
  test_raw_text(dir, sql, buf, 128);
  free(sql);
}

/* Does for store b what a server of data directory dir does at its start
 * (server/serve.c): names the directory and writes b's row in servers. */
static void start_server(struct store *b, const char *dir) {
  store_server_set_data_dir(b, dir);
  const struct server_info info = {.version = "test", .slots = 1};
  assert_int_equal(store_server_register(b, &info), STORE_OK);
}

/* Two stores on one database stand for two servers (hostA and hostB). A server releases
 * at start-up only the claims of the servers before it on its host (SQLite: its host's
 * claims; PostgreSQL, shared by hosts: those of the servers rows of its host and data
 * directory), claims from before leases, and expired leases; it never takes or releases
 * a live claim of another instance. */
static void test_claims_have_owners_and_leases(void **state) {
  struct fixture *f = *state;
  struct store *a = f->s, *b = open_store(f->dir);
  assert_int_equal(store_claims_configure(a, "hostA:1:aaaa", 60), STORE_OK);
  assert_int_equal(store_claims_configure(b, "hostB:2:bbbb", 60), STORE_OK);
  assert_string_equal(store_claims_instance(b), "hostB:2:bbbb");
  start_server(b, f->dir);
  insert_n(a, 1);
  insert_n(a, 2);
  char got[40], id1[40], id2[40], owner[128];
  task_id(id1, 1);
  task_id(id2, 2);
  int released = -1;

  assert_int_equal(store_task_claim(a, "worker-0", got), STORE_OK);
  assert_string_equal(got, id1);
  claim_owner(f->dir, 1, owner);
  assert_string_equal(owner, "hostA:1:aaaa|worker-0");
  /* B starts: A's live claim stays; B takes the next task, then finds nothing. */
  assert_int_equal(store_claims_release_stale(b, &released), STORE_OK);
  assert_int_equal(released, 0);
  assert_int_equal(store_task_claim(b, "worker-0", got), STORE_OK);
  assert_string_equal(got, id2);
  assert_int_equal(store_task_claim(b, "worker-1", got), STORE_NOT_FOUND);
  /* Neither releases the other's claim, one by one or all at once. */
  assert_int_equal(store_task_unclaim(a, id2), STORE_OK);
  claim_owner(f->dir, 2, owner);
  assert_string_equal(owner, "hostB:2:bbbb|worker-0");
  assert_int_equal(store_task_unclaim(b, id1), STORE_OK);
  assert_int_equal(store_task_unclaim(b, NULL), STORE_OK);
  claim_owner(f->dir, 1, owner);
  assert_string_equal(owner, "hostA:1:aaaa|worker-0");
  claim_owner(f->dir, 2, owner);
  assert_string_equal(owner, "|");
  assert_int_equal(store_task_claim(b, "worker-0", got), STORE_OK); /* resumes task 2 */
  assert_string_equal(got, id2);
  assert_int_equal(store_task_unclaim(a, NULL), STORE_OK);
  claim_owner(f->dir, 1, owner);
  assert_string_equal(owner, "|");
  claim_owner(f->dir, 2, owner);
  assert_string_equal(owner, "hostB:2:bbbb|worker-0");

  /* A lease that runs out frees the task for anyone. */
  assert_int_equal(store_task_claim(a, "worker-0", got), STORE_OK);
  assert_string_equal(got, id1);
  assert_int_equal(store_claims_configure(a, NULL, 0), STORE_OK);
  int renewed = 0;
  assert_int_equal(store_claims_renew(a, &renewed), STORE_OK);
  assert_int_equal(renewed, 1);
  sleep_ms(5);
  assert_int_equal(store_task_claim(b, "worker-1", got), STORE_OK);
  assert_string_equal(got, id1);
  claim_owner(f->dir, 1, owner);
  assert_string_equal(owner, "hostB:2:bbbb|worker-1");

  /* B "crashes"; the next server of host B takes its claims back at start-up, while a
   * live claim of host A survives. */
  assert_int_equal(store_claims_configure(a, NULL, 60), STORE_OK);
  insert_n(a, 3);
  char id3[40];
  task_id(id3, 3);
  assert_int_equal(store_task_claim(a, "worker-0", got), STORE_OK);
  assert_string_equal(got, id3);
  store_close(b);
  b = open_store(f->dir);
  assert_int_equal(store_claims_configure(b, "hostB:3:cccc", 60), STORE_OK);
  store_server_set_data_dir(b, f->dir);
  assert_int_equal(store_claims_release_stale(b, &released), STORE_OK);
  assert_int_equal(released, 2);
  claim_owner(f->dir, 3, owner);
  assert_string_equal(owner, "hostA:1:aaaa|worker-0");
  /* A claim from a server older than leases has no owner: released too. */
  test_raw_exec(f->dir, "UPDATE tasks SET claimed_by = 'worker-9', claim_instance = NULL,"
                        " claim_expires_ms = NULL WHERE seq = 1");
  assert_int_equal(store_claims_release_stale(b, &released), STORE_OK);
  assert_int_equal(released, 1);
  store_close(b);
}

/* ---- persistent failures (issue 12, item 7) ---- */

/* Commits step 1 of task id with an empty tree and no memory update; returns the status
 * and the milliseconds it took. */
static int commit_step(struct store *s, const char *id, double *ret_ms) {
  json_t *candidate = json_pack("{s:s, s:s, s:n, s:n, s:n}", "id",
                                "11111111-1111-4111-8111-111111111111", "source", "k",
                                "options", "plan", "result");
  json_t *rows = json_array(), *progress = json_pack("{s:i}", "step", 1);
  json_t *event = json_pack("{s:i}", "step", 1);
  assert_true(candidate && rows && progress && event);
  struct step_commit c = {.task_id = id, .step = 1, .candidate = candidate,
                          .tree_rows = rows, .progress = progress, .event_data = event};
  double t0 = now_ms();
  int rc = store_step_commit(s, &c);
  *ret_ms = now_ms() - t0;
  json_decref(candidate);
  json_decref(rows);
  json_decref(progress);
  json_decref(event);
  return rc;
}

/* A statement that the database refuses every time (a CHECK constraint, a trigger's RAISE)
 * gives STORE_CONSTRAINT at once, with no busy retries and nothing committed, on every
 * call; a busy one gives STORE_BUSY after the bounded retries. The engine tells them
 * apart: a refused step can never commit, so retrying it forever is a bug. */
static void test_persistent_failure_is_not_busy(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  char id[40], claimed[40];
  task_id(id, 1);
  assert_int_equal(store_task_claim(f->s, "worker-0", claimed), STORE_OK);
  double ms = 0;

  store_fail_statement("INSERT INTO candidates", SQLITE_CONSTRAINT_CHECK);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(commit_step(f->s, id, &ms), STORE_CONSTRAINT);
    assert_true(ms < 400); /* no backoff: the busy retries alone sleep 565 ms */
  }
  store_fail_statement("INSERT INTO candidates", SQLITE_BUSY);
  assert_int_equal(commit_step(f->s, id, &ms), STORE_BUSY);
  assert_true(ms >= 500);
  store_fail_statement(NULL, 0);
  const char *before[] = {"queued", "running"};
  assert_events(f->s, id, before, 2);
  assert_int_equal(test_raw_count(f->dir, "SELECT COUNT(*) FROM candidates"), 0);

  /* A real refusal from the database, not an injected one: a trigger's RAISE (SQLite),
   * a CHECK constraint no row meets (PostgreSQL). */
  bool pg = test_pg();
  test_raw_exec(f->dir, pg ? "ALTER TABLE candidates ADD CONSTRAINT refuse CHECK (false)"
                           : "CREATE TRIGGER refuse BEFORE INSERT ON candidates"
                             " BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
  assert_int_equal(commit_step(f->s, id, &ms), STORE_CONSTRAINT);
  assert_true(ms < 400);
  assert_int_equal(commit_step(f->s, id, &ms), STORE_CONSTRAINT);
  test_raw_exec(f->dir, pg ? "ALTER TABLE candidates DROP CONSTRAINT refuse"
                           : "DROP TRIGGER refuse");
  assert_int_equal(commit_step(f->s, id, &ms), STORE_OK);
  const char *after[] = {"queued", "running", "step"};
  assert_events(f->s, id, after, 3);
}

/* ---- idempotency keys (store/idempotency.c) ---- */

/* A key names its first task for exactly STORE_IDEMPOTENCY_TTL_MS: found 1 ms before the
 * end, free at it; held, a second insert under it is STORE_CONFLICT and writes nothing;
 * expired keys are pruned by the next insert; a key whose task was deleted is free. */
static void test_idempotency_key_lifetime(void **state) {
  struct fixture *f = *state;
  static const char DIGEST_A[] =
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  static const char DIGEST_B[] =
      "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
  const int64_t t0 = 1700000000000LL;
  char id1[40], id2[40], id3[40];
  task_id(id1, 1), task_id(id2, 2), task_id(id3, 3);
  json_t *options = options_with_steps(5);
  assert_int_equal(store_idempotency_insert_task(f->s, "k", DIGEST_A, t0, id1, "a", options,
                                                 REFERENCE, NULL),
                   STORE_OK);
  struct store_idempotency got;
  assert_int_equal(store_idempotency_find(f->s, "k", t0 + STORE_IDEMPOTENCY_TTL_MS - 1, &got),
                   STORE_OK);
  assert_string_equal(got.digest, DIGEST_A);
  assert_string_equal(got.task_id, id1);
  assert_int_equal(got.created_ms, t0);
  assert_int_equal(store_idempotency_find(f->s, "k", t0 + STORE_IDEMPOTENCY_TTL_MS, &got),
                   STORE_NOT_FOUND);
  /* Held: refused, and the second task is not written. */
  assert_int_equal(store_idempotency_insert_task(f->s, "k", DIGEST_B, t0 + 1000, id2, "b",
                                                 options, REFERENCE, NULL),
                   STORE_CONFLICT);
  json_t *task = NULL;
  assert_int_equal(store_task_get(f->s, id2, false, &task), STORE_NOT_FOUND);
  /* Expired: the key is free again and the insert prunes the old row. */
  assert_int_equal(store_idempotency_insert_task(f->s, "k", DIGEST_B,
                                                 t0 + STORE_IDEMPOTENCY_TTL_MS, id2, "b",
                                                 options, REFERENCE, NULL),
                   STORE_OK);
  assert_int_equal(store_idempotency_find(f->s, "k", t0 + STORE_IDEMPOTENCY_TTL_MS, &got),
                   STORE_OK);
  assert_string_equal(got.task_id, id2);
  assert_string_equal(got.digest, DIGEST_B);
  /* The task deleted: the key is free at once. */
  assert_int_equal(store_task_set_status(f->s, id2, "cancelled", NULL), STORE_OK);
  assert_int_equal(store_task_delete(f->s, id2), STORE_OK);
  const int64_t t1 = t0 + STORE_IDEMPOTENCY_TTL_MS + 5;
  assert_int_equal(store_idempotency_find(f->s, "k", t1, &got), STORE_NOT_FOUND);
  assert_int_equal(store_idempotency_insert_task(f->s, "k", DIGEST_A, t1, id3, "c", options,
                                                 REFERENCE, NULL),
                   STORE_OK);
  assert_int_equal(store_idempotency_find(f->s, "k", t1, &got), STORE_OK);
  assert_string_equal(got.task_id, id3);
  /* Bad arguments. */
  assert_int_equal(store_idempotency_insert_task(f->s, "", DIGEST_A, t1, id2, "d", options,
                                                 REFERENCE, NULL),
                   STORE_INVALID);
  assert_int_equal(store_idempotency_insert_task(f->s, "k2", "abc", t1, id2, "d", options,
                                                 REFERENCE, NULL),
                   STORE_INVALID);
  json_decref(options);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_migrations_applied_and_recorded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_newer_database_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_idempotency_key_lifetime, setup, teardown),
      cmocka_unit_test_setup_teardown(test_insert_and_get_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_three_pages_newest_first, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_status_filter, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_cursor, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_queued, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_running_and_final, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_status_rules_and_progress, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
      cmocka_unit_test_setup_teardown(test_counts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_events, setup, teardown),
      cmocka_unit_test_setup_teardown(test_connection_per_thread_and_stmt_cache, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reopen_many_times_in_one_thread, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_inserts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_transaction_retries_busy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_transaction_busy_is_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_transaction_reruns_fn_on_busy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_persistent_failure_is_not_busy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_claims_have_owners_and_leases, setup, teardown),
      cmocka_unit_test_setup_teardown(test_commits_are_durable, setup, teardown),
  };
  return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
