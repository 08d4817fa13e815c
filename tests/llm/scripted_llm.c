/* A scripted OpenAI-compatible endpoint for the LLM tests: POST /chat/completions (under
 * any prefix) answered from a script, deterministically, on 127.0.0.1 and a free port.
 *
 * Usage: scripted_llm SCRIPT.json LOG.jsonl
 * Prints "listening on http://127.0.0.1:PORT" and serves until SIGTERM or SIGINT.
 *
 * The script: {"key": "...", "rules": [{"match": "text", "replies": [REPLY, ...]}, ...]}.
 * A request's last message is matched against the rules in order ("match" is a text the
 * message must hold, or an array of them; absent, it matches anything); the first rule
 * that matches answers with its next reply, cycling.
 * With "key", a request whose Authorization is not "Bearer <key>" gets a 401 whose message
 * quotes the key it sent (as some services do), so tests can see that it is scrubbed.
 * A REPLY is an object:
 *   "status": the HTTP status (200)
 *   "content": the message; "{{n}}" in it becomes the number of the request (1, 2, ...)
 *   "usage": {"prompt_tokens","completion_tokens"} ({"prompt_tokens":100,
 *            "completion_tokens":50}); null sends none; "max" bills the worst case: a
 *            token per byte of the messages and the request's whole max_tokens
 *   "finish_reason": ("stop")
 *   "error": an error body {"error":{"message":...}} instead of a completion
 *   "raw": the body as is (not JSON)
 *   "retry_after": a Retry-After header value
 *   "delay_ms": sleep this long before answering
 *   "pad_bytes": make the content this many bytes long (an oversized answer)
 * Every request appends one JSON line to LOG: {"n","model","temperature","max_tokens",
 * "stream","auth" ("ok", "none" or "wrong"), "in_flight" (requests being answered, this
 * one included), "messages"}. The key itself is never written. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BODY (4u << 20)

static json_t *script;
static const char *log_path;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long requests, in_flight;
static size_t *cursors;  /* the next reply of each rule */

struct upload {
  char *data;
  size_t len;
  bool too_big;
};

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* The bytes of every message's content of the request. */
static size_t message_bytes(json_t *req) {
  size_t n = 0, i;
  json_t *m;
  json_array_foreach(json_object_get(req, "messages"), i, m)
    n += json_string_length(json_object_get(m, "content"));
  return n;
}

/* The text of the last message of the request, "" when none. */
static const char *last_message(json_t *req) {
  json_t *messages = json_object_get(req, "messages");
  const char *s = json_string_value(
      json_object_get(json_array_get(messages, json_array_size(messages) - 1), "content"));
  return s ? s : "";
}

/* The reply for req (borrowed from the script), advancing its rule's cursor; NULL when no
 * rule matches. Called with the lock held. */
static json_t *pick_reply(json_t *req) {
  json_t *rules = json_object_get(script, "rules"), *rule;
  size_t i;
  json_array_foreach(rules, i, rule) {
    json_t *match = json_object_get(rule, "match"), *replies = json_object_get(rule, "replies");
    bool hit = json_array_size(replies) > 0;
    if (json_is_string(match))
      hit = hit && strstr(last_message(req), json_string_value(match));
    size_t j;
    json_t *m;
    json_array_foreach(match, j, m) hit = hit && json_is_string(m) &&
                                          strstr(last_message(req), json_string_value(m));
    if (!hit)
      continue;
    json_t *r = json_array_get(replies, cursors[i] % json_array_size(replies));
    cursors[i]++;
    return r;
  }
  return NULL;
}

