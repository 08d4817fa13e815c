/* KernelBench export of a program (docs/architecture.md, "Programs: regions, library
 * steps, composition"): the checked steps, one CUDA translation unit and launcher per
 * region, and the Python tables that export_program_runtime.py runs. */
#include "handlers/export_kernelbench.h"
#include "handlers/export_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/embedded.h"

/* As many steps as the evaluator runs (gpu/evaluator/program.py, MAX_STEPS): a model
 * such as ResNet-101 has over 300 ops, each a library step of its reference program. */
#define MAX_STEPS 4096
#define MAX_REGION_ID 999999

/* handlers/export_program_runtime.py and handlers/export_stage.cu, embedded at build
 * time. */
extern const struct embedded_file opforge_export_runtime[];
extern const struct embedded_file opforge_export_stage[];

/* One region step, ready to write. Everything is owned. */
struct region {
  long id;
  char name[16];     /* "r<id>": the file's name and the kernels' prefix without '_' */
  char launcher[24]; /* "ofg_r<id>" */
  char *kernels;     /* the -D options as #defines, the renamed source, the #undefs */
  char *launcher_text;
  char *flags;       /* nvcc flags as Python list items */
  json_t *plan;      /* the plan with the kernels renamed; ts borrows names from it */
  struct xtensors *ts;
};

/* The program being exported. profile, candidate and steps are borrowed. */
struct program {
  const json_t *profile, *candidate, *steps;
  struct xtensors *ts; /* the profile's inputs, params and outputs */
  struct region *regions; /* one per region step, in step order (owned) */
  size_t n_regions;
  bool capture, trace;
};

/* Frees what r owns and zeroes it (a region never filled clears too). */
static void region_clear(struct region *r) {
  free(r->kernels);
  free(r->launcher_text);
  free(r->flags);
  free(r->ts);
  json_decref(r->plan);
  memset(r, 0, sizeof *r);
}

/* The profile graph's node called name (borrowed from profile), or NULL. */
static const json_t *graph_node(const json_t *profile, const char *name) {
  const json_t *graph = json_object_get(profile, "graph"), *node;
  size_t i;
  json_array_foreach(graph, i, node) {
    const char *have = json_string_value(json_object_get(node, "name"));
    if (have && name && strcmp(have, name) == 0)
      return node;
  }
  return NULL;
}

/* ---- library steps --------------------------------------------------------------------- */

/* Checks step index, a library step: "model", or a call or get_attr node of the graph
 * (which the runtime must then trace). 0, or -1 with the reason in err. */
static int check_library(struct program *p, const json_t *step, size_t index, char *err,
                         size_t errlen) {
  const char *target = json_string_value(json_object_get(step, "library"));
  const json_t *node_name = json_object_get(step, "node");
  if (!target || !*target)
    return export_fail(err, errlen, "program: step %zu: library must be a non-empty string",
                       index);
  if (strcmp(target, "model") == 0 && !node_name)
    return 0;
  const char *source = json_string_value(json_object_get(p->profile, "graph_source"));
  if (!source || (strcmp(source, "fx") != 0 && strcmp(source, "fx_meta") != 0 &&
                  strcmp(source, "export") != 0))
    return export_fail(err, errlen,
                       "program: step %zu runs a node, but the profile has no traced graph",
                       index);
  const json_t *node = graph_node(p->profile, json_string_value(node_name));
  const char *op = json_string_value(json_object_get(node, "op"));
  if (!node)
    return export_fail(err, errlen, "program: step %zu: node '%.64s' is not in the graph",
                       index, json_is_string(node_name) ? json_string_value(node_name) : "?");
  if (!op || (strncmp(op, "call_", 5) != 0 && strcmp(op, "get_attr") != 0))
    return export_fail(err, errlen, "program: step %zu: node '%s' is a %s, not a call", index,
                       json_string_value(node_name), op ? op : "(no op)");
  p->trace = true;
  return 0;
}

