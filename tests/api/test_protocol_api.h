/* API tests of the HTTP layer (tests/api/test_protocol_api.c): Host, Origin and CORS,
 * HEAD and OPTIONS, media types of writes, malformed headers and the HTTP library's own
 * answers; run in test_api.c's group before its coverage check. */
#ifndef OPFORGE_TEST_PROTOCOL_API_H
#define OPFORGE_TEST_PROTOCOL_API_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Points *ret_tests at the tests (static storage) and returns how many there are. */
size_t protocol_api_tests(const struct CMUnitTest **ret_tests);

#endif
