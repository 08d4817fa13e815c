/* `opforge tune`'s results: the table, the JSON document and the exit status. */
#include "cli/tune_report.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/tune_export.h"

enum { COL_TASK, COL_STATUS, COL_SPEEDUP, COL_BEST_MS, COL_STEPS, COL_STOP, COL_ORIGIN,
       COL_NOTE, COLS };
#define CELL_MAX 600

static const char *const headers[COLS] = {"TASK", "STATUS", "SPEEDUP", "BEST_MS", "STEPS",
                                          "STOP", "ORIGIN", "NOTE"};

const char *tune_origin_name(enum tune_origin origin) {
  return origin == TUNE_REUSED ? "reused" : origin == TUNE_REPLAYED ? "replayed" : "new";
}

/* Whether the task counts as not finished: still queued or running, or never sent. */
static bool unfinished(const struct tune_task *t) {
  return !tune_state_is_final(t->state);
}

/* Whether a succeeded task is under the threshold. */
static bool under(const struct tune_task *t, double fail_under) {
  return t->state == TUNE_SUCCEEDED && !tune_task_passes(t, fail_under);
}

int tune_exit_status(const struct tune_task *tasks, size_t n, double fail_under,
                     bool limit_hit) {
  bool refused = false, failed = false, open = false;
  for (size_t i = 0; i < n; i++) {
    const struct tune_task *t = &tasks[i];
    refused = refused || t->state == TUNE_REFUSED;
    failed = failed || t->state == TUNE_FAILED || t->state == TUNE_CANCELLED ||
             t->state == TUNE_LOST || under(t, fail_under);
    open = open || unfinished(t);
  }
  return refused ? CLI_EXIT_USAGE
         : failed ? CLI_EXIT_FAIL
         : open && limit_hit ? CLI_EXIT_WAIT_LIMIT
         : open ? CLI_EXIT_FAIL
                : CLI_EXIT_OK;
}

void tune_task_url(const char *server, const struct tune_task *t, char *out, size_t outlen) {
  if (!t->id[0])
    out[0] = '\0';
  else
    snprintf(out, outlen, "%s/v1/tasks/%s", server, t->id);
}

void tune_task_note(const struct tune_report *r, const struct tune_task *t, char *out,
                    size_t outlen) {
  out[0] = '\0';
  if (t->state == TUNE_REFUSED)
    snprintf(out, outlen, "%s: %s%s%s%s", t->error_code, t->error_message,
             t->error_field[0] ? " (field " : "", t->error_field, t->error_field[0] ? ")" : "");
  else if (t->state == TUNE_FAILED)
    snprintf(out, outlen, "%s: %s", t->error_code[0] ? t->error_code : "task_failed",
             t->error_message[0] ? t->error_message : "the task failed");
  else if (t->state == TUNE_LOST)
    snprintf(out, outlen, "the task was deleted on the server");
  else if (under(t, r->fail_under))
    snprintf(out, outlen, "under --fail-under %.2fx", r->fail_under);
  else if (t->export_note[0])
    snprintf(out, outlen, "%s", t->export_note);
}

/* Fills the cells of t's row. */
static void row_cells(const struct tune_report *r, const struct tune_task *t,
                      char cells[COLS][CELL_MAX]) {
  snprintf(cells[COL_TASK], CELL_MAX, "%s", t->name);
  snprintf(cells[COL_STATUS], CELL_MAX, "%s", tune_state_name(t->state));
  snprintf(cells[COL_SPEEDUP], CELL_MAX, isnan(t->best_speedup) ? "-" : "%.2fx",
           t->best_speedup);
  snprintf(cells[COL_BEST_MS], CELL_MAX, isnan(t->best_ms) ? "-" : "%.4f", t->best_ms);
  if (t->step >= 0 && t->budget_steps >= 0)
    snprintf(cells[COL_STEPS], CELL_MAX, "%ld/%ld", t->step, t->budget_steps);
  else
    snprintf(cells[COL_STEPS], CELL_MAX, "-");
  snprintf(cells[COL_STOP], CELL_MAX, "%s", t->stop_reason[0] ? t->stop_reason : "-");
  snprintf(cells[COL_ORIGIN], CELL_MAX, "%s", t->id[0] ? tune_origin_name(t->origin) : "-");
  tune_task_note(r, t, cells[COL_NOTE], CELL_MAX);
}

