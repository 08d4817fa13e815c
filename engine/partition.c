/* The partition of a task's graph into generated regions and library steps (see
 * partition.h). */
#include "engine/partition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the partition works from: the graph, its call nodes, and who uses each value. */
struct graph_index {
  json_t *graph;   /* borrowed from the profile */
  json_t *calls;   /* owned: borrowed call nodes, in order */
  json_t *users;   /* owned: {value node name: [user node names]} ("output" included) */
  json_t *values;  /* owned: {node name: global value name} */
  json_t *generated; /* owned: {call node name: true} for nodes of generated regions so far */
};

static bool is_call(json_t *node) {
  const char *op = json_string_value(json_object_get(node, "op"));
  return op && strncmp(op, "call_", 5) == 0;
}

static const char *node_name(json_t *node) {
  return json_string_value(json_object_get(node, "name"));
}

/* Calls fn(ctx, name) for every {"node": name} reference inside v (args or kwargs). */
static void each_ref(json_t *v, void (*fn)(void *ctx, const char *name), void *ctx) {
  if (json_is_object(v)) {
    const char *name = json_string_value(json_object_get(v, "node"));
    if (name && json_object_size(v) == 1) {
      fn(ctx, name);
      return;
    }
    const char *key;
    json_t *item;
    json_object_foreach(v, key, item) each_ref(item, fn, ctx);
  } else if (json_is_array(v)) {
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) each_ref(item, fn, ctx);
  }
}

static void each_node_ref(json_t *node, void (*fn)(void *ctx, const char *name), void *ctx) {
  each_ref(json_object_get(node, "args"), fn, ctx);
  each_ref(json_object_get(node, "kwargs"), fn, ctx);
}

struct user_ctx {
  json_t *users;
  const char *user;
};

static void add_user(void *ctx, const char *name) {
  struct user_ctx *u = ctx;
  json_t *list = json_object_get(u->users, name);
  if (!list) {
    list = json_array();
    json_object_set_new(u->users, name, list);
  }
  json_array_append_new(list, json_string(u->user));
}

static void collect_refs(void *ctx, const char *name) {
  json_array_append_new(ctx, json_string(name));
}

/* The task's output values in order: the output node's references, flattened; for a
 * torch.export graph the last n_outputs (buffer mutations come first). Caller owns. */
static json_t *output_refs(json_t *graph, size_t n_outputs) {
  json_t *refs = json_array(), *node;
  size_t i;
  json_array_foreach(graph, i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    if (op && strcmp(op, "output") == 0)
      each_node_ref(node, collect_refs, refs);
  }
  while (json_array_size(refs) > n_outputs)
    json_array_remove(refs, 0);
  return refs;
}

/* Names every value (docs/architecture.md, "Values"). */
static json_t *value_names(json_t *profile, json_t *graph) {
  json_t *values = json_object(), *node;
  size_t i;
  char buf[300];
  json_array_foreach(graph, i, node) {
    const char *name = node_name(node), *op = json_string_value(json_object_get(node, "op"));
    const char *tensor = json_string_value(json_object_get(node, "tensor"));
    if (!name || !op || strcmp(op, "output") == 0)
      continue;
    if (tensor)
      snprintf(buf, sizeof buf, "%s", tensor);
    else
      snprintf(buf, sizeof buf, "%s:%s", is_call(node) ? "node" : "scalar", name);
    json_object_set_new(values, name, json_string(buf));
  }
  json_t *outs = output_refs(graph, json_array_size(json_object_get(profile, "outputs")));
  json_t *ref;
  json_array_foreach(outs, i, ref) {
    const char *cur = json_string_value(json_object_get(values, json_string_value(ref)));
    if (cur && strncmp(cur, "node:", 5) == 0) {
      snprintf(buf, sizeof buf, "output:%zu", i);
      json_object_set_new(values, json_string_value(ref), json_string(buf));
    }
  }
  json_decref(outs);
  return values;
}

static void index_clear(struct graph_index *g) {
  json_decref(g->calls);
  json_decref(g->users);
  json_decref(g->values);
  json_decref(g->generated);
}

/* Indexes profile's graph into *g (release with index_clear). -1 when out of memory or
 * when a node has no name. */
