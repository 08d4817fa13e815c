/* Task listing: newest first, keyset pages behind a cursor ("c" and a hex seq). */
#include "store/tasks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/connection.h"
#include "store/tasks_internal.h"
#include "store/util.h"

#define LIST_LIMIT_MAX 500
/* "c" + at most 16 hex digits. */
#define CURSOR_MAX 17

static const char SQL_LIST[] = "SELECT " TASK_COLUMNS ", seq FROM tasks WHERE seq < ?1"
                               " ORDER BY seq DESC LIMIT ?2";
static const char SQL_LIST_STATUS[] = "SELECT " TASK_COLUMNS ", seq FROM tasks"
                                      " WHERE status = ?3 AND seq < ?1"
                                      " ORDER BY seq DESC LIMIT ?2";

static const char HEX[] = "0123456789abcdef";

/* The cursor for "rows older than seq": "c" and seq in lowercase hex; caller frees it. */
static char *cursor_encode(int64_t seq) {
  char buf[CURSOR_MAX + 1];
  int n = snprintf(buf, sizeof buf, "c%llx", (unsigned long long)seq);
  if (n < 2 || n >= (int)sizeof buf)
    return NULL;
  return st_strdup(buf);
}

/* Accepts every cursor of the form cursor_encode writes (the spec's pattern
 * ^c([1-9a-f][0-9a-f]{0,14}|[1-7][0-9a-f]{15})$): a well-formed cursor the server never
 * handed out just means "tasks older than that", which is a fine page. */
static bool cursor_decode(const char *cursor, int64_t *ret_seq) {
  size_t len = strnlen(cursor, CURSOR_MAX + 1);
  if (len < 2 || len > CURSOR_MAX || cursor[0] != 'c' || cursor[1] == '0')
    return false;
  uint64_t v = 0;
  for (size_t i = 1; i < len; i++) {
    const char *d = memchr(HEX, cursor[i], 16);
    if (!d || cursor[i] == '\0' || v > (uint64_t)INT64_MAX >> 4)
      return false;
    v = v << 4 | (uint64_t)(d - HEX);
  }
  if (v > (uint64_t)INT64_MAX)
    return false;
  *ret_seq = (int64_t)v;
  return true;
}

/* Reads up to limit tasks from st into items; *ret_more says a further row exists and
 * *ret_last_seq is the seq of the last one taken. */
static int collect(struct db_stmt *st, int limit, json_t *items, bool *ret_more,
                   int64_t *ret_last_seq) {
  int taken = 0;
  int rc;
  while ((rc = st_step(st)) == DB_ROW) {
    if (taken == limit) {
      *ret_more = true;
      return STORE_OK;
    }
    json_t *task = store_task_from_row(st, false);
    if (!task || st_json_array_append_new(items, task) != 0)
      return STORE_ERROR;
    *ret_last_seq = db_column_int64(st, TC_COUNT);
    taken++;
  }
  *ret_more = false;
  return rc == DB_DONE ? STORE_OK : st_fail(st, rc);
}

int store_task_list(struct store *s, const char *status, int limit, const char *cursor,
                    json_t **ret_items, char **ret_next_cursor) {
  int64_t before = INT64_MAX;
  if (!s || !ret_items || !ret_next_cursor || limit < 1 || limit > LIST_LIMIT_MAX ||
      (status && !store_status_valid(status)) || (cursor && !cursor_decode(cursor, &before)))
    return STORE_INVALID;
  struct db_stmt *st = store_stmt(s, status ? SQL_LIST_STATUS : SQL_LIST);
  if (!st)
    return STORE_ERROR;
  json_t *items = NULL;
  int result = STORE_ERROR;
  if (db_bind_int64(st, 1, before) == DB_OK &&
      db_bind_int(st, 2, limit + 1) == DB_OK && (!status || st_bind_text(st, 3, status)))
    items = st_json_array();
  bool more = false;
  int64_t last = 0;
  if (items)
    result = collect(st, limit, items, &more, &last);
  st_done(st);
  char *next = NULL;
  if (result == STORE_OK && more && !(next = cursor_encode(last)))
    result = STORE_ERROR;
  if (result != STORE_OK) {
    json_decref(items);
    return result;
  }
  *ret_items = items;
  *ret_next_cursor = next;
  return STORE_OK;
}
