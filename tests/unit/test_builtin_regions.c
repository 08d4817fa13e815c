/* Unit tests of the builtin families on regions: the runs of consecutive call nodes that the
 * engine cuts a task's graph into (docs/architecture.md, "Programs"). The cut is made here
 * the way engine/partition.c makes it (longest run first, from the front; the run's
 * sub-profile reads every outside value as a placeholder input:k and writes output:0) and
 * asked of builtin_match, so that these tests need nothing of the engine. They check the
 * regions of level 2 convolution tasks and of level 3 models (profiled on the meta device),
 * compile each distinct region candidate with NVRTC, and run the candidates of small
 * versions in the CPU emulator against PyTorch: every region's inputs are the values the
 * traced model computes for them (torch.fx.Interpreter), its reference the value of its
 * last node, and its float64 reference the region's nodes replayed in float64 on those
 * inputs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proposers/builtin/attention.h"
#include "proposers/builtin/conv.h"
#include "proposers/builtin/builtin.h"
#include "proposers/builtin/propose.h"

#define BUILTIN_TESTLIB_EMULATOR
#include "builtin_testlib.h"

#define MAX_REGION_NODES 32 /* engine/partition.c's PARTITION_MAX_REGION_NODES */

/* ---- the cut (after engine/partition.c) ---- */

/* What the cut works from: the graph, its call nodes, who uses each value, and the value
 * names ("input:i", "param:<key>", "node:<name>", "output:j", "scalar:<name>"). */
struct cut {
  json_t *profile, *graph; /* borrowed */
  json_t *calls;           /* borrowed nodes */
  json_t *users;           /* {name: [user names]} */
  json_t *values;          /* {name: value name} */
};

static void collect_refs(json_t *v, json_t *out) {
  if (json_is_object(v)) {
    const char *name = json_string_value(json_object_get(v, "node"));
    if (name && json_object_size(v) == 1) {
      json_array_append_new(out, json_string(name));
      return;
    }
    const char *key;
    json_t *item;
    json_object_foreach(v, key, item) collect_refs(item, out);
  } else if (json_is_array(v)) {
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) collect_refs(item, out);
  }
}

/* The node's references in args then kwargs, in order (caller owns). */
static json_t *node_refs(json_t *node) {
  json_t *r = json_array();
  collect_refs(json_object_get(node, "args"), r);
  collect_refs(json_object_get(node, "kwargs"), r);
  return r;
}

static const char *nname(json_t *node) {
  return json_string_value(json_object_get(node, "name"));
}

static void cut_init(struct cut *c, json_t *profile) {
  *c = (struct cut){.profile = profile, .graph = json_object_get(profile, "graph"),
                    .calls = json_array(), .users = json_object(), .values = json_object()};
  size_t i, j;
  json_t *node, *ref;
  json_t *outs = json_array();
  json_array_foreach(c->graph, i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *tensor = json_string_value(json_object_get(node, "tensor"));
    bool call = strncmp(op, "call_", 5) == 0;
    if (call)
      json_array_append(c->calls, node);
    json_t *refs = node_refs(node);
    json_array_foreach(refs, j, ref) {
      json_t *list = json_object_get(c->users, json_string_value(ref));
      if (!list)
        json_object_set_new(c->users, json_string_value(ref), list = json_array());
      json_array_append_new(list, json_string(nname(node)));
    }
    if (strcmp(op, "output") == 0)
      json_array_extend(outs, refs);
    json_decref(refs);
    if (strcmp(op, "output") == 0)
      continue;
    char buf[300];
    if (tensor)
      snprintf(buf, sizeof buf, "%s", tensor);
    else
      snprintf(buf, sizeof buf, "%s:%s", call ? "node" : "scalar", nname(node));
    json_object_set_new(c->values, nname(node), json_string(buf));
  }
  size_t nout = json_array_size(json_object_get(profile, "outputs"));
  while (json_array_size(outs) > nout)
    json_array_remove(outs, 0);
  json_array_foreach(outs, i, ref) {
    const char *cur = json_string_value(json_object_get(c->values, json_string_value(ref)));
    char buf[32];
    snprintf(buf, sizeof buf, "output:%zu", i);
    if (cur && strncmp(cur, "node:", 5) == 0)
      json_object_set_new(c->values, json_string_value(ref), json_string(buf));
  }
  json_decref(outs);
}

static void cut_clear(struct cut *c) {
  json_decref(c->calls);
  json_decref(c->users);
  json_decref(c->values);
}

static size_t dtype_bytes(const char *dtype) {
  return !dtype ? 0 : strcmp(dtype, "float64") == 0 || strcmp(dtype, "int64") == 0 ? 8
                  : strcmp(dtype, "bool") == 0 || strcmp(dtype, "uint8") == 0      ? 1
                  : strcmp(dtype, "float32") == 0 || strcmp(dtype, "int32") == 0   ? 4
                                                                                   : 0;
}

/* {"name", "dtype", "shape", "numel", "bytes"} of node's value, or NULL (unknown shape). */
static json_t *value_spec(json_t *node, const char *name) {
  json_t *shape = json_object_get(node, "shape");
  const char *dtype = json_string_value(json_object_get(node, "dtype"));
  if (!json_is_array(shape) || !dtype_bytes(dtype))
    return NULL;
  long long n = 1;
  size_t i;
  json_t *d;
  json_array_foreach(shape, i, d) n *= json_integer_value(d);
  return json_pack("{s:s, s:s, s:O, s:I, s:I}", "name", name, "dtype", dtype, "shape", shape,
                   "numel", (json_int_t)n, "bytes", (json_int_t)(n * (long long)dtype_bytes(dtype)));
}

/* The sub-profile of calls[first, first + len) into *ret_sub and its {local: node name}
 * map into *ret_io (both caller owns); NULL with why when the run cannot be a region. */
