/* `opforge bench`'s arithmetic and output: per-task figures, the summary, the table, JSON. */
#include "cli/bench_report.h"
#include "cli/client.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* The table's columns, in order. */
enum {
  COL_TASK, COL_FAMILY, COL_CORRECT, COL_EAGER, COL_COMPILE, COL_BEST, COL_FLOOR,
  COL_VS_EAGER, COL_VS_COMPILE, COL_OF_FLOOR, COL_LIB_SHARE, COL_GRAPH, COL_EVALS,
  COL_TO_BEST, COL_WALL, COL_STOP, COL_STATUS, N_COLS
};
#define CELL_MAX 224 /* a task name, "refused:" and an error code fit */

static const char *const col_heads[N_COLS] = {
    "TASK", "FAMILY", "CORRECT", "EAGER_MS", "COMPILE_MS", "BEST_MS", "FLOOR_MS",
    "VS_EAGER", "VS_COMPILE", "OF_FLOOR", "LIB_SHARE", "GRAPH", "EVALS", "STEPS_TO_BEST",
    "WALL_S", "STOP", "STATUS"};

/* Text columns are aligned left, numbers right. */
static bool col_left(int col) {
  return col == COL_TASK || col == COL_FAMILY || col == COL_CORRECT || col == COL_STOP ||
         col == COL_STATUS;
}

void bench_result_init(struct bench_result *r, const char *file) {
  memset(r, 0, sizeof *r);
  r->file = file;
  r->state = BENCH_NOT_SUBMITTED;
  r->step = r->budget_steps = r->correct_count = r->candidates = -1;
  r->eager_ms = r->compile_ms = r->floor_ms = r->impossible_ms = NAN;
  r->best_ms = NAN;
  r->steps_to_best = -1;
  r->wall_s = r->run_s = NAN;
  r->library_share = NAN;
  r->graph = r->no_speedup = -1;
}

const char *bench_state_name(enum bench_state state) {
  switch (state) {
  case BENCH_NOT_SUBMITTED: return "not_submitted";
  case BENCH_REFUSED: return "refused";
  case BENCH_LOST: return "lost";
  case BENCH_QUEUED: return "queued";
  case BENCH_RUNNING: return "running";
  case BENCH_SUCCEEDED: return "succeeded";
  case BENCH_FAILED: return "failed";
  case BENCH_CANCELLED: return "cancelled";
  }
  return "unknown";
}

bool bench_state_is_final(enum bench_state state) {
  return state == BENCH_SUCCEEDED || state == BENCH_FAILED || state == BENCH_CANCELLED;
}

enum bench_state bench_state_from_status(const char *status) {
  static const struct {
    const char *name;
    enum bench_state state;
  } map[] = {{"queued", BENCH_QUEUED},       {"running", BENCH_RUNNING},
             {"succeeded", BENCH_SUCCEEDED}, {"failed", BENCH_FAILED},
             {"cancelled", BENCH_CANCELLED}};
  for (size_t i = 0; status && i < sizeof map / sizeof map[0]; i++)
    if (strcmp(status, map[i].name) == 0)
      return map[i].state;
  return BENCH_LOST;
}

bool bench_family_memory_bound(const char *family) {
  static const char *const memory[] = {"pointwise", "reduction", "norm", "softmax",
                                       "scan",      "pooling",   "loss"};
  for (size_t i = 0; family && i < sizeof memory / sizeof memory[0]; i++)
    if (strcmp(family, memory[i]) == 0)
      return true;
  return false;
}

/* True for a usable time: finite and positive. */
static bool known_ms(double ms) {
  return isfinite(ms) && ms > 0;
}

bool bench_result_correct(const struct bench_result *r) {
  return known_ms(r->best_ms);
}

/* num / r->best_ms, NAN when either is unknown. */
static double over_best(const struct bench_result *r, double num) {
  return known_ms(num) && bench_result_correct(r) ? num / r->best_ms : NAN;
}

double bench_vs_eager(const struct bench_result *r) {
  return over_best(r, r->eager_ms);
}

double bench_vs_compile(const struct bench_result *r) {
  return over_best(r, r->compile_ms);
}

double bench_floor_fraction(const struct bench_result *r) {
  return over_best(r, r->floor_ms);
}

void bench_task_name(const char *path, char *out) { cli_task_name(path, out); }

