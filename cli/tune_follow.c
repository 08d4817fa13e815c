/* Follows many tasks' event streams at once through libcurl's multi interface. */
#include "cli/tune_follow.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#define CONNECT_TIMEOUT_S 10L
#define STALL_S 60L              /* the server sends a keep-alive every 15 s */
#define TICK_S 0.5
#define RETRY_FIRST_S 0.25
#define RETRY_MAX_S 8.0
#define ERROR_BODY_MAX 4096

/* One open stream. */
struct stream {
  struct follow *f;
  CURL *easy;                  /* NULL: the slot is free */
  struct curl_slist *headers;
  struct cli_sse_parser *parser;
  size_t task;
  int parser_rc;               /* non-zero once the parser refused the stream */
  char errbuf[CURL_ERROR_SIZE];
  char error_body[ERROR_BODY_MAX];
  size_t error_len;
};

/* One call of tune_follow. */
struct follow {
  const char *base;
  struct tune_task *tasks;
  size_t n;
  const struct tune_follow_hooks *hooks;
  CURLM *multi;
  struct stream streams[TUNE_STREAMS_MAX];
  double *retry_at;            /* per task: not before this (monotonic) */
  unsigned *failures;          /* per task: failed connections in a row */
  double outage_since;         /* monotonic; 0 while streams connect */
  enum tune_follow_result result;
  bool stop;
};

double tune_now_monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double tune_now_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- one stream ---- */

/* The parser's callback: the task takes the event, then the caller hears of it. */
static int on_sse(const struct cli_sse_event *ev, void *user) {
  struct stream *s = user;
  json_t *event = json_loadb(ev->data, ev->data_len, 0, NULL);
  if (!json_is_object(event)) {
    json_decref(event);
    return 0; /* not the agreed shape: nothing to take */
  }
  struct tune_task *t = &s->f->tasks[s->task];
  tune_task_take_event(t, event);
  snprintf(t->last_event_id, sizeof t->last_event_id, "%s", ev->id);
  const struct tune_follow_hooks *h = s->f->hooks;
  if (h && h->on_event)
    h->on_event(h->user, s->task, event);
  json_decref(event);
  s->f->outage_since = 0;
  return 0;
}

/* libcurl write callback: a 200 body goes to the parser, any other is kept (cut) for
 * the message. Returning less than given aborts the transfer. */
static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user) {
  struct stream *s = user;
  size_t n = size * nmemb;
  long status = 0;
  curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    size_t room = sizeof s->error_body - 1 - s->error_len;
    size_t take = n < room ? n : room;
    memcpy(s->error_body + s->error_len, ptr, take);
    s->error_len += take;
    s->error_body[s->error_len] = '\0';
    return n;
  }
  int rc = cli_sse_parser_feed(s->parser, ptr, n);
  if (rc != 0) {
    s->parser_rc = rc;
    return 0;
  }
  return n;
}

/* Frees a stream's slot (removing it from the multi handle). */
static void stream_close(struct stream *s) {
  if (!s->easy)
    return;
  curl_multi_remove_handle(s->f->multi, s->easy);
  curl_easy_cleanup(s->easy);
  curl_slist_free_all(s->headers);
  cli_sse_parser_free(s->parser);
  struct follow *f = s->f;
  memset(s, 0, sizeof *s);
  s->f = f;
}

/* Opens task i's stream in slot s. Returns 0, or -1 when out of memory (printed). */
static int stream_open(struct follow *f, struct stream *s, size_t i) {
  struct tune_task *t = &f->tasks[i];
  char url[CLI_MAX_URL], id_header[CLI_SSE_ID_MAX + 32];
  char *esc = cli_escape(t->id);
  int len = esc ? snprintf(url, sizeof url, "%s/v1/tasks/%s/events", f->base, esc) : -1;
  free(esc);
  s->task = i;
  s->easy = curl_easy_init();
  s->parser = cli_sse_parser_new(on_sse, s, t->last_event_id);
  s->headers = curl_slist_append(NULL, "Accept: text/event-stream");
  if (s->headers && t->last_event_id[0]) {
    snprintf(id_header, sizeof id_header, "Last-Event-ID: %s", t->last_event_id);
    struct curl_slist *more = curl_slist_append(s->headers, id_header);
    if (!more)
      curl_slist_free_all(s->headers);
    s->headers = more;
  }
  if (len < 0 || (size_t)len >= sizeof url || !s->easy || !s->parser || !s->headers) {
    fprintf(stderr, "error: out of memory\n");
    if (s->easy)
      curl_easy_cleanup(s->easy);
    s->easy = NULL; /* not added: stream_close must not remove it */
    cli_sse_parser_free(s->parser);
    curl_slist_free_all(s->headers);
    s->parser = NULL;
    s->headers = NULL;
    return -1;
  }
  curl_easy_setopt(s->easy, CURLOPT_URL, url);
  curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, s->errbuf);
  curl_easy_setopt(s->easy, CURLOPT_USERAGENT, "opforge-cli/0.1");
  curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(s->easy, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  curl_easy_setopt(s->easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
  curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
  curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_TIME, STALL_S);
  curl_multi_add_handle(f->multi, s->easy);
  return 0;
}

/* A stream that failed is tried again after a pause that doubles per failure in a row;
 * once no stream has connected for TUNE_OUTAGE_MAX_S the follower gives up. */
