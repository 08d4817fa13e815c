/* Unit tests of when the connection table sheds connections still waiting for a head
 * (server/conn_shed.c): an eighth of the table (1 to 64 slots) is kept free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/conn_shed.h"

static void test_headroom(void **state) {
  (void)state;
  assert_int_equal(conn_shed_headroom(1), 1);
  assert_int_equal(conn_shed_headroom(7), 1);
  assert_int_equal(conn_shed_headroom(48), 6);
  assert_int_equal(conn_shed_headroom(512), 64);
  assert_int_equal(conn_shed_headroom(1024), 64);
  assert_int_equal(conn_shed_headroom(65535), 64);
}

static void test_count(void **state) {
  (void)state;
  /* --max-connections 1024: shedding starts past 960 open. */
  assert_int_equal(conn_shed_count(960, 1024), 0);
  assert_int_equal(conn_shed_count(961, 1024), 1);
  assert_int_equal(conn_shed_count(1024, 1024), 64);
  /* --max-connections 48: past 42. */
  assert_int_equal(conn_shed_count(42, 48), 0);
  assert_int_equal(conn_shed_count(43, 48), 1);
  /* A table of one keeps its slot free. */
  assert_int_equal(conn_shed_count(0, 1), 0);
  assert_int_equal(conn_shed_count(1, 1), 1);
  assert_int_equal(conn_shed_count(0, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_headroom),
    cmocka_unit_test(test_count),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
