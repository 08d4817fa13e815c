/* Body intake: a small state machine that enforces the body cap while reading. */
#include "server/body.h"

#include <errno.h>
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

json_t *body_parse_object(struct request *req, enum MHD_Result *ret_result) {
  if (req->body_state == BODY_NOMEM) {
    *ret_result = reply_error(req, API_ERR_INTERNAL, NULL, "out of memory reading the body");
    return NULL;
  }
  json_error_t jerr;
  json_t *root = req->body_len
                     ? json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr)
                     : NULL;
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
  return root;
}
