/* `opforge ablate --replay`: starts a server whose evaluator answers from a space table
 * (gpu/replay/replay.c), runs every (task, arm, seed) of the table under each memory
 * mode, and prints the per-arm figures and the targets (cli/ablate_replay_stats.h). */
#include "cli/ablate_replay.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/ablate_replay_stats.h"
#include "cli/args.h"
#include "cli/candidate_pages.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "gpu/replay/space_table.h"

#define POLL_S 0.05
#define START_WAIT_S 60
#define MODES_MAX 3

/* The reference every submission carries: the replay evaluator takes the task from its
 * first line and never runs it. */
static const char stub_reference[] =
    "# opforge-replay-task: %s\n"
    "import torch\n"
    "\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return x\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.zeros(1)]\n"
    "\n"
    "def get_init_inputs():\n"
    "    return []\n";

enum run_state { RUN_PENDING, RUN_RUNNING, RUN_DONE, RUN_FAILED };

struct run_slot {
  struct replay_run r;
  const struct replay_arm *arm;
  enum run_state state;
  char id[40];
  char ns[72];
  json_t *delta;  /* owned: the memory it learned (stripped export), cold runs in warm mode */
};

struct replay {
  const struct replay_params *p;
  struct space_table table;
  bool *use_task;           /* per table task */
  struct cli_client *client;
  pid_t server;
  char data[PATH_MAX];
  json_t *seed_doc;         /* the seed memory's export */
  struct run_slot *runs;
  size_t n_runs;
  bool failed;
  char modes[MODES_MAX][8];
  size_t n_modes;
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

/* ---- the server ---- */

/* The replay evaluator: --replay-evaluator, $OPFORGE_REPLAY_EVALUATOR, else next to this
 * binary (the build tree's gpu/replay/, or an install's libexec/opforge/). */
static int find_evaluator(const char *given, char *out, size_t len) {
  const char *env = getenv("OPFORGE_REPLAY_EVALUATOR");
  if (given || (env && *env)) {
    snprintf(out, len, "%s", given ? given : env);
    return access(out, X_OK) == 0 ? 0 : -1;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return -1;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash)
    *slash = '\0';
  static const char *const rel[] = {"gpu/replay/opforge-replay", "opforge-replay",
                                    "../libexec/opforge/opforge-replay"};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    if ((size_t)snprintf(out, len, "%.*s/%s", (int)(len / 2), self, rel[i]) < len &&
        access(out, X_OK) == 0)
      return 0;
  }
  snprintf(out, len, "%.*s/%s", (int)(len / 2), self, rel[0]);
  return -1;
}

/* Starts `opforge serve` on a free port with the replay evaluator; fills r->server and the
 * base URL. Returns 0, or -1 after printing why. */
static int start_server(struct replay *rp, const char *evaluator, char *url, size_t urllen) {
  char table[PATH_MAX], self[PATH_MAX], log[PATH_MAX + 16], jobs[24];
  if (!realpath(rp->p->table, table)) {
    fprintf(stderr, "error: %s: %s\n", rp->p->table, strerror(errno));
    return -1;
  }
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "error: cannot find this binary: %s\n", strerror(errno));
    return -1;
  }
  self[n] = '\0';
  snprintf(log, sizeof log, "%s/server.log", rp->data);
  snprintf(jobs, sizeof jobs, "%ld", rp->p->jobs);
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    /* The server ends with this process, also when a signal ends it first. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
      _exit(127);
    int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fds[1], 1);
    if (err >= 0)
      dup2(err, 2);
    close(fds[0]);
    setenv("OPFORGE_REPLAY_TABLE", table, 1);
    execl(self, self, "serve", "--listen", "127.0.0.1:0", "--data", rp->data, "--gpus", "0",
          "--workers-per-gpu", jobs, "--evaluator", evaluator, "--sandbox", "none",
          "--max-body", "67108864", "--evaluate-deadline", "60", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  rp->server = pid;
  FILE *in = fdopen(fds[0], "r");
  char line[512];
  double until = now_s() + START_WAIT_S;
  url[0] = '\0';
  while (in && now_s() < until && fgets(line, sizeof line, in)) {
    if (strncmp(line, "listening on ", 13) == 0) {
      snprintf(url, urllen, "%.*s", (int)strcspn(line + 13, "\r\n"), line + 13);
      break;
    }
  }
  if (in)
    fclose(in);  /* the server's later stdout lines go nowhere: it prints only that one */
  if (!url[0]) {
    fprintf(stderr, "error: the replay server did not start (its log: %s)\n", log);
    return -1;
  }
  return 0;
}

