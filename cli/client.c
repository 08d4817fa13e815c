/* The command-line side's HTTP client: JSON requests, an SSE follower, error printing. */
#include "cli/client.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#define USER_AGENT "opforge-cli/0.1"
#define CONNECT_TIMEOUT_S 10L
#define REQUEST_TIMEOUT_S 120L
#define SSE_STALL_S 60L /* the server sends a keep-alive every 15 s */
#define RETRY_MAX_DELAY_MS 8000u
#define ERROR_BODY_MAX (1u << 20)

struct cli_client {
  char base[CLI_MAX_URL];
  char auth_header[CLI_MAX_TOKEN + 32]; /* "" when there is no token */
  CURL *easy;                           /* reused so requests share a connection */
  unsigned retry_attempts;
  unsigned retry_first_ms;
  size_t max_reply;       /* CLI_MAX_REPLY_BYTES or $OPFORGE_MAX_REPLY_BYTES */
  bool quiet_too_large;   /* cli_request returns CLI_REPLY_TOO_LARGE without a message */
  bool unreachable;       /* the last transfer failed without an answer */
};

/* A growing byte buffer, always NUL-terminated when data is not NULL. */
struct buf {
  char *data;
  size_t len;
  size_t cap;
  size_t max; /* appends past this fail */
};

/* Releases b's memory and leaves it empty, ready for reuse. */
static void buf_free(struct buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

/* Appends n bytes; -1 when the result would pass b->max or memory runs out. */
static int buf_append(struct buf *b, const char *p, size_t n) {
  if (n > b->max - b->len)
    return -1;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *grown = realloc(b->data, cap);
    if (!grown)
      return -1;
    b->data = grown;
    b->cap = cap;
  }
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

/* ---- construction ---- */

/* Checks a token can travel in a header; tokens are never echoed in messages. */
static int token_ok(const char *tok, size_t len) {
  if (len == 0 || len >= CLI_MAX_TOKEN)
    return 0;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)tok[i] <= ' ' || tok[i] == 0x7f)
      return 0;
  return 1;
}

/* Reads the first non-empty, non-comment line of path into out (CLI_MAX_TOKEN bytes). */
static int read_token_file(const char *path, char *out) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "error: cannot read token file %s: %s\n", path, strerror(errno));
    return -1;
  }
  char line[1024];
  int rc = -1;
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\r\n");
    line[len] = '\0';
    if (len == 0 || line[0] == '#')
      continue;
    found = true;
    if (token_ok(line, len)) {
      memcpy(out, line, len + 1);
      rc = 0;
    }
  }
  fclose(f);
  if (rc != 0)
    fprintf(stderr, "error: token file %s: %s\n", path,
            found ? "the token must be 1..255 printable characters without spaces"
                  : "holds no token");
  return rc;
}

/* Fills client->auth_header from the token sources, in order of precedence. */
static int load_token(struct cli_client *client, const char *token_file) {
  char token[CLI_MAX_TOKEN] = "";
  const char *env_token = getenv("OPFORGE_TOKEN");
  const char *env_file = getenv("OPFORGE_TOKEN_FILE");
  if (token_file) {
    if (read_token_file(token_file, token) != 0)
      return -1;
  } else if (env_token && *env_token) {
    if (!token_ok(env_token, strlen(env_token))) {
      fprintf(stderr, "error: $OPFORGE_TOKEN must be 1..255 printable characters "
                      "without spaces\n");
      return -1;
    }
    memcpy(token, env_token, strlen(env_token) + 1);
  } else if (env_file && *env_file) {
    if (read_token_file(env_file, token) != 0)
      return -1;
  }
  if (token[0])
    snprintf(client->auth_header, sizeof client->auth_header, "Authorization: Bearer %s",
             token);
  return 0;
}

/* The largest reply to accept: $OPFORGE_MAX_REPLY_BYTES when set (4096 to
 * CLI_MAX_REPLY_BYTES), else CLI_MAX_REPLY_BYTES. Prints why and returns -1 on a bad value. */
static int max_reply_from_env(size_t *ret_max) {
  const char *value = getenv("OPFORGE_MAX_REPLY_BYTES");
  *ret_max = CLI_MAX_REPLY_BYTES;
  if (!value || !*value)
    return 0;
  long long n = 0;
  if (cli_parse_int("OPFORGE_MAX_REPLY_BYTES", value, &n) != 0)
    return -1;
  if (n < 4096 || n > (long long)CLI_MAX_REPLY_BYTES) {
    fprintf(stderr, "error: OPFORGE_MAX_REPLY_BYTES must be 4096 to %u, got %lld\n",
            CLI_MAX_REPLY_BYTES, n);
    return -1;
  }
  *ret_max = (size_t)n;
  return 0;
}

