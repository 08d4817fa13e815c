/* API test harness: runs the real opforge server on port 0 and drives it with libcurl. */
#ifndef OPFORGE_API_HARNESS_H
#define OPFORGE_API_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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

/* The server's --data directory (owned by the server; removed by server_stop). */
const char *server_data_dir(const struct server *server);

/* The server's process id. */
pid_t server_pid(const struct server *server);

/* ---- Child processes. These need no harness_init: tests that start the server (or
 * the CLI) their own way use them too. ---- */

/* Forks and execs argv[0] with argv (NULL-terminated) and envp (NULL: this process's
 * environment), stdout on a new pipe and stderr appended to the file log_path (this
 * process's stderr instead when $OPFORGE_TEST_VERBOSE is set). Everything passed stays the
 * caller's. Returns 0 and sets *ret_pid and *ret_stdout_fd (the pipe's read end, which the
 * caller closes; close-on-exec), or -1 after printing why. */
int harness_spawn(const char *const *argv, char *const *envp, const char *log_path,
                  pid_t *ret_pid, int *ret_stdout_fd);

/* Reads stdout_fd up to the server's first line, which must be `listening on
 * http://127.0.0.1:<port>`, and writes "http://127.0.0.1:<port>" into url (url_len
 * bytes). Returns 0, or -1 after printing why (another line, the end of the output, or no
 * line within timeout_ms). */
int harness_wait_listening(int stdout_fd, long timeout_ms, char *url, size_t url_len);

/* Waits up to timeout_ms for the child pid to exit. Returns its wait status, or -1 when it
 * still runs at the deadline or waitpid fails. */
int harness_wait_exit(pid_t pid, long timeout_ms);

/* Prints the last max_bytes of the file at path to stderr between two marker lines;
 * nothing when it cannot be opened. */
void harness_dump_log(const char *path, long max_bytes);

/* This process's environment without the variables whose names start with one of the
 * prefixes in drop (NULL-terminated; NULL drops none), followed by extra (NULL-terminated
 * "NAME=value" strings, or NULL). Built before fork because the child may only call
 * async-signal-safe functions. Returns a calloc'ed array of borrowed strings (the caller
 * frees the array alone, after the fork), or NULL when out of memory. */
char **harness_environment(const char *const *drop, char *const *extra);

/* Removes dir and everything below it (a test's temp dir); errors are ignored. */
void harness_remove_tree(const char *dir);

/* ---- The store of the servers a test starts: SQLite in --data (the default) or, when
 * $OPFORGE_TEST_PG holds the admin URL of a throwaway cluster (tests/pg/cluster), a
 * PostgreSQL database per data directory. scripts/test runs the suites both ways. ---- */

/* True in PostgreSQL mode. */
bool harness_pg(void);

/* The --store value for a server on the data directory data: a database of its own, the
 * same one every time for the same directory (a restart finds its tasks), created on first
 * use. NULL in SQLite mode. Static storage until the next call; fails the running test
 * when the database cannot be made. */
const char *harness_store_for(const char *data);

/* In PostgreSQL mode, appends "--store" and harness_store_for(data) at argv's first NULL
 * (argv has cap slots; the two after it must be free). Nothing in SQLite mode. */
void harness_add_store(const char **argv, size_t cap, const char *data);

/* In PostgreSQL mode, prints why and skips the running test (cmocka's skip): for tests of
 * what SQLite alone does (the database file, its locks, its WAL). */
void harness_sqlite_only(const char *why);

/* ---- Requests ---- */

/* Performs one request and checks the response against the spec. Fails the running
 * cmocka test on a transport error or a spec violation (see harness_deferred_violations). The caller frees the result
 * with http_response_free. */
struct http_response *http_do(struct server *server, const struct http_request *req);

/* http_do against the server at base_url ("http://127.0.0.1:<port>"), for a server the
 * test started itself. */
struct http_response *http_do_url(const char *base_url, const struct http_request *req);

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
