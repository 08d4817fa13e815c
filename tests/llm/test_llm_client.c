/* The LLM client and proposer against the scripted endpoint, with a fake clock for the
 * retry delays: answers, 429 with Retry-After (seconds and HTTP dates), 5xx, 4xx, a slow
 * answer past the timeout, an oversized answer, a broken body, a dead port, the concurrency
 * limit per endpoint, the key scrubbed from messages, usage and cost, the budget limit and
 * the task's llm options. Plus the pure retry policy and Retry-After parsing. */
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>

#include "proposers/llm/client.h"
#include "proposers/llm/retry.h"
#include "proposers/llm/slots.h"
#include "tests/common/child.h"
#include "tests/llm/llm_testlib.h"

#define KEY "sk-opforge-test-key-0123456789abcdef"

/* ---- a fake clock: a fixed now, and sleeps that only record ---- */

struct fake_clock {
  time_t now;
  long sleeps[16];
  size_t n;
};

static time_t fake_now(void *ctx) {
  return ((struct fake_clock *)ctx)->now;
}

static void fake_sleep(void *ctx, long ms) {
  struct fake_clock *c = ctx;
  if (c->n < 16)
    c->sleeps[c->n] = ms;
  c->n++;
}

/* ---- the pure policy ---- */

static void test_retry_delays(void **state) {
  (void)state;
  struct llm_retry_policy p = {.retries = 3, .backoff_ms = 100, .max_backoff_ms = 300,
                               .max_wait_ms = 5000};
  uint64_t rng = 42;
  long first = -1;
  bool varied = false;
  for (int i = 0; i < 200; i++) {
    long d0 = llm_retry_delay_ms(&p, 0, -1, &rng), d1 = llm_retry_delay_ms(&p, 1, -1, &rng);
    long d2 = llm_retry_delay_ms(&p, 2, -1, &rng);
    assert_true(d0 >= 50 && d0 <= 100);
    assert_true(d1 >= 100 && d1 <= 200);
    assert_true(d2 >= 150 && d2 <= 300); /* 400 capped at 300 */
    varied = varied || (first >= 0 && d0 != first);
    first = d0;
  }
  assert_true(varied);
  assert_int_equal(llm_retry_delay_ms(&p, 3, -1, &rng), -1);      /* retries used up */
  assert_int_equal(llm_retry_delay_ms(&p, 0, 2000, &rng), 2000);  /* Retry-After wins */
  assert_int_equal(llm_retry_delay_ms(&p, 0, 5001, &rng), -1);    /* longer than max_wait */
  assert_true(llm_status_retryable(429) && llm_status_retryable(500) &&
              llm_status_retryable(503) && !llm_status_retryable(400) &&
              !llm_status_retryable(401) && !llm_status_retryable(404));
}

