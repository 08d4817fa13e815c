/* `opforge tune`: reads the programs, submits them (tune_submit.c), follows them together
 * (tune_follow.c) while showing their progress (tune_progress.c), exports the results
 * (tune_export.c) and reports (tune_report.c, tune_junit.c). */
#include "cli/tune.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/tune_args.h"
#include "cli/tune_export.h"
#include "cli/tune_follow.h"
#include "cli/tune_junit.h"
#include "cli/tune_progress.h"
#include "cli/tune_report.h"
#include "cli/tune_submit.h"

/* Everything one invocation tracks. */
struct tune_run {
  const struct tune_opts *o;
  struct cli_client *client;
  struct tune_task *tasks;
  json_t **bodies;       /* each program's submission, until it is sent */
  bool *quiet;           /* the task had ended before the run: show its end only */
  size_t n;
  struct tune_view view;
  int failure;           /* the run's own failure: 0, or an exit status (1, 3, 4) */
  bool limit_hit;        /* --wait-limit passed with tasks unfinished */
};

/* Frees what the run holds (the client too). */
static void run_clear(struct tune_run *run) {
  for (size_t i = 0; run->bodies && i < run->n; i++)
    json_decref(run->bodies[i]);
  free(run->bodies);
  free(run->tasks);
  free(run->quiet);
  cli_client_free(run->client);
}

/* How much an exit status says, when two apply: a refused token, then an unreachable
 * server, then bad usage, then a failure, then the wait limit. */
static int exit_rank(int status) {
  static const int rank[] = {[CLI_EXIT_OK] = 0, [CLI_EXIT_WAIT_LIMIT] = 1,
                             [CLI_EXIT_FAIL] = 2, [CLI_EXIT_USAGE] = 3,
                             [CLI_EXIT_UNREACHABLE] = 4, [CLI_EXIT_AUTH] = 5};
  return status >= 0 && status < (int)(sizeof rank / sizeof rank[0]) ? rank[status] : 2;
}

/* The status that says more of a and b. */
static int worse(int a, int b) {
  return exit_rank(b) > exit_rank(a) ? b : a;
}

/* Notes a failure of the run itself (an exit status). */
static void run_failed(struct tune_run *run, int status) {
  run->failure = worse(run->failure, status);
}

/* Reads every program and builds its submission before anything is sent. Returns 0, or
 * -1 after printing why. */
static int run_prepare(struct tune_run *run, const struct tune_files *files) {
  run->n = files->n;
  run->tasks = calloc(files->n, sizeof *run->tasks);
  run->bodies = calloc(files->n, sizeof *run->bodies);
  run->quiet = calloc(files->n, sizeof *run->quiet);
  if (!run->tasks || !run->bodies || !run->quiet) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  for (size_t i = 0; i < files->n; i++) {
    struct tune_task *t = &run->tasks[i];
    json_t *reference = NULL;
    tune_task_init(t, files->paths[i]);
    if (cli_read_program(t->file, CLI_REFERENCE_MAX, "a reference", &reference) != 0)
      return -1;
    run->bodies[i] = submit_options_body(&run->o->submission, reference, t->name);
    if (!run->bodies[i])
      return -1;
  }
  return 0;
}

/* ---- submitting ---- */

/* Says how task t came to be. */
static void say_submitted(struct tune_run *run, const struct tune_task *t) {
  char best[32] = "";
  if (!isnan(t->best_speedup))
    snprintf(best, sizeof best, ", best %.2fx", t->best_speedup);
  if (t->origin == TUNE_NEW && t->replaces[0])
    tune_view_say(&run->view, false,
                  "[%s] submitted again: task %s (task %s of an earlier run did not succeed)",
                  t->name, t->id, t->replaces);
  else if (t->origin == TUNE_NEW)
    tune_view_say(&run->view, false, "[%s] submitted: task %s", t->name, t->id);
  else
    tune_view_say(&run->view, false, "[%s] %s: task %s, %s%s (an earlier run submitted it)",
                  t->name, tune_origin_name(t->origin), t->id, tune_state_name(t->state), best);
}

/* Submits every program; stops at the first failure that would repeat for the rest (an
 * unreachable server, a refused token, options the server refuses). */
static void submit_all(struct tune_run *run) {
  struct tune_submit_policy policy = {.keyed = !run->o->no_idempotency,
                                      .scope = run->o->run_id, .reuse = run->o->reuse};
  for (size_t i = 0; i < run->n && run->failure == 0; i++) {
    struct tune_task *t = &run->tasks[i];
    enum tune_submit_result rc = tune_submit(run->client, t, run->bodies[i], &policy);
    json_decref(run->bodies[i]);
    run->bodies[i] = NULL;
    if (rc == TUNE_SUBMIT_OK) {
      run->quiet[i] = tune_state_is_final(t->state);
      say_submitted(run, t);
    } else if (rc == TUNE_SUBMIT_REFUSED) {
      /* A refused reference is this program's own; anything else (an option, the
       * memory namespace) would be refused for every program. */
      if (strcmp(t->error_field, "reference") != 0)
        run_failed(run, CLI_EXIT_USAGE);
    } else {
      run_failed(run, rc == TUNE_SUBMIT_AUTH          ? CLI_EXIT_AUTH
                      : rc == TUNE_SUBMIT_UNREACHABLE ? CLI_EXIT_UNREACHABLE
                                                      : CLI_EXIT_FAIL);
    }
  }
}

/* ---- following ---- */

/* The follower's hook: task i's event goes to the view (user: the run). */
static void on_event(void *user, size_t i, const json_t *event) {
  struct tune_run *run = user;
  tune_view_event(&run->view, &run->tasks[i], event, run->quiet[i]);
}