static void sub_profile(struct cut *c, size_t first, size_t len, json_t **ret_sub,
                        json_t **ret_io, char *why, size_t whylen) {
  json_t *members = json_object(), *reads = json_array(), *escape = json_array();
  *ret_sub = *ret_io = NULL;
  for (size_t k = 0; k < len; k++)
    json_object_set_new(members, nname(json_array_get(c->calls, first + k)), json_true());
  size_t i, j;
  json_t *ref, *v;
  for (size_t k = 0; k < len; k++) {
    json_t *node = json_array_get(c->calls, first + k), *refs = node_refs(node);
    json_array_foreach(refs, i, ref) {
      bool seen = json_object_get(members, json_string_value(ref)) != NULL;
      json_array_foreach(reads, j, v) seen = seen || json_equal(v, ref);
      if (!seen)
        json_array_append(reads, ref);
    }
    json_decref(refs);
    json_t *users = json_object_get(c->users, nname(node)), *u;
    json_array_foreach(users, i, u) {
      if (!json_object_get(members, json_string_value(u))) {
        json_array_append_new(escape, json_string(nname(node)));
        break;
      }
    }
  }
  bool whole = first == 0 && len == json_array_size(c->calls);
  json_array_foreach(reads, i, v) {
    const char *val = json_string_value(json_object_get(c->values, json_string_value(v)));
    if (!val || strncmp(val, "scalar:", 7) == 0) {
      snprintf(why, whylen, "it reads the non-tensor value '%s'", json_string_value(v));
      goto done;
    }
  }
  if (whole) {
    json_t *io = json_object(), *node;
    json_array_foreach(c->graph, i, node) {
      const char *t = json_string_value(json_object_get(node, "tensor"));
      if (t && strncmp(t, "input:", 6) == 0)
        json_object_set_new(io, t, json_string(nname(node)));
      if (strcmp(json_string_value(json_object_get(node, "op")), "output") == 0)
        json_object_set(io, "output:0", json_object_get(json_array_get(json_object_get(node,
                                                                                       "args"), 0),
                                                        "node"));
    }
    *ret_sub = json_incref(c->profile);
    *ret_io = io;
    goto done;
  }
  if (json_array_size(escape) != 1) {
    snprintf(why, whylen, "its nodes make %zu values used later", json_array_size(escape));
    goto done;
  }
  json_t *sub = json_pack("{s:[], s:[], s:[], s:[]}", "graph", "inputs", "outputs",
                          "scalar_inputs"), *io = json_object();
  static const char *const kept[] = {"device", "precision", "tolerance", "sm_count",
                                     "graph_source", "floor_basis"};
  for (i = 0; i < sizeof kept / sizeof kept[0]; i++)
    if (json_object_get(c->profile, kept[i]))
      json_object_set(sub, kept[i], json_object_get(c->profile, kept[i]));
  json_array_foreach(reads, i, v) {
    json_t *node = graph_node(c->profile, json_string_value(v));
    const char *val = json_string_value(json_object_get(c->values, json_string_value(v)));
    if (strncmp(val, "param:", 6) == 0) {
      json_array_append(json_object_get(sub, "graph"), node);
      continue;
    }
    char local[32];
    snprintf(local, sizeof local, "input:%zu", json_array_size(json_object_get(sub, "inputs")));
    json_t *spec = value_spec(node, local);
    if (!spec) {
      snprintf(why, whylen, "the shape of '%s' is unknown", json_string_value(v));
      json_decref(sub);
      json_decref(io);
      goto done;
    }
    json_array_append_new(json_object_get(sub, "inputs"), spec);
    json_array_append_new(json_object_get(sub, "graph"),
                          json_pack("{s:O, s:s, s:O, s:s, s:[], s:{}, s:O, s:O}", "name", v,
                                    "op", "placeholder", "target", v, "tensor", local, "args",
                                    "kwargs", "shape", json_object_get(node, "shape"), "dtype",
                                    json_object_get(node, "dtype")));
    json_object_set(io, local, v);
  }
  for (size_t k = 0; k < len; k++)
    json_array_append(json_object_get(sub, "graph"), json_array_get(c->calls, first + k));
  const char *out = json_string_value(json_array_get(escape, 0));
  json_t *last = graph_node(c->profile, out), *ospec = value_spec(last, "output:0");
  if (!ospec) {
    snprintf(why, whylen, "the shape of '%s' is unknown", out);
    json_decref(sub);
    json_decref(io);
    goto done;
  }
  json_array_append_new(json_object_get(sub, "outputs"), ospec);
  json_array_append_new(json_object_get(sub, "graph"),
                        json_pack("{s:s, s:s, s:s, s:[{s:s}], s:{}, s:O, s:O}", "name", "output",
                                  "op", "output", "target", "output", "args", "node", out,
                                  "kwargs", "shape", json_object_get(last, "shape"), "dtype",
                                  json_object_get(last, "dtype")));
  json_object_set_new(io, "output:0", json_string(out));
  /* The parameters its nodes name: get_attr tensors and modules' params. */
  json_t *params = json_array(), *node, *p, *q;
  json_array_foreach(json_object_get(sub, "graph"), i, node) {
    json_t *names = json_array();
    const char *t = json_string_value(json_object_get(node, "tensor"));
    if (t && strncmp(t, "param:", 6) == 0)
      json_array_append(names, json_object_get(node, "tensor"));
    if (json_is_array(json_object_get(node, "params")))
      json_array_extend(names, json_object_get(node, "params"));
    json_array_foreach(names, j, p) {
      bool have = false;
      size_t k;
      json_array_foreach(params, k, q) have = have || json_equal(json_object_get(q, "name"), p);
      json_array_foreach(json_object_get(c->profile, "params"), k, q) {
        if (!have && json_equal(json_object_get(q, "name"), p)) {
          json_array_append(params, q);
          have = true;
        }
      }
    }
    json_decref(names);
  }
  json_object_set_new(sub, "params", params);
  json_object_set_new(sub, "min_bytes", json_integer(0));
  json_object_set_new(sub, "flops", json_integer(0));
  json_object_set_new(sub, "degenerate", json_false());
  char name[300];
  snprintf(name, sizeof name, "%s/%s", json_string_value(json_object_get(c->profile, "name")),
           out);
  json_object_set_new(sub, "name", json_string(name));
  *ret_sub = sub;
  *ret_io = io;
done:
  json_decref(members);
  json_decref(reads);
  json_decref(escape);
}

/* The regions of profile (caller owns): [{"nodes": [...], "family": name | null, "why",
 * "profile": sub-profile (generated only), "io": {local: node name} (generated only)}]. */
static json_t *regions_of(json_t *profile) {
  struct cut c;
  cut_init(&c, profile);
  json_t *out = json_array();
  size_t n = json_array_size(c.calls);
  for (size_t i = 0; i < n;) {
    size_t len = n - i < MAX_REGION_NODES ? n - i : MAX_REGION_NODES;
    char why[512] = "", first_why[512] = "";
    json_t *sub = NULL, *io = NULL;
    const struct builtin_family *fam = NULL;
    bool whole_first = i == 0 && n > MAX_REGION_NODES;
    for (size_t l = whole_first ? n : len; l > 0; l = whole_first && l == n ? len : l - 1) {
      json_t *match = NULL;
      sub_profile(&c, i, l, &sub, &io, why, sizeof why);
      if (sub && builtin_match(sub, &fam, &match, why, sizeof why) == 0) {
        json_decref(match);
        len = l;
        break;
      }
      json_decref(sub);
      json_decref(io);
      sub = io = NULL;
      fam = NULL;
      if (l == 1)
        snprintf(first_why, sizeof first_why, "%s", why);
    }
    if (!fam)
      len = 1;
    json_t *nodes = json_array();
    for (size_t k = 0; k < len; k++)
      json_array_append(nodes, json_object_get(json_array_get(c.calls, i + k), "name"));
    json_array_append_new(out, json_pack("{s:o, s:s?, s:s, s:o?, s:o?}", "nodes", nodes,
                                         "family", fam ? fam->name : NULL, "why",
                                         fam ? "" : first_why, "profile", sub, "io", io));
    i += len;
  }
  cut_clear(&c);
  return out;
}

