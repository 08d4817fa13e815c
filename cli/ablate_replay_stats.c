/* The pure part of `opforge ablate --replay` (ablate_replay_stats.h). */
#include "cli/ablate_replay_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/replay/space_table.h"

const int replay_marks[REPLAY_MARKS] = {5, 10, 20};

/* ---- one run ---- */

struct cand {
  long step;
  double ms;          /* NAN unless correct */
  bool not_recorded;
};

static int cand_cmp(const void *a, const void *b) {
  long x = ((const struct cand *)a)->step, y = ((const struct cand *)b)->step;
  return (x > y) - (x < y);
}

static void read_cand(const json_t *c, struct cand *out) {
  const json_t *result = json_object_get(c, "result");
  const json_t *failure = json_object_get(result, "failure");
  const char *cls = json_string_value(json_object_get(failure, "class"));
  const json_t *median = json_object_get(json_object_get(result, "time"), "median_ms");
  out->step = (long)json_integer_value(json_object_get(c, "step"));
  out->not_recorded = cls && strcmp(cls, REPLAY_NOT_RECORDED) == 0;
  out->ms = json_is_true(json_object_get(result, "correct")) && !json_is_object(failure) &&
                    json_is_number(median) && json_number_value(median) > 0
                ? json_number_value(median)
                : NAN;
}

void replay_run_take(struct replay_run *r, const json_t *items, bool ended) {
  size_t n = json_array_size(items);
  struct cand *cs = calloc(n ? n : 1, sizeof *cs);
  r->engine_steps = r->not_recorded = r->effective = 0;
  r->final_ms = NAN;
  r->to_95 = r->to_99 = -1;
  for (int k = 0; k < REPLAY_MARKS; k++)
    r->best_at[k] = NAN;
  if (!cs)
    return;
  for (size_t i = 0; i < n; i++)
    read_cand(json_array_get(items, i), &cs[i]);
  qsort(cs, n, sizeof *cs, cand_cmp);
  double best = NAN;
  long eff = 0;
  for (size_t i = 0; i < n; i++) {
    if (cs[i].step >= 1) {
      r->engine_steps = cs[i].step > r->engine_steps ? cs[i].step : r->engine_steps;
      if (cs[i].not_recorded) {
        r->not_recorded++;
        continue;
      }
      if (eff >= r->steps)
        break;  /* past the budget of counted steps */
      eff++;
    }
    if (!isnan(cs[i].ms) && (isnan(best) || cs[i].ms < best))
      best = cs[i].ms;
    double speed = r->space_best_ms / best; /* of the space's best: 1 at the best */
    if (r->to_95 < 0 && speed >= 0.95 * (1 - 1e-12))
      r->to_95 = eff;
    if (r->to_99 < 0 && speed >= 0.99 * (1 - 1e-12))
      r->to_99 = eff;
    for (int k = 0; k < REPLAY_MARKS; k++)
      if (eff <= replay_marks[k] && replay_marks[k] <= r->steps)
        r->best_at[k] = best;
  }
  r->effective = eff;
  r->final_ms = best;
  /* A mark the run did not reach: the best holds when the run ended (nothing was left to
   * try); a run cut off says nothing of it. */
  for (int k = 0; k < REPLAY_MARKS; k++)
    if (eff < replay_marks[k] && !ended)
      r->best_at[k] = NAN;
  r->done = true;
  free(cs);
}

double replay_steps_to(const struct replay_run *r, double q) {
  long s = q >= 0.99 ? r->to_99 : r->to_95;
  if (!r->done)
    return NAN;
  return s >= 0 ? (double)s : (double)(r->steps + 1);
}

double replay_rel_at(const struct replay_run *r, int k) {
  double x = r->space_best_ms / r->best_at[k];
  return isfinite(x) ? x : NAN;
}

