/* `opforge ablate --replay TABLE --seeds N`: the ablation arms over a recorded space, on
 * the CPU (docs/architecture.md, "Replaying a recorded space"). */
#ifndef OPFORGE_CLI_ABLATE_REPLAY_H
#define OPFORGE_CLI_ABLATE_REPLAY_H

#include <stdbool.h>
#include <stddef.h>

/* One arm as `opforge ablate` defines it (cli/ablate.c). */
struct replay_arm {
  const char *name, *policy, *search;
};

struct replay_params {
  const char *table;       /* the space table */
  long seeds;              /* seeds 1..N of every (task, arm, mode) */
  long steps;              /* counted steps of every run */
  const struct replay_arm *arms;
  size_t n_arms;
  const char *modes;       /* "cold", "warm", "frozen", comma-separated */
  const char *tasks;       /* comma-separated task names of the table, or NULL: all */
  long jobs;               /* runs side by side (the server's worker slots) */
  const char *prefix;      /* memory namespaces are PREFIX-... */
  const char *out;         /* JSON of every run, or NULL */
  const char *evaluator;   /* opforge-replay, or NULL: found next to this binary */
  const char *keep;        /* the server's data directory to keep, or NULL: a temporary
                              one, removed at the end */
};

/* Runs the replay and prints its report. Returns the exit status: 0, 1 when a run or the
 * server failed, 2 on bad usage or an unusable table. */
int cli_ablate_replay(const struct replay_params *p);

#endif