/* The content of reply with {{n}} replaced and padding applied (caller frees). */
static char *reply_content(json_t *reply, long n) {
  const char *c = json_string_value(json_object_get(reply, "content"));
  char num[24];
  snprintf(num, sizeof num, "%ld", n);
  size_t pad = (size_t)json_integer_value(json_object_get(reply, "pad_bytes"));
  size_t cap = (c ? strlen(c) * 2 : 0) + pad + 64;
  char *out = malloc(cap);
  size_t len = 0;
  for (const char *p = c ? c : ""; *p;) {
    if (strncmp(p, "{{n}}", 5) == 0) {
      len += (size_t)snprintf(out + len, cap - len, "%s", num);
      p += 5;
    } else {
      out[len++] = *p++;
    }
  }
  while (len < pad)
    out[len++] = 'x';
  out[len] = '\0';
  return out;
}

/* Queues body (copied) with status and optional Retry-After. */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *body,
                               const char *retry_after) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "application/json");
  if (retry_after)
    MHD_add_response_header(r, "Retry-After", retry_after);
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned status, json_t *doc,
                                    const char *retry_after) {
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  enum MHD_Result ret = respond(conn, status, text ? text : "{}", retry_after);
  free(text);
  return ret;
}

static void log_request(json_t *req, long n, const char *auth, long flight) {
  FILE *f = fopen(log_path, "a");
  if (!f)
    return;
  json_t *line = json_pack("{s:i, s:O?, s:O?, s:O?, s:O?, s:s, s:i, s:O?}", "n", (int)n, "model",
                           json_object_get(req, "model"), "temperature",
                           json_object_get(req, "temperature"), "max_tokens",
                           json_object_get(req, "max_tokens"), "stream",
                           json_object_get(req, "stream"), "auth", auth, "in_flight",
                           (int)flight, "messages", json_object_get(req, "messages"));
  char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
  if (text)
    fprintf(f, "%s\n", text);
  free(text);
  json_decref(line);
  fclose(f);
}

/* "ok", "none" or "wrong" for the request's Authorization against the script's key. */
static const char *auth_state(struct MHD_Connection *conn, const char **ret_sent) {
  const char *key = json_string_value(json_object_get(script, "key"));
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
  *ret_sent = h && strncmp(h, "Bearer ", 7) == 0 ? h + 7 : h;
  if (!key)
    return "ok";
  if (!h)
    return "none";
  return strcmp(*ret_sent, key) == 0 ? "ok" : "wrong";
}

