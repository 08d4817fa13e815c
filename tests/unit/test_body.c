/* Unit tests of body intake (server/body.c): Content-Length check, capped buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/body.h"

static void test_length_allowed(void **state) {
  (void)state;
  const size_t cap = 1048576;
  assert_true(body_length_allowed(NULL, cap));
  assert_true(body_length_allowed("0", cap));
  assert_true(body_length_allowed("1", cap));
  assert_true(body_length_allowed("1048575", cap));
  assert_true(body_length_allowed("1048576", cap));
  assert_false(body_length_allowed("1048577", cap));
  assert_false(body_length_allowed("2000000", cap));
  assert_false(body_length_allowed("99999999999999999999999", cap));
  assert_false(body_length_allowed("18446744073709551615", cap));
  assert_false(body_length_allowed("18446744073709551616", cap));
  assert_true(body_length_allowed("00001048576", cap));
  assert_false(body_length_allowed("00001048577", cap));
  /* A small cap, exact boundary. */
  assert_true(body_length_allowed("10", 10));
  assert_false(body_length_allowed("11", 10));
  assert_true(body_length_allowed("0", 0));
  assert_false(body_length_allowed("1", 0));
}

/* Appends text in chunks of step bytes; returns nothing, the state tells the outcome. */
static void append_chunks(struct request *req, const char *text, size_t len, size_t step,
                          size_t cap) {
  for (size_t off = 0; off < len; off += step) {
    size_t n = len - off < step ? len - off : step;
    body_append(req, text + off, n, cap);
  }
}

/* Returns a malloc'd buffer of len bytes of a repeating, position-dependent pattern. */
static char *pattern_bytes(size_t len) {
  char *p = malloc(len + 1);
  assert_non_null(p);
  for (size_t i = 0; i < len; i++)
    p[i] = (char)('a' + (i * 7 + i / 26) % 26);
  p[len] = '\0';
  return p;
}

static void test_append_growth(void **state) {
  (void)state;
  const size_t cap = 1048576, total = 100003;
  char *text = pattern_bytes(total);
  struct request req;
  memset(&req, 0, sizeof req);
  size_t last_cap = 0;
  unsigned growths = 0;
  for (size_t off = 0; off < total; off += 7) {
    size_t n = total - off < 7 ? total - off : 7;
    body_append(&req, text + off, n, cap);
    assert_int_equal(req.body_state, BODY_READING);
    assert_int_equal(req.body_len, off + n);
    assert_true(req.body_cap >= req.body_len + 1);
    if (req.body_cap != last_cap) {
      growths++;
      last_cap = req.body_cap;
    }
  }
  assert_int_equal(req.body_len, total);
  assert_memory_equal(req.body, text, total);
  assert_int_equal(req.body[total], '\0');
  /* 4096 doubling to 131072: 6 allocations, not one per chunk. */
  assert_int_equal(growths, 6);
  assert_int_equal(req.body_cap, 131072);
  free(req.body);
  free(text);
}

static void test_append_exact_cap_then_overflow(void **state) {
  (void)state;
  const size_t cap = 10000;
  char *text = pattern_bytes(cap + 1);
  struct request req;
  memset(&req, 0, sizeof req);
  append_chunks(&req, text, cap, 333, cap);
  assert_int_equal(req.body_state, BODY_READING);
  assert_int_equal(req.body_len, cap);
  assert_memory_equal(req.body, text, cap);
  assert_int_equal(req.body[cap], '\0');
  assert_true(req.body_cap <= cap + 1);

  body_append(&req, text + cap, 1, cap);
  assert_int_equal(req.body_state, BODY_OVERFLOW);
  assert_true(req.body_len <= cap);
  /* Further bytes are dropped and the state stays. */
  body_append(&req, "x", 1, cap);
  assert_int_equal(req.body_state, BODY_OVERFLOW);
  assert_true(req.body_len <= cap);
  free(req.body);
  free(text);
}

static void test_append_chunk_crossing_cap(void **state) {
  (void)state;
  const size_t cap = 100;
  char *text = pattern_bytes(200);
  struct request req;
  memset(&req, 0, sizeof req);
  body_append(&req, text, 90, cap);
  assert_int_equal(req.body_state, BODY_READING);
  assert_int_equal(req.body_len, 90);
  assert_true(req.body_cap <= cap + 1);
  body_append(&req, text + 90, 11, cap);
  assert_int_equal(req.body_state, BODY_OVERFLOW);
  assert_true(req.body_len <= cap);
  free(req.body);

  /* One chunk larger than the cap from the start. */
  memset(&req, 0, sizeof req);
  body_append(&req, text, 101, cap);
  assert_int_equal(req.body_state, BODY_OVERFLOW);
  assert_true(req.body_len <= cap);
  free(req.body);

  /* A chunk that ends exactly at the cap is fine. */
  memset(&req, 0, sizeof req);
  body_append(&req, text, 40, cap);
  body_append(&req, text + 40, 60, cap);
  assert_int_equal(req.body_state, BODY_READING);
  assert_int_equal(req.body_len, 100);
  assert_memory_equal(req.body, text, 100);
  assert_int_equal(req.body[100], '\0');
  free(req.body);

  /* A length that would wrap size_t arithmetic is an overflow, not a small append. */
  memset(&req, 0, sizeof req);
  body_append(&req, text, 10, cap);
  body_append(&req, text, SIZE_MAX - 5, cap);
  assert_int_equal(req.body_state, BODY_OVERFLOW);
  assert_int_equal(req.body_len, 10);
  free(req.body);
  free(text);
}

