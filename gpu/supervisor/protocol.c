/* The evaluator protocol, supervisor side (see supervisor.h): request lines out, reply
 * lines in under a deadline, their validation, the ready line, and synthetic replies. */
#include "gpu/supervisor/internal.h"

#include <poll.h>
#include <unistd.h>

#define READ_CHUNK 65536

/* The start of a line, printable, for messages about garbage. */
static void snippet(const char *line, size_t len, char *out, size_t outlen) {
  size_t n = 0;
  for (size_t i = 0; i < len && n + 4 < outlen && i < 160; i++) {
    unsigned char c = (unsigned char)line[i];
    out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  if (len > 160 && n + 4 < outlen) {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = '\0';
}

/* ---- requests out ---- */

/* Serializes {"id":id,"op":op,...args} as one line (caller frees). */
char *sv_request_line(const char *op, json_t *args, json_int_t id, size_t *ret_len) {
  json_t *req = json_pack("{s:I,s:s}", "id", id, "op", op);
  if (!req)
    return NULL;
  if (args) {
    const char *key;
    json_t *value;
    json_object_foreach(args, key, value) {
      if (strcmp(key, "id") != 0 && strcmp(key, "op") != 0)
        json_object_set(req, key, value);
    }
  }
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  if (!text)
    return NULL;
  size_t len = strlen(text);
  char *line = realloc(text, len + 2);
  if (!line) {
    free(text);
    return NULL;
  }
  line[len] = '\n';
  line[len + 1] = '\0';
  *ret_len = len + 1;
  return line;
}

/* Waits until the stream is ready for events (POLLIN: our read end; POLLOUT: our write
 * end), the deadline passes (IO_TIMEOUT) or the process exits with the stream idle
 * (IO_EOF). IO_OK means "try the I/O again". */
static enum io_result sv_wait(struct supervisor *sv, short events, double deadline) {
  struct pollfd p[2] = {
      {.fd = events == POLLIN ? sv->from_child : sv->to_child, .events = events},
      {.fd = sv->pidfd, .events = POLLIN},
  };
  int left = ms_left(deadline);
  if (left == 0)
    return IO_TIMEOUT;
  int rc = poll(p, sv->pidfd >= 0 ? 2 : 1, left);
  if (rc == 0 && now_s() >= deadline)
    return IO_TIMEOUT;
  if (rc > 0 && p[0].revents == 0 && (p[1].revents & POLLIN))
    return IO_EOF;
  return IO_OK;
}

/* Writes all of data before deadline. SIGPIPE is blocked around the write and a SIGPIPE
 * it raised is consumed, so a dead evaluator gives IO_EOF instead of killing the server. */
static enum io_result sv_write_all(struct supervisor *sv, const char *data, size_t len,
                                   double deadline) {
  sigset_t pipe_set, old_mask, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  enum io_result res = IO_OK;
  while (len > 0) {
    ssize_t n = write(sv->to_child, data, len);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      res = sv_wait(sv, POLLOUT, deadline);
      if (res != IO_OK)
        break;
      continue;
    }
    res = (n < 0 && errno == EPIPE) ? IO_EOF : IO_ERROR;
    break;
  }
  if (res == IO_EOF && !was_pending) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  return res;
}

/* ---- replies in ---- */

/* Makes room for at least one more read, up to max_line_bytes + 1 bytes of line. */
static int sv_grow(struct supervisor *sv) {
  size_t limit = sv->cfg.max_line_bytes + 2;
  if (sv->cap - sv->len >= 4096 || sv->cap >= limit)
    return 0;
  size_t cap = sv->cap ? sv->cap * 2 : READ_CHUNK;
  if (cap > limit)
    cap = limit;
  char *grown = realloc(sv->buf, cap);
  if (!grown)
    return -ENOMEM;
  sv->buf = grown;
  sv->cap = cap;
  return 0;
}

/* Reads until a whole line is buffered or deadline. On IO_OK *ret_line is the line,
 * NUL-terminated without its newline, inside sv->buf until sv_consume_line. */
enum io_result sv_read_line(struct supervisor *sv, double deadline, char **ret_line,
                            size_t *ret_len) {
  for (;;) {
    char *nl = sv->len > sv->scanned
                   ? memchr(sv->buf + sv->scanned, '\n', sv->len - sv->scanned)
                   : NULL;
    if (nl) {
      *nl = '\0';
      *ret_line = sv->buf;
      *ret_len = (size_t)(nl - sv->buf);
      sv->line_end = *ret_len + 1;
      return IO_OK;
    }
    sv->scanned = sv->len;
    if (sv->len > sv->cfg.max_line_bytes)
      return IO_TOO_LONG;
    if (sv_grow(sv) < 0)
      return IO_ERROR;
    size_t room = sv->cap - sv->len - 1;
    ssize_t n = read(sv->from_child, sv->buf + sv->len, room);
    if (n > 0) {
      sv->len += (size_t)n;
      continue;
    }
    if (n == 0)
      return IO_EOF;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN)
      return IO_ERROR;
    enum io_result waited = sv_wait(sv, POLLIN, deadline);
    if (waited != IO_OK)
      return waited;
  }
}