void cli_client_set_quiet_too_large(struct cli_client *client, bool quiet) {
  client->quiet_too_large = quiet;
}

int cli_client_new(const char *server, const char *token_file, struct cli_client **ret_client) {
  if (!server || !*server)
    server = getenv("OPFORGE_SERVER");
  if (!server || !*server)
    server = CLI_DEFAULT_SERVER;
  size_t len = strlen(server);
  while (len > 0 && server[len - 1] == '/')
    len--;
  if (len == 0 || len >= CLI_MAX_URL - 512) {
    fprintf(stderr, "error: unusable server URL '%s'\n", server);
    return -1;
  }
  struct cli_client *client = calloc(1, sizeof *client);
  if (!client) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  memcpy(client->base, server, len);
  client->base[len] = '\0';
  client->retry_attempts = 6;
  client->retry_first_ms = 250;
  if (max_reply_from_env(&client->max_reply) != 0 || load_token(client, token_file) != 0) {
    free(client);
    return -1;
  }
  /* Refcounted by libcurl; matched in cli_client_free. */
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "error: cannot initialise libcurl\n");
    free(client);
    return -1;
  }
  client->easy = curl_easy_init();
  if (!client->easy) {
    fprintf(stderr, "error: cannot initialise libcurl\n");
    curl_global_cleanup();
    free(client);
    return -1;
  }
  *ret_client = client;
  return 0;
}

void cli_client_free(struct cli_client *client) {
  if (!client)
    return;
  curl_easy_cleanup(client->easy);
  curl_global_cleanup();
  /* The header holds the token; do not leave it in freed memory. */
  memset(client->auth_header, 0, sizeof client->auth_header);
  free(client);
}

const char *cli_client_base_url(const struct cli_client *client) {
  return client->base;
}

void cli_client_set_retry(struct cli_client *client, unsigned attempts, unsigned first_delay_ms) {
  client->retry_attempts = attempts;
  client->retry_first_ms = first_delay_ms;
}

char *cli_escape(const char *s) {
  /* libcurl takes a NULL handle here since 7.82. Its result must go back through
   * curl_free, so hand the caller plain malloc'ed memory instead. */
  char *esc = curl_easy_escape(NULL, s, 0);
  if (!esc)
    return NULL;
  char *out = strdup(esc);
  curl_free(esc);
  return out;
}

/* ---- small helpers for the subcommands ---- */

int cli_parse_int(const char *opt, const char *value, long long *ret) {
  errno = 0;
  char *end = NULL;
  long long v = strtoll(value, &end, 10);
  if (errno || end == value || *end || isspace((unsigned char)value[0])) {
    fprintf(stderr, "error: %s expects an integer, got '%s'\n", opt, value);
    return -1;
  }
  *ret = v;
  return 0;
}

void cli_format_speedup(const json_t *progress, char *out, size_t outlen) {
  const json_t *best = json_object_get(progress, "best_speedup");
  if (json_is_number(best))
    snprintf(out, outlen, "%.2fx", json_number_value(best));
  else
    snprintf(out, outlen, "-");
}

void cli_format_step(const json_t *progress, char *out, size_t outlen) {
  const json_t *step = json_object_get(progress, "step");
  const json_t *budget = json_object_get(progress, "budget_steps");
  if (json_is_integer(step) && json_is_integer(budget))
    snprintf(out, outlen, "%lld/%lld", (long long)json_integer_value(step),
             (long long)json_integer_value(budget));
  else
    snprintf(out, outlen, "-");
}

/* ---- error printing ---- */

void cli_print_server_error(long status, const json_t *body) {
  const char *code = NULL;
  const char *message = NULL;
  json_t *err = json_is_object(body) ? json_object_get(body, "error") : NULL;
  if (json_is_object(err)) {
    code = json_string_value(json_object_get(err, "code"));
    message = json_string_value(json_object_get(err, "message"));
  }
  if (code && message)
    fprintf(stderr, "error: %s: %s\n", code, message);
  else if (code)
    fprintf(stderr, "error: %s: (HTTP %ld)\n", code, status);
  else
    fprintf(stderr, "error: http_%ld: the server answered HTTP %ld without an error body\n",
            status, status);
}

