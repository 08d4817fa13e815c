/* Body intake: a small state machine that enforces the body cap while reading. */
#include "server/body.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/reply.h"

static _Thread_local int fail_countdown = -1;

void body_fail_after(int n) { fail_countdown = n; }

/* realloc that honours the fault-injection countdown. */
static void *body_realloc(void *p, size_t size) {
  if (fail_countdown >= 0 && fail_countdown-- == 0)
    return NULL;
  return realloc(p, size);
}

bool body_length_allowed(const char *content_length, size_t cap) {
  if (!content_length)
    return true;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(content_length, &end, 10);
  if (end == content_length)
    return true;  /* MHD rejects malformed lengths itself */
  return !(errno == ERANGE || v > cap);
}

void body_append(struct request *req, const char *data, size_t len, size_t cap) {
  if (req->body_state != BODY_READING)
    return;
  if (len > cap - req->body_len || req->body_len + len > cap) {
    req->body_state = BODY_OVERFLOW;
    return;
  }
  if (req->body_len + len + 1 > req->body_cap) {
    size_t want = req->body_cap ? req->body_cap : 4096;
    while (want < req->body_len + len + 1)
      want *= 2;
    if (want > cap + 1)
      want = cap + 1;
    char *grown = body_realloc(req->body, want);
    if (!grown) {
      req->body_state = BODY_NOMEM;
      return;
    }
    req->body = grown;
    req->body_cap = want;
  }
  memcpy(req->body + req->body_len, data, len);
  req->body_len += len;
  req->body[req->body_len] = '\0';
}

/* The length of the number token at p (RFC 8259 number syntax, loosely), and whether
 * it has a fraction or an exponent. */
static size_t number_token(const char *p, const char *end, bool *ret_real) {
  const char *q = p;
  *ret_real = false;
  if (q < end && *q == '-')
    q++;
  while (q < end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
                     *q == '+' || *q == '-')) {
    *ret_real |= *q == '.' || *q == 'e' || *q == 'E';
    q++;
  }
  return (size_t)(q - p);
}

/* True when the integer literal p[0..len) lies outside json_int_t (long long). */
static bool beyond_int64(const char *p, size_t len) {
  char digits[24];
  if (len >= sizeof digits)
    return true;
  memcpy(digits, p, len);
  digits[len] = '\0';
  errno = 0;
  (void)strtoll(digits, NULL, 10);
  return errno == ERANGE;
}

/* Walks the JSON text; calls on_wide(ctx, offset_after) for every integer literal
 * outside json_int_t that lies outside strings. Returns how many there were. */
static size_t find_wide_integers(const char *text, size_t len,
                                 void (*on_wide)(void *ctx, size_t end), void *ctx) {
  size_t count = 0;
  bool in_string = false;
  for (size_t i = 0; i < len;) {
    char c = text[i];
    if (in_string) {
      i += c == '\\' ? 2 : 1;
      in_string = c != '"';
    } else if (c == '"') {
      in_string = true;
      i++;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      bool real;
      size_t t = number_token(text + i, text + len, &real);
      if (!real && beyond_int64(text + i, t)) {
        count++;
        if (on_wide)
          on_wide(ctx, i + t);
      }
      i += t;
    } else {
      i++;
    }
  }
  return count;
}

struct widening {
  const char *text;
  char *out;
  size_t copied, n; /* input bytes copied so far; output length */
};

/* Copies the input up to end and appends ".0". */
static void widen_at(void *ctx, size_t end) {
  struct widening *w = ctx;
  memcpy(w->out + w->n, w->text + w->copied, end - w->copied);
  w->n += end - w->copied;
  memcpy(w->out + w->n, ".0", 2);
  w->n += 2;
  w->copied = end;
}

/* A copy of the JSON text in which every integer literal outside json_int_t (beyond
 * +-2^63) ends in ".0", so that Jansson reads it as the real number it is instead of
 * refusing it: JSON has one number type, and a field that takes a number must take it.
 * Fields that take an integer still refuse it (as a real). Caller frees; NULL when out
 * of memory. */
static char *widen_integers(const char *text, size_t len, size_t *ret_len) {
  size_t count = find_wide_integers(text, len, NULL, NULL);
  struct widening w = {.text = text, .out = body_realloc(NULL, len + 2 * count + 1)};
  if (!w.out)
    return NULL;
  find_wide_integers(text, len, widen_at, &w);
  memcpy(w.out + w.n, text + w.copied, len - w.copied);
  w.n += len - w.copied;
  w.out[w.n] = '\0';
  *ret_len = w.n;
  return w.out;
}

/* JSON Schema counts 5.0 as an integer (a number with no fraction), and so must every
 * field here that takes an integer: each real with no fraction that fits json_int_t
 * becomes that integer, in place. Numbers stay numbers; only their C type changes. */
static void integral_reals_to_integers(json_t *v) {
  size_t i;
  const char *key;
  json_t *item;
  void *tmp;
  if (json_is_array(v)) {
    json_array_foreach(v, i, item) {
      double x = json_is_real(item) ? json_real_value(item) : 0.5;
      if (x == trunc(x) && x >= -9223372036854775808.0 && x < 9223372036854775808.0)
        json_array_set_new(v, i, json_integer((json_int_t)x));
      else
        integral_reals_to_integers(item);
    }
  } else if (json_is_object(v)) {
    json_object_foreach_safe(v, tmp, key, item) {
      double x = json_is_real(item) ? json_real_value(item) : 0.5;
      if (x == trunc(x) && x >= -9223372036854775808.0 && x < 9223372036854775808.0)
        json_object_set_new(v, key, json_integer((json_int_t)x));
      else
        integral_reals_to_integers(item);
    }
  }
}

json_t *body_parse_object(struct request *req, enum MHD_Result *ret_result) {
  if (req->body_state == BODY_NOMEM) {
    *ret_result = reply_error(req, API_ERR_INTERNAL, NULL, "out of memory reading the body");
    return NULL;
  }
  json_error_t jerr;
  json_t *root = req->body_len
                     ? json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr)
                     : NULL;
  if (!root && req->body_len && json_error_code(&jerr) == json_error_numeric_overflow) {
    size_t wide_len = 0;
    char *wide = widen_integers(req->body, req->body_len, &wide_len);
    if (!wide) {
      *ret_result = reply_error(req, API_ERR_INTERNAL, NULL, "out of memory reading the body");
      return NULL;
    }
    root = json_loadb(wide, wide_len, JSON_REJECT_DUPLICATES, &jerr);
    free(wide);
  }
  if (!root && req->body_len && json_error_code(&jerr) == json_error_null_character) {
    *ret_result = reply_error(req, API_ERR_BAD_JSON, NULL,
                              "body is not valid here: strings must not contain U+0000 (NUL), "
                              "at line %d column %d", jerr.line, jerr.column);
    return NULL;
  }
  if (!root) {
    *ret_result = reply_error(req, API_ERR_BAD_JSON, NULL, "body is not valid JSON: %s",
                              req->body_len ? jerr.text : "empty body");
    return NULL;
  }
  if (!json_is_object(root)) {
    json_decref(root);
    *ret_result = reply_error(req, API_ERR_BAD_JSON, NULL, "body must be a JSON object");
    return NULL;
  }
  integral_reals_to_integers(root);
  return root;
}
