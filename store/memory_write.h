/* Private to store/memory_{global,local,edges}.c: what the node and edge writes share:
 * the write runner, one-record loads, id picking, and patching a row. */
#ifndef OPFORGE_STORE_MEMORY_WRITE_H
#define OPFORGE_STORE_MEMORY_WRITE_H

#include <jansson.h>
#include <stdbool.h>

#include "store/memory_rows.h"
#include "store/memory_validate.h"
#include "store/status.h"
#include "store/transaction.h"
#include "store/util.h"

/* Everything one write needs; result is the record after the last attempt. All
 * pointers but result are borrowed. */
struct memory_write {
  const json_t *body;
  const char *ns;                 /* the namespace (store_memory_namespace_valid) */
  const char *id, *id2;           /* the record's key (id, or from and to) */
  bool cascade;
  struct memory_invalid *why;
  char now[STORE_TIME_LEN];
  json_t *result;
};

/* Runs fn in a transaction with w->now set. On STORE_OK hands w->result over to *ret
 * (when ret is not NULL); otherwise releases it. */
int memory_run_write(struct store *s, store_tx_fn fn, struct memory_write *w, json_t **ret);

/* Loads one record with a query taking texts ?1..?n (borrowed) into *ret (caller owns);
 * STORE_NOT_FOUND when the query finds none. */
int memory_load_one(struct store *s, const char *sql, const char *const *texts, int n,
                    memory_row_fn fn, json_t **ret);

/* Whether sql, with ?1 = ns and ?2 = id, finds a row (*ret). */
int memory_id_exists(struct store *s, const char *sql, const char *ns, const char *id,
                     bool *ret);

/* Whether a global node of namespace ns has id (*ret). */
int memory_global_exists(struct store *s, const char *ns, const char *id, bool *ret);

/* The id of a new record: the body's, else memory_slug(name) with "_2", "_3", ... until
 * taken says no node of ns has it. STORE_CONFLICT when every such id is taken. */
typedef int (*memory_taken_fn)(struct store *s, const char *ns, const char *id, bool *ret);
int memory_pick_id(struct store *s, const char *ns, const json_t *body, memory_taken_fn taken,
                   char ret_id[MEMORY_ID_MAX + 1]);

/* Fills why for a memory_pick_id that found every id made from the name taken, and
 * returns STORE_CONFLICT. */
int memory_slug_exhausted(struct memory_invalid *why);

/* Runs an UPDATE whose ?1 is w's namespace, ?2 (and ?3 when first is 4) w's key, whose
 * ?first..?first+n-1 are the patch keys of w->body (absent keys bind NULL), and whose
 * last parameter is w->now; STORE_NOT_FOUND when no row changed. At most 8 keys. */
int memory_patch_row(struct store *s, const char *sql, const struct memory_write *w, int first,
                     const char *const *keys, int n);

#endif
