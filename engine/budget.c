/* The time budget of a task (see budget.h). */
#include "engine/budget.h"

#include <time.h>

bool budget_time_allows_step(double elapsed_s, double budget_s, double steps_s,
                             int steps_timed) {
  if (!(elapsed_s < budget_s))
    return false;
  if (steps_timed <= 0)
    return true;
  return elapsed_s + steps_s / steps_timed <= budget_s;
}

double budget_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
