/* `opforge submit`: sends a KernelBench reference program and optionally follows the task. */
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/client.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FOLLOW_ROUNDS 5 /* streams that end while the task is not final */

/* What the command line asked for. Strings point into argv. */
struct submit_opts {
  const char *file;
  const char *server;
  const char *token_file;
  const char *name;
  const char *policy;
  const char *proposer;
  const char *precision;
  long long steps, seconds, trials, seed;
  bool has_steps, has_seconds, has_trials, has_seed;
  bool wait;
};

/* Prints the help text. */
static void usage(FILE *out) {
  fputs("usage: opforge submit FILE.py [options]\n"
        "Submits a KernelBench reference program (at most 256 KiB) and prints the task id.\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --name N           task name (default: the file name without .py)\n"
        "  --policy P         single|refine|flat|htam|tree|htam+tree\n"
        "  --proposer P       builtin|llm|test\n"
        "  --steps N          step budget\n"
        "  --seconds N        time budget in seconds\n"
        "  --precision P      fp32|tf32|bf16\n"
        "  --trials N         correctness trials\n"
        "  --seed N           random seed\n"
        "  --wait             follow the task until it ends; exit 0 only if it succeeded\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_SERVER = 256, OPT_TOKEN_FILE, OPT_NAME, OPT_POLICY, OPT_PROPOSER, OPT_STEPS,
       OPT_SECONDS, OPT_PRECISION, OPT_TRIALS, OPT_SEED, OPT_WAIT, OPT_HELP };

static const struct option long_opts[] = {
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"name", required_argument, NULL, OPT_NAME},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"proposer", required_argument, NULL, OPT_PROPOSER},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"trials", required_argument, NULL, OPT_TRIALS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Stores one parsed option in opts (a struct submit_opts). Returns 0, or -1 after
 * printing why. */
static int apply_opt(void *opts, int c, const char *arg) {
  struct submit_opts *o = opts;
  switch (c) {
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_TOKEN_FILE: o->token_file = arg; return 0;
  case OPT_NAME: o->name = arg; return 0;
  case OPT_POLICY: o->policy = arg; return 0;
  case OPT_PROPOSER: o->proposer = arg; return 0;
  case OPT_PRECISION: o->precision = arg; return 0;
  case OPT_WAIT: o->wait = true; return 0;
  case OPT_STEPS: o->has_steps = true; return cli_parse_int("--steps", arg, &o->steps);
  case OPT_SECONDS: o->has_seconds = true; return cli_parse_int("--seconds", arg, &o->seconds);
  case OPT_TRIALS: o->has_trials = true; return cli_parse_int("--trials", arg, &o->trials);
  case OPT_SEED: o->has_seed = true; return cli_parse_int("--seed", arg, &o->seed);
  default: return -1;
  }
}

static const struct cli_options submit_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* Builds the submission around reference (a JSON string, taken over). Returns a new
 * reference the caller releases, or NULL after printing why. */
static json_t *build_body(const struct submit_opts *o, json_t *reference) {
  json_t *body = json_object();
  char name[CLI_TASK_NAME_MAX + 1];
  cli_task_name(o->file, name);
  int rc = body ? 0 : -1;
  rc |= cli_json_put(body, "reference", reference);
  rc |= cli_json_put(body, "name", json_string(o->name ? o->name : name));
  if (o->policy)
    rc |= cli_json_put(body, "policy", json_string(o->policy));
  if (o->proposer)
    rc |= cli_json_put(body, "proposer", json_string(o->proposer));
  if (o->precision)
    rc |= cli_json_put(body, "precision", json_string(o->precision));
  if (o->has_trials)
    rc |= cli_json_put(body, "trials", json_integer(o->trials));
  if (o->has_seed)
    rc |= cli_json_put(body, "seed", json_integer(o->seed));
  if (o->has_steps || o->has_seconds) {
    json_t *budget = json_object();
    if (o->has_steps)
      rc |= cli_json_put(budget, "steps", json_integer(o->steps));
    if (o->has_seconds)
      rc |= cli_json_put(budget, "seconds", json_integer(o->seconds));
    rc |= cli_json_put(body, "budget", budget); /* filled first: body takes it over */
  }
  if (rc != 0) {
    fprintf(stderr, "error: out of memory (or a --name that is not UTF-8)\n");
    json_decref(body);
    return NULL;
  }
  return body;
}

/* ---- --wait ---- */

struct waiter {
  struct cli_client *client;
  char task_path[128];
  bool tty;
  bool line_open; /* a progress line is on screen without its newline */
};

/* Fetches the task; NULL (printed) when that fails. The caller releases the result. */
static json_t *fetch_task(struct waiter *w) {
  json_t *task = NULL;
  if (cli_call(w->client, "GET", w->task_path, NULL, &task) != 0)
    return NULL;
  if (!json_is_object(task)) {
    fprintf(stderr, "error: bad_reply: the task is not a JSON object\n");
    json_decref(task);
    return NULL;
  }
  return task;
}

/* Whether status (NULL allowed) is one a task never leaves. */
static bool is_final(const char *status) {
  return status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                    strcmp(status, "cancelled") == 0);
}

/* Rewrites the one progress line from the task's current state. */
static void draw_progress(struct waiter *w, const json_t *task) {
  const json_t *progress = json_object_get(task, "progress");
  const char *status = json_string_value(json_object_get(task, "status"));
  char step[48], best[48];
  cli_format_step(progress, step, sizeof step);
  cli_format_speedup(progress, best, sizeof best);
  printf("\r%s  step %s  best %s\033[K", status ? status : "?", step, best);
  fflush(stdout);
  w->line_open = true;
}

