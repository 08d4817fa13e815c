/* Unit tests of the API error table (server/errors.c) and its match with openapi.yaml. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"

/* True for [a-z][a-z0-9]*(_[a-z0-9]+)*: no leading, trailing or doubled underscore. */
static bool is_snake_case(const char *s) {
  if (!s || !(*s >= 'a' && *s <= 'z'))
    return false;
  char prev = '\0';
  for (const char *p = s; *p; p++) {
    bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
    if (!alnum && *p != '_')
      return false;
    if (*p == '_' && prev == '_')
      return false;
    prev = *p;
  }
  return prev != '_';
}

static void test_every_code_well_formed(void **state) {
  (void)state;
  for (unsigned i = 0; i < API_ERR__COUNT; i++) {
    const struct api_error_info *info = api_error_info((enum api_error)i);
    assert_non_null(info);
    assert_non_null(info->code);
    if (!is_snake_case(info->code))
      fail_msg("error %u: code '%s' is not snake_case", i, info->code);
    if (info->status < 400 || info->status > 507)
      fail_msg("error %u (%s): status %u outside 400..507", i, info->code, info->status);
  }
}

static void test_codes_unique(void **state) {
  (void)state;
  for (unsigned i = 0; i < API_ERR__COUNT; i++)
    for (unsigned j = i + 1; j < API_ERR__COUNT; j++)
      if (strcmp(api_error_info((enum api_error)i)->code,
                 api_error_info((enum api_error)j)->code) == 0)
        fail_msg("errors %u and %u share the code '%s'", i, j,
                 api_error_info((enum api_error)i)->code);
}

/* Checks one entry's code and status exactly. */
static void expect_entry(enum api_error err, const char *code, unsigned status) {
  const struct api_error_info *info = api_error_info(err);
  assert_string_equal(info->code, code);
  assert_int_equal(info->status, status);
}

static void test_exact_statuses(void **state) {
  (void)state;
  expect_entry(API_ERR_BAD_JSON, "bad_json", 400);
  expect_entry(API_ERR_INVALID_FIELD, "invalid_field", 400);
  expect_entry(API_ERR_UNAUTHORIZED, "unauthorized", 401);
  expect_entry(API_ERR_FORBIDDEN, "forbidden", 403);
  expect_entry(API_ERR_NOT_FOUND, "not_found", 404);
  expect_entry(API_ERR_TASK_NOT_FOUND, "task_not_found", 404);
  expect_entry(API_ERR_METHOD_NOT_ALLOWED, "method_not_allowed", 405);
  expect_entry(API_ERR_TASK_FINISHED, "task_finished", 409);
  expect_entry(API_ERR_TASK_RUNNING, "task_running", 409);
  expect_entry(API_ERR_BODY_TOO_LARGE, "body_too_large", 413);
  expect_entry(API_ERR_URL_TOO_LONG, "url_too_long", 414);
  expect_entry(API_ERR_UNSUPPORTED_MEDIA, "unsupported_media_type", 415);
  expect_entry(API_ERR_TOO_MANY_REQUESTS, "too_many_requests", 429);
  expect_entry(API_ERR_INTERNAL, "internal", 500);
  expect_entry(API_ERR_NOT_READY, "not_ready", 503);
  expect_entry(API_ERR_NO_CORRECT_CANDIDATE, "no_correct_candidate", 409);
  expect_entry(API_ERR_NOT_PURE, "not_pure", 409);
  expect_entry(API_ERR_NO_GENERATED_CANDIDATE, "no_generated_candidate", 409);
  expect_entry(API_ERR_NO_ELEMENTWISE_CANDIDATE, "no_elementwise_candidate", 409);
}

