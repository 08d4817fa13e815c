/* `opforge bench`: runs a set of KernelBench programs through a server and reports. One
 * concept (the command: options, the server it starts, submitting and waiting, the
 * exports), a little longer than 800 lines; its report is in bench_report.c. */
#include "cli/bench.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/bench_report.h"
#include "cli/candidate_pages.h"
#include "cli/client.h"
#include "cli/memory.h"

#define MAX_EXCLUDE 16           /* --exclude options kept */
#define MAX_FILES 10000          /* programs one run takes */
#define STEPS_MAX 1000           /* the server's limits on a budget */
#define SECONDS_MAX 86400
#define DEFAULT_SECONDS 300
#define CONCURRENCY_MAX 256
#define WAIT_LIMIT_MAX 2592000   /* 30 days */
#define POLL_INTERVAL_S 1.0
#define OUTAGE_MAX_S 60.0        /* how long the server may stay unreachable mid-run */
#define OUTAGE_MAX_PAUSE_S 8.0   /* the longest pause between polls during an outage */
#define LIVE_MAX 512             /* longest live line drawn on a terminal */

/* What the command line asked for. Strings point into argv. */
struct bench_opts {
  const char *server, *token_file, *policy, *proposer, *out;
  const char *memory;     /* --memory NAME: the namespace the tasks read and write */
  long long steps, seconds, concurrency, wait_limit;
  bool has_steps, has_concurrency, has_wait_limit, fresh_memory;
  regex_t exclude[MAX_EXCLUDE];
  const char *exclude_src[MAX_EXCLUDE];
  size_t n_exclude;
  char **inputs; /* the FILES_OR_DIRS arguments */
  size_t n_inputs;
};

/* Prints the help text. */
static void usage(FILE *out) {
  fputs("usage: opforge bench FILES_OR_DIRS... --steps N --out FILE [options]\n"
        "Submits each program (a directory stands for its *.py files, in version order),\n"
        "follows the tasks to their end, prints a table and a summary, and writes every\n"
        "figure to FILE.\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --steps N          step budget of each task (1..1000, required)\n"
        "  --out FILE         the JSON results (required; rewritten as tasks end)\n"
        "  --seconds S        time budget of each task (1..86400, default 300)\n"
        "  --policy P         single|refine|flat|htam|tree|htam+tree|best_of_n\n"
        "  --memory NAME      run in memory namespace NAME (created from the seed if new)\n"
        "  --fresh-memory     recreate the --memory namespace from the seed first\n"
        "  --proposer P       builtin|llm|test\n"
        "  --concurrency K    tasks submitted at a time (default: the server's GPU count)\n"
        "  --exclude REGEX    skip paths matching this extended regular expression "
        "(repeatable)\n"
        "  --wait-limit S     stop following after S seconds; unfinished tasks stay on the\n"
        "                     server and are recorded as unfinished (exit status 0)\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_SERVER = 256, OPT_TOKEN_FILE, OPT_STEPS, OPT_OUT, OPT_SECONDS, OPT_POLICY,
       OPT_PROPOSER, OPT_CONCURRENCY, OPT_EXCLUDE, OPT_WAIT_LIMIT, OPT_MEMORY, OPT_FRESH,
       OPT_HELP };

static const struct option long_opts[] = {
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"out", required_argument, NULL, OPT_OUT},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"proposer", required_argument, NULL, OPT_PROPOSER},
    {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
    {"exclude", required_argument, NULL, OPT_EXCLUDE},
    {"wait-limit", required_argument, NULL, OPT_WAIT_LIMIT},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"fresh-memory", no_argument, NULL, OPT_FRESH},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Frees the compiled --exclude expressions. */
static void opts_clear(struct bench_opts *o) {
  for (size_t i = 0; i < o->n_exclude; i++)
    regfree(&o->exclude[i]);
  o->n_exclude = 0;
}