double replay_v_to95(const struct replay_run *r) { return replay_steps_to(r, 0.95); }
double replay_v_to99(const struct replay_run *r) { return replay_steps_to(r, 0.99); }
double replay_v_rel5(const struct replay_run *r) { return replay_rel_at(r, 0); }
double replay_v_rel10(const struct replay_run *r) { return replay_rel_at(r, 1); }
double replay_v_rel20(const struct replay_run *r) { return replay_rel_at(r, 2); }
double replay_v_reached95(const struct replay_run *r) {
  return r->done ? (r->to_95 >= 0 ? 1.0 : 0.0) : NAN;
}

/* ---- statistics over tasks ---- */

double replay_t975(size_t df) {
  static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                             2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110,
                             2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
                             2.052, 2.048, 2.045, 2.042};
  if (df < sizeof t / sizeof t[0])
    return t[df ? df : 1];
  /* Cornish-Fisher: within 0.001 of the table's values past 30 */
  double z = 1.959964, d = (double)df;
  return z + (z * z * z + z) / (4 * d) + (5 * pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * d * d);
}

/* The per-task means of value over the runs of (mode, arm) into means[task_index] (NAN
 * where none); returns the number of task slots (the largest index + 1). */
static size_t task_means(const struct replay_run *runs, size_t n, const char *mode,
                         const char *arm, double (*value)(const struct replay_run *),
                         double **ret) {
  size_t slots = 0;
  for (size_t i = 0; i < n; i++)
    slots = (size_t)runs[i].task_index + 1 > slots ? (size_t)runs[i].task_index + 1 : slots;
  double *sum = calloc(slots ? slots : 1, sizeof *sum);
  long *cnt = calloc(slots ? slots : 1, sizeof *cnt);
  for (size_t i = 0; sum && cnt && i < n; i++) {
    if (strcmp(runs[i].mode, mode) != 0 || strcmp(runs[i].arm, arm) != 0)
      continue;
    double v = value(&runs[i]);
    if (isnan(v))
      continue;
    sum[runs[i].task_index] += v;
    cnt[runs[i].task_index]++;
  }
  for (size_t t = 0; sum && cnt && t < slots; t++)
    sum[t] = cnt[t] ? sum[t] / (double)cnt[t] : NAN;
  free(cnt);
  *ret = sum;
  return sum ? slots : 0;
}

static struct replay_ci ci_of(const double *xs, size_t slots) {
  struct replay_ci c = {NAN, NAN, NAN, 0};
  double s = 0;
  for (size_t t = 0; t < slots; t++)
    if (!isnan(xs[t])) {
      s += xs[t];
      c.n++;
    }
  if (c.n == 0)
    return c;
  c.mean = s / (double)c.n;
  if (c.n < 2)
    return c;
  double ss = 0;
  for (size_t t = 0; t < slots; t++)
    if (!isnan(xs[t]))
      ss += (xs[t] - c.mean) * (xs[t] - c.mean);
  double half = replay_t975(c.n - 1) * sqrt(ss / (double)(c.n - 1)) / sqrt((double)c.n);
  c.lo = c.mean - half;
  c.hi = c.mean + half;
  return c;
}

struct replay_ci replay_stat(const struct replay_run *runs, size_t n, const char *mode,
                             const char *arm, double (*value)(const struct replay_run *)) {
  double *m = NULL;
  size_t slots = task_means(runs, n, mode, arm, value, &m);
  struct replay_ci c = m ? ci_of(m, slots) : (struct replay_ci){NAN, NAN, NAN, 0};
  free(m);
  return c;
}

struct replay_ci replay_diff(const struct replay_run *runs, size_t n, const char *mode_a,
                             const char *arm_a, const char *mode_b, const char *arm_b,
                             double (*value)(const struct replay_run *)) {
  double *a = NULL, *b = NULL;
  size_t sa = task_means(runs, n, mode_a, arm_a, value, &a);
  size_t sb = task_means(runs, n, mode_b, arm_b, value, &b);
  struct replay_ci c = {NAN, NAN, NAN, 0};
  if (a && b && sa == sb) {
    for (size_t t = 0; t < sa; t++)
      a[t] = isnan(a[t]) || isnan(b[t]) ? NAN : a[t] - b[t];
    c = ci_of(a, sa);
  }
  free(a);
  free(b);
  return c;
}

/* ---- printing ---- */

