/* `opforge submit`: sends a KernelBench reference program and optionally follows the task. */
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/submit_options.h"
#include "cli/tune_follow.h"
#include "cli/tune_progress.h"

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 128 /* the server's limit on an Idempotency-Key */

/* What the command line asked for. Strings point into argv. */
struct submit_opts {
  const char *file;
  const char *server;
  const char *token_file;
  const char *name;
  const char *key;          /* --idempotency-key */
  struct submit_options submission;
  bool wait, events;
};

/* Prints the help text. */
static void usage(FILE *out) {
  fputs("usage: opforge submit FILE.py [options]\n"
        "Submits a KernelBench reference program (at most 256 KiB) and prints the task id.\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --name N           task name (default: the file name without .py)\n",
        out);
  submit_options_usage(out);
  fputs("  --idempotency-key K  send K as the Idempotency-Key: the same K with the same\n"
        "                     submission within 24 h gives the same task back\n"
        "  --wait             follow the task until it ends; exit 0 only if it succeeded.\n"
        "                     On a terminal one live line; elsewhere one line per step\n"
        "  --events           with --wait, print each event as its JSON line instead\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_SERVER = 256, OPT_TOKEN_FILE, OPT_NAME, OPT_KEY, OPT_WAIT, OPT_EVENTS, OPT_HELP };

static const struct option long_opts[] = {
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"name", required_argument, NULL, OPT_NAME},
    {"idempotency-key", required_argument, NULL, OPT_KEY},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"events", no_argument, NULL, OPT_EVENTS},
    {"help", no_argument, NULL, OPT_HELP},
    SUBMIT_OPTION_ENTRIES,
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
  case OPT_KEY: o->key = arg; return 0;
  case OPT_WAIT: o->wait = true; return 0;
  case OPT_EVENTS: o->events = true; return 0;
  default: return submit_options_apply(&o->submission, c, arg) == 0 ? 0 : -1;
  }
}

static const struct cli_options submit_cli_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* ---- --wait ---- */

/* The follower's hooks: events to the view, its live line redrawn. */
struct waiter {
  struct tune_task *task;
  struct tune_view view;
};

/* The follower's hook: the event goes to the view (user: the waiter). */
static void on_event(void *user, size_t i, const json_t *event) {
  struct waiter *w = user;
  (void)i;
  tune_view_event(&w->view, w->task, event, false);
}

/* The follower's hook, twice a second: the live line is redrawn. */
static void on_tick(void *user) {
  struct waiter *w = user;
  tune_view_redraw(&w->view, w->task, 1, tune_now_wall());
}

/* Takes the task's final record (its error) and prints why it did not succeed. Returns
 * the exit status. */
static int task_outcome(struct cli_client *client, struct tune_task *t) {
  char path[CLI_MAX_URL];
  char *esc = cli_escape(t->id);
  json_t *task = NULL;
  long status = 0;
  if (esc) {
    snprintf(path, sizeof path, "/v1/tasks/%s", esc);
    if (cli_request(client, "GET", path, NULL, &status, &task) == 0 && status == 200)
      tune_task_take(t, task);
    json_decref(task);
  }
  free(esc);
  if (t->state == TUNE_SUCCEEDED)
    return CLI_EXIT_OK;
  if (t->state == TUNE_FAILED)
    fprintf(stderr, "error: %s: %s\n", t->error_code[0] ? t->error_code : "task_failed",
            t->error_message[0] ? t->error_message : "the task failed");
  else if (t->state == TUNE_LOST)
    fprintf(stderr, "error: task_not_found: the task was deleted while it was followed\n");
  return CLI_EXIT_FAIL;
}

/* Follows the task until its stream ends with the task final. Returns the exit status. */
static int wait_for_task(struct cli_client *client, struct tune_task *t, bool events) {
  struct waiter w = {.task = t};
  tune_view_init(&w.view, stdout, events, false);
  const struct tune_follow_hooks hooks = {.on_event = on_event, .on_tick = on_tick, .user = &w};
  tune_view_redraw(&w.view, t, 1, tune_now_wall());
  enum tune_follow_result rc = tune_follow(cli_client_base_url(client), t, 1, INFINITY, &hooks);
  tune_view_clear(&w.view);
  if (rc != TUNE_FOLLOW_DONE)
    return CLI_EXIT_FAIL; /* printed */
  return task_outcome(client, t);
}

/* ---- submitting ---- */

/* Posts the body; prints the id. Returns the exit status; t takes the task. */
static int post_task(struct cli_client *client, const json_t *body, const char *key,
                     struct tune_task *t) {
  char header[KEY_MAX + 32];
  long status = 0;
  json_t *task = NULL;
  if (key)
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
  if (cli_request_with_header(client, "POST", "/v1/tasks", key ? header : NULL, body, &status,
                              &task) != 0)
    return CLI_EXIT_FAIL;
  int ret = CLI_EXIT_OK;
  if (status < 200 || status > 299) {
    submit_print_refusal(status, task);
    ret = CLI_EXIT_FAIL;
  } else if (!json_is_string(json_object_get(task, "id"))) {
    fprintf(stderr, "error: bad_reply: the server's reply names no task id\n");
    ret = CLI_EXIT_FAIL;
  } else {
    tune_task_take(t, task);
    printf("%s\n", t->id);
    fflush(stdout);
  }
  json_decref(task);
  return ret;
}

int cli_submit_main(int argc, char **argv) {
  struct submit_opts o = {0};
  int ret = cli_parse_file_args(argc, argv, &submit_cli_options, &o, &o.file);
  if (ret < 0 && o.key && (strlen(o.key) == 0 || strlen(o.key) > KEY_MAX)) {
    fprintf(stderr, "error: --idempotency-key must be 1 to 128 characters\n");
    ret = CLI_EXIT_USAGE;
  }
  json_t *reference = NULL, *body = NULL;
  struct tune_task t;
  if (ret < 0) {
    tune_task_init(&t, o.file);
    if (o.name)
      snprintf(t.name, sizeof t.name, "%s", o.name);
    if (cli_read_program(o.file, CLI_REFERENCE_MAX, "a reference", &reference) != 0 ||
        !(body = submit_options_body(&o.submission, reference, o.name ? o.name : t.name)))
      ret = CLI_EXIT_USAGE;
  }
  struct cli_client *client = NULL;
  if (ret < 0 && cli_client_new(o.server, o.token_file, &client) != 0)
    ret = CLI_EXIT_USAGE;
  if (ret < 0) {
    ret = post_task(client, body, o.key, &t);
    if (ret == CLI_EXIT_OK && o.wait)
      ret = wait_for_task(client, &t, o.events);
  }
  json_decref(body);
  cli_client_free(client);
  submit_options_clear(&o.submission);
  return ret;
}
