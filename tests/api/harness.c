/* API test harness: the opforge child process, libcurl requests, spec check of each reply. */
#include "tests/api/harness.h"

#include <curl/curl.h>
#include <libpq-fe.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#define DEFAULT_TIMEOUT_MS 15000L
#define START_TIMEOUT_MS 20000L
#define STOP_TIMEOUT_MS 20000L

struct server {
  pid_t pid;
  int stdout_fd;
  char dir[PATH_MAX];
  char data[PATH_MAX + 8];
  char url[64];
};

/* A request in flight: the easy handle and everything it points into. */
struct transfer {
  CURL *easy;
  struct curl_slist *req_headers;
  struct http_response *resp;
  size_t body_cap;
  const char *method;
  const char *path;
  const char *upload;
  size_t upload_len, upload_pos, chunk;
  unsigned pause_ms;
  char curl_err[CURL_ERROR_SIZE];
};

struct http_stream {
  CURLM *multi;
  struct transfer t;
  bool done;
  CURLcode result;
};

static struct spec *g_spec;
static size_t g_soft_violations;
static char g_openapi_path[PATH_MAX];

/* ---------------------------------------------------------------- setup */

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int harness_init(void) {
  const char *bin = getenv("OPFORGE_BIN");
  const char *override = getenv("OPFORGE_OPENAPI_JSON");
  if (override) {
    snprintf(g_openapi_path, sizeof g_openapi_path, "%s", override);
  } else if (bin) {
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", bin);
    snprintf(g_openapi_path, sizeof g_openapi_path, "%s/openapi/openapi.json", dirname(copy));
  } else {
    fprintf(stderr, "harness: set OPFORGE_BIN (meson test does)\n");
    return -1;
  }
  char err[1024];
  if (spec_load_file(g_openapi_path, &g_spec, err, sizeof err) != 0) {
    fprintf(stderr, "harness: cannot load the spec: %s\n", err);
    return -1;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "harness: curl_global_init failed\n");
    return -1;
  }
  return 0;
}

void harness_cleanup(void) {
  spec_free(g_spec);
  g_spec = NULL;
  curl_global_cleanup();
}

struct spec *harness_spec(void) {
  return g_spec;
}

size_t harness_deferred_violations(void) {
  return g_soft_violations;
}

const char *harness_openapi_path(void) {
  return g_openapi_path;
}

/* ---------------------------------------------------------------- child processes */

/* nftw callback: removes one entry (children first, by FTW_DEPTH). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void harness_remove_tree(const char *dir) {
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void harness_dump_log(const char *path, long max_bytes) {
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, size > max_bytes ? size - max_bytes : 0, SEEK_SET);
  fprintf(stderr, "---- %s (last %ld KiB) ----\n", path, max_bytes / 1024);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    fwrite(buf, 1, n, stderr);
  fprintf(stderr, "---- end of %s ----\n", path);
  fclose(f);
}

/* True when the variable name=value starts with one of the NULL-terminated prefixes. */
static bool has_prefix(const char *var, const char *const *prefixes) {
  for (size_t i = 0; prefixes && prefixes[i]; i++)
    if (strncmp(var, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

char **harness_environment(const char *const *drop, char *const *extra) {
  size_t n = 0, n_extra = 0;
  while (environ[n])
    n++;
  while (extra && extra[n_extra])
    n_extra++;
  char **envp = calloc(n + n_extra + 1, sizeof *envp);
  if (!envp)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!has_prefix(environ[i], drop))
      envp[k++] = environ[i];
  for (size_t i = 0; i < n_extra; i++)
    envp[k++] = extra[i];
  return envp;
}

int harness_spawn(const char *const *argv, char *const *envp, const char *log_path,
                  pid_t *ret_pid, int *ret_stdout_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    perror("pipe2");
    return -1;
  }
  int log_fd = getenv("OPFORGE_TEST_VERBOSE")
                   ? dup(2)
                   : open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    perror(log_path);
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(log_fd, 2);
    execve(argv[0], (char *const *)argv, envp ? envp : environ);
    static const char msg[] = "harness: exec of the child failed\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  close(fds[1]);
  close(log_fd);
  if (pid < 0) {
    perror("fork");
    close(fds[0]);
    return -1;
  }
  *ret_pid = pid;
  *ret_stdout_fd = fds[0];
  return 0;
}

int harness_wait_listening(int stdout_fd, long timeout_ms, char *url, size_t url_len) {
  char line[256];
  size_t len = 0;
  long deadline = now_ms() + timeout_ms;
  while (now_ms() < deadline) {
    struct pollfd pfd = {.fd = stdout_fd, .events = POLLIN};
    if (poll(&pfd, 1, 100) <= 0)
      continue;
    char c;
    ssize_t n = read(stdout_fd, &c, 1);
    if (n <= 0) {
      fprintf(stderr, "harness: server stdout closed before the listening line\n");
      return -1;
    }
    if (c != '\n') {
      if (len + 1 < sizeof line)
        line[len++] = c;
      continue;
    }
    line[len] = '\0';
    unsigned port = 0;
    char rest = 0;
    if (sscanf(line, "listening on http://127.0.0.1:%u%c", &port, &rest) != 1 || port == 0 ||
        port > 65535) {
      fprintf(stderr, "harness: unexpected stdout line from the server: '%s'\n", line);
      return -1;
    }
    snprintf(url, url_len, "http://127.0.0.1:%u", port);
    return 0;
  }
  fprintf(stderr, "harness: no listening line within %ld ms\n", timeout_ms);
  return -1;
}

int harness_wait_exit(pid_t pid, long timeout_ms) {
  long deadline = now_ms() + timeout_ms;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return status;
    if (r < 0 || now_ms() > deadline)
      return -1;
    usleep(10000);
  }
}

