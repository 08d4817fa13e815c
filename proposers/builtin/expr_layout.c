/* The channels-last view of a pointwise IR (see expr.h, expr_channels_last;
 * docs/architecture.md, "Channels-last convolutions"). */
#include <stdbool.h>
#include <string.h>

#include "proposers/builtin/expr.h"

/* True when names (borrowed array of strings) holds name. */
static bool listed(const json_t *names, const char *name) {
  size_t i;
  json_t *v;
  json_array_foreach(names, i, v) if (name && json_is_string(v) &&
                                      strcmp(json_string_value(v), name) == 0) return true;
  return false;
}

/* Memory dim of the result for physical position j of rank n: N first, the channel (dim 1)
 * last, the spatial dims in between. */
static int channels_last_dim(int j, int n) {
  return j == 0 ? 0 : j == n - 1 ? 1 : j + 1;
}

/* The leaf's shape and strides in physical order as JSON arrays (caller owns the object
 * {"shape", "strides"}), or NULL when it does not broadcast or a listed leaf is not full
 * and contiguous. */
static json_t *physical_leaf(const json_t *ir, size_t leaf, bool stored_channels_last) {
  long long size[8], stride[8];
  int n = expr_broadcast_strides(ir, leaf, size, stride);
  if (n < 0)
    return NULL;
  long long acc = 1;
  for (int d = n - 1; d >= 0 && stored_channels_last; d--) {
    if (size[d] != 1 && stride[d] != acc)
      return NULL;  /* a view of the tensor, not the tensor itself */
    acc *= size[d];
  }
  json_t *shape = json_array(), *strides = json_array();
  long long contiguous[8];
  acc = 1;
  for (int j = n - 1; j >= 0; j--) {
    contiguous[j] = acc;
    acc *= size[channels_last_dim(j, n)];
  }
  for (int j = 0; j < n; j++) {
    int d = channels_last_dim(j, n);
    long long s = stored_channels_last ? contiguous[j] : stride[d];
    json_array_append_new(shape, json_integer(s == 0 ? 1 : size[d]));
    json_array_append_new(strides, json_integer(s == 0 ? 0 : s));
  }
  return json_pack("{s:o, s:o}", "shape", shape, "strides", strides);
}

json_t *expr_channels_last(const json_t *ir, const json_t *physical) {
  const json_t *shape = json_object_get(ir, "shape");
  int n = (int)json_array_size(shape);
  if (n != 4 && n != 5)
    return NULL;
  json_t *out = json_deep_copy(ir), *permuted = json_array();
  for (int j = 0; j < n; j++)
    json_array_append(permuted, json_array_get(shape, (size_t)channels_last_dim(j, n)));
  json_t *leaves = json_object_get(out, "leaves"), *l;
  size_t i;
  json_array_foreach(leaves, i, l) {
    const char *tensor = json_string_value(json_object_get(l, "tensor"));
    json_t *p = physical_leaf(ir, i, listed(physical, tensor));
    if (!p) {
      json_decref(permuted);
      json_decref(out);
      return NULL;
    }
    json_object_set(l, "shape", json_object_get(p, "shape"));
    json_object_set(l, "strides", json_object_get(p, "strides"));
    json_decref(p);
  }
  json_object_set_new(out, "shape", permuted);
  return out;
}
