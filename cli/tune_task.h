/* What `opforge tune` (and `opforge submit --wait`) knows of one task: its program, how it
 * was submitted, and its state and figures as the server's replies and events tell them.
 * Pure: nothing here talks to the server or prints. */
#ifndef OPFORGE_CLI_TUNE_TASK_H
#define OPFORGE_CLI_TUNE_TASK_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cli/client.h"

#define TUNE_NAME_MAX CLI_TASK_NAME_MAX
#define TUNE_ID_MAX 64
#define TUNE_TEXT_MAX 512

/* Where a task stands. */
enum tune_state {
  TUNE_PENDING,   /* not submitted (yet) */
  TUNE_REFUSED,   /* the server refused the submission */
  TUNE_QUEUED,
  TUNE_RUNNING,
  TUNE_SUCCEEDED,
  TUNE_FAILED,
  TUNE_CANCELLED,
  TUNE_LOST,      /* deleted on the server while followed */
};

/* How its task came to be. */
enum tune_origin {
  TUNE_NEW,      /* submitted now (202) */
  TUNE_REPLAYED, /* its Idempotency-Key named a task not yet finished (200): followed */
  TUNE_REUSED,   /* its Idempotency-Key named a task that had already succeeded (200) */
};

/* One program of the run and its task. Strings are NUL-terminated copies. */
struct tune_task {
  const char *file;             /* the input path (borrowed from the file list) */
  char name[TUNE_NAME_MAX + 1]; /* the task name: the file name without .py */
  char id[TUNE_ID_MAX];         /* "" until submitted */
  enum tune_state state;
  enum tune_origin origin;
  char replaces[TUNE_ID_MAX];   /* the failed or cancelled task an earlier run made under
                                   the previous key, which this one runs again; "" if none */
  long step, budget_steps;      /* -1 when unknown */
  long budget_seconds;          /* options.budget.seconds; -1 when unknown */
  double best_speedup;          /* over eager; NAN when no correct candidate */
  double best_ms;               /* NAN when none */
  double eager_ms;              /* baselines.eager_ms; NAN when unknown */
  double library_share;         /* of the best; NAN when unknown */
  double created_s, running_s;  /* event times (Unix seconds); NAN until known */
  double finished_s;            /* the finished event's time; NAN until then */
  char stop_reason[64];         /* the finished event's; "" when none */
  char error_code[64];          /* the task's error, or the refusal's; "" when none */
  char error_message[TUNE_TEXT_MAX];
  char error_field[64];         /* a refusal's field; "" when none */
  char last_event_id[CLI_SSE_ID_MAX]; /* where to resume its event stream */
  bool ended;                   /* its event stream ended: the task is final */
  /* --export: what was written under the directory (tune_export.c names the files) */
  bool exported_model, exported_kernel;
  char export_note[TUNE_TEXT_MAX]; /* why a file is missing; "" when none is */
};

/* Resets t for file (borrowed), named after it. */
void tune_task_init(struct tune_task *t, const char *file);

/* The state of an API status ("queued", ...); TUNE_PENDING when unknown. */
enum tune_state tune_state_from_status(const char *status);

/* The API status of a state ("queued", ...; "not_submitted", "refused", "lost"). */
const char *tune_state_name(enum tune_state state);

/* Whether the task has reached an end it never leaves (refused and lost included). */
bool tune_state_is_final(enum tune_state state);

/* Takes a task object's id, status, progress, baselines, options and error (borrowed). */
void tune_task_take(struct tune_task *t, const json_t *task);

/* Takes one event (its JSON, borrowed: {"seq","type","time","data"}): step and budget,
 * the best speed-up, the times that bound the run, the finished summary. */
void tune_task_take_event(struct tune_task *t, const json_t *event);

/* Takes a refusal's error reply (borrowed, may be NULL): state refused, its code,
 * message and field. */
void tune_task_take_refusal(struct tune_task *t, long status, const json_t *reply);

/* Whether the task succeeded with a best speed-up of at least fail_under (any speed-up
 * when fail_under is NAN). */
bool tune_task_passes(const struct tune_task *t, double fail_under);

/* Seconds from created to finished (or to now_s, Unix seconds, while it runs); NAN when
 * unknown. */
double tune_task_wall_s(const struct tune_task *t, double now_s);

#endif
