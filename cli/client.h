/* The command-line side's HTTP client: JSON requests, an SSE follower, error printing. */
#ifndef OPFORGE_CLI_CLIENT_H
#define OPFORGE_CLI_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define CLI_DEFAULT_SERVER "http://127.0.0.1:8080"
#define CLI_MAX_URL 2048
#define CLI_MAX_TOKEN 256
#define CLI_MAX_REPLY_BYTES (64u * 1024u * 1024u) /* a reply larger than this is refused;
                                                      $OPFORGE_MAX_REPLY_BYTES lowers it */
#define CLI_REPLY_TOO_LARGE (-2) /* cli_request, cli_call: the reply was over the limit */
#define CLI_SSE_ID_MAX 128                         /* longest Last-Event-ID kept */
#define CLI_SSE_MAX_EVENT (4u * 1024u * 1024u)     /* longest line or event data kept */

/* Exit statuses shared by the subcommands. */
enum cli_exit {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAIL = 1,  /* the server said no, could not be reached, or the task failed */
  CLI_EXIT_USAGE = 2, /* bad options or an unusable input file */
  /* `opforge tune` tells these apart from CLI_EXIT_FAIL, so a CI job can react: */
  CLI_EXIT_UNREACHABLE = 3, /* the server could not be reached */
  CLI_EXIT_AUTH = 4,        /* the server refused the token (401, 403) */
  CLI_EXIT_WAIT_LIMIT = 5,  /* --wait-limit passed with tasks unfinished */
};

struct cli_client;

/* Creates a client. server: the base URL, or NULL for $OPFORGE_SERVER, else
 * CLI_DEFAULT_SERVER; trailing slashes are dropped. token_file: a file whose first
 * non-empty line not starting with '#' is the bearer token, or NULL for $OPFORGE_TOKEN,
 * else $OPFORGE_TOKEN_FILE, else no token. Prints `error: ...` and returns -1 when the
 * URL or the token is unusable. *ret_client is set only on success; the caller frees it
 * with cli_client_free. */
int cli_client_new(const char *server, const char *token_file, struct cli_client **ret_client);

/* Frees the client; NULL is a no-op. */
void cli_client_free(struct cli_client *client);

/* The base URL without a trailing slash (owned by the client). */
const char *cli_client_base_url(const struct cli_client *client);

/* Sets how the SSE follower retries a dropped or refused connection: at most attempts
 * times in a row (0: never), waiting first_delay_ms, then doubling up to 8 s; a
 * connection that delivered events resets the count. Defaults: 6 and 250 ms. */
void cli_client_set_retry(struct cli_client *client, unsigned attempts, unsigned first_delay_ms);

/* Whether cli_request keeps quiet about a reply over the limit (it still returns
 * CLI_REPLY_TOO_LARGE): for a caller that asks again for less, such as a paged fetch
 * that halves its page. Default false. */
void cli_client_set_quiet_too_large(struct cli_client *client, bool quiet);

/* Sends one request. path starts with '/' and is appended to the base URL as given
 * (escape ids first with cli_escape). body, when not NULL, is sent as JSON and stays the
 * caller's. On an answer of any HTTP status returns 0, sets *ret_status, and sets
 * *ret_json to the parsed reply (the caller's reference; NULL when the reply was empty).
 * When the server cannot be reached, prints `error: cannot reach <url>: <reason>` and
 * returns -1; when the reply is not JSON, prints why and returns -1; when it is over the
 * limit (CLI_MAX_REPLY_BYTES or $OPFORGE_MAX_REPLY_BYTES), prints so unless quiet
 * (cli_client_set_quiet_too_large) and returns CLI_REPLY_TOO_LARGE. */
int cli_request(struct cli_client *client, const char *method, const char *path,
                const json_t *body, long *ret_status, json_t **ret_json);

/* cli_request with one more request header (header: a whole "Name: value" line, copied;
 * NULL for none), such as an Idempotency-Key. */
int cli_request_with_header(struct cli_client *client, const char *method, const char *path,
                            const char *header, const json_t *body, long *ret_status,
                            json_t **ret_json);

/* Whether the client's last request (cli_request*, or a connection of cli_sse_follow)
 * failed because the server could not be reached (no connection, a timeout, a
 * connection dropped before the answer), as opposed to an answer it did not like. */
bool cli_client_unreachable(const struct cli_client *client);

