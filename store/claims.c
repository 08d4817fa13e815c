/* A worker's hold on a task: claim (resume or start), unclaim, finish, and the claim's
 * owner and lease (renewal, start-up release of stale claims). */
#include "store/tasks.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/connection.h"
#include "store/events.h"
#include "store/statements.h"
#include "store/transaction.h"
#include "store/util.h"

int store_claims_configure(struct store *s, const char *instance, unsigned lease_s) {
  if (!s || lease_s > 86400 || (instance && (!*instance || strlen(instance) >= sizeof s->instance)))
    return STORE_INVALID;
  if (instance)
    snprintf(s->instance, sizeof s->instance, "%s", instance);
  s->lease_s = lease_s;
  return STORE_OK;
}

const char *store_claims_instance(const struct store *s) {
  return s->instance;
}

unsigned store_claims_lease(const struct store *s) {
  return s->lease_s;
}

struct claim {
  const char *worker;
  char id[40];
};

/* The tasks a claim may take: a running task nobody holds, or whose holder let its lease
 * run out (?1, now), resumes first; then the oldest queued one. Either only when it names
 * no device class or one this server advertises (?2, ",H200,"). PostgreSQL adds FOR
 * UPDATE SKIP LOCKED (the one difference): a row another server is claiming is passed
 * over instead of waited for, so servers claiming at once take different tasks. */
#define CLAIM_DEVICE " AND (device IS NULL OR instr(?2, ',' || device || ',') > 0)"
#define SQL_RESUMABLE                                                                        \
  "SELECT id FROM tasks WHERE status = 'running' AND (claimed_by IS NULL"                  \
  " OR claim_expires_ms < CAST(?1 AS BIGINT))" CLAIM_DEVICE " ORDER BY seq LIMIT 1"
#define SQL_QUEUED "SELECT id FROM tasks WHERE status = 'queued'" CLAIM_DEVICE " ORDER BY seq LIMIT 1"
#define SKIP_LOCKED " FOR UPDATE SKIP LOCKED"

static const char *const SQL_CLAIMABLE[2][2] = {
    [DB_BACKEND_SQLITE] = {SQL_RESUMABLE, SQL_QUEUED},
    [DB_BACKEND_POSTGRESQL] = {SQL_RESUMABLE SKIP_LOCKED, SQL_QUEUED SKIP_LOCKED},
};

static int claim_tx(struct store *s, void *arg) {
  struct claim *c = arg;
  char now[24], expires[24], devices[STORE_DEVICES_TEXT_MAX];
  store_epoch_ms_text(now, 0);
  store_epoch_ms_text(expires, s->lease_s);
  pthread_mutex_lock(&s->server.lock);
  memcpy(devices, s->server.devices, sizeof devices);
  pthread_mutex_unlock(&s->server.lock);
  char *id = NULL;
  const char *const *sql = SQL_CLAIMABLE[s->backend];
  int result = st_query_text(s, sql[0], now, devices, &id);
  bool resume = result == STORE_OK;
  if (result == STORE_NOT_FOUND)
    result = st_query_text(s, sql[1], now, devices, &id);
  if (result != STORE_OK || !id)
    return result == STORE_OK ? STORE_ERROR : result;
  snprintf(c->id, sizeof c->id, "%s", id);
  free(id);
  if (!resume)
    result = store_task_set_status(s, c->id, "running", NULL);
  if (result == STORE_OK)
    result = st_run(s,
                    "UPDATE tasks SET claimed_by = ?2, claim_instance = ?3,"
                    " claim_expires_ms = CAST(?4 AS BIGINT) WHERE id = ?1",
                    c->id, c->worker, s->instance, expires, NULL);
  return result;
}

int store_task_claim(struct store *s, const char *worker, char ret_id[40]) {
  struct claim c = {.worker = worker};
  int result = store_transaction_rc(s, claim_tx, &c);
  if (result == STORE_OK && !claims_held_add(&s->held, c.id)) {
    store_task_unclaim(s, c.id);
    result = STORE_ERROR;
  }
  if (result == STORE_OK)
    memcpy(ret_id, c.id, sizeof c.id);
  return result;
}

int store_task_unclaim(struct store *s, const char *id) {
  int rc;
  if (id)
    rc = st_run(s,
                "UPDATE tasks SET claimed_by = NULL, claim_instance = NULL,"
                " claim_expires_ms = NULL WHERE id = ?1"
                " AND (claim_instance IS NULL OR claim_instance = ?2)",
                id, s->instance, NULL, NULL, NULL);
  else
    rc = st_run(s,
                "UPDATE tasks SET claimed_by = NULL, claim_instance = NULL,"
                " claim_expires_ms = NULL WHERE claim_instance = ?1",
                s->instance, NULL, NULL, NULL, NULL);
  if (rc == STORE_OK && id)
    claims_held_remove(&s->held, id);
  return rc;
}

