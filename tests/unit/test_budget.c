/* engine/budget.c: the time budget's rule, on values worked by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine/budget.h"

/* Before any step is timed, only the time so far counts: 299.9 s of 300 allows a step,
 * 300 s does not, and neither does a budget already overrun. */
static void test_no_step_timed_yet(void **state) {
  (void)state;
  assert_true(budget_time_allows_step(0.0, 300.0, 0.0, 0));
  assert_true(budget_time_allows_step(299.9, 300.0, 0.0, 0));
  assert_false(budget_time_allows_step(300.0, 300.0, 0.0, 0));
  assert_false(budget_time_allows_step(345.0, 300.0, 0.0, 0));
}

/* With steps timed, a step of their mean must end by the budget: 4 steps took 60 s, a
 * mean of 15 s, so at 285 s (285 + 15 = 300) a step starts and at 285.5 s it does not;
 * one step of 40 s at 255 s (295) starts, at 261 s (301) not. */
static void test_mean_step_must_fit(void **state) {
  (void)state;
  assert_true(budget_time_allows_step(285.0, 300.0, 60.0, 4));
  assert_false(budget_time_allows_step(285.5, 300.0, 60.0, 4));
  assert_true(budget_time_allows_step(255.0, 300.0, 40.0, 1));
  assert_false(budget_time_allows_step(261.0, 300.0, 40.0, 1));
}

/* The monotonic clock moves forward. */
static void test_clock(void **state) {
  (void)state;
  double a = budget_now_s(), b = budget_now_s();
  assert_true(a > 0 && b >= a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_step_timed_yet),
      cmocka_unit_test(test_mean_step_must_fit),
      cmocka_unit_test(test_clock),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
