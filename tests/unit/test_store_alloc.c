/* Store fault injection: each failing allocation/database call gives STORE_ERROR, no
 * change. The faults are the store's own (store/fault.h), so the tests run on SQLite, or
 * on PostgreSQL when OPFORGE_TEST_PG is set (tests/unit/store_backend.h). */
#include "store/events.h"
#include "store/fault.h"
#include "store/store.h"
#include "store/tasks.h"
#include "base/embedded.h"
#include "tests/unit/store_backend.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No operation needs anywhere near this many fault sites; reaching it means the loop
 * never converges. */
#define MAX_SITES 2000

extern const struct embedded_file opforge_migrations[];
extern const struct embedded_file opforge_migrations_pg[];

struct fixture {
  char dir[64];
  struct store *s;
};

static void make_dir(char dir[64]) {
  snprintf(dir, 64, "/tmp/opforge-test-store-alloc-XXXXXX");
  assert_non_null(mkdtemp(dir));
}

/* The store of dir on the backend under test; fails the test when it does not open.
 * The caller owns it. */
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
  store_fail_after(-1);
  store_close(f->s);
  test_store_remove(f->dir);
  free(f);
  return 0;
}

static void task_id(char buf[40], int n) {
  snprintf(buf, 40, "00000000-0000-4000-8000-%012d", n);
}

static const char REFERENCE[] = "class Model: pass\ndef get_inputs(): []\n"
                                "def get_init_inputs(): []\n";

static void insert_n(struct store *s, int n) {
  char id[40];
  task_id(id, n);
  json_t *options = json_pack("{s:{s:i}}", "budget", "steps", 9);
  assert_int_equal(store_task_insert(s, id, "t", options, REFERENCE, NULL), STORE_OK);
  json_decref(options);
}

static size_t event_count(struct store *s, const char *id) {
  json_t *events = NULL;
  assert_int_equal(store_events_after(s, id, 0, 1000, &events), STORE_OK);
  size_t n = json_array_size(events);
  for (size_t i = 0; i < n; i++) /* and the log has no gaps */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(events, i), "seq")),
                     i + 1);
  json_decref(events);
  return n;
}

static json_int_t count_of(struct store *s, const char *status) {
  json_t *counts = NULL;
  assert_int_equal(store_task_counts(s, &counts), STORE_OK);
  json_int_t n = json_integer_value(json_object_get(counts, status));
  json_decref(counts);
  return n;
}

static void assert_status(struct store *s, const char *id, const char *status) {
  json_t *task = NULL;
  assert_int_equal(store_task_get(s, id, false, &task), STORE_OK);
  assert_string_equal(json_string_value(json_object_get(task, "status")), status);
  json_decref(task);
}

/* One operation under test: attempt runs it once (fault or not); check asserts the
 * state after a failed attempt (ok = false) or after the one that succeeded. */
struct op {
  int (*attempt)(struct fixture *f, int n);
  void (*check)(struct fixture *f, int n, bool ok);
};

/* Fails the 0th, 1st, 2nd ... fault site of the operation until it runs clean. */
static int run_with_faults(struct fixture *f, const struct op *op) {
  for (int n = 0; n < MAX_SITES; n++) {
    store_fail_after(n);
    int rc = op->attempt(f, n);
    bool fired = store_fault_injected();
    store_fail_after(-1);
    if (!fired) {
      assert_int_equal(rc, STORE_OK);
      op->check(f, n, true);
      return n;
    }
    assert_int_equal(rc, STORE_ERROR);
    op->check(f, n, false);
  }
  fail_msg("operation still faulting after %d sites", MAX_SITES);
  return -1;
}

/* ---- open ---- */

static int open_fresh_attempt(struct fixture *f, int n) {
  (void)n;
  store_close(f->s);
  f->s = NULL;
  test_store_remove(f->dir); /* the next open makes a fresh database */
  struct store *s = NULL;
  char err[256] = "";
  int rc = test_store_try_open(f->dir, &s, err, sizeof err);
  if (rc == STORE_OK)
    f->s = s;
  else
    assert_null(s);
  return rc;
}

/* After a failed open the next open must finish the job (a migration is all or none). */
static void open_check(struct fixture *f, int n, bool ok) {
  (void)n;
  if (!ok)
    f->s = open_store(f->dir);
  const struct embedded_file *list = test_pg() ? opforge_migrations_pg : opforge_migrations;
  int count = 0;
  for (const struct embedded_file *e = list; e->name; e++)
    count++;
  assert_true(store_ready(f->s));
  assert_int_equal(store_schema_version(f->s), strtol(list[count - 1].name, NULL, 10));
  insert_n(f->s, 1);
  assert_int_equal(count_of(f->s, "queued"), 1);
}

