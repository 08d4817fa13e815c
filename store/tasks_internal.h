/* Private to store/tasks*.c: the task row layout and the reads the task files share. */
#ifndef OPFORGE_STORE_TASKS_INTERNAL_H
#define OPFORGE_STORE_TASKS_INTERNAL_H

#include <jansson.h>
#include "store/db.h"
#include <stdbool.h>

#include "store/status.h"

/* Ids are UUIDs (36 chars); the bound keeps links and logs small. */
#define STORE_ID_MAX 64

/* Columns every task query selects first, in this order (indices TC_*). A query may add
 * one column after them (reference, or seq for the list cursor) at index TC_COUNT. */
#define TASK_COLUMNS                                                                     \
  "id, name, status, cancel_requested, options, reference_bytes, progress, baselines,"  \
  " error, created_at, updated_at"

enum task_column {
  TC_ID,
  TC_NAME,
  TC_STATUS,
  TC_CANCEL,
  TC_OPTIONS,
  TC_REFERENCE_BYTES,
  TC_PROGRESS,
  TC_BASELINES,
  TC_ERROR,
  TC_CREATED,
  TC_UPDATED,
  TC_COUNT
};

/* The task on st's current row in API shape; with_reference reads "reference" from
 * column TC_COUNT. Caller owns the result; NULL on failure (logged). */
json_t *store_task_from_row(struct db_stmt *st, bool with_reference);

/* Loads a task in API shape into *ret_task (caller owns); STORE_NOT_FOUND if absent. */
int store_task_load(struct store *s, const char *id, bool with_reference, json_t **ret_task);

/* Reads a task's status into ret_status and its cancel flag; STORE_NOT_FOUND if absent. */
int store_task_state(struct store *s, const char *id, char ret_status[16], bool *ret_cancel);

/* True for the five task statuses. */
bool store_status_valid(const char *status);

#endif
