/* `opforge best`: a task's best correct candidate as JSON, or as a KernelBench file. */
#include "cli/best.h"
#include "cli/args.h"
#include "cli/client.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#define CONNECT_TIMEOUT_S 10L
#define REQUEST_TIMEOUT_S 120L

struct best_opts {
  const char *id;
  const char *format;
  const char *output;
  const char *server;
  bool generated; /* ?generated=true: the fastest correct candidate with generated code */
  bool elementwise; /* ?elementwise=true: no own-input check judged by the float64 budget */
};

/* Prints the help text. */
static void usage(FILE *out) {
  fputs("usage: opforge best ID [options]\n"
        "Fetches the best correct candidate of a task.\n"
        "  --format F         cuda (default): its CUDA source, options and launch plan as "
        "JSON;\n"
        "                     kernelbench: a Python file defining ModelNew, a drop-in for\n"
        "                     the task's Model (for a best of library steps only, one\n"
        "                     with a kernel where it can: the file's head says which)\n"
        "  --generated        when the best runs library steps only, the fastest correct\n"
        "                     candidate that runs generated code, whatever its speed\n"
        "  --elementwise      the fastest correct candidate whose every check on the\n"
        "                     task's own inputs passed its element-wise tolerance, none\n"
        "                     by the float64 accuracy budget (KernelBench's eval runs\n"
        "                     get_inputs() and compares element-wise)\n"
        "  -o, --output FILE  write to FILE (only once the server answered) instead of "
        "stdout\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_FORMAT = 256, OPT_SERVER, OPT_GENERATED, OPT_ELEMENTWISE, OPT_HELP };

static const struct option long_opts[] = {
    {"format", required_argument, NULL, OPT_FORMAT},
    {"generated", no_argument, NULL, OPT_GENERATED},
    {"elementwise", no_argument, NULL, OPT_ELEMENTWISE},
    {"output", required_argument, NULL, 'o'},
    {"server", required_argument, NULL, OPT_SERVER},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Stores one parsed option in opts (a struct best_opts). Returns 0, or -1 for a code it
 * does not know. */
static int apply_opt(void *opts, int c, const char *arg) {
  struct best_opts *o = opts;
  switch (c) {
  case OPT_FORMAT: o->format = arg; return 0;
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_GENERATED: o->generated = true; return 0;
  case OPT_ELEMENTWISE: o->elementwise = true; return 0;
  case 'o': o->output = arg; return 0;
  default: return -1;
  }
}

static const struct cli_options best_options = {
    .shortopts = ":o:", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* Parses argv. Returns -1 to go on, else the exit status to return at once. */
static int parse_args(int argc, char **argv, struct best_opts *o) {
  int rc = cli_parse_options(argc, argv, &best_options, o);
  if (rc >= 0)
    return rc;
  if (optind != argc - 1) {
    fprintf(stderr, "error: expected one task ID\n");
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  o->id = argv[optind];
  if (strcmp(o->format, "cuda") != 0 && strcmp(o->format, "kernelbench") != 0) {
    fprintf(stderr, "error: --format must be cuda or kernelbench, got '%s'\n", o->format);
    return CLI_EXIT_USAGE;
  }
  return -1;
}

/* Writes len bytes of data to path (or stdout when path is NULL). Returns 0, or -1 after
 * printing why. */
static int write_output(const char *path, const char *data, size_t len) {
  FILE *f = path ? fopen(path, "w") : stdout;
  if (!f) {
    fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  bool ok = fwrite(data, 1, len, f) == len;
  ok = (path ? fclose(f) == 0 : fflush(f) == 0) && ok;
  if (!ok)
    fprintf(stderr, "error: cannot write %s: %s\n", path ? path : "standard output",
            strerror(errno));
  return ok ? 0 : -1;
}

/* ---- format cuda: a JSON request through the shared client ---- */

static int best_cuda(struct cli_client *client, const char *path, const struct best_opts *o) {
  json_t *best = NULL;
  if (cli_call(client, "GET", path, NULL, &best) != 0)
    return CLI_EXIT_FAIL;
  char *text = json_dumps(best, JSON_INDENT(2));
  int rc = CLI_EXIT_FAIL;
  if (!text) {
    fprintf(stderr, "error: out of memory\n");
  } else {
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps leaves room for the NUL, which becomes a newline */
    if (write_output(o->output, text, len + 1) == 0)
      rc = CLI_EXIT_OK;
  }
  free(text);
  if (rc == CLI_EXIT_OK) {
    const json_t *speedup = json_object_get(best, "speedup");
    const json_t *ms = json_object_get(best, "time_ms");
    fprintf(stderr, "candidate %s: ", json_string_value(json_object_get(best, "candidate_id")));
    if (json_is_number(speedup))
      fprintf(stderr, "%.2fx over eager, ", json_number_value(speedup));
    if (json_is_number(ms))
      fprintf(stderr, "%.4g ms\n", json_number_value(ms));
    else
      fputs("no CUDA timing\n", stderr);
  }
  json_decref(best);
  return rc;
}

/* ---- format kernelbench: a text reply, which the JSON client would refuse ---- */

/* A reply body, capped at CLI_MAX_REPLY_BYTES. */
struct reply {
  char *data;
  size_t len, cap;
};

/* libcurl write callback: appends to a struct reply; returning 0 aborts the transfer. */
static size_t collect(char *ptr, size_t size, size_t nmemb, void *user) {
  struct reply *r = user;
  size_t n = size * nmemb;
  if (n > CLI_MAX_REPLY_BYTES - r->len)
    return 0;
  if (r->len + n + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 65536;
    while (cap < r->len + n + 1)
      cap *= 2;
    char *grown = realloc(r->data, cap);
    if (!grown)
      return 0;
    r->data = grown;
    r->cap = cap;
  }
  memcpy(r->data + r->len, ptr, n);
  r->len += n;
  r->data[r->len] = '\0';
  return n;
}

/* GETs url into *reply and sets *ret_status. Returns 0, or -1 after printing why. */
static int fetch(const char *base, const char *url, struct reply *reply, long *ret_status) {
  char errbuf[CURL_ERROR_SIZE] = "";
  CURL *easy = curl_easy_init();
  struct curl_slist *headers = curl_slist_append(NULL, "Accept: text/x-python, application/json");
  if (!easy || !headers) {
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    fprintf(stderr, "error: cannot initialise libcurl\n");
    return -1;
  }
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "opforge-cli/0.1");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT, REQUEST_TIMEOUT_S);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, reply);
  CURLcode rc = curl_easy_perform(easy);
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, ret_status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(easy);
  if (rc == CURLE_WRITE_ERROR)
    fprintf(stderr, "error: reply from %s exceeds %u bytes or memory ran out\n", url,
            CLI_MAX_REPLY_BYTES);
  else if (rc != CURLE_OK)
    fprintf(stderr, "error: cannot reach %s: %s\n", base,
            errbuf[0] ? errbuf : curl_easy_strerror(rc));
  return rc == CURLE_OK ? 0 : -1;
}

static int best_kernelbench(struct cli_client *client, const char *path,
                            const struct best_opts *o) {
  char url[CLI_MAX_URL];
  const char *base = cli_client_base_url(client);
  int n = snprintf(url, sizeof url, "%s%s", base, path);
  if (n < 0 || (size_t)n >= sizeof url) {
    fprintf(stderr, "error: request URL too long\n");
    return CLI_EXIT_USAGE;
  }
  struct reply reply = {NULL, 0, 0};
  long status = 0;
  int rc = CLI_EXIT_FAIL;
  if (fetch(base, url, &reply, &status) == 0) {
    if (status == 200) {
      if (write_output(o->output, reply.data ? reply.data : "", reply.len) == 0)
        rc = CLI_EXIT_OK;
    } else {
      json_t *err = reply.data ? json_loadb(reply.data, reply.len, 0, NULL) : NULL;
      cli_print_server_error(status, err);
      json_decref(err);
    }
  }
  free(reply.data);
  if (rc == CLI_EXIT_OK && o->output)
    fprintf(stderr,
            "wrote %s (%zu bytes): exec it after the reference program, in its namespace "
            "(as KernelBench's eval does), and use ModelNew in place of Model\n",
            o->output, reply.len);
  return rc;
}

int cli_best_main(int argc, char **argv) {
  struct best_opts o = {.format = "cuda"};
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0)
    return rc;
  struct cli_client *client = NULL;
  if (cli_client_new(o.server, NULL, &client) != 0)
    return CLI_EXIT_USAGE;
  char *id = cli_escape(o.id);
  char path[CLI_MAX_URL];
  if (!id) {
    fprintf(stderr, "error: out of memory\n");
    rc = CLI_EXIT_FAIL;
  } else if ((size_t)snprintf(path, sizeof path, "/v1/tasks/%s/best?format=%s%s%s", id,
                              o.format, o.generated ? "&generated=true" : "",
                              o.elementwise ? "&elementwise=true" : "") >= sizeof path) {
    fprintf(stderr, "error: task ID too long\n");
    rc = CLI_EXIT_USAGE;
  } else {
    rc = strcmp(o.format, "cuda") == 0 ? best_cuda(client, path, &o)
                                       : best_kernelbench(client, path, &o);
  }
  free(id);
  cli_client_free(client);
  return rc;
}
