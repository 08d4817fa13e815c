/* `opforge ablate`: the ablation arms of the search (docs/architecture.md, "Search
 * settings") as runs of a server, each arm in its own fresh memory namespace. */
#include "cli/ablate.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/ablate_replay.h"
#include "cli/ablate_report.h"
#include "cli/args.h"
#include "cli/candidate_pages.h"
#include "cli/client.h"
#include "cli/memory.h"

#define MAX_FILES 1000
#define MAX_ARMS 13
#define STEPS_MAX 1000
#define SECONDS_MAX 86400
#define POLL_S 0.5

/* One arm: a policy and search settings over the server's defaults, and the published
 * ablation it mirrors. */
struct arm_spec {
  const char *name, *policy, *search, *mirrors;
};

static const struct arm_spec arm_table[MAX_ARMS] = {
  {"full", "htam+tree", "{}", "HTAM's full method (1.978x in its paper) on AdaExplore's tree"},
  {"noprefix", "htam+tree", "{\"prefix_len\":0}", "HTAM without the prefix (1.68x)"},
  {"nolocal", "htam+tree", "{\"local_memory\":false}", "HTAM without local memory (0.97x)"},
  {"flat", "htam+tree", "{\"retrieval\":\"flat\"}", "HTAM with flat retrieval (1.46x)"},
  {"refine", "refine", "{}", "feedback-only refinement that reads no memory"},
  {"noskills", "htam+tree", "{\"skills\":false}",
   "AdaExplore without skill memory"},
  {"bestofn", "best_of_n", "{}", "AdaExplore's best-of-N: independent large steps, no tree"},
  {"lastonly", "htam+tree", "{\"prefix_len\":1}",
   "HTAM scoring transitions from the last direction only"},
  {"htam", "htam", "{}", "HTAM's own per-step chain (its paper's loop), no tree"},
  {"single", "single", "{}", "single-shot generation: one large step"},
  {"large", "htam+tree", "{\"steps\":\"large\"}", "the tree with large steps only"},
  {"small", "htam+tree", "{\"steps\":\"small\"}", "the tree with small steps only"},
  {"random", "best_of_n",
   "{\"tau\":100,\"prefix_len\":0,\"beta\":0,\"local_memory\":false,\"skills\":false}",
   "random search: independent large steps, directions and strategies drawn uniformly"},
};

struct ablate_opts {
  const char *server, *token_file, *proposer, *prefix, *out, *arms;
  long long steps, seconds, seed, wait_limit;
  bool has_steps, has_wait_limit, has_arms, has_seed;
  /* --replay */
  const char *replay, *modes, *tasks, *replay_evaluator, *keep_data;
  long long seeds, jobs;
  bool has_seeds;
  char **files;
  size_t n_files;
};

