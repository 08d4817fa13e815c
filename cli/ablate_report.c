/* The pure part of `opforge ablate`: figures, table and summary. */
#include "cli/ablate_report.h"

#include <math.h>
#include <string.h>

const int ablate_marks[ABLATE_MARKS] = {5, 10, 20};

/* The median time of a correct candidate, or NAN. */
static double correct_ms(const json_t *c) {
  const json_t *result = json_object_get(c, "result");
  const json_t *median = json_object_get(json_object_get(result, "time"), "median_ms");
  if (!json_is_true(json_object_get(result, "correct")) ||
      json_is_object(json_object_get(result, "failure")) || !json_is_number(median) ||
      !(json_number_value(median) > 0))
    return NAN;
  return json_number_value(median);
}

void ablate_result_take(struct ablate_result *r, const json_t *items) {
  r->final_ms = NAN;
  r->steps_to_near = -1;
  r->correct = r->total = 0;
  for (int k = 0; k < ABLATE_MARKS; k++)
    r->best_at[k] = NAN;
  size_t i;
  const json_t *c;
  json_array_foreach(items, i, c) {
    long step = (long)json_integer_value(json_object_get(c, "step"));
    double ms = correct_ms(c);
    if (step >= 1) {
      r->total++;
      r->correct += !isnan(ms);
    }
    if (!isnan(ms) && (isnan(r->final_ms) || ms < r->final_ms))
      r->final_ms = ms;
  }
  double best = NAN;
  json_array_foreach(items, i, c) {
    long step = (long)json_integer_value(json_object_get(c, "step"));
    double ms = correct_ms(c);
    if (!isnan(ms) && (isnan(best) || ms < best))
      best = ms;
    /* The slack only guards against a server that rounds times. */
    if (r->steps_to_near < 0 && !isnan(best) &&
        best <= r->final_ms / ABLATE_NEAR_FINAL * (1 + 1e-12))
      r->steps_to_near = step;
  }
  for (int k = 0; k < ABLATE_MARKS; k++) {
    if (ablate_marks[k] > r->budget || (!r->final && r->steps < ablate_marks[k]))
      continue;
    json_array_foreach(items, i, c) {
      double ms = correct_ms(c);
      if ((long)json_integer_value(json_object_get(c, "step")) <= ablate_marks[k] && !isnan(ms) &&
          (isnan(r->best_at[k]) || ms < r->best_at[k]))
        r->best_at[k] = ms;
    }
  }
}

/* A time as "%.4f", "-" when unknown. */
static const char *ms_text(double ms, char *out, size_t len) {
  if (isnan(ms))
    snprintf(out, len, "-");
  else
    snprintf(out, len, "%.4f", ms);
  return out;
}

/* The widths of the task and arm columns. */
static void name_widths(const struct ablate_result *rs, size_t n, int *task, int *arm) {
  *task = 4;
  *arm = 3;
  for (size_t i = 0; i < n; i++) {
    int t = (int)strlen(rs[i].task), a = (int)strlen(rs[i].arm);
    *task = t > *task ? t : *task;
    *arm = a > *arm ? a : *arm;
  }
}

void ablate_print_table(FILE *out, const struct ablate_result *rs, size_t n) {
  int tw, aw;
  name_widths(rs, n, &tw, &aw);
  fprintf(out, "%-*s  %-*s  %8s  %8s  %8s  %8s  %5s  %7s  %s\n", tw, "TASK", aw, "ARM",
          "BEST@5", "BEST@10", "BEST@20", "FINAL", "TO_95", "CORRECT", "STATUS");
  for (size_t i = 0; i < n; i++) {
    const struct ablate_result *r = &rs[i];
    char b[ABLATE_MARKS][32], fin[32], near[32], correct[48];
    for (int k = 0; k < ABLATE_MARKS; k++)
      ms_text(r->best_at[k], b[k], sizeof b[k]);
    if (r->steps_to_near < 0)
      snprintf(near, sizeof near, "-");
    else
      snprintf(near, sizeof near, "%ld", r->steps_to_near);
    snprintf(correct, sizeof correct, "%ld/%ld", r->correct, r->total);
    fprintf(out, "%-*s  %-*s  %8s  %8s  %8s  %8s  %5s  %7s  %s\n", tw, r->task, aw, r->arm,
            b[0], b[1], b[2], ms_text(r->final_ms, fin, sizeof fin), near, correct, r->status);
  }
}

