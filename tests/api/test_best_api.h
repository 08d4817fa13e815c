/* API tests of GET /v1/tasks/{id}/best and `opforge best` (tests/api/test_best_api.c); run
 * in test_api.c's group before its coverage check. */
#ifndef OPFORGE_TEST_BEST_API_H
#define OPFORGE_TEST_BEST_API_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Points *ret_tests at the tests (static storage) and returns how many there are. */
size_t best_api_tests(const struct CMUnitTest **ret_tests);

#endif