static void usage(FILE *out) {
  fputs("usage: opforge ablate FILES... --steps N [options]\n"
        "       opforge ablate --replay TABLE --seeds N [--steps N] [options]\n"
        "Runs every program under every arm, each arm in a memory namespace of its own\n"
        "recreated from the seed, with the same seed, and prints for each program and arm\n"
        "the best time after 5, 10 and 20 steps, the step that came within 95% of the\n"
        "final best, the correct candidates; then per-arm geometric means over eager.\n"
        "  --steps N          step budget of each task (1..1000, required)\n"
        "  --arms A,B,...     of full, noprefix, lastonly, nolocal, flat, refine,\n"
        "                     noskills, bestofn, htam, single, large, small, or all\n"
        "                     (default full,noprefix,nolocal,flat,refine)\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --seconds S        time budget of each task (1..86400, default 300)\n"
        "  --seed N           the seed of every task (default 42)\n"
        "  --proposer P       builtin|llm|test\n"
        "  --prefix NAME      namespaces are NAME-ARM (default ablate)\n"
        "  --out FILE         also write every figure as JSON\n"
        "  --wait-limit S     stop following after S seconds; unfinished tasks are reported\n"
        "With --replay, the arms run over a recorded space table on the CPU: a server\n"
        "of its own whose evaluator answers from the table, every task of it under\n"
        "every arm with seeds 1..N, and per arm and memory mode the mean steps to 95%\n"
        "and 99% of the space's best and the best at 5, 10 and 20 steps relative to it,\n"
        "with 95% confidence intervals over the tasks, then the search targets.\n"
        "  --replay TABLE     the space table (space/README.md)\n"
        "  --seeds N          seeds per (task, arm, mode) (1..1000, required)\n"
        "  --modes M,...      of cold (the seed memory), warm (the seed plus what the\n"
        "                     other tasks' cold runs learned) and frozen (warm, with\n"
        "                     search.learn false: the run updates no memory)\n"
        "                     (default cold,warm)\n"
        "  --tasks A,B,...    only these tasks of the table\n"
        "  --jobs J           runs side by side (1..16, default 8)\n"
        "  --replay-evaluator P  opforge-replay (default: next to this binary)\n"
        "  --keep-data DIR    the replay server's data directory, kept (default: a\n"
        "                     temporary one)\n"
        "  (arms add random: independent large steps, directions and strategies drawn\n"
        "  uniformly, no skills; the default arms are full, noprefix, nolocal, flat,\n"
        "  refine, noskills, bestofn, random; --steps defaults to 20)\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_STEPS = 256, OPT_ARMS, OPT_SERVER, OPT_TOKEN_FILE, OPT_SECONDS, OPT_SEED,
       OPT_PROPOSER, OPT_PREFIX, OPT_OUT, OPT_WAIT_LIMIT, OPT_HELP, OPT_REPLAY, OPT_SEEDS,
       OPT_MODES, OPT_TASKS, OPT_JOBS, OPT_REPLAY_EVALUATOR, OPT_KEEP_DATA };

static const struct option long_opts[] = {
    {"steps", required_argument, NULL, OPT_STEPS},
    {"arms", required_argument, NULL, OPT_ARMS},
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"proposer", required_argument, NULL, OPT_PROPOSER},
    {"prefix", required_argument, NULL, OPT_PREFIX},
    {"out", required_argument, NULL, OPT_OUT},
    {"wait-limit", required_argument, NULL, OPT_WAIT_LIMIT},
    {"help", no_argument, NULL, OPT_HELP},
    {"replay", required_argument, NULL, OPT_REPLAY},
    {"seeds", required_argument, NULL, OPT_SEEDS},
    {"modes", required_argument, NULL, OPT_MODES},
    {"tasks", required_argument, NULL, OPT_TASKS},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"replay-evaluator", required_argument, NULL, OPT_REPLAY_EVALUATOR},
    {"keep-data", required_argument, NULL, OPT_KEEP_DATA},
    {NULL, 0, NULL, 0},
};

static int apply_opt(void *opts, int c, const char *arg) {
  struct ablate_opts *o = opts;
  switch (c) {
  case OPT_STEPS: o->has_steps = true; return cli_parse_int("--steps", arg, &o->steps);
  case OPT_ARMS: o->arms = arg; o->has_arms = true; return 0;
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_TOKEN_FILE: o->token_file = arg; return 0;
  case OPT_SECONDS: return cli_parse_int("--seconds", arg, &o->seconds);
  case OPT_SEED: o->has_seed = true; return cli_parse_int("--seed", arg, &o->seed);
  case OPT_PROPOSER: o->proposer = arg; return 0;
  case OPT_PREFIX: o->prefix = arg; return 0;
  case OPT_OUT: o->out = arg; return 0;
  case OPT_WAIT_LIMIT:
    o->has_wait_limit = true;
    return cli_parse_int("--wait-limit", arg, &o->wait_limit);
  case OPT_REPLAY: o->replay = arg; return 0;
  case OPT_SEEDS: o->has_seeds = true; return cli_parse_int("--seeds", arg, &o->seeds);
  case OPT_MODES: o->modes = arg; return 0;
  case OPT_TASKS: o->tasks = arg; return 0;
  case OPT_JOBS: return cli_parse_int("--jobs", arg, &o->jobs);
  case OPT_REPLAY_EVALUATOR: o->replay_evaluator = arg; return 0;
  case OPT_KEEP_DATA: o->keep_data = arg; return 0;
  default: return -1;
  }
}