/* ---- a region's tensors ----------------------------------------------------------------- */

/* The entry of a region tensor called name (borrowed, and so by the entry): a profile
 * tensor, or node:<name> with the graph node's dtype and shape. 0, or -1 with the reason
 * in err. */
static int region_tensor(const struct program *p, const char *name, struct xtensor *ret,
                         char *err, size_t errlen) {
  long k = export_tensor_index(p->ts, name);
  if (k >= 0) {
    *ret = p->ts->items[k];
    return 0;
  }
  const json_t *node = NULL;
  if (strncmp(name, "node:", 5) == 0)
    node = graph_node(p->profile, name + 5);
  if (!node)
    return export_fail(err, errlen, "unknown tensor '%.64s'", name);
  const struct export_dtype *dtype =
      export_dtype_find(json_string_value(json_object_get(node, "dtype")));
  const json_t *shape = json_object_get(node, "shape");
  if (!dtype || !export_shape_ok(shape))
    return export_fail(err, errlen, "%s has no tensor dtype and shape in the profile", name);
  *ret = (struct xtensor){name, dtype, shape, TENSOR_NODE, 0, false, false};
  return 0;
}

/* Appends name (borrowed) to the region's tensors unless it is there; 0 or -1. */
static int add_region_tensor(const struct program *p, struct region *r, const char *name,
                             char *err, size_t errlen) {
  if (export_tensor_index(r->ts, name) >= 0)
    return 0;
  if (r->ts->n == EXPORT_MAX_TENSORS)
    return export_fail(err, errlen, "more than %d tensors", EXPORT_MAX_TENSORS);
  return region_tensor(p, name, &r->ts->items[r->ts->n++], err, errlen);
}

/* Fills r->ts with the tensors plan's launches name, in order of first use, and marks
 * those of writes (which must be among them, and not inputs or parameters). The entries
 * borrow their names from plan and the profile. 0, or -1 with the reason in err. */
static int collect_region_tensors(const struct program *p, struct region *r,
                                  const json_t *plan, const json_t *writes, char *err,
                                  size_t errlen) {
  const json_t *launch, *arg, *w;
  size_t li, ai;
  r->ts->n = r->ts->n_outputs = 0;
  json_array_foreach(json_object_get(plan, "launches"), li, launch) {
    json_array_foreach(json_object_get(launch, "args"), ai, arg) {
      const char *name = json_string_value(json_object_get(arg, "tensor"));
      if (name && add_region_tensor(p, r, name, err, errlen) != 0)
        return -1;
    }
  }
  if (writes && !json_is_array(writes))
    return export_fail(err, errlen, "writes must be an array of names");
  json_array_foreach(writes, li, w) {
    long k = export_tensor_index(r->ts, json_string_value(w));
    if (k < 0)
      return export_fail(err, errlen, "writes '%.64s', which its plan never names",
                         json_is_string(w) ? json_string_value(w) : "(not a string)");
    if (r->ts->items[k].kind == TENSOR_INPUT || r->ts->items[k].kind == TENSOR_PARAM)
      return export_fail(err, errlen, "writes %s, an input of the task",
                         r->ts->items[k].name);
    r->ts->items[k].written = true;
  }
  return 0;
}

/* ---- a region's texts --------------------------------------------------------------------- */

/* A copy of plan (the caller decrefs) whose launches name their kernels prefix + name,
 * with the kernel names as they were in *ret_names (the caller decrefs); NULL when out of
 * memory. Malformed launches are left for the launcher to refuse. */
static json_t *rename_plan(const json_t *plan, const char *prefix, json_t **ret_names) {
  json_t *copy = json_deep_copy(plan), *names = json_array(), *launch;
  size_t i;
  char name[160];
  if (!copy || !names) {
    json_decref(copy);
    json_decref(names);
    return NULL;
  }
  json_array_foreach(json_object_get(copy, "launches"), i, launch) {
    const char *kernel = json_string_value(json_object_get(launch, "kernel"));
    if (!export_is_identifier(kernel) || strlen(kernel) > 128)
      continue;
    snprintf(name, sizeof name, "%s%s", prefix, kernel);
    json_array_append_new(names, json_string(kernel));
    json_object_set_new(launch, "kernel", json_string(name));
  }
  *ret_names = names;
  return copy;
}