static void test_open_fresh(void **state) {
  const struct op op = {open_fresh_attempt, open_check};
  assert_true(run_with_faults(*state, &op) > 0);
}

static int open_existing_attempt(struct fixture *f, int n) {
  (void)n;
  store_close(f->s);
  f->s = NULL;
  struct store *s = NULL;
  char err[256] = "";
  int rc = test_store_try_open(f->dir, &s, err, sizeof err);
  if (rc == STORE_OK)
    f->s = s;
  else
    assert_null(s);
  return rc;
}

static void open_existing_check(struct fixture *f, int n, bool ok) {
  (void)n;
  if (!ok)
    f->s = open_store(f->dir);
  assert_true(store_ready(f->s));
  assert_int_equal(count_of(f->s, "queued"), 1); /* the task made before survives */
  char id[40];
  task_id(id, 1);
  assert_int_equal(event_count(f->s, id), 1);
}

static void test_open_existing(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  const struct op op = {open_existing_attempt, open_existing_check};
  assert_true(run_with_faults(f, &op) > 0);
}

/* ---- insert ---- */

static int insert_attempt(struct fixture *f, int n) {
  char id[40];
  task_id(id, 100 + n);
  json_t *options = json_pack("{s:{s:i}}", "budget", "steps", 9);
  json_t *task = NULL;
  int rc = store_task_insert(f->s, id, "t", options, REFERENCE, &task);
  json_decref(options);
  if (rc == STORE_OK) {
    assert_string_equal(json_string_value(json_object_get(task, "id")), id);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(task, "progress"), "budget_steps")), 9);
  } else {
    assert_null(task);
  }
  json_decref(task);
  return rc;
}

/* A failed insert leaves no task and no event behind. */
static void insert_check(struct fixture *f, int n, bool ok) {
  char id[40];
  task_id(id, 100 + n);
  json_t *task = NULL;
  assert_int_equal(store_task_get(f->s, id, true, &task), ok ? STORE_OK : STORE_NOT_FOUND);
  json_decref(task);
  assert_int_equal(event_count(f->s, id), ok ? 1 : 0);
  assert_int_equal(count_of(f->s, "queued"), ok ? 2 : 1);
}

static void test_insert(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  const struct op op = {insert_attempt, insert_check};
  assert_true(run_with_faults(f, &op) > 0);
}

/* ---- list, get, counts, events_after (reads) ---- */

static int list_attempt(struct fixture *f, int n) {
  (void)n;
  json_t *first = NULL, *items = NULL;
  char *cursor = NULL, *next = NULL;
  int rc = store_task_list(f->s, "queued", 2, NULL, &first, &cursor);
  if (rc != STORE_OK) {
    assert_null(first);
    assert_null(cursor);
    return rc;
  }
  assert_int_equal(json_array_size(first), 2);
  assert_non_null(cursor);
  rc = store_task_list(f->s, "queued", 2, cursor, &items, &next);
  if (rc == STORE_OK) {
    assert_int_equal(json_array_size(items), 1);
    assert_null(next);
  } else {
    assert_null(items);
    assert_null(next);
  }
  json_decref(first);
  json_decref(items);
  free(cursor);
  return rc;
}

static int reads_attempt(struct fixture *f, int n) {
  (void)n;
  char id[40];
  task_id(id, 2);
  json_t *task = NULL, *counts = NULL, *events = NULL;
  int rc = store_task_get(f->s, id, true, &task);
  if (rc == STORE_OK)
    rc = store_task_counts(f->s, &counts);
  if (rc == STORE_OK)
    rc = store_events_after(f->s, id, 0, 10, &events);
  if (rc == STORE_OK)
    assert_int_equal(json_array_size(events), 1);
  else
    assert_null(events);
  json_decref(task);
  json_decref(counts);
  json_decref(events);
  return rc;
}

static void reads_check(struct fixture *f, int n, bool ok) {
  (void)n, (void)ok;
  assert_int_equal(count_of(f->s, "queued"), 3);
}

static void test_reads(void **state) {
  struct fixture *f = *state;
  for (int i = 1; i <= 3; i++)
    insert_n(f->s, i);
  const struct op list = {list_attempt, reads_check};
  assert_true(run_with_faults(f, &list) > 0);
  const struct op reads = {reads_attempt, reads_check};
  assert_true(run_with_faults(f, &reads) > 0);
}

/* ---- cancel ---- */