/* ---------------------------------------------------------------- store */

bool harness_pg(void) {
  const char *admin = getenv("OPFORGE_TEST_PG");
  return admin && *admin;
}

void harness_sqlite_only(const char *why) {
  if (!harness_pg())
    return;
  fprintf(stderr, "skipped under PostgreSQL: %s\n", why);
  skip();
}

void harness_add_store(const char **argv, size_t cap, const char *data) {
  static char copies[8][1024];
  static unsigned next;
  const char *store = harness_store_for(data);
  if (!store)
    return;
  size_t n = 0;
  while (n < cap && argv[n])
    n++;
  if (n + 2 >= cap)
    fail_msg("harness: no room for --store in argv");
  char *copy = copies[next++ % 8];
  snprintf(copy, sizeof copies[0], "%s", store);
  argv[n] = "--store";
  argv[n + 1] = copy;
  argv[n + 2] = NULL;
}

/* FNV-1a of text, for a database name that a path always maps to. */
static unsigned long long fnv1a(const char *text) {
  unsigned long long h = 1469598103934665603ULL;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return h;
}

/* admin ("postgresql://[authority]/postgres?query") with the database name replaced. */
static void url_with_database(const char *admin, const char *name, char *out, size_t len) {
  const char *authority = strstr(admin, "://");
  authority = authority ? authority + 3 : admin;
  const char *path = strchr(authority, '/');
  const char *query = strchr(authority, '?');
  if (!path || (query && query < path))
    path = query ? query : authority + strlen(authority);
  snprintf(out, len, "%.*s/%s%s", (int)(path - admin), admin, name, query ? query : "");
}

const char *harness_store_for(const char *data) {
  static char url[1024];
  if (!harness_pg())
    return NULL;
  char resolved[PATH_MAX], name[64];
  snprintf(name, sizeof name, "opf_%016llx",
           fnv1a(realpath(data, resolved) ? resolved : data));
  const char *admin = getenv("OPFORGE_TEST_PG");
  PGconn *conn = PQconnectdb(admin);
  if (PQstatus(conn) != CONNECTION_OK)
    fail_msg("harness: cannot connect to %s: %s", admin, PQerrorMessage(conn));
  char sql[128];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  PGresult *res = PQexec(conn, sql);
  const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
  bool ok = PQresultStatus(res) == PGRES_COMMAND_OK || (state && strcmp(state, "42P04") == 0);
  if (!ok)
    fail_msg("harness: %s: %s", sql, PQerrorMessage(conn));
  PQclear(res);
  PQfinish(conn);
  url_with_database(admin, name, url, sizeof url);
  return url;
}

/* ---------------------------------------------------------------- server */

/* Prints the last few KiB of the server's stderr log, for failed starts and stops. */
static void dump_log(const struct server *server) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/server.log", server->dir);
  harness_dump_log(path, 8192);
}

