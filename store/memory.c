/* Memory graph CRUD: global nodes, local nodes (with their evidence) and edges. */
#include "store/memory_internal.h"

#include <stdio.h>
#include <string.h>

/* A slug taken this many times gives up (STORE_CONFLICT). */
#define SLUG_TRIES 1000
#define STR_(x) #x
#define STR(x) STR_(x)

static const char SQL_GLOBAL_LIST[] =
    "SELECT " MEMORY_GLOBAL_COLUMNS " FROM global_nodes g ORDER BY g.rowid";
static const char SQL_GLOBAL_GET[] =
    "SELECT " MEMORY_GLOBAL_COLUMNS " FROM global_nodes g WHERE g.id = ?1";
static const char SQL_GLOBAL_EXISTS[] = "SELECT 1 FROM global_nodes WHERE id = ?1";
static const char SQL_GLOBAL_UPDATE[] =
    "UPDATE global_nodes SET name = COALESCE(?2, name), intent = COALESCE(?3, intent),"
    " objectives = COALESCE(?4, objectives), triggers = COALESCE(?5, triggers),"
    " risks = COALESCE(?6, risks), prior = COALESCE(?7, prior), updated_at = ?8"
    " WHERE id = ?1";
static const char SQL_GLOBAL_HAS_LOCALS[] = "SELECT 1 FROM local_nodes WHERE global_id = ?1";
static const char SQL_GLOBAL_DELETE_EVIDENCE[] =
    "DELETE FROM local_evidence WHERE local_id IN"
    " (SELECT id FROM local_nodes WHERE global_id = ?1)";
static const char SQL_GLOBAL_DELETE_LOCALS[] = "DELETE FROM local_nodes WHERE global_id = ?1";
static const char SQL_GLOBAL_DELETE_EDGES[] =
    "DELETE FROM edges WHERE from_id = ?1 OR to_id = ?1";
static const char SQL_GLOBAL_DELETE[] = "DELETE FROM global_nodes WHERE id = ?1";

static const char SQL_LOCAL_LIST[] =
    "SELECT " MEMORY_LOCAL_COLUMNS " FROM local_nodes WHERE global_id = ?1 ORDER BY rowid";
static const char SQL_LOCAL_GET[] =
    "SELECT " MEMORY_LOCAL_COLUMNS " FROM local_nodes WHERE id = ?1";
static const char SQL_LOCAL_EXISTS[] = "SELECT 1 FROM local_nodes WHERE id = ?1";
static const char SQL_LOCAL_EVIDENCE[] =
    "SELECT " MEMORY_EVIDENCE_COLUMNS " FROM local_evidence WHERE local_id = ?1"
    " ORDER BY id DESC LIMIT " STR(MEMORY_EVIDENCE_SHOWN);
static const char SQL_LOCAL_UPDATE[] =
    "UPDATE local_nodes SET global_id = COALESCE(?2, global_id), name = COALESCE(?3, name),"
    " edit_pattern = COALESCE(?4, edit_pattern),"
    " knob_move = CASE WHEN ?5 IS NULL THEN knob_move WHEN ?5 = 'null' THEN NULL ELSE ?5 END,"
    " checks = COALESCE(?6, checks), families = COALESCE(?7, families), updated_at = ?8"
    " WHERE id = ?1";
static const char SQL_LOCAL_DELETE_EVIDENCE[] = "DELETE FROM local_evidence WHERE local_id = ?1";
static const char SQL_LOCAL_DELETE[] = "DELETE FROM local_nodes WHERE id = ?1";

static const char SQL_EDGE_LIST[] =
    "SELECT " MEMORY_EDGE_COLUMNS " FROM edges WHERE (?1 IS NULL OR from_id = ?1)"
    " AND (?2 IS NULL OR to_id = ?2) ORDER BY rowid";
static const char SQL_EDGE_UPDATE[] =
    "UPDATE edges SET when_text = COALESCE(?3, when_text),"
    " rationale = COALESCE(?4, rationale), risks = COALESCE(?5, risks), updated_at = ?6"
    " WHERE from_id = ?1 AND to_id = ?2";
