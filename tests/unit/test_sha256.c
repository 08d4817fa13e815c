/* SHA-256 against the FIPS 180-2 example vectors and padding-boundary lengths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/sha256.h"

static void expect_hex(const void *data, size_t len, const char *want) {
  char hex[SHA256_HEX_BYTES];
  sha256_hex(data, len, hex);
  assert_string_equal(hex, want);
}

static void test_abc(void **state) {
  (void)state;
  expect_hex("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_empty(void **state) {
  (void)state;
  expect_hex("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  expect_hex(NULL, 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_448_bits(void **state) {
  (void)state;
  const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  assert_int_equal(strlen(m) * 8, 448);
  expect_hex(m, strlen(m), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_896_bits(void **state) {
  (void)state;
  const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                  "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  assert_int_equal(strlen(m) * 8, 896);
  expect_hex(m, strlen(m), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void **state) {
  (void)state;
  char *m = malloc(1000000);
  assert_non_null(m);
  memset(m, 'a', 1000000);
  expect_hex(m, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  /* The same digest when fed in uneven pieces that straddle block boundaries. */
  struct sha256_ctx ctx;
  uint8_t digest[SHA256_DIGEST_BYTES];
  char hex[SHA256_HEX_BYTES];
  sha256_init(&ctx);
  size_t off = 0, step = 1;
  while (off < 1000000) {
    size_t take = step < 1000000 - off ? step : 1000000 - off;
    sha256_update(&ctx, m + off, take);
    off += take;
    step = step * 3 % 257 + 1;
  }
  sha256_final(&ctx, digest);
  sha256_to_hex(digest, hex);
  assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(m);
}

/* Lengths around the 56-byte padding boundary and the 64-byte block. */
static void test_padding_boundaries(void **state) {
  (void)state;
  static const struct {
    size_t n;
    const char *hex;
  } cases[] = {
    {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
    {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
    {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
    {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
    {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
  };
  char buf[65];
  memset(buf, 'a', sizeof buf);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_hex(buf, cases[i].n, cases[i].hex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_abc),
    cmocka_unit_test(test_empty),
    cmocka_unit_test(test_448_bits),
    cmocka_unit_test(test_896_bits),
    cmocka_unit_test(test_million_a),
    cmocka_unit_test(test_padding_boundaries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