static void test_from_code_round_trip(void **state) {
  (void)state;
  for (unsigned i = 0; i < API_ERR__COUNT; i++) {
    const char *code = api_error_info((enum api_error)i)->code;
    assert_int_equal(api_error_from_code(code), i);
  }
  assert_int_equal(api_error_from_code("no_such_code"), API_ERR__COUNT);
  assert_int_equal(api_error_from_code(""), API_ERR__COUNT);
  assert_int_equal(api_error_from_code("BAD_JSON"), API_ERR__COUNT);
  assert_int_equal(api_error_from_code("bad_json "), API_ERR__COUNT);
}

static void test_out_of_range_is_internal(void **state) {
  (void)state;
  assert_ptr_equal(api_error_info(API_ERR__COUNT), api_error_info(API_ERR_INTERNAL));
  assert_ptr_equal(api_error_info((enum api_error)1000), api_error_info(API_ERR_INTERNAL));
}

/* Number of leading spaces of a line. */
static size_t indent_of(const char *line) { return strspn(line, " "); }

/* Reads the items of components.schemas.ErrorCode.enum from the YAML text, written one
 * "- item  # comment" per line. Returns the count, or -1 when the schema or its enum is
 * absent. The items are malloc'd into items[]; the caller frees them. */
static int read_spec_codes(FILE *f, char **items, int max) {
  char *line = NULL;
  size_t cap = 0;
  int n = -1;
  size_t schema_indent = 0, list_indent = 0;
  enum { SEEK_SCHEMA, SEEK_ENUM, IN_ENUM, DONE } st = SEEK_SCHEMA;
  while (st != DONE && getline(&line, &cap, f) != -1) {
    line[strcspn(line, "\r\n")] = '\0';
    size_t ind = indent_of(line);
    const char *t = line + ind;
    if (st == SEEK_SCHEMA) {
      if (strcmp(t, "ErrorCode:") == 0) {
        schema_indent = ind;
        st = SEEK_ENUM;
      }
    } else if (st == SEEK_ENUM) {
      if (*t && *t != '#' && ind <= schema_indent)
        break;  /* left the schema without an enum */
      if (strcmp(t, "enum:") == 0) {
        st = IN_ENUM;
        n = 0;
        list_indent = 0;
      }
    } else if (st == IN_ENUM) {
      if (!*t || *t == '#')
        continue;
      if (strncmp(t, "- ", 2) != 0 || (list_indent && ind != list_indent)) {
        st = DONE;
        continue;
      }
      list_indent = ind;
      const char *item = t + 2;
      size_t len = strcspn(item, " #");
      if (n < max)
        items[n] = strndup(item, len);
      n++;
    }
  }
  free(line);
  return n;
}

static void test_table_matches_openapi(void **state) {
  (void)state;
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  if (!root) {
    print_message("skipped: OPFORGE_SOURCE_ROOT is not set\n");
    skip();
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/openapi/openapi.yaml", root);
  FILE *f = fopen(path, "r");
  if (!f) {
    print_message("skipped: cannot open %s\n", path);
    skip();
  }
  char *items[128] = {0};
  int n = read_spec_codes(f, items, 128);
  fclose(f);
  if (n < 0) {
    print_message("skipped: %s has no ErrorCode enum\n", path);
    skip();
  }
  int mismatch = -1;
  for (int i = 0; i < n && i < (int)API_ERR__COUNT && mismatch < 0; i++)
    if (!items[i] || strcmp(items[i], api_error_info((enum api_error)i)->code) != 0)
      mismatch = i;
  if (mismatch >= 0)
    print_message("entry %d: spec has '%s', errors.c has '%s'\n", mismatch,
                  items[mismatch] ? items[mismatch] : "(null)",
                  api_error_info((enum api_error)mismatch)->code);
  for (int i = 0; i < n && i < 128; i++)
    free(items[i]);
  assert_int_equal(mismatch, -1);
  assert_int_equal(n, API_ERR__COUNT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_every_code_well_formed),
    cmocka_unit_test(test_codes_unique),
    cmocka_unit_test(test_exact_statuses),
    cmocka_unit_test(test_from_code_round_trip),
    cmocka_unit_test(test_out_of_range_is_internal),
    cmocka_unit_test(test_table_matches_openapi),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