bool cli_client_unreachable(const struct cli_client *client) {
  return client->unreachable;
}

/* Prints the `cannot reach` line for a failed transfer, and notes that it failed so. */
static void print_transport_error(struct cli_client *client, CURLcode rc,
                                  const char *errbuf) {
  client->unreachable = true;
  fprintf(stderr, "error: cannot reach %s: %s\n", client->base,
          errbuf && errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

/* ---- JSON requests ---- */

/* libcurl write callback: appends the reply to a struct buf, aborting past its max. */
static size_t collect_cb(char *ptr, size_t size, size_t nmemb, void *user) {
  struct buf *b = user;
  size_t n = size * nmemb;
  if (buf_append(b, ptr, n) != 0)
    return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
  return n;
}

/* Builds base + path into out (CLI_MAX_URL bytes); -1 when it does not fit. */
static int make_url(const struct cli_client *client, const char *path, char *out) {
  int n = snprintf(out, CLI_MAX_URL, "%s%s", client->base, path);
  if (n < 0 || n >= CLI_MAX_URL) {
    fprintf(stderr, "error: request URL too long\n");
    return -1;
  }
  return 0;
}

/* Adds the headers every request carries. Returns the list (the caller frees it with
 * curl_slist_free_all), or NULL when out of memory. */
static struct curl_slist *base_headers(const struct cli_client *client, const char *accept) {
  struct curl_slist *h = curl_slist_append(NULL, accept);
  if (h && client->auth_header[0]) {
    struct curl_slist *more = curl_slist_append(h, client->auth_header);
    if (!more) {
      curl_slist_free_all(h);
      return NULL;
    }
    h = more;
  }
  return h;
}

/* The headers of a JSON request, with a Content-Type when it has a body. Returns the list
 * (the caller frees it with curl_slist_free_all), or NULL when out of memory. */
static struct curl_slist *json_headers(const struct cli_client *client, bool has_body,
                                       const char *extra) {
  struct curl_slist *h = base_headers(client, "Accept: application/json");
  if (h && has_body) {
    struct curl_slist *more = curl_slist_append(h, "Content-Type: application/json");
    if (!more)
      curl_slist_free_all(h);
    h = more;
  }
  if (h && extra) {
    struct curl_slist *more = curl_slist_append(h, extra);
    if (!more)
      curl_slist_free_all(h);
    h = more;
  }
  return h;
}

/* Sets the options common to JSON requests and the event stream. */
static void set_common_opts(CURL *easy, const char *url, char *errbuf) {
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, USER_AGENT);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
}

/* Parses a reply body; an empty body gives NULL. -1 (printed) when it is not JSON. */
static int parse_reply(const char *url, long status, const struct buf *reply,
                       json_t **ret_json) {
  if (reply->len == 0) {
    *ret_json = NULL;
    return 0;
  }
  json_error_t jerr;
  json_t *json = json_loadb(reply->data, reply->len, 0, &jerr);
  if (!json) {
    if (status >= 400) {
      /* An error from something that is not opforge (a proxy, say): still report it. */
      *ret_json = NULL;
      return 0;
    }
    fprintf(stderr, "error: bad_reply: %s answered HTTP %ld with a body that is not JSON "
                    "(%s)\n", url, status, jerr.text);
    return -1;
  }
  *ret_json = json;
  return 0;
}

int cli_request(struct cli_client *client, const char *method, const char *path,
                const json_t *body, long *ret_status, json_t **ret_json) {
  return cli_request_with_header(client, method, path, NULL, body, ret_status, ret_json);
}

int cli_request_with_header(struct cli_client *client, const char *method, const char *path,
                            const char *header, const json_t *body, long *ret_status,
                            json_t **ret_json) {
  char url[CLI_MAX_URL];
  char errbuf[CURL_ERROR_SIZE] = "";
  if (make_url(client, path, url) != 0)
    return -1;
  char *payload = NULL;
  if (body && !(payload = json_dumps(body, JSON_COMPACT))) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  struct curl_slist *headers = json_headers(client, payload != NULL, header);
  if (!headers) {
    free(payload);
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  struct buf reply = {.max = client->max_reply};
  CURL *easy = client->easy;
  curl_easy_reset(easy);
  set_common_opts(easy, url, errbuf);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT, REQUEST_TIMEOUT_S);
  curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect_cb);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &reply);
  if (payload) {
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
  }
  client->unreachable = false;
  CURLcode rc = curl_easy_perform(easy);
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  free(payload);
  int ret = -1;
  json_t *json = NULL;
  if (rc == CURLE_WRITE_ERROR && reply.len + CURL_MAX_WRITE_SIZE > reply.max) {
    ret = CLI_REPLY_TOO_LARGE;
    if (!client->quiet_too_large)
      fprintf(stderr, "error: reply from %s exceeds %zu bytes\n", url, reply.max);
  } else if (rc != CURLE_OK)
    print_transport_error(client, rc, errbuf);
  else if (parse_reply(url, status, &reply, &json) == 0)
    ret = 0;
  buf_free(&reply);
  if (ret == 0) {
    *ret_status = status;
    *ret_json = json;
  }
  return ret;
}