static void test_retry_after_parse(void **state) {
  (void)state;
  long ms = -7;
  assert_int_equal(llm_parse_retry_after("120", 0, &ms), 0);
  assert_int_equal(ms, 120000);
  assert_int_equal(llm_parse_retry_after("  5 ", 0, &ms), 0);
  assert_int_equal(ms, 5000);
  time_t date = 1445412480; /* Wed, 21 Oct 2015 07:28:00 GMT */
  assert_int_equal(llm_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", date - 30, &ms), 0);
  assert_int_equal(ms, 30000);
  assert_int_equal(llm_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", date + 30, &ms), 0);
  assert_int_equal(ms, 0);
  assert_int_equal(llm_parse_retry_after("soon", 0, &ms), -1);
  assert_int_equal(llm_parse_retry_after("-1", 0, &ms), -1);
  assert_int_equal(llm_parse_retry_after("", 0, &ms), -1);
  assert_int_equal(llm_parse_retry_after("1.5", 0, &ms), -1);
  assert_int_equal(llm_parse_retry_after("Wed, 21 Oct 2015 07:28:00", 0, &ms), -1);
}

static void test_redact(void **state) {
  (void)state;
  char text[200];
  snprintf(text, sizeof text, "Incorrect API key provided: %s. Also %.14s and sk-ope.", KEY, KEY);
  llm_redact(text, KEY);
  assert_null(strstr(text, KEY));
  assert_null(strstr(text, "sk-opforge-tes"));
  assert_non_null(strstr(text, "[redacted]"));
  assert_non_null(strstr(text, "and sk-ope."));  /* 6 characters in common stay */
  snprintf(text, sizeof text, "key abcd");
  llm_redact(text, "abcd");  /* a key under 8 characters is not searched for */
  assert_string_equal(text, "key abcd");
}

/* ---- the client against the scripted endpoint ---- */

static const char *chat_script(const char *replies) {
  static char buf[8192];
  snprintf(buf, sizeof buf, "{\"key\": \"" KEY "\", \"rules\": [{\"replies\": [%s]}]}", replies);
  return buf;
}

/* Runs one chat against a new endpoint with the script; fills *ret_rc, the reply or the
 * error, the clock, and the requests the endpoint saw (caller owns). */
struct chat_run {
  int rc;
  struct llm_reply reply;
  struct llm_error err;
  struct fake_clock clock;
  json_t *requests;
};

static void run_chat(const char *script, void (*tune)(struct llm_settings *), struct chat_run *r) {
  struct scripted_llm s;
  scripted_llm_start(script, &s);
  struct llm_settings set;
  scripted_llm_settings(&s, &set);
  snprintf(set.key, sizeof set.key, "%s", KEY);
  set.retries = 2;
  if (tune)
    tune(&set);
  memset(r, 0, sizeof *r);
  r->clock.now = 1445412480 - 2;
  struct llm_clock clock = {fake_now, fake_sleep, &r->clock};
  struct llm_client *c = NULL;
  assert_int_equal(llm_client_new(&set, &clock, &c), 0);
  struct llm_request req = {"scripted-model", "system text", "user text", 0.3, 777};
  r->rc = llm_chat(c, &req, &r->reply, &r->err);
  llm_client_free(c);
  r->requests = scripted_llm_requests(&s);
  scripted_llm_stop(&s);
}

static void chat_run_clear(struct chat_run *r) {
  llm_reply_clear(&r->reply);
  json_decref(r->requests);
}

static void expect_error(const struct chat_run *r, const char *cls, const char *needle) {
  if (r->rc == 0)
    fail_msg("the chat succeeded; want %s", cls);
  if (strcmp(r->err.cls, cls) != 0)
    fail_msg("class %s (%s); want %s", r->err.cls, r->err.message, cls);
  if (needle && !strstr(r->err.message, needle))
    fail_msg("message '%s' lacks '%s'", r->err.message, needle);
  assert_null(strstr(r->err.message, KEY));
}

static void test_chat_ok(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"content\": \"hello {{n}}\", \"usage\": {\"prompt_tokens\": 11, "
                       "\"completion_tokens\": 7}}"), NULL, &r);
  assert_int_equal(r.rc, 0);
  assert_string_equal(r.reply.content, "hello 1");
  assert_string_equal(r.reply.model, "scripted-model");
  assert_int_equal(r.reply.prompt_tokens, 11);
  assert_int_equal(r.reply.completion_tokens, 7);
  assert_false(r.reply.usage_estimated);
  assert_int_equal(r.reply.attempts, 1);
  assert_int_equal(r.clock.n, 0);
  json_t *q = json_array_get(r.requests, 0);
  assert_int_equal(json_array_size(r.requests), 1);
  assert_string_equal(json_string_value(json_object_get(q, "auth")), "ok");
  assert_string_equal(json_string_value(json_object_get(q, "model")), "scripted-model");
  assert_true(json_real_value(json_object_get(q, "temperature")) == 0.3);
  assert_int_equal(json_integer_value(json_object_get(q, "max_tokens")), 777);
  assert_true(json_is_false(json_object_get(q, "stream")));
  json_t *m = json_object_get(q, "messages");
  assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "role")), "system");
  assert_string_equal(json_string_value(json_object_get(json_array_get(m, 1), "content")),
                      "user text");
  chat_run_clear(&r);
}