/* The regions as one line: "gemm[conv] | norm[group_norm mul] | pooling[maxpool clamp]", a
 * library step by its node's name (caller frees). */
static char *regions_text(json_t *regions) {
  size_t cap = 1 << 16, used = 0, i, j;
  char *s = malloc(cap);
  assert_non_null(s);
  s[0] = 0;
  json_t *r, *n;
  json_array_foreach(regions, i, r) {
    const char *fam = json_string_value(json_object_get(r, "family"));
    used += (size_t)snprintf(s + used, cap - used, "%s%s%s", i ? " | " : "", fam ? fam : "",
                             fam ? "[" : "");
    json_array_foreach(json_object_get(r, "nodes"), j, n)
      used += (size_t)snprintf(s + used, cap - used, "%s%s", j ? " " : "", json_string_value(n));
    if (fam)
      used += (size_t)snprintf(s + used, cap - used, "]");
    assert_true(used < cap);
  }
  return s;
}


/* The profile of a task source (caller owns). */
static json_t *profile_of(const char *name, const char *src) {
  json_t *p = evaluator_profile(&g_ev, name, src);
  if (!p)
    fail_msg("%s: no profile", name);
  return p;
}

/* ---- (1) the regions of the public level 2 convolution tasks and level 3 models ---- */

/* A task and its regions as regions_text writes them. For the long models, want lists
 * regions that must appear (each a whole region, between " | "), and counts the number
 * of generated regions and library steps. */
static const struct cut_case {
  const char *file, *regions;
  const char *want[6];
  int generated, library;
} cut_cases[] = {
    /* A dense convolution is one region of the convolution family (learned as gemm);
     * engine/partition.c starts it as its library step (test_partition checks that). */
    {"level2/1_Conv2D_ReLU_BiasAdd.py", "gemm[conv] | pointwise[relu add]", {NULL}, 0, 0},
    {"level2/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py",
     "gemm[conv_transpose] | pooling[maxpool hardtanh] | reduction[mean tanh]", {NULL}, 0, 0},
    {"level2/36_ConvTranspose2d_Min_Sum_GELU_Add.py",
     "gemm[conv_transpose] | reduction[min_1 getitem sum_1 gelu add]", {NULL}, 0, 0},
    {"level2/47_Conv3d_Mish_Tanh.py", "gemm[conv] | pointwise[mish tanh]", {NULL}, 0, 0},
    {"level2/71_Conv2d_Divide_LeakyReLU.py", "gemm[conv] | pointwise[truediv leaky_relu]", {NULL}, 0,
     0},
    {"level2/74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max.py",
     "gemm[conv_transpose] | pooling[leaky_relu mul leaky_relu_1 max_pool]", {NULL}, 0, 0},
    {"level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py",
     "gemm[conv] | norm[group_norm mul] | pooling[maxpool clamp]", {NULL}, 0, 0},
    {"level2/87_Conv2d_Subtract_Subtract_Mish.py", "gemm[conv] | pointwise[sub sub_1 mish]", {NULL},
     0, 0},
    {"level2/89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max.py",
     "gemm[conv_transpose] | pooling[max_pool] | softmax[softmax] | pointwise[view sub sigmoid mul] | "
     "reduction[max_1 getitem]",
     {NULL}, 0, 0},
    {"level2/100_ConvTranspose3d_Clamp_Min_Divide.py",
     "gemm[conv_transpose] | pointwise[clamp truediv]", {NULL}, 0, 0},
    {"level3/10_ResNet101.py", NULL,
     {"norm[bn1 relu]", "pooling[maxpool]", "norm[layer1_0_bn1 layer1_0_relu]",
      "norm[layer1_0_downsample_1 add layer1_0_relu_2]",
      "norm[layer1_1_bn3 add_1 layer1_1_relu_2]", "reduction[avgpool flatten]"},
     211, 0},
    {"level3/20_MobileNetV2.py", NULL,
     {"norm[features_1 features_2]", "pooling[features_3_0]", "norm[features_3_4]",
      "norm[features_21 features_22]", "reduction[features_23 size view classifier_0]",
      "gemm[classifier_1]"},
     106, 0},
    {"level3/25_ShuffleNetUnit.py", NULL,
     {"norm[bn1 relu]", "pooling[conv2]", "norm[bn2]", "norm[bn3 relu_1]",
      "norm[shortcut_1 add]"},
     9, 9},
    {"level3/7_GoogleNetInceptionV1.py", NULL,
     {"pooling[relu maxpool1]", "pooling[relu_2 maxpool2]", "pooling[inception3a_branch_pool_0]",
      "reduction[avgpool flatten dropout]", "gemm[fc]"},
     73, 9},
    {"level3/1_MLP.py", "gemm[network_0 network_1] | gemm[network_2 network_3] | gemm[network_4]",
     {NULL}, 0, 0},
    /* The attention family (learned as gemm): the module with its two getitems. */
    {"level3/31_VisionAttention.py", NULL, {"gemm[attn getitem_4 getitem_5]"}, 0, 0},
    /* Traced by the meta tracer (its loop runs over a size): 256 unrolled steps. */
    {"level3/34_VanillaRNNHidden.py", NULL,
     {"pointwise[getattr_1 to]", "gemm[i2h tanh]", "gemm[h2o]", "gemm[i2h_255 tanh_255]"},
     513, 513},
};

static void check_cut(const struct cut_case *c) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", kernelbench_dir(), c->file);
  char *src = read_file(path);
  assert_non_null(src);
  json_t *p = profile_of(c->file, src);
  free(src);
  json_t *regions = regions_of(p);
  char *text = regions_text(regions);
  int gen = 0, lib = 0;
  size_t i;
  json_t *r;
  json_array_foreach(regions, i, r) {
    if (json_is_string(json_object_get(r, "family")))
      gen++;
    else
      lib++;
  }
  printf("  %-62s %3d generated, %3d library\n", c->file, gen, lib);
  if (c->regions && strcmp(text, c->regions) != 0)
    fail_msg("%s:\n  got  %s\n  want %s", c->file, text, c->regions);
  size_t tl = strlen(text);
  char *padded = malloc(tl + 8);
  assert_non_null(padded);
  snprintf(padded, tl + 8, " | %s | ", text);
  for (size_t w = 0; w < 6 && c->want[w]; w++) {
    char pat[600];
    snprintf(pat, sizeof pat, " | %s | ", c->want[w]);
    if (!strstr(padded, pat))
      fail_msg("%s: no region %s in\n  %s", c->file, c->want[w], text);
  }
  free(padded);
  if (c->generated && (gen != c->generated || lib != c->library))
    fail_msg("%s: %d generated and %d library regions, want %d and %d\n  %s", c->file, gen,
             lib, c->generated, c->library, text);
  free(text);
  json_decref(regions);
  json_decref(p);
}