/* The region's kernels (the caller frees them): its -D options as #defines at the top,
 * its source with the kernels renamed, the #undefs. NULL when out of memory. */
static char *kernels_text(const struct region *r, const json_t *step, const char *source,
                          const struct export_options *o) {
  const json_t *nodes = json_object_get(step, "nodes"), *n;
  const char *family = json_string_value(json_object_get(step, "family"));
  struct export_text t;
  char err[8];
  size_t i, len = strlen(source);
  if (export_text_open(&t, err, sizeof err) != 0)
    return NULL;
  fprintf(t.f, "// opforge region %ld (", r->id);
  export_put_safe(t.f, family ? family : "?");
  json_array_foreach(nodes, i, n) {
    fputs(i ? ", " : ": ", t.f);
    export_put_safe(t.f, json_string_value(n));
  }
  fputs(*o->defines ? "). Its -D options:\n" : ").\n", t.f);
  fputs(o->defines, t.f);
  fputs(source, t.f);
  if (len > 0 && source[len - 1] != '\n')
    fputc('\n', t.f);
  fputs(o->undefs, t.f);
  char *text = NULL;
  return export_text_close(&t, true, &text, err, sizeof err) == 0 ? text : NULL;
}

/* Fills r's plan (renamed), tensors, kernels and launcher text from step (borrowed); r
 * owns them, also on failure (the caller clears it). 0, or -1 with the reason in err. */
static int region_texts(const struct program *p, struct region *r, const json_t *step,
                        const struct export_options *o, char *err, size_t errlen) {
  char prefix[20], comment[200];
  json_t *names = NULL;
  snprintf(prefix, sizeof prefix, "%s_", r->name);
  json_t *plan = r->plan = rename_plan(json_object_get(step, "plan"), prefix, &names);
  char *source = plan ? export_rename_kernels(json_string_value(json_object_get(step, "source")),
                                              prefix, names)
                      : NULL;
  int rc = source ? 0 : export_fail(err, errlen, "out of memory");
  struct export_text t;
  if (rc == 0)
    rc = collect_region_tensors(p, r, plan, json_object_get(step, "writes"), err, errlen);
  if (rc == 0)
    rc = export_read_channels_last(plan, r->ts, err, errlen);
  snprintf(comment, sizeof comment,
           "// opforge launcher of region %ld: its tensors are those of its entry in\n"
           "// _OFG_STEPS, in that order; launches run in plan order on stream.\n",
           r->id);
  if (rc == 0 && (rc = export_text_open(&t, err, errlen)) == 0)
    rc = export_text_close(&t,
                           export_put_launcher(t.f, r->ts, plan, r->launcher, comment, err,
                                               errlen) == 0,
                           &r->launcher_text, err, errlen);
  if (rc == 0 && !(r->kernels = kernels_text(r, step, source, o)))
    rc = export_fail(err, errlen, "out of memory");
  free(source);
  json_decref(names);
  return rc;
}

/* ---- the steps ----------------------------------------------------------------------------- */

/* Checks region step index and fills r, which owns what it holds (the caller clears it,
 * also on failure). 0, or -1 with the reason, naming the step, in err. */