static void test_chat_429_retry_after(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"status\": 429, \"error\": \"slow down\", \"retry_after\": \"1\"},"
                       "{\"status\": 429, \"error\": \"slow down\", \"retry_after\": "
                       "\"Wed, 21 Oct 2015 07:28:00 GMT\"}, {\"content\": \"ok\"}"), NULL, &r);
  assert_int_equal(r.rc, 0);
  assert_int_equal(r.reply.attempts, 3);
  assert_int_equal(r.clock.n, 2);
  assert_int_equal(r.clock.sleeps[0], 1000);  /* Retry-After: 1 over a 5 ms backoff */
  assert_int_equal(r.clock.sleeps[1], 2000);  /* the date is 2 s after the fake now */
  assert_int_equal(json_array_size(r.requests), 3);
  chat_run_clear(&r);
}

static void test_chat_429_too_long_a_wait(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"status\": 429, \"error\": \"quota\", \"retry_after\": \"3600\"}"), NULL,
           &r);
  expect_error(&r, "parse/llm_rate_limited", "--llm-max-wait");
  assert_int_equal(json_array_size(r.requests), 1);
  assert_int_equal(r.clock.n, 0);
  chat_run_clear(&r);
}

static void test_chat_500(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"status\": 500, \"error\": \"overloaded\"}, {\"content\": \"fine\"}"),
           NULL, &r);
  assert_int_equal(r.rc, 0);
  assert_string_equal(r.reply.content, "fine");
  assert_int_equal(r.reply.attempts, 2);
  chat_run_clear(&r);
  run_chat(chat_script("{\"status\": 503, \"error\": \"overloaded\"}"), NULL, &r);
  expect_error(&r, "parse/llm_server_error", "overloaded");
  assert_non_null(strstr(r.err.message, "3 attempt(s)"));
  assert_int_equal(json_array_size(r.requests), 3);  /* 1 + 2 retries */
  assert_int_equal(r.clock.n, 2);
  assert_true(r.clock.sleeps[0] >= 2 && r.clock.sleeps[0] <= 5);
  assert_true(r.clock.sleeps[1] >= 5 && r.clock.sleeps[1] <= 10);
  chat_run_clear(&r);
}

static void test_chat_4xx_not_retried(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"status\": 400, \"error\": \"max_tokens is too large\"}"), NULL, &r);
  expect_error(&r, "parse/llm_http_400", "max_tokens is too large");
  assert_int_equal(json_array_size(r.requests), 1);
  chat_run_clear(&r);
}

static void wrong_key(struct llm_settings *s) {
  snprintf(s->key, sizeof s->key, "sk-wrong-key-that-leaks-987654321");
}

/* The endpoint quotes the key it got in its 401; the client scrubs it. */
static void test_chat_401_key_scrubbed(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"content\": \"never\"}"), wrong_key, &r);
  expect_error(&r, "parse/llm_http_401", "Incorrect API key provided");
  assert_null(strstr(r.err.message, "sk-wrong-key-that-leaks-987654321"));
  assert_null(strstr(r.err.message, "that-leaks"));
  assert_string_equal(json_string_value(json_object_get(json_array_get(r.requests, 0), "auth")),
                      "wrong");
  chat_run_clear(&r);
}

static void short_timeout(struct llm_settings *s) {
  s->timeout_s = 1;
  s->retries = 1;
}

static void test_chat_timeout(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"content\": \"late\", \"delay_ms\": 2500}"), short_timeout, &r);
  expect_error(&r, "parse/llm_timeout", "--llm-timeout");
  assert_int_equal(json_array_size(r.requests), 2);  /* retried once */
  chat_run_clear(&r);
}

static void test_chat_too_large(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"content\": \"\", \"pad_bytes\": 2000000}"), NULL, &r);
  expect_error(&r, "parse/llm_too_large", "1048576");
  assert_int_equal(json_array_size(r.requests), 1);  /* not retried */
  chat_run_clear(&r);
}

