/* Memory rows: conversion of rows to records, the inserts shared by CRUD and import, and
 * small statement runners. */
#include "store/memory_rows.h"

#include <stdlib.h>
#include <string.h>

#include "store/connection.h"
#include "store/memory.h"
#include "store/util.h"

static const char SQL_INSERT_GLOBAL[] =
    "INSERT INTO global_nodes (id, name, intent, objectives, triggers, risks, prior, n,"
    " successes, improvements, reward_sum, ema, created_at, updated_at, namespace)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
static const char SQL_INSERT_LOCAL[] =
    "INSERT INTO local_nodes (id, global_id, name, edit_pattern, knob_move, checks, families,"
    " n, successes, reward_sum, created_at, updated_at, namespace)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
static const char SQL_INSERT_EDGE[] =
    "INSERT INTO edges (from_id, to_id, when_text, rationale, risks, n, reward_sum, created_at,"
    " updated_at, namespace) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
static const char SQL_INSERT_EVIDENCE[] =
    "INSERT INTO local_evidence (local_id, task_id, candidate_id, reward, outcome, note,"
    " created_at, namespace) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
static const char SQL_DELETE_EVIDENCE[] = "DELETE FROM local_evidence WHERE namespace = ?1";
static const char SQL_DELETE_EDGES[] = "DELETE FROM edges WHERE namespace = ?1";
static const char SQL_DELETE_LOCALS[] = "DELETE FROM local_nodes WHERE namespace = ?1";
static const char SQL_DELETE_GLOBALS[] = "DELETE FROM global_nodes WHERE namespace = ?1";
static const char SQL_MARK_SEEDED[] =
    "INSERT INTO memory_meta (key, value) VALUES ('seeded', ?1)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value";

const char *memory_ns(const char *ns) {
  return ns ? ns : MEMORY_DEFAULT_NAMESPACE;
}

/* ---- columns ---- */

/* Text of a NOT NULL column; NULL (logged) when SQLite could not produce it. */
static const char *text_col(struct db_stmt *st, int col) {
  const char *text = (const char *)db_column_text(st, col);
  if (!text)
    store_log("column %s is NULL or unreadable", db_column_name(st, col));
  return text;
}

/* Text of a nullable column: NULL for SQL NULL. */
static const char *opt_text_col(struct db_stmt *st, int col) {
  return db_column_type(st, col) == DB_NULL ? NULL
                                                     : (const char *)db_column_text(st, col);
}

/* A JSON column; SQL NULL gives JSON null when nullable. Caller owns the result. */
static json_t *json_col(struct db_stmt *st, int col, bool nullable) {
  if (db_column_type(st, col) == DB_NULL) {
    if (nullable)
      return json_null();
    store_log("column %s is NULL", db_column_name(st, col));
    return NULL;
  }
  const char *text = text_col(st, col);
  return text ? st_json_loads(text) : NULL;
}

/* A REAL column that may be NULL, as a JSON number or null. Caller owns the result. */
static json_t *real_or_null(struct db_stmt *st, int col) {
  json_t *v = db_column_type(st, col) == DB_NULL
                  ? json_null()
                  : json_real(db_column_double(st, col));
  if (!v)
    store_log("out of memory (JSON)");
  return v;
}

/* reward_sum / n as a JSON number, or null while n is 0. Caller owns the result. */
static json_t *mean_of(double sum, double n) {
  json_t *v = n > 0 ? json_real(sum / n) : json_null();
  if (!v)
    store_log("out of memory (JSON)");
  return v;
}

/* ---- rows to records ---- */

enum { GC_ID, GC_NAME, GC_INTENT, GC_OBJECTIVES, GC_TRIGGERS, GC_RISKS, GC_PRIOR, GC_N,
       GC_SUCCESSES, GC_IMPROVEMENTS, GC_REWARD_SUM, GC_EMA, GC_CREATED, GC_UPDATED,
       GC_LOCAL_COUNT };