static const char SQL_EDGE_DELETE[] = "DELETE FROM edges WHERE from_id = ?1 AND to_id = ?2";

/* ---- helpers ---- */

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

/* Loads one record with a query taking texts ?1..?n. */
static int load_one(struct store *s, const char *sql, const char *const *texts, int n,
                    memory_row_fn fn, json_t **ret) {
  json_t *items = NULL;
  int status = memory_collect(s, sql, texts, n, fn, MEMORY_ROW_API, &items);
  return status == STORE_OK ? first_of(items, ret) : status;
}

static int exists(struct store *s, const char *sql, const char *id, bool *ret) {
  const char *const texts[] = {id};
  return memory_exists(s, sql, texts, 1, ret);
}

/* The id of a new record: the body's, else memory_slug(name) with "_2", "_3", ... until
 * exists_sql finds no row. */
static int pick_id(struct store *s, const json_t *body, const char *exists_sql,
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
    bool taken = false;
    int status = exists(s, exists_sql, id, &taken);
    if (status != STORE_OK)
      return status;
    if (!taken) {
      snprintf(ret_id, MEMORY_ID_MAX + 1, "%s", id);
      return STORE_OK;
    }
    snprintf(id, sizeof id, "%.59s_%d", base, i);
  }
  return STORE_CONFLICT;
}

/* pick_id found every id made from the name taken. */
static int slug_exhausted(struct memory_invalid *why) {
  memory_why(why, MEMORY_PROBLEM_DUPLICATE, "name",
             "every id made from this name is taken; give the node an id");
  return STORE_CONFLICT;
}

/* Everything one write needs; result is the record after the last attempt. */
struct write {
  const json_t *body;
  const char *id, *id2;           /* the record's key (id, or from and to) */
  bool cascade;
  struct memory_invalid *why;
  char now[STORE_TIME_LEN];
  json_t *result;
};

/* Runs fn in a transaction with w->now set; hands the result over on STORE_OK. */
static int run_write(struct store *s, store_tx_fn fn, struct write *w, json_t **ret) {
  if (!store_time_now(w->now))
    return STORE_ERROR;
  int status = store_transaction(s, fn, w);
  if (status == STORE_OK && ret)
    *ret = w->result;
  else
    json_decref(w->result);
  return status;
}

/* ---- global nodes ---- */

int store_memory_global_list(struct store *s, json_t **ret_items) {
  if (!s || !ret_items)
    return STORE_INVALID;
  return memory_collect(s, SQL_GLOBAL_LIST, NULL, 0, memory_global_from_row, MEMORY_ROW_API,
                        ret_items);
}

int store_memory_global_get(struct store *s, const char *id, json_t **ret_node) {
  if (!s || !id || !ret_node)
    return STORE_INVALID;
  const char *const texts[] = {id};
  return load_one(s, SQL_GLOBAL_GET, texts, 1, memory_global_from_row, ret_node);
}

static int global_create_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  char id[MEMORY_ID_MAX + 1] = "";
  int status = pick_id(s, w->body, SQL_GLOBAL_EXISTS, id);
  if (status == STORE_CONFLICT)
    return slug_exhausted(w->why);
  if (status == STORE_OK)
    status = memory_insert_global(s, w->body, id, MEMORY_CREATE, w->now);
  if (status == STORE_CONFLICT)
    memory_why(w->why, MEMORY_PROBLEM_DUPLICATE, "id", "a global node with id '%s' exists", id);
  const char *const texts[] = {id};
  return status == STORE_OK
             ? load_one(s, SQL_GLOBAL_GET, texts, 1, memory_global_from_row, &w->result)
             : status;
}

int store_memory_global_create(struct store *s, const json_t *body, struct memory_invalid *why,
                               json_t **ret_node) {
  if (!s || !json_is_object(body))
    return STORE_INVALID;
  struct write w = {.body = body, .why = why};
  return run_write(s, global_create_tx, &w, ret_node);
}

