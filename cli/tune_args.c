/* `opforge tune`'s command line: options, help, and the programs its operands name. */
#include "cli/tune_args.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/client.h"

/* Prints the help text. */
static void usage(FILE *out) {
  fputs("usage: opforge tune PATH... [options]\n"
        "Submits every program (a directory stands for its *.py files, in version order),\n"
        "follows the tasks together, and prints a summary table on stdout. Progress goes\n"
        "to stderr: a live line per task on a terminal, one line per step elsewhere.\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --fail-under X     a task whose best speed-up over eager is below X fails the run\n"
        "  --export DIR       write each succeeded task's KernelBench file (NAME_new.py,\n"
        "                     defining ModelNew) and its best kernel's source (NAME.cu)\n"
        "  --json FILE        write the results as JSON\n"
        "  --junit FILE       write a JUnit XML report, one test case per task\n"
        "  --wait-limit S     stop following after S seconds (the tasks go on)\n"
        "  --events           print the raw events, one JSON line each, as progress\n"
        "  --no-idempotency   send no Idempotency-Key: every run submits anew\n"
        "  --reuse            take the result of a task of the same program and options\n"
        "                     (memory namespace included) that succeeded in the last 24 h\n"
        "  --run-id ID        the CI run whose retries share tasks (default $OPFORGE_RUN_ID,\n"
        "                     $GITHUB_RUN_ID, $CI_PIPELINE_ID, $BUILD_TAG)\n",
        out);
  submit_options_usage(out);
  fputs("Each submission carries an Idempotency-Key made of the program, its options and\n"
        "the run id, so a retried CI job follows the tasks its first attempt made (one\n"
        "that failed or was cancelled is submitted again). With --reuse the key leaves the\n"
        "run id out: any run of the last 24 hours counts.\n"
        "exit status:\n"
        "  0  every task succeeded (and met --fail-under)\n"
        "  1  a task failed or was cancelled, or its speed-up is under --fail-under\n"
        "  2  bad usage: an option, an unreadable program, or a submission the server\n"
        "     refused as invalid (its code, message and field are printed)\n"
        "  3  the server could not be reached\n"
        "  4  the server refused the token (401 or 403)\n"
        "  5  --wait-limit passed with tasks unfinished (and none failed)\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_SERVER = 256, OPT_TOKEN_FILE, OPT_FAIL_UNDER, OPT_EXPORT, OPT_JSON, OPT_JUNIT,
       OPT_WAIT_LIMIT, OPT_EVENTS, OPT_NO_IDEMPOTENCY, OPT_REUSE, OPT_RUN_ID, OPT_HELP };

static const struct option long_opts[] = {
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"fail-under", required_argument, NULL, OPT_FAIL_UNDER},
    {"export", required_argument, NULL, OPT_EXPORT},
    {"json", required_argument, NULL, OPT_JSON},
    {"junit", required_argument, NULL, OPT_JUNIT},
    {"wait-limit", required_argument, NULL, OPT_WAIT_LIMIT},
    {"events", no_argument, NULL, OPT_EVENTS},
    {"no-idempotency", no_argument, NULL, OPT_NO_IDEMPOTENCY},
    {"reuse", no_argument, NULL, OPT_REUSE},
    {"run-id", required_argument, NULL, OPT_RUN_ID},
    {"help", no_argument, NULL, OPT_HELP},
    SUBMIT_OPTION_ENTRIES,
    {NULL, 0, NULL, 0},
};

/* Stores one parsed option in opts (a struct tune_opts). Returns 0, or -1 after
 * printing why. */
static int apply_opt(void *opts, int c, const char *arg) {
  struct tune_opts *o = opts;
  switch (c) {
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_TOKEN_FILE: o->token_file = arg; return 0;
  case OPT_EXPORT: o->export_dir = arg; return 0;
  case OPT_JSON: o->json_out = arg; return 0;
  case OPT_JUNIT: o->junit_out = arg; return 0;
  case OPT_EVENTS: o->events = true; return 0;
  case OPT_NO_IDEMPOTENCY: o->no_idempotency = true; return 0;
  case OPT_REUSE: o->reuse = true; return 0;
  case OPT_RUN_ID: o->run_id = arg; return 0;
  case OPT_FAIL_UNDER: return submit_parse_number("--fail-under", arg, &o->fail_under);
  case OPT_WAIT_LIMIT:
    o->has_wait_limit = true;
    return cli_parse_int("--wait-limit", arg, &o->wait_limit);
  default: return submit_options_apply(&o->submission, c, arg) == 0 ? 0 : -1;
  }
}

static const struct cli_options tune_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* The run id from the environment: the first of $OPFORGE_RUN_ID, $GITHUB_RUN_ID (kept
 * by re-runs of a workflow), $CI_PIPELINE_ID (kept by retried GitLab jobs) and
 * $BUILD_TAG (Jenkins) that is set; NULL when none is. */
static const char *run_id_from_env(void) {
  static const char *const names[] = {"OPFORGE_RUN_ID", "GITHUB_RUN_ID", "CI_PIPELINE_ID",
                                      "BUILD_TAG"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    if (v && *v)
      return v;
  }
  return NULL;
}

