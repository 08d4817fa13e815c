/* `opforge bench`'s arithmetic and output: per-task figures, the summary, the table, JSON. */
#ifndef OPFORGE_CLI_BENCH_REPORT_H
#define OPFORGE_CLI_BENCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#define BENCH_NAME_MAX 128 /* the server's limit on a task name */
#define BENCH_TIME_LEN 32  /* an RFC 3339 time with milliseconds, and its NUL */

/* Where a benchmarked task stands. Only the last three come from a final task status. */
enum bench_state {
  BENCH_NOT_SUBMITTED, /* bench stopped (wait limit, or the server failed) before it */
  BENCH_REFUSED,       /* the server answered the submission with an error */
  BENCH_LOST,          /* the server stopped knowing the task (deleted meanwhile) */
  BENCH_QUEUED,        /* still queued when bench stopped following */
  BENCH_RUNNING,       /* still running when bench stopped following */
  BENCH_SUCCEEDED,
  BENCH_FAILED,
  BENCH_CANCELLED,
};

/* One task of a run. Numbers that are not known are NAN (times) or -1 (counts). */
struct bench_result {
  const char *file; /* the program's path; borrowed, outlives the result */
  char name[BENCH_NAME_MAX + 1];
  char id[40];          /* "" until submitted */
  enum bench_state state;
  char error_code[64];  /* the task's or the refusal's error code; "" when none */
  char error_message[256];
  char family[32];      /* baselines.family; "" when not profiled */
  char bound[16];       /* baselines.bound; "" when not profiled */
  long step, budget_steps, correct_count, candidates;
  double eager_ms, compile_ms, floor_ms, impossible_ms;
  double best_ms;       /* the fastest correct candidate; NAN when none */
  long steps_to_best;   /* step of the first candidate as fast as best_ms */
  char best_candidate[40];
  char created_at[BENCH_TIME_LEN];
  char finished_at[BENCH_TIME_LEN]; /* the finish event's time; "" when not finished */
  double wall_s;        /* created_at to finished_at */
  double run_s;         /* the "running" event to finished_at */
  double library_share; /* the best program's share of time in library steps; NAN unknown */
  int graph;            /* the best program replays as a CUDA graph: 1, 0, -1 unknown */
  char stop_reason[24]; /* the finished summary's: budget, at_floor, space_exhausted */
  int no_speedup;       /* nothing beat the reference: 1, 0, -1 unknown */
};

/* The summary of a run. Ratios over no task are NAN. */
struct bench_summary {
  size_t tasks, succeeded, failed, cancelled, unfinished, not_submitted, refused, lost;
  size_t correct;                 /* tasks with a correct candidate */
  double geomean_vs_eager;        /* over correct tasks with eager_ms */
  size_t n_vs_eager;
  double geomean_vs_compile;      /* over correct tasks with compile_ms */
  size_t n_vs_compile;
  double memory_geomean_of_floor; /* best/floor over correct memory-bound tasks with floor */
  size_t n_memory;
  double memory_worst_of_floor;   /* the largest such best/floor */
  char memory_worst_task[BENCH_NAME_MAX + 1]; /* its task name; "" when n_memory is 0 */
  double fast_1;                  /* share of all tasks correct and faster than eager */
  size_t n_fast_1;
  double faster_than_compile;     /* share of all tasks correct and faster than compile */
  size_t n_faster_than_compile;
};

/* Sets every field of r to "unknown" (NAN, -1, ""), state BENCH_NOT_SUBMITTED, and file
 * (borrowed). */
void bench_result_init(struct bench_result *r, const char *file);

/* The state's name as the JSON and the table write it ("not_submitted", "succeeded", ...). */
const char *bench_state_name(enum bench_state state);

/* True for the three states a task never leaves. */
bool bench_state_is_final(enum bench_state state);

/* The state of an API task status ("queued", ... "cancelled"); BENCH_LOST for anything
 * else. */
enum bench_state bench_state_from_status(const char *status);

/* True for the families whose floor is the memory traffic: pointwise, reduction, norm,
 * softmax, scan, pooling and loss. NULL or "" is false. */
bool bench_family_memory_bound(const char *family);

/* True when r has a correct candidate (a positive, finite best_ms). */
bool bench_result_correct(const struct bench_result *r);

/* eager_ms / best_ms, compile_ms / best_ms, floor_ms / best_ms; NAN when either is
 * unknown. */
double bench_vs_eager(const struct bench_result *r);
double bench_vs_compile(const struct bench_result *r);
double bench_floor_fraction(const struct bench_result *r);

/* Writes the default task name of path into out (BENCH_NAME_MAX + 1 bytes), as `opforge
 * submit` does: the base name without .py, each character outside [A-Za-z0-9_.-] (a
 * UTF-8 sequence counting as one) replaced by '_', cut at 128 bytes; "task" when empty. */
void bench_task_name(const char *path, char *out);

/* Parses an RFC 3339 UTC time ("2026-11-29T07:42:04.123Z", fraction optional) into
 * seconds since the epoch. Returns 0, or -1 when text is not such a time; *ret_s is set
 * only on success. */
int bench_parse_time(const char *text, double *ret_s);

/* Fills r's step, budget, correct count, best time and candidate, library share and
 * graph from a task's progress object and its family, bound and timings from its
 * baselines (both borrowed; NULL or JSON null leaves the fields as they are). */
void bench_result_take_progress(struct bench_result *r, const json_t *progress,
                                const json_t *baselines);

/* Fills r's stop reason and no-speedup flag from the data of a task's "finished" event
 * (borrowed; fields it lacks stay as they are). */
void bench_result_take_summary(struct bench_result *r, const json_t *summary);

/* The distinct evaluations of r: its steps and the reference of step 0; -1 unknown. */
long bench_evaluations(const struct bench_result *r);

/* Sets r->steps_to_best from a task's candidates (a borrowed array of the API's candidate
 * objects, in seq order): the step of the first correct one whose median time is at most
 * r->best_ms. Leaves it unchanged when r has no best time or no candidate reaches it. */
void bench_result_take_candidates(struct bench_result *r, const json_t *items);

/* Computes the summary of n results. */
void bench_summarize(const struct bench_result *results, size_t n,
                     struct bench_summary *ret_summary);

/* Prints the results as an aligned table with a header line. */
void bench_print_table(FILE *out, const struct bench_result *results, size_t n);

/* Prints the summary lines. */
void bench_print_summary(FILE *out, const struct bench_summary *s);

/* Writes the one line bench prints when a task ends into out:
 * "[i/n] NAME STATUS: best X ms, Y.YYx vs eager, step S/B, W.W s" (the parts that are
 * known). */
void bench_format_finished(const struct bench_result *r, size_t i, size_t n, char *out,
                           size_t outlen);

/* One result as a JSON object, every number included (null when unknown). Returns a new
 * reference the caller releases, or NULL when out of memory. */
json_t *bench_result_json(const struct bench_result *r);

/* The summary as a JSON object. Returns a new reference the caller releases, or NULL
 * when out of memory. */
json_t *bench_summary_json(const struct bench_summary *s);

#endif
