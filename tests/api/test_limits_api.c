/* API tests of the connection limits (issue 33, items 6 and 7): a request body must
 * arrive within --body-deadline of its head; slow heads spread over many addresses
 * cannot fill the connection table and starve a client that sends its request at once;
 * connections a client has closed stop counting against its per-client limit at once,
 * even while the server has not reaped them (a suspended event stream). */
#include "tests/api/test_limits_api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/api/raw.h"

static int start_with(void **state, const char *const *args) {
  struct server_opts opts = {.extra_args = args};
  struct server *server = NULL;
  if (server_start(&opts, &server) != 0)
    return -1;
  *state = server;
  return 0;
}

static int start_body_deadline(void **state) {
  static const char *const args[] = {"--body-deadline", "2", NULL};
  return start_with(state, args);
}

static int start_small_table(void **state) {
  static const char *const args[] = {"--max-connections", "48", NULL};
  return start_with(state, args);
}

static int start_four_per_client(void **state) {
  static const char *const args[] = {"--max-connections-per-ip", "4", NULL};
  return start_with(state, args);
}

static int stop(void **state) { return server_stop(*state) == 0 ? 0 : -1; }

/* With --body-deadline 2, a body trickled one byte every 500 ms (each byte restarts the
 * 30 s idle timeout) is cut off between 2 and about 3 s after its head: the connection
 * is closed without an answer (libmicrohttpd 0.9.75 cannot queue one while the upload
 * is unfinished) and the trip is counted. A body sent at a normal pace is taken. */
