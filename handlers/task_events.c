/* GET /v1/tasks/{id}/events: the task's event log as Server-Sent Events, resumable. */
#include <stdlib.h>
#include <string.h>

#include "handlers/handlers.h"
#include "server/app.h"
#include "server/config.h"
#include "server/event_bus.h"
#include "base/log.h"
#include "server/reply.h"
#include "store/events.h"
#include "store/tasks.h"

#define EVENTS_PER_FETCH 64

/* State of one stream; owned by the MHD response (freed in stream_free). */
struct event_stream {
  struct app *app;
  struct MHD_Connection *conn;
  char task_id[40];
  int64_t last_seq;
  char *pending;        /* formatted bytes not yet handed to MHD */
  size_t pending_len, pending_off;
  uint64_t last_write_ns;
  struct bus_waiter waiter;
};

/* Formats events as SSE frames into stream->pending. Returns the count, -1 on error. */
static int format_events(struct event_stream *st, json_t *events) {
  size_t index;
  json_t *ev;
  size_t cap = 0, len = 0;
  char *buf = NULL;
  json_array_foreach(events, index, ev) {
    char *data = json_dumps(ev, JSON_COMPACT);
    if (!data)
      break;
    const char *type = json_string_value(json_object_get(ev, "type"));
    int64_t seq = json_integer_value(json_object_get(ev, "seq"));
    size_t need = strlen(data) + strlen(type ? type : "") + 64;
    if (len + need > cap) {
      size_t want = (cap ? cap * 2 : 4096) + need;
      char *grown = realloc(buf, want);
      if (!grown) {
        free(data);
        break;
      }
      buf = grown;
      cap = want;
    }
    len += (size_t)snprintf(buf + len, cap - len, "id: %lld\nevent: %s\ndata: %s\n\n",
                            (long long)seq, type ? type : "message", data);
    free(data);
    st->last_seq = seq;
  }
  if (!buf)
    return json_array_size(events) ? -1 : 0;
  free(st->pending);
  st->pending = buf;
  st->pending_len = len;
  st->pending_off = 0;
  return (int)index;
}

/* True when the task is gone or final (the stream may end once drained). */
static bool task_over(struct event_stream *st) {
  json_t *task = NULL;
  int rc = store_task_get(st->app->store, st->task_id, false, &task);
  if (rc == STORE_NOT_FOUND)
    return true;
  if (rc != STORE_OK)
    return false;
  bool over = store_status_is_final(json_string_value(json_object_get(task, "status")));
  json_decref(task);
  return over;
}

static ssize_t copy_pending(struct event_stream *st, char *buf, size_t max) {
  size_t n = st->pending_len - st->pending_off;
  if (n > max)
    n = max;
  memcpy(buf, st->pending + st->pending_off, n);
  st->pending_off += n;
  st->last_write_ns = monotonic_ns();
  return (ssize_t)n;
}

/* MHD's content reader: hands out pending frames, fetches new events, ends the stream
 * when the task is final and drained, or suspends the connection until the bus wakes it. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  struct event_stream *st = cls;
  if (st->pending_off < st->pending_len)
    return copy_pending(st, buf, max);
  if (atomic_load(&st->app->shutting_down))
    return MHD_CONTENT_READER_END_OF_STREAM;
  uint64_t generation = event_bus_generation(st->app->bus);
  bool over = task_over(st);  /* read before the events, so none can slip in between */
  json_t *events = NULL;
  if (store_events_after(st->app->store, st->task_id, st->last_seq, EVENTS_PER_FETCH,
                         &events) != STORE_OK)
    return MHD_CONTENT_READER_END_WITH_ERROR;
  int n = format_events(st, events);
  json_decref(events);
  if (n < 0)
    return MHD_CONTENT_READER_END_WITH_ERROR;
  if (n > 0)
    return copy_pending(st, buf, max);
  if (over)
    return MHD_CONTENT_READER_END_OF_STREAM;
  uint64_t keepalive_ns = (uint64_t)st->app->cfg->sse_keepalive_s * 1000000000ull;
  if (monotonic_ns() - st->last_write_ns >= keepalive_ns) {
    static const char comment[] = ": keep-alive\n\n";
    free(st->pending);
    st->pending = strdup(comment);
    st->pending_len = st->pending ? sizeof comment - 1 : 0;
    st->pending_off = 0;
    return st->pending ? copy_pending(st, buf, max) : 0;
  }
  event_bus_wait(st->app->bus, &st->waiter, st->conn, st->task_id, generation);
  return 0;
}

static void stream_free(void *cls) {
  struct event_stream *st = cls;
  event_bus_forget(st->app->bus, &st->waiter);
  free(st->pending);
  free(st);
}

/* Where to resume: Last-Event-ID header, else ?after=, else 0. Both are checked when
 * both are given, so a malformed after is never silently ignored. Queues 400
 * invalid_query naming the bad one and returns -1. */
static int64_t resume_point(struct request *req, enum MHD_Result *ret_result) {
  const char *header = request_header(req, "Last-Event-ID");
  const char *query = request_query(req, "after");
  long long from_header = 0, from_query = 0;
  const char *bad = header && !parse_decimal(header, 0, INT64_MAX, &from_header)
                        ? "Last-Event-ID"
                    : query && !parse_decimal(query, 0, INT64_MAX, &from_query) ? "after"
                                                                               : NULL;
  if (bad) {
    *ret_result = reply_error(req, API_ERR_INVALID_QUERY, bad,
                              "%s must be an integer from 0 to 9223372036854775807", bad);
    return -1;
  }
  return header ? (int64_t)from_header : (int64_t)from_query;
}

/* The stream's headers on a response. */
static void add_stream_headers(struct MHD_Response *resp) {
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  MHD_add_response_header(resp, "X-Accel-Buffering", "no");
}

/* HEAD: the stream's status and headers without a body. libmicrohttpd 0.9.75 ends a
 * response of unknown size in chunked form (0 CR LF CR LF) even for HEAD, so HEAD gets
 * an empty response of known size instead. */
static enum MHD_Result reply_stream_head(struct request *req) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  add_stream_headers(resp);
  return reply_response(req, 200, resp);
}

enum MHD_Result handle_task_events(struct request *req) {
  enum MHD_Result result;
  const char *id = require_id_param(req, 0, "id", &result);
  if (!id)
    return result;
  int64_t after = resume_point(req, &result);
  if (after < 0)
    return result;
  json_t *task = NULL;
  int rc = store_task_get(req->app->store, id, false, &task);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  json_decref(task);
  if (strcmp(req->method, MHD_HTTP_METHOD_HEAD) == 0)
    return reply_stream_head(req);
  struct event_stream *st = calloc(1, sizeof *st);
  if (!st)
    return MHD_NO;
  st->app = req->app;
  st->conn = req->conn;
  snprintf(st->task_id, sizeof st->task_id, "%s", id);
  st->last_seq = after;
  st->last_write_ns = monotonic_ns();
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
  if (!resp) {
    free(st);
    return MHD_NO;
  }
  add_stream_headers(resp);
  return reply_response(req, 200, resp);
}