static void test_region_cuts(void **state) {
  (void)state;
  if (!g_have_ev) {
    printf("needs KernelBench and the python venv\n");
    skip();
    return;
  }
  for (size_t i = 0; i < sizeof cut_cases / sizeof cut_cases[0]; i++)
    check_cut(&cut_cases[i]);
}

/* ---- (2) CPU emulation of the regions of small tasks against the traced model ---- */

/* Python, one line per string: for each task of the spec (argv[1], a JSON list of {"src",
 * "regions": [{"dir", "nodes", "io"}]}), the values every node of the traced model takes
 * (float32, the model as ref_script builds it), and for each region its inputs,
 * the task's parameters, its float32 value (expected.bin) and its nodes replayed in
 * float64 on its float32 inputs (expected64.bin). */
static const char *const region_script[] = {
    "import json, os, sys, types, torch, torch.fx",
    "def name(n): return ''.join(c if c.isalnum() else '_' for c in n)",
    "def save(t, path):",
    "    if not t.is_floating_point() and t.dtype != torch.bool: t = t.long()",
    "    t.detach().contiguous().cpu().numpy().tofile(path)",
    "def load(src):",
    "    mod = types.ModuleType('task')",
    "    exec(compile(open(src).read(), src, 'exec'), mod.__dict__)",
    "    return mod",
    "def f64(v):",
    "    if isinstance(v, torch.Tensor): return v.double() if v.is_floating_point() else v",
    "    if isinstance(v, (tuple, list)): return type(v)(f64(x) for x in v)",
    "    return v",
    "def trace(model, inputs):  # as gpu/evaluator/graph.py: symbolic_trace, else the meta tracer",
    "    try: return torch.fx.symbolic_trace(model)",
    "    except Exception:",
    "        sys.path.insert(0, os.environ['OPFORGE_SOURCE_ROOT'])",
    "        from gpu.evaluator.meta_trace import meta_symbolic_trace",
    "        return meta_symbolic_trace(model, inputs)",
    "def rna(t):  # rank >= 3 float32 operands to nearest TF32, ties away (conv.cu's ofg_conv_operand)",
    "    if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or t.dim() < 3: return t",
    "    r = ((t.contiguous().view(torch.int32) + 0x1000) & ~0x1fff).view(torch.float32)",
    "    return torch.where(torch.isfinite(t), r, t)",
    "class Capture(torch.fx.Interpreter):",
    "    def __init__(self, gm, vals):",
    "        super().__init__(gm)",
    "        self.vals = vals",
    "    def run_node(self, n):",
    "        r = super().run_node(n)",
    "        c = r.detach().clone() if isinstance(r, torch.Tensor) else r",
    "        if isinstance(r, tuple): c = tuple(x.detach().clone() if isinstance(x, torch.Tensor) else x for x in r)",
    "        self.vals[n.name] = c",
    "        return r",
    "class Replay(torch.fx.Interpreter):",
    "    def __init__(self, gm, vals, members):",
    "        super().__init__(gm)",
    "        self.vals, self.members, self.out = vals, members, {}",
    "    def run_node(self, n):",
    "        if n.op in ('call_function', 'call_method', 'call_module') and n.name not in self.members:",
    "            return f64(self.vals[n.name])",
    "        r = super().run_node(n)",
    "        self.out[n.name] = r",
    "        return r",
    "for task in json.load(open(sys.argv[1])):",
    "    mod = load(task['src'])",
    "    torch.manual_seed(42)",
    "    model = mod.Model(*mod.get_init_inputs())",
    "    with torch.no_grad():",
    "        for p in model.parameters():",
    "            p.add_(0.1 * torch.randn_like(p))",
    "    torch.manual_seed(7)",
    "    inputs = mod.get_inputs()",
    "    state = {k: v.clone() for k, v in model.state_dict().items()}",
    "    vals = {}",
    "    with torch.no_grad():",
    "        Capture(trace(model, inputs), vals).run(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])",
    "    m64 = mod.Model(*mod.get_init_inputs())",
    "    m64.load_state_dict(state)",
    "    gm64 = trace(m64.double(), [f64(t) for t in inputs])",
    "    for r in task['regions']:",
    "        d = r['dir']",
    "        os.makedirs(d, exist_ok=True)",
    "        for k, t in state.items():",
    "            save(t, os.path.join(d, name('param:' + k) + '.bin'))",
    "        cl = set(r.get('channels_last', []))",
    "        def phys(t, local):",
    "            if local not in cl: return t",
    "            return t.permute(0, 2, 3, 1) if t.dim() == 4 else t.permute(0, 2, 3, 4, 1)",
    "        for local, node in r['io'].items():",
    "            if local.startswith('input:'): save(phys(vals[node], local), os.path.join(d, name(local) + '.bin'))",
    "        out = r['io']['output:0']",
    "        save(phys(vals[out], 'output:0'), os.path.join(d, 'expected.bin'))",
    "        rp = Replay(gm64, vals, set(r['nodes']))",
    "        with torch.no_grad():",
    "            rp.run(*[f64(t.clone()) if isinstance(t, torch.Tensor) else t for t in inputs])",
    "        save(phys(rp.out[out], 'output:0'), os.path.join(d, 'expected64.bin'))",
    "        if r.get('tf32_rna'):  # eager as cuDNN's TF32: float64 sums of rounded operands",
    "            mr = mod.Model(*mod.get_init_inputs())",
    "            mr.load_state_dict({k: rna(v) for k, v in state.items()})",
    "            rr = Replay(trace(mr.double(), [f64(t) for t in inputs]), {k: rna(v) for k, v in vals.items()}, set(r['nodes']))",
    "            with torch.no_grad():",
    "                rr.run(*[f64(rna(t.clone())) if isinstance(t, torch.Tensor) else t for t in inputs])",
    "            save(rr.out[out].float(), os.path.join(d, 'expected.bin'))",
    NULL,
};

#define TASK(init, fwd, inputs)                                                          \
  "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"               \
  "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" init  \
  "    def forward(self, x):\n" fwd                                                     \
  "def get_inputs():\n    return " inputs "\ndef get_init_inputs():\n    return []\n"
#define NOINIT "        pass\n"

