/* Transition edges of the memory graph (from one direction to the next): list, get,
 * create, update, delete. */
#include "store/memory.h"

#include "store/memory_rows.h"
#include "store/memory_write.h"

static const char SQL_EDGE_LIST[] =
    "SELECT " MEMORY_EDGE_COLUMNS " FROM edges WHERE namespace = ?1"
    " AND (?2 IS NULL OR from_id = ?2) AND (?3 IS NULL OR to_id = ?3) ORDER BY rowid";
static const char SQL_EDGE_UPDATE[] =
    "UPDATE edges SET when_text = COALESCE(?4, when_text),"
    " rationale = COALESCE(?5, rationale), risks = COALESCE(?6, risks), updated_at = ?7"
    " WHERE namespace = ?1 AND from_id = ?2 AND to_id = ?3";
static const char SQL_EDGE_DELETE[] =
    "DELETE FROM edges WHERE namespace = ?1 AND from_id = ?2 AND to_id = ?3";

int store_memory_edge_list(struct store *s, const char *ns, const char *from, const char *to,
                           json_t **ret_items) {
  if (!s || !ret_items)
    return STORE_INVALID;
  const char *const texts[] = {memory_ns(ns), from, to};
  return memory_collect(s, SQL_EDGE_LIST, texts, 3, memory_edge_from_row, MEMORY_ROW_API,
                        ret_items);
}

int store_memory_edge_get(struct store *s, const char *ns, const char *from, const char *to,
                          json_t **ret_edge) {
  if (!s || !from || !to || !ret_edge)
    return STORE_INVALID;
  const char *const texts[] = {memory_ns(ns), from, to};
  return memory_load_one(s, SQL_EDGE_LIST, texts, 3, memory_edge_from_row, ret_edge);
}

static int edge_create_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  const char *ends[] = {"from", "to"};
  const char *ids[] = {json_string_value(json_object_get(w->body, "from")),
                       json_string_value(json_object_get(w->body, "to"))};
  for (int i = 0; i < 2; i++) {
    bool found = false;
    int status = memory_global_exists(s, w->ns, ids[i], &found);
    if (status != STORE_OK)
      return status;
    if (!found) {
      memory_why(w->why, MEMORY_PROBLEM_REFERENCE, ends[i], "no global node has id '%s'",
                 ids[i]);
      return STORE_INVALID;
    }
  }
  int status = memory_insert_edge(s, w->ns, w->body, MEMORY_CREATE, w->now);
  if (status == STORE_CONFLICT)
    memory_why(w->why, MEMORY_PROBLEM_DUPLICATE, "", "the edge '%s' -> '%s' exists", ids[0],
               ids[1]);
  const char *const texts[] = {w->ns, ids[0], ids[1]};
  return status == STORE_OK
             ? memory_load_one(s, SQL_EDGE_LIST, texts, 3, memory_edge_from_row, &w->result)
             : status;
}

int store_memory_edge_create(struct store *s, const char *ns, const json_t *body,
                             struct memory_invalid *why, json_t **ret_edge) {
  if (!s || !json_is_object(body) || !json_is_string(json_object_get(body, "from")) ||
      !json_is_string(json_object_get(body, "to")))
    return STORE_INVALID;
  struct memory_write w = {.body = body, .ns = memory_ns(ns), .why = why};
  return memory_run_write(s, edge_create_tx, &w, ret_edge);
}

static int edge_update_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  static const char *const keys[] = {"when", "rationale", "risks"};
  int status = memory_patch_row(s, SQL_EDGE_UPDATE, w, 4, keys, 3);
  const char *const texts[] = {w->ns, w->id, w->id2};
  return status == STORE_OK
             ? memory_load_one(s, SQL_EDGE_LIST, texts, 3, memory_edge_from_row, &w->result)
             : status;
}

int store_memory_edge_update(struct store *s, const char *ns, const char *from, const char *to,
                             const json_t *body, json_t **ret_edge) {
  if (!s || !from || !to || !json_is_object(body))
    return STORE_INVALID;
  struct memory_write w = {.body = body, .ns = memory_ns(ns), .id = from, .id2 = to};
  return memory_run_write(s, edge_update_tx, &w, ret_edge);
}

static int edge_delete_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  const char *const texts[] = {w->ns, w->id, w->id2};
  int changed = 0;
  int status = memory_exec(s, SQL_EDGE_DELETE, texts, 3, &changed);
  return status == STORE_OK && changed == 0 ? STORE_NOT_FOUND : status;
}

int store_memory_edge_delete(struct store *s, const char *ns, const char *from, const char *to) {
  if (!s || !from || !to)
    return STORE_INVALID;
  struct memory_write w = {.ns = memory_ns(ns), .id = from, .id2 = to};
  return memory_run_write(s, edge_delete_tx, &w, NULL);
}
