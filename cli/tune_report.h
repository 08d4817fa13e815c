/* `opforge tune`'s results: the summary table printed at the end, the --json document,
 * and the exit status they add up to. Pure: it reads the tasks and writes to the
 * streams or files it is given. */
#ifndef OPFORGE_CLI_TUNE_REPORT_H
#define OPFORGE_CLI_TUNE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/tune_task.h"

/* What the report says about the run as a whole. Strings are borrowed. */
struct tune_report {
  const struct tune_task *tasks;
  size_t n;
  const char *server;     /* base URL, for each task's URL */
  double fail_under;      /* NAN without --fail-under */
  const char *export_dir; /* NULL without --export */
  bool limit_hit;         /* --wait-limit passed with tasks unfinished */
  int exit_status;        /* what the run exits with */
  double now_s;           /* Unix seconds, for the wall time of unfinished tasks */
  json_t *options;        /* the run's options as JSON (borrowed), for --json */
};

/* The exit status the tasks call for (without the run's own failures, which the caller
 * knows): 2 when the server refused a submission as invalid, else 1 when a task failed,
 * was cancelled or lost, or succeeded under fail_under (NAN: no threshold), else 5 when
 * tasks were left unfinished (limit_hit), else 0. */
int tune_exit_status(const struct tune_task *tasks, size_t n, double fail_under,
                     bool limit_hit);

/* Prints the table (one row per task: name, status, speed-up over eager, best time,
 * steps, stop reason, origin, a note) and the summary lines to out. */
void tune_print_report(FILE *out, const struct tune_report *r);

/* The results document (a new reference; NULL when out of memory). */
json_t *tune_report_json(const struct tune_report *r);

/* Writes the results document to path. Returns 0, or -1 after printing why. */
int tune_write_json(const char *path, const struct tune_report *r);

/* Writes "<server>/v1/tasks/<id>" into out (outlen bytes); "" for a task without id. */
void tune_task_url(const char *server, const struct tune_task *t, char *out, size_t outlen);

/* Writes the task's note (an error, a refusal, being under the threshold, an export
 * note) into out; "" when there is nothing to say. */
void tune_task_note(const struct tune_report *r, const struct tune_task *t, char *out,
                    size_t outlen);

/* The origin's name: "new", "replayed" or "reused". */
const char *tune_origin_name(enum tune_origin origin);

#endif