static void test_chat_bad_bodies(void **state) {
  (void)state;
  struct chat_run r;
  run_chat(chat_script("{\"raw\": \"<html>gateway</html>\"}"), NULL, &r);
  expect_error(&r, "parse/llm_bad_response", "not JSON");
  chat_run_clear(&r);
  run_chat(chat_script("{\"content\": \"abcdefgh\", \"usage\": null, \"finish_reason\": "
                       "\"length\"}"), NULL, &r);
  assert_int_equal(r.rc, 0);
  assert_true(r.reply.usage_estimated);
  assert_true(r.reply.truncated);
  assert_int_equal(r.reply.prompt_tokens, (long long)(strlen("user text") + strlen("system text")) / 4 + 1);
  assert_int_equal(r.reply.completion_tokens, 3);
  chat_run_clear(&r);
}

static void test_chat_dead_port(void **state) {
  (void)state;
  struct llm_settings set;
  llm_settings_defaults(&set);
  snprintf(set.base_url, sizeof set.base_url, "http://127.0.0.1:%d/v1", child_dead_port());
  snprintf(set.model, sizeof set.model, "m");
  set.retries = 3;
  struct fake_clock fc = {0};
  struct llm_clock clock = {fake_now, fake_sleep, &fc};
  struct llm_client *c = NULL;
  assert_int_equal(llm_client_new(&set, &clock, &c), 0);
  struct llm_request req = {"m", NULL, "hi", 0, 16};
  struct llm_reply reply;
  struct llm_error err;
  assert_int_equal(llm_chat(c, &req, &reply, &err), -1);
  assert_string_equal(err.cls, "parse/llm_transport");
  assert_non_null(strstr(err.message, "4 attempt(s)"));
  assert_int_equal(fc.n, 3);
  llm_client_free(c);
}

/* Four workers, each with its own client, share the endpoint's limit of 2. */
struct worker {
  const struct llm_settings *set;
  int rc;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct llm_client *c = NULL;
  if (llm_client_new(w->set, NULL, &c) != 0)
    return NULL;
  struct llm_request req = {"m", NULL, "hi", 0, 16};
  struct llm_reply reply;
  struct llm_error err;
  w->rc = llm_chat(c, &req, &reply, &err);
  if (w->rc == 0)
    llm_reply_clear(&reply);
  llm_client_free(c);
  return NULL;
}

static void test_concurrency_per_endpoint(void **state) {
  (void)state;
  struct scripted_llm s;
  scripted_llm_start("{\"rules\": [{\"replies\": [{\"content\": \"x\", \"delay_ms\": 400}]}]}", &s);
  struct llm_settings set;
  scripted_llm_settings(&s, &set);
  set.concurrency = 2;
  pthread_t t[4];
  struct worker w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (struct worker){&set, -1};
    assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].rc, 0);
  }
  json_t *reqs = scripted_llm_requests(&s);
  assert_int_equal(json_array_size(reqs), 4);
  json_int_t most = 0;
  size_t i;
  json_t *q;
  json_array_foreach(reqs, i, q) {
    json_int_t f = json_integer_value(json_object_get(q, "in_flight"));
    most = f > most ? f : most;
  }
  assert_int_equal(most, 2);
  json_decref(reqs);
  scripted_llm_stop(&s);
}

/* A second acquire of the slot at limit 1, in its own thread. */
static void *acquire_one(void *url) {
  llm_slot_acquire(url, 1);
  return NULL;
}

/* An endpoint's limit is the latest caller's: after 2 slots under limit 4 (the default),
 * a client at limit 1 holds one slot and a second caller at limit 1 waits until it is
 * released (with the first caller's limit kept, as before, both ran at once: the CI flake
 * of test_concurrency_per_endpoint when its scripted endpoint reused an earlier port). */
