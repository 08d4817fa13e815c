/* The HTAM memory graph in the store: global directions, local strategies with their
 * evidence, transition edges; their CRUD, export/import/reset/seed, and the per-step
 * statistics update of the optimization loop. The rules records must follow are in
 * store/memory_validate.h.
 *
 * Shapes (every record is a Jansson object; the API serves them as they are):
 *   global: {"id","name","intent","objectives":[s],"triggers":[s],"risks":[s],"prior",
 *            "stats":{"n","successes","improvements","reward_sum","mean","ema"},
 *            "local_count","created_at","updated_at"}
 *   local:  {"id","global","name","edit_pattern","knob_move":{"knob","op","value"}|null,
 *            "checks":[s],"families":[s],"stats":{"n","successes","reward_sum","mean"},
 *            "created_at","updated_at"}  (+ "evidence":[...] from store_memory_local_get)
 *   evidence: {"task_id","candidate_id","reward","outcome","note","created_at"}
 *   edge:   {"from","to","when","rationale","risks":[s],"stats":{"n","reward_sum","mean"},
 *            "created_at","updated_at"}
 * mean is reward_sum/n, null while n is 0; ema is null until the first try.
 *
 * Namespaces: every record belongs to one namespace, named by the ns argument of each
 * function (NULL means MEMORY_DEFAULT_NAMESPACE). A namespace starts empty, from the
 * seed, or as a copy of another; a task reads and writes only its own. A function given
 * a namespace that does not exist finds nothing (STORE_NOT_FOUND where it looks a record
 * up, empty lists otherwise): callers that must tell check store_memory_namespace_get.
 *
 * The export document is {"version":1,"exported_at", "globals","locals","edges"}: the
 * same records without the derived members (mean, local_count), with every local's
 * evidence (oldest first) and without edges' stats.mean. Import takes that document, or
 * one without stats, evidence and timestamps (schema/seed_memory.json is one). */
#ifndef OPFORGE_STORE_MEMORY_H
#define OPFORGE_STORE_MEMORY_H

#include <jansson.h>
#include <stdbool.h>

#include "store/memory_validate.h"
#include "store/status.h"

#define MEMORY_EVIDENCE_SHOWN 20   /* rows store_memory_local_get returns */
#define MEMORY_DEFAULT_NAMESPACE "default"
#define MEMORY_NAMESPACE_MAX 64    /* bytes of a namespace name */
#define MEMORY_STEP_MAX_PREFIX 8   /* prefix positions of one step's update */

/* CRUD of nodes and edges: bodies are borrowed and must have passed the memory_check_*
 * of their mode; functions that return a record give the caller its reference. why (may
 * be NULL) is filled on STORE_INVALID (a reference that resolves to nothing; the field
 * names it) and STORE_CONFLICT (the id or edge already exists). */

/* ---- global nodes (store/memory_global.c) ---- */

/* Every global node, in creation order: *ret_items is an array. */
int store_memory_global_list(struct store *s, const char *ns, json_t **ret_items);

/* One global node; STORE_NOT_FOUND when there is none. */
int store_memory_global_get(struct store *s, const char *ns, const char *id, json_t **ret_node);

/* Creates a global node from a MEMORY_CREATE body. Without "id" the id is
 * memory_slug(name), with "_2", "_3", ... appended while taken. Stats start at zero.
 * STORE_CONFLICT when the body's id is taken. */
int store_memory_global_create(struct store *s, const char *ns, const json_t *body,
                               struct memory_invalid *why, json_t **ret_node);

/* Replaces the descriptive fields present in a MEMORY_PATCH body (never the stats) and
 * updated_at. STORE_NOT_FOUND when there is no such node. */
int store_memory_global_update(struct store *s, const char *ns, const char *id,
                               const json_t *body, json_t **ret_node);

/* Deletes a global node. With local nodes under it: STORE_CONFLICT unless cascade, which
 * also deletes them and their evidence. Edges from or to it are deleted either way. */
int store_memory_global_delete(struct store *s, const char *ns, const char *id, bool cascade);

/* ---- local nodes (store/memory_local.c) ---- */

/* The local nodes under a global node, in creation order; STORE_NOT_FOUND when the
 * global node does not exist. */
int store_memory_local_list(struct store *s, const char *ns, const char *global_id,
                            json_t **ret_items);

/* One local node with "evidence": its newest MEMORY_EVIDENCE_SHOWN rows, newest first. */
int store_memory_local_get(struct store *s, const char *ns, const char *id, json_t **ret_node);

/* Creates a local node under global_id from a MEMORY_CREATE body (id from the name when
 * absent). STORE_NOT_FOUND when global_id does not exist; STORE_CONFLICT when the id is
 * taken. */
int store_memory_local_create(struct store *s, const char *ns, const char *global_id,
                              const json_t *body, struct memory_invalid *why,
                              json_t **ret_node);

/* Applies a MEMORY_PATCH body; a "global" moves the node. STORE_NOT_FOUND when there is
 * no such local node; STORE_INVALID when "global" names no node. */
int store_memory_local_update(struct store *s, const char *ns, const char *id,
                              const json_t *body, struct memory_invalid *why,
                              json_t **ret_node);

/* Deletes a local node and its evidence. */
int store_memory_local_delete(struct store *s, const char *ns, const char *id);

/* ---- edges (store/memory_edges.c) ---- */

/* Edges, in creation order, optionally only those from from and/or to to (NULL: any). */
int store_memory_edge_list(struct store *s, const char *ns, const char *from, const char *to,
                           json_t **ret_items);

/* One edge; STORE_NOT_FOUND when there is none. */
int store_memory_edge_get(struct store *s, const char *ns, const char *from, const char *to,
                          json_t **ret_edge);

