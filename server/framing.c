/* Request framing and head syntax (see framing.h).
 *
 * libmicrohttpd 0.9.75 keeps the request head in one buffer, overwrites each line end
 * (CRLF, or a bare LF, which it accepts) and each header's colon with NUL bytes, and
 * hands out pointers into that buffer, measuring names and values with strlen. So the
 * head's shape can be read back from the pointers: in a sound head each name starts 2
 * bytes (CR LF) after the previous line's value ends, and the head ends 4 bytes (CR LF
 * CR LF) after the last value. One byte there is a bare LF; more are bytes a NUL hid
 * from strlen. A folded line is the one thing the library moves out of the buffer (it
 * appends the continuation to a copy), so a field outside the head was folded. */
#include "server/framing.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 token characters. */
static bool is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool is_token(const char *s, size_t n) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!is_tchar((unsigned char)s[i]))
      return false;
  return true;
}

/* True when value holds a control character other than HT (CR and DEL included). */
static bool has_control(const char *value, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)value[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f)
      return true;
  }
  return false;
}

/* value without leading and trailing blanks (SP, HT): *ret_len bytes from the result. */
static const char *trimmed(const char *value, size_t n, size_t *ret_len) {
  while (n && (*value == ' ' || *value == '\t'))
    value++, n--;
  while (n && (value[n - 1] == ' ' || value[n - 1] == '\t'))
    n--;
  *ret_len = n;
  return value;
}

static bool name_is(const struct framing_field *f, const char *name) {
  return f->name_len == strlen(name) && strncasecmp(f->name, name, f->name_len) == 0;
}