/* Builds argv for the child; the strings are borrowed from the caller and opts. */
static void build_argv(const char *bin, const char *data,
                       const char *token_file, const struct server_opts *opts,
                       const char **argv, size_t cap) {
  size_t n = 0;
  const char *fixed[] = {bin, "serve", "--listen", "127.0.0.1:0", "--data", data,
                         "--gpus", "none"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    argv[n++] = fixed[i];
  const char *data_used = data; /* a later --data among the extra arguments wins */
  for (size_t i = 0; opts && opts->extra_args && opts->extra_args[i]; i++)
    if (strcmp(opts->extra_args[i], "--data") == 0 && opts->extra_args[i + 1])
      data_used = opts->extra_args[i + 1];
  const char *store = harness_store_for(data_used);
  if (store) {
    static char store_copy[1024];
    snprintf(store_copy, sizeof store_copy, "%s", store);
    argv[n++] = "--store";
    argv[n++] = store_copy;
  }
  if (token_file) {
    argv[n++] = "--token-file";
    argv[n++] = token_file;
  }
  for (size_t i = 0; opts && opts->extra_args && opts->extra_args[i] && n + 1 < cap; i++)
    argv[n++] = opts->extra_args[i];
  argv[n] = NULL;
}

/* Starts the child with stdout on a pipe and stderr in the log, in an environment without
 * OPFORGE_* variables: the server reads those as option defaults, and only the arguments
 * the test passes may configure it. */
static int spawn(struct server *server, const char *const *argv) {
  static const char *const drop[] = {"OPFORGE_", NULL};
  char **envp = harness_environment(drop, NULL);
  if (!envp) {
    fprintf(stderr, "harness: out of memory\n");
    return -1;
  }
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/server.log", server->dir);
  int rc = harness_spawn(argv, envp, log, &server->pid, &server->stdout_fd);
  free(envp);
  return rc;
}

/* Creates the temp dir, its data dir and the token file. */
static int make_dirs(struct server *server, const struct server_opts *opts, char *data,
                     size_t data_len, char *token_file, size_t token_len) {
  snprintf(server->dir, sizeof server->dir, "/tmp/opforge-api-XXXXXX");
  if (!mkdtemp(server->dir)) {
    perror("mkdtemp");
    return -1;
  }
  snprintf(data, data_len, "%s/data", server->dir);
  if (mkdir(data, 0700) != 0) {
    perror("mkdir");
    return -1;
  }
  if (!opts || !opts->token)
    return 0;
  snprintf(token_file, token_len, "%s/token", server->dir);
  FILE *f = fopen(token_file, "w");
  if (!f || fprintf(f, "%s\n", opts->token) < 0 || fclose(f) != 0) {
    perror(token_file);
    return -1;
  }
  return 0;
}

int server_start(const struct server_opts *opts, struct server **ret_server) {
  const char *bin = getenv("OPFORGE_BIN");
  if (!bin) {
    fprintf(stderr, "harness: OPFORGE_BIN is not set\n");
    return -1;
  }
  struct server *server = calloc(1, sizeof *server);
  if (!server)
    return -1;
  server->pid = -1;
  server->stdout_fd = -1;
  char data[PATH_MAX + 8], token_file[PATH_MAX + 8] = "";
  const char *argv[64];
  if (make_dirs(server, opts, data, sizeof data, token_file, sizeof token_file) != 0)
    goto fail;
  snprintf(server->data, sizeof server->data, "%s", data);
  build_argv(bin, data, token_file[0] ? token_file : NULL, opts, argv,
             sizeof argv / sizeof argv[0]);
  if (spawn(server, argv) != 0)
    goto fail;
  if (harness_wait_listening(server->stdout_fd, START_TIMEOUT_MS, server->url,
                             sizeof server->url) != 0) {
    dump_log(server);
    goto fail;
  }
  *ret_server = server;
  return 0;
fail:
  if (server->pid > 0) {
    kill(server->pid, SIGKILL);
    waitpid(server->pid, NULL, 0);
    server->pid = -1;
  }
  server_stop(server);
  return -1;
}

int server_stop(struct server *server) {
  if (!server)
    return 0;
  int rc = 0;
  if (server->pid > 0) {
    kill(server->pid, SIGTERM);
    int status = harness_wait_exit(server->pid, STOP_TIMEOUT_MS);
    if (status == -1) {
      fprintf(stderr, "harness: server did not exit within %ld ms of SIGTERM\n",
              STOP_TIMEOUT_MS);
      kill(server->pid, SIGKILL);
      waitpid(server->pid, NULL, 0);
      rc = -1;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "harness: server ended with %s %d after SIGTERM (want exit 0)\n",
              WIFEXITED(status) ? "exit status" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      rc = -1;
    }
  }
  if (server->stdout_fd >= 0) {
    /* Poll first: a process that inherited the pipe could keep read() from returning. */
    struct pollfd pfd = {.fd = server->stdout_fd, .events = POLLIN};
    char extra[256];
    ssize_t n = poll(&pfd, 1, 0) == 1 ? read(server->stdout_fd, extra, sizeof extra - 1) : 0;
    if (n > 0) {
      extra[n] = '\0';
      fprintf(stderr, "harness: server wrote more to stdout: '%s'\n", extra);
      rc = -1;
    }
    close(server->stdout_fd);
  }
  if (rc != 0)
    dump_log(server);
  if (server->dir[0])
    harness_remove_tree(server->dir);
  free(server);
  return rc;
}

const char *server_url(const struct server *server) {
  return server->url;
}

const char *server_data_dir(const struct server *server) {
  return server->data;
}

pid_t server_pid(const struct server *server) {
  return server->pid;
}

/* ---------------------------------------------------------------- requests */

/* Fails the running test with a message; never returns. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  print_error("%s\n", msg);
  fail();
  abort(); /* fail() does not return; this tells the compiler so */
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
  struct transfer *t = user;
  struct http_response *r = t->resp;
  size_t n = size * nmemb;
  if (r->body_len + n + 1 > t->body_cap) {
    size_t cap = t->body_cap ? t->body_cap : 4096;
    while (cap < r->body_len + n + 1)
      cap *= 2;
    char *grown = realloc(r->body, cap);
    if (!grown)
      return 0;
    r->body = grown;
    t->body_cap = cap;
  }
  memcpy(r->body + r->body_len, data, n);
  r->body_len += n;
  r->body[r->body_len] = '\0';
  return n;
}

