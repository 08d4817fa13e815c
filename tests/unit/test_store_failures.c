/* The per-task count of store failures (engine/store_failures.c): a busy store is never
 * counted, other failures count in a row per task until forgotten, and a full table
 * reuses the slot noted longest ago. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/store_failures.h"
#include "store/status.h"

static void test_busy_is_not_counted(void **state) {
  (void)state;
  struct store_failures f;
  store_failures_init(&f);
  for (int i = 0; i < 10; i++)
    assert_int_equal(store_failures_note(&f, "t1", STORE_BUSY), 0);
  int status = 1;
  assert_int_equal(store_failures_count(&f, "t1", &status), 0);
  assert_int_equal(status, 0);
  store_failures_destroy(&f);
}

static void test_counts_in_a_row_per_task(void **state) {
  (void)state;
  struct store_failures f;
  store_failures_init(&f);
  assert_int_equal(store_failures_note(&f, "t1", STORE_CONSTRAINT), 1);
  assert_int_equal(store_failures_note(&f, "t2", STORE_ERROR), 1);
  assert_int_equal(store_failures_note(&f, "t1", STORE_BUSY), 1);  /* busy: unchanged */
  assert_int_equal(store_failures_note(&f, "t1", STORE_CONSTRAINT), 2);
  int status = 0;
  assert_int_equal(store_failures_count(&f, "t1", &status), 2);
  assert_int_equal(status, STORE_CONSTRAINT);
  assert_int_equal(store_failures_count(&f, "t2", &status), 1);
  assert_int_equal(status, STORE_ERROR);
  store_failures_forget(&f, "t1");  /* a commit succeeded */
  assert_int_equal(store_failures_count(&f, "t1", NULL), 0);
  assert_int_equal(store_failures_note(&f, "t1", STORE_CONSTRAINT), 1);
  assert_int_equal(store_failures_count(&f, "t2", NULL), 1);
  assert_int_equal(store_failures_note(&f, "", STORE_ERROR), 0);
  assert_int_equal(store_failures_note(&f, NULL, STORE_ERROR), 0);
  store_failures_destroy(&f);
}

/* STORE_FAILURES_TASKS + 1 tasks: the first one noted (and not noted since) is dropped. */
static void test_full_table_reuses_oldest(void **state) {
  (void)state;
  struct store_failures f;
  store_failures_init(&f);
  char id[16];
  for (int i = 0; i < STORE_FAILURES_TASKS; i++) {
    snprintf(id, sizeof id, "t%d", i);
    assert_int_equal(store_failures_note(&f, id, STORE_ERROR), 1);
  }
  assert_int_equal(store_failures_note(&f, "t0", STORE_ERROR), 2);  /* t0 is now newest */
  assert_int_equal(store_failures_note(&f, "new", STORE_ERROR), 1);
  assert_int_equal(store_failures_count(&f, "t1", NULL), 0);        /* t1 was oldest */
  assert_int_equal(store_failures_count(&f, "t0", NULL), 2);
  assert_int_equal(store_failures_count(&f, "new", NULL), 1);
  snprintf(id, sizeof id, "t%d", STORE_FAILURES_TASKS - 1);
  assert_int_equal(store_failures_count(&f, id, NULL), 1);
  store_failures_destroy(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_busy_is_not_counted),
    cmocka_unit_test(test_counts_in_a_row_per_task),
    cmocka_unit_test(test_full_table_reuses_oldest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
