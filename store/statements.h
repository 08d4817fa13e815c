/* Private to store/: one-shot runners over this thread's cached statements, for the
 * simple statements of the task-side records (claims, profile, candidates, tree rows,
 * steps). */
#ifndef OPFORGE_STORE_STATEMENTS_H
#define OPFORGE_STORE_STATEMENTS_H

#include "store/status.h"

/* Runs sql, a statement with up to four text parameters (NULL binds SQL NULL; only the
 * first sqlite3_bind_parameter_count of a..d are bound) and no result rows. *ret_changes
 * (may be NULL) gets the number of rows changed. The texts are borrowed. */
int st_run(struct store *s, const char *sql, const char *a, const char *b, const char *c,
           const char *d, int *ret_changes);

/* Reads the first text column of the first row of sql with ?1 = a and ?2 = b (each bound
 * only when not NULL). *ret_text is a malloc'd copy the caller frees, or NULL for SQL
 * NULL; STORE_NOT_FOUND when there is no row (*ret_text untouched). */
int st_query_text(struct store *s, const char *sql, const char *a, const char *b,
                  char **ret_text);

#endif
