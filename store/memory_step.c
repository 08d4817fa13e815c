/* The memory update of one optimization step (docs/architecture.md, "HTAM"): node, local strategy
 * with its evidence row, and the weighted transition edges of the prefix. */
#include "store/memory.h"

#include <math.h>
#include <string.h>

#include "store/connection.h"
#include "store/memory_rows.h"
#include "store/transaction.h"
#include "store/util.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* Every SET expression reads the row as it was before the update, so the EMA's CASE sees
 * the old ema (NULL before the first try). */
static const char SQL_GLOBAL_STEP[] =
    "UPDATE global_nodes SET n = n + 1, reward_sum = reward_sum + ?2,"
    " successes = successes + ?3, improvements = improvements + ?4,"
    " ema = CASE WHEN ema IS NULL THEN ?2 ELSE (1.0 - ?5) * ema + ?5 * ?2 END,"
    " updated_at = ?6 WHERE namespace = ?7 AND id = ?1";
static const char SQL_LOCAL_STEP[] =
    "UPDATE local_nodes SET n = n + 1, reward_sum = reward_sum + ?2,"
    " successes = successes + ?3, updated_at = ?4 WHERE namespace = ?5 AND id = ?1";
static const char SQL_TRIM_EVIDENCE[] =
    "DELETE FROM local_evidence WHERE namespace = ?1 AND local_id = ?2 AND id <= (SELECT id"
    " FROM local_evidence WHERE namespace = ?1 AND local_id = ?2 ORDER BY id DESC LIMIT 1"
    " OFFSET " STR(MEMORY_EVIDENCE_KEEP) ")";
static const char SQL_GLOBAL_EXISTS[] =
    "SELECT 1 FROM global_nodes WHERE namespace = ?1 AND id = ?2";
static const char SQL_EDGE_STEP[] =
    "INSERT INTO edges (from_id, to_id, n, reward_sum, created_at, updated_at, namespace)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6) ON CONFLICT (namespace, from_id, to_id) DO UPDATE SET"
    " n = edges.n + excluded.n, reward_sum = edges.reward_sum + excluded.reward_sum,"
    " updated_at = excluded.updated_at";

struct step {
  const struct memory_step_update *u;
  char now[STORE_TIME_LEN];
};

/* Runs a prepared update; *ret_changes gets the rows it changed. */
static int run(struct db_stmt *st, bool bound, int *ret_changes) {
  int status = STORE_ERROR;
  if (bound) {
    int rc = st_step(st);
    status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  }
  if (status == STORE_OK)
    *ret_changes = db_changes(db_handle(st));
  st_done(st);
  return status;
}

static int update_global(struct store *s, const struct step *p) {
  const struct memory_step_update *u = p->u;
  struct db_stmt *st = store_stmt(s, SQL_GLOBAL_STEP);
  if (!st)
    return STORE_ERROR;
  bool bound = st_bind_text(st, 1, u->global_id) &&
               db_bind_double(st, 2, u->reward) == DB_OK &&
               db_bind_int(st, 3, u->correct ? 1 : 0) == DB_OK &&
               db_bind_int(st, 4, u->improved ? 1 : 0) == DB_OK &&
               db_bind_double(st, 5, u->ema_alpha) == DB_OK &&
               st_bind_text(st, 6, p->now) && st_bind_text(st, 7, memory_ns(u->ns));
  int changed = 0;
  int status = run(st, bound, &changed);
  return status == STORE_OK && changed == 0 ? STORE_NOT_FOUND : status;
}

/* A local node deleted while the task ran is skipped, with its evidence row. */
static int update_local(struct store *s, const struct step *p) {
  const struct memory_step_update *u = p->u;
  struct db_stmt *st = store_stmt(s, SQL_LOCAL_STEP);
  if (!st)
    return STORE_ERROR;
  bool bound = st_bind_text(st, 1, u->local_id) &&
               db_bind_double(st, 2, u->reward) == DB_OK &&
               db_bind_int(st, 3, u->correct ? 1 : 0) == DB_OK &&
               st_bind_text(st, 4, p->now) && st_bind_text(st, 5, memory_ns(u->ns));
  int changed = 0;
  int status = run(st, bound, &changed);
  if (status != STORE_OK || changed == 0)
    return status;
  struct memory_evidence_row row = {.ns = memory_ns(u->ns), .local_id = u->local_id,
                                    .task_id = u->task_id,
                                    .candidate_id = u->candidate_id, .outcome = u->outcome,
                                    .note = u->note, .created_at = p->now, .reward = u->reward};
  status = memory_insert_evidence_row(s, &row);
  const char *const texts[] = {memory_ns(u->ns), u->local_id};
  return status == STORE_OK ? memory_exec(s, SQL_TRIM_EVIDENCE, texts, 2, NULL) : status;
}

/* Edge prefix[i] -> global: created when missing; a prefix id naming no node is skipped. */
static int update_edge(struct store *s, const struct step *p, int i) {
  const struct memory_step_update *u = p->u;
  const char *const texts[] = {memory_ns(u->ns), u->prefix[i]};
  bool found = false;
  int status = memory_exists(s, SQL_GLOBAL_EXISTS, texts, 2, &found);
  if (status != STORE_OK || !found)
    return status;
  struct db_stmt *st = store_stmt(s, SQL_EDGE_STEP);
  if (!st)
    return STORE_ERROR;
  bool bound = st_bind_text(st, 1, u->prefix[i]) && st_bind_text(st, 2, u->global_id) &&
               db_bind_double(st, 3, u->alpha[i]) == DB_OK &&
               db_bind_double(st, 4, u->alpha[i] * u->reward) == DB_OK &&
               st_bind_text(st, 5, p->now) && st_bind_text(st, 6, memory_ns(u->ns));
  int changed = 0;
  return run(st, bound, &changed);
}

static int step_tx(struct store *s, void *arg) {
  const struct step *p = arg;
  int status = update_global(s, p);
  if (status == STORE_OK && p->u->local_id)
    status = update_local(s, p);
  for (int i = 0; status == STORE_OK && i < p->u->n_prefix; i++)
    status = update_edge(s, p, i);
  return status;
}

/* The arguments a caller controls, checked before anything is written. */
static bool step_valid(const struct memory_step_update *u) {
  if (!u->global_id || !u->outcome || !isfinite(u->reward) || !(u->ema_alpha > 0) ||
      !(u->ema_alpha <= 1) || u->n_prefix < 0 || u->n_prefix > MEMORY_STEP_MAX_PREFIX)
    return false;
  size_t outcome = strlen(u->outcome);
  if (outcome == 0 || outcome > MEMORY_OUTCOME_MAX ||
      (u->note && strlen(u->note) > MEMORY_NOTE_MAX) ||
      (u->task_id && strlen(u->task_id) > MEMORY_REF_MAX) ||
      (u->candidate_id && strlen(u->candidate_id) > MEMORY_REF_MAX))
    return false;
  for (int i = 0; i < u->n_prefix; i++)
    if (!u->prefix[i] || !isfinite(u->alpha[i]) || u->alpha[i] < 0 ||
        !isfinite(u->alpha[i] * u->reward))
      return false;
  return true;
}

int store_memory_record_step(struct store *s, const struct memory_step_update *u) {
  if (!s || !u || !step_valid(u)) {
    store_log("record_step: invalid arguments");
    return STORE_INVALID;
  }
  struct step p = {.u = u};
  if (!store_time_now(p.now))
    return STORE_ERROR;
  return store_transaction(s, step_tx, &p);
}
