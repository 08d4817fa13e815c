/* The OpenAI-compatible chat client (see client.h). */
#include "proposers/llm/client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "proposers/llm/slots.h"

struct llm_client {
  struct llm_settings s;         /* a copy; s.key is wiped in llm_client_free */
  const struct llm_clock *clock; /* borrowed */
  CURL *easy;
  struct curl_slist *headers;    /* holds the Authorization line: secret */
  char url[LLM_URL_MAX + 32];
  uint64_t rng;                  /* jitter */
};

/* What one HTTP attempt gave. */
struct attempt {
  CURLcode cc;
  long status;
  char *body;                    /* owned; NUL-terminated */
  size_t len, cap, max;
  bool too_large;
  long retry_after_ms;           /* -1 when absent */
  time_t now;
  double ms;
  char curl_error[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

/* libcurl is initialized once for the process and never cleaned up: workers come and
 * go, and curl_global_cleanup is not safe while another thread may use libcurl. */
static void curl_init_once(void) {
  curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void llm_redact(char *text, const char *key) {
  size_t klen = key ? strlen(key) : 0;
  if (klen < 8)
    return;
  static const char mark[] = "[redacted]";
  char *out = text;
  for (const char *p = text; *p;) {
    size_t best = 0;
    for (size_t j = 0; j < klen && best < klen; j++) {
      size_t m = 0;
      while (p[m] && j + m < klen && p[m] == key[j + m])
        m++;
      if (m > best)
        best = m;
    }
    if (best >= 8) {
      /* The mark is 10 bytes; only write it where the match is at least as long, so the
       * text never grows (a shorter match becomes a prefix of the mark). */
      size_t w = best < sizeof mark - 1 ? best : sizeof mark - 1;
      memmove(out, mark, w);
      out += w;
      p += best;
    } else {
      *out++ = *p++;
    }
  }
  *out = '\0';
}

/* Fills err; the message is scrubbed of the key. */
__attribute__((format(printf, 4, 5))) static int fail(const struct llm_client *c,
                                                       struct llm_error *err, const char *cls,
                                                       const char *fmt, ...) {
  snprintf(err->cls, sizeof err->cls, "%s", cls);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  llm_redact(err->message, c->s.key);
  return -1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg) {
  struct attempt *a = arg;
  size_t n = size * nmemb;
  if (n > a->max - a->len) {
    a->too_large = true;
    return 0;  /* aborts the transfer (CURLE_WRITE_ERROR) */
  }
  if (a->len + n + 1 > a->cap) {
    size_t want = a->cap ? a->cap : 16384;
    while (want < a->len + n + 1)
      want *= 2;
    char *grown = realloc(a->body, want);
    if (!grown)
      return 0;
    a->body = grown;
    a->cap = want;
  }
  memcpy(a->body + a->len, data, n);
  a->len += n;
  a->body[a->len] = '\0';
  return n;
}

/* Reads Retry-After and refuses, before reading it, a body announced larger than the cap. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *arg) {
  struct attempt *a = arg;
  size_t n = size * nmemb;
  char line[256];
  if (n >= sizeof line)
    return n;
  memcpy(line, data, n);
  line[n] = '\0';
  line[strcspn(line, "\r\n")] = '\0';
  if (strncasecmp(line, "HTTP/", 5) == 0) {
    a->retry_after_ms = -1;  /* a new response (after a 100 Continue) */
  } else if (strncasecmp(line, "Retry-After:", 12) == 0) {
    long ms;
    if (llm_parse_retry_after(line + 12, a->now, &ms) == 0)
      a->retry_after_ms = ms;
  } else if (strncasecmp(line, "Content-Length:", 15) == 0) {
    char *end = NULL;
    unsigned long long len = strtoull(line + 15, &end, 10);
    if (end != line + 15 && len > a->max) {
      a->too_large = true;
      return 0;
    }
  }
  return n;
}

int llm_client_new(const struct llm_settings *settings, const struct llm_clock *clock,
                   struct llm_client **ret_client) {
  pthread_once(&curl_once, curl_init_once);
  if (curl_init_rc != CURLE_OK || !settings->base_url[0])
    return -1;
  struct llm_client *c = calloc(1, sizeof *c);
  if (!c)
    return -1;
  c->s = *settings;
  c->clock = clock ? clock : llm_clock_real();
  c->rng = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)c;
  snprintf(c->url, sizeof c->url, "%s/chat/completions", c->s.base_url);
  c->easy = curl_easy_init();
  struct curl_slist *h = c->easy ? curl_slist_append(NULL, "Content-Type: application/json")
                                 : NULL;
  struct curl_slist *h2 = h ? curl_slist_append(h, "Accept: application/json") : NULL;
  c->headers = h2 ? h2 : h;
  if (h2 && c->s.key[0]) {
    char auth[LLM_KEY_MAX + 32];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->s.key);
    struct curl_slist *h3 = curl_slist_append(c->headers, auth);
    memset(auth, 0, sizeof auth);
    h2 = h3;
    if (h3)
      c->headers = h3;
  }
  if (!h2) {
    llm_client_free(c);
    return -1;
  }
  *ret_client = c;
  return 0;
}