static int build_region(struct program *p, const json_t *step, size_t index, struct region *r,
                        char *err, size_t errlen) {
  const json_t *id = json_object_get(step, "region");
  const char *source = json_string_value(json_object_get(step, "source"));
  if (!json_is_integer(id) || json_integer_value(id) < 0 ||
      json_integer_value(id) > MAX_REGION_ID)
    return export_fail(err, errlen, "program: step %zu: region must be an integer from 0 to %d",
                       index, MAX_REGION_ID);
  r->id = (long)json_integer_value(id);
  for (size_t i = 0; i < p->n_regions; i++)
    if (p->regions[i].id == r->id)
      return export_fail(err, errlen, "program: step %zu: region %ld appears twice", index,
                         r->id);
  snprintf(r->name, sizeof r->name, "r%ld", r->id);
  snprintf(r->launcher, sizeof r->launcher, "ofg_r%ld", r->id);
  if (!source || !*source)
    return export_fail(err, errlen, "program: step %zu (region %ld): source is empty", index,
                       r->id);
  struct export_options o = {NULL, NULL, NULL};
  char why[256] = "";
  int rc = export_options_build(json_object_get(step, "options"), &o, why, sizeof why);
  if (rc == 0 && !(r->ts = malloc(sizeof *r->ts)))
    rc = export_fail(why, sizeof why, "out of memory");
  if (rc == 0)
    rc = region_texts(p, r, step, &o, why, sizeof why);
  if (rc == 0) {
    r->flags = o.flags;
    o.flags = NULL;
  }
  export_options_clear(&o);
  if (rc != 0)
    return export_fail(err, errlen, "program: step %zu (region %ld): %s", index, r->id, why);
  return 0;
}

/* Whether the program is captured as one CUDA graph: "graph" true, or "auto" where the
 * evaluation says the graph was used. */
static int read_capture(struct program *p, const json_t *program, char *err, size_t errlen) {
  const json_t *graph = json_object_get(program, "graph");
  const json_t *used = json_object_get(
      json_object_get(json_object_get(p->candidate, "result"), "graph"), "used");
  if (!graph || json_is_false(graph)) {
    p->capture = false;
  } else if (json_is_true(graph)) {
    p->capture = true;
  } else if (json_is_string(graph) && strcmp(json_string_value(graph), "auto") == 0) {
    /* The evaluator says which order it timed: "graph" or "stream" (true/false are
     * accepted as well). */
    p->capture = json_is_true(used) ||
                 (json_is_string(used) && strcmp(json_string_value(used), "graph") == 0);
  } else {
    return export_fail(err, errlen, "program: graph must be true, false or \"auto\"");
  }
  return 0;
}

/* Checks every step, building the regions into p (export_program frees them). 0, or -1
 * with the reason in err. */
static int check_steps(struct program *p, char *err, size_t errlen) {
  const json_t *program = json_object_get(p->candidate, "program"), *step;
  size_t i;
  p->steps = json_object_get(program, "steps");
  if (!json_is_object(program) || !json_is_array(p->steps) || json_array_size(p->steps) == 0 ||
      json_array_size(p->steps) > MAX_STEPS)
    return export_fail(err, errlen, "program: steps must be an array of 1 to %d steps",
                       MAX_STEPS);
  if (read_capture(p, program, err, errlen) != 0)
    return -1;
  size_t region_steps = 0;
  json_array_foreach(p->steps, i, step) region_steps += json_object_get(step, "region") != NULL;
  if (region_steps && !(p->regions = calloc(region_steps, sizeof *p->regions)))
    return export_fail(err, errlen, "out of memory");
  json_array_foreach(p->steps, i, step) {
    if (json_object_get(step, "library")) {
      if (check_library(p, step, i, err, errlen) != 0)
        return -1;
    } else if (json_object_get(step, "region")) {
      struct region *r = &p->regions[p->n_regions];
      if (build_region(p, step, i, r, err, errlen) != 0) {
        region_clear(r);
        return -1;
      }
      p->n_regions++;
    } else {
      return export_fail(err, errlen, "program: step %zu is neither a library step nor a region",
                         i);
    }
  }
  for (i = 1; i < p->n_regions; i++)
    if (strcmp(p->regions[i].flags, p->regions[0].flags) != 0)
      return export_fail(err, errlen,
                         "program: regions %ld and %ld ask for different nvcc flags, and one "
                         "build compiles every region",
                         p->regions[0].id, p->regions[i].id);
  return 0;
}