/* Says how the server ended when it is no longer running. */
static void say_server_end(struct replay *rp) {
  int status;
  if (rp->server <= 0 || waitpid(rp->server, &status, WNOHANG) != rp->server)
    return;
  rp->server = 0;
  if (WIFSIGNALED(status))
    fprintf(stderr, "error: the replay server died of signal %d\n", WTERMSIG(status));
  else
    fprintf(stderr, "error: the replay server exited with status %d\n", WEXITSTATUS(status));
}

static void stop_server(struct replay *rp) {
  if (rp->server <= 0)
    return;
  kill(rp->server, SIGTERM);
  int status;
  while (waitpid(rp->server, &status, 0) < 0 && errno == EINTR) {
  }
  rp->server = 0;
}

/* Removes the temporary data directory (files one level down and the store's). */
static void remove_tree(const char *dir) {
  char cmd[PATH_MAX + 32];
  if (strchr(dir, '\'') || strncmp(dir, "/tmp/", 5) != 0)
    return;
  snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "note: could not remove %s\n", dir);
}

/* ---- memory ---- */

static int create_namespace(struct replay *rp, const char *ns) {
  json_t *body = json_pack("{s:s, s:s}", "name", ns, "from", "seed"), *reply = NULL;
  int rc = body ? cli_call(rp->client, "POST", "/v1/memory/namespaces", body, &reply) : -1;
  json_decref(body);
  json_decref(reply);
  return rc;
}

static void delete_namespace(struct replay *rp, const char *ns) {
  char path[160];
  snprintf(path, sizeof path, "/v1/memory/namespaces/%s", ns);
  json_t *reply = NULL;
  long status = 0;
  cli_request(rp->client, "DELETE", path, NULL, &status, &reply);
  json_decref(reply);
}

static json_t *export_memory(struct replay *rp, const char *ns) {
  char path[160];
  snprintf(path, sizeof path, "/v1/memory/export?memory=%s", ns);
  json_t *doc = NULL;
  return cli_call(rp->client, "GET", path, NULL, &doc) == 0 ? doc : NULL;
}

/* What a run's export adds to the seed's: each record's key and stats, its evidence, and
 * whole any record the seed lacks (a new edge). A new reference. */
static json_t *strip_export(const json_t *seed, json_t *doc) {
  json_t *out = json_object();
  static const char *const parts[] = {"globals", "locals", "edges"};
  for (size_t p = 0; out && p < 3; p++) {
    json_t *arr = json_array(), *rec;
    size_t i;
    json_array_foreach(json_object_get(doc, parts[p]), i, rec) {
      json_t *id = json_object_get(rec, "id");
      bool known = false;
      size_t j;
      json_t *s;
      json_array_foreach(json_object_get(seed, parts[p]), j, s) {
        known = known || (id ? json_equal(json_object_get(s, "id"), id)
                             : json_equal(json_object_get(s, "from"), json_object_get(rec, "from")) &&
                                   json_equal(json_object_get(s, "to"), json_object_get(rec, "to")));
      }
      if (!known) {
        json_array_append(arr, rec);
        continue;
      }
      json_t *small = json_pack("{s:O}", "stats", json_object_get(rec, "stats"));
      static const char *const keys[] = {"id", "from", "to", "evidence"};
      for (size_t k = 0; k < 4; k++)
        if (json_object_get(rec, keys[k]))
          json_object_set(small, keys[k], json_object_get(rec, keys[k]));
      json_array_append_new(arr, small);
    }
    json_object_set_new(out, parts[p], arr);
  }
  return out;
}

/* ---- runs ---- */

static bool mode_on(const struct replay *rp, const char *mode) {
  for (size_t m = 0; m < rp->n_modes; m++)
    if (strcmp(rp->modes[m], mode) == 0)
      return true;
  return false;
}

