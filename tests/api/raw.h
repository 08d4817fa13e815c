/* Raw HTTP exchanges for the API tests: requests libcurl would not send (malformed
 * heads, ambiguous framing, NUL bytes), sent over plain sockets from any loopback
 * address, with the response checked against the spec and whether the server closed
 * the connection after it. */
#ifndef OPFORGE_API_RAW_H
#define OPFORGE_API_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/api/harness.h"

/* A response read off a raw socket; everything is owned by the struct. */
struct raw_response {
  long status;                 /* of the first status line; -1 when there is none */
  char *text;                  /* everything received, NUL-terminated */
  size_t len;
  struct spec_header headers[64];
  size_t n_headers;
  char *header_copy;           /* storage of the header names and values */
  const char *body;            /* into text: after the first blank line */
  size_t body_len;             /* by Content-Length when given, else to the end */
  bool closed;                 /* the server ended the connection (end of stream or reset)
                                  before the wait ran out */
};

/* Frees what r owns and zeroes it. */
void raw_response_clear(struct raw_response *r);

/* The port the server listens on. */
uint16_t raw_server_port(struct server *server);

/* A TCP connection to the server from the loopback address source (NULL: 127.0.0.1;
 * Linux routes all of 127/8 to lo). Fails the test when it cannot connect. The caller
 * closes it. */
int raw_connect_from(struct server *server, const char *source);

/* Like raw_connect_from, but returns -1 instead of failing when the server refuses or
 * resets at once. */
int raw_try_connect_from(struct server *server, const char *source);

/* Sends request (len bytes) on a new connection and reads until the server closes it or
 * wait_ms pass without a byte. The response is checked against the spec for method and
 * target (unless method is NULL). */
void raw_exchange_wait(struct server *server, const char *method, const char *target,
                       const char *request, size_t len, int wait_ms, struct raw_response *ret);

/* raw_exchange_wait with 5 s. */
void raw_exchange(struct server *server, const char *method, const char *target,
                  const char *request, size_t len, struct raw_response *ret);

/* raw_exchange of a NUL-terminated request. */
void raw_text(struct server *server, const char *method, const char *target,
              const char *request, struct raw_response *ret);

/* The error code of a JSON error body, into buf ("" when there is none). */
const char *raw_error_code(const struct raw_response *r, char *buf, size_t len);

/* Asserts the JSON error (status, code) of a raw response. */
void assert_raw_error(const struct raw_response *r, long status, const char *code);

/* How many status lines ("HTTP/1.x NNN ") the response text holds. */
size_t raw_status_lines(const struct raw_response *r);

/* True when the server has closed fd: end of stream or a reset (poll waits up to
 * wait_ms). Anything the server sent before is read and dropped. */
bool raw_closed_by_server(int fd, int wait_ms);

/* The value of opforge_limit_trips_total{limit="limit"} in /metrics, -1 when absent. */
long raw_limit_trips(struct server *server, const char *limit);

/* Monotonic milliseconds. */
long raw_ms_now(void);

#endif