/* Reads n decimal digits at s into *ret; false when one is not a digit. */
static bool digits(const char *s, int n, int *ret) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (s[i] - '0');
  }
  *ret = v;
  return true;
}

int bench_parse_time(const char *text, double *ret_s) {
  struct tm tm = {0};
  int year, mon, day, hour, min, sec;
  if (!text || strlen(text) < 20 || !digits(text, 4, &year) || text[4] != '-' ||
      !digits(text + 5, 2, &mon) || text[7] != '-' || !digits(text + 8, 2, &day) ||
      text[10] != 'T' || !digits(text + 11, 2, &hour) || text[13] != ':' ||
      !digits(text + 14, 2, &min) || text[16] != ':' || !digits(text + 17, 2, &sec))
    return -1;
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
    return -1;
  const char *p = text + 19;
  double frac = 0, scale = 0.1;
  if (*p == '.') {
    if (p[1] < '0' || p[1] > '9')
      return -1;
    for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
      frac += (*p - '0') * scale;
  }
  if (strcmp(p, "Z") != 0)
    return -1;
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  time_t t = timegm(&tm);
  if (t == (time_t)-1)
    return -1;
  *ret_s = (double)t + frac;
  return 0;
}

/* ---- reading the API's objects ---- */

/* Copies a string member into out when present. */
static void take_string(const json_t *obj, const char *key, char *out, size_t outlen) {
  const char *s = json_string_value(json_object_get(obj, key));
  if (s)
    snprintf(out, outlen, "%s", s);
}

/* Copies an integer member into *out when present. */
static void take_long(const json_t *obj, const char *key, long *out) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_integer(v))
    *out = (long)json_integer_value(v);
}

/* Copies a positive number member into *out when present. */
static void take_ms(const json_t *obj, const char *key, double *out) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_number(v) && known_ms(json_number_value(v)))
    *out = json_number_value(v);
}

void bench_result_take_progress(struct bench_result *r, const json_t *progress,
                                const json_t *baselines) {
  if (json_is_object(progress)) {
    take_long(progress, "step", &r->step);
    take_long(progress, "budget_steps", &r->budget_steps);
    take_long(progress, "correct", &r->correct_count);
    take_long(progress, "candidates", &r->candidates);
    if (r->correct_count > 0)
      take_ms(progress, "best_ms", &r->best_ms);
    take_string(progress, "best_candidate", r->best_candidate, sizeof r->best_candidate);
    const json_t *share = json_object_get(progress, "library_share");
    if (json_is_number(share))
      r->library_share = json_number_value(share);
    const json_t *graph = json_object_get(progress, "best_graph");
    if (json_is_boolean(graph))
      r->graph = json_is_true(graph);
  }
  if (json_is_object(baselines)) {
    take_string(baselines, "family", r->family, sizeof r->family);
    take_string(baselines, "bound", r->bound, sizeof r->bound);
    take_ms(baselines, "eager_ms", &r->eager_ms);
    take_ms(baselines, "compile_ms", &r->compile_ms);
    take_ms(baselines, "floor_ms", &r->floor_ms);
    take_ms(baselines, "impossible_ms", &r->impossible_ms);
  }
}

void bench_result_take_summary(struct bench_result *r, const json_t *summary) {
  take_string(summary, "stop_reason", r->stop_reason, sizeof r->stop_reason);
  const json_t *no = json_object_get(summary, "no_speedup");
  if (json_is_boolean(no))
    r->no_speedup = json_is_true(no);
}

long bench_evaluations(const struct bench_result *r) {
  return r->step >= 0 && bench_state_is_final(r->state) && isfinite(r->eager_ms) ? r->step + 1
         : r->step >= 0                                                          ? r->step
                                                                                 : -1;
}

void bench_result_take_candidates(struct bench_result *r, const json_t *items) {
  if (!bench_result_correct(r))
    return;
  /* best_ms travels as a %.17g JSON number, so it round-trips; the slack only guards
   * against a server that rounds it. */
  double limit = r->best_ms * (1 + 1e-9);
  size_t i;
  const json_t *c;
  json_array_foreach(items, i, c) {
    const json_t *result = json_object_get(c, "result");
    const json_t *step = json_object_get(c, "step");
    const json_t *median = json_object_get(json_object_get(result, "time"), "median_ms");
    if (!json_is_true(json_object_get(result, "correct")) ||
        json_is_object(json_object_get(result, "failure")) || !json_is_integer(step) ||
        !json_is_number(median) || !known_ms(json_number_value(median)))
      continue;
    if (json_number_value(median) <= limit) {
      r->steps_to_best = (long)json_integer_value(step);
      return;
    }
  }
}

