/* The /v1/memory API tests (tests/api/test_memory_api.c), run in test_api.c's group
 * before its coverage check. */
#ifndef OPFORGE_TEST_MEMORY_API_H
#define OPFORGE_TEST_MEMORY_API_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Points *ret_tests at the memory tests (static storage) and returns how many there are.
 * Each starts and stops its own server. */
size_t memory_api_tests(const struct CMUnitTest **ret_tests);

#endif
