/* Local nodes of the memory graph (strategies under a direction), with their evidence:
 * list, get, create, update, delete. */
#include "store/memory.h"

#include "store/memory_rows.h"
#include "store/memory_write.h"
#include "store/util.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char SQL_LOCAL_LIST[] =
    "SELECT " MEMORY_LOCAL_COLUMNS " FROM local_nodes WHERE namespace = ?1 AND global_id = ?2"
    " ORDER BY rowid";
static const char SQL_LOCAL_GET[] =
    "SELECT " MEMORY_LOCAL_COLUMNS " FROM local_nodes WHERE namespace = ?1 AND id = ?2";
static const char SQL_LOCAL_EXISTS[] =
    "SELECT 1 FROM local_nodes WHERE namespace = ?1 AND id = ?2";
static const char SQL_LOCAL_EVIDENCE[] =
    "SELECT " MEMORY_EVIDENCE_COLUMNS " FROM local_evidence WHERE namespace = ?1"
    " AND local_id = ?2 ORDER BY id DESC LIMIT " STR(MEMORY_EVIDENCE_SHOWN);
static const char SQL_LOCAL_UPDATE[] =
    "UPDATE local_nodes SET global_id = COALESCE(?3, global_id), name = COALESCE(?4, name),"
    " edit_pattern = COALESCE(?5, edit_pattern),"
    " knob_move = CASE WHEN ?6 IS NULL THEN knob_move WHEN ?6 = 'null' THEN NULL ELSE ?6 END,"
    " checks = COALESCE(?7, checks), families = COALESCE(?8, families), updated_at = ?9"
    " WHERE namespace = ?1 AND id = ?2";
static const char SQL_LOCAL_DELETE_EVIDENCE[] =
    "DELETE FROM local_evidence WHERE namespace = ?1 AND local_id = ?2";
static const char SQL_LOCAL_DELETE[] = "DELETE FROM local_nodes WHERE namespace = ?1 AND id = ?2";

static int local_exists(struct store *s, const char *ns, const char *id, bool *ret) {
  return memory_id_exists(s, SQL_LOCAL_EXISTS, ns, id, ret);
}

static int local_list_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  bool found = false;
  int status = memory_global_exists(s, w->ns, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  const char *const texts[] = {w->ns, w->id};
  return status == STORE_OK ? memory_collect(s, SQL_LOCAL_LIST, texts, 2, memory_local_from_row,
                                             MEMORY_ROW_API, &w->result)
                            : status;
}

int store_memory_local_list(struct store *s, const char *ns, const char *global_id,
                            json_t **ret_items) {
  if (!s || !global_id || !ret_items)
    return STORE_INVALID;
  struct memory_write w = {.ns = memory_ns(ns), .id = global_id};
  return memory_run_write(s, local_list_tx, &w, ret_items);
}

/* Loads a local node with its newest evidence rows into *ret. */
static int load_local(struct store *s, const char *ns, const char *id, json_t **ret) {
  const char *const texts[] = {ns, id};
  json_t *node = NULL, *evidence = NULL;
  int status = memory_load_one(s, SQL_LOCAL_GET, texts, 2, memory_local_from_row, &node);
  if (status != STORE_OK)
    return status;
  status = memory_collect(s, SQL_LOCAL_EVIDENCE, texts, 2, memory_evidence_from_row,
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
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  return load_local(s, w->ns, w->id, &w->result);
}

int store_memory_local_get(struct store *s, const char *ns, const char *id, json_t **ret_node) {
  if (!s || !id || !ret_node)
    return STORE_INVALID;
  struct memory_write w = {.ns = memory_ns(ns), .id = id};
  return memory_run_write(s, local_get_tx, &w, ret_node);
}

static int local_create_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  bool found = false;
  int status = memory_global_exists(s, w->ns, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  char id[MEMORY_ID_MAX + 1] = "";
  if (status == STORE_OK)
    status = memory_pick_id(s, w->ns, w->body, local_exists, id);
  if (status == STORE_CONFLICT)
    return memory_slug_exhausted(w->why);
  if (status == STORE_OK)
    status = memory_insert_local(s, w->ns, w->body, id, w->id, MEMORY_CREATE, w->now);
  if (status == STORE_CONFLICT)
    memory_why(w->why, MEMORY_PROBLEM_DUPLICATE, "id", "a local node with id '%s' exists", id);
  return status == STORE_OK ? load_local(s, w->ns, id, &w->result) : status;
}

int store_memory_local_create(struct store *s, const char *ns, const char *global_id,
                              const json_t *body, struct memory_invalid *why,
                              json_t **ret_node) {
  if (!s || !global_id || !json_is_object(body))
    return STORE_INVALID;
  struct memory_write w = {.body = body, .ns = memory_ns(ns), .id = global_id, .why = why};
  return memory_run_write(s, local_create_tx, &w, ret_node);
}

static int local_update_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  bool found = false;
  int status = local_exists(s, w->ns, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  const char *parent = json_string_value(json_object_get(w->body, "global"));
  if (status == STORE_OK && parent)
    status = memory_global_exists(s, w->ns, parent, &found);
  if (status == STORE_OK && parent && !found) {
    memory_why(w->why, MEMORY_PROBLEM_REFERENCE, "global", "no global node has id '%s'", parent);
    return STORE_INVALID;
  }
  static const char *const keys[] = {"global", "name", "edit_pattern", "knob_move", "checks",
                                     "families"};
  if (status == STORE_OK)
    status = memory_patch_row(s, SQL_LOCAL_UPDATE, w, 3, keys, 6);
  return status == STORE_OK ? load_local(s, w->ns, w->id, &w->result) : status;
}

int store_memory_local_update(struct store *s, const char *ns, const char *id,
                              const json_t *body, struct memory_invalid *why,
                              json_t **ret_node) {
  if (!s || !id || !json_is_object(body))
    return STORE_INVALID;
  struct memory_write w = {.body = body, .ns = memory_ns(ns), .id = id, .why = why};
  return memory_run_write(s, local_update_tx, &w, ret_node);
}

static int local_delete_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  const char *const texts[] = {w->ns, w->id};
  int changed = 0;
  int status = memory_exec(s, SQL_LOCAL_DELETE_EVIDENCE, texts, 2, NULL);
  if (status == STORE_OK)
    status = memory_exec(s, SQL_LOCAL_DELETE, texts, 2, &changed);
  return status == STORE_OK && changed == 0 ? STORE_NOT_FOUND : status;
}

int store_memory_local_delete(struct store *s, const char *ns, const char *id) {
  if (!s || !id)
    return STORE_INVALID;
  struct memory_write w = {.ns = memory_ns(ns), .id = id};
  return memory_run_write(s, local_delete_tx, &w, NULL);
}
