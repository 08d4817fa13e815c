/* `opforge status`: a table of tasks, or the details of one task. */
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/client.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LIMIT 50
#define MAX_LIMIT 100000 /* tasks one invocation lists, over several pages */
#define PAGE_MAX 500     /* the server's largest page */

struct status_opts {
  const char *id;
  const char *server;
  const char *token_file;
  const char *status;
  long long limit;
  bool has_limit;
};

/* Prints the help text. */
static void usage(FILE *out) {
  fputs("usage: opforge status [ID] [options]\n"
        "Lists tasks, newest first, or shows one task.\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --status S         only tasks in state S (queued|running|succeeded|failed|"
        "cancelled)\n"
        "  --limit N          list at most N tasks (default 50)\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_SERVER = 256, OPT_TOKEN_FILE, OPT_STATUS, OPT_LIMIT, OPT_HELP };

static const struct option long_opts[] = {
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"status", required_argument, NULL, OPT_STATUS},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Checks the options that do not fit together. Returns -1 to go on, else an exit status. */
static int check_args(int argc, char **argv, struct status_opts *o) {
  if (optind < argc - 1) {
    fprintf(stderr, "error: expected at most one task ID\n");
    return CLI_EXIT_USAGE;
  }
  o->id = optind < argc ? argv[optind] : NULL;
  if (o->id && (o->status || o->has_limit)) {
    fprintf(stderr, "error: --status and --limit apply to the list, not to one task\n");
    return CLI_EXIT_USAGE;
  }
  if (o->has_limit && (o->limit < 1 || o->limit > MAX_LIMIT)) {
    fprintf(stderr, "error: --limit must be 1..%d\n", MAX_LIMIT);
    return CLI_EXIT_USAGE;
  }
  return -1;
}

/* Stores one parsed option in opts (a struct status_opts). Returns 0, or -1 after
 * printing why. */
static int apply_opt(void *opts, int c, const char *arg) {
  struct status_opts *o = opts;
  switch (c) {
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_TOKEN_FILE: o->token_file = arg; return 0;
  case OPT_STATUS: o->status = arg; return 0;
  case OPT_LIMIT: o->has_limit = true; return cli_parse_int("--limit", arg, &o->limit);
  default: return -1;
  }
}

static const struct cli_options status_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* Parses argv. Returns -1 to go on, else the exit status to return at once. */
static int parse_args(int argc, char **argv, struct status_opts *o) {
  int rc = cli_parse_options(argc, argv, &status_options, o);
  return rc >= 0 ? rc : check_args(argc, argv, o);
}

/* A string member, or "-" when it is absent or not a string. */
static const char *str_or_dash(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  return s && *s ? s : "-";
}

/* ---- the list ---- */

enum { COL_ID, COL_NAME, COL_STATUS, COL_STEP, COL_BEST, COL_CREATED, N_COLS };

/* Writes one row's cells into cells (N_COLS buffers of 160 bytes). */
static void row_cells(const json_t *task, char cells[N_COLS][160]) {
  const json_t *progress = json_object_get(task, "progress");
  snprintf(cells[COL_ID], 160, "%s", str_or_dash(task, "id"));
  snprintf(cells[COL_NAME], 160, "%s", str_or_dash(task, "name"));
  snprintf(cells[COL_STATUS], 160, "%s", str_or_dash(task, "status"));
  cli_format_step(progress, cells[COL_STEP], 160);
  cli_format_speedup(progress, cells[COL_BEST], 160);
  snprintf(cells[COL_CREATED], 160, "%s", str_or_dash(task, "created_at"));
}

/* Prints the tasks in items (a JSON array, the caller's) as an aligned table. */
static void print_table(const json_t *items) {
  static const char *const heads[N_COLS] = {"ID", "NAME", "STATUS", "STEP", "BEST", "CREATED"};
  int width[N_COLS];
  char cells[N_COLS][160];
  for (int c = 0; c < N_COLS; c++)
    width[c] = (int)strlen(heads[c]);
  size_t i;
  const json_t *task;
  json_array_foreach(items, i, task) {
    row_cells(task, cells);
    for (int c = 0; c < N_COLS; c++)
      if ((int)strlen(cells[c]) > width[c])
        width[c] = (int)strlen(cells[c]);
  }
  printf("%-*s  %-*s  %-*s  %*s  %*s  %s\n", width[0], heads[0], width[1], heads[1], width[2],
         heads[2], width[3], heads[3], width[4], heads[4], heads[5]);
  json_array_foreach(items, i, task) {
    row_cells(task, cells);
    printf("%-*s  %-*s  %-*s  %*s  %*s  %s\n", width[0], cells[0], width[1], cells[1],
           width[2], cells[2], width[3], cells[3], width[4], cells[4], cells[5]);
  }
}

/* Builds the path of one page into out (CLI_MAX_URL bytes). -1 when out of memory. */
static int page_path(const struct status_opts *o, long long limit, const char *cursor,
                     char *out) {
  char *status = o->status ? cli_escape(o->status) : NULL;
  char *cur = cursor ? cli_escape(cursor) : NULL;
  int rc = (o->status && !status) || (cursor && !cur) ? -1 : 0;
  int n = snprintf(out, CLI_MAX_URL, "/v1/tasks?limit=%lld%s%s%s%s", limit,
                   status ? "&status=" : "", status ? status : "", cur ? "&cursor=" : "",
                   cur ? cur : "");
  if (n < 0 || n >= CLI_MAX_URL)
    rc = -1;
  free(status);
  free(cur);
  return rc;
}

/* Fetches pages until the limit or the end. Returns the exit status. */
static int list_tasks(struct cli_client *client, const struct status_opts *o) {
  long long want = o->has_limit ? o->limit : DEFAULT_LIMIT;
  json_t *all = json_array();
  json_t *page = NULL;
  char *cursor = NULL;
  int ret = all ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  bool more = false;
  while (ret == CLI_EXIT_OK && (long long)json_array_size(all) < want) {
    long long left = want - (long long)json_array_size(all);
    char path[CLI_MAX_URL];
    if (page_path(o, left < PAGE_MAX ? left : PAGE_MAX, cursor, path) != 0 ||
        cli_call(client, "GET", path, NULL, &page) != 0) {
      ret = CLI_EXIT_FAIL;
      break;
    }
    json_t *items = json_object_get(page, "items");
    const char *next = json_string_value(json_object_get(page, "next_cursor"));
    if (!json_is_array(items)) {
      fprintf(stderr, "error: bad_reply: the task list has no items array\n");
      ret = CLI_EXIT_FAIL;
    } else if (json_array_extend(all, items) != 0) {
      ret = CLI_EXIT_FAIL;
    }
    size_t got = json_array_size(items);
    free(cursor);
    cursor = next ? strdup(next) : NULL;
    more = next != NULL;
    json_decref(page);
    page = NULL;
    if (!cursor || got == 0)
      break;
  }
  if (ret == CLI_EXIT_OK && json_array_size(all) == 0)
    printf("no tasks\n");
  else if (ret == CLI_EXIT_OK)
    print_table(all);
  if (ret == CLI_EXIT_OK && more)
    fprintf(stderr, "note: more tasks exist; list more with --limit\n");
  free(cursor);
  json_decref(all);
  return ret;
}

/* ---- one task ---- */

/* Prints a number member, or "-" when absent. */
static void print_num(const char *label, const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_integer(v))
    printf("%-18s%lld\n", label, (long long)json_integer_value(v));
  else if (json_is_number(v))
    printf("%-18s%g\n", label, json_number_value(v));
  else
    printf("%-18s-\n", label);
}

/* Prints the task's options object (the caller's), a line per setting. */
static void print_options(const json_t *options) {
  const json_t *budget = json_object_get(options, "budget");
  const json_t *tol = json_object_get(options, "tolerance");
  printf("%-18s%s\n", "proposer:", str_or_dash(options, "proposer"));
  printf("%-18s%s\n", "policy:", str_or_dash(options, "policy"));
  printf("%-18s%s\n", "precision:", str_or_dash(options, "precision"));
  print_num("budget steps:", budget, "steps");
  print_num("budget seconds:", budget, "seconds");
  print_num("budget llm usd:", budget, "llm_usd");
  print_num("atol:", tol, "atol");
  print_num("rtol:", tol, "rtol");
  print_num("trials:", options, "trials");
  print_num("seed:", options, "seed");
  printf("%-18s%s\n", "llm model:", str_or_dash(json_object_get(options, "llm"), "model"));
}

/* Prints one task, one "label: value" line per field. task stays the caller's. */
static void print_task(const json_t *task) {
  const json_t *progress = json_object_get(task, "progress");
  char step[48], best[48];
  cli_format_step(progress, step, sizeof step);
  cli_format_speedup(progress, best, sizeof best);
  printf("%-18s%s\n", "id:", str_or_dash(task, "id"));
  printf("%-18s%s\n", "name:", str_or_dash(task, "name"));
  printf("%-18s%s\n", "status:", str_or_dash(task, "status"));
  printf("%-18s%s\n", "cancel requested:",
         json_is_true(json_object_get(task, "cancel_requested")) ? "yes" : "no");
  printf("%-18s%s\n", "created:", str_or_dash(task, "created_at"));
  printf("%-18s%s\n", "updated:", str_or_dash(task, "updated_at"));
  printf("%-18s%s\n", "step:", step);
  printf("%-18s%s\n", "best speed-up:", best);
  print_num("best ms:", progress, "best_ms");
  print_num("correct:", progress, "correct");
  print_num("candidates:", progress, "candidates");
  print_options(json_object_get(task, "options"));
  print_num("reference bytes:", task, "reference_bytes");
  const json_t *err = json_object_get(task, "error");
  if (json_is_object(err))
    printf("%-18s%s: %s\n", "error:", str_or_dash(err, "code"), str_or_dash(err, "message"));
}

/* Fetches and prints one task. Returns the exit status. */
static int show_task(struct cli_client *client, const char *id) {
  char *esc = cli_escape(id);
  char path[CLI_MAX_URL];
  if (!esc || snprintf(path, sizeof path, "/v1/tasks/%s", esc) >= (int)sizeof path) {
    fprintf(stderr, "error: %s\n", esc ? "the task id is too long" : "out of memory");
    free(esc);
    return CLI_EXIT_USAGE;
  }
  free(esc);
  json_t *task = NULL;
  if (cli_call(client, "GET", path, NULL, &task) != 0)
    return CLI_EXIT_FAIL;
  print_task(task);
  json_decref(task);
  return CLI_EXIT_OK;
}

int cli_status_main(int argc, char **argv) {
  struct status_opts o = {0};
  int ret = parse_args(argc, argv, &o);
  if (ret >= 0)
    return ret;
  struct cli_client *client = NULL;
  if (cli_client_new(o.server, o.token_file, &client) != 0)
    return CLI_EXIT_USAGE;
  ret = o.id ? show_task(client, o.id) : list_tasks(client, &o);
  cli_client_free(client);
  return ret;
}