static int index_build(json_t *profile, struct graph_index *g) {
  *g = (struct graph_index){.graph = json_object_get(profile, "graph")};
  g->calls = json_array();
  g->users = json_object();
  g->values = value_names(profile, g->graph);
  g->generated = json_object();
  if (!g->calls || !g->users || !g->values || !g->generated)
    return -1;
  size_t i;
  json_t *node;
  json_array_foreach(g->graph, i, node) {
    if (!node_name(node))
      return -1;  /* a graph whose nodes cannot be named cannot be run step by step */
    if (is_call(node))
      json_array_append(g->calls, node);
    struct user_ctx u = {g->users, node_name(node) ? node_name(node) : ""};
    each_node_ref(node, add_user, &u);
  }
  return 0;
}

static json_t *find_node(json_t *graph, const char *name) {
  size_t i;
  json_t *node;
  json_array_foreach(graph, i, node) {
    const char *n = node_name(node);
    if (n && strcmp(n, name) == 0)
      return node;
  }
  return NULL;
}

static size_t dtype_size(const char *dtype) {
  static const struct {
    const char *name;
    size_t size;
  } sizes[] = {{"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},
               {"int32", 4},   {"int16", 2},   {"int8", 1},    {"uint8", 1},    {"bool", 1}};
  for (size_t i = 0; dtype && i < sizeof sizes / sizeof sizes[0]; i++)
    if (strcmp(sizes[i].name, dtype) == 0)
      return sizes[i].size;
  return 0;
}

/* A tensor spec {"name", "dtype", "shape", "numel", "bytes"} of node's value under name,
 * or NULL when the node has no known tensor shape. Caller owns. */
static json_t *value_spec(json_t *node, const char *name) {
  json_t *shape = json_object_get(node, "shape");
  const char *dtype = json_string_value(json_object_get(node, "dtype"));
  size_t esize = dtype_size(dtype), i;
  if (!json_is_array(shape) || !esize)
    return NULL;
  long long numel = 1;
  json_t *d;
  json_array_foreach(shape, i, d) numel *= json_integer_value(d);
  return json_pack("{s:s, s:s, s:O, s:I, s:I}", "name", name, "dtype", dtype, "shape", shape,
                   "numel", (json_int_t)numel, "bytes", (json_int_t)(numel * (long long)esize));
}

/* The region being checked: calls[first .. first+len) and what they touch. */
struct run {
  struct graph_index *g;
  size_t first, len;
  json_t *members;  /* {name: true} */
  json_t *reads;    /* external value node names read, in first-use order */
  char why[256];
};

static bool member(const struct run *r, const char *name) {
  return json_object_get(r->members, name) != NULL;
}

static void note_read(void *ctx, const char *name) {
  struct run *r = ctx;
  if (member(r, name))
    return;
  size_t i;
  json_t *v;
  json_array_foreach(r->reads, i, v) if (strcmp(json_string_value(v), name) == 0) return;
  json_array_append_new(r->reads, json_string(name));
}

/* The values the run makes that later nodes or the output use (caller owns). */
static json_t *escaping(const struct run *r) {
  json_t *out = json_array();
  for (size_t k = 0; k < r->len; k++) {
    const char *name = node_name(json_array_get(r->g->calls, r->first + k));
    size_t i;
    json_t *user;
    json_array_foreach(json_object_get(r->g->users, name), i, user) {
      if (!member(r, json_string_value(user))) {
        json_array_append_new(out, json_string(name));
        break;
      }
    }
  }
  return out;
}

/* Fills r->members and r->reads; -1 with r->why when the run reads a non-tensor value. */
static int run_scan(struct run *r) {
  r->members = json_object();
  r->reads = json_array();
  for (size_t k = 0; k < r->len; k++)
    json_object_set_new(r->members, node_name(json_array_get(r->g->calls, r->first + k)),
                        json_true());
  for (size_t k = 0; k < r->len; k++)
    each_node_ref(json_array_get(r->g->calls, r->first + k), note_read, r);
  size_t i;
  json_t *v;
  json_array_foreach(r->reads, i, v) {
    const char *val = json_string_value(json_object_get(r->g->values, json_string_value(v)));
    if (!val || strncmp(val, "scalar:", 7) == 0) {
      snprintf(r->why, sizeof r->why, "it reads the non-tensor value '%s'", json_string_value(v));
      return -1;
    }
  }
  return 0;
}

static void run_clear(struct run *r) {
  json_decref(r->members);
  json_decref(r->reads);
}

/* Keys of the task profile a sub-profile keeps as they are. */
static const char *const kept_keys[] = {"device", "precision", "tolerance", "sm_count",
                                        "graph_source", "floor_basis", NULL};

/* True when call node's target is one of modules (a call_module) or functions (a
 * call_function), each list ended by NULL. */
static bool target_in(const json_t *node, const char *const *modules,
                      const char *const *functions) {
  const char *op = json_string_value(json_object_get(node, "op"));
  const char *target = json_string_value(json_object_get(node, "target"));
  const char *const *names = !op || !target                    ? NULL
                             : strcmp(op, "call_module") == 0   ? modules
                             : strcmp(op, "call_function") == 0 ? functions
                                                                : NULL;
  for (size_t i = 0; names && names[i]; i++)
    if (strcmp(names[i], target) == 0)
      return true;
  return false;
}

bool partition_is_conv_2d_3d(const json_t *node) {
  static const char *const modules[] = {"Conv2d", "Conv3d", "ConvTranspose2d",
                                        "ConvTranspose3d", NULL};
  static const char *const functions[] = {
      "torch.conv2d", "torch.conv3d", "torch.conv_transpose2d", "torch.conv_transpose3d",
      "torch.nn.functional.conv2d", "torch.nn.functional.conv3d",
      "torch.nn.functional.conv_transpose2d", "torch.nn.functional.conv_transpose3d",
      "aten.conv2d.default", "aten.conv3d.default", "aten.conv_transpose2d.input",
      "aten.conv_transpose3d.input", "aten.convolution.default", NULL};
  return target_in(node, modules, functions);
}

bool partition_is_conv(const json_t *node) {
  static const char *const modules[] = {"Conv1d", "ConvTranspose1d", NULL};
  static const char *const functions[] = {"torch.conv1d", "torch.conv_transpose1d",
                                          "torch.nn.functional.conv1d",
                                          "torch.nn.functional.conv_transpose1d",
                                          "aten.conv1d.default", "aten.conv_transpose1d.input",
                                          NULL};
  return partition_is_conv_2d_3d(node) || target_in(node, modules, functions);
}

/* Whether generated region reg (len call nodes from calls[i]) starts as its library step:
 * one dense convolution, which the convolution family writes (learned as "gemm"; the
 * depthwise ones the pooling family writes start generated). */
static bool starts_library(const struct graph_index *g, size_t i, size_t len,
                           const struct region *reg) {
  return reg->generated && len == 1 && strcmp(reg->family, "gemm") == 0 &&
         partition_is_conv(json_array_get(g->calls, i));
}

/* Adds a read value to the sub-profile: a parameter keeps its node and name; any other
 * tensor becomes placeholder input:k. A value made by a convolution that stays a library
 * step is marked "from_library_conv": cuDNN can make it channels-last at no cost, which
 * the pointwise family's MODE channels_last builds on (docs/architecture.md,
 * "Channels-last convolutions"). */
static int add_read(struct run *r, struct region *reg, json_t *sub, const char *name) {
  json_t *node = find_node(r->g->graph, name);
  const char *global = json_string_value(json_object_get(r->g->values, name));
  if (strncmp(global, "param:", 6) == 0) {
    json_array_append(json_object_get(sub, "graph"), node);
    return 0;
  }
  char local[32];
  snprintf(local, sizeof local, "input:%zu", json_array_size(json_object_get(sub, "inputs")));
  json_t *spec = value_spec(node, local);
  if (!spec) {
    snprintf(r->why, sizeof r->why, "the shape of '%s' is unknown", name);
    return -1;
  }
  reg->bytes += (double)json_integer_value(json_object_get(spec, "bytes"));
  if (partition_is_conv_2d_3d(node) && !json_object_get(r->g->generated, name))
    json_object_set_new(spec, "from_library_conv", json_true());
  json_array_append_new(json_object_get(sub, "inputs"), spec);
  json_array_append_new(json_object_get(sub, "graph"),
                        json_pack("{s:s, s:s, s:s, s:s, s:[], s:{}, s:O, s:O}", "name", name,
                                  "op", "placeholder", "target", name, "tensor", local, "args",
                                  "kwargs", "shape", json_object_get(node, "shape"), "dtype",
                                  json_object_get(node, "dtype")));
  json_object_set_new(reg->io, local, json_string(global));
  json_array_append_new(reg->reads, json_string(global));
  return 0;
}

/* Appends the profile entry of parameter name to params unless it is there already. */
static void add_param(json_t *profile, json_t *params, json_t *name, struct region *reg) {
  size_t j;
  json_t *q;
  json_array_foreach(params, j, q) if (json_equal(json_object_get(q, "name"), name)) return;
  json_array_foreach(json_object_get(profile, "params"), j, q) {
    if (json_equal(json_object_get(q, "name"), name)) {
      json_array_append(params, q);
      reg->bytes += (double)json_integer_value(json_object_get(q, "bytes"));
      return;
    }
  }
}

/* The parameters the region's nodes name, as profile entries (copied into sub). */
static void add_params(json_t *profile, json_t *sub, struct region *reg) {
  json_t *params = json_array(), *node, *name;
  size_t i, k;
  json_array_foreach(json_object_get(sub, "graph"), i, node) {
    const char *tensor = json_string_value(json_object_get(node, "tensor"));
    if (tensor && strncmp(tensor, "param:", 6) == 0)
      add_param(profile, params, json_object_get(node, "tensor"), reg);
    json_array_foreach(json_object_get(node, "params"), k, name)
        add_param(profile, params, name, reg);
  }
  json_object_set_new(sub, "params", params);
}

/* Builds the sub-profile of the run into reg; -1 with r->why when it cannot be built. */
static int sub_profile(struct run *r, json_t *profile, const char *out_name, struct region *reg) {
  json_t *sub = json_pack("{s:[], s:[], s:[], s:[]}", "graph", "inputs", "outputs",
                          "scalar_inputs");
  reg->io = json_object();
  for (size_t i = 0; kept_keys[i]; i++) {
    json_t *v = json_object_get(profile, kept_keys[i]);
    if (v)
      json_object_set(sub, kept_keys[i], v);
  }
  size_t i;
  json_t *v;
  json_array_foreach(r->reads, i, v) if (add_read(r, reg, sub, json_string_value(v)) != 0) {
    json_decref(sub);
    return -1;
  }
  for (size_t k = 0; k < r->len; k++) {
    json_t *node = json_array_get(r->g->calls, r->first + k);
    json_array_append(json_object_get(sub, "graph"), node);
    reg->flops += json_number_value(json_object_get(node, "flops"));
  }
  json_t *last = find_node(r->g->graph, out_name), *spec = value_spec(last, "output:0");
  if (!spec) {
    snprintf(r->why, sizeof r->why, "the shape of '%s' is unknown", out_name);
    json_decref(sub);
    return -1;
  }
  reg->bytes += (double)json_integer_value(json_object_get(spec, "bytes"));
  json_array_append_new(json_object_get(sub, "outputs"), spec);
  json_array_append_new(json_object_get(sub, "graph"),
                        json_pack("{s:s, s:s, s:s, s:[{s:s}], s:{}, s:O, s:O}", "name", "output",
                                  "op", "output", "target", "output", "args", "node", out_name,
                                  "kwargs", "shape", json_object_get(last, "shape"), "dtype",
                                  json_object_get(last, "dtype")));
  add_params(profile, sub, reg);
  json_object_set_new(sub, "min_bytes", json_integer((json_int_t)reg->bytes));
  json_object_set_new(sub, "flops", json_integer((json_int_t)reg->flops));
  json_object_set_new(sub, "degenerate", json_false());
  char name[200];
  snprintf(name, sizeof name, "%s/%s", json_string_value(json_object_get(profile, "name")),
           out_name);
  json_object_set_new(sub, "name", json_string(name));
  const char *global = json_string_value(json_object_get(r->g->values, out_name));
  json_object_set_new(reg->io, "output:0", json_string(global));
  json_array_append_new(reg->writes, json_string(global));
  reg->profile = sub;
  return 0;
}

/* The whole graph as one region: its profile is the task's own. */
static void whole_region(json_t *profile, struct graph_index *g, struct region *reg) {
  reg->whole = true;
  reg->profile = json_incref(profile);
  reg->io = json_object();
  reg->bytes = json_number_value(json_object_get(profile, "min_bytes"));
  reg->flops = json_number_value(json_object_get(profile, "flops"));
  size_t i;
  json_t *spec;
  json_array_foreach(json_object_get(profile, "inputs"), i, spec)
      json_array_append(reg->reads, json_object_get(spec, "name"));
  json_array_foreach(json_object_get(profile, "outputs"), i, spec)
      json_array_append(reg->writes, json_object_get(spec, "name"));
  (void)g;
}

static void region_init(struct region *reg, struct graph_index *g, size_t first, size_t len) {
  *reg = (struct region){.nodes = json_array(), .reads = json_array(), .writes = json_array()};
  for (size_t k = 0; k < len; k++)
    json_array_append(reg->nodes, json_object_get(json_array_get(g->calls, first + k), "name"));
}

static void region_clear(struct region *reg) {
  json_decref(reg->nodes);
  json_decref(reg->profile);
  json_decref(reg->io);
  json_decref(reg->reads);
  json_decref(reg->writes);
  memset(reg, 0, sizeof *reg);
}

/* Tries calls[first .. first+len) as a generated region. Returns 1 and fills *reg when p
 * supports it, else 0 with the reason in why (reg untouched). */
static int try_region(json_t *profile, struct graph_index *g, struct proposer *p, size_t first,
                      size_t len, struct region *reg, char *why, size_t whylen) {
  struct run r = {.g = g, .first = first, .len = len};
  bool whole = first == 0 && len == json_array_size(g->calls);
  int ok = 0;
  if (run_scan(&r) == 0) {
    json_t *esc = escaping(&r);
    struct region cand;
    region_init(&cand, g, first, len);
    const char *family = NULL;
    if (whole) {
      whole_region(profile, g, &cand);
    } else if (json_array_size(esc) != 1) {
      snprintf(r.why, sizeof r.why, "its nodes make %zu values used later",
               json_array_size(esc));
    } else {
      sub_profile(&r, profile, json_string_value(json_array_get(esc, 0)), &cand);
    }
    if (cand.profile && p->supports(p->self, cand.profile, &family, r.why, sizeof r.why) == 0) {
      snprintf(cand.family, sizeof cand.family, "%s", family ? family : "pointwise");
      cand.generated = true;
      *reg = cand;
      ok = 1;
    } else {
      region_clear(&cand);
    }
    json_decref(esc);
  }
  if (!ok)
    snprintf(why, whylen, "%s", r.why);
  run_clear(&r);
  return ok;
}

static int push_region(struct partition *pt, struct region *reg) {
  struct region *grown = realloc(pt->regions, (pt->n + 1) * sizeof *grown);
  if (!grown)
    return -1;
  pt->regions = grown;
  pt->regions[pt->n++] = *reg;
  return 0;
}

/* A library step for calls[i], with what the node reads and makes. */
static void library_region(struct graph_index *g, size_t i, const char *why, struct region *reg) {
  region_init(reg, g, i, 1);
  json_t *node = json_array_get(g->calls, i);
  snprintf(reg->reason, sizeof reg->reason, "%s (%s): %s",
           json_string_value(json_object_get(node, "target")), node_name(node),
           why[0] ? why : "no proposer writes this op");
  struct run r = {.g = g, .first = i, .len = 1};
  run_scan(&r);
  size_t k;
  json_t *v;
  json_array_foreach(r.reads, k, v) {
    json_t *val = json_object_get(g->values, json_string_value(v));
    if (val)
      json_array_append(reg->reads, val);
  }
  json_array_append(reg->writes, json_object_get(g->values, node_name(json_array_get(g->calls, i))));
  run_clear(&r);
}

/* The region that starts at calls[i], into *reg (caller owns): the whole graph when it is
 * one region however long, else the longest run of at most PARTITION_MAX_REGION_NODES
 * nodes p supports, else calls[i] alone as a library step with p's reason. Returns the
 * number of call nodes it covers. */
static size_t next_region(json_t *profile, struct graph_index *g, struct proposer *p, size_t i,
                          struct region *reg) {
  size_t n = json_array_size(g->calls);
  char why[256] = "", first_why[256] = "";
  if (i == 0 && n > PARTITION_MAX_REGION_NODES &&
      try_region(profile, g, p, 0, n, reg, why, sizeof why))
    return n;
  for (size_t len = n - i < PARTITION_MAX_REGION_NODES ? n - i : PARTITION_MAX_REGION_NODES;
       len > 0; len--) {
    if (try_region(profile, g, p, i, len, reg, why, sizeof why))
      return len;
    if (len == 1)
      snprintf(first_why, sizeof first_why, "%s", why);
  }
  library_region(g, i, first_why, reg);
  return 1;
}

int partition_build(json_t *profile, struct proposer *p, struct partition *ret) {
  return partition_build_limited(profile, p, PARTITION_MAX_GENERATED, ret);
}

int partition_build_limited(json_t *profile, struct proposer *p, size_t max_generated,
                            struct partition *ret) {
  *ret = (struct partition){0};
  struct graph_index g;
  if (!json_is_array(json_object_get(profile, "graph")) ||
      json_array_size(json_object_get(profile, "graph")) == 0) {
    ret->whole_model = true;
    ret->values = json_object();
    return ret->values ? 0 : -1;
  }
  if (index_build(profile, &g) != 0) {
    index_clear(&g);
    ret->whole_model = true;
    ret->values = json_object();
    return ret->values ? 0 : -1;
  }
  size_t n = json_array_size(g.calls), generated = 0;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n;) {
    struct region reg;
    size_t len;
    if (generated < max_generated) {
      len = next_region(profile, &g, p, i, &reg);
    } else {
      char why[128];
      snprintf(why, sizeof why, "the program has %zu generated regions already, as many as "
               "the GPU library prepares at once", max_generated);
      library_region(&g, i, why, &reg);
      len = 1;
    }
    reg.library_first = starts_library(&g, i, len, &reg);
    generated += reg.generated;
    /* A library-first convolution's value reads as a library convolution's to the regions
     * after it (from_library_conv): that is what programs run until the search changes it. */
    for (size_t k = 0; reg.generated && !reg.library_first && k < len; k++)
      json_object_set_new(g.generated, json_string_value(json_array_get(reg.nodes, k)),
                          json_true());
    rc = push_region(ret, &reg);
    if (rc != 0)
      region_clear(&reg);
    i += len;
  }
  ret->values = json_incref(g.values);
  ret->graph = json_incref(g.graph);
  index_clear(&g);
  if (rc != 0)
    partition_clear(ret);
  return rc;
}

