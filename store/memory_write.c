/* What the memory node and edge writes share: the runner, loads, ids and patches. */
#include "store/memory_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/connection.h"

/* A slug taken this many times gives up (STORE_CONFLICT). */
#define SLUG_TRIES 1000

static const char SQL_GLOBAL_EXISTS[] =
    "SELECT 1 FROM global_nodes WHERE namespace = ?1 AND id = ?2";

/* Moves the first record of a list into *ret (STORE_NOT_FOUND when empty); consumes
 * items. */
static int first_of(json_t *items, json_t **ret) {
  json_t *first = json_array_get(items, 0);
  int status = first ? STORE_OK : STORE_NOT_FOUND;
  if (first)
    *ret = json_incref(first);
  json_decref(items);
  return status;
}

int memory_load_one(struct store *s, const char *sql, const char *const *texts, int n,
                    memory_row_fn fn, json_t **ret) {
  json_t *items = NULL;
  int status = memory_collect(s, sql, texts, n, fn, MEMORY_ROW_API, &items);
  return status == STORE_OK ? first_of(items, ret) : status;
}

int memory_id_exists(struct store *s, const char *sql, const char *ns, const char *id,
                     bool *ret) {
  const char *const texts[] = {ns, id};
  return memory_exists(s, sql, texts, 2, ret);
}

int memory_global_exists(struct store *s, const char *ns, const char *id, bool *ret) {
  return memory_id_exists(s, SQL_GLOBAL_EXISTS, ns, id, ret);
}

int memory_pick_id(struct store *s, const char *ns, const json_t *body, memory_taken_fn taken,
                   char ret_id[MEMORY_ID_MAX + 1]) {
  const char *given = json_string_value(json_object_get(body, "id"));
  if (given) {
    snprintf(ret_id, MEMORY_ID_MAX + 1, "%s", given);
    return STORE_OK;
  }
  char base[MEMORY_ID_MAX + 1], id[MEMORY_ID_MAX + 1];
  memory_slug(json_string_value(json_object_get(body, "name")), base);
  snprintf(id, sizeof id, "%s", base);
  for (int i = 2; i <= SLUG_TRIES + 1; i++) {
    bool is_taken = false;
    int status = taken(s, ns, id, &is_taken);
    if (status != STORE_OK)
      return status;
    if (!is_taken) {
      snprintf(ret_id, MEMORY_ID_MAX + 1, "%s", id);
      return STORE_OK;
    }
    snprintf(id, sizeof id, "%.59s_%d", base, i);
  }
  return STORE_CONFLICT;
}

int memory_slug_exhausted(struct memory_invalid *why) {
  memory_why(why, MEMORY_PROBLEM_DUPLICATE, "name",
             "every id made from this name is taken; give the node an id");
  return STORE_CONFLICT;
}

int memory_run_write(struct store *s, store_tx_fn fn, struct memory_write *w, json_t **ret) {
  if (!store_time_now(w->now))
    return STORE_ERROR;
  int status = store_transaction(s, fn, w);
  if (status == STORE_OK && ret)
    *ret = w->result;
  else
    json_decref(w->result);
  return status;
}

/* Binds member key of the patch body at idx: strings as is, lists as JSON text, numbers
 * as doubles; absent binds NULL (the column keeps its value). */
static bool bind_patch(struct db_stmt *st, int idx, const json_t *body, const char *key,
                       char **owned) {
  const json_t *v = json_object_get(body, key);
  if (json_is_number(v))
    return db_bind_double(st, idx, json_number_value(v)) == DB_OK;
  if (json_is_array(v) || json_is_object(v) || json_is_null(v)) {
    *owned = st_json_dumps(v);
    return *owned && st_bind_text(st, idx, *owned);
  }
  return st_bind_text(st, idx, json_string_value(v));
}

int memory_patch_row(struct store *s, const char *sql, const struct memory_write *w, int first,
                     const char *const *keys, int n) {
  struct db_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  char *owned[8] = {0};
  bool ok = st_bind_text(st, 1, w->ns) && st_bind_text(st, 2, w->id) &&
            (first < 4 || st_bind_text(st, 3, w->id2));
  for (int i = 0; ok && i < n; i++)
    ok = bind_patch(st, first + i, w->body, keys[i], &owned[i]);
  ok = ok && st_bind_text(st, first + n, w->now);
  int status = STORE_ERROR;
  if (ok) {
    int rc = st_step(st);
    status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  }
  if (status == STORE_OK && db_changes(db_handle(st)) == 0)
    status = STORE_NOT_FOUND;
  st_done(st);
  for (int i = 0; i < n; i++)
    free(owned[i]);
  return status;
}