static void test_slot_limit_is_the_latest_callers(void **state) {
  (void)state;
  const char *url = "http://127.0.0.1:1/slot-test/v1";
  assert_int_equal(llm_slot_acquire(url, 4), 0);
  assert_int_equal(llm_slot_acquire(url, 4), 0);
  assert_int_equal(llm_slots_in_use(url), 2);
  llm_slot_release(url);
  llm_slot_release(url);
  assert_int_equal(llm_slot_acquire(url, 1), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, acquire_one, (void *)url), 0);
  struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL);
  assert_int_equal(llm_slots_in_use(url), 1); /* the thread waits */
  llm_slot_release(url);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(llm_slots_in_use(url), 1); /* now the thread's */
  llm_slot_release(url);
  assert_int_equal(llm_slots_in_use(url), 0);
}

/* ---- the proposer ---- */

#define GOOD_ANSWER                                                                          \
  "Fused.\\n```cuda\\nextern \\\"C\\\" __global__ void k(const float* x, const float* b, "    \
  "float* y) { /* {{n}} */ }\\n```\\n```json\\n{\\\"launches\\\": [{\\\"kernel\\\": \\\"k\\\", " \
  "\\\"grid\\\": [128], \\\"block\\\": [256], \\\"args\\\": [{\\\"tensor\\\": \\\"input:0\\\"}, " \
  "{\\\"tensor\\\": \\\"param:bias\\\"}, {\\\"tensor\\\": \\\"output:0\\\"}]}]}\\n```\\n"

struct prop_run {
  struct scripted_llm s;
  struct llm_settings set;
  struct proposer p;
  json_t *doc;
  struct proposal_request req;
  struct proposal_usage usage;
};

static void prop_start(const char *replies, const char *fixture, struct prop_run *r) {
  memset(r, 0, sizeof *r);
  scripted_llm_start(chat_script(replies), &r->s);
  scripted_llm_settings(&r->s, &r->set);
  snprintf(r->set.key, sizeof r->set.key, "%s", KEY);
  r->set.price_in = 0.5;
  r->set.price_out = 2.0;
  char why[256];
  assert_int_equal(proposer_llm_new(&r->set, &r->p, why, sizeof why), 0);
  r->doc = llm_fixture(fixture);
  llm_request_of(r->doc, &r->req);
  r->req.usage = &r->usage;
}

static void prop_stop(struct prop_run *r) {
  proposer_clear(&r->p);
  json_decref(r->doc);
  scripted_llm_stop(&r->s);
}

/* Proposes once (small or large); returns the candidate or NULL with *ret_failure. */
static json_t *propose(struct prop_run *r, bool small, json_t **ret_failure) {
  json_t *cand = NULL;
  *ret_failure = NULL;
  int rc = small ? r->p.propose_small(r->p.self, &r->req, &cand, ret_failure)
                 : r->p.propose_large(r->p.self, &r->req, &cand, ret_failure);
  assert_int_equal(rc == 0, cand != NULL);
  return cand;
}

static void expect_failure(json_t *failure, const char *cls) {
  assert_non_null(failure);
  assert_string_equal(json_string_value(json_object_get(failure, "stage")), "parse");
  if (strcmp(json_string_value(json_object_get(failure, "class")), cls) != 0)
    fail_msg("class %s (%s); want %s", json_string_value(json_object_get(failure, "class")),
             json_string_value(json_object_get(failure, "message")), cls);
}

