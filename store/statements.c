/* One-shot statement runners: a write with text parameters, a one-text query. */
#include "store/statements.h"

#include "store/connection.h"
#include "store/util.h"

int st_run(struct store *s, const char *sql, const char *a, const char *b, const char *c,
           const char *d, int *ret_changes) {
  sqlite3_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  const char *texts[4] = {a, b, c, d};
  for (int i = 0; i < 4; i++)
    if (sqlite3_bind_parameter_count(st) > i && !st_bind_text(st, i + 1, texts[i])) {
      st_done(st);
      return STORE_ERROR;
    }
  int rc = st_step(st);
  int result = rc == SQLITE_DONE ? STORE_OK : st_fail(st, rc);
  if (!sqlite3_stmt_readonly(st))
    store_note_write(s, result);
  if (result == STORE_OK && ret_changes)
    *ret_changes = sqlite3_changes(sqlite3_db_handle(st));
  st_done(st);
  return result;
}

int st_query_text(struct store *s, const char *sql, const char *a, const char *b,
                  char **ret_text) {
  sqlite3_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  if ((a && !st_bind_text(st, 1, a)) || (b && !st_bind_text(st, 2, b))) {
    st_done(st);
    return STORE_ERROR;
  }
  int rc = st_step(st), result = STORE_NOT_FOUND;
  if (rc == SQLITE_ROW) {
    const char *text = (const char *)sqlite3_column_text(st, 0);
    char *copy = text ? st_strdup(text) : NULL;
    result = text && !copy ? STORE_ERROR : STORE_OK;
    if (result == STORE_OK)
      *ret_text = copy;
  } else if (rc != SQLITE_DONE) {
    result = st_fail(st, rc);
  }
  st_done(st);
  return result;
}