/* ---- the Python tables ------------------------------------------------------------------ */

/* Appends the node names among v's leaves (a return value as the evaluator encoded it) to
 * names; false when a leaf is not a node. */
static bool output_leaves(const json_t *v, json_t *names, int depth) {
  const char *node = json_string_value(json_object_get(v, "node"));
  if (node)
    return json_array_append_new(names, json_string(node)) == 0;
  if (!json_is_array(v) || depth > 8)
    return false;
  size_t i;
  const json_t *item;
  json_array_foreach(v, i, item) if (!output_leaves(item, names, depth + 1)) return false;
  return true;
}

/* The graph nodes that are the task's outputs, in order (for torch.export graphs, the
 * last ones returned: the mutated buffers come first), as a new array the caller decrefs;
 * empty when the graph does not show them. NULL when out of memory. */
static json_t *output_nodes(const json_t *profile, size_t n_outputs) {
  const json_t *graph = json_object_get(profile, "graph"), *node, *ret = NULL;
  json_t *names = json_array();
  size_t i;
  if (!names)
    return NULL;
  json_array_foreach(graph, i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    if (op && strcmp(op, "output") == 0)
      ret = json_array_get(json_object_get(node, "args"), 0);
  }
  if (!ret || !output_leaves(ret, names, 0) || json_array_size(names) < n_outputs)
    json_array_clear(names);
  while (json_array_size(names) > n_outputs)
    json_array_remove(names, 0);
  return names;
}

/* Writes _OFG_OUTPUT_NODES: outputs (output_nodes); when empty, "output:j" is a value of
 * its own. */
static void put_output_nodes(FILE *f, const json_t *outputs) {
  const json_t *name;
  size_t i;
  fputs("# The graph nodes that are the task's outputs, in order.\n_OFG_OUTPUT_NODES = [", f);
  json_array_foreach(outputs, i, name) {
    fputs(i ? ", " : "", f);
    export_put_py_string(f, json_string_value(name), false);
  }
  fputs("]\n", f);
}

/* The graph nodes whose values a region reads in channels-last order, as the keys of a
 * new object (the caller decrefs); NULL when out of memory. outputs: output_nodes. */
static json_t *channels_last_reads(const struct program *p, const json_t *outputs) {
  json_t *reads = json_object();
  for (size_t i = 0; reads && i < p->n_regions; i++) {
    const struct xtensors *ts = p->regions[i].ts;
    for (size_t k = 0; k < ts->n; k++) {
      const struct xtensor *t = &ts->items[k];
      const char *node = NULL;
      if (!t->channels_last || t->written)
        continue;
      if (t->kind == TENSOR_NODE)
        node = t->name + strlen("node:");
      else if (t->kind == TENSOR_OUTPUT)
        node = json_string_value(
            json_array_get(outputs, strtoul(t->name + strlen("output:"), NULL, 10)));
      if (node && json_object_set_new(reads, node, json_true()) != 0) {
        json_decref(reads);
        return NULL;
      }
    }
  }
  return reads;
}

/* Writes _OFG_CHANNELS_LAST (per region launcher, the values its kernels address in
 * channels-last order) and _OFG_LIBRARY_CHANNELS_LAST (the library convolutions whose
 * values a region reads so, in step order: they run on a channels-last input, as the
 * evaluator ran them). -1 when out of memory. */