/* Compiles one --exclude expression. Returns 0, or -1 after printing why. */
static int add_exclude(struct bench_opts *o, const char *pattern) {
  if (o->n_exclude == MAX_EXCLUDE) {
    fprintf(stderr, "error: at most %d --exclude options\n", MAX_EXCLUDE);
    return -1;
  }
  int rc = regcomp(&o->exclude[o->n_exclude], pattern, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char why[256];
    regerror(rc, &o->exclude[o->n_exclude], why, sizeof why);
    fprintf(stderr, "error: --exclude: bad regular expression '%s': %s\n", pattern, why);
    return -1;
  }
  o->exclude_src[o->n_exclude++] = pattern;
  return 0;
}

/* Stores one parsed option in opts (a struct bench_opts). Returns 0, or -1 after
 * printing why. */
static int apply_opt(void *opts, int c, const char *arg) {
  struct bench_opts *o = opts;
  switch (c) {
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_TOKEN_FILE: o->token_file = arg; return 0;
  case OPT_OUT: o->out = arg; return 0;
  case OPT_POLICY: o->policy = arg; return 0;
  case OPT_PROPOSER: o->proposer = arg; return 0;
  case OPT_MEMORY: o->memory = arg; return 0;
  case OPT_FRESH: o->fresh_memory = true; return 0;
  case OPT_EXCLUDE: return add_exclude(o, arg);
  case OPT_STEPS: o->has_steps = true; return cli_parse_int("--steps", arg, &o->steps);
  case OPT_SECONDS: return cli_parse_int("--seconds", arg, &o->seconds);
  case OPT_CONCURRENCY:
    o->has_concurrency = true;
    return cli_parse_int("--concurrency", arg, &o->concurrency);
  case OPT_WAIT_LIMIT:
    o->has_wait_limit = true;
    return cli_parse_int("--wait-limit", arg, &o->wait_limit);
  default: return -1;
  }
}

/* True when s is one of the NULL-terminated names. */
static bool one_of(const char *s, const char *const *names) {
  for (; *names; names++)
    if (strcmp(s, *names) == 0)
      return true;
  return false;
}

/* Checks what getopt cannot: required options, ranges and names. Returns -1 to go on,
 * else the exit status. */
static int check_opts(const struct bench_opts *o) {
  static const char *const policies[] = {"single", "refine", "flat", "htam", "tree",
                                         "htam+tree", "best_of_n", NULL};
  static const char *const proposers[] = {"builtin", "llm", "test", NULL};
  const char *why = NULL;
  if (o->n_inputs == 0)
    why = "missing FILES_OR_DIRS";
  else if (!o->has_steps)
    why = "--steps N is required";
  else if (!o->out)
    why = "--out FILE is required";
  else if (o->steps < 1 || o->steps > STEPS_MAX)
    why = "--steps must be 1..1000";
  else if (o->seconds < 1 || o->seconds > SECONDS_MAX)
    why = "--seconds must be 1..86400";
  else if (o->has_concurrency && (o->concurrency < 1 || o->concurrency > CONCURRENCY_MAX))
    why = "--concurrency must be 1..256";
  else if (o->has_wait_limit && (o->wait_limit < 1 || o->wait_limit > WAIT_LIMIT_MAX))
    why = "--wait-limit must be 1..2592000";
  else if (o->policy && !one_of(o->policy, policies))
    why = "--policy must be one of single, refine, flat, htam, tree, htam+tree, best_of_n";
  else if (o->fresh_memory && !o->memory)
    why = "--fresh-memory needs --memory NAME";
  else if (o->proposer && !one_of(o->proposer, proposers))
    why = "--proposer must be one of builtin, llm, test";
  if (!why)
    return -1;
  fprintf(stderr, "error: %s\n", why);
  if (o->n_inputs == 0)
    usage(stderr);
  return CLI_EXIT_USAGE;
}

static const struct cli_options bench_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* Parses argv. Returns -1 to go on, else the exit status to return at once. */
static int parse_args(int argc, char **argv, struct bench_opts *o) {
  o->seconds = DEFAULT_SECONDS;
  int rc = cli_parse_options(argc, argv, &bench_options, o);
  if (rc >= 0)
    return rc;
  /* getopt_long moved the operands to the end. */
  o->inputs = argv + optind;
  o->n_inputs = (size_t)(argc - optind);
  return check_opts(o);
}