/* Prints one event as a plain line: time, type, and the event's data when not empty. */
static void print_event_line(const struct cli_sse_event *ev) {
  json_t *msg = json_loadb(ev->data, ev->data_len, 0, NULL);
  const char *time_s = json_string_value(json_object_get(msg, "time"));
  const char *type = json_string_value(json_object_get(msg, "type"));
  json_t *data = json_object_get(msg, "data");
  char *data_s = NULL;
  if (data && !json_is_null(data) && !(json_is_object(data) && json_object_size(data) == 0))
    data_s = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
  if (msg)
    printf("%s %s%s%s\n", time_s ? time_s : "-", type ? type : ev->type, data_s ? " " : "",
           data_s ? data_s : "");
  else /* not the agreed shape: show it as it came */
    printf("- %s %s\n", ev->type, ev->data);
  fflush(stdout);
  free(data_s);
  json_decref(msg);
}

/* The SSE callback of --wait: a plain line per event, or a redrawn progress line on a
 * terminal. Never stops the stream: the server ends it once the task is final. */
static int on_event(const struct cli_sse_event *ev, void *user) {
  struct waiter *w = user;
  if (!w->tty) {
    print_event_line(ev);
    return 0;
  }
  /* Events carry per-type data; the task itself is the one place with the whole state. */
  json_t *task = fetch_task(w);
  if (task)
    draw_progress(w, task);
  json_decref(task);
  return 0;
}

/* Follows the events until the stream ends with the task final. Returns the exit status. */
static int wait_for_task(struct cli_client *client, const char *id) {
  struct waiter w = {.client = client, .tty = isatty(STDOUT_FILENO) == 1};
  char *esc = cli_escape(id);
  char events_path[160];
  if (!esc) {
    fprintf(stderr, "error: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  snprintf(w.task_path, sizeof w.task_path, "/v1/tasks/%s", esc);
  snprintf(events_path, sizeof events_path, "/v1/tasks/%s/events", esc);
  free(esc);
  char last_id[CLI_SSE_ID_MAX] = "";
  json_t *task = NULL;
  for (int round = 0; round < MAX_FOLLOW_ROUNDS; round++) {
    json_decref(task);
    task = NULL;
    if (cli_sse_follow(client, events_path, last_id, on_event, &w) < 0)
      break;
    task = fetch_task(&w);
    if (!task || is_final(json_string_value(json_object_get(task, "status"))))
      break;
    /* The stream ended early (a restarting server, say): pick it up where it stopped. */
    struct timespec pause = {.tv_sec = 1};
    nanosleep(&pause, NULL);
  }
  const char *status = task ? json_string_value(json_object_get(task, "status")) : NULL;
  if (task && w.tty)
    draw_progress(&w, task);
  if (w.line_open)
    putchar('\n');
  fflush(stdout);
  int ret = CLI_EXIT_FAIL;
  if (status && strcmp(status, "succeeded") == 0) {
    ret = CLI_EXIT_OK;
  } else if (status && strcmp(status, "failed") == 0) {
    json_t *err = json_object_get(task, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *msg = json_string_value(json_object_get(err, "message"));
    fprintf(stderr, "error: %s: %s\n", code ? code : "task_failed", msg ? msg : "the task failed");
  } else if (task && !is_final(status)) {
    fprintf(stderr, "error: the event stream ended while the task is still %s\n",
            status ? status : "unknown");
  }
  json_decref(task);
  return ret;
}

/* Posts the body; prints the id. Returns the exit status; *ret_id gets a malloc'ed copy
 * of the id on success (the caller frees it). */
static int post_task(struct cli_client *client, const json_t *body, char **ret_id) {
  json_t *task = NULL;
  if (cli_call(client, "POST", "/v1/tasks", body, &task) != 0)
    return CLI_EXIT_FAIL;
  const char *id = json_string_value(json_object_get(task, "id"));
  if (!id) {
    fprintf(stderr, "error: bad_reply: the server's reply names no task id\n");
    json_decref(task);
    return CLI_EXIT_FAIL;
  }
  printf("%s\n", id);
  fflush(stdout);
  char *copy = strdup(id);
  json_decref(task);
  if (!copy) {
    fprintf(stderr, "error: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  *ret_id = copy;
  return CLI_EXIT_OK;
}

int cli_submit_main(int argc, char **argv) {
  struct submit_opts o = {0};
  int ret = cli_parse_file_args(argc, argv, &submit_options, &o, &o.file);
  if (ret >= 0)
    return ret;
  json_t *reference = NULL;
  if (cli_read_program(o.file, CLI_REFERENCE_MAX, "a reference", &reference) != 0)
    return CLI_EXIT_USAGE;
  json_t *body = build_body(&o, reference);
  if (!body)
    return CLI_EXIT_USAGE;
  struct cli_client *client = NULL;
  if (cli_client_new(o.server, o.token_file, &client) != 0) {
    json_decref(body);
    return CLI_EXIT_USAGE;
  }
  char *id = NULL;
  ret = post_task(client, body, &id);
  json_decref(body);
  if (ret == CLI_EXIT_OK && o.wait)
    ret = wait_for_task(client, id);
  free(id);
  cli_client_free(client);
  return ret;
}