static enum MHD_Result answer(struct MHD_Connection *conn, struct upload *up) {
  json_t *req = up->too_big ? NULL : json_loadb(up->data ? up->data : "", up->len, 0, NULL);
  if (!req)
    return respond(conn, 400, "{\"error\":{\"message\":\"the body is not JSON\"}}", NULL);
  const char *sent = NULL;
  const char *auth = auth_state(conn, &sent);
  pthread_mutex_lock(&lock);
  long n = ++requests, flight = ++in_flight;
  json_t *reply = strcmp(auth, "ok") == 0 ? json_incref(pick_reply(req)) : NULL;
  log_request(req, n, auth, flight);
  pthread_mutex_unlock(&lock);
  enum MHD_Result ret;
  if (strcmp(auth, "ok") != 0) {
    char message[700];
    snprintf(message, sizeof message, "Incorrect API key provided: %.500s", sent ? sent : "");
    ret = respond_json(conn, 401, json_pack("{s:{s:s, s:s}}", "error", "message", message,
                                            "type", "invalid_request_error"), NULL);
  } else if (!reply) {
    ret = respond(conn, 500, "{\"error\":{\"message\":\"no scripted reply matches\"}}", NULL);
  } else {
    sleep_ms((long)json_integer_value(json_object_get(reply, "delay_ms")));
    json_t *status = json_object_get(reply, "status");
    unsigned code = status ? (unsigned)json_integer_value(status) : 200;
    const char *retry = json_string_value(json_object_get(reply, "retry_after"));
    const char *raw = json_string_value(json_object_get(reply, "raw"));
    const char *error = json_string_value(json_object_get(reply, "error"));
    if (raw) {
      ret = respond(conn, code, raw, retry);
    } else if (error) {
      ret = respond_json(conn, code, json_pack("{s:{s:s}}", "error", "message", error), retry);
    } else {
      char *content = reply_content(reply, n);
      json_t *usage = json_object_get(reply, "usage");
      json_t *body = json_pack("{s:s, s:s, s:O, s:[{s:i, s:{s:s, s:s}, s:s}]}", "id", "cmpl",
                               "object", "chat.completion", "model",
                               json_object_get(req, "model"), "choices", "index", 0, "message",
                               "role", "assistant", "content", content, "finish_reason",
                               json_string_value(json_object_get(reply, "finish_reason"))
                                   ? json_string_value(json_object_get(reply, "finish_reason"))
                                   : "stop");
      if (json_is_string(usage) && strcmp(json_string_value(usage), "max") == 0) {
        /* The worst an endpoint may bill: a token per prompt byte, the whole cap. */
        json_int_t in = (json_int_t)message_bytes(req);
        json_int_t out = json_integer_value(json_object_get(req, "max_tokens"));
        json_object_set_new(body, "usage", json_pack("{s:I, s:I, s:I}", "prompt_tokens", in,
                                                     "completion_tokens", out, "total_tokens",
                                                     in + out));
      } else if (!usage)
        json_object_set_new(body, "usage", json_pack("{s:i, s:i, s:i}", "prompt_tokens", 100,
                                                     "completion_tokens", 50, "total_tokens",
                                                     150));
      else if (!json_is_null(usage))
        json_object_set(body, "usage", usage);
      free(content);
      ret = respond_json(conn, code, body, retry);
    }
  }
  json_decref(reply);
  json_decref(req);
  pthread_mutex_lock(&lock);
  in_flight--;
  pthread_mutex_unlock(&lock);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls) {
  (void)cls, (void)version;
  struct upload *up = *con_cls;
  if (!up) {
    if (!(up = calloc(1, sizeof *up)))
      return MHD_NO;
    *con_cls = up;
    return MHD_YES;
  }
  if (*upload_size) {
    if (up->len + *upload_size > MAX_BODY) {
      up->too_big = true;
    } else {
      char *grown = realloc(up->data, up->len + *upload_size + 1);
      if (!grown)
        return MHD_NO;
      up->data = grown;
      memcpy(up->data + up->len, upload_data, *upload_size);
      up->len += *upload_size;
      up->data[up->len] = '\0';
    }
    *upload_size = 0;
    return MHD_YES;
  }
  size_t ulen = strlen(url);
  if (strcmp(method, "POST") != 0 || ulen < 17 || strcmp(url + ulen - 17, "/chat/completions") != 0)
    return respond(conn, 404, "{\"error\":{\"message\":\"not found\"}}", NULL);
  return answer(conn, up);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls, (void)conn, (void)toe;
  struct upload *up = *con_cls;
  if (up) {
    free(up->data);
    free(up);
  }
  *con_cls = NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: scripted_llm SCRIPT.json LOG.jsonl\n");
    return 2;
  }
  json_error_t jerr;
  script = json_load_file(argv[1], 0, &jerr);
  if (!json_is_object(script)) {
    fprintf(stderr, "scripted_llm: %s: %s\n", argv[1], jerr.text);
    return 2;
  }
  log_path = argv[2];
  cursors = calloc(json_array_size(json_object_get(script, "rules")) + 1, sizeof *cursors);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
      NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)30, MHD_OPTION_END);
  const union MHD_DaemonInfo *info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
  if (!info) {
    fprintf(stderr, "scripted_llm: cannot start the daemon\n");
    return 1;
  }
  printf("listening on http://127.0.0.1:%u\n", (unsigned)info->port);
  fflush(stdout);
  int sig;
  sigwait(&set, &sig);
  MHD_stop_daemon(d);
  json_decref(script);
  free(cursors);
  return 0;
}