static int submit(struct replay *rp, struct run_slot *s) {
  const struct space_task *t = &rp->table.tasks[s->r.task_index];
  char name[REPLAY_NAME_MAX + 48], *ref = NULL;
  snprintf(name, sizeof name, "%.90s.%s.%s.%ld", t->name, s->arm->name, s->r.mode, s->r.seed);
  if (asprintf(&ref, stub_reference, t->name) < 0)
    return -1;
  json_t *search = json_loads(s->arm->search, 0, NULL);
  if (search && strcmp(s->r.mode, "frozen") == 0) /* warm memory the run does not update */
    json_object_set_new(search, "learn", json_false());
  json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:{s:I, s:I}, s:o}", "name", name,
                           "reference", ref, "policy", s->arm->policy, "memory", s->ns, "seed",
                           (json_int_t)s->r.seed, "proposer", "builtin", "budget", "steps",
                           (json_int_t)s->r.steps, "seconds",
                           (json_int_t)86400, "search", search ? search : json_object());
  free(ref);
  json_t *reply = NULL;
  int rc = body ? cli_call(rp->client, "POST", "/v1/tasks", body, &reply) : -1;
  json_decref(body);
  const char *id = json_string_value(json_object_get(reply, "id"));
  if (rc == 0 && id && strlen(id) < sizeof s->id)
    snprintf(s->id, sizeof s->id, "%s", id);
  else
    rc = -1;
  json_decref(reply);
  return rc;
}

/* The warm memory of s: the seed plus what the cold runs of the other tasks (same arm,
 * same seed) learned. Returns 0 once imported into s's namespace. */
static int import_warm(struct replay *rp, struct run_slot *s) {
  json_t **docs = calloc(rp->n_runs ? rp->n_runs : 1, sizeof *docs);
  size_t n = 0;
  for (size_t i = 0; docs && i < rp->n_runs; i++) {
    struct run_slot *c = &rp->runs[i];
    if (strcmp(c->r.mode, "cold") == 0 && c->arm == s->arm && c->r.seed == s->r.seed &&
        c->r.task_index != s->r.task_index && c->delta)
      docs[n++] = c->delta;
  }
  json_t *doc = docs ? replay_merge_memory(rp->seed_doc, docs, n) : NULL;
  free(docs);
  char path[160];
  snprintf(path, sizeof path, "/v1/memory/import?memory=%s", s->ns);
  json_t *reply = NULL;
  int rc = doc ? cli_call(rp->client, "POST", path, doc, &reply) : -1;
  json_decref(doc);
  json_decref(reply);
  return rc;
}

static int start_run(struct replay *rp, struct run_slot *s, size_t index) {
  snprintf(s->ns, sizeof s->ns, "%.40s-r%zu", rp->p->prefix, index);
  if (create_namespace(rp, s->ns) != 0)
    return -1;
  if (strcmp(s->r.mode, "cold") != 0 && import_warm(rp, s) != 0) /* warm and frozen */
    return -1;
  if (submit(rp, s) != 0)
    return -1;
  s->state = RUN_RUNNING;
  return 0;
}

static int append_page(const json_t *items, void *user) {
  return json_array_extend(user, (json_t *)items) != 0;
}

/* Polls s; when it ended, reads its figures (and its memory when warm runs need it).
 * Returns 1 when it ended, 0 when still running, -1 on a server failure. */
static int poll_run(struct replay *rp, struct run_slot *s) {
  char path[96];
  snprintf(path, sizeof path, "/v1/tasks/%s", s->id);
  json_t *task = NULL;
  if (cli_call(rp->client, "GET", path, NULL, &task) != 0)
    return -1;
  const char *status = json_string_value(json_object_get(task, "status"));
  bool ended = status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                          strcmp(status, "cancelled") == 0);
  bool failed = ended && strcmp(status, "succeeded") != 0;
  if (failed) {
    json_t *err = json_object_get(task, "error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    fprintf(stderr, "error: %s under %s (%s, seed %ld) %s: %s\n", s->r.task, s->arm->name,
            s->r.mode, s->r.seed, status, msg ? msg : "(no message)");
  }
  /* Proposals of points the table lacks cost the engine no step: it counts them. */
  long not_recorded = (long)json_integer_value(
      json_object_get(json_object_get(task, "progress"), "not_recorded"));
  json_decref(task);
  if (!ended)
    return 0;
  json_t *items = json_array();
  if (!items || cli_each_candidate_page(rp->client, s->id, append_page, items) != 0) {
    json_decref(items);
    return -1;
  }
  replay_run_take(&s->r, items, true);
  s->r.not_recorded += not_recorded;
  json_decref(items);
  if (strcmp(s->r.mode, "cold") == 0 && (mode_on(rp, "warm") || mode_on(rp, "frozen"))) {
    json_t *doc = export_memory(rp, s->ns);
    if (!doc)
      return -1;
    s->delta = strip_export(rp->seed_doc, doc);
    json_decref(doc);
  }
  delete_namespace(rp, s->ns);
  s->state = failed ? RUN_FAILED : RUN_DONE;
  if (failed)
    rp->failed = true;
  return 1;
}

