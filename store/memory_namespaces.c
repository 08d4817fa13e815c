/* Memory namespaces: list, get, create (from the seed, empty, or a copy of another) and
 * delete. Each namespace holds a memory graph of its own (docs/architecture.md, "Store"). */
#include "store/memory.h"

#include <string.h>

#include "store/connection.h"
#include "store/memory_rows.h"
#include "store/memory_write.h"
#include "store/util.h"

static const char SQL_NS_LIST[] =
    "SELECT n.name, n.origin, n.created_at,"
    " (SELECT COUNT(*) FROM global_nodes g WHERE g.namespace = n.name),"
    " (SELECT COUNT(*) FROM local_nodes l WHERE l.namespace = n.name),"
    " (SELECT COUNT(*) FROM edges e WHERE e.namespace = n.name)"
    " FROM memory_namespaces n ORDER BY n.rowid";
static const char SQL_NS_GET[] =
    "SELECT n.name, n.origin, n.created_at,"
    " (SELECT COUNT(*) FROM global_nodes g WHERE g.namespace = n.name),"
    " (SELECT COUNT(*) FROM local_nodes l WHERE l.namespace = n.name),"
    " (SELECT COUNT(*) FROM edges e WHERE e.namespace = n.name)"
    " FROM memory_namespaces n WHERE n.name = ?1";
static const char SQL_NS_EXISTS[] = "SELECT 1 FROM memory_namespaces WHERE name = ?1";
static const char SQL_NS_INSERT[] =
    "INSERT INTO memory_namespaces (name, origin, created_at) VALUES (?1, ?2, ?3)";
static const char SQL_NS_DELETE[] = "DELETE FROM memory_namespaces WHERE name = ?1";
static const char SQL_NS_IN_USE[] =
    "SELECT 1 FROM tasks WHERE status IN ('queued', 'running')"
    " AND COALESCE(json_extract(options, '$.memory'), '" MEMORY_DEFAULT_NAMESPACE "') = ?1"
    " LIMIT 1";

/* Copies of every record of namespace ?2 into namespace ?1, in list order. */
static const char SQL_COPY_GLOBALS[] =
    "INSERT INTO global_nodes (namespace, id, name, intent, objectives, triggers, risks, prior,"
    " n, successes, improvements, reward_sum, ema, created_at, updated_at)"
    " SELECT ?1, id, name, intent, objectives, triggers, risks, prior, n, successes,"
    " improvements, reward_sum, ema, created_at, updated_at FROM global_nodes"
    " WHERE namespace = ?2 ORDER BY rowid";
static const char SQL_COPY_LOCALS[] =
    "INSERT INTO local_nodes (namespace, id, global_id, name, edit_pattern, knob_move, checks,"
    " families, n, successes, reward_sum, created_at, updated_at)"
    " SELECT ?1, id, global_id, name, edit_pattern, knob_move, checks, families, n, successes,"
    " reward_sum, created_at, updated_at FROM local_nodes WHERE namespace = ?2 ORDER BY rowid";
static const char SQL_COPY_EVIDENCE[] =
    "INSERT INTO local_evidence (namespace, local_id, task_id, candidate_id, reward, outcome,"
    " note, created_at)"
    " SELECT ?1, local_id, task_id, candidate_id, reward, outcome, note, created_at"
    " FROM local_evidence WHERE namespace = ?2 ORDER BY id";
static const char SQL_COPY_EDGES[] =
    "INSERT INTO edges (namespace, from_id, to_id, when_text, rationale, risks, n, reward_sum,"
    " created_at, updated_at)"
    " SELECT ?1, from_id, to_id, when_text, rationale, risks, n, reward_sum, created_at,"
    " updated_at FROM edges WHERE namespace = ?2 ORDER BY rowid";

enum { NC_NAME, NC_ORIGIN, NC_CREATED, NC_GLOBALS, NC_LOCALS, NC_EDGES };

static json_t *namespace_from_row(struct db_stmt *st, int flags) {
  (void)flags;
  const char *name = (const char *)db_column_text(st, NC_NAME);
  const char *origin = (const char *)db_column_text(st, NC_ORIGIN);
  const char *created = (const char *)db_column_text(st, NC_CREATED);
  if (!name || !origin || !created) {
    store_log("memory_namespaces: unreadable row");
    return NULL;
  }
  return st_json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "name", name, "origin", origin,
                      "created_at", created, "globals",
                      (json_int_t)db_column_int64(st, NC_GLOBALS), "locals",
                      (json_int_t)db_column_int64(st, NC_LOCALS), "edges",
                      (json_int_t)db_column_int64(st, NC_EDGES));
}

