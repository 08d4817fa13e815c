/* API tests of the connection limits: the body deadline, slow heads spread over many
 * addresses, closed connections and the per-client limit (tests/api/test_limits_api.c);
 * run in test_api.c's group before its coverage check. */
#ifndef OPFORGE_TEST_LIMITS_API_H
#define OPFORGE_TEST_LIMITS_API_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Points *ret_tests at the tests (static storage) and returns how many there are. */
size_t limits_api_tests(const struct CMUnitTest **ret_tests);

#endif