/* A small task: a public file with its sizes overridden, or a source of its own. */
static const struct small_task {
  const char *name, *file, *sizes, *source;
} small_tasks[] = {
    {"l2_1", "level2/1_Conv2D_ReLU_BiasAdd.py",
     "batch_size = 2\nin_channels = 3\nout_channels = 8\nheight = width = 10\n"
     "bias_shape = (out_channels, 1, 1)\n",
     NULL},
    {"l2_10", "level2/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py",
     "batch_size = 2\nin_channels = 3\nout_channels = 6\nheight = width = 9\n", NULL},
    {"l2_36", "level2/36_ConvTranspose2d_Min_Sum_GELU_Add.py",
     "batch_size = 2\nin_channels = 3\nout_channels = 6\nheight, width = 7, 9\n", NULL},
    {"l2_74", "level2/74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max.py",
     "batch_size = 2\nin_channels = 3\nout_channels = 4\ndepth, height, width = 4, 5, 6\n"
     "multiplier_shape = (out_channels, 1, 1, 1)\n",
     NULL},
    {"l2_85", "level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py",
     "batch_size = 2\nin_channels = 3\nout_channels = 8\nheight, width = 13, 14\n"
     "num_groups = 4\nscale_shape = (out_channels, 1, 1)\n",
     NULL},
    {"l2_89", "level2/89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max.py",
     "batch_size = 2\nin_channels = 3\nout_channels = 5\ndepth, height, width = 4, 6, 6\n",
     NULL},
    {"l3_resnet", "level3/10_ResNet101.py",
     "batch_size = 2\nheight = width = 32\nlayers = [1, 1, 1, 1]\nnum_classes = 10\n", NULL},
    {"l3_rnn", "level3/34_VanillaRNNHidden.py",
     "batch_size = 2\ninput_size = 5\nhidden_size = 6\noutput_size = 3\nsequence_length = 3\n",
     NULL},
    {"l3_shuffle", "level3/25_ShuffleNetUnit.py",
     "batch_size = 2\ninput_channels = 12\nout_channels = 24\nheight = width = 6\n", NULL},
    /* Fused chains the public tasks lack: an overlapping staged pool with a broadcast
     * prologue and an epilogue, average pooling, a norm with a residual and a broadcast
     * scale, epilogue tensors of a reduction, nested reductions over rows, the Frobenius
     * norm, and a global adaptive pool. */
    {"pool_chain", NULL, NULL,
     TASK("        self.s = nn.Parameter(torch.randn(4, 1, 1))\n",
          "        y = F.max_pool2d(torch.relu(x) * self.s, 3, 2, 1)\n"
          "        return torch.tanh(y) + 0.5\n",
          "[torch.randn(2, 4, 16, 16)]")},
    {"avg_chain", NULL, NULL,
     TASK(NOINIT, "        return F.avg_pool2d(x.abs() - 0.5, 2, 1, 1, count_include_pad=False)"
                  ".clamp(min=0.0)\n", "[torch.randn(2, 3, 7, 9)]")},
    {"ln_res", NULL, NULL,
     TASK("        self.ln = nn.LayerNorm(40)\n        self.w = nn.Parameter(torch.randn(40))\n",
          "        return F.gelu(self.ln(x) * self.w + x)\n", "[torch.randn(6, 5, 40)]")},
    {"sum_epi", NULL, NULL,
     TASK("        self.w = nn.Parameter(torch.randn(7))\n",
          "        return torch.sigmoid(x.sum(dim=1) * self.w) + 1.0\n",
          "[torch.randn(3, 50, 7)]")},
    {"nested_rows", NULL, NULL,
     TASK(NOINIT, "        return torch.amax(x, dim=1, keepdim=True).mean(dim=(2, 3))\n",
          "[torch.randn(2, 5, 6, 7)]")},
    {"frobenius", NULL, NULL,
     TASK(NOINIT, "        return x / torch.norm(x, p='fro')\n", "[torch.randn(4, 6, 50)]")},
    {"adaptive", NULL, NULL,
     TASK("        self.p = nn.AdaptiveAvgPool2d((1, 1))\n",
          "        return torch.flatten(self.p(torch.relu(x)), 1) * 2.0\n",
          "[torch.randn(3, 8, 5, 6)]")},
    /* Depthwise convolutions: with a bias, stride, padding, dilation, a prologue and an
     * epilogue (staged tile); without a bias, one tap row per output (1D); a 3D one whose
     * stride is its window (one thread per output). */
    {"dw_conv2d", NULL, NULL,
     TASK("        self.c = nn.Conv2d(6, 6, (3, 5), stride=(1, 2), padding=(2, 1), "
          "dilation=(2, 1), groups=6)\n",
          "        return F.relu6(self.c(x * 0.5 + 1.0)) - 0.25\n",
          "[torch.randn(2, 6, 11, 13)]")},
    {"dw_conv1d", NULL, NULL,
     TASK("        self.c = nn.Conv1d(5, 5, 4, padding=3, groups=5, bias=False)\n",
          "        return self.c(x)\n", "[torch.randn(3, 5, 17)]")},
    {"dw_conv2d_fn", NULL, NULL,
     TASK("        self.w = nn.Parameter(torch.randn(5, 1, 3, 3))\n"
          "        self.b = nn.Parameter(torch.randn(5))\n",
          "        return F.conv2d(torch.tanh(x), self.w, self.b, stride=2, padding=1, "
          "groups=5)\n",
          "[torch.randn(2, 5, 9, 12)]")},
    /* Chains after dense convolutions, read channels-last (MODE channels_last): broadcast
     * leaves over channels, over the two spatial dims, and a 3D one. */
    {"cl_conv2d", NULL, NULL,
     TASK("        self.c = nn.Conv2d(3, 5, 3)\n"
          "        self.b = nn.Parameter(torch.randn(5, 1, 1))\n"
          "        self.t = nn.Parameter(torch.randn(7, 9))\n",
          "        return torch.relu(self.c(x) + self.b) * self.t\n",
          "[torch.randn(2, 3, 9, 11)]")},
    {"cl_conv3d", NULL, NULL,
     TASK("        self.c = nn.ConvTranspose3d(3, 4, 2)\n"
          "        self.s = nn.Parameter(torch.randn(4, 1, 1, 1))\n",
          "        return F.leaky_relu(self.c(x) * self.s, 0.1) + 0.5\n",
          "[torch.randn(2, 3, 3, 4, 5)]")},
    {"dw_conv3d", NULL, NULL,
     TASK("        self.c = nn.Conv3d(4, 4, 2, stride=2, groups=4)\n",
          "        return torch.sigmoid(self.c(x))\n", "[torch.randn(2, 4, 6, 6, 8)]")},
    /* Dense convolutions (the convolution family, learned as gemm): dilated and strided
     * 1D without a bias, 'same' padding with an even window, a grouped 3D one, and a
     * grouped transposed 1D call with output_padding and dilation. */
    {"conv1d_dilated", NULL, NULL,
     TASK("        self.c = nn.Conv1d(4, 6, 3, stride=3, dilation=4, bias=False)\n",
          "        return self.c(x)\n", "[torch.randn(2, 4, 40)]")},
    {"conv2d_same", NULL, NULL,
     TASK("        self.c = nn.Conv2d(3, 4, (3, 4), padding='same')\n",
          "        return self.c(x)\n", "[torch.randn(2, 3, 9, 10)]")},
    {"conv3d_grouped", NULL, NULL,
     TASK("        self.c = nn.Conv3d(4, 6, (2, 3, 3), stride=(1, 2, 1), padding=(1, 0, 1), "
          "groups=2)\n",
          "        return self.c(x)\n", "[torch.randn(2, 4, 5, 7, 6)]")},
    {"convt1d_fn", NULL, NULL,
     TASK("        self.w = nn.Parameter(torch.randn(4, 3, 3))\n"
          "        self.b = nn.Parameter(torch.randn(6))\n",
          "        return F.conv_transpose1d(x, self.w, self.b, stride=2, padding=1, "
          "output_padding=1, groups=2, dilation=2)\n",
          "[torch.randn(2, 4, 9)]")},
    /* Attention: a self-attention module whose sequence (30) is not a tile multiple,
     * scaled dot-product attention, a causal one with Lq != Lk and Dv != D (two threads per
     * score row), and a batch-first cross-attention module without biases. */
    {"l3_vision_attn", "level3/31_VisionAttention.py",
     "embed_dim = 16\nnum_heads = 2\nbatch_size = 2\nnum_channels = embed_dim\n"
     "image_height = 5\nimage_width = 6\n",
     NULL},
    {"l1_sdpa", "level1/97_ScaledDotProductAttention.py",
     "batch_size = 2\nnum_heads = 3\nsequence_length = 37\nembedding_dimension = 16\n", NULL},
    {"sdpa_causal", NULL, NULL,
     TASK("        self.k = nn.Parameter(torch.randn(2, 70, 12))\n"
          "        self.v = nn.Parameter(torch.randn(2, 70, 10))\n",
          "        return F.scaled_dot_product_attention(x * 2.0, self.k, self.v, is_causal=True, "
          "scale=0.3)\n",
          "[torch.randn(2, 40, 12)]")},
    /* The explicit spelling: k transposed inside the region, and k read as a [D, Lk]
     * input with bmm, a division and the softmax method. */
    {"attn_spelled", NULL, NULL,
     TASK("        self.k = nn.Parameter(torch.randn(2, 3, 21, 16))\n"
          "        self.v = nn.Parameter(torch.randn(2, 3, 21, 12))\n",
          "        s = torch.matmul(x, self.k.transpose(-2, -1)) * 0.25\n"
          "        return F.softmax(s, dim=-1) @ self.v\n",
          "[torch.randn(2, 3, 19, 16)]")},
    {"attn_kt", NULL, NULL,
     TASK("        self.kt = nn.Parameter(torch.randn(2, 16, 21))\n"
          "        self.v = nn.Parameter(torch.randn(2, 21, 16))\n",
          "        return (torch.bmm(x, self.kt) / 4.0).softmax(dim=-1).bmm(self.v)\n",
          "[torch.randn(2, 19, 16)]")},
    /* Masks: a boolean [B, 1, Lq, Lk] buffer over (B, H) heads, and a float [Lq, Lk] one
     * added to the scores of rank-3 attention. */
    {"sdpa_bool_mask", NULL, NULL,
     TASK("        self.k = nn.Parameter(torch.randn(2, 3, 21, 16))\n"
          "        self.v = nn.Parameter(torch.randn(2, 3, 21, 16))\n"
          "        self.register_buffer('m', torch.rand(2, 1, 19, 21) > 0.3)\n",
          "        return F.scaled_dot_product_attention(x, self.k, self.v, attn_mask=self.m)\n",
          "[torch.randn(2, 3, 19, 16)]")},
    {"sdpa_float_mask", NULL, NULL,
     TASK("        self.k = nn.Parameter(torch.randn(2, 21, 16))\n"
          "        self.v = nn.Parameter(torch.randn(2, 21, 8))\n"
          "        self.m = nn.Parameter(torch.randn(19, 21))\n",
          "        return F.scaled_dot_product_attention(x, self.k, self.v, self.m)\n",
          "[torch.randn(2, 19, 16)]")},
    {"mha_cross", NULL, NULL,
     TASK("        self.a = nn.MultiheadAttention(24, 3, batch_first=True, bias=False)\n",
          "        y = torch.tanh(x)\n"
          "        return self.a(x, y, y, need_weights=False)[0]\n",
          "[torch.randn(2, 9, 24)]")},
};