/* Binds member key of the patch body at idx: strings as is, lists as JSON text, numbers
 * as doubles; absent binds NULL (the column keeps its value). */
static bool bind_patch(sqlite3_stmt *st, int idx, const json_t *body, const char *key,
                       char **owned) {
  const json_t *v = json_object_get(body, key);
  if (json_is_number(v))
    return sqlite3_bind_double(st, idx, json_number_value(v)) == SQLITE_OK;
  if (json_is_array(v) || json_is_object(v) || json_is_null(v)) {
    *owned = st_json_dumps(v);
    return *owned && st_bind_text(st, idx, *owned);
  }
  return st_bind_text(st, idx, json_string_value(v));
}

/* Runs an UPDATE whose ?1 (and ?2 when key2) is the key, whose ?first..?first+n-1 are the
 * patch keys, and whose last parameter is now; STORE_NOT_FOUND when no row changed. */
static int patch_row(struct store *s, const char *sql, const struct write *w, int first,
                     const char *const *keys, int n) {
  sqlite3_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  char *owned[8] = {0};
  bool ok = st_bind_text(st, 1, w->id) && (first < 3 || st_bind_text(st, 2, w->id2));
  for (int i = 0; ok && i < n; i++)
    ok = bind_patch(st, first + i, w->body, keys[i], &owned[i]);
  ok = ok && st_bind_text(st, first + n, w->now);
  int status = STORE_ERROR;
  if (ok) {
    int rc = st_step(st);
    status = rc == SQLITE_DONE ? STORE_OK : st_fail(st, rc);
  }
  if (status == STORE_OK && sqlite3_changes(sqlite3_db_handle(st)) == 0)
    status = STORE_NOT_FOUND;
  st_done(st);
  for (int i = 0; i < n; i++)
    free(owned[i]);
  return status;
}

static int global_update_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  static const char *const keys[] = {"name", "intent", "objectives", "triggers", "risks",
                                     "prior"};
  int status = patch_row(s, SQL_GLOBAL_UPDATE, w, 2, keys, 6);
  const char *const texts[] = {w->id};
  return status == STORE_OK
             ? load_one(s, SQL_GLOBAL_GET, texts, 1, memory_global_from_row, &w->result)
             : status;
}

int store_memory_global_update(struct store *s, const char *id, const json_t *body,
                               json_t **ret_node) {
  if (!s || !id || !json_is_object(body))
    return STORE_INVALID;
  struct write w = {.body = body, .id = id};
  return run_write(s, global_update_tx, &w, ret_node);
}

static int global_delete_tx(struct store *s, void *arg) {
  struct write *w = arg;
  bool found = false, has_locals = false;
  int status = exists(s, SQL_GLOBAL_EXISTS, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  if (status == STORE_OK)
    status = exists(s, SQL_GLOBAL_HAS_LOCALS, w->id, &has_locals);
  if (status == STORE_OK && has_locals && !w->cascade)
    return STORE_CONFLICT;
  const char *const steps[] = {SQL_GLOBAL_DELETE_EVIDENCE, SQL_GLOBAL_DELETE_LOCALS,
                               SQL_GLOBAL_DELETE_EDGES, SQL_GLOBAL_DELETE};
  const char *const texts[] = {w->id};
  for (size_t i = 0; i < sizeof steps / sizeof *steps && status == STORE_OK; i++)
    status = memory_exec(s, steps[i], texts, 1, NULL);
  return status;
}

int store_memory_global_delete(struct store *s, const char *id, bool cascade) {
  if (!s || !id)
    return STORE_INVALID;
  struct write w = {.id = id, .cascade = cascade};
  return run_write(s, global_delete_tx, &w, NULL);
}

/* ---- local nodes ---- */

static int local_list_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  bool found = false;
  int status = exists(s, SQL_GLOBAL_EXISTS, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  const char *const texts[] = {w->id};
  return status == STORE_OK ? memory_collect(s, SQL_LOCAL_LIST, texts, 1, memory_local_from_row,
                                             MEMORY_ROW_API, &w->result)
                            : status;
}

int store_memory_local_list(struct store *s, const char *global_id, json_t **ret_items) {
  if (!s || !global_id || !ret_items)
    return STORE_INVALID;
  struct write w = {.id = global_id};
  return run_write(s, local_list_tx, &w, ret_items);
}

/* Loads a local node with its newest evidence rows into *ret. */
static int load_local(struct store *s, const char *id, json_t **ret) {
  const char *const texts[] = {id};
  json_t *node = NULL, *evidence = NULL;
  int status = load_one(s, SQL_LOCAL_GET, texts, 1, memory_local_from_row, &node);
  if (status != STORE_OK)
    return status;
  status = memory_collect(s, SQL_LOCAL_EVIDENCE, texts, 1, memory_evidence_from_row,
                          MEMORY_ROW_API, &evidence);
  if (status == STORE_OK && json_object_set_new(node, "evidence", evidence) != 0) {
    store_log("out of memory (JSON)");
    status = STORE_ERROR;
  }
  if (status == STORE_OK)
    *ret = node;
  else
    json_decref(node);
  return status;
}

static int local_get_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  return load_local(s, w->id, &w->result);
}