/* ---- the programs ---- */

/* A growing list of malloc'ed paths. */
struct file_list {
  char **paths;
  size_t n, cap;
};

static void file_list_clear(struct file_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->paths[i]);
  free(l->paths);
  memset(l, 0, sizeof *l);
}

/* Appends path (taken over, freed here on failure). Returns 0, or -1 after printing why. */
static int file_list_add(struct file_list *l, char *path) {
  if (!path || l->n == MAX_FILES) {
    fprintf(stderr, "error: %s\n", path ? "more than 10000 programs" : "out of memory");
    free(path);
    return -1;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
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

/* True when an --exclude expression matches path. */
static bool excluded(const struct bench_opts *o, const char *path) {
  for (size_t i = 0; i < o->n_exclude; i++)
    if (regexec(&o->exclude[i], path, 0, NULL, 0) == 0)
      return true;
  return false;
}

/* scandir filter: visible names ending in ".py". */
static int py_entry(const struct dirent *d) {
  size_t len = strlen(d->d_name);
  return d->d_name[0] != '.' && len > 3 && strcmp(d->d_name + len - 3, ".py") == 0;
}

/* scandir order: version order (2_x before 10_x, as KernelBench numbers its programs),
 * whatever the locale. */
static int name_order(const struct dirent **a, const struct dirent **b) {
  return strverscmp((*a)->d_name, (*b)->d_name);
}

/* Adds the regular *.py files directly in dir, sorted, that no --exclude matches.
 * Returns 0, or -1 after printing why. */
static int expand_dir(const struct bench_opts *o, const char *dir, struct file_list *l) {
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
    if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) && !excluded(o, path)) {
      rc = file_list_add(l, path);
      path = NULL;
    }
    free(path);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* Turns the FILES_OR_DIRS arguments into the list of programs. Returns 0, or -1 after
 * printing why. */
static int expand_inputs(const struct bench_opts *o, struct file_list *l) {
  for (size_t i = 0; i < o->n_inputs; i++) {
    const char *in = o->inputs[i];
    struct stat st;
    if (stat(in, &st) != 0) {
      fprintf(stderr, "error: cannot read %s: %s\n", in, strerror(errno));
      return -1;
    }
    if (S_ISDIR(st.st_mode)) {
      if (expand_dir(o, in, l) != 0)
        return -1;
    } else if (!excluded(o, in) && file_list_add(l, strdup(in)) != 0) {
      return -1;
    }
  }
  if (l->n == 0) {
    fprintf(stderr, "error: no .py file to run\n");
    return -1;
  }
  return 0;
}

/* Builds the submission of one program. Returns a new reference the caller releases, or
 * NULL after printing why. */
static json_t *make_body(const struct bench_opts *o, const char *file, const char *name) {
  json_t *ref = NULL;
  if (cli_read_program(file, CLI_REFERENCE_MAX, "a reference", &ref) != 0)
    return NULL;
  json_t *body = json_object();
  json_t *budget = json_object();
  int rc = cli_json_put(budget, "steps", json_integer(o->steps));
  rc |= cli_json_put(budget, "seconds", json_integer(o->seconds));
  rc |= cli_json_put(body, "budget", budget); /* budget is not used after this */
  rc |= cli_json_put(body, "reference", ref);
  rc |= cli_json_put(body, "name", json_string(name));
  if (o->policy)
    rc |= cli_json_put(body, "policy", json_string(o->policy));
  if (o->proposer)
    rc |= cli_json_put(body, "proposer", json_string(o->proposer));
  if (o->memory)
    rc |= cli_json_put(body, "memory", json_string(o->memory));
  if (rc != 0 || !body) {
    fprintf(stderr, "error: out of memory\n");
    json_decref(body);
    return NULL;
  }
  return body;
}

/* ---- the run ---- */

/* One program of the run. */
struct bench_task {
  struct bench_result r;
  json_t *body;                       /* the submission, until it is sent */
  char updated_at[BENCH_TIME_LEN];    /* the task's, as last seen */
};

/* Everything one invocation tracks. */
struct bench_run {
  const struct bench_opts *o;
  struct cli_client *client;
  struct bench_task *tasks;
  size_t n;
  size_t next;            /* the next task to submit */
  size_t in_flight;       /* submitted and not yet ended */
  size_t ended;           /* tasks that reached an end, for the [i/n] of their line */
  long long concurrency;
  double started;         /* monotonic seconds */
  bool tty;               /* stderr is a terminal: draw a live line */
  bool line_open;         /* the live line is on screen without its newline */
  bool aborted;           /* the server failed: stop submitting and following */
  bool refused;           /* the server refused a submission */
  bool limit_hit;         /* --wait-limit ended the run */
  double outage_since;    /* when polls started failing; 0 while they succeed */
  double pause_s;         /* the pause before the next poll */
};

/* Seconds on the monotonic clock. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Frees the tasks and their unsent submissions. */
static void run_clear(struct bench_run *run) {
  for (size_t i = 0; run->tasks && i < run->n; i++)
    json_decref(run->tasks[i].body);
  free(run->tasks);
  run->tasks = NULL;
  run->n = 0;
}

/* Builds the tasks of the run from the program list (borrowed: it must outlive the run).
 * Returns 0, or -1 after printing why. */
static int run_prepare(struct bench_run *run, const struct file_list *files) {
  run->tasks = calloc(files->n, sizeof *run->tasks);
  if (!run->tasks) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  run->n = files->n;
  for (size_t i = 0; i < files->n; i++) {
    struct bench_task *t = &run->tasks[i];
    bench_result_init(&t->r, files->paths[i]);
    bench_task_name(files->paths[i], t->r.name);
    if (!(t->body = make_body(run->o, files->paths[i], t->r.name)))
      return -1;
  }
  return 0;
}

/* The options of the run as JSON (a new reference, NULL when out of memory). */
static json_t *options_json(const struct bench_run *run) {
  const struct bench_opts *o = run->o;
  json_t *exclude = json_array();
  for (size_t i = 0; exclude && i < o->n_exclude; i++)
    json_array_append_new(exclude, json_string(o->exclude_src[i]));
  return json_pack("{s:I, s:I, s:s?, s:s?, s:I, s:o, s:o, s:s?, s:b}", "steps",
                   (json_int_t)o->steps, "seconds", (json_int_t)o->seconds, "policy", o->policy,
                   "proposer", o->proposer, "concurrency", (json_int_t)run->concurrency,
                   "wait_limit_s", o->has_wait_limit ? json_integer(o->wait_limit) : json_null(),
                   "exclude", exclude, "memory", o->memory, "fresh_memory", o->fresh_memory);
}

/* The whole results document (a new reference, NULL when out of memory). */
static json_t *results_json(const struct bench_run *run) {
  struct bench_result *results = calloc(run->n ? run->n : 1, sizeof *results);
  json_t *tasks = json_array();
  for (size_t i = 0; results && tasks && i < run->n; i++) {
    results[i] = run->tasks[i].r;
    json_t *one = bench_result_json(&results[i]);
    if (!one || json_array_append_new(tasks, one) != 0) {
      json_decref(tasks);
      tasks = NULL;
    }
  }
  struct bench_summary s;
  bench_summarize(results, results ? run->n : 0, &s);
  free(results);
  bool complete = true;
  for (size_t i = 0; i < run->n; i++)
    complete = complete && bench_state_is_final(run->tasks[i].r.state);
  json_t *doc = json_pack("{s:s, s:o, s:b, s:f, s:o, s:o}", "server",
                          cli_client_base_url(run->client), "options", options_json(run),
                          "complete", complete, "elapsed_s", now_s() - run->started, "tasks",
                          tasks, "summary", bench_summary_json(&s));
  return doc;
}

/* Writes the results document to --out. Returns 0, or -1 after printing why. */
static int write_results(const struct bench_run *run) {
  json_t *doc = results_json(run);
  FILE *f = doc ? fopen(run->o->out, "w") : NULL;
  int rc = f && json_dumpf(doc, f, JSON_INDENT(1)) == 0 ? 0 : -1;
  if (f && fputc('\n', f) == EOF)
    rc = -1;
  if (f && fclose(f) != 0)
    rc = -1;
  if (rc != 0)
    fprintf(stderr, "error: cannot write %s: %s\n", run->o->out,
            doc ? strerror(errno) : "out of memory");
  json_decref(doc);
  return rc;
}

/* ---- talking to the server ---- */

/* Writes "/v1/tasks/<id><suffix>" into out (CLI_MAX_URL bytes). -1 when out of memory. */
static int task_path(const struct bench_task *t, const char *suffix, char *out) {
  char *esc = cli_escape(t->r.id);
  int n = esc ? snprintf(out, CLI_MAX_URL, "/v1/tasks/%s%s", esc, suffix) : -1;
  free(esc);
  if (n < 0 || n >= CLI_MAX_URL) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  return 0;
}

/* Copies a task object's state (borrowed) into t. */
static void take_task(struct bench_task *t, const json_t *task) {
  const char *status = json_string_value(json_object_get(task, "status"));
  if (status)
    t->r.state = bench_state_from_status(status);
  const char *created = json_string_value(json_object_get(task, "created_at"));
  const char *updated = json_string_value(json_object_get(task, "updated_at"));
  if (created)
    snprintf(t->r.created_at, sizeof t->r.created_at, "%s", created);
  if (updated)
    snprintf(t->updated_at, sizeof t->updated_at, "%s", updated);
  bench_result_take_progress(&t->r, json_object_get(task, "progress"),
                             json_object_get(task, "baselines"));
  const json_t *err = json_object_get(task, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *message = json_string_value(json_object_get(err, "message"));
  if (code) {
    snprintf(t->r.error_code, sizeof t->r.error_code, "%s", code);
    snprintf(t->r.error_message, sizeof t->r.error_message, "%s", message ? message : "");
  }
}

/* Records an API error reply (borrowed, may be NULL) as t's error. */
static void take_error(struct bench_task *t, long status, const json_t *body) {
  const json_t *err = json_object_get(body, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *message = json_string_value(json_object_get(err, "message"));
  if (code)
    snprintf(t->r.error_code, sizeof t->r.error_code, "%s", code);
  else
    snprintf(t->r.error_code, sizeof t->r.error_code, "http_%ld", status);
  snprintf(t->r.error_message, sizeof t->r.error_message, "%s",
           message ? message : "the server answered without an error body");
}

/* Clears the live line so that a full line can be printed. */
static void clear_live(struct bench_run *run) {
  if (run->line_open) {
    fputs("\r\033[K", stderr);
    run->line_open = false;
  }
}

/* Sends t's submission. A refusal for the program's own sake (400, 413) is recorded and
 * the run goes on; any other refusal, or no answer, aborts the run. */
static void submit_task(struct bench_run *run, struct bench_task *t) {
  long status = 0;
  json_t *reply = NULL;
  clear_live(run);
  if (cli_request(run->client, "POST", "/v1/tasks", t->body, &status, &reply) != 0) {
    run->aborted = true;
    return;
  }
  json_decref(t->body);
  t->body = NULL;
  const char *id = json_string_value(json_object_get(reply, "id"));
  if (status >= 200 && status <= 299 && id && strlen(id) < sizeof t->r.id) {
    snprintf(t->r.id, sizeof t->r.id, "%s", id);
    take_task(t, reply);
    run->in_flight++;
  } else if (status >= 200 && status <= 299) {
    fprintf(stderr, "error: bad_reply: the server's reply names no task id\n");
    run->aborted = true;
  } else {
    t->r.state = BENCH_REFUSED;
    take_error(t, status, reply);
    fprintf(stderr, "error: %s: %s: %s\n", t->r.file, t->r.error_code, t->r.error_message);
    run->refused = true;
    run->ended++;
    if (status != 400 && status != 413)
      run->aborted = true;
  }
  json_decref(reply);
}

/* candidate_page_fn: takes a page into the task's steps_to_best; stops once it is known. */
static int take_candidate_page(const json_t *items, void *user) {
  struct bench_result *r = user;
  bench_result_take_candidates(r, items);
  return r->steps_to_best >= 0;
}

/* Sets t's steps_to_best from its candidates (the first correct one as fast as the best).
 * Returns 0, or -1 after printing. */
static int fetch_steps_to_best(struct bench_run *run, struct bench_task *t) {
  if (!bench_result_correct(&t->r) || t->r.steps_to_best >= 0)
    return 0;
  return cli_each_candidate_page(run->client, t->r.id, take_candidate_page, &t->r);
}

/* The times a task's event log gives, and its finished summary. */
struct event_times {
  char running[BENCH_TIME_LEN];  /* the first "running" event */
  char finished[BENCH_TIME_LEN]; /* the "finished" event */
  char final[BENCH_TIME_LEN];    /* the last succeeded/failed/cancelled event */
  struct bench_result *r;        /* takes the finished event's summary */
};

/* SSE callback: notes the times of the events that bound a task's run. */
static int on_event(const struct cli_sse_event *ev, void *user) {
  struct event_times *times = user;
  json_t *msg = json_loadb(ev->data, ev->data_len, 0, NULL);
  const char *type = json_string_value(json_object_get(msg, "type"));
  const char *time_s = json_string_value(json_object_get(msg, "time"));
  if (type && time_s) {
    if (strcmp(type, "running") == 0 && !times->running[0])
      snprintf(times->running, sizeof times->running, "%s", time_s);
    else if (strcmp(type, "finished") == 0) {
      snprintf(times->finished, sizeof times->finished, "%s", time_s);
      bench_result_take_summary(times->r, json_object_get(msg, "data"));
    }
    else if (bench_state_is_final(bench_state_from_status(type)))
      snprintf(times->final, sizeof times->final, "%s", time_s);
  }
  json_decref(msg);
  return 0;
}

/* b - a in seconds for two API times, NAN when either does not parse. */
static double seconds_between(const char *a, const char *b) {
  double ta, tb;
  if (bench_parse_time(a, &ta) != 0 || bench_parse_time(b, &tb) != 0)
    return NAN;
  return round((tb - ta) * 1000.0) / 1000.0; /* the API's times carry milliseconds */
}

/* Sets t's finish time, wall time and run time from its event log (the stream ends on
 * its own once the task is final), else from updated_at. */
static void fetch_times(struct bench_run *run, struct bench_task *t) {
  struct event_times times;
  memset(&times, 0, sizeof times);
  times.r = &t->r;
  char path[CLI_MAX_URL], last_id[CLI_SSE_ID_MAX] = "";
  if (task_path(t, "/events", path) == 0)
    cli_sse_follow(run->client, path, last_id, on_event, &times);
  const char *end = times.finished[0] ? times.finished : times.final[0] ? times.final
                                                                         : t->updated_at;
  snprintf(t->r.finished_at, sizeof t->r.finished_at, "%s", end);
  t->r.wall_s = seconds_between(t->r.created_at, end);
  if (times.running[0])
    t->r.run_s = seconds_between(times.running, end);
}

/* Completes a task that reached an end: its step of best and its times; then prints its
 * line and rewrites the results file. */
static void task_ended(struct bench_run *run, struct bench_task *t) {
  if (bench_state_is_final(t->r.state)) {
    fetch_steps_to_best(run, t);
    fetch_times(run, t);
  }
  run->in_flight--;
  run->ended++;
  char line[512];
  bench_format_finished(&t->r, run->ended, run->n, line, sizeof line);
  clear_live(run);
  fprintf(stderr, "%s\n", line);
  write_results(run);
}

/* Refreshes one task. Returns 0, or -1 when the server did not answer usefully (printed). */
static int poll_task(struct bench_run *run, struct bench_task *t) {
  char path[CLI_MAX_URL];
  long status = 0;
  json_t *task = NULL;
  if (task_path(t, "", path) != 0 || cli_request(run->client, "GET", path, NULL, &status,
                                                 &task) != 0)
    return -1;
  int rc = 0;
  if (status == 200) {
    take_task(t, task);
  } else if (status == 404) {
    /* Deleted behind bench's back: nothing more will come of it. */
    t->r.state = BENCH_LOST;
    take_error(t, status, task);
    run->refused = true;
  } else {
    clear_live(run);
    cli_print_server_error(status, task);
    rc = -1;
  }
  json_decref(task);
  if (rc == 0 && (bench_state_is_final(t->r.state) || t->r.state == BENCH_LOST))
    task_ended(run, t);
  return rc;
}

/* ---- following ---- */

/* The terminal's width, or 80 when unknown. */
static size_t term_width(void) {
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 80;
}

/* Redraws the live line: counts, then the tasks in flight with their step and best. */
static void draw_live(struct bench_run *run) {
  char line[LIVE_MAX];
  size_t queued = 0, running = 0;
  for (size_t i = 0; i < run->next; i++) {
    queued += run->tasks[i].r.state == BENCH_QUEUED;
    running += run->tasks[i].r.state == BENCH_RUNNING;
  }
  int len = snprintf(line, sizeof line, "bench: %zu/%zu done, %zu running, %zu queued, %.0f s",
                     run->ended, run->n, running, queued, now_s() - run->started);
  for (size_t i = 0; i < run->next && len > 0 && (size_t)len < sizeof line; i++) {
    const struct bench_result *r = &run->tasks[i].r;
    if (r->state != BENCH_RUNNING)
      continue;
    char best[32] = "-";
    if (isfinite(bench_vs_eager(r)))
      snprintf(best, sizeof best, "%.2fx", bench_vs_eager(r));
    len += snprintf(line + len, sizeof line - (size_t)len, " | %s %ld/%ld %s", r->name,
                    r->step < 0 ? 0 : r->step, r->budget_steps < 0 ? 0 : r->budget_steps, best);
  }
  size_t width = term_width() - 1; /* a full-width line would wrap on some terminals */
  if (width < sizeof line)
    line[width] = '\0';
  fprintf(stderr, "\r%s\033[K", line);
  fflush(stderr);
  run->line_open = true;
}

/* Refreshes every task in flight. While the server cannot be reached the pause between
 * rounds doubles up to OUTAGE_MAX_PAUSE_S (each failure prints a line), so a restarting
 * server does not end the run; an outage of OUTAGE_MAX_S does. */
static void poll_round(struct bench_run *run) {
  bool failed = false;
  for (size_t i = 0; i < run->next && !failed; i++) {
    struct bench_task *t = &run->tasks[i];
    if (t->r.id[0] && (t->r.state == BENCH_QUEUED || t->r.state == BENCH_RUNNING))
      failed = poll_task(run, t) != 0;
  }
  if (!failed) {
    run->outage_since = 0;
    run->pause_s = POLL_INTERVAL_S;
    return;
  }
  if (run->outage_since == 0)
    run->outage_since = now_s();
  run->pause_s = fmin(run->pause_s * 2, OUTAGE_MAX_PAUSE_S);
  if (now_s() - run->outage_since >= OUTAGE_MAX_S) {
    clear_live(run);
    fprintf(stderr, "error: the server could not be reached for %.0f s; giving up\n",
            OUTAGE_MAX_S);
    run->aborted = true;
  }
}

/* Sleeps until seconds after round_start. */
static void pause_until(double round_start, double seconds) {
  double left = round_start + seconds - now_s();
  if (left <= 0)
    return;
  struct timespec ts = {.tv_sec = (time_t)left, .tv_nsec = (long)((left - floor(left)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* True once --wait-limit has passed. */
static bool past_limit(const struct bench_run *run) {
  return run->o->has_wait_limit && now_s() - run->started >= (double)run->o->wait_limit;
}

/* Submits and follows until every task ended, the wait limit passed, or the server
 * failed. */
static void follow_all(struct bench_run *run) {
  for (;;) {
    double round_start = now_s();
    if (past_limit(run)) {
      run->limit_hit = run->in_flight > 0 || run->next < run->n;
      break;
    }
    while (!run->aborted && run->next < run->n && run->in_flight < (size_t)run->concurrency)
      submit_task(run, &run->tasks[run->next++]);
    if (run->aborted || (run->in_flight == 0 && run->next == run->n))
      break;
    size_t ended = run->ended;
    poll_round(run);
    if (run->aborted || (run->in_flight == 0 && run->next == run->n))
      break;
    if (run->tty)
      draw_live(run);
    if (run->ended == ended) /* else submit the next task at once */
      pause_until(round_start, run->pause_s);
  }
  clear_live(run);
}

/* ---- the command ---- */

/* Sets run->concurrency: --concurrency, else the number of devices the server reports
 * (at least 1). Returns 0, or -1 when the server cannot be reached (printed). */
static int pick_concurrency(struct bench_run *run) {
  if (run->o->has_concurrency) {
    run->concurrency = run->o->concurrency;
    return 0;
  }
  long status = 0;
  json_t *reply = NULL;
  if (cli_request(run->client, "GET", "/v1/devices", NULL, &status, &reply) != 0)
    return -1;
  size_t devices = status == 200 ? json_array_size(json_object_get(reply, "devices")) : 0;
  json_decref(reply);
  run->concurrency = devices > 0 ? (long long)devices : 1;
  return 0;
}

/* Completes what bench knows of tasks it stopped following: the step of their best. */
static void settle_unfinished(struct bench_run *run) {
  size_t left = 0;
  for (size_t i = 0; i < run->next; i++) {
    struct bench_task *t = &run->tasks[i];
    if (t->r.state != BENCH_QUEUED && t->r.state != BENCH_RUNNING)
      continue;
    left++;
    if (!run->aborted)
      fetch_steps_to_best(run, t);
  }
  if (run->limit_hit)
    fprintf(stderr, "note: the wait limit of %lld s passed: %zu task(s) unfinished, %zu not "
                    "submitted\n", run->o->wait_limit, left, run->n - run->next);
}

/* Prints the table and the summary on stdout. */
static void print_report(const struct bench_run *run) {
  struct bench_result *results = calloc(run->n, sizeof *results);
  if (!results) {
    fprintf(stderr, "error: out of memory\n");
    return;
  }
  for (size_t i = 0; i < run->n; i++)
    results[i] = run->tasks[i].r;
  struct bench_summary s;
  bench_summarize(results, run->n, &s);
  bench_print_table(stdout, results, run->n);
  putchar('\n');
  bench_print_summary(stdout, &s);
  fflush(stdout);
  free(results);
}

/* Submits, follows and reports, once the results file is known to be writable. Returns
 * the exit status. */
static int bench_execute(struct bench_run *run) {
  if (pick_concurrency(run) != 0 ||
      (run->o->memory && cli_memory_prepare(run->client, run->o->memory,
                                            run->o->fresh_memory) != 0)) {
    write_results(run);
    return CLI_EXIT_FAIL;
  }
  follow_all(run);
  settle_unfinished(run);
  if (run->next > 0)
    print_report(run);
  int ret = run->aborted || run->refused ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  if (write_results(run) != 0)
    ret = CLI_EXIT_FAIL;
  return ret;
}

/* Runs the benchmark once the options are parsed. Returns the exit status. */
static int bench_run_all(const struct bench_opts *o, const struct file_list *files) {
  struct bench_run run = {.o = o, .started = now_s(), .tty = isatty(STDERR_FILENO) == 1,
                          .pause_s = POLL_INTERVAL_S};
  if (cli_client_new(o->server, o->token_file, &run.client) != 0)
    return CLI_EXIT_USAGE;
  /* The event log only dates a finished task; updated_at stands in when it fails. */
  cli_client_set_retry(run.client, 2, 250);
  run.concurrency = o->has_concurrency ? o->concurrency : 1;
  int ret = CLI_EXIT_USAGE;
  if (run_prepare(&run, files) == 0 && write_results(&run) == 0)
    ret = bench_execute(&run);
  run_clear(&run);
  cli_client_free(run.client);
  return ret;
}

int cli_bench_main(int argc, char **argv) {
  struct bench_opts o = {0};
  struct file_list files = {0};
  int ret = parse_args(argc, argv, &o);
  if (ret < 0)
    ret = expand_inputs(&o, &files) != 0 ? CLI_EXIT_USAGE : bench_run_all(&o, &files);
  file_list_clear(&files);
  opts_clear(&o);
  return ret;
}
