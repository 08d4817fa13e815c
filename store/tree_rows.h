/* Tree rows: the search tree of a task, one JSON row per node, kept so a task resumes
 * where it stopped. */
#ifndef OPFORGE_STORE_TREE_ROWS_H
#define OPFORGE_STORE_TREE_ROWS_H

#include <jansson.h>

#include "store/status.h"

/* The task's tree rows in node order, as an array (caller owns; empty when none). */
int store_tree_rows(struct store *s, const char *task_id, json_t **ret_rows);

/* For store/ only (the step commit): inserts or replaces rows (borrowed; an array of
 * objects, each with its node "id"). Must run inside a transaction. */
int store_tree_rows_write(struct store *s, const char *task_id, json_t *rows);

#endif