#define N_SMALL (sizeof small_tasks / sizeof small_tasks[0])

static char *small_source(size_t i) {
  return task_source(small_tasks[i].source, small_tasks[i].file, small_tasks[i].sizes);
}

/* True when region r is emulated here: the attention and convolution families (learned
 * as gemm) run in this emulator, GEMMs in test_builtin_gemm's (mma.sync, cp.async). */
static bool emulated_here(json_t *region) {
  const struct builtin_family *fam = NULL;
  json_t *m = NULL;
  char why[512];
  if (builtin_match(json_object_get(region, "profile"), &fam, &m, why, sizeof why) != 0)
    return false;
  json_decref(m);
  return fam == &builtin_family_attention || fam == &builtin_family_conv;
}

/* True when region r is one of the convolution family's. */
static bool emulated_conv(json_t *region) {
  const struct builtin_family *fam = NULL;
  json_t *m = NULL;
  char why[512];
  if (builtin_match(json_object_get(region, "profile"), &fam, &m, why, sizeof why) != 0)
    return false;
  json_decref(m);
  return fam == &builtin_family_conv;
}

static json_t *region_candidate(json_t *region, char *summary, size_t len);

/* Emulates convolution region r (the i-th of task's regions, whose directory is dir) once
 * more in MODE tf32_rna: its run goes to runs and its spec, with "tf32_rna" (the script
 * then expects the float64 convolution of operands rounded to TF32), to rs. Writes the
 * candidate to f; takes nothing over. */
static void add_tf32_run(FILE *f, json_t *r, const char *dir, size_t i, const char *task,
                         json_t *runs, json_t *rs) {
  char rdir[1300], result[1400], ns[64], summary[512], what[700];
  json_t *rna_region = json_pack("{s:O, s:O, s:s}", "family", json_object_get(r, "family"),
                                 "profile", json_object_get(r, "profile"), "mode", "tf32_rna");
  json_t *cand = region_candidate(rna_region, summary, sizeof summary);
  json_t *sub = json_object_get(r, "profile");
  snprintf(rdir, sizeof rdir, "%s/r%zu_rna", dir, i);
  snprintf(result, sizeof result, "%s/result.bin", rdir);
  snprintf(ns, sizeof ns, "c%zu", json_array_size(runs));
  write_candidate(f, ns, sub, cand, rdir, result);
  snprintf(what, sizeof what, "%s: %s (tf32_rna)", task, summary);
  json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:s, s:s}", "ns", ns, "dir", rdir,
                                        "result", result, "what", what, "dtype", "float32"));
  json_array_append_new(rs, json_pack("{s:s, s:O, s:O, s:b}", "dir", rdir, "nodes",
                                      json_object_get(r, "nodes"), "io", json_object_get(r, "io"),
                                      "tf32_rna", 1));
  json_decref(cand);
  json_decref(rna_region);
}