static void free_headers(struct http_response *r) {
  for (size_t i = 0; i < r->n_headers; i++) {
    free((char *)r->headers[i].name);
    free((char *)r->headers[i].value);
  }
  free(r->headers);
  r->headers = NULL;
  r->n_headers = 0;
}

/* Keeps the headers of the last response only: a status line (an interim 100 Continue
 * and then the real one) starts the list over. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *user) {
  struct transfer *t = user;
  struct http_response *r = t->resp;
  size_t n = size * nmemb;
  if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
    free_headers(r);
    return n;
  }
  const char *colon = memchr(data, ':', n);
  if (!colon)
    return n;
  const char *value = colon + 1, *end = data + n;
  while (value < end && (*value == ' ' || *value == '\t'))
    value++;
  while (end > value && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
    end--;
  struct spec_header *grown = realloc(r->headers, (r->n_headers + 1) * sizeof *grown);
  if (!grown)
    return 0;
  r->headers = grown;
  char *name = strndup(data, (size_t)(colon - data));
  char *val = strndup(value, (size_t)(end - value));
  if (!name || !val) {
    free(name);
    free(val);
    return 0; /* curl aborts the transfer; transfer_end reports it */
  }
  r->headers[r->n_headers].name = name;
  r->headers[r->n_headers].value = val;
  r->n_headers++;
  return n;
}

/* Hands the body to curl a few bytes at a time, pausing before each piece, to play a
 * slow client. */
static size_t on_read(char *buf, size_t size, size_t nmemb, void *user) {
  struct transfer *t = user;
  size_t left = t->upload_len - t->upload_pos;
  size_t n = left < t->chunk ? left : t->chunk;
  n = n < size * nmemb ? n : size * nmemb;
  if (n == 0)
    return 0;
  if (t->pause_ms)
    usleep(t->pause_ms * 1000u);
  memcpy(buf, t->upload + t->upload_pos, n);
  t->upload_pos += n;
  return n;
}

/* Sets the body of t's request: all at once, or slowly through on_read. */
static void setup_body(struct transfer *t, const struct http_request *req) {
  CURL *e = t->easy;
  size_t len = req->body_len ? req->body_len : strlen(req->body);
  if (req->slow_chunk > 0 || req->chunked) {
    t->upload = req->body;
    t->upload_len = len;
    t->chunk = req->slow_chunk > 0 ? req->slow_chunk : 16384;
    t->pause_ms = req->slow_pause_ms;
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, t);
  } else {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
  }
  /* Without a size curl sends the body chunked. */
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, req->chunked ? (curl_off_t)-1 : (curl_off_t)len);
  if (strcmp(req->method, "POST") != 0)
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
}

