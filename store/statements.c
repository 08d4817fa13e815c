/* One-shot statement runners: a write with text parameters, a one-text query. */
#include "store/statements.h"

#include "store/connection.h"
#include "store/util.h"

int st_run(struct store *s, const char *sql, const char *a, const char *b, const char *c,
           const char *d, int *ret_changes) {
  struct db_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  const char *texts[4] = {a, b, c, d};
  for (int i = 0; i < 4; i++)
    if (db_bind_parameter_count(st) > i && !st_bind_text(st, i + 1, texts[i])) {
      st_done(st);
      return STORE_ERROR;
    }
  int rc = st_step(st);
  int result = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  if (!db_stmt_readonly(st))
    store_note_write(s, result);
  if (result == STORE_OK && ret_changes)
    *ret_changes = db_changes(db_handle(st));
  st_done(st);
  return result;
}

int st_query_text(struct store *s, const char *sql, const char *a, const char *b,
                  char **ret_text) {
  struct db_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  if ((a && !st_bind_text(st, 1, a)) || (b && !st_bind_text(st, 2, b))) {
    st_done(st);
    return STORE_ERROR;
  }
  int rc = st_step(st), result = STORE_NOT_FOUND;
  if (rc == DB_ROW) {
    const char *text = (const char *)db_column_text(st, 0);
    char *copy = text ? st_strdup(text) : NULL;
    result = text && !copy ? STORE_ERROR : STORE_OK;
    if (result == STORE_OK)
      *ret_text = copy;
  } else if (rc != DB_DONE) {
    result = st_fail(st, rc);
  }
  st_done(st);
  return result;
}