/* Runs every run of mode, jobs at a time. Returns 0, or -1 when the server failed. */
static int run_mode(struct replay *rp, const char *mode) {
  size_t total = 0, done = 0, in_flight = 0, next = 0;
  for (size_t i = 0; i < rp->n_runs; i++)
    total += strcmp(rp->runs[i].r.mode, mode) == 0;
  double started = now_s(), said = started;
  while (done < total) {
    while (in_flight < (size_t)rp->p->jobs && next < rp->n_runs) {
      struct run_slot *s = &rp->runs[next];
      next++;
      if (strcmp(s->r.mode, mode) != 0)
        continue;
      if (start_run(rp, s, next - 1) != 0)
        return -1;
      in_flight++;
    }
    bool moved = false;
    for (size_t i = 0; i < next; i++) {
      struct run_slot *s = &rp->runs[i];
      if (s->state != RUN_RUNNING)
        continue;
      int rc = poll_run(rp, s);
      if (rc < 0)
        return -1;
      if (rc == 1) {
        done++;
        in_flight--;
        moved = true;
      }
    }
    if (now_s() - said >= 10 || done == total) {
      fprintf(stderr, "%s: %zu of %zu runs done (%.0f s)\n", mode, done, total,
              now_s() - started);
      said = now_s();
    }
    if (!moved)
      sleep_s(POLL_S);
  }
  return 0;
}

/* ---- set-up ---- */

/* The memory modes of --modes, in the order they run: cold first, since warm and frozen
 * runs start from what the cold runs learned. */
static const char *const mode_order[MODES_MAX] = {"cold", "warm", "frozen"};

/* Reads rp->p->modes into rp->modes (in mode_order). Returns 0, or -1 having said why. */
static int parse_modes(struct replay *rp) {
  bool named[MODES_MAX] = {false};
  for (const char *p = rp->p->modes; *p;) {
    size_t len = strcspn(p, ",");
    size_t m = 0;
    while (m < MODES_MAX && !(strlen(mode_order[m]) == len && strncmp(p, mode_order[m], len) == 0))
      m++;
    if (m == MODES_MAX) {
      fprintf(stderr, "error: --modes: unknown mode '%.*s' (known: cold, warm, frozen)\n",
              (int)(len < 32 ? len : 32), p);
      return -1;
    }
    if (named[m]) {
      fprintf(stderr, "error: --modes: repeated mode '%s'\n", mode_order[m]);
      return -1;
    }
    named[m] = true;
    p += len;
    p += *p == ',';
  }
  rp->n_modes = 0;
  for (size_t m = 0; m < MODES_MAX; m++)
    if (named[m])
      snprintf(rp->modes[rp->n_modes++], sizeof rp->modes[0], "%s", mode_order[m]);
  if (rp->n_modes == 0) {
    fprintf(stderr, "error: --modes names no mode\n");
    return -1;
  }
  if ((named[1] || named[2]) && !named[0]) {
    fprintf(stderr, "error: --modes: %s memory is learned from the cold runs: name cold too\n",
            named[1] ? "warm" : "frozen");
    return -1;
  }
  return 0;
}

static int select_tasks(struct replay *rp) {
  rp->use_task = calloc(rp->table.n_tasks, sizeof *rp->use_task);
  if (!rp->use_task)
    return -1;
  if (!rp->p->tasks) {
    for (size_t t = 0; t < rp->table.n_tasks; t++)
      rp->use_task[t] = true;
    return 0;
  }
  for (const char *p = rp->p->tasks; *p;) {
    size_t len = strcspn(p, ",");
    bool found = false;
    for (size_t t = 0; t < rp->table.n_tasks; t++)
      if (strlen(rp->table.tasks[t].name) == len && strncmp(rp->table.tasks[t].name, p, len) == 0)
        found = rp->use_task[t] = true;
    if (!found) {
      fprintf(stderr, "error: --tasks: the table has no task '%.*s'\n", (int)len, p);
      return -1;
    }
    p += len + (p[len] == ',');
  }
  return 0;
}