bool store_memory_namespace_valid(const char *name) {
  if (!name || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
    return false;
  size_t len = strlen(name);
  if (len > MEMORY_NAMESPACE_MAX || strcmp(name, "seed") == 0 || strcmp(name, "empty") == 0)
    return false;
  for (size_t i = 1; i < len; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  }
  return true;
}

int memory_namespace_check(struct store *s, const char *ns) {
  const char *const texts[] = {ns};
  bool found = false;
  int status = memory_exists(s, SQL_NS_EXISTS, texts, 1, &found);
  return status == STORE_OK && !found ? STORE_NOT_FOUND : status;
}

int store_memory_namespace_list(struct store *s, json_t **ret_items) {
  if (!s || !ret_items)
    return STORE_INVALID;
  return memory_collect(s, SQL_NS_LIST, NULL, 0, namespace_from_row, 0, ret_items);
}

int store_memory_namespace_get(struct store *s, const char *name, json_t **ret_ns) {
  if (!s || !name || !ret_ns)
    return STORE_INVALID;
  const char *const texts[] = {name};
  return memory_load_one(s, SQL_NS_GET, texts, 1, namespace_from_row, ret_ns);
}

/* Fills the new namespace w->ns from w->id: "seed", "empty" or another namespace. */
static int fill_namespace(struct store *s, struct memory_write *w) {
  if (strcmp(w->id, "empty") == 0)
    return STORE_OK;
  if (strcmp(w->id, "seed") == 0) {
    json_t *seed = NULL;
    int status = memory_load_seed(&seed);
    if (status == STORE_OK)
      status = memory_insert_document(s, w->ns, seed, w->now);
    json_decref(seed);
    return status;
  }
  const char *const steps[] = {SQL_COPY_GLOBALS, SQL_COPY_LOCALS, SQL_COPY_EVIDENCE,
                               SQL_COPY_EDGES};
  const char *const texts[] = {w->ns, w->id};
  int status = STORE_OK;
  for (size_t i = 0; i < sizeof steps / sizeof *steps && status == STORE_OK; i++)
    status = memory_exec(s, steps[i], texts, 2, NULL);
  return status;
}

static int namespace_create_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  json_decref(w->result);
  w->result = NULL;
  int status = memory_namespace_check(s, w->ns);
  if (status == STORE_OK)
    return STORE_CONFLICT;
  if (status != STORE_NOT_FOUND)
    return status;
  bool copy = strcmp(w->id, "seed") != 0 && strcmp(w->id, "empty") != 0;
  status = copy ? memory_namespace_check(s, w->id) : STORE_OK;
  const char *const texts[] = {w->ns, w->id, w->now};
  if (status == STORE_OK)
    status = memory_exec(s, SQL_NS_INSERT, texts, 3, NULL);
  if (status == STORE_OK)
    status = fill_namespace(s, w);
  const char *const name[] = {w->ns};
  return status == STORE_OK
             ? memory_load_one(s, SQL_NS_GET, name, 1, namespace_from_row, &w->result)
             : status;
}

int store_memory_namespace_create(struct store *s, const char *name, const char *from,
                                  json_t **ret_ns) {
  if (!s || !from || !store_memory_namespace_valid(name) ||
      (strcmp(from, "seed") != 0 && strcmp(from, "empty") != 0 &&
       !store_memory_namespace_valid(from)))
    return STORE_INVALID;
  struct memory_write w = {.ns = name, .id = from};
  return memory_run_write(s, namespace_create_tx, &w, ret_ns);
}

static int namespace_delete_tx(struct store *s, void *arg) {
  struct memory_write *w = arg;
  int status = memory_namespace_check(s, w->ns);
  bool busy = false;
  const char *const texts[] = {w->ns};
  if (status == STORE_OK)
    status = memory_exists(s, SQL_NS_IN_USE, texts, 1, &busy);
  if (status == STORE_OK && busy)
    return STORE_CONFLICT;
  if (status == STORE_OK)
    status = memory_delete_all(s, w->ns);
  if (status == STORE_OK)
    status = memory_exec(s, SQL_NS_DELETE, texts, 1, NULL);
  return status;
}

int store_memory_namespace_delete(struct store *s, const char *name) {
  if (!s || !name || strcmp(name, MEMORY_DEFAULT_NAMESPACE) == 0)
    return STORE_INVALID;
  struct memory_write w = {.ns = name};
  return memory_run_write(s, namespace_delete_tx, &w, NULL);
}