static void test_proposer_large_usage_and_cost(void **state) {
  (void)state;
  struct prop_run r;
  prop_start("{\"content\": \"" GOOD_ANSWER "\", \"usage\": {\"prompt_tokens\": 1000000, "
             "\"completion_tokens\": 500000}}, {\"content\": \"I cannot help with that.\"}",
             "request_large_full.json", &r);
  json_t *failure;
  json_t *cand = propose(&r, false, &failure);
  assert_non_null(cand);
  assert_non_null(strstr(json_string_value(json_object_get(cand, "source")), "__global__ void k"));
  json_decref(cand);
  assert_int_equal(r.usage.prompt_tokens, 1000000);
  assert_int_equal(r.usage.completion_tokens, 500000);
  assert_true(r.usage.cost_usd > 1.4999 && r.usage.cost_usd < 1.5001);  /* 0.5 + 1.0 */
  /* A malformed answer is a parse failure, and its tokens still count. */
  assert_null(propose(&r, false, &failure));
  expect_failure(failure, "parse/no_source");
  json_decref(failure);
  assert_int_equal(r.usage.prompt_tokens, 1000100);
  assert_int_equal(r.usage.completion_tokens, 500050);
  json_t *reqs = scripted_llm_requests(&r.s);
  const char *user = json_string_value(json_object_get(
      json_array_get(json_object_get(json_array_get(reqs, 0), "messages"), 1), "content"));
  assert_non_null(strstr(user, "## Common pitfalls"));
  assert_non_null(strstr(user, "## Kernels so far"));
  json_decref(reqs);
  prop_stop(&r);
}

static void test_proposer_small_edits(void **state) {
  (void)state;
  struct prop_run r;
  prop_start("{\"content\": \"<old_str_1>vv</old_str_1>\\n<new_str_1>x[i]</new_str_1>\"},"
             "{\"content\": \"<old_str_1>float</old_str_1>\\n<new_str_1>double</new_str_1>\"}",
             "request_small.json", &r);
  json_t *failure;
  json_t *cand = propose(&r, true, &failure);
  assert_non_null(cand);
  assert_non_null(strstr(json_string_value(json_object_get(cand, "source")),
                         "float v = x[i] + b[i % cols];"));
  json_decref(cand);
  assert_null(propose(&r, true, &failure));
  expect_failure(failure, "parse/edit_not_unique");
  json_decref(failure);
  prop_stop(&r);
}

/* The bytes of a logged request's messages (system and user), as the proposer counts its
 * prompt's worst case. */
static size_t logged_prompt_bytes(json_t *q) {
  size_t n = 0, i;
  json_t *m;
  json_array_foreach(json_object_get(q, "messages"), i, m)
    n += json_string_length(json_object_get(m, "content"));
  return n;
}

static void test_proposer_budget_limit(void **state) {
  (void)state;
  struct prop_run r;
  prop_start("{\"content\": \"" GOOD_ANSWER "\"}", "request_large_first.json", &r);
  json_t *failure;
  struct proposal_limit tiny = {.tokens = 300, .cost_usd = 10, .calls = 4};
  r.req.limit = &tiny;
  assert_null(propose(&r, false, &failure));
  expect_failure(failure, "parse/llm_budget_exhausted");
  json_decref(failure);
  struct proposal_limit broke = {.tokens = 1000000, .cost_usd = 0, .calls = 4};
  r.req.limit = &broke;
  assert_null(propose(&r, false, &failure));
  expect_failure(failure, "parse/llm_budget_exhausted");
  json_decref(failure);
  struct proposal_limit no_calls = {.tokens = 1000000, .cost_usd = 10, .calls = 0};
  r.req.limit = &no_calls;
  assert_null(propose(&r, false, &failure));
  expect_failure(failure, "parse/llm_call_limit");
  json_decref(failure);
  json_t *reqs = scripted_llm_requests(&r.s);
  assert_int_equal(json_array_size(reqs), 0);  /* nothing was sent */
  json_decref(reqs);
  /* Enough for the prompt at its worst (a token a byte, 64 of the template's) and an
   * answer of 1000: max_tokens shrinks to exactly that, and the call's cost is taken
   * from the limit (the endpoint's 100 + 50 tokens at 0.5 and 2 USD a million). */
  r.req.limit = NULL;
  json_t *cand = propose(&r, false, &failure);
  assert_non_null(cand);
  json_decref(cand);
  reqs = scripted_llm_requests(&r.s);
  size_t bytes = logged_prompt_bytes(json_array_get(reqs, 0));
  json_decref(reqs);
  struct proposal_limit some = {.tokens = (long long)bytes + 64 + 1000, .cost_usd = 10,
                                .calls = 2};
  r.req.limit = &some;
  cand = propose(&r, false, &failure);
  assert_non_null(cand);
  json_decref(cand);
  reqs = scripted_llm_requests(&r.s);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(reqs, 1), "max_tokens")),
                   1000);
  json_decref(reqs);
  assert_int_equal(some.tokens, (long long)bytes + 64 + 1000 - 150);
  assert_true(fabs(some.cost_usd - (10 - (100 * 0.5e-6 + 50 * 2e-6))) < 1e-12);
  assert_int_equal(some.calls, 1);
  prop_stop(&r);
}