int cli_call(struct cli_client *client, const char *method, const char *path,
             const json_t *body, json_t **ret_json) {
  long status = 0;
  json_t *json = NULL;
  int rc = cli_request(client, method, path, body, &status, &json);
  if (rc != 0)
    return rc;
  if (status < 200 || status > 299) {
    cli_print_server_error(status, json);
    json_decref(json);
    return -1;
  }
  *ret_json = json;
  return 0;
}

/* ---- the event-stream parser ---- */

struct cli_sse_parser {
  cli_sse_fn fn;
  void *user;
  struct buf line;
  struct buf data;
  char type[128];
  char id_buf[CLI_SSE_ID_MAX];  /* set by id: lines */
  char last_id[CLI_SSE_ID_MAX]; /* id_buf as of the last blank line: what a reconnect sends */
  long retry_ms;
  bool skip_lf;  /* the previous chunk ended in \r: a \n next is the same line end */
  bool at_start; /* a byte-order mark is allowed only here */
};

struct cli_sse_parser *cli_sse_parser_new(cli_sse_fn fn, void *user, const char *initial_id) {
  struct cli_sse_parser *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->fn = fn;
  p->user = user;
  p->line.max = CLI_SSE_MAX_EVENT;
  p->data.max = CLI_SSE_MAX_EVENT;
  p->retry_ms = -1;
  p->at_start = true;
  if (initial_id && strlen(initial_id) < sizeof p->last_id) {
    memcpy(p->last_id, initial_id, strlen(initial_id) + 1);
    memcpy(p->id_buf, initial_id, strlen(initial_id) + 1);
  }
  return p;
}

void cli_sse_parser_free(struct cli_sse_parser *parser) {
  if (!parser)
    return;
  buf_free(&parser->line);
  buf_free(&parser->data);
  free(parser);
}

const char *cli_sse_parser_last_id(const struct cli_sse_parser *parser) {
  return parser->last_id;
}

long cli_sse_parser_retry_ms(const struct cli_sse_parser *parser) {
  return parser->retry_ms;
}

/* A blank line ends an event: hand it over when it carried data, then start afresh. The
 * id counts as received only here, so a stream cut inside an event is resumed before it. */
static int sse_dispatch(struct cli_sse_parser *p) {
  int rc = 0;
  memcpy(p->last_id, p->id_buf, sizeof p->last_id);
  if (p->data.len > 0) {
    p->data.len--; /* the \n after the last data line */
    p->data.data[p->data.len] = '\0';
    struct cli_sse_event ev = {
        .id = p->last_id,
        .type = p->type[0] ? p->type : "message",
        .data = p->data.data,
        .data_len = p->data.len,
    };
    rc = p->fn(&ev, p->user);
  }
  p->data.len = 0;
  if (p->data.data)
    p->data.data[0] = '\0';
  p->type[0] = '\0';
  return rc;
}

/* Applies one field line (NUL-terminated in p->line). */
static int sse_field(struct cli_sse_parser *p, const char *line, size_t len) {
  const char *colon = memchr(line, ':', len);
  size_t name_len = colon ? (size_t)(colon - line) : len;
  const char *value = colon ? colon + 1 : line + len;
  if (*value == ' ')
    value++;
  size_t value_len = len - (size_t)(value - line);
  if (name_len == 4 && memcmp(line, "data", 4) == 0) {
    if (buf_append(&p->data, value, value_len) != 0 || buf_append(&p->data, "\n", 1) != 0)
      return -1;
  } else if (name_len == 5 && memcmp(line, "event", 5) == 0) {
    snprintf(p->type, sizeof p->type, "%.*s", (int)value_len, value);
  } else if (name_len == 2 && memcmp(line, "id", 2) == 0) {
    /* Ids with NUL are ignored by the standard; ones too long to echo back are too. */
    if (!memchr(value, '\0', value_len) && value_len < sizeof p->id_buf) {
      memcpy(p->id_buf, value, value_len);
      p->id_buf[value_len] = '\0';
    }
  } else if (name_len == 5 && memcmp(line, "retry", 5) == 0) {
    long ms = 0;
    size_t i = 0;
    for (; i < value_len && isdigit((unsigned char)value[i]) && ms < 1000000; i++)
      ms = ms * 10 + (value[i] - '0');
    if (value_len > 0 && i == value_len)
      p->retry_ms = ms;
  }
  return 0;
}

