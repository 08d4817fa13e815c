/* How tasks are shown as they run: the live block, readable lines, raw events. */
#include "cli/tune_progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define BAR_WIDTH 20
#define NAME_WIDTH_MAX 24
#define LINE_MAX_BYTES 1024
#define BLOCK_MAX 64 /* live lines at most, whatever the terminal's height */

void tune_view_init(struct tune_view *v, FILE *out, bool events, bool wrap_events) {
  memset(v, 0, sizeof *v);
  v->out = out;
  v->wrap_events = wrap_events;
  v->mode = events ? TUNE_VIEW_EVENTS
            : isatty(fileno(out)) == 1 ? TUNE_VIEW_LIVE
                                       : TUNE_VIEW_LINES;
}

/* ---- formats ---- */

/* A duration as m:ss, or h:mm:ss from an hour on; "-" when unknown. */
static void format_duration(double s, char *out, size_t outlen) {
  if (!isfinite(s) || s < 0) {
    snprintf(out, outlen, "-");
    return;
  }
  long total = (long)(s + 0.5);
  if (total >= 3600)
    snprintf(out, outlen, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  else
    snprintf(out, outlen, "%ld:%02ld", total / 60, total % 60);
}

/* A time in ms with the digits that matter: 0.50, 2.10, 0.0123. */
static void format_ms(double ms, char *out, size_t outlen) {
  snprintf(out, outlen, ms >= 0.1 ? "%.2f ms" : "%.4f ms", ms);
}

/* The time a running task still needs: its pace so far over the steps left, bounded by
 * what is left of its time budget; that bound alone before its first step. NAN when
 * nothing says. */
static double time_left(const struct tune_task *t, double run_s) {
  double by_budget = t->budget_seconds > 0 ? fmax(0, (double)t->budget_seconds - run_s) : NAN;
  if (t->step < 1 || t->budget_steps < 1 || !isfinite(run_s))
    return by_budget;
  double by_pace = run_s / (double)t->step * (double)(t->budget_steps - t->step);
  by_pace = fmax(0, by_pace);
  return isnan(by_budget) ? by_pace : fmin(by_pace, by_budget);
}

void tune_format_live(const struct tune_task *t, int name_width, double now_s, char *out,
                      size_t outlen) {
  char elapsed[32], left[32], best[32] = "-";
  if (t->state != TUNE_RUNNING) {
    format_duration(now_s - t->created_s, elapsed, sizeof elapsed);
    snprintf(out, outlen, "%-*.*s  %s  %s", name_width, name_width, t->name,
             tune_state_name(t->state), t->state == TUNE_QUEUED ? elapsed : "");
    return;
  }
  double run_s = now_s - t->running_s;
  long step = t->step < 0 ? 0 : t->step, budget = t->budget_steps < 1 ? 1 : t->budget_steps;
  char bar[BAR_WIDTH + 1];
  int filled = (int)((double)BAR_WIDTH * (double)(step > budget ? budget : step) / (double)budget);
  for (int i = 0; i < BAR_WIDTH; i++)
    bar[i] = i < filled ? '#' : '-';
  bar[BAR_WIDTH] = '\0';
  if (!isnan(t->best_speedup))
    snprintf(best, sizeof best, "%.2fx", t->best_speedup);
  format_duration(run_s, elapsed, sizeof elapsed);
  format_duration(time_left(t, run_s), left, sizeof left);
  snprintf(out, outlen, "%-*.*s  [%s] %4ld/%-4ld best %-7s %s  ~%s left", name_width,
           name_width, t->name, bar, step, budget, best, elapsed, left);
}

void tune_format_finished(const struct tune_task *t, char *out, size_t outlen) {
  long steps = t->step < 0 ? 0 : t->step;
  char ms[32];
  switch (t->state) {
  case TUNE_SUCCEEDED:
    if (isnan(t->best_speedup)) {
      snprintf(out, outlen, "[%s] succeeded after %ld step%s, stop %s", t->name, steps,
               steps == 1 ? "" : "s", t->stop_reason[0] ? t->stop_reason : "-");
      return;
    }
    format_ms(t->best_ms, ms, sizeof ms);
    snprintf(out, outlen, "[%s] succeeded: best %.2fx (%s) after %ld step%s, stop %s",
             t->name, t->best_speedup, ms, steps, steps == 1 ? "" : "s",
             t->stop_reason[0] ? t->stop_reason : "-");
    return;
  case TUNE_FAILED:
    snprintf(out, outlen, "[%s] failed after %ld step%s: %s: %s", t->name, steps,
             steps == 1 ? "" : "s",
             t->error_code[0] ? t->error_code : "task_failed",
             t->error_message[0] ? t->error_message : "the task failed");
    return;
  case TUNE_REFUSED:
    snprintf(out, outlen, "[%s] refused: %s: %s%s%s%s", t->name, t->error_code,
             t->error_message, t->error_field[0] ? " (field " : "", t->error_field,
             t->error_field[0] ? ")" : "");
    return;
  case TUNE_LOST:
    snprintf(out, outlen, "[%s] lost: the task was deleted on the server", t->name);
    return;
  default:
    snprintf(out, outlen, "[%s] %s after %ld step%s", t->name, tune_state_name(t->state), steps,
             steps == 1 ? "" : "s");
  }
}

/* What a step's candidate came to: "correct 0.50 ms, 4.00x", or its failure's class
 * (which names the stage: "compile/syntax_error"). */
static void format_result(const json_t *data, char *out, size_t outlen) {
  const char *outcome = json_string_value(json_object_get(data, "outcome"));
  const char *cls = json_string_value(json_object_get(data, "class"));
  const json_t *ms = json_object_get(data, "time_ms"), *speedup = json_object_get(data, "speedup");
  if (!outcome || strcmp(outcome, "correct") != 0) {
    snprintf(out, outlen, "%s", cls ? cls : outcome ? outcome : "?");
    return;
  }
  char ms_text[32] = "", x_text[32] = "";
  if (json_is_number(ms))
    format_ms(json_number_value(ms), ms_text, sizeof ms_text);
  if (json_is_number(speedup))
    snprintf(x_text, sizeof x_text, "%.2fx", json_number_value(speedup));
  snprintf(out, outlen, "correct%s%s%s%s", ms_text[0] ? " " : "", ms_text,
           x_text[0] ? (ms_text[0] ? ", " : " ") : "", x_text);
}

/* The line of a step event: "[name] step 3/20 small vector_float2: correct 0.50 ms,
 * 4.00x (best 4.00x)". */
static void format_step(const struct tune_task *t, const json_t *data, char *out,
                        size_t outlen) {
  const char *kind = json_string_value(json_object_get(data, "kind"));
  const char *what = json_string_value(json_object_get(data, "strategy"));
  char result[256], best[48] = "";
  if (!what)
    what = json_string_value(json_object_get(data, "direction"));
  format_result(data, result, sizeof result);
  if (!isnan(t->best_speedup))
    snprintf(best, sizeof best, " (best %.2fx)", t->best_speedup);
  snprintf(out, outlen, "[%s] step %lld/%lld %s%s%s: %s%s", t->name,
           (long long)json_integer_value(json_object_get(data, "step")),
           (long long)json_integer_value(json_object_get(data, "budget_steps")),
           kind ? kind : "?", what ? " " : "", what ? what : "", result, best);
}

/* The line of an event other than a step or the end; false for those that get none. */
static bool format_other(const struct tune_task *t, const char *type, const json_t *data,
                         char *out, size_t outlen) {
  if (strcmp(type, "succeeded") == 0 || strcmp(type, "failed") == 0 ||
      strcmp(type, "cancelled") == 0)
    return false; /* the finished line says it, with the figures */
  if (strcmp(type, "profiled") == 0) {
    char eager[32] = "-", compile[32] = "-";
    const json_t *b = json_object_get(data, "baselines");
    const json_t *e = json_object_get(b, "eager_ms"), *c = json_object_get(b, "compile_ms");
    if (json_is_number(e))
      format_ms(json_number_value(e), eager, sizeof eager);
    if (json_is_number(c))
      format_ms(json_number_value(c), compile, sizeof compile);
    snprintf(out, outlen, "[%s] profiled: eager %s, torch.compile %s", t->name, eager, compile);
    return true;
  }
  if (strcmp(type, "cancel_requested") == 0) {
    snprintf(out, outlen, "[%s] cancel requested", t->name);
    return true;
  }
  snprintf(out, outlen, "[%s] %s", t->name, type);
  return true;
}

/* ---- output ---- */

/* Prints one JSON line for event: itself, or wrapped with the task's name and id. */
static void print_event_json(struct tune_view *v, const struct tune_task *t,
                             const json_t *event) {
  json_t *line = v->wrap_events ? json_pack("{s:s, s:s, s:O}", "task", t->name, "id", t->id,
                                            "event", event)
                                : json_incref((json_t *)event);
  char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
  if (text)
    fprintf(v->out, "%s\n", text);
  free(text);
  json_decref(line);
}

void tune_view_event(struct tune_view *v, const struct tune_task *t, const json_t *event,
                     bool quiet) {
  const char *type = json_string_value(json_object_get(event, "type"));
  const json_t *data = json_object_get(event, "data");
  char line[LINE_MAX_BYTES];
  if (v->mode == TUNE_VIEW_EVENTS) {
    print_event_json(v, t, event);
  } else if (type && strcmp(type, "finished") == 0) {
    tune_format_finished(t, line, sizeof line);
    tune_view_clear(v);
    fprintf(v->out, "%s\n", line);
  } else if (v->mode == TUNE_VIEW_LINES && !quiet && type) {
    if (strcmp(type, "step") == 0)
      format_step(t, data, line, sizeof line);
    else if (!format_other(t, type, data, line, sizeof line))
      return;
    fprintf(v->out, "%s\n", line);
  }
  fflush(v->out);
}

void tune_view_say(struct tune_view *v, bool always, const char *fmt, ...) {
  if (v->mode == TUNE_VIEW_EVENTS && !always)
    return;
  tune_view_clear(v);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(v->out, fmt, ap);
  va_end(ap);
  fputc('\n', v->out);
  fflush(v->out);
}

void tune_view_clear(struct tune_view *v) {
  if (v->mode != TUNE_VIEW_LIVE || v->block_lines == 0)
    return;
  fprintf(v->out, "\033[%zuA\r\033[J", v->block_lines);
  v->block_lines = 0;
  fflush(v->out);
}

/* The terminal's size: columns and rows (80 x 24 when unknown). */
static void term_size(FILE *out, size_t *ret_cols, size_t *ret_rows) {
  struct winsize ws;
  bool known = ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0;
  *ret_cols = known ? ws.ws_col : 80;
  *ret_rows = known ? ws.ws_row : 24;
}

/* Prints the live lines of the tasks in state (at most *budget of them). */
static void draw_state(struct tune_view *v, const struct tune_task *tasks, size_t n,
                       enum tune_state state, int name_width, double now_s, size_t cols,
                       size_t *budget) {
  char line[LINE_MAX_BYTES];
  for (size_t i = 0; i < n && *budget > 0; i++) {
    if (tasks[i].state != state)
      continue;
    tune_format_live(&tasks[i], name_width, now_s, line, sizeof line);
    if (cols > 1 && cols - 1 < sizeof line)
      line[cols - 1] = '\0'; /* a full-width line would wrap on some terminals */
    fprintf(v->out, "%s\033[K\n", line);
    v->block_lines++;
    (*budget)--;
  }
}

void tune_view_redraw(struct tune_view *v, const struct tune_task *tasks, size_t n,
                      double now_s) {
  if (v->mode != TUNE_VIEW_LIVE)
    return;
  size_t cols, rows, open = 0;
  int name_width = 4;
  term_size(v->out, &cols, &rows);
  for (size_t i = 0; i < n; i++) {
    if (tune_state_is_final(tasks[i].state))
      continue;
    open++;
    int len = (int)strlen(tasks[i].name);
    name_width = len > name_width ? (len > NAME_WIDTH_MAX ? NAME_WIDTH_MAX : len) : name_width;
  }
  tune_view_clear(v);
  size_t budget = rows > 2 ? rows - 2 : 1;
  budget = budget > BLOCK_MAX ? BLOCK_MAX : budget;
  size_t shown_max = budget;
  draw_state(v, tasks, n, TUNE_RUNNING, name_width, now_s, cols, &budget);
  draw_state(v, tasks, n, TUNE_QUEUED, name_width, now_s, cols, &budget);
  draw_state(v, tasks, n, TUNE_PENDING, name_width, now_s, cols, &budget);
  if (open > shown_max - budget) {
    fprintf(v->out, "... and %zu more\033[K\n", open - (shown_max - budget));
    v->block_lines++;
  }
  fflush(v->out);
}
