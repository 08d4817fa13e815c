/* API tests of request framing, the request line, absolute-form targets, blanks around
 * the bearer token and HEAD on event streams (tests/api/test_framing_api.c); run in
 * test_api.c's group before its coverage check. */
#ifndef OPFORGE_TEST_FRAMING_API_H
#define OPFORGE_TEST_FRAMING_API_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Points *ret_tests at the tests (static storage) and returns how many there are. */
size_t framing_api_tests(const struct CMUnitTest **ret_tests);

#endif