static int make_runs(struct replay *rp) {
  size_t per = 0;
  for (size_t t = 0; t < rp->table.n_tasks; t++)
    per += rp->use_task[t];
  rp->n_runs = per * rp->p->n_arms * (size_t)rp->p->seeds * rp->n_modes;
  rp->runs = calloc(rp->n_runs ? rp->n_runs : 1, sizeof *rp->runs);
  if (!rp->runs)
    return -1;
  size_t i = 0;
  for (size_t m = 0; m < rp->n_modes; m++)
    for (long seed = 1; seed <= rp->p->seeds; seed++)
      for (size_t a = 0; a < rp->p->n_arms; a++)
        for (size_t t = 0; t < rp->table.n_tasks; t++) {
          if (!rp->use_task[t])
            continue;
          struct run_slot *s = &rp->runs[i++];
          s->arm = &rp->p->arms[a];
          snprintf(s->r.task, sizeof s->r.task, "%s", rp->table.tasks[t].name);
          snprintf(s->r.arm, sizeof s->r.arm, "%s", s->arm->name);
          snprintf(s->r.mode, sizeof s->r.mode, "%s", rp->modes[m]);
          s->r.seed = seed;
          s->r.task_index = (int)t;
          s->r.steps = rp->p->steps;
          s->r.space_best_ms = rp->table.tasks[t].best_ms;
        }
  return 0;
}

static int load_seed_doc(struct replay *rp) {
  char ns[72];
  snprintf(ns, sizeof ns, "%.40s-seed", rp->p->prefix);
  if (create_namespace(rp, ns) != 0)
    return -1;
  rp->seed_doc = export_memory(rp, ns);
  delete_namespace(rp, ns);
  return rp->seed_doc ? 0 : -1;
}

/* ---- the report ---- */

static void print_report(struct replay *rp) {
  const struct space_table *t = &rp->table;
  const char *source = json_string_value(json_object_get(t->header, "source"));
  const char *hw = json_string_value(json_object_get(t->header, "hardware"));
  size_t tasks = 0;
  for (size_t i = 0; i < t->n_tasks; i++)
    tasks += rp->use_task[i];
  printf("replay of %s (%s, %s): %zu tasks, %ld seeds, %ld steps, modes", rp->p->table,
         source ? source : "recorded", hw ? hw : (t->n_tasks ? t->tasks[0].hardware : "?"),
         tasks, rp->p->seeds, rp->p->steps);
  for (size_t m = 0; m < rp->n_modes; m++)
    printf("%s%s", m ? "," : " ", rp->modes[m]);
  printf("\narms:\n");
  for (size_t a = 0; a < rp->p->n_arms; a++)
    printf("  %-9s %s %s\n", rp->p->arms[a].name, rp->p->arms[a].policy, rp->p->arms[a].search);
  long not_recorded = 0, engine = 0;
  size_t n = rp->n_runs;
  struct replay_run *runs = calloc(n ? n : 1, sizeof *runs);
  for (size_t i = 0; runs && i < n; i++) {
    runs[i] = rp->runs[i].r;
    not_recorded += runs[i].not_recorded;
    engine += runs[i].engine_steps;
  }
  printf("proposals of points the table lacks (no step spent): %ld, beside %ld steps\n\n",
         not_recorded, engine);
  const char *arms[32], *modes[MODES_MAX];
  for (size_t a = 0; a < rp->p->n_arms && a < 32; a++)
    arms[a] = rp->p->arms[a].name;
  for (size_t m = 0; m < rp->n_modes; m++)
    modes[m] = rp->modes[m];
  if (runs) {
    replay_print_summary(stdout, modes, rp->n_modes, arms, rp->p->n_arms, runs, n);
    putchar('\n');
    struct replay_headroom *heads = calloc(t->n_tasks ? t->n_tasks : 1, sizeof *heads);
    size_t h = 0;
    for (size_t i = 0; heads && i < t->n_tasks; i++)
      if (rp->use_task[i])
        heads[h++] = (struct replay_headroom){t->tasks[i].first_ms, t->tasks[i].floor_ms,
                                              t->tasks[i].best_ms};
    if (heads)
      replay_print_targets(stdout, heads, h, runs, n);
    free(heads);
  }
  free(runs);
  fflush(stdout);
}

