/* The proposer interface: turns the policy's choice into a candidate kernel. */
#ifndef OPFORGE_PROPOSER_H
#define OPFORGE_PROPOSER_H

#include <jansson.h>

/* What the loop asks for in one step; everything is borrowed for the call. */
struct proposal_request {
  const char *task_id;
  const char *task_name;
  json_t *task_options;       /* the task's normalized options */
  json_t *profile;            /* the evaluator's profile */
  int step;                   /* 1-based */
  const char *step_kind;      /* "small" or "large" */
  const char *direction;      /* global node id, or NULL */
  json_t *direction_node;     /* its memory node, or NULL */
  const char *strategy;       /* local node id, or NULL */
  json_t *strategy_node;      /* its memory node (edit pattern, knob move), or NULL */
  json_t *parent;             /* the candidate being patched (source, options, plan,
                                 result), or NULL when expanding the reference */
  json_t *context;            /* array of candidates: the representative pool (large
                                 step) or the recent work (small step) */
};

/* A proposer. propose fills *ret_candidate ({"source","options","plan"}, caller owns)
 * and returns 0, or returns -1 with *ret_failure ({"stage":"parse","class","message"},
 * caller owns) when it cannot propose. */
struct proposer {
  const char *name;
  void *self;
  int (*propose)(void *self, const struct proposal_request *req, json_t **ret_candidate,
                 json_t **ret_failure);
  void (*free)(void *self);
};

/* The test proposer: replays fixture candidates, the JSON files of FIXTURES/<task name>/
 * in name order, file (step-1) mod count at step `step`. fixtures_dir is copied.
 * Returns 0 and fills *ret, or -1 when out of memory. */
int proposer_test_new(const char *fixtures_dir, struct proposer *ret);

/* The builtin proposer (proposers/builtin/proposer.c): templates and knobs, no network.
 * Returns 0 and fills *ret. */
int proposer_builtin_new(struct proposer *ret);

/* Frees what a proposer owns (calls its free). Accepts a zeroed struct. */
void proposer_clear(struct proposer *p);

#endif
