/* The time budget of a task (docs/architecture.md, "One task, start to end"): budget.seconds
 * bounds the task's wall time, load, profile and the reference included, and a step is not
 * started when a step of the mean length so far would end past it. */
#ifndef OPFORGE_BUDGET_H
#define OPFORGE_BUDGET_H

#include <stdbool.h>

/* Whether another step may start: elapsed_s of the task so far (every part of it) under
 * budget_s, and, once steps_timed steps took steps_s seconds in all, elapsed_s plus their
 * mean at most budget_s. */
bool budget_time_allows_step(double elapsed_s, double budget_s, double steps_s,
                             int steps_timed);

/* Seconds on the monotonic clock, the one the budget's times are read on. */
double budget_now_s(void);

#endif
