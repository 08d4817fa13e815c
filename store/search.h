/* What the optimization loop stores: claims, profiles, tree rows, steps, candidates. */
#ifndef OPFORGE_STORE_SEARCH_H
#define OPFORGE_STORE_SEARCH_H

#include <jansson.h>

#include "store/memory.h"
#include "store/store.h"

/* Claims one task for worker: first a running task nobody holds (it resumes), else the
 * oldest queued one (it becomes running, event "running"). The claim is atomic: two
 * workers never get the same task. STORE_NOT_FOUND when there is nothing to do; on
 * STORE_OK ret_id holds the task id. */
int store_task_claim(struct store *s, const char *worker, char ret_id[40]);

/* Drops every claim (start-up after a crash: running tasks become claimable and resume),
 * or only the claim on one task (shutdown checkpoint) when id is not NULL. */
int store_task_unclaim(struct store *s, const char *id);

/* The stored profile of a task, or *ret_profile = NULL when it has none yet (caller owns). */
int store_task_profile_get(struct store *s, const char *id, json_t **ret_profile);

/* Stores the profile and the baselines (both borrowed) and appends event "profiled"
 * with the baselines, in one transaction. */
int store_task_profile_set(struct store *s, const char *id, json_t *profile,
                           json_t *baselines);

/* The task's tree rows in node order, as an array (caller owns; empty when none). */
int store_tree_rows(struct store *s, const char *task_id, json_t **ret_rows);

/* Everything one loop step records, committed in one transaction (all borrowed). */
struct step_commit {
  const char *task_id;
  int step;                      /* 1-based step number; becomes tasks.step */
  json_t *candidate;             /* {"id","parent_id","source","options","plan","result",
                                    "direction","strategy","step_kind"} */
  json_t *tree_rows;             /* rows to insert or replace (new node + its ancestors) */
  const struct memory_step_update *memory; /* NULL: no memory update */
  json_t *progress;              /* the task's new progress object */
  json_t *event_data;            /* data of the "step" event */
};

/* Commits a step: candidate, tree rows, memory statistics, progress and the "step"
 * event, all or nothing. */
int store_step_commit(struct store *s, const struct step_commit *c);

/* Ends a task: status (succeeded, failed or cancelled) with its error (may be NULL), then
 * event "finished" with summary (borrowed, may be NULL), and drops the claim. */
int store_task_finish(struct store *s, const char *id, const char *status, json_t *error,
                      json_t *summary);

/* A task's candidates in step order, at most limit (1..200) after sequence number
 * after_seq; *ret_items is an array (caller owns). STORE_NOT_FOUND for an unknown task. */
int store_candidates_list(struct store *s, const char *task_id, int limit, int64_t after_seq,
                          json_t **ret_items);

/* One candidate (caller owns *ret_candidate); STORE_NOT_FOUND when unknown. */
int store_candidate_get(struct store *s, const char *id, json_t **ret_candidate);

#endif