static void test_body_deadline(void **state) {
  struct server *server = *state;
  int fd = raw_connect_from(server, NULL);
  static const char head[] = "POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                             "application/json\r\nContent-Length: 100\r\n\r\n{";
  assert_int_equal(send(fd, head, sizeof head - 1, MSG_NOSIGNAL), sizeof head - 1);
  long sent_at = raw_ms_now(), closed_at = -1;
  while (raw_ms_now() - sent_at < 6000) {
    if (send(fd, " ", 1, MSG_NOSIGNAL) != 1 || raw_closed_by_server(fd, 500)) {
      closed_at = raw_ms_now() - sent_at;
      break;
    }
  }
  close(fd);
  print_message("the trickled body's connection closed after %ld ms\n", closed_at);
  assert_true(closed_at >= 1900);
  assert_true(closed_at <= 3500);
  assert_int_equal(raw_limit_trips(server, "body_deadline"), 1);
  struct http_response *r = http_send(server, "POST", "/v1/memory/reset", "{}", NULL);
  assert_int_equal(r->status, 200);
  http_response_free(r);
  assert_int_equal(raw_limit_trips(server, "body_deadline"), 1);
}

enum { SOURCES = 20, PER_SOURCE = 4 };

/* One slow client: a connection from 127.0.0.(2+source) that trickles a request head. */
static int open_trickler(struct server *server, int source) {
  char from[32];
  snprintf(from, sizeof from, "127.0.0.%d", 2 + source);
  int fd = raw_try_connect_from(server, from);
  static const char start[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  if (fd >= 0 && send(fd, start, sizeof start - 1, MSG_NOSIGNAL) != sizeof start - 1) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* A client that sends its request at once: GET /healthz, sent again on a new connection
 * when the server closes one unanswered (libmicrohttpd refuses at accept while its table
 * is full for a moment, before the shed connections have closed), as a client retries,
 * until 5 s pass. Returns the last status (-1: none); sets how long it took and the
 * connections it used. */
static long probe_healthz(struct server *server, long *ret_ms, int *ret_tries) {
  static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Connection: close\r\n\r\n";
  long t0 = raw_ms_now(), status = -1;
  int tries = 0;
  while (status != 200 && raw_ms_now() - t0 < 5000) {
    struct raw_response r = {0};
    raw_exchange_wait(server, NULL, NULL, req, sizeof req - 1, 5000, &r);
    status = r.status;
    tries++;
    raw_response_clear(&r);
    if (status != 200)
      usleep(20 * 1000);
  }
  *ret_ms = raw_ms_now() - t0;
  *ret_tries = tries;
  return status;
}

/* The probe's spread: 20 addresses (127.0.0.2 to .21) with 4 connections each that
 * trickle request heads (one byte every 300 ms, well inside every idle timeout and the
 * 10 s head deadline) and reopen whatever the server closes, against
 * --max-connections 48. Each of 4 requests of a client that sends its request at once
 * is answered within 5 s (probe_healthz), and the connections shed to make room are
 * counted. */
static void test_spread_slow_heads(void **state) {
  struct server *server = *state;
  int fds[SOURCES * PER_SOURCE];
  for (int i = 0; i < SOURCES * PER_SOURCE; i++)
    fds[i] = open_trickler(server, i % SOURCES);
  long start = raw_ms_now();
  int answered = 0, asked = 0, connections = 0;
  long slowest = 0;
  while (raw_ms_now() - start < 8000 && asked < 4) {
    for (int i = 0; i < SOURCES * PER_SOURCE; i++) {
      if (fds[i] >= 0 && send(fds[i], "a", 1, MSG_NOSIGNAL) == 1 && !raw_closed_by_server(fds[i], 0))
        continue;
      if (fds[i] >= 0)
        close(fds[i]);
      fds[i] = open_trickler(server, i % SOURCES);
    }
    if (raw_ms_now() - start >= 1000 * (asked + 1)) {
      long took = 0;
      int tries = 0;
      asked++;
      answered += probe_healthz(server, &took, &tries) == 200;
      connections += tries;
      slowest = took > slowest ? took : slowest;
    }
    usleep(300 * 1000);
  }
  for (int i = 0; i < SOURCES * PER_SOURCE; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  long shed = raw_limit_trips(server, "shed");
  print_message("answered %d of %d on %d connections, slowest %ld ms; shed %ld\n", answered,
                asked, connections, slowest, shed);
  assert_int_equal(asked, 4);
  assert_int_equal(answered, 4);
  assert_true(slowest < 5000);
  assert_true(shed >= 1);
}

/* With --max-connections-per-ip 4: four event streams (suspended while they wait for
 * events, so the server does not see them close until the next keep-alive in 15 s) are
 * closed, and at once four new requests from the same address all succeed. */
static void test_closed_connections_free_slots(void **state) {
  struct server *server = *state;
  struct http_response *created =
      http_send(server, "POST", "/v1/tasks",
                "{\"reference\":\"import torch\\nclass Model(torch.nn.Module):\\n    def "
                "forward(self, x):\\n        return x\\ndef get_inputs():\\n    return "
                "[torch.randn(4)]\\ndef get_init_inputs():\\n    return []\\n\"}",
                NULL);
  assert_int_equal(created->status, 202);
  json_t *task = http_json(created);
  char req[256];
  snprintf(req, sizeof req, "GET /v1/tasks/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
           json_string_value(json_object_get(task, "id")));
  json_decref(task);
  http_response_free(created);
  for (int round = 0; round < 2; round++) {
    int fds[4];
    for (int i = 0; i < 4; i++) {
      fds[i] = raw_connect_from(server, NULL);
      assert_int_equal(send(fds[i], req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
      char buf[512] = "";
      assert_true(recv(fds[i], buf, sizeof buf - 1, 0) > 12); /* the stream's head */
      assert_int_equal(strncmp(buf, "HTTP/1.1 200 ", 13), 0);
    }
    for (int i = 0; i < 4; i++)
      close(fds[i]);
    struct http_request gets[4];
    for (int i = 0; i < 4; i++)
      gets[i] = (struct http_request){.method = "GET", .path = "/healthz"};
    struct http_response **rs = http_do_all(server, gets, 4);
    for (int i = 0; i < 4; i++) {
      if (rs[i]->status != 200)
        print_error("round %d, request %d: %ld %s\n", round, i, rs[i]->status, rs[i]->body);
      assert_int_equal(rs[i]->status, 200);
    }
    http_responses_free(rs, 4);
  }
  assert_int_equal(raw_limit_trips(server, "connections"), 0);
}

static const struct CMUnitTest tests[] = {
  cmocka_unit_test_setup_teardown(test_body_deadline, start_body_deadline, stop),
  cmocka_unit_test_setup_teardown(test_spread_slow_heads, start_small_table, stop),
  cmocka_unit_test_setup_teardown(test_closed_connections_free_slots, start_four_per_client,
                                  stop),
};

size_t limits_api_tests(const struct CMUnitTest **ret_tests) {
  *ret_tests = tests;
  return sizeof tests / sizeof tests[0];
}
