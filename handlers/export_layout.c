/* Channels-last memory order in the KernelBench export (docs/architecture.md,
 * "Channels-last convolutions"): a plan's "channels_last" list checked and marked on its
 * launcher's tensors, and the Python list of those names. The rules are the evaluator's
 * (gpu/evaluator/layout.py); the export must run what the evaluator ran. Which library
 * convolutions run on a channels-last input is the partition's rule. */
#include "handlers/export_internal.h"

#include "engine/partition.h"

#include <string.h>

bool export_is_convolution(const json_t *node) {
  return partition_is_conv_2d_3d(node);
}

/* Whether one of plan's launches passes the tensor called name. */
static bool launch_passes(const json_t *plan, const char *name) {
  const json_t *launch, *arg;
  size_t li, ai;
  json_array_foreach(json_object_get(plan, "launches"), li, launch) {
    json_array_foreach(json_object_get(launch, "args"), ai, arg) {
      const char *have = json_string_value(json_object_get(arg, "tensor"));
      if (have && strcmp(have, name) == 0)
        return true;
    }
  }
  return false;
}

int export_read_channels_last(const json_t *plan, struct xtensors *ts, char *err,
                              size_t errlen) {
  const json_t *names = json_object_get(plan, "channels_last"), *v;
  size_t i;
  if (!names)
    return 0;
  if (!json_is_array(names))
    return export_fail(err, errlen, "plan: channels_last must be an array of tensor names");
  json_array_foreach(names, i, v) {
    const char *name = json_string_value(v);
    if (!name)
      return export_fail(err, errlen, "plan: channels_last entry %zu is not a tensor name", i);
    long k = export_tensor_index(ts, name);
    if (k < 0 || !launch_passes(plan, name))
      return export_fail(err, errlen, "plan: channels_last names '%.64s', which no launch "
                                      "passes", name);
    struct xtensor *t = &ts->items[k];
    size_t rank = json_array_size(t->shape);
    if (t->channels_last)
      return export_fail(err, errlen, "plan: channels_last names '%s' twice", t->name);
    if (rank != 4 && rank != 5)
      return export_fail(err, errlen, "plan: channels_last names '%s' of rank %zu: "
                                      "channels-last order needs rank 4 or 5", t->name, rank);
    t->channels_last = true;
  }
  return 0;
}

void export_put_channels_last(FILE *f, const struct xtensors *ts) {
  bool first = true;
  fputc('[', f);
  for (size_t i = 0; i < ts->n; i++) {
    if (!ts->items[i].channels_last)
      continue;
    fputs(first ? "" : ", ", f);
    export_put_py_string(f, ts->items[i].name, false);
    first = false;
  }
  fputc(']', f);
}