/* Creates an edge from a MEMORY_CREATE body with zero stats. STORE_INVALID when from or
 * to names no global node; STORE_CONFLICT when the edge exists. */
int store_memory_edge_create(struct store *s, const char *ns, const json_t *body,
                             struct memory_invalid *why, json_t **ret_edge);

/* Applies a MEMORY_PATCH body (when, rationale, risks). */
int store_memory_edge_update(struct store *s, const char *ns, const char *from, const char *to,
                             const json_t *body, json_t **ret_edge);

/* Deletes one edge. */
int store_memory_edge_delete(struct store *s, const char *ns, const char *from, const char *to);

/* ---- whole memory (store/memory_io.c) ---- */

/* The export document of namespace ns described at the top; *ret_doc is the caller's.
 * STORE_NOT_FOUND when ns does not exist. */
int store_memory_export(struct store *s, const char *ns, json_t **ret_doc);

/* Validates doc (borrowed) with memory_check_document, then replaces the whole memory of
 * namespace ns (STORE_NOT_FOUND when it does not exist) with it in one transaction. STORE_INVALID with *ret_why (may be NULL) filled when the
 * document is refused; nothing changes then, nor on any other failure. On STORE_OK,
 * *ret_counts (may be NULL; caller owns) is {"globals","locals","edges","evidence"}. */
int store_memory_import(struct store *s, const char *ns, const json_t *doc,
                        struct memory_invalid *ret_why, json_t **ret_counts);

/* Replaces the whole memory of namespace ns with the embedded seed
 * (schema/seed_memory.json), stats at zero and no evidence. *ret_counts as for import
 * (may be NULL). STORE_NOT_FOUND when ns does not exist. */
int store_memory_reset(struct store *s, const char *ns, json_t **ret_counts);

/* Loads the seed into the default namespace when it has never been seeded or imported
 * and holds no node; call it once at server start. *ret_loaded (may be NULL) says
 * whether it did. */
int store_memory_seed_if_empty(struct store *s, bool *ret_loaded);

/* ---- the optimization loop (store/memory_io.c, store/memory_step.c) ---- */

/* The whole graph of namespace ns for scoring: {"globals":[global...],"locals":[local...],
 * "edges":[edge...]} in the shapes above (locals without evidence). Caller owns it.
 * STORE_NOT_FOUND when ns does not exist. */
int store_memory_load_graph(struct store *s, const char *ns, json_t **ret_graph);

/* One step's memory update. Strings are borrowed. */
struct memory_step_update {
  const char *ns;                     /* the task's namespace; NULL: the default */
  const char *task_id, *candidate_id; /* for the evidence row; may be NULL */
  const char *global_id;              /* the direction taken; required */
  const char *local_id;               /* the strategy taken; NULL for none */
  double reward;                      /* r, finite */
  bool correct;                       /* counts as a success */
  bool improved;                      /* beat the best so far (global improvements) */
  const char *outcome;                /* evidence outcome, 1..MEMORY_OUTCOME_MAX bytes */
  const char *note;                   /* evidence note, NULL or at most MEMORY_NOTE_MAX */
  double ema_alpha;                   /* in (0, 1] */
  int n_prefix;                       /* 0..MEMORY_STEP_MAX_PREFIX */
  const char *prefix[MEMORY_STEP_MAX_PREFIX]; /* most recent first */
  double alpha[MEMORY_STEP_MAX_PREFIX];       /* position weights, finite and >= 0 */
};

/* Records a step; joins the caller's store_transaction when called inside one.
 * - global: n += 1, reward_sum += r, successes += correct, improvements += improved,
 *   ema = (1-a)*ema + a*r (ema = r on the first try);
 * - local (when local_id names one): n += 1, reward_sum += r, successes += correct, and
 *   an evidence row; only the newest MEMORY_EVIDENCE_KEEP rows are kept;
 * - each edge prefix[i] -> global_id: created (empty texts) when missing, n += alpha[i],
 *   reward_sum += alpha[i]*r.
 * A local_id or prefix id that names no node (deleted while the task ran) is skipped.
 * STORE_NOT_FOUND when global_id names no node, STORE_INVALID for bad arguments; then
 * nothing is changed. */
int store_memory_record_step(struct store *s, const struct memory_step_update *u);

/* ---- namespaces (store/memory_namespaces.c) ---- */

/* True when name can name a namespace: ^[a-z0-9][a-z0-9_-]{0,63}$, and neither "seed"
 * nor "empty" (the origins of a new one). */
bool store_memory_namespace_valid(const char *name);

/* Every namespace, oldest first: *ret_items is an array of
 * {"name","origin","created_at","globals","locals","edges"}. */
int store_memory_namespace_list(struct store *s, json_t **ret_items);

/* One namespace in the list's shape; STORE_NOT_FOUND when there is none. */
int store_memory_namespace_get(struct store *s, const char *name, json_t **ret_ns);

/* Creates namespace name from "seed" (the embedded seed, stats at zero), "empty", or the
 * name of another namespace (a copy of its records, statistics and evidence).
 * STORE_CONFLICT when name exists; STORE_NOT_FOUND when from names no namespace;
 * STORE_INVALID for a bad name. *ret_ns (may be NULL) as store_memory_namespace_get. */
int store_memory_namespace_create(struct store *s, const char *name, const char *from,
                                  json_t **ret_ns);

/* Deletes namespace name and every record in it. STORE_INVALID for the default one;
 * STORE_CONFLICT while a queued or running task uses it; STORE_NOT_FOUND when there is
 * none. */
int store_memory_namespace_delete(struct store *s, const char *name);

#endif