/* Prints one row: every column but the last padded to its width, two spaces apart. */
static void print_row(FILE *out, char cells[COLS][CELL_MAX], const int widths[COLS]) {
  char line[COLS * (CELL_MAX + 2)];
  size_t used = 0;
  for (int c = 0; c < COLS; c++) {
    int w = c + 1 < COLS ? widths[c] : 0;
    used += (size_t)snprintf(line + used, sizeof line - used, "%s%-*s", c ? "  " : "", w,
                             cells[c]);
  }
  while (used > 0 && line[used - 1] == ' ')
    used--;
  fprintf(out, "%.*s\n", (int)used, line);
}

/* The summary lines under the table. */
static void print_summary(FILE *out, const struct tune_report *r) {
  size_t count[TUNE_LOST + 1] = {0}, origin[TUNE_REUSED + 1] = {0}, below = 0;
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_task *t = &r->tasks[i];
    count[t->state]++;
    if (t->id[0])
      origin[t->origin]++;
    below += under(t, r->fail_under);
  }
  size_t open = count[TUNE_PENDING] + count[TUNE_QUEUED] + count[TUNE_RUNNING];
  fprintf(out, "tasks: %zu (succeeded %zu, failed %zu, cancelled %zu, refused %zu, lost %zu, "
               "unfinished %zu)\n",
          r->n, count[TUNE_SUCCEEDED], count[TUNE_FAILED], count[TUNE_CANCELLED],
          count[TUNE_REFUSED], count[TUNE_LOST], open);
  fprintf(out, "submitted: new %zu, replayed %zu, reused %zu\n", origin[TUNE_NEW],
          origin[TUNE_REPLAYED], origin[TUNE_REUSED]);
  if (!isnan(r->fail_under))
    fprintf(out, "under --fail-under %.2fx: %zu\n", r->fail_under, below);
  if (r->limit_hit)
    fprintf(out, "the wait limit passed: %zu task(s) unfinished; they go on on the server\n",
            open);
  fprintf(out, "exit status: %d\n", r->exit_status);
}

void tune_print_report(FILE *out, const struct tune_report *r) {
  static char cells[COLS][CELL_MAX];
  int widths[COLS];
  for (int c = 0; c < COLS; c++)
    widths[c] = (int)strlen(headers[c]);
  for (size_t i = 0; i < r->n; i++) {
    row_cells(r, &r->tasks[i], cells);
    for (int c = 0; c < COLS; c++)
      if ((int)strlen(cells[c]) > widths[c])
        widths[c] = (int)strlen(cells[c]);
  }
  for (int c = 0; c < COLS; c++)
    snprintf(cells[c], CELL_MAX, "%s", headers[c]);
  print_row(out, cells, widths);
  for (size_t i = 0; i < r->n; i++) {
    row_cells(r, &r->tasks[i], cells);
    print_row(out, cells, widths);
  }
  fputc('\n', out);
  print_summary(out, r);
  fflush(out);
}

/* ---- JSON ---- */

/* A number, or null when NAN (a new reference). */
static json_t *number_or_null(double x) {
  return isnan(x) ? json_null() : json_real(x);
}

/* A string, or null when empty (a new reference). */
static json_t *string_or_null(const char *s) {
  return s && s[0] ? json_string(s) : json_null();
}

