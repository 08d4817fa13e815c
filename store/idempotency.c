/* Idempotency keys of task submissions: look a key up, and insert a task under a key in
 * one transaction (schema/0008_idempotency.sql). */
#include "store/idempotency.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "store/connection.h"
#include "store/tasks.h"
#include "store/transaction.h"
#include "store/util.h"

/* A key counts only while it is younger than the TTL and its task exists. */
static const char SQL_FIND[] =
    "SELECT k.digest, k.task_id, k.created_ms FROM idempotency_keys k"
    " WHERE k.key = ?1 AND k.created_ms > ?2"
    " AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = k.task_id)";
static const char SQL_PRUNE[] = "DELETE FROM idempotency_keys WHERE created_ms <= ?1";
static const char SQL_FREE_ORPHAN[] =
    "DELETE FROM idempotency_keys WHERE key = ?1"
    " AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = idempotency_keys.task_id)";
static const char SQL_INSERT[] =
    "INSERT INTO idempotency_keys (key, digest, task_id, created_ms) VALUES (?1, ?2, ?3, ?4)";

/* Whether key and digest are what the table takes. */
static bool args_ok(const char *key, const char *digest) {
  size_t len = key ? strlen(key) : 0;
  return len > 0 && len <= STORE_IDEMPOTENCY_KEY_MAX &&
         (!digest || strlen(digest) == STORE_IDEMPOTENCY_DIGEST_LEN);
}

/* Copies the text of column col into out (outlen bytes); false when it is NULL or does
 * not fit (logged). */
static bool copy_column(struct db_stmt *st, int col, char *out, size_t outlen) {
  const char *text = (const char *)db_column_text(st, col);
  if (!text || strlen(text) >= outlen) {
    store_log("idempotency_keys.%s is NULL or too long", db_column_name(st, col));
    return false;
  }
  memcpy(out, text, strlen(text) + 1);
  return true;
}

int store_idempotency_find(struct store *s, const char *key, int64_t now_ms,
                           struct store_idempotency *ret) {
  if (!s || !ret || !args_ok(key, NULL))
    return STORE_INVALID;
  struct db_stmt *st = store_stmt(s, SQL_FIND);
  if (!st)
    return STORE_ERROR;
  int status = STORE_ERROR;
  if (st_bind_text(st, 1, key) &&
      db_bind_int64(st, 2, now_ms - STORE_IDEMPOTENCY_TTL_MS) == DB_OK) {
    int rc = st_step(st);
    struct store_idempotency found;
    if (rc == DB_ROW) {
      found.created_ms = db_column_int64(st, 2);
      if (copy_column(st, 0, found.digest, sizeof found.digest) &&
          copy_column(st, 1, found.task_id, sizeof found.task_id)) {
        *ret = found;
        status = STORE_OK;
      }
    } else {
      status = rc == DB_DONE ? STORE_NOT_FOUND : st_fail(st, rc);
    }
  }
  st_done(st);
  return status;
}

/* Everything one attempt of the insert needs; task is the last attempt's result. */
struct keyed_insert {
  const char *key, *digest, *id, *name, *reference;
  json_t *options;
  int64_t now_ms;
  json_t *task;
  bool want_task;
};

/* Runs a DELETE whose one parameter is key (when not NULL) or ms, to its end. */
static int run_delete(struct store *s, const char *sql, const char *key, int64_t ms) {
  struct db_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  bool bound = key ? st_bind_text(st, 1, key) : db_bind_int64(st, 1, ms) == DB_OK;
  int status = STORE_ERROR;
  if (bound) {
    int rc = st_step(st);
    status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  }
  st_done(st);
  return status;
}

/* Stores the key row; STORE_CONFLICT when the key is taken. */
static int insert_key(struct store *s, const struct keyed_insert *in) {
  struct db_stmt *st = store_stmt(s, SQL_INSERT);
  if (!st)
    return STORE_ERROR;
  int status = STORE_ERROR;
  if (st_bind_text(st, 1, in->key) && st_bind_text(st, 2, in->digest) &&
      st_bind_text(st, 3, in->id) && db_bind_int64(st, 4, in->now_ms) == DB_OK) {
    int rc = st_step(st);
    status = rc == DB_DONE                                     ? STORE_OK
             : rc == DB_CONSTRAINT_PRIMARYKEY || rc == DB_CONSTRAINT_UNIQUE
                 ? STORE_CONFLICT
                 : st_fail(st, rc);
  }
  st_done(st);
  return status;
}

/* The transaction: prune, free an orphaned key, take the key, insert the task. */
static int keyed_insert_tx(struct store *s, void *arg) {
  struct keyed_insert *in = arg;
  json_decref(in->task);
  in->task = NULL;
  int status = run_delete(s, SQL_PRUNE, NULL, in->now_ms - STORE_IDEMPOTENCY_TTL_MS);
  if (status == STORE_OK)
    status = run_delete(s, SQL_FREE_ORPHAN, in->key, 0);
  if (status == STORE_OK)
    status = insert_key(s, in);
  if (status == STORE_OK)
    status = store_task_insert(s, in->id, in->name, in->options, in->reference,
                               in->want_task ? &in->task : NULL);
  return status;
}

int store_idempotency_insert_task(struct store *s, const char *key, const char *digest,
                                  int64_t now_ms, const char *id, const char *name,
                                  json_t *options, const char *reference, json_t **ret_task) {
  if (!s || !id || !name || !reference || !json_is_object(options) || !digest ||
      !args_ok(key, digest))
    return STORE_INVALID;
  struct keyed_insert in = {.key = key, .digest = digest, .id = id, .name = name,
                            .reference = reference, .options = options, .now_ms = now_ms,
                            .want_task = ret_task != NULL};
  int status = store_transaction(s, keyed_insert_tx, &in);
  if (status == STORE_OK && ret_task)
    *ret_task = in.task;
  else
    json_decref(in.task);
  return status;
}