/* Prepares t for req against the server at base_url. The caller performs it and calls transfer_end. */
static void transfer_begin(struct transfer *t, const char *base_url,
                           const struct http_request *req) {
  memset(t, 0, sizeof *t);
  t->method = req->method;
  t->path = req->path;
  t->resp = calloc(1, sizeof *t->resp);
  t->easy = curl_easy_init();
  if (!t->resp || !t->easy)
    die("out of memory");
  size_t url_len = strlen(base_url) + strlen(req->path) + 1;
  char *url = malloc(url_len);
  if (!url)
    die("out of memory");
  snprintf(url, url_len, "%s%s", base_url, req->path);
  CURL *e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, url);
  free(url); /* curl keeps its own copy */
  curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->curl_err);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms ? req->timeout_ms : DEFAULT_TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
  /* No 100-continue round trip, so every request takes the same path into the server. */
  t->req_headers = curl_slist_append(NULL, "Expect:");
  if (req->body) {
    setup_body(t, req);
    const char *ctype = req->content_type ? req->content_type : "application/json";
    char line[256];
    snprintf(line, sizeof line, "Content-Type:%s%s", ctype[0] ? " " : "", ctype);
    t->req_headers = curl_slist_append(t->req_headers, line);
  } else if (strcmp(req->method, "HEAD") == 0) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (strcmp(req->method, "GET") != 0) {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
  }
  for (size_t i = 0; req->headers && req->headers[i]; i++)
    t->req_headers = curl_slist_append(t->req_headers, req->headers[i]);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->req_headers);
}

/* Checks the finished transfer and the response against the spec; returns the
 * response (caller frees) and releases everything else. */
static struct http_response *transfer_end(struct transfer *t, CURLcode result) {
  if (result != CURLE_OK)
    die("%s %.200s: transport error: %s (%s)", t->method, t->path, curl_easy_strerror(result),
        t->curl_err);
  struct http_response *r = t->resp;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r->status);
  if (!r->body) {
    r->body = calloc(1, 1);
    if (!r->body)
      die("out of memory");
  }
  curl_slist_free_all(t->req_headers);
  curl_easy_cleanup(t->easy);
  struct spec_exchange ex = {
    .method = t->method, .target = t->path, .status = r->status, .headers = r->headers,
    .n_headers = r->n_headers, .body = r->body, .body_len = r->body_len,
  };
  char err[2048];
  if (spec_check_response(g_spec, &ex, err, sizeof err) != 0) {
    if (!getenv("OPFORGE_SPEC_SOFT"))
      die("%s %.200s: spec violation: %s\n  body: %.600s", t->method, t->path, err, r->body);
    g_soft_violations++;
    print_error("%s %.200s: spec violation (deferred by OPFORGE_SPEC_SOFT): %s\n  body: %.600s\n",
                t->method, t->path, err, r->body);
  }
  return r;
}

struct http_response *http_do_url(const char *base_url, const struct http_request *req) {
  struct transfer t;
  transfer_begin(&t, base_url, req);
  CURLcode rc = curl_easy_perform(t.easy);
  return transfer_end(&t, rc);
}

struct http_response *http_do(struct server *server, const struct http_request *req) {
  return http_do_url(server->url, req);
}

struct http_response *http_get(struct server *server, const char *path) {
  struct http_request req = {.method = "GET", .path = path};
  return http_do(server, &req);
}

struct http_response *http_send(struct server *server, const char *method, const char *path,
                                const char *body, const char *const *headers) {
  struct http_request req = {.method = method, .path = path, .body = body, .headers = headers};
  return http_do(server, &req);
}

/* Runs the multi handle until every transfer is done or the deadline passes; stores
 * each result in results (indexed like ts). */
static void run_multi(CURLM *multi, struct transfer *ts, size_t n, CURLcode *results,
                      long timeout_ms) {
  long deadline = now_ms() + timeout_ms;
  size_t done = 0;
  while (done < n) {
    int running = 0;
    curl_multi_perform(multi, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
      if (msg->msg != CURLMSG_DONE)
        continue;
      for (size_t i = 0; i < n; i++)
        if (ts[i].easy == msg->easy_handle) {
          results[i] = msg->data.result;
          done++;
        }
    }
    if (done < n && now_ms() > deadline)
      die("%zu of %zu concurrent requests unfinished after %ld ms", n - done, n, timeout_ms);
    if (done < n)
      curl_multi_poll(multi, NULL, 0, 100, NULL);
  }
}