/* "m [lo, hi]" with the precision given; "-" when unknown. */
static const char *ci_text(struct replay_ci c, int prec, char *out, size_t len) {
  if (isnan(c.mean))
    snprintf(out, len, "-");
  else if (isnan(c.lo))
    snprintf(out, len, "%.*f", prec, c.mean);
  else
    snprintf(out, len, "%.*f [%.*f, %.*f]", prec, c.mean, prec, c.lo, prec, c.hi);
  return out;
}

static size_t count_runs(const struct replay_run *runs, size_t n, const char *mode,
                         const char *arm) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += runs[i].done && strcmp(runs[i].mode, mode) == 0 && strcmp(runs[i].arm, arm) == 0;
  return k;
}

void replay_print_summary(FILE *out, const char *const *modes, size_t n_modes,
                          const char *const *arms, size_t n_arms, const struct replay_run *runs,
                          size_t n) {
  fprintf(out, "%-6s  %-8s  %5s  %5s  %-20s  %-20s  %7s  %-20s  %-20s  %-20s\n", "MODE", "ARM",
          "TASKS", "RUNS", "TO_95 [95% CI]", "TO_99 [95% CI]", "REACHED", "AT_5 [95% CI]",
          "AT_10 [95% CI]", "AT_20 [95% CI]");
  for (size_t m = 0; m < n_modes; m++)
    for (size_t a = 0; a < n_arms; a++) {
      size_t k = count_runs(runs, n, modes[m], arms[a]);
      if (!k)
        continue;
      char c95[64], c99[64], r5[64], r10[64], r20[64], reached[16];
      struct replay_ci t95 = replay_stat(runs, n, modes[m], arms[a], replay_v_to95);
      struct replay_ci hit = replay_stat(runs, n, modes[m], arms[a], replay_v_reached95);
      snprintf(reached, sizeof reached, isnan(hit.mean) ? "-" : "%.0f%%", 100 * hit.mean);
      fprintf(out, "%-6s  %-8s  %5zu  %5zu  %-20s  %-20s  %7s  %-20s  %-20s  %-20s\n", modes[m],
              arms[a], t95.n, k, ci_text(t95, 2, c95, sizeof c95),
              ci_text(replay_stat(runs, n, modes[m], arms[a], replay_v_to99), 2, c99, sizeof c99),
              reached,
              ci_text(replay_stat(runs, n, modes[m], arms[a], replay_v_rel5), 3, r5, sizeof r5),
              ci_text(replay_stat(runs, n, modes[m], arms[a], replay_v_rel10), 3, r10, sizeof r10),
              ci_text(replay_stat(runs, n, modes[m], arms[a], replay_v_rel20), 3, r20, sizeof r20));
    }
}

static const char *yes_no(bool known, bool holds) {
  return !known ? "n/a" : holds ? "yes" : "no";
}

/* x with prec decimals, "-" when unknown. */
static const char *num_text(double x, int prec, char *out, size_t len) {
  if (isfinite(x) && fabs(x) < 1e9)
    snprintf(out, len, "%.*f", prec, x);
  else
    snprintf(out, len, "-");
  return out;
}