void store_claims_forget(struct store *s, const char *id) {
  claims_held_remove(&s->held, id);
}

int store_claims_renew(struct store *s, int *ret_renewed) {
  char expires[24];
  store_epoch_ms_text(expires, s->lease_s);
  char(*ids)[CLAIM_ID_LEN] = NULL;
  size_t n = 0;
  if (!claims_held_copy(&s->held, &ids, &n))
    return STORE_ERROR;
  int total = 0, rc = STORE_OK;
  for (size_t i = 0; i < n && rc == STORE_OK; i++) {
    int changed = 0;
    rc = st_run(s,
                "UPDATE tasks SET claim_expires_ms = CAST(?2 AS BIGINT)"
                " WHERE claim_instance = ?1 AND claimed_by IS NOT NULL AND id = ?3",
                s->instance, expires, ids[i], NULL, &changed);
    total += changed;
  }
  free(ids);
  if (ret_renewed && rc == STORE_OK)
    *ret_renewed = total;
  return rc;
}

/* A claim without an instance comes from a server older than migration 5. A shared
 * store (PostgreSQL) has other servers on this host too, live ones among them: there the
 * leases decide, except for the servers that held this data directory before (on this
 * host), which are gone since its lock is ours. */
int store_claims_release_stale(struct store *s, int *ret_released) {
  char host[STORE_INSTANCE_MAX], now[24];
  const char *colon = strchr(s->instance, ':');
  size_t host_len = colon ? (size_t)(colon - s->instance) + 1 : strlen(s->instance);
  snprintf(host, sizeof host, "%.*s", (int)host_len, s->instance);
  store_epoch_ms_text(now, 0);
  if (s->backend != DB_BACKEND_SQLITE) {
    char data_dir[sizeof s->server.data_dir];
    pthread_mutex_lock(&s->server.lock);
    memcpy(data_dir, s->server.data_dir, sizeof data_dir);
    pthread_mutex_unlock(&s->server.lock);
    host[host_len > 0 ? host_len - 1 : 0] = '\0'; /* without the colon */
    return st_run(s,
                  "UPDATE tasks SET claimed_by = NULL, claim_instance = NULL,"
                  " claim_expires_ms = NULL WHERE claimed_by IS NOT NULL AND"
                  " (claim_instance IS NULL OR claim_expires_ms IS NULL"
                  " OR claim_expires_ms < CAST(?1 AS BIGINT) OR claim_instance IN"
                  " (SELECT instance FROM servers WHERE host = ?2 AND data_dir = ?3"
                  " AND data_dir <> '' AND instance <> ?4))",
                  now, host, data_dir, s->instance, ret_released);
  }
  return st_run(s,
                "UPDATE tasks SET claimed_by = NULL, claim_instance = NULL,"
                " claim_expires_ms = NULL WHERE claimed_by IS NOT NULL AND"
                " (claim_instance IS NULL OR substr(claim_instance, 1, length(?1)) = ?1"
                " OR claim_expires_ms IS NULL OR claim_expires_ms < CAST(?2 AS BIGINT))",
                host, now, NULL, NULL, ret_released);
}

struct finish {
  const char *id, *status;
  json_t *error;
  char *summary_text;
};

static int finish_tx(struct store *s, void *arg) {
  struct finish *f = arg;
  int result = store_task_set_status(s, f->id, f->status, f->error);
  if (result == STORE_OK)
    result = store_event_append_tx(s, f->id, "finished", f->summary_text, NULL);
  if (result == STORE_OK)
    result = st_run(s,
                    "UPDATE tasks SET claimed_by = NULL, claim_instance = NULL,"
                    " claim_expires_ms = NULL WHERE id = ?1"
                    " AND (claim_instance IS NULL OR claim_instance = ?2)",
                    f->id, s->instance, NULL, NULL, NULL);
  return result;
}

int store_task_finish(struct store *s, const char *id, const char *status, json_t *error,
                      json_t *summary) {
  struct finish f = {.id = id, .status = status, .error = error,
                     .summary_text = summary ? st_json_dumps(summary) : NULL};
  int result = summary && !f.summary_text ? STORE_ERROR : store_transaction_rc(s, finish_tx, &f);
  free(f.summary_text);
  if (result == STORE_OK)
    claims_held_remove(&s->held, id);
  return result;
}