/* Fills ret with a fault; returns false (so callers can return it). */
static bool refuse(struct framing_verdict *ret, enum framing_fault fault, const char *field,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool refuse(struct framing_verdict *ret, enum framing_fault fault, const char *field,
                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ret->fault = fault;
  ret->field = field;
  vsnprintf(ret->message, sizeof ret->message, fmt, ap);
  va_end(ap);
  return false;
}

/* METHOD SP target SP version, one space each: the library skips extra spaces and
 * takes a target up to the last space, and a NUL byte cuts it short for strlen. */
static bool check_request_line(const struct framing_head *h, struct framing_verdict *ret) {
  if (!h->target || !h->version_start || h->version_start <= h->target)
    return true;
  size_t span = (size_t)(h->version_start - 1 - h->target);
  if (h->target_seen < span)
    return refuse(ret, FRAMING_REQUEST_LINE, NULL, "the request target holds a NUL byte");
  if (h->target_blank || h->target != h->start + strlen(h->start) + 1)
    return refuse(ret, FRAMING_REQUEST_LINE, NULL,
                  "the request line must be METHOD SP target SP version, with no blank or "
                  "control character in the target");
  return true;
}

/* The bytes of each line, read from the layout (see the file comment). */
static bool check_layout(const struct framing_head *h, struct framing_verdict *ret) {
  const char *prev_end = h->line_end;
  const char *prev_name = NULL;
  for (size_t i = 0; i < h->n_fields; i++) {
    const struct framing_field *f = &h->fields[i];
    const char *f_end = f->value ? f->value + f->value_len : f->name + f->name_len;
    if (!f->name || f->name < h->start || f_end > h->end || f->name < prev_end ||
        (f->value && f->value < f->name))
      return refuse(ret, FRAMING_FOLD, NULL,
                    "a header line is folded onto the next (obsolete line folding)");
    if (strlen(f->name) != f->name_len || (f->value && strlen(f->value) != f->value_len))
      return refuse(ret, FRAMING_NUL, f->name_len ? f->name : NULL,
                    "a header line holds a NUL byte");
    size_t gap = (size_t)(f->name - prev_end);
    if (gap == 1)
      return refuse(ret, FRAMING_BARE_LF, NULL, "a line of the request head ends in a bare LF "
                                                "(lines end in CR LF)");
    if (gap != 2)
      return refuse(ret, FRAMING_NUL, prev_name,
                    prev_name ? "a header line holds a NUL byte"
                              : "the request line holds a NUL byte");
    prev_end = f_end;
    prev_name = f->name_len ? f->name : NULL;
  }
  size_t tail = h->end >= prev_end ? (size_t)(h->end - prev_end) : 0;
  if (tail == 2 || tail == 3)
    return refuse(ret, FRAMING_BARE_LF, NULL, "a line of the request head ends in a bare LF "
                                              "(lines end in CR LF)");
  if (tail != 4)
    return refuse(ret, FRAMING_NUL, prev_name,
                  prev_name ? "a header line holds a NUL byte"
                            : "the request line holds a NUL byte");
  return true;
}

/* Names that are tokens, values without control characters. */
static bool check_fields(const struct framing_head *h, struct framing_verdict *ret) {
  for (size_t i = 0; i < h->n_fields; i++) {
    const struct framing_field *f = &h->fields[i];
    if (!is_token(f->name, f->name_len))
      return refuse(ret, FRAMING_NAME, NULL,
                    "header name '%.60s' is not a token (no space before the colon)",
                    f->name);
    if (f->value && has_control(f->value, f->value_len))
      return refuse(ret, FRAMING_VALUE, f->name, "header %.60s holds a control character",
                    f->name);
  }
  return true;
}

/* Host once (and present in HTTP/1.1); the body framed one way only. */
static bool check_framing(const struct framing_head *h, struct framing_verdict *ret) {
  const struct framing_field *length = NULL, *coding = NULL;
  size_t hosts = 0, lengths = 0, codings = 0;
  for (size_t i = 0; i < h->n_fields; i++) {
    const struct framing_field *f = &h->fields[i];
    hosts += name_is(f, "Host");
    if (name_is(f, "Content-Length"))
      lengths++, length = length ? length : f;
    if (name_is(f, "Transfer-Encoding"))
      codings++, coding = coding ? coding : f;
  }
  if (hosts > 1)
    return refuse(ret, FRAMING_DUP_HOST, "Host", "the request has %zu Host headers", hosts);
  if (hosts == 0 && h->http11)
    return refuse(ret, FRAMING_NO_HOST, "Host", "an HTTP/1.1 request must have a Host header");
  if (coding && length)
    return refuse(ret, FRAMING_LENGTH_AND_TE, "Transfer-Encoding",
                  "Content-Length and Transfer-Encoding together frame the body two ways");
  if (coding) {
    size_t n;
    const char *v = trimmed(coding->value ? coding->value : "", coding->value_len, &n);
    if (codings > 1 || !h->http11 || n != 7 || strncasecmp(v, "chunked", 7) != 0)
      return refuse(ret, FRAMING_CODING, "Transfer-Encoding",
                    "the only transfer coding taken is one 'chunked' (HTTP/1.1)");
  }
  if (lengths > 1)
    return refuse(ret, FRAMING_DUP_LENGTH, "Content-Length",
                  "the request has %zu Content-Length headers", lengths);
  if (length) {
    size_t n;
    const char *v = trimmed(length->value ? length->value : "", length->value_len, &n);
    if (n == 0 || n > 19 || strspn(v, "0123456789") < n)
      return refuse(ret, FRAMING_BAD_LENGTH, "Content-Length",
                    "Content-Length must be a decimal number below 10^19");
  }
  return true;
}

bool framing_check(const struct framing_head *h, struct framing_verdict *ret) {
  *ret = (struct framing_verdict){.fault = FRAMING_OK};
  return check_request_line(h, ret) && check_layout(h, ret) && check_fields(h, ret) &&
         check_framing(h, ret);
}

void framing_measure_target(const char *uri, size_t *ret_len, bool *ret_blank) {
  size_t n = strlen(uri);
  bool blank = false;
  for (size_t i = 0; i < n && !blank; i++)
    blank = (unsigned char)uri[i] <= 0x20 || uri[i] == 0x7f;
  *ret_len = n;
  *ret_blank = blank;
}

/* The fields of a request being collected. */
struct collected {
  struct framing_field *fields;
  size_t n, cap;
  bool failed;
};

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key,
                               size_t key_size, const char *value, size_t value_size) {
  (void)kind;
  struct collected *c = cls;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 32;
    struct framing_field *grown = realloc(c->fields, cap * sizeof *grown);
    if (!grown) {
      c->failed = true;
      return MHD_NO;
    }
    c->fields = grown;
    c->cap = cap;
  }
  c->fields[c->n++] = (struct framing_field){key, key_size, value, value_size};
  return MHD_YES;
}

bool framing_check_request(struct MHD_Connection *conn, const char *method, const char *url,
                           const char *version, size_t target_seen, bool target_blank,
                           struct framing_verdict *ret) {
  *ret = (struct framing_verdict){.fault = FRAMING_OK};
  const union MHD_ConnectionInfo *size =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  if (!size || !method || !version || !*version)
    return true;
  struct collected c = {0};
  MHD_get_connection_values_n(conn, MHD_HEADER_KIND, collect, &c);
  if (c.failed) {
    free(c.fields);
    return true;
  }
  struct framing_head head = {
    .start = method,
    .line_end = version + strlen(version),
    .end = method + size->header_size,
    .target = url,
    .target_seen = target_seen,
    .target_blank = target_blank,
    .version_start = version,
    .http11 = strcmp(version, MHD_HTTP_VERSION_1_1) == 0,
    .fields = c.fields,
    .n_fields = c.n,
  };
  bool ok = framing_check(&head, ret);
  free(c.fields);
  return ok;
}