/* ---- the summary ---- */

/* Sums of logarithms for a geometric mean. */
struct geo {
  double log_sum;
  size_t n;
};

static void geo_add(struct geo *g, double x) {
  if (isfinite(x) && x > 0) {
    g->log_sum += log(x);
    g->n++;
  }
}

static double geo_mean(const struct geo *g) {
  return g->n ? exp(g->log_sum / (double)g->n) : NAN;
}

/* Counts r under its state. */
static void count_state(struct bench_summary *s, const struct bench_result *r) {
  switch (r->state) {
  case BENCH_SUCCEEDED: s->succeeded++; break;
  case BENCH_FAILED: s->failed++; break;
  case BENCH_CANCELLED: s->cancelled++; break;
  case BENCH_QUEUED:
  case BENCH_RUNNING: s->unfinished++; break;
  case BENCH_NOT_SUBMITTED: s->not_submitted++; break;
  case BENCH_REFUSED: s->refused++; break;
  case BENCH_LOST: s->lost++; break;
  }
}

/* Adds a correct result's memory-bound ratio, keeping the worst. */
static void add_memory(struct bench_summary *s, struct geo *g, const struct bench_result *r) {
  double frac = bench_floor_fraction(r);
  if (!bench_family_memory_bound(r->family) || !isfinite(frac))
    return;
  double ratio = 1.0 / frac; /* best / floor */
  geo_add(g, ratio);
  if (g->n == 1 || ratio > s->memory_worst_of_floor) {
    s->memory_worst_of_floor = ratio;
    snprintf(s->memory_worst_task, sizeof s->memory_worst_task, "%s", r->name);
  }
}

void bench_summarize(const struct bench_result *results, size_t n,
                     struct bench_summary *ret_summary) {
  struct bench_summary s = {.tasks = n, .memory_worst_of_floor = NAN};
  struct geo eager = {0}, compile = {0}, memory = {0};
  for (size_t i = 0; i < n; i++) {
    const struct bench_result *r = &results[i];
    count_state(&s, r);
    if (!bench_result_correct(r))
      continue;
    s.correct++;
    geo_add(&eager, bench_vs_eager(r));
    geo_add(&compile, bench_vs_compile(r));
    add_memory(&s, &memory, r);
    if (bench_vs_eager(r) > 1.0)
      s.n_fast_1++;
    if (bench_vs_compile(r) > 1.0)
      s.n_faster_than_compile++;
  }
  s.geomean_vs_eager = geo_mean(&eager);
  s.n_vs_eager = eager.n;
  s.geomean_vs_compile = geo_mean(&compile);
  s.n_vs_compile = compile.n;
  s.memory_geomean_of_floor = geo_mean(&memory);
  s.n_memory = memory.n;
  s.fast_1 = n ? (double)s.n_fast_1 / (double)n : NAN;
  s.faster_than_compile = n ? (double)s.n_faster_than_compile / (double)n : NAN;
  *ret_summary = s;
}

/* ---- the table ---- */

/* Writes x with digits decimals and suffix into cell, or "-" when x is not finite. */
static void cell_num(char *cell, int digits, const char *suffix, double x) {
  if (isfinite(x))
    snprintf(cell, CELL_MAX, "%.*f%s", digits, x, suffix);
  else
    snprintf(cell, CELL_MAX, "-");
}

/* Writes the status cell: the state, with the error code of a failure or refusal, and
 * marked unfinished when bench stopped following a live task. */
static void cell_status(char *cell, const struct bench_result *r) {
  const char *state = bench_state_name(r->state);
  if (r->state == BENCH_QUEUED || r->state == BENCH_RUNNING)
    snprintf(cell, CELL_MAX, "unfinished:%s", state);
  else if (r->error_code[0] && (r->state == BENCH_FAILED || r->state == BENCH_REFUSED ||
                                r->state == BENCH_LOST))
    snprintf(cell, CELL_MAX, "%s:%s", state, r->error_code);
  else
    snprintf(cell, CELL_MAX, "%s", state);
}

