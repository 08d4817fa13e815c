/* Unit tests of the per-client connection counter: exact counts per address, ports
 * ignored, IPv4 and IPv6 kept apart, the limit, a full table, and closes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "server/client_limit.h"

static struct sockaddr_in v4(const char *ip, uint16_t port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
  return a;
}

static struct sockaddr_in6 v6(const char *ip, uint16_t port) {
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
  assert_int_equal(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
  return a;
}

#define SA(x) ((const struct sockaddr *)(const void *)&(x))

static void test_counts_per_address_not_port(void **state) {
  (void)state;
  struct client_limit *l = client_limit_new(8, 2);
  struct sockaddr_in a1 = v4("10.0.0.1", 1000), a2 = v4("10.0.0.1", 2000),
                     a3 = v4("10.0.0.1", 3000), b = v4("10.0.0.2", 1000);
  assert_int_equal(client_limit_opened(l, SA(a1)), 1);
  assert_int_equal(client_limit_opened(l, SA(a2)), 2);
  assert_false(client_limit_over(l, SA(a1)));
  assert_int_equal(client_limit_opened(l, SA(a3)), 3);
  assert_true(client_limit_over(l, SA(a2)));  /* any port of the address */
  assert_int_equal(client_limit_opened(l, SA(b)), 1);
  assert_false(client_limit_over(l, SA(b)));
  client_limit_closed(l, SA(a3));
  assert_int_equal(client_limit_count(l, SA(a1)), 2);
  assert_false(client_limit_over(l, SA(a1)));
  client_limit_closed(l, SA(a1));
  client_limit_closed(l, SA(a2));
  assert_int_equal(client_limit_count(l, SA(a1)), 0);
  assert_int_equal(client_limit_count(l, SA(b)), 1);
  assert_int_equal(client_limit_limit(l), 2);
  client_limit_free(l);
}

static void test_ipv6_apart_from_ipv4(void **state) {
  (void)state;
  struct client_limit *l = client_limit_new(4, 1);
  struct sockaddr_in a = v4("127.0.0.1", 1);
  struct sockaddr_in6 b = v6("::1", 1), c = v6("::ffff:127.0.0.1", 1);
  assert_int_equal(client_limit_opened(l, SA(a)), 1);
  assert_int_equal(client_limit_opened(l, SA(b)), 1);
  assert_int_equal(client_limit_opened(l, SA(c)), 1); /* a mapped address is its own key */
  assert_int_equal(client_limit_opened(l, SA(b)), 2);
  assert_true(client_limit_over(l, SA(b)));
  assert_false(client_limit_over(l, SA(a)));
  client_limit_free(l);
}

/* A full table counts no new address (0) and never refuses it; freed slots are reused. */
static void test_full_table(void **state) {
  (void)state;
  struct client_limit *l = client_limit_new(2, 1);
  struct sockaddr_in a = v4("10.0.0.1", 1), b = v4("10.0.0.2", 1), c = v4("10.0.0.3", 1);
  assert_int_equal(client_limit_opened(l, SA(a)), 1);
  assert_int_equal(client_limit_opened(l, SA(b)), 1);
  assert_int_equal(client_limit_opened(l, SA(c)), 0);
  assert_false(client_limit_over(l, SA(c)));
  client_limit_closed(l, SA(c)); /* not counted: ignored */
  assert_int_equal(client_limit_count(l, SA(a)), 1);
  client_limit_closed(l, SA(a));
  assert_int_equal(client_limit_opened(l, SA(c)), 1);
  assert_int_equal(client_limit_count(l, SA(b)), 1);
  client_limit_free(l);
}

static void test_other_families_and_null(void **state) {
  (void)state;
  struct client_limit *l = client_limit_new(2, 1);
  struct sockaddr un = {.sa_family = AF_UNIX};
  assert_int_equal(client_limit_opened(l, &un), 0);
  assert_int_equal(client_limit_opened(l, NULL), 0);
  assert_false(client_limit_over(l, NULL));
  assert_false(client_limit_over(NULL, &un));
  client_limit_free(l);
  client_limit_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_counts_per_address_not_port),
    cmocka_unit_test(test_ipv6_apart_from_ipv4),
    cmocka_unit_test(test_full_table),
    cmocka_unit_test(test_other_families_and_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
