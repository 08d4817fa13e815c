/* API tests of the engine's read endpoints (tests/api/test_engine_api.c): the HTAM score,
 * candidates and devices; run in test_api.c's group before its coverage check. */
#ifndef OPFORGE_TEST_ENGINE_API_H
#define OPFORGE_TEST_ENGINE_API_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Points *ret_tests at the tests (static storage) and returns how many there are. */
size_t engine_api_tests(const struct CMUnitTest **ret_tests);

#endif
