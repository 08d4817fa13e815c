/* API test harness: runs the real opforge server on port 0 and drives it with libcurl. */
#ifndef OPFORGE_API_HARNESS_H
#define OPFORGE_API_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tests/api/spec_check.h"

struct server;

/* How to start a server; zero-initialized means the defaults. */
struct server_opts {
  const char *token;             /* when set, written to a token file passed as --token-file */
  const char *const *extra_args; /* NULL-terminated extra arguments, or NULL */
};

/* One request. Only method and path are required. */
struct http_request {
  const char *method;          /* "GET", "POST", ... */
  const char *path;            /* request target (path and query), sent as is */
  const char *const *headers;  /* NULL-terminated "Name: value" lines, or NULL */
  const char *body;            /* request body, or NULL for none */
  size_t body_len;             /* its length; 0 means strlen(body) */
  const char *content_type;    /* NULL: application/json when there is a body; "": none */
  bool chunked;                /* send the body with Transfer-Encoding: chunked */
  size_t slow_chunk;           /* when > 0, send the body in pieces of this many bytes */
  unsigned slow_pause_ms;      /* and pause this long before each piece */
  long timeout_ms;             /* 0 means 15 s */
};

/* One response; all of it is owned by the struct. body is NUL-terminated (body_len does
 * not count the NUL). headers are those of the final response (after any 100). */
struct http_response {
  long status;
  char *body;
  size_t body_len;
  struct spec_header *headers;
  size_t n_headers;
};

/* Loads the spec (from $OPFORGE_OPENAPI_JSON, else openapi/openapi.json next to
 * $OPFORGE_BIN) and initializes libcurl. Returns 0, or -1 after printing why. Call once
 * before anything else; harness_cleanup undoes it. */
int harness_init(void);
void harness_cleanup(void);

/* The loaded spec (owned by the harness). */
struct spec *harness_spec(void);

/* Spec violations are fatal to the test that meets them, unless OPFORGE_SPEC_SOFT is
 * set (for triage): then they are printed and counted here, and the final coverage test
 * fails on a non-zero count. */
size_t harness_deferred_violations(void);

/* The path of $OPFORGE_BIN's built openapi.json (static storage). */
const char *harness_openapi_path(void);

/* Starts `$OPFORGE_BIN serve --listen 127.0.0.1:0 --data <new temp dir> --gpus none
 * [--token-file F] [extra args]` and waits (up to 20 s) for its line `listening on
 * http://127.0.0.1:<port>`. Its stderr goes to a log in the temp dir, printed when the
 * start or the stop fails. Returns 0 and the server (caller stops it with server_stop),
 * or -1 after printing why. opts may be NULL. */
int server_start(const struct server_opts *opts, struct server **ret_server);

/* Sends SIGTERM, waits up to 20 s, and frees the server and its temp dir. Returns 0 when
 * the process exited with status 0 and wrote nothing more to stdout, else -1 after
 * printing why (a server that does not stop is killed). Accepts NULL (returns 0). */
int server_stop(struct server *server);

/* "http://127.0.0.1:<port>" (owned by the server). */
const char *server_url(const struct server *server);

/* Performs one request and checks the response against the spec. Fails the running
 * cmocka test on a transport error or a spec violation (see harness_deferred_violations). The caller frees the result
 * with http_response_free. */
struct http_response *http_do(struct server *server, const struct http_request *req);

/* Shorthands for http_do: a GET, and a request with a NUL-terminated JSON body (or
 * NULL) and optional NULL-terminated extra headers. */
struct http_response *http_get(struct server *server, const char *path);
struct http_response *http_send(struct server *server, const char *method, const char *path,
                                const char *body, const char *const *headers);

/* Performs all n requests at once over n connections (curl multi) and checks each
 * response. Returns an array of n responses (caller frees each and the array with
 * http_responses_free). */
struct http_response **http_do_all(struct server *server, const struct http_request *reqs,
                                   size_t n);
void http_responses_free(struct http_response **responses, size_t n);

/* A request whose response is read while the test does other things (Server-Sent
 * Events). */
struct http_stream;

/* Starts the request; the caller finishes it with http_stream_finish. */
struct http_stream *http_stream_open(struct server *server, const struct http_request *req);

/* Reads until the body so far contains needle; false on timeout or when the response
 * ended without it. */
bool http_stream_wait_for(struct http_stream *stream, const char *needle, long timeout_ms);

/* Reads until the response ends (failing the test after timeout_ms), checks it against
 * the spec, frees the stream and returns the response (caller frees). */
struct http_response *http_stream_finish(struct http_stream *stream, long timeout_ms);

/* The value of the first header named name (case-insensitive), or NULL. Borrowed. */
const char *http_header(const struct http_response *resp, const char *name);

/* The body parsed as JSON (new reference); fails the test when it is not JSON. */
json_t *http_json(const struct http_response *resp);

/* Frees a response. Accepts NULL. */
void http_response_free(struct http_response *resp);

#endif