double ablate_geomean(const struct ablate_result *rs, size_t n, const char *arm, int mark) {
  double log_sum = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(rs[i].arm, arm) != 0)
      continue;
    double ms = mark < ABLATE_MARKS ? rs[i].best_at[mark] : rs[i].final_ms;
    double s = rs[i].eager_ms / ms;
    if (isfinite(s) && s > 0) {
      log_sum += log(s);
      count++;
    }
  }
  return count ? exp(log_sum / (double)count) : NAN;
}

/* A speed-up as "%.3fx", "-" when unknown. */
static const char *x_text(double x, char *out, size_t len) {
  if (isnan(x))
    snprintf(out, len, "-");
  else
    snprintf(out, len, "%.3fx", x);
  return out;
}

void ablate_print_summary(FILE *out, const char *const *arms, size_t n_arms,
                          const struct ablate_result *rs, size_t n) {
  int tw, aw;
  name_widths(rs, n, &tw, &aw);
  fprintf(out, "%-*s  %5s  %8s  %8s  %8s  %9s  %10s  %s\n", aw, "ARM", "TASKS", "GEO@5",
          "GEO@10", "GEO@20", "GEO_FINAL", "MEAN_TO_95", "CORRECT");
  for (size_t a = 0; a < n_arms; a++) {
    size_t tasks = 0, near_n = 0;
    long near_sum = 0, correct = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
      if (strcmp(rs[i].arm, arms[a]) != 0)
        continue;
      tasks++;
      correct += rs[i].correct;
      total += rs[i].total;
      if (rs[i].steps_to_near >= 0) {
        near_sum += rs[i].steps_to_near;
        near_n++;
      }
    }
    char g[ABLATE_MARKS + 1][32], near[32], share[64];
    for (int k = 0; k <= ABLATE_MARKS; k++)
      x_text(ablate_geomean(rs, n, arms[a], k), g[k], sizeof g[k]);
    if (near_n)
      snprintf(near, sizeof near, "%.1f", (double)near_sum / (double)near_n);
    else
      snprintf(near, sizeof near, "-");
    if (total)
      snprintf(share, sizeof share, "%ld/%ld (%.1f%%)", correct, total,
               100.0 * (double)correct / (double)total);
    else
      snprintf(share, sizeof share, "0/0");
    fprintf(out, "%-*s  %5zu  %8s  %8s  %8s  %9s  %10s  %s\n", aw, arms[a], tasks, g[0], g[1],
            g[2], g[3], near, share);
  }
}

/* A number, or null when unknown (a new reference). */
static json_t *num_or_null(double x) {
  return isfinite(x) ? json_real(x) : json_null();
}

json_t *ablate_result_json(const struct ablate_result *r) {
  json_t *at = json_object();
  for (int k = 0; at && k < ABLATE_MARKS; k++) {
    char key[16];
    snprintf(key, sizeof key, "%d", ablate_marks[k]);
    json_object_set_new(at, key, num_or_null(r->best_at[k]));
  }
  return json_pack("{s:s, s:s, s:s, s:i, s:i, s:b, s:o, s:o, s:o, s:o, s:i, s:i}", "task",
                   r->task, "arm", r->arm, "status", r->status, "budget_steps", (int)r->budget,
                   "steps", (int)r->steps, "finished", r->final, "eager_ms",
                   num_or_null(r->eager_ms), "best_ms_at", at, "final_ms",
                   num_or_null(r->final_ms), "steps_to_95", r->steps_to_near < 0
                   ? json_null() : json_integer(r->steps_to_near), "correct", (int)r->correct,
                   "candidates", (int)r->total);
}