/* cli_request, and then the common case: returns 0 with *ret_json (the caller's
 * reference, possibly NULL) when the status is 2xx; otherwise prints the server's error
 * with cli_print_server_error and returns -1 (cli_request's own failures return its
 * value). */
int cli_call(struct cli_client *client, const char *method, const char *path,
             const json_t *body, json_t **ret_json);

/* Prints `error: <code>: <message>` to stderr from the API error shape in body, or a
 * line naming the HTTP status when body lacks that shape. body stays the caller's. */
void cli_print_server_error(long status, const json_t *body);

/* Percent-escapes s for use as one path segment. Returns a malloc'ed string the caller
 * frees, or NULL when out of memory. */
char *cli_escape(const char *s);

/* Parses value as a decimal integer for option opt. On anything else prints
 * `error: <opt> expects an integer, got '<value>'` and returns -1; *ret is set only on
 * success. */
int cli_parse_int(const char *opt, const char *value, long long *ret);

/* Writes a task's best speed-up ("1.42x", or "-" when none yet) from its progress
 * object (NULL allowed) into out. */
void cli_format_speedup(const json_t *progress, char *out, size_t outlen);

/* Writes a task's "step/budget" from its progress object (NULL allowed) into out. */
void cli_format_step(const json_t *progress, char *out, size_t outlen);

/* One Server-Sent Event, valid only during the callback. */
struct cli_sse_event {
  const char *id;   /* last event id seen on the stream; "" when none */
  const char *type; /* the event field, "message" when the stream named none */
  const char *data; /* data lines joined with '\n', NUL-terminated */
  size_t data_len;
};

/* Called once per dispatched event. Returns 0 to go on, a positive value to stop the
 * stream (cli_sse_follow then returns CLI_SSE_STOPPED), a negative value to fail it. */
typedef int (*cli_sse_fn)(const struct cli_sse_event *event, void *user);

/* The event-stream parser (the text/event-stream rules of the HTML standard: \n, \r\n
 * and \r line ends, comments, multi-line data, id and retry fields). */
struct cli_sse_parser;

/* Creates a parser that calls fn(…, user) per event; initial_id is the id reported
 * until the stream sets one (NULL for ""). Returns NULL when out of memory; the caller
 * frees the parser with cli_sse_parser_free. */
struct cli_sse_parser *cli_sse_parser_new(cli_sse_fn fn, void *user, const char *initial_id);

/* Frees the parser; NULL is a no-op. A partial event still buffered is dropped, as the
 * standard says to do when a connection ends. */
void cli_sse_parser_free(struct cli_sse_parser *parser);

/* Feeds len bytes. Returns 0, the callback's positive value when it asked to stop, the
 * callback's negative value, or -1 when a line or event exceeds CLI_SSE_MAX_EVENT or
 * memory runs out. */
int cli_sse_parser_feed(struct cli_sse_parser *parser, const char *buf, size_t len);

/* The id of the last complete event block (what a reconnect sends as Last-Event-ID;
 * owned by the parser). An id inside a block cut off by the end of the stream does not
 * count. */
const char *cli_sse_parser_last_id(const struct cli_sse_parser *parser);

/* The reconnection delay the stream asked for with retry:, or -1 when it did not. */
long cli_sse_parser_retry_ms(const struct cli_sse_parser *parser);

enum {
  CLI_SSE_ENDED = 0,   /* the server ended the stream cleanly */
  CLI_SSE_STOPPED = 1, /* the callback asked to stop */
};

/* Follows the event stream at path, calling fn per event. last_id (a buffer of
 * CLI_SSE_ID_MAX bytes, "" for the start) is sent as Last-Event-ID and updated as events
 * arrive, so a caller may follow again where it left off. A dropped or refused connection
 * is retried with Last-Event-ID (see cli_client_set_retry); so is a 5xx answer. Returns
 * CLI_SSE_ENDED or CLI_SSE_STOPPED; on a 4xx answer, on retries running out, or when the
 * callback fails, prints the error and returns -1. */
int cli_sse_follow(struct cli_client *client, const char *path, char *last_id,
                   cli_sse_fn fn, void *user);

/* Longest task name the server accepts. */
#define CLI_TASK_NAME_MAX 128

/* Writes the default task name for path into out (CLI_TASK_NAME_MAX + 1 bytes): the base
 * name without .py, with each character outside [A-Za-z0-9_.-] replaced by one '_';
 * "task" when nothing is left. */
void cli_task_name(const char *path, char *out);

#endif