/* The user message of request i of the endpoint's log (borrowed from reqs). */
static const char *logged_user(json_t *reqs, size_t i) {
  return json_string_value(json_object_get(
      json_array_get(json_object_get(json_array_get(reqs, i), "messages"), 1), "content"));
}

/* search.small_step two_call: a reviser call (advice in words, no code), then the edits
 * written with that advice in the guidance; both calls are paid (usage 2 x 100 + 50). */
static void test_proposer_two_call_small_step(void **state) {
  (void)state;
  struct prop_run r;
  prop_start("{\"content\": \"Declare vv: it is x[i]; the rest is fine.\"},"
             "{\"content\": \"<old_str_1>vv</old_str_1>\\n<new_str_1>x[i]</new_str_1>\"}",
             "request_small.json", &r);
  r.req.two_call = true;
  json_t *failure;
  json_t *cand = propose(&r, true, &failure);
  assert_non_null(cand);
  assert_non_null(strstr(json_string_value(json_object_get(cand, "source")),
                         "float v = x[i] + b[i % cols];"));
  json_decref(cand);
  json_t *reqs = scripted_llm_requests(&r.s);
  assert_int_equal(json_array_size(reqs), 2);
  assert_non_null(strstr(logged_user(reqs, 0), "Do not write code yet."));
  assert_null(strstr(logged_user(reqs, 0), "<old_str_1>\nlines copied"));
  assert_non_null(strstr(logged_user(reqs, 1), "A reviewer read the current kernel and "
                                               "advises:\n\nDeclare vv: it is x[i]; the rest "
                                               "is fine."));
  assert_non_null(strstr(logged_user(reqs, 1), "Answer with edits to the current source"));
  json_decref(reqs);
  assert_int_equal(r.usage.prompt_tokens, 200);
  assert_int_equal(r.usage.completion_tokens, 100);
  prop_stop(&r);
}

/* search.local_choice llm: a short prompt lists the direction's strategies with their ids
 * and records; the answer names one (blanks and backticks around it are fine), or the
 * choice fails and the engine keeps its own. */
static void test_proposer_local_choice(void **state) {
  (void)state;
  struct prop_run r;
  prop_start("{\"content\": \"I would pick the grid-stride one.\\n`grid_stride`\\n\"},"
             "{\"content\": \"fusion\"}", "request_large_full.json", &r);
  const char *id = NULL;
  json_t *failure = NULL;
  assert_int_equal(r.p.choose_strategy(r.p.self, &r.req, &id, &failure), 0);
  assert_string_equal(id, "grid_stride");
  assert_int_equal(r.p.choose_strategy(r.p.self, &r.req, &id, &failure), -1);
  expect_failure(failure, "parse/llm_no_choice");
  json_decref(failure);
  json_t *reqs = scripted_llm_requests(&r.s);
  const char *user = logged_user(reqs, 0);
  assert_non_null(strstr(user, "## Choose a strategy"));
  assert_non_null(strstr(user, "- id `vector_float4`: "));
  assert_non_null(strstr(user, "- id `grid_stride`: "));
  assert_int_equal(json_integer_value(json_object_get(json_array_get(reqs, 0), "max_tokens")),
                   1024);
  json_decref(reqs);
  prop_stop(&r);
}