/* A task ended: its final record (the error, the baselines), then its exports. */
static void on_end(void *user, size_t i) {
  struct tune_run *run = user;
  struct tune_task *t = &run->tasks[i];
  char path[CLI_MAX_URL];
  char *esc = cli_escape(t->id);
  long status = 0;
  json_t *task = NULL;
  if (esc && t->state != TUNE_LOST) {
    snprintf(path, sizeof path, "/v1/tasks/%s", esc);
    if (cli_request(run->client, "GET", path, NULL, &status, &task) == 0 && status == 200)
      tune_task_take(t, task);
    else if (cli_client_unreachable(run->client))
      run_failed(run, CLI_EXIT_UNREACHABLE);
    json_decref(task);
  }
  free(esc);
  if (t->state == TUNE_LOST) { /* no finished event: its line is said here */
    char line[TUNE_TEXT_MAX + 64];
    tune_format_finished(t, line, sizeof line);
    tune_view_say(&run->view, false, "%s", line);
  }
  if (run->o->export_dir && t->state == TUNE_SUCCEEDED) {
    enum tune_export_result rc = tune_export_task(run->client, t, run->o->export_dir);
    if (rc != TUNE_EXPORT_OK)
      run_failed(run, rc == TUNE_EXPORT_UNREACHABLE ? CLI_EXIT_UNREACHABLE : CLI_EXIT_FAIL);
  }
}

/* The follower's hook, twice a second: the live block is redrawn. */
static void on_tick(void *user) {
  struct tune_run *run = user;
  tune_view_redraw(&run->view, run->tasks, run->n, tune_now_wall());
}

/* Follows the submitted tasks to their end or to --wait-limit. */
static void follow_all(struct tune_run *run, double started) {
  const struct tune_follow_hooks hooks = {.on_event = on_event, .on_end = on_end,
                                          .on_tick = on_tick, .user = run};
  double deadline = run->o->has_wait_limit ? started + (double)run->o->wait_limit : INFINITY;
  tune_view_redraw(&run->view, run->tasks, run->n, tune_now_wall());
  enum tune_follow_result rc =
      tune_follow(cli_client_base_url(run->client), run->tasks, run->n, deadline, &hooks);
  tune_view_clear(&run->view);
  if (rc == TUNE_FOLLOW_DEADLINE)
    run->limit_hit = true;
  else if (rc == TUNE_FOLLOW_UNREACHABLE)
    run_failed(run, CLI_EXIT_UNREACHABLE);
  else if (rc == TUNE_FOLLOW_ERROR)
    run_failed(run, CLI_EXIT_FAIL);
}

/* ---- reporting ---- */

/* The run's options as JSON, for the results document (a new reference or NULL). */
static json_t *options_json(const struct tune_opts *o) {
  json_t *fields = o->submission.fields ? json_deep_copy(o->submission.fields) : json_object();
  return json_pack("{s:o, s:o, s:s?, s:s?, s:b, s:b, s:o}", "fail_under",
                   isnan(o->fail_under) ? json_null() : json_real(o->fail_under),
                   "wait_limit_s", o->has_wait_limit ? json_integer(o->wait_limit) : json_null(),
                   "export", o->export_dir, "run_id", o->run_id, "idempotency",
                   !o->no_idempotency, "reuse", o->reuse, "submission", fields);
}

/* Prints the table, writes --json and --junit. Returns the exit status. */
static int report(struct tune_run *run) {
  bool submitted = false;
  for (size_t i = 0; i < run->n; i++)
    submitted = submitted || run->tasks[i].id[0] || run->tasks[i].state == TUNE_REFUSED;
  int status = worse(tune_exit_status(run->tasks, run->n, run->o->fail_under, run->limit_hit),
                     run->failure);
  struct tune_report r = {.tasks = run->tasks, .n = run->n,
                          .server = cli_client_base_url(run->client),
                          .fail_under = run->o->fail_under, .export_dir = run->o->export_dir,
                          .limit_hit = run->limit_hit, .exit_status = status,
                          .now_s = tune_now_wall(), .options = options_json(run->o)};
  if (submitted)
    tune_print_report(stdout, &r);
  bool ok = !run->o->json_out || tune_write_json(run->o->json_out, &r) == 0;
  ok = (!run->o->junit_out || tune_junit_write_file(run->o->junit_out, &r) == 0) && ok;
  json_decref(r.options);
  return !ok && status == CLI_EXIT_OK ? CLI_EXIT_FAIL : status;
}

/* Runs everything once the options and the programs are known. */
static int tune_run_all(const struct tune_opts *o, const struct tune_files *files) {
  struct tune_run run = {.o = o};
  double started = tune_now_monotonic();
  if (cli_client_new(o->server, o->token_file, &run.client) != 0)
    return CLI_EXIT_USAGE;
  int ret = CLI_EXIT_USAGE;
  if (run_prepare(&run, files) == 0 &&
      (!o->export_dir || tune_export_prepare(o->export_dir) == 0)) {
    tune_view_init(&run.view, stderr, o->events, true);
    submit_all(&run);
    if (run.failure != CLI_EXIT_UNREACHABLE && run.failure != CLI_EXIT_AUTH)
      follow_all(&run, started);
    ret = report(&run);
  }
  run_clear(&run);
  return ret;
}

int cli_tune_main(int argc, char **argv) {
  struct tune_opts o = {0};
  struct tune_files files = {0};
  int ret = tune_parse_args(argc, argv, &o);
  if (ret < 0)
    ret = tune_expand_inputs(&o, &files) != 0 ? CLI_EXIT_USAGE : tune_run_all(&o, &files);
  tune_files_clear(&files);
  tune_opts_clear(&o);
  return ret;
}
