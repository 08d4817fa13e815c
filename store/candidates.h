/* Candidates: the kernels a task's steps produced, each with its result. */
#ifndef OPFORGE_STORE_CANDIDATES_H
#define OPFORGE_STORE_CANDIDATES_H

#include <jansson.h>
#include <stdint.h>

#include "store/status.h"

/* A task's candidates in step order, at most limit (1..200) after sequence number
 * after_seq; *ret_items is an array (caller owns). STORE_NOT_FOUND for an unknown task. */
int store_candidates_list(struct store *s, const char *task_id, int limit, int64_t after_seq,
                          json_t **ret_items);

/* One candidate (caller owns *ret_candidate); STORE_NOT_FOUND when unknown. */
int store_candidate_get(struct store *s, const char *id, json_t **ret_candidate);

/* For store/ only (the step commit): inserts candidate (borrowed; {"id","parent_id",
 * "source","options","plan","result","direction","strategy","step_kind"}) as step of
 * task_id with the task's next sequence number. Must run inside a transaction. */
int store_candidate_insert(struct store *s, const char *task_id, int step, json_t *candidate);

#endif