void replay_print_targets(FILE *out, const struct replay_headroom *heads, size_t n_tasks,
                          const struct replay_run *runs, size_t n) {
  char a[40], b[40], c[40], d[256];
  fprintf(out, "%-44s  %-58s  %s\n", "TARGET", "FIGURE", "MET");
  /* headroom */
  size_t off = 0, room = 0;
  for (size_t t = 0; t < n_tasks; t++) {
    const struct replay_headroom *h = &heads[t];
    if (!(h->first_ms > 0) || !(h->floor_ms > 0) || h->floor_ms / h->first_ms >= 0.95)
      continue;
    off++;
    room += h->best_ms <= h->first_ms * 0.95;
  }
  snprintf(d, sizeof d, "%zu of %zu tasks not within 5%% of their floor", room, off);
  fprintf(out, "%-44s  %-58s  %s\n", "headroom: best >= 5% faster than first", d,
          yes_no(off > 0, 2 * room >= off));
  /* cold full against random */
  struct replay_ci full = replay_stat(runs, n, "cold", "full", replay_v_to95);
  struct replay_ci rnd = replay_stat(runs, n, "cold", "random", replay_v_to95);
  struct replay_ci diff = replay_diff(runs, n, "cold", "full", "cold", "random", replay_v_to95);
  snprintf(d, sizeof d, "full %s, random %s, diff %s", ci_text(full, 2, a, sizeof a),
           ci_text(rnd, 2, b, sizeof b), ci_text(diff, 2, c, sizeof c));
  fprintf(out, "%-44s  %-58s  %s\n", "cold: full vs random, steps to 95%", d,
          yes_no(!isnan(diff.hi), diff.hi < 0));
  /* warm against cold */
  struct replay_ci warm = replay_stat(runs, n, "warm", "full", replay_v_to95);
  double ratio = warm.mean / full.mean;
  snprintf(d, sizeof d, "warm %s, cold %s, ratio %s", num_text(warm.mean, 2, a, sizeof a),
           num_text(full.mean, 2, b, sizeof b), num_text(ratio, 2, c, sizeof c));
  fprintf(out, "%-44s  %-58s  %s\n", "warm vs cold (full), steps to 95%", d,
          yes_no(isfinite(ratio), ratio <= 0.5));
  /* full >= flat >= bestofn at 10 steps */
  double f10 = replay_stat(runs, n, "cold", "full", replay_v_rel10).mean;
  double l10 = replay_stat(runs, n, "cold", "flat", replay_v_rel10).mean;
  double b10 = replay_stat(runs, n, "cold", "bestofn", replay_v_rel10).mean;
  snprintf(d, sizeof d, "full %s, flat %s, bestofn %s%s", num_text(f10, 3, a, sizeof a),
           num_text(l10, 3, b, sizeof b), num_text(b10, 3, c, sizeof c),
           isnan(f10) || isnan(l10) || isnan(b10) ? ""
           : f10 < l10                             ? " (full < flat)"
           : l10 < b10                             ? " (flat < bestofn)"
                                                   : "");
  fprintf(out, "%-44s  %-58s  %s\n", "cold, best at 10: full >= flat >= bestofn", d,
          yes_no(!isnan(f10) && !isnan(l10) && !isnan(b10), f10 >= l10 && l10 >= b10));
}

static json_t *num(double x) {
  return isfinite(x) ? json_real(x) : json_null();
}

json_t *replay_run_json(const struct replay_run *r) {
  json_t *at = json_object();
  for (int k = 0; at && k < REPLAY_MARKS; k++) {
    char key[16];
    snprintf(key, sizeof key, "%d", replay_marks[k]);
    json_object_set_new(at, key, num(r->best_at[k]));
  }
  return json_pack("{s:s, s:s, s:s, s:I, s:b, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "task",
                   r->task, "arm", r->arm, "mode", r->mode, "seed", (json_int_t)r->seed,
                   "done", r->done, "engine_steps", (json_int_t)r->engine_steps, "not_recorded",
                   (json_int_t)r->not_recorded, "counted_steps", (json_int_t)r->effective,
                   "space_best_ms", num(r->space_best_ms), "best_ms_at", at, "final_ms",
                   num(r->final_ms), "steps_to_95",
                   r->to_95 < 0 ? json_null() : json_integer(r->to_95), "steps_to_99",
                   r->to_99 < 0 ? json_null() : json_integer(r->to_99));
}

/* ---- warm memory ---- */

/* The record of arr matching rec: by "id", or for edges by "from" and "to" (borrowed). */
static json_t *same_record(json_t *arr, json_t *rec) {
  size_t i;
  json_t *x;
  json_t *id = json_object_get(rec, "id");
  json_array_foreach(arr, i, x) {
    if (id ? json_equal(json_object_get(x, "id"), id)
           : json_equal(json_object_get(x, "from"), json_object_get(rec, "from")) &&
                 json_equal(json_object_get(x, "to"), json_object_get(rec, "to")))
      return x;
  }
  return NULL;
}

