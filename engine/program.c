/* Programs composed from per-region choices, and read back (see program.h). */
#include "engine/program.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* A copy of plan (borrowed) whose tensor arguments, and the tensor names of its
 * "channels_last" list, are renamed through map ({from: to}; names missing from it stay).
 * Caller owns. */
static json_t *renamed_plan(json_t *plan, json_t *map) {
  json_t *out = json_deep_copy(plan), *launch, *arg, *name;
  size_t i, j;
  json_array_foreach(json_object_get(out, "launches"), i, launch) {
    json_array_foreach(json_object_get(launch, "args"), j, arg) {
      json_t *to = json_object_get(map, json_string_value(json_object_get(arg, "tensor")));
      if (json_is_string(to))
        json_object_set(arg, "tensor", to);
    }
  }
  json_t *layout = json_object_get(out, "channels_last");
  json_array_foreach(layout, i, name) {
    json_t *to = json_object_get(map, json_string_value(name));
    if (json_is_string(to))
      json_array_set(layout, i, to);
  }
  return out;
}

/* {to: from} for every pair of map (caller owns). */
static json_t *inverted(json_t *map) {
  json_t *out = json_object(), *v;
  const char *k;
  json_object_foreach(map, k, v) json_object_set_new(out, json_string_value(v), json_string(k));
  return out;
}

/* Appends one library step per node of region r (number k); the targets come from the
 * task's graph (borrowed). */
static void append_library(json_t *steps, json_t *nodes_of_graph, const struct region *r,
                           size_t k) {
  size_t i;
  json_t *name;
  json_array_foreach(r->nodes, i, name) {
    const char *target = NULL;
    size_t j;
    json_t *node;
    json_array_foreach(nodes_of_graph, j, node) {
      if (json_equal(json_object_get(node, "name"), name))
        target = json_string_value(json_object_get(node, "target"));
    }
    json_array_append_new(steps, json_pack("{s:s, s:O, s:i}", "library", target ? target : "op",
                                           "node", name, "region", (int)k));
  }
}

static json_t *region_step(const struct region *r, size_t k, json_t *choice) {
  return json_pack("{s:i, s:s, s:O, s:O, s:O, s:o, s:O, s:O}", "region", (int)k, "family",
                   r->family, "nodes", r->nodes, "source", json_object_get(choice, "source"),
                   "options", json_object_get(choice, "options"), "plan",
                   renamed_plan(json_object_get(choice, "plan"), r->io), "reads", r->reads,
                   "writes", r->writes);
}

json_t *program_compose(const struct partition *pt, json_t *const *choices, const char *graph) {
  if (pt->n == 1 && pt->regions[0].whole && pt->regions[0].generated && choices && choices[0])
    return json_pack("{s:O, s:O, s:O}", "source", json_object_get(choices[0], "source"),
                     "options", json_object_get(choices[0], "options"), "plan",
                     json_object_get(choices[0], "plan"));
  json_t *steps = json_array();
  if (pt->whole_model)
    json_array_append_new(steps, json_pack("{s:s}", "library", "model"));
  for (size_t k = 0; k < pt->n; k++) {
    const struct region *r = &pt->regions[k];
    if (r->generated && choices && choices[k])
      json_array_append_new(steps, region_step(r, k, choices[k]));
    else
      append_library(steps, pt->graph, r, k);
  }
  json_t *mode = !graph || strcmp(graph, "auto") == 0 ? json_string("auto")
                 : json_boolean(strcmp(graph, "true") == 0);
  return json_pack("{s:{s:o, s:o}}", "program", "graph", mode, "steps", steps);
}

json_t *program_reference(const struct partition *pt) {
  return program_compose(pt, NULL, "auto");
}

json_t *program_whole_model(void) {
  return json_pack("{s:{s:s, s:[{s:s}]}}", "program", "graph", "auto", "steps", "library",
                   "model");
}

void program_choices(const struct partition *pt, json_t *candidate, json_t **ret_choices) {
  for (size_t k = 0; k < pt->n; k++)
    ret_choices[k] = NULL;
  json_t *program = json_object_get(candidate, "program");
  if (!json_is_object(program)) {
    if (pt->n == 1 && pt->regions[0].whole && json_is_string(json_object_get(candidate, "source")))
      ret_choices[0] = json_pack("{s:O, s:O, s:O}", "source", json_object_get(candidate, "source"),
                                 "options", json_object_get(candidate, "options"), "plan",
                                 json_object_get(candidate, "plan"));
    return;
  }
  size_t i;
  json_t *step;
  json_array_foreach(json_object_get(program, "steps"), i, step) {
    json_t *region = json_object_get(step, "region");
    if (!json_is_integer(region) || !json_object_get(step, "source"))
      continue;
    size_t k = (size_t)json_integer_value(region);
    if (k >= pt->n || !pt->regions[k].generated || ret_choices[k])
      continue;
    json_t *back = inverted(pt->regions[k].io);
    ret_choices[k] = json_pack("{s:O, s:O, s:o}", "source", json_object_get(step, "source"),
                               "options", json_object_get(step, "options"), "plan",
                               renamed_plan(json_object_get(step, "plan"), back));
    json_decref(back);
  }
}

void program_choices_clear(json_t **choices, size_t n) {
  for (size_t k = 0; k < n; k++) {
    json_decref(choices[k]);
    choices[k] = NULL;
  }
}

void program_region_times(const struct partition *pt, json_t *candidate, json_t *result,
                          double *ret_ms) {
  for (size_t k = 0; k < pt->n; k++)
    ret_ms[k] = -1;
  json_t *program = json_object_get(candidate, "program");
  if (!json_is_object(program))
    program = NULL;
  double median = json_number_value(json_object_get(json_object_get(result, "time"), "median_ms"));
  if (!program) {
    if (pt->n == 1 && median > 0)
      ret_ms[0] = median;
    return;
  }
  json_t *steps_ms = json_object_get(result, "steps_ms"), *step;
  size_t i;
  json_array_foreach(json_object_get(program, "steps"), i, step) {
    json_t *region = json_object_get(step, "region"), *ms = json_array_get(steps_ms, i);
    if (!json_is_integer(region) || !json_is_number(ms))
      continue;
    size_t k = (size_t)json_integer_value(region);
    if (k < pt->n)
      ret_ms[k] = (ret_ms[k] < 0 ? 0 : ret_ms[k]) + json_number_value(ms);
  }
}

double program_region_floor(const struct partition *pt, json_t *profile, size_t k) {
  if (k >= pt->n)
    return 0;
  const struct region *r = &pt->regions[k];
  if (r->whole)
    return json_number_value(json_object_get(profile, "floor_ms"));
  json_t *basis = json_object_get(profile, "floor_basis");
  double bw = json_number_value(json_object_get(basis, "copy_bw_Bps"));
  double peak = json_number_value(json_object_get(basis, "fp32_peak_flops"));
  double mem = bw > 0 ? r->bytes / bw * 1e3 : 0, comp = peak > 0 ? r->flops / peak * 1e3 : 0;
  return mem > comp ? mem : comp;
}

size_t program_library_steps(json_t *candidate) {
  size_t n = 0, i;
  json_t *step;
  json_array_foreach(json_object_get(json_object_get(candidate, "program"), "steps"), i, step)
      n += json_object_get(step, "library") != NULL;
  return n;
}