int tune_parse_args(int argc, char **argv, struct tune_opts *o) {
  o->fail_under = NAN;
  int rc = cli_parse_options(argc, argv, &tune_options, o);
  if (rc >= 0)
    return rc;
  o->inputs = argv + optind;
  o->n_inputs = (size_t)(argc - optind);
  const char *why = NULL;
  if (o->n_inputs == 0)
    why = "missing PATH";
  else if (o->has_wait_limit && (o->wait_limit < 1 || o->wait_limit > TUNE_WAIT_LIMIT_MAX))
    why = "--wait-limit must be 1..2592000";
  else if (o->reuse && o->no_idempotency)
    why = "--reuse works through the Idempotency-Key: it cannot go with --no-idempotency";
  if (why) {
    fprintf(stderr, "error: %s\n", why);
    if (o->n_inputs == 0)
      usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (!o->run_id)
    o->run_id = run_id_from_env();
  return -1;
}

/* ---- the programs ---- */

/* Appends path (taken over; freed here on failure). Returns 0, or -1 after printing. */
static int files_add(struct tune_files *l, char *path) {
  if (!path || l->n == TUNE_FILES_MAX) {
    fprintf(stderr, "error: %s\n", path ? "more than 10000 programs" : "out of memory");
    free(path);
    return -1;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 32;
    char **grown = realloc(l->paths, cap * sizeof *grown);
    if (!grown) {
      fprintf(stderr, "error: out of memory\n");
      free(path);
      return -1;
    }
    l->paths = grown;
    l->cap = cap;
  }
  l->paths[l->n++] = path;
  return 0;
}

/* scandir filter: visible names ending in ".py". */
static int py_entry(const struct dirent *d) {
  size_t len = strlen(d->d_name);
  return d->d_name[0] != '.' && len > 3 && strcmp(d->d_name + len - 3, ".py") == 0;
}

/* scandir order: version order, as KernelBench numbers its programs. */
static int name_order(const struct dirent **a, const struct dirent **b) {
  return strverscmp((*a)->d_name, (*b)->d_name);
}

/* Adds dir's visible regular *.py files in version order. Returns 0, or -1 after
 * printing why. */
static int expand_dir(const char *dir, struct tune_files *l) {
  struct dirent **names = NULL;
  int n = scandir(dir, &names, py_entry, name_order);
  if (n < 0) {
    fprintf(stderr, "error: cannot read %s: %s\n", dir, strerror(errno));
    return -1;
  }
  size_t dlen = strlen(dir);
  const char *sep = dlen > 0 && dir[dlen - 1] == '/' ? "" : "/";
  int rc = 0;
  for (int i = 0; i < n; i++) {
    char *path = NULL;
    struct stat st;
    if (rc == 0 && asprintf(&path, "%s%s%s", dir, sep, names[i]->d_name) < 0) {
      path = NULL;
      fprintf(stderr, "error: out of memory\n");
      rc = -1;
    }
    if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      rc = files_add(l, path);
      path = NULL;
    }
    free(path);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* A program's task name and its place in the list, for the collision check. */
struct named {
  char name[CLI_TASK_NAME_MAX + 1];
  size_t index;
};

/* qsort order of struct named: by name, then by place in the list. */
static int by_name(const void *a, const void *b) {
  const struct named *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Refuses two programs with one task name. Returns 0, or -1 after printing. */
static int check_names(const struct tune_files *l) {
  struct named *names = calloc(l->n, sizeof *names);
  if (!names) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  for (size_t i = 0; i < l->n; i++) {
    cli_task_name(l->paths[i], names[i].name);
    names[i].index = i;
  }
  qsort(names, l->n, sizeof *names, by_name);
  int rc = 0;
  for (size_t i = 1; i < l->n && rc == 0; i++) {
    if (strcmp(names[i - 1].name, names[i].name) != 0)
      continue;
    fprintf(stderr, "error: %s and %s are both named %s: their results would collide\n",
            l->paths[names[i - 1].index], l->paths[names[i].index], names[i].name);
    rc = -1;
  }
  free(names);
  return rc;
}

int tune_expand_inputs(const struct tune_opts *o, struct tune_files *ret_files) {
  struct tune_files l = {0};
  int rc = 0;
  for (size_t i = 0; i < o->n_inputs && rc == 0; i++) {
    const char *in = o->inputs[i];
    struct stat st;
    if (stat(in, &st) != 0) {
      fprintf(stderr, "error: cannot read %s: %s\n", in, strerror(errno));
      rc = -1;
    } else {
      rc = S_ISDIR(st.st_mode) ? expand_dir(in, &l) : files_add(&l, strdup(in));
    }
  }
  if (rc == 0 && l.n == 0) {
    fprintf(stderr, "error: no .py file to run\n");
    rc = -1;
  }
  if (rc == 0)
    rc = check_names(&l);
  if (rc != 0) {
    tune_files_clear(&l);
    return -1;
  }
  *ret_files = l;
  return 0;
}

void tune_opts_clear(struct tune_opts *o) {
  if (o)
    submit_options_clear(&o->submission);
}

void tune_files_clear(struct tune_files *files) {
  if (!files)
    return;
  for (size_t i = 0; i < files->n; i++)
    free(files->paths[i]);
  free(files->paths);
  memset(files, 0, sizeof *files);
}