static int put_layout(FILE *f, const struct program *p, const json_t *outputs) {
  json_t *reads = channels_last_reads(p, outputs);
  const json_t *step;
  size_t i, n = 0;
  if (!reads)
    return -1;
  fputs("# Channels-last memory order: per region launcher, the values its kernels address\n"
        "# in (N, H, W, C) or (N, D, H, W, C) order, passed so and allocated so when\n"
        "# written; and the library convolutions whose values a region reads so, which run\n"
        "# on a channels-last input.\n_OFG_CHANNELS_LAST = {\n", f);
  for (i = 0; i < p->n_regions; i++) {
    const struct region *r = &p->regions[i];
    size_t k = 0;
    while (k < r->ts->n && !r->ts->items[k].channels_last)
      k++;
    if (k == r->ts->n)
      continue;
    fprintf(f, "    \"%s\": ", r->launcher);
    export_put_channels_last(f, r->ts);
    fputs(",\n", f);
  }
  fputs("}\n_OFG_LIBRARY_CHANNELS_LAST = [", f);
  json_array_foreach(p->steps, i, step) {
    const char *node = json_string_value(json_object_get(step, "node"));
    if (!json_object_get(step, "library") || !node || !json_object_get(reads, node) ||
        !export_is_convolution(graph_node(p->profile, node)))
      continue;
    fputs(n++ ? ", " : "", f);
    export_put_py_string(f, node, false);
  }
  fputs("]\n", f);
  json_decref(reads);
  return 0;
}

/* Writes the region table of one step: (name, dtype, shape, written) per tensor. */
static void put_region_table(FILE *f, const struct region *r) {
  fprintf(f, "    (\"region\", \"%s\", [\n", r->launcher);
  for (size_t i = 0; i < r->ts->n; i++) {
    const struct xtensor *t = &r->ts->items[i];
    fputs("        (", f);
    export_put_py_string(f, t->name, false);
    fprintf(f, ", %s, ", t->dtype->torch);
    export_put_py_shape(f, t->shape);
    fprintf(f, ", %s),\n", t->written ? "True" : "False");
  }
  fputs("    ]),\n", f);
}

/* Writes _OFG_STEPS: ("library", target, node), ("model", "model", None) or ("region",
 * launcher, table) per step. */
static void put_steps(FILE *f, const struct program *p) {
  const json_t *step;
  size_t i, region = 0;
  fputs("# The steps in order: (\"library\", target, node), (\"model\", \"model\", None), or\n"
        "# (\"region\", launcher, [(value, dtype, shape, written by the region)]).\n"
        "_OFG_STEPS = [\n", f);
  json_array_foreach(p->steps, i, step) {
    const char *target = json_string_value(json_object_get(step, "library"));
    const char *node = json_string_value(json_object_get(step, "node"));
    if (target && !node) {
      fputs("    (\"model\", \"model\", None),\n", f);
    } else if (target) {
      fputs("    (\"library\", ", f);
      export_put_py_string(f, target, false);
      fputs(", ", f);
      export_put_py_string(f, node, false);
      fputs("),\n", f);
    } else {
      put_region_table(f, &p->regions[region++]);
    }
  }
  fputs("]\n", f);
}

/* Writes _OFG_STAGE: the input staging kernel (handlers/export_stage.cu) when the program
 * is captured, else None. An export that replays no graph stages nothing, so it carries
 * no such kernel. */
static void put_stage(FILE *f, const struct program *p) {
  fputs("# A captured program's input staging: each call copies its inputs into the buffers\n"
        "# the graph was captured with, in one launch of this kernel (None: not captured).\n"
        "_OFG_STAGE = ", f);
  if (p->capture)
    export_put_py_string(f, opforge_export_stage[0].data, true);
  else
    fputs("None", f);
  fputc('\n', f);
}

/* Writes _OFG_REGIONS and _OFG_BINDINGS, the C++ file binding every launcher (and the
 * staging function of a captured program). */