void llm_client_free(struct llm_client *c) {
  if (!c)
    return;
  /* The Authorization line lives in the list's own copy; wipe it before freeing. */
  for (struct curl_slist *h = c->headers; h; h = h->next)
    if (h->data)
      memset(h->data, 0, strlen(h->data));
  curl_slist_free_all(c->headers);
  if (c->easy)
    curl_easy_cleanup(c->easy);
  memset(c->s.key, 0, sizeof c->s.key);
  free(c);
}

void llm_reply_clear(struct llm_reply *reply) {
  free(reply->content);
  memset(reply, 0, sizeof *reply);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One POST of body; fills *a (the caller frees a->body). */
static void perform(struct llm_client *c, const char *body, struct attempt *a) {
  *a = (struct attempt){.retry_after_ms = -1, .max = c->s.max_response_bytes,
                        .now = c->clock->now(c->clock->ctx)};
  CURL *e = c->easy;
  curl_easy_reset(e);
  curl_easy_setopt(e, CURLOPT_URL, c->url);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->s.connect_timeout_s * 1000L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->s.timeout_s * 1000L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, a);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, a->curl_error);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "opforge-llm/1");
  double t0 = now_ms();
  int slot = llm_slot_acquire(c->s.base_url, c->s.concurrency);
  a->cc = curl_easy_perform(e);
  if (slot == 0)
    llm_slot_release(c->s.base_url);
  a->ms = now_ms() - t0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &a->status);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
}

/* The endpoint's own words from an error body: error.message, error (a string) or
 * message; else the start of the body, printable characters only. */
static void endpoint_message(const struct attempt *a, char *out, size_t len) {
  json_t *doc = a->body ? json_loadb(a->body, a->len, 0, NULL) : NULL;
  json_t *e = json_object_get(doc, "error");
  const char *m = json_string_value(json_object_get(e, "message"));
  if (!m)
    m = json_string_value(e);
  if (!m)
    m = json_string_value(json_object_get(doc, "message"));
  if (!m && !doc && a->body)
    m = a->body;
  snprintf(out, len, "%s", m ? m : "(no message)");
  json_decref(doc);
  for (char *p = out; *p; p++)
    if ((unsigned char)*p < ' ' || (unsigned char)*p > '~')
      *p = ' ';
  if (strlen(out) > 300)
    snprintf(out + 297, len - 297, "...");
}

/* Reads a 2xx body into *ret; -1 with err when it is not a chat completion. */
static int read_completion(struct llm_client *c, const struct attempt *a,
                           const struct llm_request *req, struct llm_reply *ret,
                           struct llm_error *err) {
  json_error_t jerr;
  json_t *doc = a->body ? json_loadb(a->body, a->len, 0, &jerr) : NULL;
  json_t *choice = json_array_get(json_object_get(doc, "choices"), 0);
  json_t *content = json_object_get(json_object_get(choice, "message"), "content");
  if (!json_is_string(content)) {
    json_decref(doc);
    return fail(c, err, "parse/llm_bad_response",
                "the endpoint's answer is not a chat completion with a text message "
                "(choices[0].message.content)%s", doc ? "" : ": not JSON");
  }
  *ret = (struct llm_reply){.latency_ms = a->ms};
  if (!(ret->content = strdup(json_string_value(content)))) {
    json_decref(doc);
    return fail(c, err, "parse/llm_bad_response", "out of memory reading the answer");
  }
  const char *model = json_string_value(json_object_get(doc, "model"));
  snprintf(ret->model, sizeof ret->model, "%s", model ? model : req->model);
  const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
  ret->truncated = finish && strcmp(finish, "length") == 0;
  json_t *usage = json_object_get(doc, "usage");
  json_t *pt = json_object_get(usage, "prompt_tokens");
  json_t *ct = json_object_get(usage, "completion_tokens");
  if (json_is_integer(pt) && json_is_integer(ct) && json_integer_value(pt) >= 0 &&
      json_integer_value(ct) >= 0) {
    ret->prompt_tokens = json_integer_value(pt);
    ret->completion_tokens = json_integer_value(ct);
  } else {
    size_t sent = strlen(req->user) + (req->system ? strlen(req->system) : 0);
    ret->prompt_tokens = (long long)(sent / 4 + 1);
    ret->completion_tokens = (long long)(strlen(ret->content) / 4 + 1);
    ret->usage_estimated = true;
  }
  json_decref(doc);
  return 0;
}

