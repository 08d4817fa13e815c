/* The memory graph as HTAM arrays: one conversion from the store's JSON. */
#include "engine/memory_view.h"

#include <stdlib.h>
#include <string.h>

/* A member of a node's "stats" object. */
static json_t *stat(json_t *node, const char *key) {
  return json_object_get(json_object_get(node, "stats"), key);
}

/* Copies the strings of a JSON array into the shared pointer pool; NULL on failure. */
static const char *const *string_list(struct memory_view *v, size_t *used, size_t cap,
                                      json_t *array, size_t *ret_n) {
  size_t start = *used, i;
  json_t *item;
  json_array_foreach(array, i, item) {
    if (!json_is_string(item) || *used >= cap)
      return NULL;
    v->strings[(*used)++] = json_string_value(item);
  }
  *ret_n = *used - start;
  return v->strings + start;
}

/* Counts the string items of every node's triggers and families (pool size). */
static size_t count_strings(json_t *graph) {
  size_t total = 0, i;
  json_t *node;
  json_array_foreach(json_object_get(graph, "globals"), i, node)
    total += json_array_size(json_object_get(node, "triggers"));
  json_array_foreach(json_object_get(graph, "locals"), i, node)
    total += json_array_size(json_object_get(node, "families"));
  return total;
}

static int fill_globals(struct memory_view *v, size_t *used, size_t cap) {
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(v->graph, "globals"), i, g) {
    struct htam_global *out = &v->globals[i];
    out->id = json_string_value(json_object_get(g, "id"));
    out->prior = json_number_value(json_object_get(g, "prior"));
    out->n = json_integer_value(stat(g, "n"));
    out->reward_sum = json_number_value(stat(g, "reward_sum"));
    out->triggers = string_list(v, used, cap, json_object_get(g, "triggers"), &out->n_triggers);
    if (!out->id || (!out->triggers && json_array_size(json_object_get(g, "triggers"))))
      return -1;
  }
  return 0;
}

static int fill_locals(struct memory_view *v, size_t *used, size_t cap) {
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(v->graph, "locals"), i, l) {
    struct htam_local *out = &v->locals[i];
    out->id = json_string_value(json_object_get(l, "id"));
    out->global_id = json_string_value(json_object_get(l, "global"));
    out->n = json_integer_value(stat(l, "n"));
    out->reward_sum = json_number_value(stat(l, "reward_sum"));
    out->families = string_list(v, used, cap, json_object_get(l, "families"), &out->n_families);
    v->local_nodes[i] = l;
    if (!out->id || !out->global_id ||
        (!out->families && json_array_size(json_object_get(l, "families"))))
      return -1;
  }
  return 0;
}

static int fill_edges(struct memory_view *v) {
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(v->graph, "edges"), i, e) {
    struct htam_edge *out = &v->edges[i];
    out->from = json_string_value(json_object_get(e, "from"));
    out->to = json_string_value(json_object_get(e, "to"));
    out->n = json_number_value(stat(e, "n"));
    out->reward_sum = json_number_value(stat(e, "reward_sum"));
    if (!out->from || !out->to)
      return -1;
  }
  return 0;
}

int memory_view_init(struct memory_view *ret, json_t *graph) {
  struct memory_view v = {.graph = json_incref(graph)};
  v.n_globals = json_array_size(json_object_get(graph, "globals"));
  v.n_locals = json_array_size(json_object_get(graph, "locals"));
  v.n_edges = json_array_size(json_object_get(graph, "edges"));
  size_t cap = count_strings(graph), used = 0;
  v.globals = calloc(v.n_globals + 1, sizeof *v.globals);
  v.locals = calloc(v.n_locals + 1, sizeof *v.locals);
  v.local_nodes = calloc(v.n_locals + 1, sizeof *v.local_nodes);
  v.edges = calloc(v.n_edges + 1, sizeof *v.edges);
  v.strings = calloc(cap + 1, sizeof *v.strings);
  if (!v.globals || !v.locals || !v.local_nodes || !v.edges || !v.strings ||
      fill_globals(&v, &used, cap) != 0 || fill_locals(&v, &used, cap) != 0 ||
      fill_edges(&v) != 0) {
    memory_view_clear(&v);
    return -1;
  }
  *ret = v;
  return 0;
}

void memory_view_clear(struct memory_view *v) {
  free(v->globals);
  free(v->locals);
  free(v->local_nodes);
  free(v->edges);
  free(v->strings);
  json_decref(v->graph);
  memset(v, 0, sizeof *v);
}

json_t *memory_view_global_node(const struct memory_view *v, const char *id) {
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(v->graph, "globals"), i, g)
    if (id && strcmp(json_string_value(json_object_get(g, "id")), id) == 0)
      return g;
  return NULL;
}