/* Adds (doc's stats - seed's stats) into out's stats (numbers only), and doc's evidence. */
static void add_delta(json_t *out, json_t *seed_rec, json_t *doc_rec) {
  json_t *stats = json_object_get(out, "stats"), *v;
  const char *k;
  json_object_foreach(json_object_get(doc_rec, "stats"), k, v) {
    json_t *seed_v = seed_rec ? json_object_get(json_object_get(seed_rec, "stats"), k) : NULL;
    if (!json_is_number(v) || (seed_rec && !json_is_number(seed_v)))
      continue;  /* not a count or a sum (the EMA trend): the seed's value stays */
    double base = seed_rec ? json_number_value(json_object_get(json_object_get(seed_rec, "stats"),
                                                               k))
                           : 0;
    double cur = json_number_value(json_object_get(stats, k));
    double sum = cur + json_number_value(v) - base;
    if (json_is_integer(json_object_get(stats, k)) && json_is_integer(v))
      json_object_set_new(stats, k, json_integer((json_int_t)llround(sum)));
    else
      json_object_set_new(stats, k, json_real(sum));
  }
  json_t *ev = json_object_get(doc_rec, "evidence");
  if (json_is_array(ev) && json_array_size(ev) > json_array_size(json_object_get(seed_rec,
                                                                                "evidence"))) {
    json_t *mine = json_object_get(out, "evidence");
    if (!json_is_array(mine)) {
      json_object_set_new(out, "evidence", json_array());
      mine = json_object_get(out, "evidence");
    }
    size_t skip = json_array_size(json_object_get(seed_rec, "evidence"));
    for (size_t i = skip; i < json_array_size(ev); i++)
      json_array_append(mine, json_array_get(ev, i));
    while (json_array_size(mine) > 50)
      json_array_remove(mine, 0);
  }
}

/* A merged record's EMA trend (not a sum: the seed's value was kept) becomes its mean
 * reward once it has counts, as the import requires a number then; the score does not
 * read it (docs/architecture.md, section 6). */
static void fix_ema(json_t *arr) {
  size_t i;
  json_t *rec;
  json_array_foreach(arr, i, rec) {
    json_t *stats = json_object_get(rec, "stats");
    double n = json_number_value(json_object_get(stats, "n"));
    if (json_object_get(stats, "ema") && json_is_null(json_object_get(stats, "ema")) && n > 0)
      json_object_set_new(stats, "ema",
                          json_real(json_number_value(json_object_get(stats, "reward_sum")) / n));
  }
}

json_t *replay_merge_memory(const json_t *seed, json_t *const *docs, size_t n) {
  json_t *out = json_deep_copy(seed);
  if (!out)
    return NULL;
  json_object_del(out, "exported_at");
  static const char *const parts[] = {"globals", "locals", "edges"};
  for (size_t p = 0; p < 3; p++) {
    json_t *arr = json_object_get(out, parts[p]);
    json_t *seed_arr = json_object_get(seed, parts[p]);
    for (size_t d = 0; d < n; d++) {
      size_t i;
      json_t *rec;
      json_array_foreach(json_object_get(docs[d], parts[p]), i, rec) {
        json_t *mine = same_record(arr, rec);
        json_t *seed_rec = same_record(seed_arr, rec);
        if (!mine) {  /* an edge this run made: added with zeroed stats, then its delta */
          json_t *copy = json_deep_copy(rec);
          json_t *stats = json_object_get(copy, "stats"), *v;
          const char *k;
          json_object_foreach(stats, k, v) {
            if (json_is_integer(v))
              json_object_set_new(stats, k, json_integer(0));
            else if (json_is_real(v))
              json_object_set_new(stats, k, json_real(0));
          }
          json_object_set_new(copy, "evidence", json_array());
          if (!json_object_get(rec, "evidence"))
            json_object_del(copy, "evidence");
          json_array_append_new(arr, copy);
          mine = json_array_get(arr, json_array_size(arr) - 1);
        }
        add_delta(mine, seed_rec, rec);
      }
    }
    fix_ema(arr);
  }
  return out;
}