/* Drops the line sv_read_line returned. A buffer grown for one huge reply is released
 * once empty, so an idle slot does not keep max_line_bytes. */
void sv_consume_line(struct supervisor *sv) {
  size_t rest = sv->len - sv->line_end;
  memmove(sv->buf, sv->buf + sv->line_end, rest);
  sv->len = rest;
  sv->scanned = 0;
  sv->line_end = 0;
  if (rest == 0 && sv->cap > (1u << 20)) {
    free(sv->buf);
    sv->buf = NULL;
    sv->cap = 0;
  }
}

/* True when the process is alive and has written nothing since its last reply (no
 * buffered bytes, nothing readable, no exit reported): the state a request may be sent
 * in. Does not block. */
bool sv_stream_quiet(struct supervisor *sv) {
  struct pollfd p[2] = {{.fd = sv->from_child, .events = POLLIN},
                        {.fd = sv->pidfd, .events = POLLIN}};
  return sv->len == 0 && poll(p, sv->pidfd >= 0 ? 2 : 1, 0) == 0;
}

/* The parsed reply when line answers request id; NULL with the reason otherwise. */
static json_t *parse_reply(const char *line, size_t len, json_int_t id, char *why,
                           size_t whylen) {
  char shown[200];
  json_error_t jerr;
  json_t *obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  snippet(line, len, shown, sizeof shown);
  if (!json_is_object(obj)) {
    set_err(why, whylen, "unparsable line from the evaluator: %s", shown);
    json_decref(obj);
    return NULL;
  }
  json_t *jid = json_object_get(obj, "id");
  if (!json_is_integer(jid) || json_integer_value(jid) != id) {
    set_err(why, whylen, "line is not the reply to request %lld: %s", (long long)id, shown);
    json_decref(obj);
    return NULL;
  }
  if (!json_is_boolean(json_object_get(obj, "ok"))) {
    set_err(why, whylen, "reply without a boolean \"ok\": %s", shown);
    json_decref(obj);
    return NULL;
  }
  return obj;
}

/* Sends one request line and reads its reply before deadline. On EX_REPLY *ret_reply is
 * the reply (caller owns); otherwise why says what went wrong. */
enum exchange sv_exchange(struct supervisor *sv, const char *line, size_t len, json_int_t id,
                          double deadline, json_t **ret_reply, char *why, size_t whylen) {
  enum io_result io = sv_write_all(sv, line, len, deadline);
  if (io == IO_TIMEOUT)
    return EX_TIMEOUT;
  if (io != IO_OK) {
    set_err(why, whylen, "evaluator closed its stdin");
    return EX_EOF;
  }
  char *reply_line;
  size_t reply_len;
  io = sv_read_line(sv, deadline, &reply_line, &reply_len);
  switch (io) {
  case IO_OK: {
    json_t *reply = parse_reply(reply_line, reply_len, id, why, whylen);
    sv_consume_line(sv);
    if (!reply)
      return EX_GARBAGE;
    *ret_reply = reply;
    return EX_REPLY;
  }
  case IO_TIMEOUT:
    return EX_TIMEOUT;
  case IO_TOO_LONG:
    set_err(why, whylen, "reply line longer than %zu bytes", sv->cfg.max_line_bytes);
    return EX_GARBAGE;
  case IO_EOF:
    set_err(why, whylen, "evaluator closed its stdout");
    return EX_EOF;
  case IO_ERROR:
    break;
  }
  set_err(why, whylen, "reading from the evaluator: %s", strerror(errno));
  return EX_EOF;
}

/* ---- the ready line and made-up replies ---- */

/* Validates the ready line and keeps its device info. */
int sv_take_ready_line(struct supervisor *sv, const char *line, size_t len, char *err,
                       size_t errlen) {
  char shown[200];
  snippet(line, len, shown, sizeof shown);
  json_t *obj = json_loadb(line, len, 0, NULL);
  json_t *device = json_object_get(obj, "device");
  if (!json_is_object(obj) ||
      !json_is_string(json_object_get(obj, "event")) ||
      strcmp(json_string_value(json_object_get(obj, "event")), "ready") != 0 ||
      !json_is_object(device)) {
    set_err(err, errlen, "evaluator wrote %s instead of its ready line "
            "(crash/garbage_output)", shown);
    json_decref(obj);
    return -EPROTO;
  }
  json_incref(device);
  pthread_mutex_lock(&sv->lock);
  json_decref(sv->device_info);
  sv->device_info = device;
  pthread_mutex_unlock(&sv->lock);
  json_decref(obj);
  return 0;
}

/* A reply the supervisor makes up: {"id","ok":false,"error":{"stage","class","message"},
 * "fatal":false,"restarted","reloaded"}. Strings are copied. Caller owns; NULL when out
 * of memory. */
json_t *sv_synthetic_reply(json_int_t id, enum eval_stage stage, const char *cls,
                           const char *message, bool restarted, bool reloaded) {
  return json_pack("{s:I,s:b,s:{s:s,s:s,s:s},s:b,s:b,s:b}", "id", id, "ok", 0, "error",
                   "stage", eval_stage_name(stage), "class", cls, "message", message,
                   "fatal", 0, "restarted", restarted, "reloaded", reloaded);
}