static const struct cli_options ablate_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* The arm named name, or NULL. */
static const struct arm_spec *find_arm(const char *name, size_t len) {
  for (size_t i = 0; i < MAX_ARMS; i++)
    if (strlen(arm_table[i].name) == len && strncmp(arm_table[i].name, name, len) == 0)
      return &arm_table[i];
  return NULL;
}

/* Splits --arms into ret_arms (at most MAX_ARMS, no repeats). Returns the count, or -1
 * after printing why. */
static int parse_arms(const char *text, const struct arm_spec **ret_arms) {
  int n = 0;
  if (strcmp(text, "all") == 0) {
    for (size_t i = 0; i < MAX_ARMS; i++)
      ret_arms[n++] = &arm_table[i];
    return n;
  }
  for (const char *p = text; *p;) {
    size_t len = strcspn(p, ",");
    const struct arm_spec *arm = find_arm(p, len);
    bool repeat = false;
    for (int i = 0; arm && i < n; i++)
      repeat = repeat || ret_arms[i] == arm;
    if (!arm || repeat) {
      fprintf(stderr, "error: --arms: %s '%.*s' (known: full, noprefix, lastonly, nolocal, "
              "flat, refine, noskills, bestofn, htam, single, large, small, random; or all)\n",
              arm ? "repeated arm" : "unknown arm", (int)len, p);
      return -1;
    }
    ret_arms[n++] = arm;
    p += len + (p[len] == ',');
  }
  if (n == 0)
    fprintf(stderr, "error: --arms names no arm\n");
  return n ? n : -1;
}