/* The request body (caller frees), or NULL when out of memory. */
static char *request_body(const struct llm_request *req) {
  json_t *messages = json_array();
  if (req->system)
    json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "system", "content",
                                              req->system));
  json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "user", "content", req->user));
  json_t *body = json_pack("{s:s, s:o, s:f, s:i, s:b}", "model", req->model, "messages",
                           messages, "temperature", req->temperature, "max_tokens",
                           req->max_tokens, "stream", 0);
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  return text;
}

/* Turns a failed attempt into err; returns whether it is worth retrying. */
static bool classify(struct llm_client *c, const struct attempt *a, unsigned tries,
                     struct llm_error *err) {
  char said[320];
  err->http_status = a->status;
  if (a->too_large) {
    fail(c, err, "parse/llm_too_large",
         "the endpoint's answer exceeded %zu bytes (--llm-max-response); it was aborted",
         c->s.max_response_bytes);
    return false;
  }
  if (a->cc == CURLE_OPERATION_TIMEDOUT) {
    fail(c, err, "parse/llm_timeout", "no complete answer within %u s (--llm-timeout) in %u "
         "attempt(s)", c->s.timeout_s, tries);
    return true;
  }
  if (a->cc != CURLE_OK) {
    fail(c, err, "parse/llm_transport", "cannot reach the endpoint %s in %u attempt(s): %s",
         c->s.base_url, tries, a->curl_error[0] ? a->curl_error : curl_easy_strerror(a->cc));
    return true;
  }
  endpoint_message(a, said, sizeof said);
  if (a->status == 429) {
    fail(c, err, "parse/llm_rate_limited", "the endpoint answered 429 (rate limited) %u "
         "time(s): %s", tries, said);
    return true;
  }
  if (a->status >= 500) {
    fail(c, err, "parse/llm_server_error", "the endpoint answered %ld in %u attempt(s): %s",
         a->status, tries, said);
    return true;
  }
  char cls[40];
  snprintf(cls, sizeof cls, "parse/llm_http_%ld", a->status);
  fail(c, err, cls, "the endpoint refused the request with %ld: %s", a->status, said);
  return false;
}

int llm_chat(struct llm_client *c, const struct llm_request *req, struct llm_reply *ret,
             struct llm_error *err) {
  *err = (struct llm_error){0};
  char *body = request_body(req);
  if (!body)
    return fail(c, err, "parse/llm_bad_response", "out of memory building the request");
  struct llm_retry_policy policy = {c->s.retries, c->s.backoff_ms, c->s.max_backoff_ms,
                                    c->s.max_wait_s * 1000u};
  int rc = -1;
  for (unsigned attempt = 0;; attempt++) {
    struct attempt a;
    perform(c, body, &a);
    if (a.cc == CURLE_OK && a.status >= 200 && a.status <= 299 && !a.too_large) {
      rc = read_completion(c, &a, req, ret, err);
      if (rc == 0)
        ret->attempts = attempt + 1;
      free(a.body);
      break;
    }
    bool again = classify(c, &a, attempt + 1, err);
    free(a.body);
    long delay = again ? llm_retry_delay_ms(&policy, attempt, a.retry_after_ms, &c->rng) : -1;
    if (delay < 0) {
      if (again && a.retry_after_ms > (long)policy.max_wait_ms) {
        size_t used = strlen(err->message);
        snprintf(err->message + used, sizeof err->message - used,
                 "; it asks to wait %ld s, more than --llm-max-wait %u s",
                 a.retry_after_ms / 1000, c->s.max_wait_s);
      }
      break;
    }
    c->clock->sleep_ms(c->clock->ctx, delay);
  }
  free(body);
  return rc;
}