/* The stats object of a global row; caller owns it. */
static json_t *global_stats(struct db_stmt *st, int flags) {
  json_int_t n = db_column_int64(st, GC_N);
  double sum = db_column_double(st, GC_REWARD_SUM);
  json_t *ema = real_or_null(st, GC_EMA);
  if (!ema)
    return NULL;
  if (flags & MEMORY_ROW_EXPORT)
    return st_json_pack("{s:I, s:I, s:I, s:f, s:o}", "n", n, "successes",
                        (json_int_t)db_column_int64(st, GC_SUCCESSES), "improvements",
                        (json_int_t)db_column_int64(st, GC_IMPROVEMENTS), "reward_sum",
                        sum, "ema", ema);
  json_t *mean = mean_of(sum, (double)n);
  if (!mean) {
    json_decref(ema);
    return NULL;
  }
  return st_json_pack("{s:I, s:I, s:I, s:f, s:o, s:o}", "n", n, "successes",
                      (json_int_t)db_column_int64(st, GC_SUCCESSES), "improvements",
                      (json_int_t)db_column_int64(st, GC_IMPROVEMENTS), "reward_sum", sum,
                      "mean", mean, "ema", ema);
}

json_t *memory_global_from_row(struct db_stmt *st, int flags) {
  const char *id = text_col(st, GC_ID), *name = text_col(st, GC_NAME);
  const char *intent = text_col(st, GC_INTENT);
  const char *created = text_col(st, GC_CREATED), *updated = text_col(st, GC_UPDATED);
  if (!id || !name || !intent || !created || !updated)
    return NULL;
  json_t *objectives = json_col(st, GC_OBJECTIVES, false);
  json_t *triggers = objectives ? json_col(st, GC_TRIGGERS, false) : NULL;
  json_t *risks = triggers ? json_col(st, GC_RISKS, false) : NULL;
  json_t *stats = risks ? global_stats(st, flags) : NULL;
  if (!stats) {
    json_decref(objectives);
    json_decref(triggers);
    json_decref(risks);
    return NULL;
  }
  double prior = db_column_double(st, GC_PRIOR);
  if (flags & MEMORY_ROW_EXPORT)
    return st_json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:f, s:o, s:s, s:s}", "id", id, "name",
                        name, "intent", intent, "objectives", objectives, "triggers", triggers,
                        "risks", risks, "prior", prior, "stats", stats, "created_at", created,
                        "updated_at", updated);
  return st_json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:f, s:o, s:I, s:s, s:s}", "id", id,
                      "name", name, "intent", intent, "objectives", objectives, "triggers",
                      triggers, "risks", risks, "prior", prior, "stats", stats, "local_count",
                      (json_int_t)db_column_int64(st, GC_LOCAL_COUNT), "created_at",
                      created, "updated_at", updated);
}

enum { LC_ID, LC_GLOBAL, LC_NAME, LC_EDIT, LC_KNOB, LC_CHECKS, LC_FAMILIES, LC_N,
       LC_SUCCESSES, LC_REWARD_SUM, LC_CREATED, LC_UPDATED };

/* The stats object of a local row; caller owns it. */
static json_t *local_stats(struct db_stmt *st, int flags) {
  json_int_t n = db_column_int64(st, LC_N);
  json_int_t successes = db_column_int64(st, LC_SUCCESSES);
  double sum = db_column_double(st, LC_REWARD_SUM);
  if (flags & MEMORY_ROW_EXPORT)
    return st_json_pack("{s:I, s:I, s:f}", "n", n, "successes", successes, "reward_sum", sum);
  json_t *mean = mean_of(sum, (double)n);
  return mean ? st_json_pack("{s:I, s:I, s:f, s:o}", "n", n, "successes", successes,
                             "reward_sum", sum, "mean", mean)
              : NULL;
}

json_t *memory_local_from_row(struct db_stmt *st, int flags) {
  const char *id = text_col(st, LC_ID), *global = text_col(st, LC_GLOBAL);
  const char *name = text_col(st, LC_NAME), *edit = text_col(st, LC_EDIT);
  const char *created = text_col(st, LC_CREATED), *updated = text_col(st, LC_UPDATED);
  if (!id || !global || !name || !edit || !created || !updated)
    return NULL;
  json_t *knob = json_col(st, LC_KNOB, true);
  json_t *checks = knob ? json_col(st, LC_CHECKS, false) : NULL;
  json_t *families = checks ? json_col(st, LC_FAMILIES, false) : NULL;
  json_t *stats = families ? local_stats(st, flags) : NULL;
  if (!stats) {
    json_decref(knob);
    json_decref(checks);
    json_decref(families);
    return NULL;
  }
  return st_json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:s}", "id", id, "global",
                      global, "name", name, "edit_pattern", edit, "knob_move", knob, "checks",
                      checks, "families", families, "stats", stats, "created_at", created,
                      "updated_at", updated);
}