/* Fills one row's cells. */
static void row_cells(const struct bench_result *r, char cells[N_COLS][CELL_MAX]) {
  snprintf(cells[COL_TASK], CELL_MAX, "%s", r->name);
  snprintf(cells[COL_FAMILY], CELL_MAX, "%s", r->family[0] ? r->family : "-");
  snprintf(cells[COL_CORRECT], CELL_MAX, "%s", bench_result_correct(r) ? "yes" : "no");
  cell_num(cells[COL_EAGER], 4, "", r->eager_ms);
  cell_num(cells[COL_COMPILE], 4, "", r->compile_ms);
  cell_num(cells[COL_BEST], 4, "", r->best_ms);
  cell_num(cells[COL_FLOOR], 4, "", r->floor_ms);
  cell_num(cells[COL_VS_EAGER], 2, "x", bench_vs_eager(r));
  cell_num(cells[COL_VS_COMPILE], 2, "x", bench_vs_compile(r));
  cell_num(cells[COL_OF_FLOOR], 2, "", bench_floor_fraction(r));
  cell_num(cells[COL_LIB_SHARE], 2, "", r->library_share);
  snprintf(cells[COL_GRAPH], CELL_MAX, "%s", r->graph < 0 ? "-" : r->graph ? "yes" : "no");
  long evals = bench_evaluations(r);
  if (evals >= 0)
    snprintf(cells[COL_EVALS], CELL_MAX, "%ld", evals);
  else
    snprintf(cells[COL_EVALS], CELL_MAX, "-");
  if (r->steps_to_best >= 0)
    snprintf(cells[COL_TO_BEST], CELL_MAX, "%ld", r->steps_to_best);
  else
    snprintf(cells[COL_TO_BEST], CELL_MAX, "-");
  cell_num(cells[COL_WALL], 1, "", r->wall_s);
  snprintf(cells[COL_STOP], CELL_MAX, "%s%s", r->stop_reason[0] ? r->stop_reason : "-",
           r->no_speedup == 1 ? ",no_speedup" : "");
  cell_status(cells[COL_STATUS], r);
}

/* Prints one line of cells padded to width; the last column is not padded. */
static void print_row(FILE *out, const char *const *cells, const int *width) {
  for (int c = 0; c < N_COLS; c++) {
    const char *sep = c + 1 < N_COLS ? "  " : "\n";
    if (c + 1 == N_COLS)
      fprintf(out, "%s%s", cells[c], sep);
    else if (col_left(c))
      fprintf(out, "%-*s%s", width[c], cells[c], sep);
    else
      fprintf(out, "%*s%s", width[c], cells[c], sep);
  }
}

void bench_print_table(FILE *out, const struct bench_result *results, size_t n) {
  int width[N_COLS];
  char cells[N_COLS][CELL_MAX];
  const char *ptrs[N_COLS];
  for (int c = 0; c < N_COLS; c++)
    width[c] = (int)strlen(col_heads[c]);
  for (size_t i = 0; i < n; i++) {
    row_cells(&results[i], cells);
    for (int c = 0; c < N_COLS; c++)
      if ((int)strlen(cells[c]) > width[c])
        width[c] = (int)strlen(cells[c]);
  }
  print_row(out, col_heads, width);
  for (int c = 0; c < N_COLS; c++)
    ptrs[c] = cells[c];
  for (size_t i = 0; i < n; i++) {
    row_cells(&results[i], cells);
    print_row(out, ptrs, width);
  }
}

/* Prints "LABEL: 1.234x over N tasks", or "LABEL: - (no task)" when x is NAN. */
static void print_geo(FILE *out, const char *label, double x, size_t n) {
  if (isfinite(x))
    fprintf(out, "%s: %.3fx over %zu task%s\n", label, x, n, n == 1 ? "" : "s");
  else
    fprintf(out, "%s: - (no task)\n", label);
}

/* Prints "LABEL: P% (K of N)", or "LABEL: - (no task)" when there was none. */
static void print_share(FILE *out, const char *label, double share, size_t k, size_t n) {
  if (isfinite(share))
    fprintf(out, "%s: %.1f%% (%zu of %zu)\n", label, share * 100.0, k, n);
  else
    fprintf(out, "%s: - (no task)\n", label);
}

