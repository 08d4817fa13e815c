/* The pure part of `opforge ablate --replay`: one run's figures from its candidates, the
 * per-arm summary with 95% confidence intervals, the targets of issue 31, and the
 * merging of memory exports for the warm mode. No I/O besides the FILE given. */
#ifndef OPFORGE_CLI_ABLATE_REPLAY_STATS_H
#define OPFORGE_CLI_ABLATE_REPLAY_STATS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define REPLAY_MARKS 3            /* 5, 10 and 20 steps */
#define REPLAY_NAME_MAX 128

extern const int replay_marks[REPLAY_MARKS];

/* One run: a task of the table under one arm, memory mode and seed. */
struct replay_run {
  char task[REPLAY_NAME_MAX];
  char arm[16];
  char mode[8];                   /* cold, warm */
  long seed;
  int task_index;                 /* in the table */
  long steps;                     /* the step budget counted (--steps) */
  double space_best_ms;           /* the table's best program of the task */
  /* figures (replay_run_take) */
  bool done;                      /* it ended and its candidates were read */
  long engine_steps;              /* steps the engine spent */
  long not_recorded;              /* proposals of points the table lacks: the engine's
                                     count (they cost it no step; the caller adds it),
                                     plus any candidate that names one */
  long effective;                 /* steps that counted: engine_steps less such candidates */
  double best_at[REPLAY_MARKS];   /* best correct time within the first 5, 10, 20 counted
                                     steps (the reference of step 0 included); NAN when the
                                     budget is below the mark */
  double final_ms;                /* best correct time of the run */
  long to_95, to_99;              /* first counted step whose best is within 95% (99%) of
                                     the space's best speed; -1 when none */
};

/* Sets r's figures from its task's candidates (items, every step, step 0 included;
 * borrowed). A candidate whose failure class is replay/not_recorded costs no counted step;
 * candidates after the budget's last counted step are left out. ended says the run
 * reached its end: the marks beyond its last step then take its final best. */
void replay_run_take(struct replay_run *r, const json_t *items, bool ended);

/* r's steps to q (0.95 or 0.99) with a run that never got there counted as steps + 1. */
double replay_steps_to(const struct replay_run *r, double q);

/* r's best at mark k relative to the space's best: space_best_ms / best_at[k], in (0, 1];
 * NAN when unknown. */
double replay_rel_at(const struct replay_run *r, int k);

/* A mean with its 95% confidence interval: the runs' values are averaged per task over
 * the seeds, and the interval is Student's t over the tasks (the tasks are the sample;
 * the seeds only make each task's figure sharper). n is the number of tasks. */
struct replay_ci {
  double mean, lo, hi;
  size_t n;
};

/* The statistic of value(run) over the runs of (mode, arm); NAN values are left out. */
struct replay_ci replay_stat(const struct replay_run *runs, size_t n, const char *mode,
                             const char *arm, double (*value)(const struct replay_run *));

/* The mean over tasks of (a - b), each task's a and b averaged over its seeds, the runs
 * of (mode_a, arm_a) against those of (mode_b, arm_b); tasks missing either are left out. */
struct replay_ci replay_diff(const struct replay_run *runs, size_t n, const char *mode_a,
                             const char *arm_a, const char *mode_b, const char *arm_b,
                             double (*value)(const struct replay_run *));

/* Student's t quantile t(0.975, df) (df >= 1). */
double replay_t975(size_t df);

/* The value functions of the table's columns. */
double replay_v_to95(const struct replay_run *r);
double replay_v_to99(const struct replay_run *r);
double replay_v_rel5(const struct replay_run *r);
double replay_v_rel10(const struct replay_run *r);
double replay_v_rel20(const struct replay_run *r);
double replay_v_reached95(const struct replay_run *r);

/* Prints one line per (mode, arm), modes[] then arms[] in order: runs, mean steps to 95%
 * and 99% with their CIs, the share of runs that reached 95%, and the best at 5, 10 and
 * 20 steps relative to the space's best with their CIs. */
void replay_print_summary(FILE *out, const char *const *modes, size_t n_modes,
                          const char *const *arms, size_t n_arms, const struct replay_run *runs,
                          size_t n);

/* The headroom of one task: its first candidate's time, floor and the space's best. */
struct replay_headroom {
  double first_ms, floor_ms, best_ms;
};

/* Prints the targets of issue 31, part 4: headroom over the tasks (heads[0..n_tasks)),
 * cold full against random (steps to 95%, the CI of the difference), warm against cold
 * (full), and full >= flat >= bestofn at 10 steps (cold). A row whose arms or modes did
 * not run says so. */
void replay_print_targets(FILE *out, const struct replay_headroom *heads, size_t n_tasks,
                          const struct replay_run *runs, size_t n);

/* r as JSON (a new reference). */
json_t *replay_run_json(const struct replay_run *r);

/* The warm memory of one task (a memory export document, new reference): the seed
 * document's records with, for every numeric statistic, the seed's value plus the sum
 * over docs[0..n) of (their value - the seed's); the evidence rows of every doc joined
 * (the newest 50 kept); an edge a doc made that the seed lacks is added. Every doc is an
 * export of a namespace created from the same seed (borrowed). NULL when out of memory. */
json_t *replay_merge_memory(const json_t *seed, json_t *const *docs, size_t n);

#endif