static void test_proposer_task_options(void **state) {
  (void)state;
  struct prop_run r;
  prop_start("{\"content\": \"" GOOD_ANSWER "\"}", "request_large_first.json", &r);
  snprintf(r.set.models, sizeof r.set.models, "other-model");
  proposer_clear(&r.p);
  char why[256];
  assert_int_equal(proposer_llm_new(&r.set, &r.p, why, sizeof why), 0);
  json_t *llm = json_object_get(json_object_get(r.doc, "task_options"), "llm");
  json_object_set_new(llm, "model", json_string("other-model"));
  json_object_set_new(llm, "temperature", json_real(0.75));
  json_object_set_new(llm, "max_tokens", json_integer(1000));
  json_t *failure;
  json_t *cand = propose(&r, false, &failure);
  assert_non_null(cand);
  json_decref(cand);
  json_object_set_new(llm, "model", json_string("expensive-model"));
  assert_null(propose(&r, false, &failure));
  expect_failure(failure, "parse/llm_model_not_allowed");
  json_decref(failure);
  json_t *reqs = scripted_llm_requests(&r.s);
  assert_int_equal(json_array_size(reqs), 1);
  json_t *q = json_array_get(reqs, 0);
  assert_string_equal(json_string_value(json_object_get(q, "model")), "other-model");
  assert_true(json_real_value(json_object_get(q, "temperature")) == 0.75);
  assert_int_equal(json_integer_value(json_object_get(q, "max_tokens")), 1000);
  json_decref(reqs);
  prop_stop(&r);
}

static void test_proposer_open_and_supports(void **state) {
  (void)state;
  struct llm_settings none;
  llm_settings_defaults(&none);
  struct proposer_config cfg = {.llm = &none};
  struct proposer p;
  char why[300];
  assert_int_equal(proposer_open("llm", &cfg, &p, why, sizeof why), -1);
  assert_non_null(strstr(why, "'llm'"));
  assert_non_null(strstr(why, "--llm-base-url"));
  snprintf(none.base_url, sizeof none.base_url, "http://127.0.0.1:9/v1");
  snprintf(none.model, sizeof none.model, "m");
  assert_int_equal(proposer_open("llm", &cfg, &p, why, sizeof why), 0);
  json_t *profile = llm_fixture("profile_whole.json");
  const char *family = NULL;
  assert_int_equal(p.supports(p.self, profile, &family, why, sizeof why), 0);
  assert_string_equal(family, "pointwise");
  json_object_set_new(json_array_get(json_object_get(profile, "graph"), 3), "target",
                      json_string("torch.nn.functional.dropout"));
  assert_int_equal(p.supports(p.self, profile, &family, why, sizeof why), -1);
  assert_non_null(strstr(why, "random"));
  json_decref(profile);
  proposer_clear(&p);
}

int main(void) {
  child_isolate();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_retry_delays),
    cmocka_unit_test(test_retry_after_parse),
    cmocka_unit_test(test_redact),
    cmocka_unit_test(test_chat_ok),
    cmocka_unit_test(test_chat_429_retry_after),
    cmocka_unit_test(test_chat_429_too_long_a_wait),
    cmocka_unit_test(test_chat_500),
    cmocka_unit_test(test_chat_4xx_not_retried),
    cmocka_unit_test(test_chat_401_key_scrubbed),
    cmocka_unit_test(test_chat_timeout),
    cmocka_unit_test(test_chat_too_large),
    cmocka_unit_test(test_chat_bad_bodies),
    cmocka_unit_test(test_chat_dead_port),
    cmocka_unit_test(test_concurrency_per_endpoint),
    cmocka_unit_test(test_slot_limit_is_the_latest_callers),
    cmocka_unit_test(test_proposer_large_usage_and_cost),
    cmocka_unit_test(test_proposer_small_edits),
    cmocka_unit_test(test_proposer_budget_limit),
    cmocka_unit_test(test_proposer_two_call_small_step),
    cmocka_unit_test(test_proposer_local_choice),
    cmocka_unit_test(test_proposer_task_options),
    cmocka_unit_test(test_proposer_open_and_supports),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