/* Handles the complete line in p->line: a blank line dispatches, ":" is a comment. */
static int sse_line(struct cli_sse_parser *p) {
  const char *line = p->line.data ? p->line.data : "";
  size_t len = p->line.len;
  if (p->at_start) {
    p->at_start = false;
    if (len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
      line += 3;
      len -= 3;
    }
  }
  if (len == 0)
    return sse_dispatch(p);
  if (line[0] == ':')
    return 0;
  return sse_field(p, line, len);
}

int cli_sse_parser_feed(struct cli_sse_parser *p, const char *buf, size_t len) {
  size_t i = 0;
  while (i < len) {
    if (p->skip_lf) {
      p->skip_lf = false;
      if (buf[i] == '\n') {
        i++;
        continue;
      }
    }
    size_t j = i;
    while (j < len && buf[j] != '\n' && buf[j] != '\r')
      j++;
    if (buf_append(&p->line, buf + i, j - i) != 0)
      return -1;
    if (j == len)
      break;
    p->skip_lf = buf[j] == '\r';
    int rc = sse_line(p);
    p->line.len = 0;
    if (rc != 0)
      return rc;
    i = j + 1;
  }
  return 0;
}

/* ---- following a stream ---- */

/* State of one connection attempt. */
struct attempt {
  CURL *easy;
  struct cli_sse_parser *parser;
  struct buf error_body; /* the body of a non-200 answer */
  int parser_rc;         /* non-zero once the parser or callback stopped the stream */
  unsigned events;       /* events dispatched on this connection */
  cli_sse_fn fn;
  void *user;
};

/* Counts events on their way to the caller's callback. */
static int count_event(const struct cli_sse_event *event, void *user) {
  struct attempt *a = user;
  a->events++;
  return a->fn(event, a->user);
}

/* libcurl write callback of a stream: a 200 body goes to the parser, any other body is
 * kept for the error message. Returning 0 aborts the transfer. */
static size_t stream_cb(char *ptr, size_t size, size_t nmemb, void *user) {
  struct attempt *a = user;
  size_t n = size * nmemb;
  long status = 0;
  curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    if (buf_append(&a->error_body, ptr, n) != 0)
      return 0;
    return n;
  }
  int rc = cli_sse_parser_feed(a->parser, ptr, n);
  if (rc != 0) {
    a->parser_rc = rc;
    return 0;
  }
  return n;
}

/* Whether a failed transfer is worth another connection. */
static bool retryable(CURLcode rc) {
  switch (rc) {
  case CURLE_COULDNT_CONNECT:
  case CURLE_PARTIAL_FILE:
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_HTTP2_STREAM:
    return true;
  default:
    return false;
  }
}