/* Checks the options of --replay. Returns -1 to go on, else the exit status. */
static int check_replay_opts(const struct ablate_opts *o) {
  const char *why = NULL;
  if (o->n_files > 0)
    why = "--replay takes its tasks from the table: no FILES";
  else if (!o->has_seeds)
    why = "--seeds N is required with --replay";
  else if (o->seeds < 1 || o->seeds > 1000)
    why = "--seeds must be 1..1000";
  else if (o->steps < 1 || o->steps > STEPS_MAX)
    why = "--steps must be 1..1000";
  else if (o->jobs < 1 || o->jobs > 16)
    why = "--jobs must be 1..16";
  else if (o->server || o->token_file || o->has_wait_limit || o->has_seed || o->proposer)
    why = "--replay starts its own server and runs the builtin proposer with seeds 1..N: "
          "no --server, --token-file, --wait-limit, --seed or --proposer";
  else if (strspn(o->prefix, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(o->prefix) ||
           !o->prefix[0] || o->prefix[0] == '-' || o->prefix[0] == '_' || strlen(o->prefix) > 40)
    why = "--prefix must be lower-case letters, digits, '_' and '-' (at most 40)";
  if (!why)
    return -1;
  fprintf(stderr, "error: %s\n", why);
  return CLI_EXIT_USAGE;
}

/* Checks what getopt cannot. Returns -1 to go on, else the exit status. */
static int check_opts(const struct ablate_opts *o) {
  static const char *const proposers[] = {"builtin", "llm", "test", NULL};
  const char *why = NULL;
  bool proposer_ok = !o->proposer;
  for (size_t i = 0; !proposer_ok && proposers[i]; i++)
    proposer_ok = strcmp(o->proposer, proposers[i]) == 0;
  char ns[96];
  snprintf(ns, sizeof ns, "%s-noprefix", o->prefix);
  if (o->n_files == 0)
    why = "missing FILES";
  else if (o->n_files > MAX_FILES)
    why = "more than 1000 programs";
  else if (!o->has_steps)
    why = "--steps N is required";
  else if (o->steps < 1 || o->steps > STEPS_MAX)
    why = "--steps must be 1..1000";
  else if (o->seconds < 1 || o->seconds > SECONDS_MAX)
    why = "--seconds must be 1..86400";
  else if (o->seed < 0 || o->seed > 2147483647)
    why = "--seed must be 0..2147483647";
  else if (o->has_wait_limit && o->wait_limit < 1)
    why = "--wait-limit must be at least 1";
  else if (!proposer_ok)
    why = "--proposer must be one of builtin, llm, test";
  else if (strlen(ns) > 64 || strspn(o->prefix, "abcdefghijklmnopqrstuvwxyz0123456789_-") !=
                                  strlen(o->prefix) || !o->prefix[0] || o->prefix[0] == '-' ||
           o->prefix[0] == '_')
    why = "--prefix must be lower-case letters, digits, '_' and '-' (at most 55)";
  if (!why)
    return -1;
  fprintf(stderr, "error: %s\n", why);
  if (o->n_files == 0)
    usage(stderr);
  return CLI_EXIT_USAGE;
}

/* ---- the run ---- */

struct ablate_task {
  struct ablate_result r;
  char id[40];           /* the server's task id, "" until submitted */
  json_t *body;          /* the submission (owned) */
};

struct arm_run {
  const struct arm_spec *spec;
  char ns[80];
  size_t next;           /* the task in flight or next to submit */
  struct ablate_task *tasks;
};

struct ablate_run {
  const struct ablate_opts *o;
  struct cli_client *client;
  struct arm_run arms[MAX_ARMS];
  size_t n_arms, n_files;
  bool aborted, refused;
  double started;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The submission of program (a JSON string, borrowed) under arm. NULL when out of memory. */
static json_t *make_body(const struct ablate_run *run, const struct arm_run *arm,
                         json_t *program, const char *name) {
  const struct ablate_opts *o = run->o;
  char full[BENCH_NAME_MAX + 1];
  snprintf(full, sizeof full, "%.*s.%s", (int)(BENCH_NAME_MAX - strlen(arm->spec->name) - 1),
           name, arm->spec->name);
  json_t *body = json_pack("{s:s, s:O, s:s, s:s, s:I, s:{s:I, s:I}}", "name", full, "reference",
                           program, "policy", arm->spec->policy, "memory", arm->ns, "seed",
                           (json_int_t)o->seed, "budget", "steps", (json_int_t)o->steps,
                           "seconds", (json_int_t)o->seconds);
  json_t *search = json_loads(arm->spec->search, 0, NULL);
  int rc = body && search ? cli_json_put(body, "search", search) : -1;
  if (rc == 0 && o->proposer)
    rc = cli_json_put(body, "proposer", json_string(o->proposer));
  if (rc != 0) {
    json_decref(body);
    return NULL;
  }
  return body;
}

/* Reads every program and builds the tasks of every arm. Returns 0, or -1 (printed). */
static int prepare(struct ablate_run *run, const struct arm_spec *const *arms) {
  const struct ablate_opts *o = run->o;
  for (size_t a = 0; a < run->n_arms; a++) {
    struct arm_run *arm = &run->arms[a];
    arm->spec = arms[a];
    snprintf(arm->ns, sizeof arm->ns, "%s-%s", o->prefix, arms[a]->name);
    if (!(arm->tasks = calloc(o->n_files, sizeof *arm->tasks))) {
      fprintf(stderr, "error: out of memory\n");
      return -1;
    }
  }
  for (size_t f = 0; f < o->n_files; f++) {
    json_t *program = NULL;
    if (cli_read_program(o->files[f], CLI_REFERENCE_MAX, "a reference", &program) != 0)
      return -1;
    char name[BENCH_NAME_MAX + 1];
    bench_task_name(o->files[f], name);
    for (size_t a = 0; a < run->n_arms; a++) {
      struct ablate_task *t = &run->arms[a].tasks[f];
      snprintf(t->r.task, sizeof t->r.task, "%s", name);
      snprintf(t->r.arm, sizeof t->r.arm, "%s", arms[a]->name);
      snprintf(t->r.status, sizeof t->r.status, "unfinished");
      t->r.budget = (long)o->steps;
      t->r.eager_ms = t->r.final_ms = NAN;
      for (int k = 0; k < ABLATE_MARKS; k++)
        t->r.best_at[k] = NAN;
      t->r.steps_to_near = -1;
      t->body = make_body(run, &run->arms[a], program, name);
      if (!t->body) {
        fprintf(stderr, "error: out of memory\n");
        json_decref(program);
        return -1;
      }
    }
    json_decref(program);
  }
  return 0;
}

/* Sends t's submission. A refusal for the program's sake (400, 404, 413) is recorded and
 * the arm goes on; anything else aborts the run. */
static void submit(struct ablate_run *run, struct ablate_task *t) {
  long status = 0;
  json_t *reply = NULL;
  if (cli_request(run->client, "POST", "/v1/tasks", t->body, &status, &reply) != 0) {
    run->aborted = true;
    return;
  }
  const char *id = json_string_value(json_object_get(reply, "id"));
  if (status >= 200 && status <= 299 && id && strlen(id) < sizeof t->id) {
    snprintf(t->id, sizeof t->id, "%s", id);
  } else {
    cli_print_server_error(status, reply);
    snprintf(t->r.status, sizeof t->r.status, "refused");
    run->refused = true;
    run->aborted = status != 400 && status != 404 && status != 413;
  }
  json_decref(reply);
}

/* candidate_page_fn: appends a page's items to the array user. */
static int append_candidate_page(const json_t *items, void *user) {
  return json_array_extend(user, (json_t *)items) != 0;
}

/* Every candidate of t (caller owns the array), or NULL after printing. */
static json_t *fetch_candidates(struct ablate_run *run, const struct ablate_task *t) {
  json_t *all = json_array();
  if (!all || cli_each_candidate_page(run->client, t->id, append_candidate_page, all) != 0) {
    json_decref(all);
    return NULL;
  }
  return all;
}

/* Takes the task's state (borrowed) into t; true when it reached an end. */
static bool take_task(struct ablate_task *t, const json_t *task) {
  const char *status = json_string_value(json_object_get(task, "status"));
  json_t *eager = json_object_get(json_object_get(task, "baselines"), "eager_ms");
  if (json_is_number(eager))
    t->r.eager_ms = json_number_value(eager);
  t->r.steps = (long)json_integer_value(json_object_get(json_object_get(task, "progress"),
                                                        "step"));
  t->r.final = status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                          strcmp(status, "cancelled") == 0);
  if (t->r.final)
    snprintf(t->r.status, sizeof t->r.status, "%s", status);
  return t->r.final;
}

/* Refreshes t; when it ended (or final_pass, when the run stops following), reads its
 * candidates into its figures. Returns true when t needs no more polling. */
static bool poll(struct ablate_run *run, struct ablate_task *t, bool final_pass) {
  char path[CLI_MAX_URL];
  snprintf(path, sizeof path, "/v1/tasks/%s", t->id);
  json_t *task = NULL;
  if (cli_call(run->client, "GET", path, NULL, &task) != 0) {
    run->aborted = true;
    return true;
  }
  bool ended = take_task(t, task);
  json_decref(task);
  if (!ended && !final_pass)
    return false;
  json_t *items = fetch_candidates(run, t);
  if (items)
    ablate_result_take(&t->r, items);
  else
    run->aborted = true;
  json_decref(items);
  if (ended)
    fprintf(stderr, "%s under %s %s after %ld step(s)\n", t->r.task, t->r.arm, t->r.status,
            t->r.steps);
  return true;
}

/* One task of each arm at a time, the arms side by side, until every task ended, the
 * wait limit passed or the server failed. */
static void follow(struct ablate_run *run) {
  for (;;) {
    bool left = false, moved = false;
    for (size_t a = 0; a < run->n_arms && !run->aborted; a++) {
      struct arm_run *arm = &run->arms[a];
      struct ablate_task *t = arm->next < run->n_files ? &arm->tasks[arm->next] : NULL;
      if (t && t->id[0] && poll(run, t, false)) {
        arm->next++;
        moved = true;
        t = arm->next < run->n_files ? &arm->tasks[arm->next] : NULL;
      }
      if (t && !t->id[0] && !run->aborted) {
        submit(run, t);
        if (!t->id[0]) /* refused: the arm goes on with its next program */
          arm->next++;
        moved = true;
      }
      left = left || arm->next < run->n_files;
    }
    if (!left || run->aborted)
      return;
    if (run->o->has_wait_limit && now_s() - run->started >= (double)run->o->wait_limit) {
      for (size_t a = 0; a < run->n_arms && !run->aborted; a++) {
        struct arm_run *arm = &run->arms[a];
        if (arm->next < run->n_files && arm->tasks[arm->next].id[0])
          poll(run, &arm->tasks[arm->next], true);
      }
      fprintf(stderr, "note: the wait limit of %lld s passed\n", run->o->wait_limit);
      return;
    }
    if (!moved)
      sleep_s(POLL_S);
  }
}

/* ---- the report ---- */

/* The results in table order: by program, then by arm (a new array, NULL when out of
 * memory; the caller frees it). */
static struct ablate_result *collect(const struct ablate_run *run, size_t *ret_n) {
  struct ablate_result *rs = calloc(run->n_files * run->n_arms + 1, sizeof *rs);
  size_t n = 0;
  for (size_t f = 0; rs && f < run->n_files; f++)
    for (size_t a = 0; a < run->n_arms; a++)
      rs[n++] = run->arms[a].tasks[f].r;
  *ret_n = n;
  return rs;
}

static void print_report(const struct ablate_run *run, const struct ablate_result *rs, size_t n) {
  const char *names[MAX_ARMS];
  printf("arms:\n");
  for (size_t a = 0; a < run->n_arms; a++) {
    const struct arm_spec *s = run->arms[a].spec;
    names[a] = s->name;
    printf("  %-9s %s %s in %s: %s\n", s->name, s->policy, s->search, run->arms[a].ns,
           s->mirrors);
  }
  putchar('\n');
  ablate_print_table(stdout, rs, n);
  putchar('\n');
  ablate_print_summary(stdout, names, run->n_arms, rs, n);
  fflush(stdout);
}

/* x as a JSON number, or null when it is not finite (a new reference). */
static json_t *real_or_null(double x) {
  return isfinite(x) ? json_real(x) : json_null();
}

/* Writes --out. Returns 0, or -1 after printing why. */
static int write_json(const struct ablate_run *run, const struct ablate_result *rs, size_t n) {
  json_t *arms = json_array(), *results = json_array();
  for (size_t a = 0; arms && a < run->n_arms; a++) {
    const struct arm_spec *s = run->arms[a].spec;
    json_array_append_new(arms, json_pack("{s:s, s:s, s:o, s:s, s:s, s:o, s:o}", "name", s->name,
                                          "policy", s->policy, "search",
                                          json_loads(s->search, 0, NULL), "memory",
                                          run->arms[a].ns, "mirrors", s->mirrors, "geomean_final",
                                          real_or_null(ablate_geomean(rs, n, s->name,
                                                                      ABLATE_MARKS)),
                                          "geomean_at_5",
                                          real_or_null(ablate_geomean(rs, n, s->name, 0))));
  }
  for (size_t i = 0; results && i < n; i++)
    json_array_append_new(results, ablate_result_json(&rs[i]));
  json_t *doc = json_pack("{s:s, s:I, s:I, s:o, s:o}", "server",
                          cli_client_base_url(run->client), "steps", (json_int_t)run->o->steps,
                          "seed", (json_int_t)run->o->seed, "arms", arms, "results", results);
  int rc = doc && json_dump_file(doc, run->o->out, JSON_INDENT(1)) == 0 ? 0 : -1;
  if (rc != 0)
    fprintf(stderr, "error: cannot write %s: %s\n", run->o->out, strerror(errno));
  json_decref(doc);
  return rc;
}

static void run_clear(struct ablate_run *run) {
  for (size_t a = 0; a < run->n_arms; a++) {
    for (size_t f = 0; run->arms[a].tasks && f < run->n_files; f++)
      json_decref(run->arms[a].tasks[f].body);
    free(run->arms[a].tasks);
  }
}

/* Prepares the namespaces, runs, reports. Returns the exit status. */
static int execute(struct ablate_run *run) {
  for (size_t a = 0; a < run->n_arms; a++)
    if (cli_memory_prepare(run->client, run->arms[a].ns, true) != 0)
      return CLI_EXIT_FAIL;
  follow(run);
  size_t n = 0;
  struct ablate_result *rs = collect(run, &n);
  if (!rs) {
    fprintf(stderr, "error: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  print_report(run, rs, n);
  int ret = run->aborted || run->refused ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  if (run->o->out && write_json(run, rs, n) != 0)
    ret = CLI_EXIT_FAIL;
  free(rs);
  return ret;
}

/* --replay: the arms over a space table (cli/ablate_replay.c). */
static int replay_main(struct ablate_opts *o) {
  if (!o->has_steps)
    o->steps = 20;
  if (!o->has_arms)
    o->arms = "full,noprefix,nolocal,flat,refine,noskills,bestofn,random";
  int ret = check_replay_opts(o);
  if (ret >= 0)
    return ret;
  const struct arm_spec *arms[MAX_ARMS];
  int n_arms = parse_arms(o->arms, arms);
  if (n_arms < 0)
    return CLI_EXIT_USAGE;
  struct replay_arm list[MAX_ARMS];
  for (int a = 0; a < n_arms; a++)
    list[a] = (struct replay_arm){arms[a]->name, arms[a]->policy, arms[a]->search};
  struct replay_params p = {.table = o->replay, .seeds = (long)o->seeds, .steps = (long)o->steps,
                            .arms = list, .n_arms = (size_t)n_arms,
                            .modes = o->modes ? o->modes : "cold,warm", .tasks = o->tasks,
                            .jobs = (long)o->jobs, .prefix = o->prefix, .out = o->out,
                            .evaluator = o->replay_evaluator, .keep = o->keep_data};
  return cli_ablate_replay(&p);
}

int cli_ablate_main(int argc, char **argv) {
  struct ablate_opts o = {.seconds = 300, .seed = 42, .prefix = "ablate",
                          .arms = "full,noprefix,nolocal,flat,refine", .jobs = 8};
  int ret = cli_parse_options(argc, argv, &ablate_options, &o);
  if (ret >= 0)
    return ret;
  o.files = argv + optind;
  o.n_files = (size_t)(argc - optind);
  if (o.replay)
    return replay_main(&o);
  if (o.has_seeds || o.modes || o.tasks || o.replay_evaluator || o.keep_data) {
    fprintf(stderr, "error: --seeds, --modes, --tasks, --replay-evaluator and --keep-data "
                    "go with --replay\n");
    return CLI_EXIT_USAGE;
  }
  if ((ret = check_opts(&o)) >= 0)
    return ret;
  const struct arm_spec *arms[MAX_ARMS];
  int n_arms = parse_arms(o.arms, arms);
  if (n_arms < 0)
    return CLI_EXIT_USAGE;
  struct ablate_run run = {.o = &o, .n_arms = (size_t)n_arms, .n_files = o.n_files,
                           .started = now_s()};
  if (cli_client_new(o.server, o.token_file, &run.client) != 0)
    return CLI_EXIT_USAGE;
  ret = prepare(&run, arms) == 0 ? execute(&run) : CLI_EXIT_USAGE;
  run_clear(&run);
  cli_client_free(run.client);
  return ret;
}
