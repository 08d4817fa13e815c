/* Tree rows: read a task's search tree, write the rows a step changed. */
#include "store/tree_rows.h"

#include <stdio.h>
#include <stdlib.h>

#include "store/connection.h"
#include "store/statements.h"
#include "store/util.h"

int store_tree_rows(struct store *s, const char *task_id, json_t **ret_rows) {
  struct db_stmt *st =
      store_stmt(s, "SELECT data FROM tree_nodes WHERE task_id = ?1 ORDER BY node_id");
  json_t *rows = st ? st_json_array() : NULL;
  if (!rows || !st_bind_text(st, 1, task_id)) {
    json_decref(rows);
    if (st)
      st_done(st);
    return STORE_ERROR;
  }
  int rc, result = STORE_OK;
  while ((rc = st_step(st)) == DB_ROW && result == STORE_OK) {
    json_t *row = st_json_loads((const char *)db_column_text(st, 0));
    if (!row || st_json_array_append_new(rows, row) != 0)
      result = STORE_ERROR;
  }
  if (result == STORE_OK && rc != DB_DONE)
    result = st_fail(st, rc);
  st_done(st);
  if (result != STORE_OK) {
    json_decref(rows);
    return result;
  }
  *ret_rows = rows;
  return STORE_OK;
}

int store_tree_rows_write(struct store *s, const char *task_id, json_t *rows) {
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    char node[24];
    snprintf(node, sizeof node, "%lld", (long long)json_integer_value(json_object_get(row, "id")));
    char *text = st_json_dumps(row);
    int result = text ? st_run(s,
                               "INSERT INTO tree_nodes (task_id, node_id, data)"
                               " VALUES (?1, CAST(?2 AS INTEGER), ?3)"
                               " ON CONFLICT (task_id, node_id) DO UPDATE SET data = excluded.data",
                               task_id, node, text, NULL, NULL)
                      : STORE_ERROR;
    free(text);
    if (result != STORE_OK)
      return result;
  }
  return STORE_OK;
}