void partition_clear(struct partition *pt) {
  for (size_t i = 0; i < pt->n; i++)
    region_clear(&pt->regions[i]);
  free(pt->regions);
  json_decref(pt->values);
  json_decref(pt->graph);
  memset(pt, 0, sizeof *pt);
}

size_t partition_generated(const struct partition *pt) {
  size_t n = 0;
  for (size_t i = 0; i < pt->n; i++)
    n += pt->regions[i].generated;
  return n;
}

json_t *partition_describe(const struct partition *pt) {
  json_t *out = json_array();
  if (pt->whole_model)
    json_array_append_new(out, json_pack("{s:i, s:s, s:n, s:[], s:s}", "index", 0, "kind",
                                         "library", "family", "nodes", "reason",
                                         "the model's graph could not be traced: it runs "
                                         "as one library step"));
  for (size_t i = 0; i < pt->n; i++) {
    const struct region *r = &pt->regions[i];
    const char *reason = !r->generated ? r->reason
                         : r->library_first
                             ? "a convolution starts as its library step (cuDNN); the search "
                               "tries generated code when that runs above the region's floor"
                             : NULL;
    json_t *d = json_pack("{s:i, s:s, s:s?, s:O, s:s?}", "index", (int)i, "kind",
                          r->generated ? "generated" : "library", "family",
                          r->generated ? r->family : NULL, "nodes", r->nodes, "reason", reason);
    if (d && r->library_first)
      json_object_set_new(d, "starts", json_string("library"));
    json_array_append_new(out, d);
  }
  return out;
}