static int cancel_attempt(struct fixture *f, int n) {
  (void)n;
  char id[40];
  task_id(id, 1);
  json_t *task = NULL;
  int rc = store_task_cancel(f->s, id, &task);
  if (rc == STORE_OK)
    assert_string_equal(json_string_value(json_object_get(task, "status")), "cancelled");
  else
    assert_null(task);
  json_decref(task);
  return rc;
}

/* A failed cancel changes neither the status nor the log; one that worked added
 * "cancelled" and "finished". */
static void cancel_check(struct fixture *f, int n, bool ok) {
  (void)n;
  char id[40];
  task_id(id, 1);
  assert_status(f->s, id, ok ? "cancelled" : "queued");
  assert_int_equal(event_count(f->s, id), ok ? 3 : 1);
}

static void test_cancel(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  const struct op op = {cancel_attempt, cancel_check};
  assert_true(run_with_faults(f, &op) > 0);
}

/* ---- event append ---- */

static int append_attempt(struct fixture *f, int n) {
  (void)n;
  char id[40];
  task_id(id, 1);
  json_t *data = json_pack("{s:i}", "step", 1);
  int64_t seq = -1;
  int rc = store_event_append(f->s, id, "step", data, &seq);
  json_decref(data);
  assert_int_equal(seq, rc == STORE_OK ? 2 : -1);
  return rc;
}

static void append_check(struct fixture *f, int n, bool ok) {
  (void)n;
  char id[40];
  task_id(id, 1);
  assert_int_equal(event_count(f->s, id), ok ? 2 : 1);
}

static void test_event_append(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  const struct op op = {append_attempt, append_check};
  assert_true(run_with_faults(f, &op) > 0);
}

/* ---- status, progress, delete ---- */

static int fail_attempt(struct fixture *f, int n) {
  (void)n;
  char id[40];
  task_id(id, 1);
  json_t *error = json_pack("{s:s, s:s}", "code", "no_gpu", "message", "none");
  int rc = store_task_set_status(f->s, id, "failed", error);
  json_decref(error);
  return rc;
}

static void fail_check(struct fixture *f, int n, bool ok) {
  (void)n;
  char id[40];
  task_id(id, 1);
  assert_status(f->s, id, ok ? "failed" : "queued");
  assert_int_equal(event_count(f->s, id), ok ? 2 : 1);
}

static int progress_attempt(struct fixture *f, int n) {
  char id[40];
  task_id(id, 1);
  json_t *progress = json_pack("{s:i}", "step", n + 1);
  json_t *baselines = json_pack("{s:f}", "eager_ms", 1.5);
  int rc = store_task_update_progress(f->s, id, progress, baselines);
  json_decref(progress);
  json_decref(baselines);
  return rc;
}

/* Both fields change together or not at all. */
static void progress_check(struct fixture *f, int n, bool ok) {
  char id[40];
  task_id(id, 1);
  json_t *task = NULL;
  assert_int_equal(store_task_get(f->s, id, false, &task), STORE_OK);
  json_t *step = json_object_get(json_object_get(task, "progress"), "step");
  assert_int_equal(json_integer_value(step), ok ? n + 1 : 0);
  assert_int_equal(json_is_null(json_object_get(task, "baselines")), !ok);
  json_decref(task);
}

static int delete_attempt(struct fixture *f, int n) {
  (void)n;
  char id[40];
  task_id(id, 1);
  return store_task_delete(f->s, id);
}

/* A failed delete keeps the task with its whole log. */
static void delete_check(struct fixture *f, int n, bool ok) {
  (void)n;
  char id[40];
  task_id(id, 1);
  json_t *task = NULL;
  assert_int_equal(store_task_get(f->s, id, false, &task), ok ? STORE_NOT_FOUND : STORE_OK);
  json_decref(task);
  assert_int_equal(event_count(f->s, id), ok ? 0 : 2);
}

static void test_status_progress_delete(void **state) {
  struct fixture *f = *state;
  insert_n(f->s, 1);
  const struct op progress = {progress_attempt, progress_check};
  assert_true(run_with_faults(f, &progress) > 0);
  const struct op fail = {fail_attempt, fail_check};
  assert_true(run_with_faults(f, &fail) > 0);
  const struct op del = {delete_attempt, delete_check};
  assert_true(run_with_faults(f, &del) > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_open_fresh, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_existing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_insert, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_event_append, setup, teardown),
      cmocka_unit_test_setup_teardown(test_status_progress_delete, setup, teardown),
  };
  return cmocka_run_group_tests_name("store_alloc", tests, NULL, NULL);
}
