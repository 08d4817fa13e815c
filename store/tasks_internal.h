/* Private to store/: the task row layout shared by the files that read tasks. */
#ifndef OPFORGE_STORE_TASKS_INTERNAL_H
#define OPFORGE_STORE_TASKS_INTERNAL_H

#include "store/store_internal.h"

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
json_t *store_task_from_row(sqlite3_stmt *st, bool with_reference);

#endif