/* The candidate of a generated region with its family's default knobs, and the MODE
 * region's "mode" names if any (caller owns). */
static json_t *region_candidate(json_t *region, char *summary, size_t len) {
  const struct builtin_family *fam = NULL;
  json_t *m = NULL, *cand = NULL;
  char why[512] = "";
  json_t *sub = json_object_get(region, "profile");
  assert_int_equal(builtin_match(sub, &fam, &m, why, sizeof why), 0);
  struct knob_set k;
  fam->defaults(m, &k);
  const char *mode = json_string_value(json_object_get(region, "mode"));
  if (mode)
    snprintf(k.mode, sizeof k.mode, "%s", mode);
  if (fam->generate(m, &k, &cand, why, sizeof why) != 0)
    fail_msg("%s: %s", json_string_value(json_object_get(m, "summary")), why);
  snprintf(summary, len, "%s", json_string_value(json_object_get(m, "summary")));
  json_decref(m);
  return cand;
}

/* A copy of region's sub-profile (caller owns) whose inputs made by a dense 2-D or 3-D
 * convolution of profile are marked "from_library_conv", as engine/partition.c marks
 * them, or NULL when the region is not a pointwise chain reading one. */
static json_t *conv_fed_profile(json_t *profile, json_t *region) {
  const char *fam = json_string_value(json_object_get(region, "family"));
  if (!fam || strcmp(fam, "pointwise") != 0)
    return NULL;
  json_t *sub = json_deep_copy(json_object_get(region, "profile")), *in, *node;
  bool fed = false;
  size_t i, j;
  json_array_foreach(json_object_get(sub, "inputs"), i, in) {
    const char *from = json_string_value(
        json_object_get(json_object_get(region, "io"), json_string_value(json_object_get(in, "name"))));
    json_array_foreach(json_object_get(profile, "graph"), j, node) {
      const char *target = json_string_value(json_object_get(node, "target"));
      if (from && strcmp(nname(node), from) == 0 && target && strstr(target, "Conv") &&
          json_array_size(json_object_get(node, "shape")) >= 4) {
        json_object_set_new(in, "from_library_conv", json_true());
        fed = true;
      }
    }
  }
  if (!fed)
    json_decref(sub);
  return fed ? sub : NULL;
}

static void test_region_emulation(void **state) {
  (void)state;
  if (!g_have_ev || system("c++ --version > /dev/null 2>&1") != 0) {
    printf("needs KernelBench, the python venv and a C++ compiler\n");
    skip();
    return;
  }
  char tmp[] = "/tmp/opforge-regions-XXXXXX";
  assert_non_null(mkdtemp(tmp));
  char prog[1100], spec_path[1100], script[1100];
  snprintf(prog, sizeof prog, "%s/emu.cpp", tmp);
  snprintf(spec_path, sizeof spec_path, "%s/spec.json", tmp);
  snprintf(script, sizeof script, "%s/regions.py", tmp);
  FILE *f = fopen(prog, "w");
  assert_non_null(f);
  for (size_t i = 0; emu_cuda_prelude[i]; i++)
    fprintf(f, "%s\n", emu_cuda_prelude[i]);
  json_t *spec = json_array(), *runs = json_array();
  for (size_t t = 0; t < N_SMALL; t++) {
    char *src = small_source(t), path[1300], dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", tmp, small_tasks[t].name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/task.py", dir);
    write_file(path, src);
    json_t *p = profile_of(small_tasks[t].name, src);
    free(src);
    json_t *regions = regions_of(p), *rs = json_array(), *r;
    size_t i;
    json_array_foreach(regions, i, r) {
      const char *fam = json_string_value(json_object_get(r, "family"));
      if (!fam || (strcmp(fam, "gemm") == 0 && !emulated_here(r)))
        continue;
      char rdir[1300], result[1400], ns[64], summary[512];
      snprintf(rdir, sizeof rdir, "%s/r%zu", dir, i);
      snprintf(result, sizeof result, "%s/result.bin", rdir);
      snprintf(ns, sizeof ns, "c%zu", json_array_size(runs));
      json_t *cand = region_candidate(r, summary, sizeof summary);
      json_t *sub = json_object_get(r, "profile");
      write_candidate(f, ns, sub, cand, rdir, result);
      json_decref(cand);
      json_t *out = json_array_get(json_object_get(sub, "outputs"), 0);
      char what[700];
      snprintf(what, sizeof what, "%s: %s", small_tasks[t].name, summary);
      json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:s, s:O}", "ns", ns, "dir", rdir,
                                            "result", result, "what", what, "dtype",
                                            json_object_get(out, "dtype")));
      json_array_append_new(rs, json_pack("{s:s, s:O, s:O}", "dir", rdir, "nodes",
                                          json_object_get(r, "nodes"), "io",
                                          json_object_get(r, "io")));
      if (emulated_conv(r))
        add_tf32_run(f, r, dir, i, small_tasks[t].name, runs, rs);
      json_t *fed = conv_fed_profile(p, r);
      if (fed) {
        json_t *cl_region = json_pack("{s:O, s:O, s:s}", "family", json_object_get(r, "family"),
                                      "profile", fed, "mode", "channels_last");
        cand = region_candidate(cl_region, summary, sizeof summary);
        bool cl_mode = false;
        json_t *o;
        size_t k;
        json_array_foreach(json_object_get(cand, "options"), k, o)
            cl_mode = cl_mode || strcmp(json_string_value(o), "-DMODE_CHANNELS_LAST=1") == 0;
        assert_true(cl_mode);
        json_t *listed = json_object_get(json_object_get(cand, "plan"), "channels_last");
        assert_int_equal(json_array_size(listed), 2);
        assert_string_equal(json_string_value(json_array_get(listed, 1)), "output:0");
        snprintf(rdir, sizeof rdir, "%s/r%zu_cl", dir, i);
        snprintf(result, sizeof result, "%s/result.bin", rdir);
        snprintf(ns, sizeof ns, "c%zu", json_array_size(runs));
        write_candidate(f, ns, fed, cand, rdir, result);
        snprintf(what, sizeof what, "%s: %s (channels-last)", small_tasks[t].name, summary);
        json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:s, s:O}", "ns", ns, "dir",
                                              rdir, "result", result, "what", what, "dtype",
                                              json_object_get(out, "dtype")));
        json_array_append_new(rs, json_pack("{s:s, s:O, s:O, s:O}", "dir", rdir, "nodes",
                                            json_object_get(r, "nodes"), "io",
                                            json_object_get(r, "io"), "channels_last", listed));
        json_decref(cand);
        json_decref(cl_region);
        json_decref(fed);
      }
    }
    json_array_append_new(spec, json_pack("{s:s, s:o}", "src", path, "regions", rs));
    json_decref(regions);
    json_decref(p);
  }
  fprintf(f, "int main() {\n");
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) fprintf(f, "  %s::run();\n", json_string_value(json_object_get(r, "ns")));
  fprintf(f, "  return 0;\n}\n");
  assert_int_equal(fclose(f), 0);
  assert_int_equal(json_dump_file(spec, spec_path, JSON_INDENT(1)), 0);
  FILE *py = fopen(script, "w");
  assert_non_null(py);
  for (i = 0; region_script[i]; i++)
    fprintf(py, "%s\n", region_script[i]);
  assert_int_equal(fclose(py), 0);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s %s %s", python_path(), script, spec_path);
  assert_int_equal(system(cmd), 0);
  const char *cxx = getenv("CXX") && getenv("CXX")[0] ? getenv("CXX") : "c++";
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -w -pthread -o %s/emu %s && %s/emu", cxx, tmp,
           prog, tmp);
  assert_int_equal(system(cmd), 0);
  check_runs(runs, 3, 90);
  json_decref(runs);
  json_decref(spec);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  assert_int_equal(system(cmd), 0);
}