static void put_regions(FILE *f, const struct program *p) {
  fputs("# Each region: (file name, its kernels, its launcher). The kernels are renamed\n"
        "# r<region>_<name>, so that regions defining the same kernel can be linked together;\n"
        "# the evaluator verified them under NVRTC with their original names.\n"
        "_OFG_REGIONS = [\n", f);
  for (size_t i = 0; i < p->n_regions; i++) {
    fprintf(f, "    (\"%s\", ", p->regions[i].name);
    export_put_py_string(f, p->regions[i].kernels, true);
    fputs(", ", f);
    export_put_py_string(f, p->regions[i].launcher_text, true);
    fputs("),\n", f);
  }
  fputs("]\n_OFG_BINDINGS = \"\"\"// opforge program: the Python bindings of the regions' "
        "launchers.\n#include <torch/extension.h>\n\n", f);
  for (size_t i = 0; i < p->n_regions; i++)
    fprintf(f, "void %s(std::vector<torch::Tensor> tensors, int64_t stream);\n",
            p->regions[i].launcher);
  if (p->capture)
    fputs("void ofg_stage(std::vector<torch::Tensor> dsts, std::vector<torch::Tensor> srcs,\n"
          "               int64_t stream);\n", f);
  fputs("\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n", f);
  for (size_t i = 0; i < p->n_regions; i++)
    fprintf(f, "  m.def(\"%s\", &%s, \"region %ld's launches, in plan order\");\n",
            p->regions[i].launcher, p->regions[i].launcher, p->regions[i].id);
  if (p->capture)
    fputs("  m.def(\"ofg_stage\", &ofg_stage, \"copies the inputs into the captured ones\");\n",
          f);
  fputs("}\n\"\"\"\n", f);
  put_stage(f, p);
}

/* Writes the flags and the head of every region's file. */
static void put_build(FILE *f, const struct program *p) {
  fputs("# nvcc flags: optimize; lift PyTorch's half-precision restrictions, which NVRTC\n"
        "# (where the evaluator compiled the regions) does not have; the regions' flags.\n"
        "_OFG_FLAGS = [\"-O3\", \"-U__CUDA_NO_HALF_OPERATORS__\", "
        "\"-U__CUDA_NO_HALF_CONVERSIONS__\",\n"
        "              \"-U__CUDA_NO_BFLOAT16_CONVERSIONS__\", "
        "\"-U__CUDA_NO_HALF2_OPERATORS__\"", f);
  fputs(p->n_regions ? p->regions[0].flags : "", f);
  fputs("]\n# The head of each region's file: the launcher's headers come before the region's\n"
        "# -D options, which would otherwise reach them (a knob named N or BLOCK can break\n"
        "# those); under NVRTC the options reached only the region.\n"
        "_OFG_TU_HEAD = \"\"\"#include <torch/types.h>\n#include <cuda.h>\n"
        "#include <cuda_runtime.h>\n\"\"\"\n", f);
}

/* Writes the tables the runtime reads; -1 when out of memory. */
static int put_tables(FILE *f, const struct program *p) {
  const char *source = json_string_value(json_object_get(p->profile, "graph_source"));
  fputs("\n\n# ---- the program ----------------------------------------------------------------\n"
        "# How the evaluator traced Model: \"fx\" (torch.fx.symbolic_trace), \"fx_meta\"\n"
        "# (its meta tracer) or \"export\" (torch.export.export); whether a library step\n"
        "# needs that graph; whether the\n"
        "# forward runs as one captured CUDA graph.\n_OFG_GRAPH_SOURCE = ", f);
  if (source && (strcmp(source, "fx") == 0 || strcmp(source, "fx_meta") == 0 ||
                 strcmp(source, "export") == 0))
    fprintf(f, "\"%s\"\n", source);
  else
    fputs("None\n", f);
  fprintf(f, "_OFG_TRACE = %s\n_OFG_CAPTURE = %s\n_OFG_N_OUTPUTS = %zu\n",
          p->trace ? "True" : "False", p->capture ? "True" : "False", p->ts->n_outputs);
  json_t *outputs = output_nodes(p->profile, p->ts->n_outputs);
  if (!outputs)
    return -1;
  put_output_nodes(f, outputs);
  export_put_scalars(f, p->profile, p->ts);
  put_build(f, p);
  put_regions(f, p);
  int rc = put_layout(f, p, outputs);
  json_decref(outputs);
  if (rc != 0)
    return -1;
  put_steps(f, p);
  fputs("\n\ndef _ofg_pack(outputs):\n    \"\"\"What forward returns, in Model's structure.\"\"\"\n"
        "    return ", f);
  export_put_structure(f, p->profile, p->ts->n_outputs);
  fputc('\n', f);
  return 0;
}