int store_memory_local_get(struct store *s, const char *id, json_t **ret_node) {
  if (!s || !id || !ret_node)
    return STORE_INVALID;
  struct write w = {.id = id};
  return run_write(s, local_get_tx, &w, ret_node);
}

static int local_create_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  bool found = false;
  int status = exists(s, SQL_GLOBAL_EXISTS, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  char id[MEMORY_ID_MAX + 1] = "";
  if (status == STORE_OK)
    status = pick_id(s, w->body, SQL_LOCAL_EXISTS, id);
  if (status == STORE_CONFLICT)
    return slug_exhausted(w->why);
  if (status == STORE_OK)
    status = memory_insert_local(s, w->body, id, w->id, MEMORY_CREATE, w->now);
  if (status == STORE_CONFLICT)
    memory_why(w->why, MEMORY_PROBLEM_DUPLICATE, "id", "a local node with id '%s' exists", id);
  return status == STORE_OK ? load_local(s, id, &w->result) : status;
}

int store_memory_local_create(struct store *s, const char *global_id, const json_t *body,
                              struct memory_invalid *why, json_t **ret_node) {
  if (!s || !global_id || !json_is_object(body))
    return STORE_INVALID;
  struct write w = {.body = body, .id = global_id, .why = why};
  return run_write(s, local_create_tx, &w, ret_node);
}

static int local_update_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  bool found = false;
  int status = exists(s, SQL_LOCAL_EXISTS, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  const char *parent = json_string_value(json_object_get(w->body, "global"));
  if (status == STORE_OK && parent)
    status = exists(s, SQL_GLOBAL_EXISTS, parent, &found);
  if (status == STORE_OK && parent && !found) {
    memory_why(w->why, MEMORY_PROBLEM_REFERENCE, "global", "no global node has id '%s'", parent);
    return STORE_INVALID;
  }
  static const char *const keys[] = {"global", "name", "edit_pattern", "knob_move", "checks",
                                     "families"};
  if (status == STORE_OK)
    status = patch_row(s, SQL_LOCAL_UPDATE, w, 2, keys, 6);
  return status == STORE_OK ? load_local(s, w->id, &w->result) : status;
}

int store_memory_local_update(struct store *s, const char *id, const json_t *body,
                              struct memory_invalid *why, json_t **ret_node) {
  if (!s || !id || !json_is_object(body))
    return STORE_INVALID;
  struct write w = {.body = body, .id = id, .why = why};
  return run_write(s, local_update_tx, &w, ret_node);
}

static int local_delete_tx(struct store *s, void *arg) {
  struct write *w = arg;
  const char *const texts[] = {w->id};
  int changed = 0;
  int status = memory_exec(s, SQL_LOCAL_DELETE_EVIDENCE, texts, 1, NULL);
  if (status == STORE_OK)
    status = memory_exec(s, SQL_LOCAL_DELETE, texts, 1, &changed);
  return status == STORE_OK && changed == 0 ? STORE_NOT_FOUND : status;
}

