/* The proposer interface: what the engine's loop knows of anything that writes candidate
 * kernels. The builtin template proposer, the fixture-replaying test proposer and the
 * LLM proposer implement it; the loop reaches them only through these operations. */
#ifndef OPFORGE_PROPOSER_H
#define OPFORGE_PROPOSER_H

#include <jansson.h>
#include <stddef.h>

#include "base/outcome.h"

/* What the loop asks for in one step; everything is borrowed for the call. */
struct proposal_request {
  const char *task_id;
  const char *task_name;
  json_t *task_options;       /* the task's normalized options */
  json_t *profile;            /* the evaluator's profile of the task (or of the region) */
  int step;                   /* 1-based */
  const char *direction;      /* HTAM global node id, or NULL */
  json_t *direction_node;     /* its memory node, or NULL */
  const char *strategy;       /* local node id, or NULL for the proposer's own start */
  json_t *strategy_node;      /* its memory node (edit pattern, knob move), or NULL */
  json_t *parent;             /* the candidate being patched or regenerated from (source,
                                 options, plan, result), or NULL for the reference */
  json_t *context;            /* array of candidates: the representative pool (large
                                 step) or the recent work on the path (small step) */
};

/* One proposer. Every operation gets self back. The propose operations fill
 * *ret_candidate ({"source","options","plan"}, caller owns) and return 0, or return -1
 * with *ret_failure ({"stage":"parse","class","message"}, caller owns). */
struct proposer {
  const char *name;
  void *self;
  /* Whether this proposer can write candidates for the profile (a task's or a region's,
   * borrowed). Returns 0 and sets *ret_family (static string: the op family HTAM learns
   * under), or -1 with the reason in why. */
  int (*supports)(void *self, json_t *profile, const char **ret_family, char *why,
                  size_t whylen);
  /* A large step: a new candidate written from the request's direction and strategy,
   * informed by the representative pool. */
  int (*propose_large)(void *self, const struct proposal_request *req, json_t **ret_candidate,
                       json_t **ret_failure);
  /* A small step: a patch of req->parent under its strategy. */
  int (*propose_small)(void *self, const struct proposal_request *req, json_t **ret_candidate,
                       json_t **ret_failure);
  /* Learns from the evaluated outcome of a candidate it proposed for req (candidate and
   * result borrowed). May be NULL. */
  void (*learn)(void *self, const struct proposal_request *req, json_t *candidate,
                const struct eval_outcome *outcome);
  void (*free)(void *self);
};

/* What a proposer may need to start (strings borrowed for the call). */
struct proposer_config {
  const char *fixtures_dir;   /* the test proposer's candidates; may be NULL */
};

/* Opens the proposer called name (proposers/registry.c) into *ret. Returns 0, or -1 with
 * the reason in why (unknown name, or not available in this configuration). */
int proposer_open(const char *name, const struct proposer_config *cfg, struct proposer *ret,
                  char *why, size_t whylen);

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