/* Sleeps ms milliseconds, resuming after signals. */
static void sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Runs one connection. Returns the curl result; *ret_status is the HTTP status. */
static CURLcode run_attempt(struct cli_client *client, const char *url, const char *last_id,
                            struct attempt *a, char *errbuf, long *ret_status) {
  char id_header[CLI_SSE_ID_MAX + 32];
  struct curl_slist *headers = base_headers(client, "Accept: text/event-stream");
  struct curl_slist *more = headers;
  if (headers && last_id[0]) {
    snprintf(id_header, sizeof id_header, "Last-Event-ID: %s", last_id);
    more = curl_slist_append(headers, id_header);
  }
  if (!more) {
    curl_slist_free_all(headers);
    snprintf(errbuf, CURL_ERROR_SIZE, "out of memory");
    return CURLE_OUT_OF_MEMORY;
  }
  headers = more;
  set_common_opts(a->easy, url, errbuf);
  curl_easy_setopt(a->easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(a->easy, CURLOPT_WRITEFUNCTION, stream_cb);
  curl_easy_setopt(a->easy, CURLOPT_WRITEDATA, a);
  /* No overall timeout: a task may run for hours. A silent connection is a dead one. */
  curl_easy_setopt(a->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(a->easy, CURLOPT_LOW_SPEED_TIME, SSE_STALL_S);
  CURLcode rc = curl_easy_perform(a->easy);
  long status = 0;
  curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  *ret_status = status;
  return rc;
}

/* One connection from start to end; updates last_id. Returns CLI_SSE_ENDED,
 * CLI_SSE_STOPPED, -1 for a final failure (printed), or -2 to retry (*ret_progress says
 * whether events arrived; *ret_retry_ms carries the stream's retry: when it sent one). */
static int follow_once(struct cli_client *client, CURL *easy, const char *url, char *last_id,
                       cli_sse_fn fn, void *user, bool final_try, bool *ret_progress,
                       long *ret_retry_ms) {
  char errbuf[CURL_ERROR_SIZE] = "";
  struct attempt a = {.easy = easy, .fn = fn, .user = user,
                      .error_body = {.max = ERROR_BODY_MAX}};
  a.parser = cli_sse_parser_new(count_event, &a, last_id);
  if (!a.parser) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  long status = 0;
  curl_easy_reset(easy);
  CURLcode rc = run_attempt(client, url, last_id, &a, errbuf, &status);
  snprintf(last_id, CLI_SSE_ID_MAX, "%s", cli_sse_parser_last_id(a.parser));
  *ret_progress = a.events > 0;
  *ret_retry_ms = cli_sse_parser_retry_ms(a.parser);
  cli_sse_parser_free(a.parser);
  int ret = -2;
  if (a.parser_rc > 0) {
    ret = CLI_SSE_STOPPED;
  } else if (a.parser_rc < 0) {
    if (a.parser_rc == -1)
      fprintf(stderr, "error: bad_stream: an event from %s exceeds %u bytes\n", url,
              CLI_SSE_MAX_EVENT);
    ret = -1;
  } else if (rc == CURLE_OK && status == 200) {
    ret = CLI_SSE_ENDED;
  } else if (rc == CURLE_OK && (status < 500 || final_try)) {
    json_t *body = json_loadb(a.error_body.data ? a.error_body.data : "", a.error_body.len,
                              0, NULL);
    cli_print_server_error(status, body);
    json_decref(body);
    ret = -1;
  } else if (rc != CURLE_OK && (!retryable(rc) || final_try)) {
    print_transport_error(client, rc, errbuf);
    ret = -1;
  }
  buf_free(&a.error_body);
  return ret;
}

int cli_sse_follow(struct cli_client *client, const char *path, char *last_id,
                   cli_sse_fn fn, void *user) {
  char url[CLI_MAX_URL];
  if (make_url(client, path, url) != 0)
    return -1;
  CURL *easy = curl_easy_init();
  if (!easy) {
    fprintf(stderr, "error: cannot initialise libcurl\n");
    return -1;
  }
  client->unreachable = false;
  unsigned failures = 0;
  unsigned delay = client->retry_first_ms;
  int ret;
  for (;;) {
    bool progress = false;
    long retry_ms = -1;
    bool final_try = failures >= client->retry_attempts;
    ret = follow_once(client, easy, url, last_id, fn, user, final_try, &progress, &retry_ms);
    if (ret != -2)
      break;
    if (progress) {
      failures = 0;
      delay = client->retry_first_ms;
    }
    failures++;
    sleep_ms(retry_ms >= 0 ? (unsigned)retry_ms : delay);
    delay = delay * 2 > RETRY_MAX_DELAY_MS ? RETRY_MAX_DELAY_MS : delay * 2;
  }
  curl_easy_cleanup(easy);
  return ret;
}

void cli_task_name(const char *path, char *out) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t len = strlen(base);
  if (len >= 3 && strcmp(base + len - 3, ".py") == 0)
    len -= 3;
  size_t n = 0;
  for (size_t i = 0; i < len && n < CLI_TASK_NAME_MAX; i++) {
    unsigned char ch = (unsigned char)base[i];
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
        ch == '_' || ch == '.' || ch == '-')
      out[n++] = (char)ch;
    else if ((ch & 0xC0) != 0x80) /* continuation bytes belong to the '_' already written */
      out[n++] = '_';
  }
  out[n] = '\0';
  if (n == 0)
    snprintf(out, CLI_TASK_NAME_MAX + 1, "task");
}