int store_memory_local_delete(struct store *s, const char *id) {
  if (!s || !id)
    return STORE_INVALID;
  struct write w = {.id = id};
  return run_write(s, local_delete_tx, &w, NULL);
}

/* ---- edges ---- */

int store_memory_edge_list(struct store *s, const char *from, const char *to,
                           json_t **ret_items) {
  if (!s || !ret_items)
    return STORE_INVALID;
  const char *const texts[] = {from, to};
  return memory_collect(s, SQL_EDGE_LIST, texts, 2, memory_edge_from_row, MEMORY_ROW_API,
                        ret_items);
}

int store_memory_edge_get(struct store *s, const char *from, const char *to,
                          json_t **ret_edge) {
  if (!s || !from || !to || !ret_edge)
    return STORE_INVALID;
  const char *const texts[] = {from, to};
  return load_one(s, SQL_EDGE_LIST, texts, 2, memory_edge_from_row, ret_edge);
}

static int edge_create_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  const char *ends[] = {"from", "to"};
  const char *ids[] = {json_string_value(json_object_get(w->body, "from")),
                       json_string_value(json_object_get(w->body, "to"))};
  for (int i = 0; i < 2; i++) {
    bool found = false;
    int status = exists(s, SQL_GLOBAL_EXISTS, ids[i], &found);
    if (status != STORE_OK)
      return status;
    if (!found) {
      memory_why(w->why, MEMORY_PROBLEM_REFERENCE, ends[i], "no global node has id '%s'",
                 ids[i]);
      return STORE_INVALID;
    }
  }
  int status = memory_insert_edge(s, w->body, MEMORY_CREATE, w->now);
  if (status == STORE_CONFLICT)
    memory_why(w->why, MEMORY_PROBLEM_DUPLICATE, "", "the edge '%s' -> '%s' exists", ids[0],
               ids[1]);
  return status == STORE_OK
             ? load_one(s, SQL_EDGE_LIST, ids, 2, memory_edge_from_row, &w->result)
             : status;
}

int store_memory_edge_create(struct store *s, const json_t *body, struct memory_invalid *why,
                             json_t **ret_edge) {
  if (!s || !json_is_object(body) || !json_is_string(json_object_get(body, "from")) ||
      !json_is_string(json_object_get(body, "to")))
    return STORE_INVALID;
  struct write w = {.body = body, .why = why};
  return run_write(s, edge_create_tx, &w, ret_edge);
}

static int edge_update_tx(struct store *s, void *arg) {
  struct write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  static const char *const keys[] = {"when", "rationale", "risks"};
  int status = patch_row(s, SQL_EDGE_UPDATE, w, 3, keys, 3);
  const char *const texts[] = {w->id, w->id2};
  return status == STORE_OK
             ? load_one(s, SQL_EDGE_LIST, texts, 2, memory_edge_from_row, &w->result)
             : status;
}

int store_memory_edge_update(struct store *s, const char *from, const char *to,
                             const json_t *body, json_t **ret_edge) {
  if (!s || !from || !to || !json_is_object(body))
    return STORE_INVALID;
  struct write w = {.body = body, .id = from, .id2 = to};
  return run_write(s, edge_update_tx, &w, ret_edge);
}

static int edge_delete_tx(struct store *s, void *arg) {
  struct write *w = arg;
  const char *const texts[] = {w->id, w->id2};
  int changed = 0;
  int status = memory_exec(s, SQL_EDGE_DELETE, texts, 2, &changed);
  return status == STORE_OK && changed == 0 ? STORE_NOT_FOUND : status;
}

int store_memory_edge_delete(struct store *s, const char *from, const char *to) {
  if (!s || !from || !to)
    return STORE_INVALID;
  struct write w = {.id = from, .id2 = to};
  return run_write(s, edge_delete_tx, &w, NULL);
}