enum { EC_FROM, EC_TO, EC_WHEN, EC_RATIONALE, EC_RISKS, EC_N, EC_REWARD_SUM, EC_CREATED,
       EC_UPDATED };

json_t *memory_edge_from_row(struct db_stmt *st, int flags) {
  const char *from = text_col(st, EC_FROM), *to = text_col(st, EC_TO);
  const char *when = text_col(st, EC_WHEN), *rationale = text_col(st, EC_RATIONALE);
  const char *created = text_col(st, EC_CREATED), *updated = text_col(st, EC_UPDATED);
  if (!from || !to || !when || !rationale || !created || !updated)
    return NULL;
  double n = db_column_double(st, EC_N), sum = db_column_double(st, EC_REWARD_SUM);
  json_t *risks = json_col(st, EC_RISKS, false);
  json_t *stats = NULL;
  if (risks && (flags & MEMORY_ROW_EXPORT)) {
    stats = st_json_pack("{s:f, s:f}", "n", n, "reward_sum", sum);
  } else if (risks) {
    json_t *mean = mean_of(sum, n);
    stats = mean ? st_json_pack("{s:f, s:f, s:o}", "n", n, "reward_sum", sum, "mean", mean)
                 : NULL;
  }
  if (!stats) {
    json_decref(risks);
    return NULL;
  }
  return st_json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:s}", "from", from, "to", to,
                      "when", when, "rationale", rationale, "risks", risks, "stats", stats,
                      "created_at", created, "updated_at", updated);
}

enum { VC_TASK, VC_CANDIDATE, VC_REWARD, VC_OUTCOME, VC_NOTE, VC_CREATED };

json_t *memory_evidence_from_row(struct db_stmt *st, int flags) {
  (void)flags;
  const char *outcome = text_col(st, VC_OUTCOME), *created = text_col(st, VC_CREATED);
  if (!outcome || !created)
    return NULL;
  return st_json_pack("{s:s?, s:s?, s:f, s:s, s:s?, s:s}", "task_id", opt_text_col(st, VC_TASK),
                      "candidate_id", opt_text_col(st, VC_CANDIDATE), "reward",
                      db_column_double(st, VC_REWARD), "outcome", outcome, "note",
                      opt_text_col(st, VC_NOTE), "created_at", created);
}

/* ---- statement runners ---- */

static bool bind_texts(struct db_stmt *st, const char *const *texts, int n) {
  for (int i = 0; i < n; i++)
    if (!st_bind_text(st, i + 1, texts[i]))
      return false;
  return true;
}

int memory_collect(struct store *s, const char *sql, const char *const *texts, int n,
                   memory_row_fn fn, int flags, json_t **ret_items) {
  json_t *items = st_json_array();
  struct db_stmt *st = items ? store_stmt(s, sql) : NULL;
  if (!st || !bind_texts(st, texts, n)) {
    if (st)
      st_done(st);
    json_decref(items);
    return STORE_ERROR;
  }
  int rc, status = STORE_OK;
  while ((rc = st_step(st)) == DB_ROW) {
    json_t *rec = fn(st, flags);
    if (!rec || st_json_array_append_new(items, rec) != 0) {
      status = STORE_ERROR;
      break;
    }
  }
  if (status == STORE_OK && rc != DB_DONE)
    status = st_fail(st, rc);
  st_done(st);
  if (status == STORE_OK)
    *ret_items = items;
  else
    json_decref(items);
  return status;
}

int memory_exec(struct store *s, const char *sql, const char *const *texts, int n,
                int *ret_changes) {
  struct db_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  int status = STORE_ERROR;
  if (bind_texts(st, texts, n)) {
    int rc = st_step(st);
    status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  }
  if (status == STORE_OK && ret_changes)
    *ret_changes = db_changes(db_handle(st));
  st_done(st);
  return status;
}

int memory_exists(struct store *s, const char *sql, const char *const *texts, int n,
                  bool *ret_exists) {
  struct db_stmt *st = store_stmt(s, sql);
  if (!st)
    return STORE_ERROR;
  int status = STORE_ERROR;
  if (bind_texts(st, texts, n)) {
    int rc = st_step(st);
    status = rc == DB_ROW || rc == DB_DONE ? STORE_OK : st_fail(st, rc);
    if (status == STORE_OK)
      *ret_exists = rc == DB_ROW;
  }
  st_done(st);
  return status;
}