/* ---- (3) NVRTC compiles of the region candidates ---- */

/* Adds cand's source and options under tag to cands unless seen holds a candidate of the
 * same kind: its match's summary with the sizes left out, and its options (the regions of
 * a model repeat a few kinds at many sizes; the sizes only change constants). */
static void add_distinct(json_t *cands, json_t *seen, json_t *cand, json_t *match,
                         const char *tag) {
  const char *summary = json_string_value(json_object_get(match, "summary"));
  char kind[600];
  size_t n = 0;
  for (const char *c = summary; c && *c && n + 1 < sizeof kind; c++)
    if (*c < '0' || *c > '9')
      kind[n++] = *c;
  kind[n] = 0;
  char *opts = json_dumps(json_object_get(cand, "options"), JSON_COMPACT);
  json_t *key = json_pack("{s:s, s:s}", "kind", kind, "options", opts);
  free(opts);
  char *k = json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS);
  if (!json_object_get(seen, k)) {
    json_object_set_new(seen, k, json_true());
    json_array_append_new(cands, json_pack("{s:O, s:O, s:s}", "source",
                                           json_object_get(cand, "source"), "options",
                                           json_object_get(cand, "options"), "tag", tag));
  }
  free(k);
  json_decref(key);
}

/* The defaults of every generated region of profile (a convolution's in MODE tf32_rna
 * too), and with moves (a seed memory's locals, may be NULL) every move of the region's
 * family that its check accepts. */
static void region_candidates(json_t *profile, const char *name, json_t *locals, json_t *cands,
                              json_t *seen) {
  json_t *regions = regions_of(profile), *r;
  size_t i;
  json_array_foreach(regions, i, r) {
    json_t *sub = json_object_get(r, "profile");
    if (!json_is_object(sub))
      continue;
    const struct builtin_family *fam = NULL;
    json_t *m = NULL, *local;
    char why[512] = "", tag[300];
    assert_int_equal(builtin_match(sub, &fam, &m, why, sizeof why), 0);
    struct knob_set k0;
    fam->defaults(m, &k0);
    size_t j;
    json_array_foreach(locals, j, local) {  /* none when locals is NULL */
      bool applies = local == NULL;
      size_t f;
      json_t *fn;
      json_array_foreach(json_object_get(local, "families"), f, fn)
        applies = applies || strcmp(json_string_value(fn), fam->name) == 0;
      struct knob_set k = k0;
      json_t *cand = NULL;
      if (!applies || knob_apply_move(&k, json_object_get(local, "knob_move"), why,
                                      sizeof why) != 0 ||
          fam->check(m, &k, why, sizeof why) != 0)
        continue;
      assert_int_equal(fam->generate(m, &k, &cand, why, sizeof why), 0);
      snprintf(tag, sizeof tag, "%s r%zu %s", name, i,
               json_string_value(json_object_get(local, "id")));
      add_distinct(cands, seen, cand, m, tag);
      json_decref(cand);
    }
    json_t *cand = NULL;
    if (fam->generate(m, &k0, &cand, why, sizeof why) != 0)
      fail_msg("%s r%zu: %s", name, i, why);
    snprintf(tag, sizeof tag, "%s r%zu defaults", name, i);
    add_distinct(cands, seen, cand, m, tag);
    json_decref(cand);
    if (fam == &builtin_family_conv) { /* the default where eager ran it in TF32 */
      snprintf(k0.mode, sizeof k0.mode, "tf32_rna");
      assert_int_equal(fam->generate(m, &k0, &cand, why, sizeof why), 0);
      snprintf(tag, sizeof tag, "%s r%zu tf32_rna", name, i);
      add_distinct(cands, seen, cand, m, tag);
      json_decref(cand);
    }
    json_decref(m);
  }
  json_decref(regions);
}

static void test_region_nvrtc(void **state) {
  (void)state;
  if (!g_have_ev) {
    printf("needs KernelBench and the python venv\n");
    skip();
    return;
  }
  char path[1200];
  snprintf(path, sizeof path, "%s/schema/seed_memory.json", getenv("OPFORGE_SOURCE_ROOT"));
  json_t *seed = json_load_file(path, 0, NULL), *cands = json_array(), *seen = json_object();
  assert_non_null(seed);
  /* The public tasks at their own sizes: the defaults of every region. */
  for (size_t i = 0; i < sizeof cut_cases / sizeof cut_cases[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", kernelbench_dir(), cut_cases[i].file);
    char *src = read_file(path);
    assert_non_null(src);
    json_t *p = profile_of(cut_cases[i].file, src);
    free(src);
    region_candidates(p, cut_cases[i].file, NULL, cands, seen);
    json_decref(p);
  }
  /* The small tasks: every seed-memory move of each region's family that fits. */
  for (size_t t = 0; t < N_SMALL; t++) {
    char *src = small_source(t);
    json_t *p = profile_of(small_tasks[t].name, src);
    free(src);
    region_candidates(p, small_tasks[t].name, json_object_get(seed, "locals"), cands, seen);
    json_decref(p);
  }
  size_t failed = compile_all(cands);
  printf("  %zu distinct region candidates compiled with NVRTC, %zu failed\n",
         json_array_size(cands), failed);
  assert_int_equal(failed, 0);
  json_decref(cands);
  json_decref(seen);
  json_decref(seed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_region_cuts),
      cmocka_unit_test(test_region_nvrtc),
      cmocka_unit_test(test_region_emulation),
  };
  return cmocka_run_group_tests(tests, builtin_group_setup, builtin_group_teardown);
}
