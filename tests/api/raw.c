/* Raw HTTP exchanges for the API tests (see raw.h). */
#include "tests/api/raw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

void raw_response_clear(struct raw_response *r) {
  free(r->text);
  free(r->header_copy);
  memset(r, 0, sizeof *r);
}

uint16_t raw_server_port(struct server *server) {
  const char *colon = strrchr(server_url(server), ':');
  assert_non_null(colon);
  return (uint16_t)strtol(colon + 1, NULL, 10);
}

int raw_try_connect_from(struct server *server, const char *source) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(raw_server_port(server))};
  struct sockaddr_in from = {.sin_family = AF_INET};
  assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr), 1);
  assert_int_equal(inet_pton(AF_INET, source ? source : "127.0.0.1", &from.sin_addr), 1);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof from), 0);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int raw_connect_from(struct server *server, const char *source) {
  int fd = raw_try_connect_from(server, source);
  if (fd < 0)
    print_error("connect from %s: %s\n", source ? source : "127.0.0.1", strerror(errno));
  assert_true(fd >= 0);
  return fd;
}

/* Splits r->text into status, headers and body. */
static void parse_raw(struct raw_response *r) {
  r->status = strncmp(r->text, "HTTP/1.", 7) == 0 ? strtol(r->text + 9, NULL, 10) : -1;
  const char *end = strstr(r->text, "\r\n\r\n");
  size_t head = end ? (size_t)(end - r->text) : r->len;
  r->header_copy = strndup(r->text, head);
  assert_non_null(r->header_copy);
  char *save = NULL;
  char *line = strtok_r(r->header_copy, "\r\n", &save); /* the status line */
  while ((line = strtok_r(NULL, "\r\n", &save)) && r->n_headers < 64) {
    char *colon = strchr(line, ':');
    if (!colon)
      continue;
    *colon = '\0';
    char *value = colon + 1;
    while (*value == ' ')
      value++;
    r->headers[r->n_headers++] = (struct spec_header){.name = line, .value = value};
  }
  r->body = end ? end + 4 : r->text + r->len;
  r->body_len = (size_t)(r->text + r->len - r->body);
  for (size_t i = 0; i < r->n_headers; i++)
    if (strcasecmp(r->headers[i].name, "Content-Length") == 0) {
      size_t n = (size_t)strtoul(r->headers[i].value, NULL, 10);
      if (n < r->body_len)
        r->body_len = n;
    }
}

/* Reads fd into r->text until the server closes it or wait_ms pass without a byte. */
static void read_all(int fd, int wait_ms, struct raw_response *r) {
  size_t cap = 65536;
  r->text = malloc(cap + 1);
  assert_non_null(r->text);
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) <= 0)
      break;
    ssize_t n = recv(fd, r->text + r->len, cap - r->len, 0);
    if (n <= 0) {
      r->closed = true;
      break;
    }
    r->len += (size_t)n;
    if (r->len == cap)
      break;
  }
  r->text[r->len] = '\0';
}

void raw_exchange_wait(struct server *server, const char *method, const char *target,
                       const char *request, size_t len, int wait_ms, struct raw_response *ret) {
  memset(ret, 0, sizeof *ret);
  int fd = raw_connect_from(server, NULL);
  size_t sent = 0;
  while (sent < len) {
    ssize_t n = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break; /* the server may answer and close before it has read everything */
    sent += (size_t)n;
  }
  read_all(fd, wait_ms, ret);
  close(fd);
  parse_raw(ret);
  if (!method)
    return;
  struct spec_exchange ex = {.method = method, .target = target, .status = ret->status,
                             .headers = ret->headers, .n_headers = ret->n_headers,
                             .body = ret->body, .body_len = ret->body_len};
  char err[2048];
  if (spec_check_response(harness_spec(), &ex, err, sizeof err) != 0) {
    print_error("%s %s: spec violation: %s\n  response: %.600s\n", method, target, err,
                ret->text);
    fail();
  }
}

void raw_exchange(struct server *server, const char *method, const char *target,
                  const char *request, size_t len, struct raw_response *ret) {
  raw_exchange_wait(server, method, target, request, len, 5000, ret);
}

void raw_text(struct server *server, const char *method, const char *target,
              const char *request, struct raw_response *ret) {
  raw_exchange(server, method, target, request, strlen(request), ret);
}

const char *raw_error_code(const struct raw_response *r, char *buf, size_t len) {
  json_t *doc = json_loadb(r->body, r->body_len, 0, NULL);
  const char *code = json_string_value(json_object_get(json_object_get(doc, "error"), "code"));
  snprintf(buf, len, "%s", code ? code : "");
  json_decref(doc);
  return buf;
}

void assert_raw_error(const struct raw_response *r, long status, const char *code) {
  char got[64];
  if (r->status != status || strcmp(raw_error_code(r, got, sizeof got), code) != 0)
    print_error("want %ld %s, got: %.500s\n", status, code, r->text);
  assert_int_equal(r->status, status);
  assert_string_equal(got, code);
}

size_t raw_status_lines(const struct raw_response *r) {
  size_t n = 0;
  for (const char *p = r->text; (p = strstr(p, "HTTP/1.")); p += 7)
    n += (p == r->text || p[-1] == '\n') && p[8] == ' ';
  return n;
}

bool raw_closed_by_server(int fd, int wait_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, wait_ms) <= 0)
    return false;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
      return true;
    if (n < 0)
      return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
  }
}

long raw_limit_trips(struct server *server, const char *limit) {
  struct http_response *r = http_get(server, "/metrics");
  char key[128];
  snprintf(key, sizeof key, "opforge_limit_trips_total{limit=\"%s\"} ", limit);
  const char *at = r->body ? strstr(r->body, key) : NULL;
  long n = at ? strtol(at + strlen(key), NULL, 10) : -1;
  http_response_free(r);
  return n;
}

long raw_ms_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}
