/* Copying a whole store into another (`opforge store copy`, README "Moving SQLite data
 * into PostgreSQL"): one host's SQLite data moved into the PostgreSQL database that
 * several servers are to share. */
#ifndef OPFORGE_STORE_COPY_H
#define OPFORGE_STORE_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "store/status.h"

/* Told of each table once its rows are in the destination (table names it, rows counts
 * them; table is static storage). Nothing is committed before store_copy returns: when
 * the destination was busy the attempt is rolled back, the callback gets table NULL, and
 * the copy starts over (each table is told again). */
typedef void (*store_copy_progress)(void *arg, const char *table, int64_t rows);

/* Copies every row of every table of from into to, in one transaction on to (inside a
 * read of from in one transaction, so the rows agree with each other): tasks, events,
 * candidates, tree_nodes, memory_meta, memory_namespaces, global_nodes, local_nodes,
 * local_evidence, edges, skills, skill_examples, idempotency_keys, in that order (every
 * table after those its rows refer to). servers (live processes) and schema_migrations
 * are not copied.
 *
 * Exact: ids, task seq numbers and timestamps are kept, each value keeps its type
 * (integer, real, text, NULL), and rows go in in their insertion order (SQLite's rowid,
 * or the key), so lists come back in the same order; the destination's sequences
 * (tasks.seq, the ids of evidence, skills and skill examples) end past the source's
 * (SQLite's AUTOINCREMENT high-water marks included, so a number the source used once
 * is never handed out again).
 *
 * Refused, with the reason in err and STORE_CONFLICT, before anything is written:
 *  - the schema versions of from and to differ;
 *  - a server renewed its row in to within a lease (STORE_CLAIM_LEASE_S): to is in use;
 *  - to holds a task, event, candidate, tree row, skill, skill example or idempotency
 *    key;
 *  - to's memory is other than the untouched seed: a second namespace, evidence, or a
 *    node or edge that was tried, edited, added or removed since the seed was loaded.
 *    An untouched seed (what `opforge serve` loads into a new store), or no memory at
 *    all (a store nothing but store_open touched), is replaced by from's memory.
 * Any other failure returns its store status with the reason in err; the transaction is
 * rolled back (PostgreSQL sequences may have advanced: numbers are skipped, never
 * reused). from and to stay the caller's; progress may be NULL; *ret_rows (may be NULL)
 * gets the rows copied. */
int store_copy(struct store *from, struct store *to, store_copy_progress progress, void *arg,
               int64_t *ret_rows, char *err, size_t errlen);

#endif
