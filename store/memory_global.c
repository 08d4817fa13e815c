/* Global nodes of the memory graph (directions): list, get, create, update, delete. */
#include "store/memory.h"

#include "store/memory_rows.h"
#include "store/memory_write.h"

static const char SQL_GLOBAL_LIST[] =
    "SELECT " MEMORY_GLOBAL_COLUMNS " FROM global_nodes g WHERE g.namespace = ?1"
    " ORDER BY g.rowid";
static const char SQL_GLOBAL_GET[] =
    "SELECT " MEMORY_GLOBAL_COLUMNS " FROM global_nodes g WHERE g.namespace = ?1 AND g.id = ?2";
static const char SQL_GLOBAL_UPDATE[] =
    "UPDATE global_nodes SET name = COALESCE(?3, name), intent = COALESCE(?4, intent),"
    " objectives = COALESCE(?5, objectives), triggers = COALESCE(?6, triggers),"
    " risks = COALESCE(?7, risks), prior = COALESCE(?8, prior), updated_at = ?9"
    " WHERE namespace = ?1 AND id = ?2";
static const char SQL_GLOBAL_HAS_LOCALS[] =
    "SELECT 1 FROM local_nodes WHERE namespace = ?1 AND global_id = ?2";
static const char SQL_GLOBAL_DELETE_EVIDENCE[] =
    "DELETE FROM local_evidence WHERE namespace = ?1 AND local_id IN"
    " (SELECT id FROM local_nodes WHERE namespace = ?1 AND global_id = ?2)";
static const char SQL_GLOBAL_DELETE_LOCALS[] =
    "DELETE FROM local_nodes WHERE namespace = ?1 AND global_id = ?2";
static const char SQL_GLOBAL_DELETE_EDGES[] =
    "DELETE FROM edges WHERE namespace = ?1 AND (from_id = ?2 OR to_id = ?2)";
static const char SQL_GLOBAL_DELETE[] = "DELETE FROM global_nodes WHERE namespace = ?1 AND id = ?2";

int store_memory_global_list(struct store *s, const char *ns, json_t **ret_items) {
  if (!s || !ret_items)
    return STORE_INVALID;
  const char *const texts[] = {memory_ns(ns)};
  return memory_collect(s, SQL_GLOBAL_LIST, texts, 1, memory_global_from_row, MEMORY_ROW_API,
                        ret_items);
}

int store_memory_global_get(struct store *s, const char *ns, const char *id, json_t **ret_node) {
  if (!s || !id || !ret_node)
    return STORE_INVALID;
  const char *const texts[] = {memory_ns(ns), id};
  return memory_load_one(s, SQL_GLOBAL_GET, texts, 2, memory_global_from_row, ret_node);
}

static int global_create_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  char id[MEMORY_ID_MAX + 1] = "";
  int status = memory_pick_id(s, w->ns, w->body, memory_global_exists, id);
  if (status == STORE_CONFLICT)
    return memory_slug_exhausted(w->why);
  if (status == STORE_OK)
    status = memory_insert_global(s, w->ns, w->body, id, MEMORY_CREATE, w->now);
  if (status == STORE_CONFLICT)
    memory_why(w->why, MEMORY_PROBLEM_DUPLICATE, "id", "a global node with id '%s' exists", id);
  const char *const texts[] = {w->ns, id};
  return status == STORE_OK
             ? memory_load_one(s, SQL_GLOBAL_GET, texts, 2, memory_global_from_row, &w->result)
             : status;
}

int store_memory_global_create(struct store *s, const char *ns, const json_t *body,
                               struct memory_invalid *why, json_t **ret_node) {
  if (!s || !json_is_object(body))
    return STORE_INVALID;
  struct memory_write w = {.body = body, .ns = memory_ns(ns), .why = why};
  return memory_run_write(s, global_create_tx, &w, ret_node);
}

static int global_update_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  static const char *const keys[] = {"name", "intent", "objectives", "triggers", "risks",
                                     "prior"};
  int status = memory_patch_row(s, SQL_GLOBAL_UPDATE, w, 3, keys, 6);
  const char *const texts[] = {w->ns, w->id};
  return status == STORE_OK
             ? memory_load_one(s, SQL_GLOBAL_GET, texts, 2, memory_global_from_row, &w->result)
             : status;
}

int store_memory_global_update(struct store *s, const char *ns, const char *id,
                               const json_t *body, json_t **ret_node) {
  if (!s || !id || !json_is_object(body))
    return STORE_INVALID;
  struct memory_write w = {.body = body, .ns = memory_ns(ns), .id = id};
  return memory_run_write(s, global_update_tx, &w, ret_node);
}

static int global_delete_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  bool found = false, has_locals = false;
  int status = memory_global_exists(s, w->ns, w->id, &found);
  if (status == STORE_OK && !found)
    return STORE_NOT_FOUND;
  if (status == STORE_OK)
    status = memory_id_exists(s, SQL_GLOBAL_HAS_LOCALS, w->ns, w->id, &has_locals);
  if (status == STORE_OK && has_locals && !w->cascade)
    return STORE_CONFLICT;
  const char *const steps[] = {SQL_GLOBAL_DELETE_EVIDENCE, SQL_GLOBAL_DELETE_LOCALS,
                               SQL_GLOBAL_DELETE_EDGES, SQL_GLOBAL_DELETE};
  const char *const texts[] = {w->ns, w->id};
  for (size_t i = 0; i < sizeof steps / sizeof *steps && status == STORE_OK; i++)
    status = memory_exec(s, steps[i], texts, 2, NULL);
  return status;
}

int store_memory_global_delete(struct store *s, const char *ns, const char *id, bool cascade) {
  if (!s || !id)
    return STORE_INVALID;
  struct memory_write w = {.ns = memory_ns(ns), .id = id, .cascade = cascade};
  return memory_run_write(s, global_delete_tx, &w, NULL);
}
