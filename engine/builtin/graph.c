/* Helpers over the profile's FX graph for the builtin families. */
#include <string.h>

#include "engine/builtin/builtin.h"

json_t *graph_node(json_t *profile, const char *name) {
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *n = json_string_value(json_object_get(node, "name"));
    if (n && name && strcmp(n, name) == 0)
      return node;
  }
  return NULL;
}

json_t *graph_calls(json_t *profile) {
  json_t *calls = json_array();
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    if (calls && op && strncmp(op, "call_", 5) == 0)
      json_array_append(calls, node);
  }
  return calls;
}

bool graph_target_is(json_t *node, const char *op) {
  const char *target = json_string_value(json_object_get(node, "target"));
  if (!target || !op)
    return false;
  const char *last = strrchr(target, '.');
  return strcmp(last ? last + 1 : target, op) == 0;
}

int graph_shape(json_t *node, long long dims[8]) {
  json_t *shape = json_object_get(node, "shape");
  if (!json_is_array(shape) || json_array_size(shape) > 8)
    return -1;
  size_t i;
  json_t *d;
  json_array_foreach(shape, i, d) {
    if (!json_is_integer(d))
      return -1;
    dims[i] = json_integer_value(d);
  }
  return (int)json_array_size(shape);
}