/* ---- inserts ---- */

/* Texts made for one insert, freed after its step. */
struct owned {
  char *p[4];
  int n;
};

static void owned_free(struct owned *o) {
  for (int i = 0; i < o->n; i++)
    free(o->p[i]);
}

/* Binds member key of obj at idx: a string as is, an array or object as its JSON text,
 * else dflt (NULL binds NULL). */
static bool bind_member(struct db_stmt *st, int idx, const json_t *obj, const char *key,
                        const char *dflt, struct owned *o) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_string(v))
    return st_bind_text(st, idx, json_string_value(v));
  if (!json_is_array(v) && !json_is_object(v))
    return st_bind_text(st, idx, dflt);
  char *text = st_json_dumps(v);
  if (!text)
    return false;
  o->p[o->n++] = text;
  return st_bind_text(st, idx, text);
}

/* Binds a number member at idx, or dflt when absent (or JSON null when nullable). */
static bool bind_number(struct db_stmt *st, int idx, const json_t *obj, const char *key,
                        double dflt, bool null_default) {
  const json_t *v = json_object_get(obj, key);
  int rc = json_is_number(v) ? db_bind_double(st, idx, json_number_value(v))
           : null_default    ? db_bind_null(st, idx)
                             : db_bind_double(st, idx, dflt);
  if (rc != DB_OK)
    store_log("bind %d: %s", idx, db_errstr(rc));
  return rc == DB_OK;
}

/* Binds the two timestamps at idx and idx+1: the body's in MEMORY_IMPORT, else now. */
static bool bind_times(struct db_stmt *st, int idx, const json_t *obj, enum memory_mode mode,
                       const char *now) {
  const json_t *c = mode == MEMORY_IMPORT ? json_object_get(obj, "created_at") : NULL;
  const json_t *u = mode == MEMORY_IMPORT ? json_object_get(obj, "updated_at") : NULL;
  return st_bind_text(st, idx, c ? json_string_value(c) : now) &&
         st_bind_text(st, idx + 1, u ? json_string_value(u) : now);
}

/* Steps an insert: a primary key clash is STORE_CONFLICT, a dangling reference
 * STORE_INVALID. Resets st and frees o. */
static int finish_insert(struct db_stmt *st, bool bound, struct owned *o) {
  int status = STORE_ERROR;
  if (bound) {
    int rc = st_step(st);
    status = rc == DB_DONE                     ? STORE_OK
             : rc == DB_CONSTRAINT_PRIMARYKEY  ? STORE_CONFLICT
             : rc == DB_CONSTRAINT_FOREIGNKEY  ? STORE_INVALID
                                                   : st_fail(st, rc);
  }
  st_done(st);
  owned_free(o);
  return status;
}

int memory_insert_global(struct store *s, const char *ns, const json_t *g, const char *id,
                         enum memory_mode mode, const char *now) {
  struct db_stmt *st = store_stmt(s, SQL_INSERT_GLOBAL);
  if (!st)
    return STORE_ERROR;
  struct owned o = {.n = 0};
  const json_t *stats = mode == MEMORY_IMPORT ? json_object_get(g, "stats") : NULL;
  bool bound = st_bind_text(st, 1, id) && bind_member(st, 2, g, "name", NULL, &o) &&
               bind_member(st, 3, g, "intent", "", &o) &&
               bind_member(st, 4, g, "objectives", "[]", &o) &&
               bind_member(st, 5, g, "triggers", "[]", &o) &&
               bind_member(st, 6, g, "risks", "[]", &o) &&
               bind_number(st, 7, g, "prior", 0, false) &&
               bind_number(st, 8, stats, "n", 0, false) &&
               bind_number(st, 9, stats, "successes", 0, false) &&
               bind_number(st, 10, stats, "improvements", 0, false) &&
               bind_number(st, 11, stats, "reward_sum", 0, false) &&
               bind_number(st, 12, stats, "ema", 0, true) && bind_times(st, 13, g, mode, now) &&
               st_bind_text(st, 15, ns);
  return finish_insert(st, bound, &o);
}

