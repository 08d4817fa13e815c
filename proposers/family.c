/* A first classification of a task from its profile: op family and bound. */
#include "proposers/family.h"

#include <stdbool.h>
#include <string.h>

/* Families in priority order with the substrings of FX targets that reveal them. */
static const struct {
  const char *family;
  const char *const needles[12];
} rules[] = {
  {"gemm", {"matmul", "linear", "bmm", "addmm", "mm", "einsum", "Linear", NULL}},
  {"softmax", {"softmax", "Softmax", NULL}},
  {"norm", {"norm", "Norm", "rms", "RMS", NULL}},
  {"scan", {"cumsum", "cumprod", NULL}},
  {"pooling", {"pool", "Pool", NULL}},
  {"loss", {"loss", "Loss", "cross_entropy", "kl_div", "margin", NULL}},
  {"reduction", {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", NULL}},
};

/* True when some node of the graph has a target containing needle. */
static bool graph_mentions(json_t *graph, const char *needle) {
  size_t i;
  json_t *node;
  json_array_foreach(graph, i, node) {
    const char *target = json_string_value(json_object_get(node, "target"));
    if (target && strstr(target, needle))
      return true;
  }
  return false;
}

const char *family_of_profile(json_t *profile) {
  json_t *graph = json_object_get(profile, "graph");
  if (!json_is_array(graph))
    return "pointwise";
  for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
    for (const char *const *n = rules[r].needles; *n; n++)
      if (graph_mentions(graph, *n))
        return rules[r].family;
  return "pointwise";
}

const char *bound_of_profile(json_t *profile) {
  double flops = json_number_value(json_object_get(profile, "flops"));
  double bytes = json_number_value(json_object_get(profile, "min_bytes"));
  return bytes > 0 && flops / bytes > 15.0 ? "compute" : "memory";
}