/* The export object of t (a new reference), or null without --export. */
static json_t *export_json(const struct tune_report *r, const struct tune_task *t) {
  char model[PATH_MAX], kernel[PATH_MAX];
  if (!r->export_dir)
    return json_null();
  tune_export_path(r->export_dir, t, false, model, sizeof model);
  tune_export_path(r->export_dir, t, true, kernel, sizeof kernel);
  return json_pack("{s:o, s:o, s:o}", "model_new", string_or_null(t->exported_model ? model : ""),
                   "kernel", string_or_null(t->exported_kernel ? kernel : ""), "note",
                   string_or_null(t->export_note));
}

/* One task's record (a new reference; NULL when out of memory). */
static json_t *task_json(const struct tune_report *r, const struct tune_task *t) {
  char url[CLI_MAX_URL + 96], note[CELL_MAX];
  tune_task_url(r->server, t, url, sizeof url);
  tune_task_note(r, t, note, sizeof note);
  json_t *error = t->error_code[0] ? json_pack("{s:s, s:s, s:o}", "code", t->error_code,
                                               "message", t->error_message, "field",
                                               string_or_null(t->error_field))
                                   : json_null();
  return json_pack(
      "{s:s, s:s, s:o, s:o, s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
      "s:o}",
      "file", t->file, "name", t->name, "id", string_or_null(t->id), "url",
      string_or_null(url), "status", tune_state_name(t->state), "origin",
      tune_origin_name(t->origin), "passed", tune_task_passes(t, r->fail_under),
      "best_speedup", number_or_null(t->best_speedup), "best_ms", number_or_null(t->best_ms),
      "eager_ms", number_or_null(t->eager_ms), "steps",
      t->step >= 0 ? json_integer(t->step) : json_null(), "budget_steps",
      t->budget_steps >= 0 ? json_integer(t->budget_steps) : json_null(), "stop_reason",
      string_or_null(t->stop_reason), "wall_s", number_or_null(tune_task_wall_s(t, r->now_s)),
      "error", error, "note", string_or_null(note), "export", export_json(r, t), "replaces",
      string_or_null(t->replaces));
}

json_t *tune_report_json(const struct tune_report *r) {
  json_t *tasks = json_array();
  size_t counts[TUNE_LOST + 1] = {0}, below = 0;
  for (size_t i = 0; tasks && i < r->n; i++) {
    json_t *one = task_json(r, &r->tasks[i]);
    if (!one || json_array_append_new(tasks, one) != 0) {
      json_decref(tasks);
      return NULL;
    }
    counts[r->tasks[i].state]++;
    below += under(&r->tasks[i], r->fail_under);
  }
  bool complete = true;
  for (size_t i = 0; i < r->n; i++)
    complete = complete && !unfinished(&r->tasks[i]);
  return json_pack("{s:s, s:O, s:b, s:i, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
                   "server", r->server, "options", r->options ? r->options : json_null(),
                   "complete", complete, "exit_status", r->exit_status, "tasks", tasks,
                   "summary", "tasks", (json_int_t)r->n, "succeeded",
                   (json_int_t)counts[TUNE_SUCCEEDED], "failed", (json_int_t)counts[TUNE_FAILED],
                   "cancelled", (json_int_t)counts[TUNE_CANCELLED], "refused",
                   (json_int_t)counts[TUNE_REFUSED], "lost", (json_int_t)counts[TUNE_LOST],
                   "unfinished",
                   (json_int_t)(counts[TUNE_PENDING] + counts[TUNE_QUEUED] +
                                counts[TUNE_RUNNING]),
                   "under_threshold", (json_int_t)below);
}

int tune_write_json(const char *path, const struct tune_report *r) {
  json_t *doc = tune_report_json(r);
  FILE *f = doc ? fopen(path, "w") : NULL;
  int rc = f && json_dumpf(doc, f, JSON_INDENT(1)) == 0 ? 0 : -1;
  if (f && fputc('\n', f) == EOF)
    rc = -1;
  if (f && fclose(f) != 0)
    rc = -1;
  if (rc != 0)
    fprintf(stderr, "error: cannot write %s: %s\n", path, doc ? strerror(errno) : "out of memory");
  json_decref(doc);
  return rc;
}