static int write_json(struct replay *rp) {
  json_t *runs = json_array();
  for (size_t i = 0; runs && i < rp->n_runs; i++)
    json_array_append_new(runs, replay_run_json(&rp->runs[i].r));
  json_t *tasks = json_array();
  for (size_t i = 0; tasks && i < rp->table.n_tasks; i++) {
    const struct space_task *t = &rp->table.tasks[i];
    if (!rp->use_task[i])
      continue;
    json_array_append_new(tasks, json_pack("{s:s, s:o, s:o, s:o, s:o}", "task", t->name,
                                           "space_best_ms", isfinite(t->best_ms) ? json_real(t->best_ms) : json_null(),
                                           "first_ms", isfinite(t->first_ms) ? json_real(t->first_ms) : json_null(),
                                           "floor_ms", isfinite(t->floor_ms) ? json_real(t->floor_ms) : json_null(),
                                           "eager_ms", isfinite(t->eager_ms) ? json_real(t->eager_ms) : json_null()));
  }
  json_t *doc = json_pack("{s:s, s:I, s:I, s:o, s:o}", "table", rp->p->table, "seeds",
                          (json_int_t)rp->p->seeds, "steps", (json_int_t)rp->p->steps, "tasks",
                          tasks, "runs", runs);
  int rc = doc && json_dump_file(doc, rp->p->out, JSON_INDENT(1)) == 0 ? 0 : -1;
  if (rc != 0)
    fprintf(stderr, "error: cannot write %s: %s\n", rp->p->out, strerror(errno));
  json_decref(doc);
  return rc;
}

static void clear(struct replay *rp) {
  for (size_t i = 0; rp->runs && i < rp->n_runs; i++)
    json_decref(rp->runs[i].delta);
  free(rp->runs);
  free(rp->use_task);
  json_decref(rp->seed_doc);
  space_table_clear(&rp->table);
  if (rp->client)
    cli_client_free(rp->client);
}

int cli_ablate_replay(const struct replay_params *p) {
  struct replay rp = {.p = p};
  char why[600], evaluator[PATH_MAX], url[256];
  if (parse_modes(&rp) != 0)
    return CLI_EXIT_USAGE;
  if (space_table_load(p->table, &rp.table, why, sizeof why) != 0) {
    fprintf(stderr, "error: --replay: %s\n", why);
    return CLI_EXIT_USAGE;
  }
  if (select_tasks(&rp) != 0 || make_runs(&rp) != 0) {
    clear(&rp);
    return CLI_EXIT_USAGE;
  }
  if (find_evaluator(p->evaluator, evaluator, sizeof evaluator) != 0) {
    fprintf(stderr, "error: no replay evaluator at %s (pass --replay-evaluator)\n", evaluator);
    clear(&rp);
    return CLI_EXIT_USAGE;
  }
  if (p->keep) {
    snprintf(rp.data, sizeof rp.data, "%s", p->keep);
    if (mkdir(rp.data, 0700) != 0 && errno != EEXIST) {
      fprintf(stderr, "error: %s: %s\n", rp.data, strerror(errno));
      clear(&rp);
      return CLI_EXIT_USAGE;
    }
  } else {
    snprintf(rp.data, sizeof rp.data, "/tmp/opforge-replay-XXXXXX");
    if (!mkdtemp(rp.data)) {
      fprintf(stderr, "error: cannot make a temporary directory: %s\n", strerror(errno));
      clear(&rp);
      return CLI_EXIT_FAIL;
    }
  }
  int ret = CLI_EXIT_FAIL;
  if (start_server(&rp, evaluator, url, sizeof url) == 0 &&
      cli_client_new(url, NULL, &rp.client) == 0 && load_seed_doc(&rp) == 0) {
    bool ok = true;
    for (size_t m = 0; ok && m < rp.n_modes; m++)
      ok = run_mode(&rp, rp.modes[m]) == 0;
    if (!ok) {
      say_server_end(&rp);
      fprintf(stderr, "error: the replay failed (the server's log: %s/server.log, kept)\n",
              rp.data);
    }
    print_report(&rp);
    ret = ok && !rp.failed ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (p->out && write_json(&rp) != 0)
      ret = CLI_EXIT_FAIL;
  }
  stop_server(&rp);
  if (!p->keep && ret == CLI_EXIT_OK)
    remove_tree(rp.data);
  clear(&rp);
  return ret;
}
