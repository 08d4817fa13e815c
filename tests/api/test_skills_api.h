/* The /v1/skills API tests (tests/api/test_skills_api.c), run in test_api.c's group
 * before its coverage check. */
#ifndef OPFORGE_TEST_SKILLS_API_H
#define OPFORGE_TEST_SKILLS_API_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Points *ret_tests at the skills tests (static storage) and returns how many there are.
 * Each starts and stops its own server. */
size_t skills_api_tests(const struct CMUnitTest **ret_tests);

#endif