void bench_print_summary(FILE *out, const struct bench_summary *s) {
  fprintf(out, "tasks: %zu (succeeded %zu, failed %zu, cancelled %zu, unfinished %zu, "
               "not submitted %zu, refused %zu, lost %zu)\n",
          s->tasks, s->succeeded, s->failed, s->cancelled, s->unfinished, s->not_submitted,
          s->refused, s->lost);
  fprintf(out, "with a correct candidate: %zu\n", s->correct);
  print_geo(out, "geomean speed-up vs eager", s->geomean_vs_eager, s->n_vs_eager);
  print_geo(out, "geomean speed-up vs torch.compile", s->geomean_vs_compile,
            s->n_vs_compile);
  if (s->n_memory > 0)
    fprintf(out, "memory-bound geomean best/floor: %.3f over %zu task%s; worst %.3f (%s)\n",
            s->memory_geomean_of_floor, s->n_memory, s->n_memory == 1 ? "" : "s",
            s->memory_worst_of_floor, s->memory_worst_task);
  else
    fprintf(out, "memory-bound geomean best/floor: - (no task)\n");
  print_share(out, "fast_1 (correct and faster than eager)", s->fast_1, s->n_fast_1,
              s->tasks);
  print_share(out, "faster than torch.compile", s->faster_than_compile,
              s->n_faster_than_compile, s->tasks);
}

void bench_format_finished(const struct bench_result *r, size_t i, size_t n, char *out,
                           size_t outlen) {
  char status[CELL_MAX];
  cell_status(status, r);
  char best[64], vs[64] = "", step[64] = "", wall[64] = "";
  if (bench_result_correct(r))
    snprintf(best, sizeof best, "best %.4f ms", r->best_ms);
  else
    snprintf(best, sizeof best, "no correct candidate");
  if (isfinite(bench_vs_eager(r)))
    snprintf(vs, sizeof vs, ", %.2fx vs eager", bench_vs_eager(r));
  if (r->step >= 0 && r->budget_steps >= 0)
    snprintf(step, sizeof step, ", step %ld/%ld", r->step, r->budget_steps);
  if (isfinite(r->wall_s))
    snprintf(wall, sizeof wall, ", %.1f s", r->wall_s);
  snprintf(out, outlen, "[%zu/%zu] %s %s: %s%s%s%s", i, n, r->name, status, best, vs, step,
           wall);
}

/* ---- JSON ---- */

/* A number, or null when x is not finite. */
static json_t *num_or_null(double x) {
  return isfinite(x) ? json_real(x) : json_null();
}

/* A count, or null when it is negative (unknown). */
static json_t *count_or_null(long x) {
  return x >= 0 ? json_integer(x) : json_null();
}

/* A string, or null when it is empty. */
static json_t *str_or_null(const char *s) {
  return s && *s ? json_string(s) : json_null();
}

/* Sets obj[key] = value (stolen); records a failure in *failed. */
static void put(json_t *obj, const char *key, json_t *value, bool *failed) {
  if (!value || json_object_set_new(obj, key, value) != 0)
    *failed = true;
}

/* The error object of a result, or null. */
static json_t *error_json(const struct bench_result *r) {
  if (!r->error_code[0])
    return json_null();
  return json_pack("{s:s, s:s}", "code", r->error_code, "message", r->error_message);
}

/* The identity and state members of a result's object. */
static void put_identity(json_t *o, const struct bench_result *r, bool *failed) {
  put(o, "name", json_string(r->name), failed);
  put(o, "file", str_or_null(r->file), failed);
  put(o, "id", str_or_null(r->id), failed);
  put(o, "status", json_string(bench_state_name(r->state)), failed);
  put(o, "finished", json_boolean(bench_state_is_final(r->state)), failed);
  put(o, "error", error_json(r), failed);
  put(o, "family", str_or_null(r->family), failed);
  put(o, "bound", str_or_null(r->bound), failed);
  put(o, "memory_bound", json_boolean(bench_family_memory_bound(r->family)), failed);
  put(o, "correct", json_boolean(bench_result_correct(r)), failed);
  put(o, "created_at", str_or_null(r->created_at), failed);
  put(o, "finished_at", str_or_null(r->finished_at), failed);
  put(o, "best_candidate", str_or_null(r->best_candidate), failed);
}