static void test_append_nomem(void **state) {
  (void)state;
  const size_t cap = 1048576;
  char *text = pattern_bytes(10000);
  struct request req;

  /* The first allocation fails. */
  memset(&req, 0, sizeof req);
  body_fail_after(0);
  body_append(&req, text, 100, cap);
  assert_int_equal(req.body_state, BODY_NOMEM);
  assert_int_equal(req.body_len, 0);
  body_fail_after(-1);
  body_append(&req, text, 100, cap);  /* dropped: the state is final */
  assert_int_equal(req.body_state, BODY_NOMEM);
  assert_int_equal(req.body_len, 0);
  free(req.body);

  /* The second (growth) allocation fails: what was read stays owned by req. */
  memset(&req, 0, sizeof req);
  body_fail_after(1);
  body_append(&req, text, 4000, cap);
  assert_int_equal(req.body_state, BODY_READING);
  body_append(&req, text + 4000, 4000, cap);
  assert_int_equal(req.body_state, BODY_NOMEM);
  assert_int_equal(req.body_len, 4000);
  assert_memory_equal(req.body, text, 4000);
  body_fail_after(-1);
  free(req.body);
  free(text);
}


/* Parses text as a request body would be; returns the object or NULL (caller owns). */
static json_t *parse_body(const char *text) {
  struct request req;
  memset(&req, 0, sizeof req);
  body_append(&req, text, strlen(text), 1 << 20);
  enum MHD_Result r = MHD_YES;
  json_t *doc = body_parse_object(&req, &r);
  free(req.body);
  return doc;
}

/* JSON has one number type: an integer literal beyond +-2^63 (which Jansson alone
 * refuses) is read as the real it is, wherever it sits; strings are left alone and
 * int64 integers stay integers; reals without a fraction become integers. */
static void test_parse_wide_integers(void **state) {
  (void)state;
  json_t *doc = parse_body("{\"a\": -10000000000000000000, \"b\": [1, 18446744073709551616,"
                           " -9223372036854775808, 9223372036854775807], \"s\":"
                           " \"99999999999999999999 \\\" -99999999999999999999\", \"c\":"
                           " {\"d\": 123456789012345678901234567890e2}}");
  assert_non_null(doc);
  assert_true(json_is_real(json_object_get(doc, "a")));
  assert_true(json_real_value(json_object_get(doc, "a")) == -1e19);
  json_t *b = json_object_get(doc, "b");
  assert_true(json_is_integer(json_array_get(b, 0)));
  assert_true(json_is_real(json_array_get(b, 1)));
  assert_true(json_is_integer(json_array_get(b, 2)));
  assert_int_equal(json_integer_value(json_array_get(b, 2)), INT64_MIN);
  assert_int_equal(json_integer_value(json_array_get(b, 3)), INT64_MAX);
  assert_string_equal(json_string_value(json_object_get(doc, "s")),
                      "99999999999999999999 \" -99999999999999999999");
  assert_true(json_is_real(json_object_get(json_object_get(doc, "c"), "d")));
  json_decref(doc);
  /* JSON Schema's integers: 5.0 and 1e2 are integers, 2.5 is not. */
  doc = parse_body("{\"x\": 5.0, \"y\": [2.0, 2.5, -0.0], \"z\": {\"w\": 1e2}}");
  assert_non_null(doc);
  assert_true(json_is_integer(json_object_get(doc, "x")));
  assert_int_equal(json_integer_value(json_object_get(doc, "x")), 5);
  assert_true(json_is_integer(json_array_get(json_object_get(doc, "y"), 0)));
  assert_true(json_is_real(json_array_get(json_object_get(doc, "y"), 1)));
  assert_true(json_is_integer(json_array_get(json_object_get(doc, "y"), 2)));
  assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "z"), "w")), 100);
  json_decref(doc);
  /* Still refused: NUL in a string, a real beyond double, broken JSON. */
  assert_null(parse_body("{\"a\": \"x\\u0000y\"}"));
  assert_null(parse_body("{\"a\": 1e400}"));
  assert_null(parse_body("{\"a\": 10000000000000000000000"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_length_allowed),
    cmocka_unit_test(test_append_growth),
    cmocka_unit_test(test_append_exact_cap_then_overflow),
    cmocka_unit_test(test_append_chunk_crossing_cap),
    cmocka_unit_test(test_append_nomem),
    cmocka_unit_test(test_parse_wide_integers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