/* What the head says the file does: its steps, and for a program of library steps only,
 * what its one kernel is, or that it has none (KernelBench's static checker then refuses
 * it, rightly). */
static const char *program_summary(const struct program *p) {
  if (p->n_regions > 0)
    return "# It runs the candidate's program: each library step as the reference runs\n"
           "# it, through the traced graph of self.ref, and each region through its own\n"
           "# CUDA file and launcher, all built by one torch.utils.cpp_extension.load.\n";
  if (p->capture)
    return "# Its steps are all library steps, run as the reference runs them, and captured\n"
           "# as one CUDA graph: each call copies its inputs into the captured buffers with\n"
           "# the staging kernel of _OFG_STAGE (built by torch.utils.cpp_extension.load),\n"
           "# then replays the graph.\n";
  return "# Its steps are all library steps, run as the reference runs them, in stream\n"
         "# order: it has no kernel of its own, so KernelBench's static checker refuses it\n"
         "# (\"Missing __global__ kernel definition\"). generated=true exports the fastest\n"
         "# correct candidate that runs generated code.\n";
}

/* Writes the whole file; -1 when out of memory. */
static int put_program(FILE *f, const struct program *p) {
  static const char captured_outputs[] =
      "# Captured, its outputs are the graph's own buffers, which the next call\n"
      "# overwrites (as torch.compile's CUDA graphs do): clone an output to keep it.\n";
  char what[1024];
  snprintf(what, sizeof what, "%s%s", program_summary(p), p->capture ? captured_outputs : "");
  export_put_head(f, p->candidate, what, true);
  fputs(opforge_export_runtime[0].data, f);
  return put_tables(f, p);
}

int export_program(const json_t *profile, const json_t *candidate, char **ret_text, char *err,
                   size_t errlen) {
  struct program *p = calloc(1, sizeof *p);
  struct export_text t;
  if (!p || !(p->ts = malloc(sizeof *p->ts))) {
    free(p);
    return export_fail(err, errlen, "out of memory");
  }
  p->profile = profile;
  p->candidate = candidate;
  int rc = export_collect_tensors(p->ts, profile, err, errlen);
  if (rc == 0)
    rc = check_steps(p, err, errlen);
  if (rc == 0 && (rc = export_text_open(&t, err, errlen)) == 0)
    rc = export_text_close(&t, put_program(t.f, p) == 0, ret_text, err, errlen);
  for (size_t i = 0; i < p->n_regions; i++)
    region_clear(&p->regions[i]);
  free(p->regions);
  free(p->ts);
  free(p);
  return rc;
}

int export_library_steps(const json_t *candidate, char *ret_list, size_t list_len) {
  const json_t *steps = json_object_get(json_object_get(candidate, "program"), "steps");
  const json_t *step;
  size_t i, used = 0;
  int n = 0;
  bool cut = false;
  char entry[160];
  json_array_foreach(steps, i, step) {
    const char *target = json_string_value(json_object_get(step, "library"));
    const char *node = json_string_value(json_object_get(step, "node"));
    if (!target)
      continue;
    snprintf(entry, sizeof entry, "%s%s%s%s", n ? ", " : "", target, node ? " " : "",
             node ? node : "");
    n++;
    /* Room is kept for ", ..." and the NUL. */
    if (!cut && list_len > 6 && used + strlen(entry) + 6 <= list_len) {
      memcpy(ret_list + used, entry, strlen(entry));
      used += strlen(entry);
    } else {
      cut = true;
    }
  }
  if (cut && list_len > 6) {
    memcpy(ret_list + used, used ? ", ..." : "...", used ? 5 : 3);
    used += used ? 5 : 3;
  }
  if (list_len)
    ret_list[used < list_len ? used : list_len - 1] = '\0';
  return n;
}