json_t *bench_result_json(const struct bench_result *r) {
  json_t *o = json_object();
  bool failed = !o;
  if (failed)
    return NULL;
  put_identity(o, r, &failed);
  put(o, "correct_candidates", count_or_null(r->correct_count), &failed);
  put(o, "candidates", count_or_null(r->candidates), &failed);
  put(o, "steps", count_or_null(r->step), &failed);
  put(o, "budget_steps", count_or_null(r->budget_steps), &failed);
  put(o, "eager_ms", num_or_null(r->eager_ms), &failed);
  put(o, "compile_ms", num_or_null(r->compile_ms), &failed);
  put(o, "best_ms", num_or_null(r->best_ms), &failed);
  put(o, "floor_ms", num_or_null(r->floor_ms), &failed);
  put(o, "impossible_ms", num_or_null(r->impossible_ms), &failed);
  put(o, "speedup_vs_eager", num_or_null(bench_vs_eager(r)), &failed);
  put(o, "speedup_vs_compile", num_or_null(bench_vs_compile(r)), &failed);
  put(o, "floor_fraction", num_or_null(bench_floor_fraction(r)), &failed);
  double frac = bench_floor_fraction(r);
  put(o, "best_over_floor", num_or_null(isfinite(frac) ? 1.0 / frac : NAN), &failed);
  put(o, "steps_to_best", count_or_null(r->steps_to_best), &failed);
  put(o, "wall_s", num_or_null(r->wall_s), &failed);
  put(o, "run_s", num_or_null(r->run_s), &failed);
  put(o, "library_share", num_or_null(r->library_share), &failed);
  put(o, "graph", r->graph < 0 ? json_null() : json_boolean(r->graph), &failed);
  put(o, "evaluations", count_or_null(bench_evaluations(r)), &failed);
  put(o, "stop_reason", r->stop_reason[0] ? json_string(r->stop_reason) : json_null(), &failed);
  put(o, "no_speedup", r->no_speedup < 0 ? json_null() : json_boolean(r->no_speedup), &failed);
  if (failed) {
    json_decref(o);
    return NULL;
  }
  return o;
}

json_t *bench_summary_json(const struct bench_summary *s) {
  json_t *o = json_object();
  bool failed = !o;
  if (failed)
    return NULL;
  put(o, "tasks", json_integer((json_int_t)s->tasks), &failed);
  put(o, "succeeded", json_integer((json_int_t)s->succeeded), &failed);
  put(o, "failed", json_integer((json_int_t)s->failed), &failed);
  put(o, "cancelled", json_integer((json_int_t)s->cancelled), &failed);
  put(o, "unfinished", json_integer((json_int_t)s->unfinished), &failed);
  put(o, "not_submitted", json_integer((json_int_t)s->not_submitted), &failed);
  put(o, "refused", json_integer((json_int_t)s->refused), &failed);
  put(o, "lost", json_integer((json_int_t)s->lost), &failed);
  put(o, "correct", json_integer((json_int_t)s->correct), &failed);
  put(o, "geomean_speedup_vs_eager", num_or_null(s->geomean_vs_eager), &failed);
  put(o, "geomean_speedup_vs_eager_tasks", json_integer((json_int_t)s->n_vs_eager), &failed);
  put(o, "geomean_speedup_vs_compile", num_or_null(s->geomean_vs_compile), &failed);
  put(o, "geomean_speedup_vs_compile_tasks", json_integer((json_int_t)s->n_vs_compile),
      &failed);
  put(o, "memory_bound_geomean_best_over_floor", num_or_null(s->memory_geomean_of_floor),
      &failed);
  put(o, "memory_bound_tasks", json_integer((json_int_t)s->n_memory), &failed);
  put(o, "memory_bound_worst_best_over_floor", num_or_null(s->memory_worst_of_floor), &failed);
  put(o, "memory_bound_worst_task", str_or_null(s->memory_worst_task), &failed);
  put(o, "fast_1", num_or_null(s->fast_1), &failed);
  put(o, "fast_1_tasks", json_integer((json_int_t)s->n_fast_1), &failed);
  put(o, "faster_than_compile", num_or_null(s->faster_than_compile), &failed);
  put(o, "faster_than_compile_tasks", json_integer((json_int_t)s->n_faster_than_compile),
      &failed);
  if (failed) {
    json_decref(o);
    return NULL;
  }
  return o;
}
