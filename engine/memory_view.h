/* The memory graph as HTAM arrays: one conversion from the store's JSON, used by the loop
 * and by GET /v1/memory/score. */
#ifndef OPFORGE_MEMORY_VIEW_H
#define OPFORGE_MEMORY_VIEW_H

#include <jansson.h>

#include "engine/htam.h"

/* Arrays whose strings point into graph, which the view holds a reference to. */
struct memory_view {
  json_t *graph;
  struct htam_global *globals;
  size_t n_globals;
  struct htam_local *locals;
  json_t **local_nodes;    /* the JSON node of each local, same order */
  size_t n_locals;
  struct htam_edge *edges;
  size_t n_edges;
  const char **strings;    /* trigger and family pointer arrays, owned */
};

/* Builds a view of graph ({"globals","locals","edges"} from store_memory_load_graph;
 * borrowed, a reference is taken). Returns 0, or -1 on a malformed graph or no memory. */
int memory_view_init(struct memory_view *ret, json_t *graph);

/* Releases the view. Accepts a zeroed struct. */
void memory_view_clear(struct memory_view *v);

/* The JSON node of global id, or NULL (borrowed from the graph). */
json_t *memory_view_global_node(const struct memory_view *v, const char *id);

#endif