static void stream_retry(struct follow *f, struct stream *s, CURLcode rc, long status) {
  double now = tune_now_monotonic();
  unsigned k = f->failures[s->task]++;
  f->retry_at[s->task] = now + fmin(RETRY_MAX_S, RETRY_FIRST_S * pow(2, k < 16 ? k : 16));
  if (f->outage_since == 0)
    f->outage_since = now;
  if (now - f->outage_since < TUNE_OUTAGE_MAX_S)
    return;
  if (rc != CURLE_OK) {
    fprintf(stderr, "error: cannot reach %s: %s\n", f->base,
            s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc));
    f->result = TUNE_FOLLOW_UNREACHABLE;
  } else {
    fprintf(stderr, "error: the server answered HTTP %ld to the event streams for %.0f s; "
                    "giving up\n", status, TUNE_OUTAGE_MAX_S);
    f->result = TUNE_FOLLOW_ERROR;
  }
  f->stop = true;
}

/* Handles a stream that came to its end, one way or another. */
static void stream_done(struct follow *f, struct stream *s, CURLcode rc) {
  long status = 0;
  curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
  struct tune_task *t = &f->tasks[s->task];
  const struct tune_follow_hooks *h = f->hooks;
  if (s->parser_rc < 0) {
    fprintf(stderr, "error: bad_stream: an event of task %s exceeds %u bytes\n", t->id,
            CLI_SSE_MAX_EVENT);
    f->result = TUNE_FOLLOW_ERROR;
    f->stop = true;
  } else if (rc == CURLE_OK && ((status == 200 && tune_state_is_final(t->state)) ||
                                 status == 404)) {
    if (status == 404)
      t->state = TUNE_LOST;
    t->ended = true;
    f->failures[s->task] = 0;
    f->outage_since = 0;
    if (h && h->on_end)
      h->on_end(h->user, s->task);
  } else if (rc == CURLE_OK && status >= 400 && status < 500 && status != 429) {
    json_t *body = json_loadb(s->error_body, s->error_len, 0, NULL);
    cli_print_server_error(status, body);
    json_decref(body);
    f->result = TUNE_FOLLOW_ERROR;
    f->stop = true;
  } else {
    /* A drop, a 5xx, or a stream that ended before its task did (a server that
     * stopped): resumed after its last event. */
    stream_retry(f, s, rc, status);
  }
  stream_close(s);
}

/* ---- the loop ---- */

/* Whether task i has a stream open. */
static bool is_open(const struct follow *f, size_t i) {
  for (size_t k = 0; k < TUNE_STREAMS_MAX; k++)
    if (f->streams[k].easy && f->streams[k].task == i)
      return true;
  return false;
}

/* Opens streams for waiting tasks, in order, while slots are free. Returns how many
 * tasks are still to be followed (open or waiting). */
static size_t fill_slots(struct follow *f) {
  double now = tune_now_monotonic();
  size_t left = 0;
  for (size_t i = 0; i < f->n && !f->stop; i++) {
    struct tune_task *t = &f->tasks[i];
    if (!t->id[0] || t->ended || t->state == TUNE_REFUSED || t->state == TUNE_LOST)
      continue;
    left++;
    if (is_open(f, i) || f->retry_at[i] > now)
      continue;
    for (size_t k = 0; k < TUNE_STREAMS_MAX; k++) {
      if (f->streams[k].easy)
        continue;
      if (stream_open(f, &f->streams[k], i) != 0) {
        f->result = TUNE_FOLLOW_ERROR;
        f->stop = true;
      }
      break;
    }
  }
  return left;
}

/* Runs the transfers for up to timeout_ms and handles those that ended. */
static void pump(struct follow *f, int timeout_ms) {
  int running = 0;
  curl_multi_perform(f->multi, &running);
  curl_multi_poll(f->multi, NULL, 0, timeout_ms, NULL);
  curl_multi_perform(f->multi, &running);
  CURLMsg *msg;
  int queued = 0;
  while ((msg = curl_multi_info_read(f->multi, &queued)) != NULL) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    struct stream *s = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
    if (s)
      stream_done(f, s, msg->data.result);
  }
}

/* Follows until done, the deadline or a stop; closes every stream. */
static void follow_loop(struct follow *f, double deadline) {
  double last_tick = 0;
  for (;;) {
    size_t left = fill_slots(f);
    double now = tune_now_monotonic();
    if (f->stop || left == 0)
      break;
    if (now >= deadline) {
      f->result = TUNE_FOLLOW_DEADLINE;
      break;
    }
    double wait_s = fmin(TICK_S, deadline - now);
    pump(f, (int)(wait_s * 1000.0) + 1);
    if (tune_now_monotonic() - last_tick >= TICK_S && f->hooks && f->hooks->on_tick) {
      last_tick = tune_now_monotonic();
      f->hooks->on_tick(f->hooks->user);
    }
  }
  for (size_t k = 0; k < TUNE_STREAMS_MAX; k++)
    stream_close(&f->streams[k]);
}

enum tune_follow_result tune_follow(const char *base_url, struct tune_task *tasks, size_t n,
                                    double deadline, const struct tune_follow_hooks *hooks) {
  struct follow f = {.base = base_url, .tasks = tasks, .n = n, .hooks = hooks,
                     .result = TUNE_FOLLOW_DONE};
  for (size_t k = 0; k < TUNE_STREAMS_MAX; k++)
    f.streams[k].f = &f;
  f.multi = curl_multi_init();
  f.retry_at = calloc(n ? n : 1, sizeof *f.retry_at);
  f.failures = calloc(n ? n : 1, sizeof *f.failures);
  if (!f.multi || !f.retry_at || !f.failures) {
    fprintf(stderr, "error: out of memory\n");
    f.result = TUNE_FOLLOW_ERROR;
  } else {
    follow_loop(&f, deadline);
  }
  if (f.multi)
    curl_multi_cleanup(f.multi);
  free(f.retry_at);
  free(f.failures);
  return f.result;
}
