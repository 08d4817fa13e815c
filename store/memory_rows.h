/* Private to store/memory*.c: row layouts, row-to-record conversion, inserts shared by
 * the CRUD functions and import, and the statement helpers they use. */
#ifndef OPFORGE_STORE_MEMORY_ROWS_H
#define OPFORGE_STORE_MEMORY_ROWS_H

#include <jansson.h>
#include "store/db.h"
#include <stdbool.h>

#include "store/memory_validate.h"
#include "store/status.h"

/* Columns every global query selects, in this order; local_count comes last. */
#define MEMORY_GLOBAL_COLUMNS                                                              \
  "g.id, g.name, g.intent, g.objectives, g.triggers, g.risks, g.prior, g.n, g.successes," \
  " g.improvements, g.reward_sum, g.ema, g.created_at, g.updated_at,"                     \
  " (SELECT COUNT(*) FROM local_nodes l WHERE l.namespace = g.namespace"           \
  " AND l.global_id = g.id)"
#define MEMORY_LOCAL_COLUMNS                                                                \
  "id, global_id, name, edit_pattern, knob_move, checks, families, n, successes,"         \
  " reward_sum, created_at, updated_at"
#define MEMORY_EDGE_COLUMNS \
  "from_id, to_id, when_text, rationale, risks, n, reward_sum, created_at, updated_at"
#define MEMORY_EVIDENCE_COLUMNS "task_id, candidate_id, reward, outcome, note, created_at"

/* ns, or MEMORY_DEFAULT_NAMESPACE when ns is NULL. */
const char *memory_ns(const char *ns);

/* Flags of the row converters. */
enum {
  MEMORY_ROW_API = 0,    /* the API shape, with the derived members */
  MEMORY_ROW_EXPORT = 1, /* the export shape: no mean, no local_count */
};

/* A record from st's current row (layouts above); caller owns it, NULL on failure
 * (logged). */
typedef json_t *(*memory_row_fn)(struct db_stmt *st, int flags);
json_t *memory_global_from_row(struct db_stmt *st, int flags);
json_t *memory_local_from_row(struct db_stmt *st, int flags);
json_t *memory_edge_from_row(struct db_stmt *st, int flags);
json_t *memory_evidence_from_row(struct db_stmt *st, int flags);

/* Memory statements take the namespace as ?1 and the record's key after it.
 *
 * Runs sql with its ?1..?n bound to texts[0..n-1] (borrowed; NULL binds NULL) and
 * appends fn(row, flags) of every row to a new array, *ret_items (caller owns). */
int memory_collect(struct store *s, const char *sql, const char *const *texts, int n,
                   memory_row_fn fn, int flags, json_t **ret_items);

/* Runs sql (a statement returning no rows) with ?1..?n bound to texts; *ret_changes
 * (may be NULL) gets the number of rows it changed. */
int memory_exec(struct store *s, const char *sql, const char *const *texts, int n,
                int *ret_changes);

/* Whether a row exists for sql with ?1..?n bound to texts (*ret_exists). */
int memory_exists(struct store *s, const char *sql, const char *const *texts, int n,
                  bool *ret_exists);

/* Inserts one record into namespace ns (a body that passed memory_check_* of mode). In
 * MEMORY_IMPORT its stats and timestamps are taken from the body when present;
 * otherwise stats are zero and both timestamps are now. global_id overrides the body's
 * "global" when not NULL. A primary key clash gives STORE_CONFLICT. Must run inside a
 * transaction. */
int memory_insert_global(struct store *s, const char *ns, const json_t *g, const char *id,
                         enum memory_mode mode, const char *now);
int memory_insert_local(struct store *s, const char *ns, const json_t *l, const char *id,
                        const char *global_id, enum memory_mode mode, const char *now);
int memory_insert_edge(struct store *s, const char *ns, const json_t *e, enum memory_mode mode,
                       const char *now);
/* Inserts one evidence row of an export document (borrowed); created_at defaults to
 * now. */
int memory_insert_evidence(struct store *s, const char *ns, const char *local_id,
                           const json_t *ev, const char *now);

/* One evidence row from its values (borrowed; task_id, candidate_id, note may be NULL). */
struct memory_evidence_row {
  const char *ns, *local_id, *task_id, *candidate_id, *outcome, *note, *created_at;
  double reward;
};
int memory_insert_evidence_row(struct store *s, const struct memory_evidence_row *row);

/* Deletes every memory row of namespace ns (evidence, edges, locals, globals). Inside a
 * transaction. */
int memory_delete_all(struct store *s, const char *ns);

/* STORE_OK when namespace ns exists, STORE_NOT_FOUND when not (store/memory_namespaces.c). */
int memory_namespace_check(struct store *s, const char *ns);

/* Inserts every record of a checked document into namespace ns (which must be empty of
 * its ids). Inside a transaction. */
int memory_insert_document(struct store *s, const char *ns, const json_t *doc,
                           const char *now);

/* Parses and checks the embedded seed (schema/seed_memory.json); caller owns *ret_doc.
 * A seed that fails its checks is a build defect: logged, STORE_ERROR. */
int memory_load_seed(json_t **ret_doc);

/* Sets memory_meta 'seeded' to now. Inside a transaction. */
int memory_mark_seeded(struct store *s, const char *now);

#endif