int memory_insert_local(struct store *s, const char *ns, const json_t *l, const char *id,
                        const char *global_id, enum memory_mode mode, const char *now) {
  struct db_stmt *st = store_stmt(s, SQL_INSERT_LOCAL);
  if (!st)
    return STORE_ERROR;
  struct owned o = {.n = 0};
  const json_t *stats = mode == MEMORY_IMPORT ? json_object_get(l, "stats") : NULL;
  bool bound = st_bind_text(st, 1, id) &&
               (global_id ? st_bind_text(st, 2, global_id)
                          : bind_member(st, 2, l, "global", NULL, &o)) &&
               bind_member(st, 3, l, "name", NULL, &o) &&
               bind_member(st, 4, l, "edit_pattern", "", &o) &&
               bind_member(st, 5, l, "knob_move", NULL, &o) &&
               bind_member(st, 6, l, "checks", "[]", &o) &&
               bind_member(st, 7, l, "families", "[]", &o) &&
               bind_number(st, 8, stats, "n", 0, false) &&
               bind_number(st, 9, stats, "successes", 0, false) &&
               bind_number(st, 10, stats, "reward_sum", 0, false) &&
               bind_times(st, 11, l, mode, now) && st_bind_text(st, 13, ns);
  return finish_insert(st, bound, &o);
}

int memory_insert_edge(struct store *s, const char *ns, const json_t *e, enum memory_mode mode,
                       const char *now) {
  struct db_stmt *st = store_stmt(s, SQL_INSERT_EDGE);
  if (!st)
    return STORE_ERROR;
  struct owned o = {.n = 0};
  const json_t *stats = mode == MEMORY_IMPORT ? json_object_get(e, "stats") : NULL;
  bool bound = bind_member(st, 1, e, "from", NULL, &o) && bind_member(st, 2, e, "to", NULL, &o) &&
               bind_member(st, 3, e, "when", "", &o) &&
               bind_member(st, 4, e, "rationale", "", &o) &&
               bind_member(st, 5, e, "risks", "[]", &o) &&
               bind_number(st, 6, stats, "n", 0, false) &&
               bind_number(st, 7, stats, "reward_sum", 0, false) &&
               bind_times(st, 8, e, mode, now) && st_bind_text(st, 10, ns);
  return finish_insert(st, bound, &o);
}

int memory_insert_evidence_row(struct store *s, const struct memory_evidence_row *row) {
  struct db_stmt *st = store_stmt(s, SQL_INSERT_EVIDENCE);
  if (!st)
    return STORE_ERROR;
  struct owned o = {.n = 0};
  bool bound = st_bind_text(st, 1, row->local_id) && st_bind_text(st, 2, row->task_id) &&
               st_bind_text(st, 3, row->candidate_id) &&
               db_bind_double(st, 4, row->reward) == DB_OK &&
               st_bind_text(st, 5, row->outcome) && st_bind_text(st, 6, row->note) &&
               st_bind_text(st, 7, row->created_at) && st_bind_text(st, 8, row->ns);
  return finish_insert(st, bound, &o);
}

int memory_insert_evidence(struct store *s, const char *ns, const char *local_id,
                           const json_t *ev, const char *now) {
  const char *created = json_string_value(json_object_get(ev, "created_at"));
  struct memory_evidence_row row = {
      .ns = ns,
      .local_id = local_id,
      .task_id = json_string_value(json_object_get(ev, "task_id")),
      .candidate_id = json_string_value(json_object_get(ev, "candidate_id")),
      .outcome = json_string_value(json_object_get(ev, "outcome")),
      .note = json_string_value(json_object_get(ev, "note")),
      .created_at = created ? created : now,
      .reward = json_number_value(json_object_get(ev, "reward")),
  };
  return memory_insert_evidence_row(s, &row);
}

/* Children first, so the delete does not depend on the foreign_keys pragma. */
int memory_delete_all(struct store *s, const char *ns) {
  const char *const steps[] = {SQL_DELETE_EVIDENCE, SQL_DELETE_EDGES, SQL_DELETE_LOCALS,
                               SQL_DELETE_GLOBALS};
  const char *const texts[] = {ns};
  int status = STORE_OK;
  for (size_t i = 0; i < sizeof steps / sizeof *steps && status == STORE_OK; i++)
    status = memory_exec(s, steps[i], texts, 1, NULL);
  return status;
}

int memory_mark_seeded(struct store *s, const char *now) {
  const char *const texts[] = {now};
  return memory_exec(s, SQL_MARK_SEEDED, texts, 1, NULL);
}
