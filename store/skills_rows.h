/* Private to store/skills*.c: statement runners with typed parameters, row-to-record
 * conversion and the inserts shared by the CRUD functions, import and the step record. */
#ifndef OPFORGE_STORE_SKILLS_ROWS_H
#define OPFORGE_STORE_SKILLS_ROWS_H

#include <jansson.h>
#include "store/db.h"
#include <stdbool.h>

#include "store/memory_validate.h"
#include "store/skill_example.h"
#include "store/status.h"
#include "store/util.h"

/* Columns every rule query selects, in this order; example_count comes last. */
#define SKILL_COLUMNS                                                                      \
  "s.id, s.rule, s.score, s.family, s.enabled, s.constraint_json, s.origin, s.signature,"  \
  " s.refusals, s.created_at, s.updated_at,"                                               \
  " (SELECT COUNT(*) FROM skill_examples e WHERE e.skill_id = s.id)"
#define SKILL_EXAMPLE_COLUMNS "task_id, candidate_id, class, signature, message, created_at"
/* What the group builder sees of an example (struct skill_example's members). */
#define SKILL_GROUP_COLUMNS                                                                \
  "task_id, candidate_id, family, class, signature, message, moved, knobs, features,"     \
  " created_at"

/* One bound parameter: text (NULL binds NULL) or a 64-bit integer. */
struct sk_arg {
  char type; /* 't' or 'i' */
  const char *text;
  long long i;
};
#define SK_T(s) ((struct sk_arg){'t', (s), 0})
#define SK_I(v) ((struct sk_arg){'i', NULL, (v)})

/* Flags of the row converters. */
enum {
  SKILL_ROW_API = 0,    /* with example_count */
  SKILL_ROW_EXPORT = 1, /* without it */
};

/* A record from st's current row; caller owns it, NULL on failure (logged). */
typedef json_t *(*sk_row_fn)(struct db_stmt *st, int flags);
json_t *sk_skill_from_row(struct db_stmt *st, int flags);
json_t *sk_example_from_row(struct db_stmt *st, int flags);
json_t *sk_group_example_from_row(struct db_stmt *st, int flags);

/* Runs sql with args bound to ?1..?n and appends fn(row, flags) of every row to a new
 * array, *ret_items (caller owns). */
int sk_collect(struct store *s, const char *sql, const struct sk_arg *args, int n,
               sk_row_fn fn, int flags, json_t **ret_items);

/* Runs sql (no result rows); *ret_changes (may be NULL) gets the rows changed. A unique
 * or primary key clash is STORE_CONFLICT. */
int sk_exec(struct store *s, const char *sql, const struct sk_arg *args, int n,
            int *ret_changes);

/* The first column of the first row as an integer: *ret_found says whether a row came. */
int sk_int(struct store *s, const char *sql, const struct sk_arg *args, int n,
           long long *ret_value, bool *ret_found);

/* Loads one rule (API shape, without examples) into *ret; STORE_NOT_FOUND when none. */
int sk_load(struct store *s, long long id, json_t **ret);

/* Inserts a rule from a checked body (borrowed) and returns its id. origin and signature
 * override the body's when not NULL; in MEMORY_IMPORT the body's id, refusals and
 * timestamps are kept. STORE_CONFLICT on a clash of id or (signature, family). Inside a
 * transaction. */
int sk_insert_skill(struct store *s, const json_t *body, enum memory_mode mode,
                    const char *origin, const char *signature, const char *now,
                    long long *ret_id);

/* Inserts an example for skill_id (0: none; then in_group says whether it waits in its
 * group). created_at NULL is now. STORE_CONFLICT when its candidate_id was examined. */
int sk_insert_example(struct store *s, long long skill_id, bool in_group,
                      const struct skill_example *ex, const char *created_at,
                      const char *now);

/* Keeps the newest SKILL_EXAMPLES_KEEP examples of a rule. */
int sk_trim_examples(struct store *s, long long skill_id);

#endif