struct http_response **http_do_all(struct server *server, const struct http_request *reqs,
                                   size_t n) {
  CURLM *multi = curl_multi_init();
  struct transfer *ts = calloc(n, sizeof *ts);
  CURLcode *results = calloc(n, sizeof *results);
  struct http_response **out = calloc(n, sizeof *out);
  if (!multi || !ts || !results || !out)
    die("out of memory");
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)n);
  long timeout = 0;
  for (size_t i = 0; i < n; i++) {
    transfer_begin(&ts[i], server->url, &reqs[i]);
    /* All at once: one fresh connection per request, none reused. */
    curl_easy_setopt(ts[i].easy, CURLOPT_FRESH_CONNECT, 1L);
    curl_multi_add_handle(multi, ts[i].easy);
    long t = reqs[i].timeout_ms ? reqs[i].timeout_ms : DEFAULT_TIMEOUT_MS;
    timeout = t > timeout ? t : timeout;
  }
  run_multi(multi, ts, n, results, timeout + 1000);
  for (size_t i = 0; i < n; i++) {
    curl_multi_remove_handle(multi, ts[i].easy);
    out[i] = transfer_end(&ts[i], results[i]);
  }
  curl_multi_cleanup(multi);
  free(ts);
  free(results);
  return out;
}

void http_responses_free(struct http_response **responses, size_t n) {
  if (!responses)
    return;
  for (size_t i = 0; i < n; i++)
    http_response_free(responses[i]);
  free(responses);
}

/* ---------------------------------------------------------------- streams */

struct http_stream *http_stream_open(struct server *server, const struct http_request *req) {
  struct http_stream *s = calloc(1, sizeof *s);
  if (!s || !(s->multi = curl_multi_init()))
    die("out of memory");
  transfer_begin(&s->t, server->url, req);
  curl_multi_add_handle(s->multi, s->t.easy);
  return s;
}

/* Advances the stream once, waiting up to wait_ms for data. */
static void stream_step(struct http_stream *s, int wait_ms) {
  int running = 0;
  curl_multi_perform(s->multi, &running);
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(s->multi, &left)))
    if (msg->msg == CURLMSG_DONE) {
      s->done = true;
      s->result = msg->data.result;
    }
  if (!s->done)
    curl_multi_poll(s->multi, NULL, 0, wait_ms, NULL);
}

bool http_stream_wait_for(struct http_stream *s, const char *needle, long timeout_ms) {
  long deadline = now_ms() + timeout_ms;
  for (;;) {
    const struct http_response *r = s->t.resp;
    if (r->body && memmem(r->body, r->body_len, needle, strlen(needle)))
      return true;
    if (s->done || now_ms() > deadline)
      return false;
    stream_step(s, 50);
  }
}

struct http_response *http_stream_finish(struct http_stream *s, long timeout_ms) {
  long deadline = now_ms() + timeout_ms;
  while (!s->done) {
    if (now_ms() > deadline)
      die("%s %s: response did not end within %ld ms; body so far: %.600s", s->t.method,
          s->t.path, timeout_ms, s->t.resp->body ? s->t.resp->body : "");
    stream_step(s, 50);
  }
  curl_multi_remove_handle(s->multi, s->t.easy);
  curl_multi_cleanup(s->multi);
  CURLcode result = s->result;
  struct transfer t = s->t;
  free(s);
  return transfer_end(&t, result);
}

/* ---------------------------------------------------------------- responses */

const char *http_header(const struct http_response *resp, const char *name) {
  for (size_t i = 0; i < resp->n_headers; i++)
    if (strcasecmp(resp->headers[i].name, name) == 0)
      return resp->headers[i].value;
  return NULL;
}

json_t *http_json(const struct http_response *resp) {
  json_error_t jerr;
  json_t *doc = json_loadb(resp->body, resp->body_len, JSON_DECODE_ANY, &jerr);
  if (!doc)
    die("response body is not JSON (%s): %.400s", jerr.text, resp->body);
  return doc;
}

void http_response_free(struct http_response *resp) {
  if (!resp)
    return;
  free_headers(resp);
  free(resp->body);
  free(resp);
}
