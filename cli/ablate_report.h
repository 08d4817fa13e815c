/* The pure part of `opforge ablate`: one task's figures from its candidates, the table,
 * the per-arm summary and the JSON of a run. No I/O besides the FILE given. */
#ifndef OPFORGE_CLI_ABLATE_REPORT_H
#define OPFORGE_CLI_ABLATE_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/bench_report.h"

#define ABLATE_MARKS 3       /* the step counts the table reports the best at */
#define ABLATE_ARM_MAX 16    /* bytes of an arm's name */
#define ABLATE_NEAR_FINAL 0.95 /* "steps to 95%": within this fraction of the final speed */

/* 5, 10 and 20 steps. */
extern const int ablate_marks[ABLATE_MARKS];

/* One task of one arm. Times are in ms; NAN when unknown. */
struct ablate_result {
  char task[BENCH_NAME_MAX + 1];
  char arm[ABLATE_ARM_MAX];
  char status[16];           /* succeeded, failed, cancelled, unfinished, refused */
  long budget;               /* budget.steps */
  long steps;                /* steps the task spent */
  bool final;                /* it reached an end (not cut off by --wait-limit) */
  double eager_ms;           /* from its baselines */
  double best_at[ABLATE_MARKS]; /* best correct time among steps 0..mark (the reference is
                                   step 0); NAN when the budget is below the mark or the
                                   task was cut off before it */
  double final_ms;           /* best correct time of the whole run */
  long steps_to_near;        /* first step whose best so far is within ABLATE_NEAR_FINAL of
                                the final best speed (t <= final/0.95); -1 when none */
  long correct, total;       /* correct candidates and candidates of steps 1.. */
};

/* Sets r's figures from every candidate of its task (items, in step order, the reference
 * of step 0 included; borrowed). r's budget, steps and final must be set first. */
void ablate_result_take(struct ablate_result *r, const json_t *items);

/* Prints the table: one row per result, in the order given. */
void ablate_print_table(FILE *out, const struct ablate_result *rs, size_t n);

/* Prints one line per arm (arms[0..n_arms), in order): tasks, the geometric mean over its
 * tasks of eager_ms/best at each mark and at the end, the mean steps to 95%, and the
 * correct candidates. */
void ablate_print_summary(FILE *out, const char *const *arms, size_t n_arms,
                          const struct ablate_result *rs, size_t n);

/* The geometric mean of eager_ms/best over the results of arm at mark (ABLATE_MARKS: the
 * final best); NAN when no result has both. */
double ablate_geomean(const struct ablate_result *rs, size_t n, const char *arm, int mark);

/* r as JSON (a new reference; NULL when out of memory). */
json_t *ablate_result_json(const struct ablate_result *r);

#endif
