/* The builtin norm family: matcher, knobs and generator (see norm.h). One concept (a
 * family), and longer than 800 lines because layer, RMS, group, instance, batch and L1/L2
 * norms each have their own match rules over one template. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/norm.h"
#include "proposers/builtin/reduction.h"

#define FLOAT32_EPS 1.1920928955078125e-07 /* torch.finfo(torch.float32).eps */

/* What a matched norm computes (the match object is built from it). */
struct norm_spec {
  const char *op, *stat, *reduce;
  long long c[3];
  double eps;
  const char *weight, *bias, *input;
  long long groups, channels, spatial;
  json_t *pro, *epi; /* owned */
  json_t *post;      /* owned: the pointwise chain after a module norm (bound "N"), or NULL */
};

static const char *const module_norms[] = {
    "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "layer_norm", "rms_norm",
    "group_norm", "instance_norm", "batch_norm", "normalize"};

static bool is_norm_target(const char *t) {
  for (size_t i = 0; i < sizeof module_norms / sizeof module_norms[0]; i++)
    if (strcmp(t, module_norms[i]) == 0)
      return true;
  return false;
}

static bool foreign_to_norm(const char *t) {
  return expr_is_foreign_op(t) && !is_norm_target(t) && !reduce_is_reduction_op(t);
}

/* The product of dims [from, to) of shape. */
static long long dims_product(const json_t *shape, size_t from, size_t to) {
  long long p = 1;
  for (size_t i = from; i < to; i++)
    p *= json_integer_value(json_array_get(shape, i));
  return p;
}

/* A number from a module attribute or a functional argument, else def. */
static double num_or(json_t *v, double def) {
  double d;
  return v && expr_number(v, &d) == 0 ? d : def;
}

/* True when the functional's tensor argument idx/name is present but not a parameter. */
static bool bad_tensor_arg(json_t *profile, json_t *node, size_t idx, const char *name) {
  return expr_arg(node, idx, name) && !graph_arg_param(profile, node, idx, name);
}

/* ---- module and functional norms ---- */

/* layer_norm and rms_norm over the trailing normalized_shape. */
static int spec_trailing(json_t *profile, json_t *node, bool module, const json_t *shape,
                         struct norm_spec *s, char *why, size_t whylen) {
  const char *t = expr_target(node);
  bool rms = strcmp(t, "RMSNorm") == 0 || strcmp(t, "rms_norm") == 0;
  json_t *attrs = json_object_get(node, "attrs");
  json_t *ns = module ? json_object_get(attrs, "normalized_shape")
                      : expr_arg(node, 1, "normalized_shape");
  size_t k = json_is_array(ns) ? json_array_size(ns) : 1, rank = json_array_size(shape);
  bool ok = json_is_array(ns) || json_is_integer(ns);
  for (size_t i = 0; ok && i < k; i++) {
    const json_t *d = json_is_array(ns) ? json_array_get(ns, i) : ns;
    ok = k <= rank && json_integer_value(d) == json_integer_value(json_array_get(shape,
                                                                               rank - k + i));
  }
  if (!ok || k == 0) {
    snprintf(why, whylen, "%s: normalized_shape does not match the input's trailing dims", t);
    return -1;
  }
  s->op = rms ? "rms_norm" : "layer_norm";
  s->stat = rms ? "sum" : "meanvar";
  s->c[0] = dims_product(shape, 0, rank - k);
  s->c[1] = dims_product(shape, rank - k, rank);
  s->c[2] = 1;
  if (module) {
    s->eps = num_or(json_object_get(attrs, "eps"), rms ? FLOAT32_EPS : 1e-5);
    s->weight = graph_module_param(node, "weight");
    s->bias = rms ? NULL : graph_module_param(node, "bias");
    return 0;
  }
  s->eps = num_or(expr_arg(node, rms ? 3 : 4, "eps"), rms ? FLOAT32_EPS : 1e-5);
  s->weight = graph_arg_param(profile, node, 2, "weight");
  s->bias = rms ? NULL : graph_arg_param(profile, node, 3, "bias");
  if (bad_tensor_arg(profile, node, 2, "weight") ||
      (!rms && bad_tensor_arg(profile, node, 3, "bias"))) {
    snprintf(why, whylen, "%s: weight and bias must be module parameters", t);
    return -1;
  }
  return 0;
}

/* group_norm and instance_norm over [N, C, *spatial]. */
static int spec_channels(json_t *profile, json_t *node, bool module, const json_t *shape,
                         struct norm_spec *s, char *why, size_t whylen) {
  const char *t = expr_target(node);
  bool group = strcmp(t, "GroupNorm") == 0 || strcmp(t, "group_norm") == 0;
  json_t *attrs = json_object_get(node, "attrs");
  size_t rank = json_array_size(shape);
  long long n = json_integer_value(json_array_get(shape, 0));
  long long ch = json_integer_value(json_array_get(shape, 1));
  long long g = group ? (long long)num_or(module ? json_object_get(attrs, "num_groups")
                                                 : expr_arg(node, 1, "num_groups"), 0)
                      : ch;
  if (rank < 3 || g <= 0 || ch % g != 0) {
    snprintf(why, whylen, "%s: needs [N, C, *spatial] with C divisible by the groups", t);
    return -1;
  }
  if (!group && !module && !json_is_true(expr_arg(node, 5, "use_input_stats")) &&
      expr_arg(node, 5, "use_input_stats")) {
    snprintf(why, whylen, "instance_norm with running statistics is unsupported");
    return -1;
  }
  s->op = group ? "group_norm" : "instance_norm";
  s->stat = "meanvar";
  s->groups = g;
  s->channels = ch;
  s->spatial = dims_product(shape, 2, rank);
  s->c[0] = n * g;
  s->c[1] = ch / g * s->spatial;
  s->c[2] = 1;
  size_t wi = group ? 2 : 3, bi = group ? 3 : 4, ei = group ? 4 : 7;
  bool affine = !module || json_is_true(json_object_get(attrs, "affine"));
  s->eps = num_or(module ? json_object_get(attrs, "eps") : expr_arg(node, ei, "eps"), 1e-5);
  s->weight = !affine ? NULL : module ? graph_module_param(node, "weight")
                                      : graph_arg_param(profile, node, wi, "weight");
  s->bias = !affine ? NULL : module ? graph_module_param(node, "bias")
                                    : graph_arg_param(profile, node, bi, "bias");
  if (!module && (bad_tensor_arg(profile, node, wi, "weight") ||
                  bad_tensor_arg(profile, node, bi, "bias"))) {
    snprintf(why, whylen, "%s: weight and bias must be module parameters", t);
    return -1;
  }
  return 0;
}

/* batch_norm in training mode: statistics per channel over N and the spatial dims. */
static int spec_batch(json_t *profile, json_t *node, bool module, const json_t *shape,
                      struct norm_spec *s, char *why, size_t whylen) {
  json_t *attrs = json_object_get(node, "attrs");
  size_t rank = json_array_size(shape);
  if (rank < 2) {
    snprintf(why, whylen, "batch_norm needs [N, C, *]");
    return -1;
  }
  /* The evaluator runs the model in training mode, where BatchNorm normalizes with the
   * batch statistics; the functional form does so only with training=True. */
  if (!module && !json_is_true(expr_arg(node, 5, "training"))) {
    snprintf(why, whylen, "batch_norm with running statistics (training=False) is "
             "unsupported");
    return -1;
  }
  s->op = "batch_norm";
  s->stat = "meanvar";
  s->c[0] = json_integer_value(json_array_get(shape, 0));
  s->c[1] = json_integer_value(json_array_get(shape, 1));
  s->c[2] = dims_product(shape, 2, rank);
  s->channels = s->c[1];
  s->spatial = s->c[2];
  bool affine = !module || json_is_true(json_object_get(attrs, "affine"));
  s->eps = num_or(module ? json_object_get(attrs, "eps") : expr_arg(node, 7, "eps"), 1e-5);
  s->weight = !affine ? NULL : module ? graph_module_param(node, "weight")
                                      : graph_arg_param(profile, node, 3, "weight");
  s->bias = !affine ? NULL : module ? graph_module_param(node, "bias")
                                    : graph_arg_param(profile, node, 4, "bias");
  if (!module && (bad_tensor_arg(profile, node, 3, "weight") ||
                  bad_tensor_arg(profile, node, 4, "bias"))) {
    snprintf(why, whylen, "batch_norm: weight and bias must be module parameters");
    return -1;
  }
  return 0;
}

/* ---- F.normalize and written-out normalizations ---- */

/* An IR reading one contiguous float32 tensor of shape, with no steps (new reference). */
static json_t *leaf_ir(const char *tensor, const json_t *shape) {
  json_t *strides = json_array();
  size_t n = json_array_size(shape);
  long long acc = 1, st[8] = {0};
  for (size_t i = n; i-- > 0 && i < 8;) {
    st[i] = acc;
    acc *= json_integer_value(json_array_get(shape, i));
  }
  for (size_t i = 0; i < n && i < 8; i++)
    json_array_append_new(strides, json_integer(st[i]));
  return json_pack("{s:O, s:[{s:s, s:s, s:O, s:o}], s:[], s:s, s:[], s:i}", "shape", shape,
                   "leaves", "tensor", tensor, "dtype", "float32", "shape", shape, "strides",
                   strides, "steps", "result", "L0", "ops", "fast_ops", 0);
}

/* The prologue's abs or square for a norm kind. */
static int add_norm_pre(json_t *ir, const char *reduce) {
  if (strcmp(reduce, "norm_l2") == 0)
    return expr_append(ir, "square");
  if (strcmp(reduce, "norm_l1") == 0 || strcmp(reduce, "norm_inf") == 0)
    return expr_append(ir, "abs");
  return 0;
}

/* F.normalize(x, p, dim, eps): x / clamp_min(||x||_p, eps). */
static int spec_normalize(json_t *node, const char *tensor, const json_t *shape,
                          struct norm_spec *s, char *why, size_t whylen) {
  double p = num_or(expr_arg(node, 1, "p"), 2.0);
  json_t *dim = expr_arg(node, 2, "dim");
  int first, last;
  s->reduce = p == 1.0 ? "norm_l1" : p == 2.0 ? "norm_l2"
              : isinf(p) && p > 0 ? "norm_inf" : NULL;
  if (!s->reduce) {
    snprintf(why, whylen, "normalize: only p = 1, 2 and inf are supported");
    return -1;
  }
  json_t *one = json_integer(1);
  int rc = reduce_canonical(shape, dim ? dim : one, s->c, &first, &last, why, whylen);
  json_decref(one);
  if (rc != 0)
    return -1;
  s->op = "normalize";
  s->stat = strcmp(s->reduce, "norm_inf") == 0 ? "max" : "sum";
  s->eps = num_or(expr_arg(node, 3, "eps"), 1e-12);
  s->pro = leaf_ir(tensor, shape);
  s->epi = leaf_ir(tensor, shape);
  json_t *steps = json_object_get(s->epi, "steps");
  if (!s->pro || !s->epi || add_norm_pre(s->pro, s->reduce) != 0 ||
      json_array_append_new(steps, json_pack("{s:s, s:[s], s:[f]}", "op", "clamp_min", "in",
                                             "B:S", "p", s->eps)) != 0 ||
      json_array_append_new(steps, json_pack("{s:s, s:[s,s], s:[]}", "op", "div", "in", "L0",
                                             "t0", "p")) != 0) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  json_object_set_new(s->epi, "result", json_string("t1"));
  json_object_set_new(s->epi, "ops", json_pack("[s,s]", "clamp_min", "div"));
  json_object_set_new(s->epi, "fast_ops", json_integer(1));
  return 0;
}

/* A name for a written-out normalization, from its statistic. */
static const char *generic_name(const char *reduce, const json_t *pro) {
  const json_t *ops = json_object_get(pro, "ops");
  const char *only = json_array_size(ops) == 1 ? json_string_value(json_array_get(ops, 0)) : "";
  if (strcmp(reduce, "norm_inf") == 0 || strcmp(reduce, "max") == 0)
    return strcmp(only, "abs") == 0 || strcmp(reduce, "norm_inf") == 0 ? "linf_norm"
                                                                         : "rownorm";
  if (strcmp(reduce, "mean") == 0 && strcmp(only, "square") == 0)
    return "rms_norm";
  if (strcmp(reduce, "norm_l2") == 0 || (strcmp(reduce, "sum") == 0 &&
                                         strcmp(only, "square") == 0))
    return "l2_norm";
  if (strcmp(reduce, "norm_l1") == 0 || strcmp(only, "abs") == 0)
    return "l1_norm";
  return "rownorm";
}

/* True when every leaf of ir reads tensor at the flat index of the IR's shape. */
static bool reads_only(const json_t *ir, const char *tensor) {
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(ir, "leaves"), i, l) {
    if (strcmp(json_string_value(json_object_get(l, "tensor")), tensor) != 0 ||
        strcmp(json_string_value(json_object_get(l, "dtype")), "float32") != 0)
      return false;
  }
  return expr_all_full(ir);
}

/* True when every leaf of ir that reads tensor reads it at the flat index (other leaves,
 * such as a weight, may broadcast). */
static bool x_leaves_full(const json_t *ir, const char *tensor) {
  char off[512];
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(ir, "leaves"), i, l) {
    if (strcmp(json_string_value(json_object_get(l, "tensor")), tensor) == 0 &&
        (strcmp(json_string_value(json_object_get(l, "dtype")), "float32") != 0 ||
         expr_leaf_offset(ir, i, "e", off, sizeof off) != 1))
      return false;
  }
  return true;
}

/* The reduced dims set to 1: the shape a keepdim statistic must have to broadcast as a
 * per-row value. */
static bool keepdim_shape(const json_t *in, const json_t *red, int first, int last) {
  size_t n = json_array_size(in);
  if (json_array_size(red) != n)
    return false;
  for (size_t i = 0; i < n; i++) {
    long long want = (int)i >= first && (int)i <= last ? 1
                                                       : json_integer_value(json_array_get(in, i));
    if (json_integer_value(json_array_get(red, i)) != want)
      return false;
  }
  return true;
}

/* Without keepdim, a statistic over the leading dims [0, last] still broadcasts as a
 * per-row value: its shape is the input's dims after last ([] for all of them). */
static bool leading_shape(const json_t *in, const json_t *red, int first, int last) {
  size_t n = json_array_size(in);
  if (first != 0 || json_array_size(red) != n - (size_t)(last + 1))
    return false;
  for (size_t i = (size_t)(last + 1); i < n; i++)
    if (!json_equal(json_array_get(red, i - (size_t)(last + 1)), json_array_get(in, i)))
      return false;
  return true;
}

/* The graph's single reduction node (borrowed): NULL when none, -1 when several. */
static int single_reduction(json_t *profile, json_t **ret) {
  json_t *calls = graph_calls(profile), *node, *found = NULL;
  size_t i, n = 0;
  json_array_foreach(calls, i, node) {
    if (reduce_node_is_reduction(node)) {
      found = node;
      n++;
    }
  }
  json_decref(calls);
  *ret = found;
  return n > 1 ? -1 : 0;
}

/* The statistic's IRs: prologue (what is reduced, one full float32 tensor) and epilogue
 * (the output from that tensor and the statistic S). 1 on success, 0 when the graph is
 * not such a normalization, -1 with why when it is but cannot be done. */
static int generic_irs(json_t *profile, json_t *root, json_t *red, const char *reduce,
                       struct norm_spec *s, char *why, size_t whylen) {
  json_t *in = expr_ref(profile, expr_arg(red, 0, "input"));
  json_t *bound = json_pack("{s:s}", json_string_value(json_object_get(red, "name")), "S");
  int rc = in && bound ? expr_build(profile, in, NULL, &s->pro, why, whylen) : -1;
  if (rc == 0)
    rc = expr_build(profile, root, bound, &s->epi, why, whylen);
  json_decref(bound);
  if (rc != 0)
    return strncmp(why, "foreign op", 10) == 0 ? 0 : -1;
  const json_t *leaf = json_array_get(json_object_get(s->pro, "leaves"), 0);
  s->input = json_string_value(json_object_get(leaf, "tensor"));
  if (json_array_size(json_object_get(s->pro, "leaves")) != 1 || !reads_only(s->pro, s->input) ||
      !x_leaves_full(s->epi, s->input) || strncmp(s->input, "input:", 6) != 0) {
    snprintf(why, whylen, "a normalization must reduce one input tensor and read it "
             "unbroadcast");
    return -1;
  }
  if (add_norm_pre(s->pro, reduce) != 0) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  return 1;
}

static int spec_generic_call(json_t *profile, json_t *root, json_t *red,
                             const struct reduce_call *rc_, struct norm_spec *s, char *why,
                             size_t whylen);

/* x op f(reduce(g(x), dims, keepdim=True)): the written-out L1, L2 and RMS norms (and over
 * leading dims without keepdim: x / torch.norm(x)). */
static int spec_generic(json_t *profile, json_t *root, struct norm_spec *s, char *why,
                        size_t whylen) {
  json_t *red = NULL;
  struct reduce_call rc;
  if (single_reduction(profile, &red) != 0) {
    snprintf(why, whylen, "several reductions in one normalization are unsupported");
    return -1;
  }
  if (!red || red == root) {
    snprintf(why, whylen, "no reduction broadcast back over its input");
    return 0;
  }
  int rcode = reduce_call_of(red, &rc, why, whylen) != 0
                  ? -1
                  : spec_generic_call(profile, root, red, &rc, s, why, whylen);
  reduce_call_clear(&rc);
  return rcode;
}

/* spec_generic for the reduction red that computes rc. */
static int spec_generic_call(json_t *profile, json_t *root, json_t *red,
                             const struct reduce_call *rc_, struct norm_spec *s, char *why,
                             size_t whylen) {
  const struct reduce_call rc = *rc_;
  int first, last;
  json_t *in = expr_ref(profile, expr_arg(red, 0, "input"));
  const json_t *ishape = json_object_get(in, "shape");
  if (!json_equal(json_object_get(root, "shape"), ishape)) {
    snprintf(why, whylen, "the output is not shaped like the reduced input");
    return 0;
  }
  static const char *const ok[] = {"sum", "mean", "max", "norm_l1", "norm_l2", "norm_inf"};
  bool known = false;
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    known = known || strcmp(rc.op, ok[i]) == 0;
  if (!known || rc.tuple) {
    snprintf(why, whylen, "%s%s inside a normalization is unsupported", rc.op,
             rc.tuple ? " with indices" : "");
    return -1;
  }
  if (reduce_canonical(ishape, rc.dims, s->c, &first, &last, why, whylen) != 0)
    return -1;
  const json_t *rshape = json_object_get(red, "shape");
  if (rc.keepdim ? !keepdim_shape(ishape, rshape, first, last)
                 : !leading_shape(ishape, rshape, first, last)) {
    snprintf(why, whylen, "%s without keepdim=True broadcasts along the wrong dims", rc.op);
    return -1;
  }
  int g = generic_irs(profile, root, red, rc.op, s, why, whylen);
  if (g != 1)
    return g;
  s->reduce = rc.op;
  s->stat = strcmp(rc.op, "max") == 0 || strcmp(rc.op, "norm_inf") == 0 ? "max" : "sum";
  s->op = generic_name(rc.op, s->pro);
  return 1;
}

/* The graph's single norm module or functional (borrowed), NULL if none, -1 if several. */
static int single_norm_op(json_t *profile, json_t **ret) {
  json_t *calls = graph_calls(profile), *node, *found = NULL;
  size_t i, n = 0;
  json_array_foreach(calls, i, node) {
    if (is_norm_target(expr_target(node))) {
      found = node;
      n++;
    }
  }
  json_decref(calls);
  *ret = found;
  return n > 1 ? -1 : 0;
}

/* True when operand op of ir (or anything it is computed from) is the bound symbol sym. */
static bool ir_uses(const json_t *ir, const char *op, const char *sym, int depth) {
  if (op[0] == 'B')
    return strcmp(op + 2, sym) == 0;
  if (op[0] != 't' || depth > 300)
    return false;
  const json_t *st = json_array_get(json_object_get(ir, "steps"), strtoul(op + 1, NULL, 10));
  size_t i;
  json_t *in;
  json_array_foreach(json_object_get(st, "in"), i, in) {
    if (ir_uses(ir, json_string_value(in), sym, depth + 1))
      return true;
  }
  return false;
}

/* The pointwise chain from the norm's value (bound symbol N) to the graph's output: what a
 * module norm's output goes through before it is stored (scale, activation, residual add).
 * Its other leaves are read at the output element's index. 0, or -1 with why. */
static int spec_post(json_t *profile, json_t *node, json_t *root, struct norm_spec *s,
                     char *why, size_t whylen) {
  const char *t = expr_target(node);
  char inner[200] = "";
  if (!root) {
    snprintf(why, whylen, "%s followed by a tuple output is unsupported", t);
    return -1;
  }
  json_t *bound = json_pack("{s:s}", json_string_value(json_object_get(node, "name")), "N");
  int rc = bound ? expr_build(profile, root, bound, &s->post, inner, sizeof inner) : -1;
  json_decref(bound);
  if (rc != 0) {
    snprintf(why, whylen, "%s followed by %s: %s", t, expr_target(root), inner);
    return -1;
  }
  if (!json_equal(json_object_get(s->post, "shape"), json_object_get(node, "shape")) ||
      !ir_uses(s->post, json_string_value(json_object_get(s->post, "result")), "N", 0)) {
    snprintf(why, whylen, "%s followed by %s: the output is not the normalized tensor "
             "transformed elementwise", t, expr_target(root));
    return -1;
  }
  return 0;
}

/* A norm module or functional applied to an input tensor, optionally followed by a
 * pointwise chain (spec_post). */
static int spec_op(json_t *profile, json_t *node, json_t *root, struct norm_spec *s, char *why,
                   size_t whylen) {
  const char *t = expr_target(node);
  if (node != root && spec_post(profile, node, root, s, why, whylen) != 0)
    return -1;
  json_t *in = expr_ref(profile, expr_arg(node, 0, "input"));
  const char *op = json_string_value(json_object_get(in, "op"));
  const char *tensor = json_string_value(json_object_get(in, "tensor"));
  const char *dtype = json_string_value(json_object_get(in, "dtype"));
  if (!op || strcmp(op, "placeholder") != 0 || !tensor || strncmp(tensor, "input:", 6) != 0 ||
      !dtype || strcmp(dtype, "float32") != 0) {
    snprintf(why, whylen, "%s of a computed or non-float32 value is unsupported", t);
    return -1;
  }
  const json_t *shape = json_object_get(in, "shape");
  bool module = strcmp(json_string_value(json_object_get(node, "op")), "call_module") == 0;
  s->input = tensor;
  if (strcmp(t, "normalize") == 0)
    return spec_normalize(node, tensor, shape, s, why, whylen);
  if (strstr(t, "ayerNorm") || strcmp(t, "layer_norm") == 0 || strcmp(t, "RMSNorm") == 0 ||
      strcmp(t, "rms_norm") == 0)
    return spec_trailing(profile, node, module, shape, s, why, whylen);
  if (strstr(t, "atch") || strcmp(t, "batch_norm") == 0)
    return spec_batch(profile, node, module, shape, s, why, whylen);
  return spec_channels(profile, node, module, shape, s, why, whylen);
}

static json_t *ir_or_null(json_t *ir) {
  return ir ? ir : json_null();
}

/* The match object of s (caller owns); takes over s's IRs. */
static json_t *spec_match(struct norm_spec *s, const char *output, int sm_count) {
  char summary[400];
  int used = snprintf(summary, sizeof summary, "%s (%s statistics) over [%lld, %lld, %lld]",
                      s->op, s->stat, s->c[0], s->c[1], s->c[2]);
  size_t i;
  json_t *o;
  json_array_foreach(json_object_get(s->post, "ops"), i, o) {
    if (used > 0 && (size_t)used < sizeof summary)
      used += snprintf(summary + used, sizeof summary - (size_t)used, "%s%s",
                       i ? "," : " then ", json_string_value(o));
  }
  json_t *m = json_pack("{s:s, s:s, s:s, s:[I,I,I], s:s, s:f, s:s?, s:s?, s:I, s:I, s:I, "
                        "s:s?, s:o, s:o, s:s, s:s, s:i}",
                        "family", "norm", "op", s->op, "summary", summary, "canonical",
                        (json_int_t)s->c[0], (json_int_t)s->c[1], (json_int_t)s->c[2], "stat",
                        s->stat, "eps", s->eps, "weight", s->weight, "bias", s->bias, "groups",
                        (json_int_t)s->groups, "channels", (json_int_t)s->channels, "spatial",
                        (json_int_t)s->spatial, "reduce", s->reduce, "prologue",
                        ir_or_null(s->pro), "epilogue", ir_or_null(s->epi), "input", s->input,
                        "output", output, "sm_count", sm_count);
  if (m && s->post)
    json_object_set_new(m, "post", s->post);
  else
    json_decref(s->post);
  s->pro = s->epi = s->post = NULL;
  return m;
}

static int nm_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  const char *foreign = NULL;
  json_t *node = NULL, *root = expr_output_node(profile);
  struct norm_spec s = {0};
  if (expr_graph_has(profile, foreign_to_norm, &foreign)) {
    snprintf(why, whylen, "%s is not a normalization", foreign);
    return 0;
  }
  if (single_norm_op(profile, &node) != 0) {
    snprintf(why, whylen, "several norms in one graph are unsupported");
    return -1;
  }
  int rc = node ? (spec_op(profile, node, root, &s, why, whylen) == 0 ? 1 : -1)
                : spec_generic(profile, root, &s, why, whylen);
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  const char *odt = json_string_value(json_object_get(out, "dtype"));
  if (rc == 1 && (!odt || strcmp(odt, "float32") != 0 ||
                  json_integer_value(json_object_get(out, "numel")) != s.c[0] * s.c[1] * s.c[2])) {
    snprintf(why, whylen, "%s: the output is not the normalized input", s.op);
    rc = -1;
  }
  if (rc == 1)
    *ret_match = spec_match(&s, json_string_value(json_object_get(out, "name")),
                            builtin_sm_count(profile));
  json_decref(s.pro);
  json_decref(s.epi);
  json_decref(s.post);
  return rc == 1 && !*ret_match ? -1 : rc;
}

/* ---- knobs ---- */

static void nm_canon(json_t *match, long long c[3]) {
  for (size_t i = 0; i < 3; i++)
    c[i] = json_integer_value(json_array_get(json_object_get(match, "canonical"), i));
}

static bool nm_is(json_t *match, const char *op) {
  return strcmp(json_string_value(json_object_get(match, "op")), op) == 0;
}

static bool nm_stat(json_t *match, const char *stat) {
  return strcmp(json_string_value(json_object_get(match, "stat")), stat) == 0;
}

/* True for the written-out norms and F.normalize, whose output comes from the epilogue. */
static bool nm_generic(json_t *match) {
  return json_is_object(json_object_get(match, "epilogue"));
}

/* Whether operand op of ir depends only on bound symbols and constants. */
static bool row_invariant(const json_t *ir, const char *op, int depth) {
  if (op[0] == 'B' || op[0] == 'c')
    return true;
  if (op[0] != 't' || depth > 64)
    return false;
  const json_t *s = json_array_get(json_object_get(ir, "steps"), strtoul(op + 1, NULL, 10));
  size_t i;
  json_t *in;
  json_array_foreach(json_object_get(s, "in"), i, in) {
    if (!row_invariant(ir, json_string_value(in), depth + 1))
      return false;
  }
  return s != NULL;
}

/* For MODE recip_mul: when the epilogue ends in a division by a per-row value, the
 * epilogue with that division replaced by a multiplication with B_INV (*ret_num) and
 * the divisor alone (*ret_den); both new references. -1 when there is no such division. */
static int epi_split(const json_t *epi, json_t **ret_num, json_t **ret_den) {
  const char *res = json_string_value(json_object_get(epi, "result"));
  if (!res || res[0] != 't')
    return -1;
  size_t k = strtoul(res + 1, NULL, 10);
  const json_t *s = json_array_get(json_object_get(epi, "steps"), k);
  const char *op = json_string_value(json_object_get(s, "op"));
  const char *a = json_string_value(json_array_get(json_object_get(s, "in"), 0));
  const char *b = json_string_value(json_array_get(json_object_get(s, "in"), 1));
  if (!op || strcmp(op, "div") != 0 || !a || !b || !row_invariant(epi, b, 0) ||
      row_invariant(epi, a, 0))
    return -1;
  json_t *num = json_deep_copy(epi), *den = json_deep_copy(epi);
  if (!num || !den ||
      json_array_set_new(json_object_get(num, "steps"), k,
                         json_pack("{s:s, s:[s,s], s:[]}", "op", "mul", "in", a, "B:INV",
                                   "p")) != 0 ||
      json_object_set_new(den, "result", json_string(b)) != 0) {
    json_decref(num);
    json_decref(den);
    return -1;
  }
  *ret_num = num;
  *ret_den = den;
  return 0;
}

/* Batch norm on a device of sms SMs: slices per channel so that C * SPLIT covers 4 blocks
 * per SM 4 times. */
static void bn_defaults(const long long c[3], long long sms, struct knob_set *k) {
  *k = (struct knob_set){.block = 512, .items = 4, .rows = 1, .unroll = 1};
  k->vec = c[2] % 4 == 0 ? 4 : c[2] % 2 == 0 ? 2 : 1;
  long long nvc = c[0] * c[2] / k->vec;
  long long split = (4 * sms * 4 + c[1] - 1) / c[1];
  long long most = nvc / ((long long)k->block * k->items);
  split = split > most ? most : split;
  k->split = split > 1024 ? 1024 : split < 1 ? 1 : (int)split;
}

static void nm_defaults(json_t *match, struct knob_set *ret) {
  long long c[3];
  nm_canon(match, c);
  if (nm_is(match, "batch_norm"))
    bn_defaults(c, builtin_sm_count(match), ret);
  else
    row_layout_defaults(c, builtin_sm_count(match), ret);
}

/* MODEs that are part of every norm kernel, or never apply, with the reason. */
static const char *nm_common_refusal(const char *m) {
  static const struct {
    const char *mode, *why;
  } refused[] = {
      {"shuffle", "partials are already combined with warp shuffles"},
      {"predicated_tail", "every loop is already bounds-checked"},
      {"idx64", "offsets are already 64-bit"},
      {"inner_coalesced", "threads already walk the contiguous axis (rows when inner is 1, "
                          "the inner axis otherwise)"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (strcmp(m, refused[i].mode) == 0)
      return refused[i].why;
  return NULL;
}

static const char *bn_refusal(const char *m) {
  if (strcmp(m, "welford") == 0)
    return "batch statistics are already per-slice Welford partials";
  if (strcmp(m, "two_pass") == 0)
    return "a two-pass variant would read the batch three times; Welford partials merge "
           "exactly";
  if (strcmp(m, "recip_mul") == 0)
    return "the output already multiplies by 1/sqrt(var + eps)";
  if (strcmp(m, "") == 0 || strcmp(m, "ldg") == 0 || strcmp(m, "stream_store") == 0 ||
      strcmp(m, "fast_math") == 0)
    return NULL;
  return "batch norm uses its own partial, finalize and apply launches";
}

static int bn_check(const long long c[3], const struct knob_set *k, char *why, size_t whylen) {
  const char *refusal = bn_refusal(k->mode);
  long long nvc = c[0] * c[2] / k->vec;
  if (refusal)
    snprintf(why, whylen, "MODE %s: %s", k->mode, refusal);
  else if (c[2] % k->vec != 0)
    snprintf(why, whylen, "VEC=%d: spatial size %lld is not a multiple of %d", k->vec, c[2],
             k->vec);
  else if (k->rows != 1)
    snprintf(why, whylen, "ROWS=%d: batch norm has no rows per block", k->rows);
  else if (k->split < 1 || k->split > 1024 || k->split > nvc)
    snprintf(why, whylen, "SPLIT=%d: 1 to 1024 slices per channel, at most one per vector",
             k->split);
  else if (k->items < 1 || k->items > 16 || k->unroll < 1 || k->unroll > 16)
    snprintf(why, whylen, "ITEMS=%d, UNROLL=%d: each 1 to 16", k->items, k->unroll);
  else
    return 0;
  return -1;
}

/* The reason a statistics or arithmetic MODE does not apply, or NULL. */
static const char *rows_refusal(json_t *match, const char *m, const struct row_layout *L) {
  bool meanvar = nm_stat(match, "meanvar");
  if (strcmp(m, "welford") == 0 || strcmp(m, "two_pass") == 0) {
    if (!meanvar)
      return "this norm has one statistic, no mean and variance";
    if (L->multi)
      return "rows split over launches merge Welford partials";
    if (strcmp(m, "welford") == 0 && L->path == ROW_PATH_STREAM)
      return "a streamed row already uses Welford statistics";
    if (strcmp(m, "two_pass") == 0 && L->path != ROW_PATH_STREAM)
      return "statistics over a cached row are already two-pass";
    return NULL;
  }
  if (strcmp(m, "single_kernel") == 0)
    return L->multi ? "the row is split over launches because it does not fit one block "
                      "or cluster on chip"
                    : "statistics and output are already one kernel";
  json_t *epi = json_object_get(match, "epilogue"), *num = NULL, *den = NULL;
  if (strcmp(m, "recip_mul") == 0) {
    if (!nm_generic(match))
      return "the output already multiplies by 1/sqrt(var + eps)";
    if (epi_split(epi, &num, &den) != 0)
      return "the output does not end in a division by a per-row value";
    json_decref(num);
    json_decref(den);
    return NULL;
  }
  if (strcmp(m, "fast_math") == 0 && nm_generic(match) &&
      json_integer_value(json_object_get(epi, "fast_ops")) == 0)
    return "the output has no division, exp or log with a faster intrinsic";
  static const char *const ok[] = {"", "warp_per_row", "block_per_row", "cached_row",
                                   "smem_row", "ldg", "stream_store", "fast_math"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (strcmp(m, ok[i]) == 0)
      return NULL;
  return "this MODE does not apply to norms";
}

static int nm_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  long long c[3];
  struct row_layout L;
  nm_canon(match, c);
  if (cg_check_common(k, why, whylen) != 0)
    return -1;
  const char *refusal = nm_common_refusal(k->mode);
  if (refusal) {
    snprintf(why, whylen, "MODE %s: %s", k->mode, refusal);
    return -1;
  }
  if (nm_is(match, "batch_norm"))
    return bn_check(c, k, why, whylen);
  if (row_layout_resolve(c, k, &L, why, whylen) != 0)
    return -1;
  refusal = rows_refusal(match, k->mode, &L);
  return row_layout_check(&L, k, refusal, why, whylen);
}

/* ---- generation ---- */

/* Whether leaf i of the epilogue is the normalized input itself (passed as x). */
static bool is_x_leaf(json_t *match, size_t i) {
  const json_t *epi = json_object_get(match, "epilogue");
  const json_t *l = json_array_get(json_object_get(epi, "leaves"), i);
  char off[512];
  return strcmp(json_string_value(json_object_get(l, "tensor")),
                json_string_value(json_object_get(match, "input"))) == 0 &&
         expr_leaf_offset(json_object_get(match, "epilogue"), i, "e", off, sizeof off) == 1;
}

/* The extra tensors as kernel parameters and arguments: weight and bias of the module
 * norms, or the epilogue's other leaves (E<i> for leaf i) of written-out norms. */
static void emit_affine(json_t *match, struct cg_buf *b) {
  if (nm_generic(match)) {
    const json_t *leaves = json_object_get(json_object_get(match, "epilogue"), "leaves");
    cg_printf(b, "#define OFG_AFF_PARAMS");
    for (size_t i = 0; i < json_array_size(leaves); i++)
      if (!is_x_leaf(match, i))
        cg_printf(b, " , const %s* __restrict__ E%zu",
                  expr_ctype(json_string_value(
                      json_object_get(json_array_get(leaves, i), "dtype"))), i);
    cg_printf(b, "\n#define OFG_AFF_ARGS");
    for (size_t i = 0; i < json_array_size(leaves); i++)
      if (!is_x_leaf(match, i))
        cg_printf(b, " , E%zu", i);
    cg_printf(b, "\n");
    return;
  }
  bool w = json_is_string(json_object_get(match, "weight"));
  bool bias = json_is_string(json_object_get(match, "bias"));
  const json_t *post = json_object_get(json_object_get(match, "post"), "leaves");
  cg_printf(b, "#define OFG_AFF_PARAMS%s%s", w ? " , const float* __restrict__ W" : "",
            bias ? ", const float* __restrict__ B" : "");
  for (size_t i = 0; i < json_array_size(post); i++)
    cg_printf(b, " , const %s* __restrict__ P%zu",
              expr_ctype(json_string_value(json_object_get(json_array_get(post, i), "dtype"))),
              i);
  cg_printf(b, "\n#define OFG_AFF_ARGS%s%s", w ? " , W" : "", bias ? ", B" : "");
  for (size_t i = 0; i < json_array_size(post); i++)
    cg_printf(b, " , P%zu", i);
  cg_printf(b, "\n");
}

/* The call of the post chain on t: its other leaves loaded at output element e. */
static void emit_post_call(json_t *match, struct cg_buf *b) {
  const json_t *post = json_object_get(match, "post");
  if (!json_is_object(post)) {
    cg_printf(b, "  return t;\n");
    return;
  }
  cg_printf(b, "  return ofg_post(");
  for (size_t i = 0; i < json_array_size(json_object_get(post, "leaves")); i++) {
    char off[512];
    expr_leaf_offset(post, i, "e", off, sizeof off);
    cg_printf(b, "(float)OFG_LD(P%zu + %s), ", i, off);
  }
  cg_printf(b, "t);\n");
}

/* ofg_norm_out for the module norms: the affine index of element r of row `row`. */
static void emit_affine_out(json_t *match, struct cg_buf *b) {
  long long g = json_integer_value(json_object_get(match, "groups"));
  long long ch = json_integer_value(json_object_get(match, "channels"));
  long long sp = json_integer_value(json_object_get(match, "spatial"));
  bool w = json_is_string(json_object_get(match, "weight"));
  bool bias = json_is_string(json_object_get(match, "bias"));
  cg_printf(b, "__device__ __forceinline__ float ofg_norm_out(float x, const ofg_fin& f, "
               "long long row, long long r, long long e OFG_AFF_PARAMS) {\n  (void)row;\n"
               "  (void)r;\n  (void)e;\n");
  if (nm_is(match, "group_norm"))
    cg_printf(b, "  const long long a = (row %% %lldLL) * %lldLL + r / %lldLL;\n", g, ch / g, sp);
  else if (nm_is(match, "instance_norm"))
    cg_printf(b, "  const long long a = row %% %lldLL;\n", ch);
  else if (nm_is(match, "batch_norm"))
    cg_printf(b, "  const long long a = row;\n");
  else
    cg_printf(b, "  const long long a = r;\n");
  cg_printf(b, "  (void)a;\n");
  if (nm_is(match, "rms_norm") && !nm_generic(match))
    cg_printf(b, "  float t = x * f.a;\n%s", w ? "  t = t * W[a];\n" : "");
  else if (nm_is(match, "batch_norm"))
    /* Torch's order: gamma * (x - mean) * invstd + beta. */
    cg_printf(b, "  float t = %s(x - f.a) * f.b;\n", w ? "W[a] * " : "");
  else
    cg_printf(b, "  float t = (x - f.a) * f.b;\n%s", w ? "  t = W[a] * t;\n" : "");
  cg_printf(b, "%s", bias ? "  t = t + B[a];\n" : "");
  emit_post_call(match, b);
  cg_printf(b, "}\n");
}

/* ofg_pre, ofg_finalize and ofg_norm_out of the module norms: rstd from the variance
 * (mean/variance norms) or from the mean square (rms_norm). */
static int emit_module_math(json_t *match, const struct knob_set *k, struct cg_buf *b) {
  long long c[3];
  nm_canon(match, c);
  char eps[64], arg[128], inv[160];
  cg_float(json_number_value(json_object_get(match, "eps")), eps, sizeof eps);
  bool rms = nm_is(match, "rms_norm");
  if (rms)
    snprintf(arg, sizeof arg, "a / (float)%lld + %s", c[1], eps);
  else
    snprintf(arg, sizeof arg, "b + %s", eps);
  if (strcmp(k->mode, "fast_math") == 0)
    snprintf(inv, sizeof inv, "rsqrtf(%s)", arg);
  else
    snprintf(inv, sizeof inv, "(1.0f / sqrtf(%s))", arg);
  cg_printf(b, "__device__ __forceinline__ float ofg_pre(float x) { return %s; }\n"
               "__device__ __forceinline__ ofg_fin ofg_finalize(float a, float b) {\n"
               "  ofg_fin f;\n  f.a = %s;\n  f.b = %s;\n  (void)a;\n  (void)b;\n"
               "  return f;\n}\n",
            rms ? "x * x" : "x", rms ? inv : "a", rms ? "0.0f" : inv);
  const json_t *post = json_object_get(match, "post");
  const char *sym = "N";
  if (json_is_object(post) &&
      expr_emit(post, "ofg_post", &sym, 1, strcmp(k->mode, "fast_math") == 0, b) != 0)
    return -1;
  emit_affine_out(match, b);
  return b->failed ? -1 : 0;
}

/* ofg_finalize and ofg_norm_out of a written-out norm: the statistic as torch computes it
 * (mean divides by R, the L2 norm takes the square root), then the epilogue with x and
 * the other leaves loaded at their broadcast offsets of output element e. */
static void emit_generic_out(json_t *match, bool recip, struct cg_buf *b) {
  const json_t *epi = json_object_get(match, "epilogue");
  const char *reduce = json_string_value(json_object_get(match, "reduce"));
  const json_t *leaves = json_object_get(epi, "leaves");
  struct cg_buf zeros = {0}, args = {0};
  for (size_t i = 0; i < json_array_size(leaves); i++) {
    char off[512];
    expr_leaf_offset(epi, i, "e", off, sizeof off);
    cg_printf(&zeros, "0.0f, ");
    if (is_x_leaf(match, i))
      cg_printf(&args, "x, ");
    else
      cg_printf(&args, "(float)OFG_LD(E%zu + %s), ", i, off);
  }
  char *z = cg_take(&zeros), *a = cg_take(&args);
  if (!z || !a)
    b->failed = true;
  cg_printf(b, "__device__ __forceinline__ ofg_fin ofg_finalize(float a, float b) {\n"
               "  ofg_fin f;\n  (void)b;\n  f.a = %s;\n  f.b = %s%s%s;\n  return f;\n}\n"
               "__device__ __forceinline__ float ofg_norm_out(float x, const ofg_fin& f, "
               "long long row, long long r, long long e OFG_AFF_PARAMS) {\n  (void)row;\n"
               "  (void)r;\n  (void)e;\n  return ofg_epi(%sf.a%s);\n}\n",
            strcmp(reduce, "mean") == 0 ? "a / (float)OFG_R"
            : strcmp(reduce, "norm_l2") == 0 ? "sqrtf(a)" : "a",
            recip ? "1.0f / ofg_den(" : "0.0f", recip && z ? z : "", recip ? "f.a)" : "",
            a ? a : "", recip ? ", f.b" : "");
  free(z);
  free(a);
}

/* ofg_fin, ofg_pre, ofg_finalize and ofg_norm_out. */
static int emit_math(json_t *match, const struct knob_set *k, struct cg_buf *b) {
  cg_printf(b, "struct ofg_fin {\n  float a, b;\n};\n");
  if (!nm_generic(match))
    return emit_module_math(match, k, b);
  bool fast = strcmp(k->mode, "fast_math") == 0, recip = strcmp(k->mode, "recip_mul") == 0;
  const char *syms[2] = {"S", "INV"};
  json_t *pro = json_object_get(match, "prologue"), *epi = json_object_get(match, "epilogue");
  json_t *num = NULL, *den = NULL;
  if (expr_emit(pro, "ofg_pre", NULL, 0, false, b) != 0 ||
      (recip && epi_split(epi, &num, &den) != 0))
    return -1;
  int rc = recip ? expr_emit(num, "ofg_epi", syms, 2, fast, b) +
                       expr_emit(den, "ofg_den", syms, 1, fast, b)
                 : expr_emit(epi, "ofg_epi", syms, 1, fast, b);
  json_decref(num);
  json_decref(den);
  emit_generic_out(match, recip, b);
  return rc != 0 || b->failed ? -1 : 0;
}

static char *nm_fragment(json_t *match, const struct knob_set *k, const struct row_layout *L) {
  long long c[3];
  nm_canon(match, c);
  struct cg_buf b = {0};
  if (nm_is(match, "batch_norm")) {
    cg_printf(&b, "#define OFG_BATCH_NORM 1\n");
    cg_define_ll(&b, "OFG_N", c[0]);
    cg_define_ll(&b, "OFG_C", c[1]);
    cg_define_ll(&b, "OFG_S", c[2]);
    long long nvc = c[0] * c[2] / k->vec;
    cg_define_ll(&b, "OFG_CHUNKV", (nvc + k->split - 1) / k->split);
  } else {
    static const char *const paths[] = {"REG", "SMEM", "STREAM"};
    cg_define_ll(&b, "OFG_OUTER", c[0]);
    cg_define_ll(&b, "OFG_R", c[1]);
    cg_define_ll(&b, "OFG_INNER", c[2]);
    cg_define_ll(&b, "OFG_CHUNKV", L->chunkv);
    cg_printf(&b, "#define OFG_GROUP %d\n#define OFG_CL %d\n#define OFG_NVT %d\n"
                  "#define OFG_PATH_%s 1\n#define OFG_CLUSTER",
              L->cols || L->multi ? k->block : L->group, L->cl, L->nvt, paths[L->path]);
    if (L->cl > 1)
      cg_printf(&b, " __cluster_dims__(%d, 1, 1)", L->cl);
    cg_printf(&b, "\n");
    if (L->multi)
      cg_printf(&b, "#define OFG_MULTI 1\n");
    if (strcmp(k->mode, "welford") == 0)
      cg_printf(&b, "#define OFG_WELFORD 1\n");
    if (strcmp(k->mode, "two_pass") == 0)
      cg_printf(&b, "#define OFG_TWO_PASS 1\n");
    bool max = nm_stat(match, "max");
    cg_printf(&b, "#define OFG_COL_INIT %s\n#define OFG_COL_ACC(a, v) %s\n",
              max ? "(-INFINITY)" : "0.0f", max ? "fmaxf(a, v)" : "((a) + (v))");
  }
  const char *stat = json_string_value(json_object_get(match, "stat"));
  cg_printf(&b, "#define OFG_STAT_%s 1\n", strcmp(stat, "meanvar") == 0 ? "MEANVAR"
                                           : strcmp(stat, "max") == 0    ? "MAX" : "SUM");
  emit_affine(match, &b);
  if (emit_math(match, k, &b) != 0) {
    cg_free(&b);
    return NULL;
  }
  return cg_take(&b);
}

static json_t *nm_launch(const char *kernel, long long grid, const struct knob_set *k,
                         long long smem, json_t *args) {
  return json_pack("{s:s, s:[I,i,i], s:[i,i,i], s:I, s:o}", "kernel", kernel, "grid",
                   (json_int_t)(grid < 1 ? 1 : grid), 1, 1, "block", k->block, 1, 1,
                   "shared_bytes", (json_int_t)smem, "args", args);
}

/* Arguments x, [partials...], [y], then the affine parameters. */
static json_t *nm_args(json_t *match, const char *const *buffers, size_t nb, bool y) {
  json_t *a = json_pack("[{s:O}]", "tensor", json_object_get(match, "input"));
  for (size_t i = 0; i < nb; i++)
    json_array_append_new(a, json_pack("{s:s}", "buffer", buffers[i]));
  if (y)
    json_array_append_new(a, json_pack("{s:O}", "tensor", json_object_get(match, "output")));
  static const char *const aff[] = {"weight", "bias"};
  for (size_t i = 0; y && !nm_generic(match) && i < 2; i++)
    if (json_is_string(json_object_get(match, aff[i])))
      json_array_append_new(a, json_pack("{s:O}", "tensor", json_object_get(match, aff[i])));
  const json_t *post = json_object_get(json_object_get(match, "post"), "leaves");
  for (size_t i = 0; y && i < json_array_size(post); i++)
    json_array_append_new(a, json_pack("{s:O}", "tensor",
                                       json_object_get(json_array_get(post, i), "tensor")));
  const json_t *leaves = json_object_get(json_object_get(match, "epilogue"), "leaves");
  for (size_t i = 0; y && nm_generic(match) && i < json_array_size(leaves); i++)
    if (!is_x_leaf(match, i))
      json_array_append_new(a, json_pack("{s:O}", "tensor",
                                         json_object_get(json_array_get(leaves, i), "tensor")));
  return a;
}

/* Three float buffers of n entries: the partial statistics. */
static json_t *partial_buffers(long long n, bool stats, long long nstats) {
  json_t *b = json_pack("[{s:s, s:I}, {s:s, s:I}, {s:s, s:I}]", "name", "p0", "bytes",
                        (json_int_t)(4 * n), "name", "p1", "bytes", (json_int_t)(4 * n), "name",
                        "p2", "bytes", (json_int_t)(4 * n));
  if (stats)
    json_array_append_new(b, json_pack("{s:s, s:I}", "name", "stats", "bytes",
                                       (json_int_t)(8 * nstats)));
  return b;
}

static json_t *bn_plan(json_t *match, const struct knob_set *k) {
  long long c[3];
  nm_canon(match, c);
  static const char *const parts[] = {"p0", "p1", "p2"};
  json_t *fin = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}]", "buffer", "p0", "buffer", "p1",
                          "buffer", "p2", "buffer", "stats");
  json_t *apply = nm_args(match, (const char *const[]){"stats"}, 1, true);
  return json_pack("{s:o, s:[o, o, o]}", "buffers", partial_buffers(c[1] * k->split, true, c[1]),
                   "launches",
                   nm_launch("ofg_bn_part", c[1] * k->split, k, 0, nm_args(match, parts, 3, false)),
                   nm_launch("ofg_bn_finalize", c[1], k, 0, fin),
                   nm_launch("ofg_bn_apply", c[1] * k->split, k, 0, apply));
}

static json_t *nm_plan(json_t *match, const struct knob_set *k, const struct row_layout *L) {
  long long c[3];
  nm_canon(match, c);
  if (nm_is(match, "batch_norm"))
    return bn_plan(match, k);
  if (L->cols)
    return json_pack("{s:[], s:[o]}", "buffers", "launches",
                     nm_launch("ofg_norm_cols", (c[0] * (c[2] / k->vec) + k->block - 1) /
                                                    k->block,
                               k, 0, nm_args(match, NULL, 0, true)));
  if (!L->multi)
    return json_pack("{s:[], s:[o]}", "buffers", "launches",
                     nm_launch("ofg_norm_rows",
                               L->cl > 1 ? c[0] * L->cl : (c[0] + L->rpb - 1) / L->rpb, k,
                               L->smem, nm_args(match, NULL, 0, true)));
  static const char *const parts[] = {"p0", "p1", "p2"};
  long long blocks = c[0] * k->split;
  return json_pack("{s:o, s:[o, o]}", "buffers", partial_buffers(blocks, false, 0), "launches",
                   nm_launch("ofg_norm_part", blocks, k, 0, nm_args(match, parts, 3, false)),
                   nm_launch("ofg_norm_apply", blocks, k, 0, nm_args(match, parts, 3, true)));
}

static int nm_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                       char *why, size_t whylen) {
  long long c[3];
  struct row_layout L = {0};
  nm_canon(match, c);
  if (nm_check(match, k, why, whylen) != 0 ||
      (!nm_is(match, "batch_norm") && row_layout_resolve(c, k, &L, why, whylen) != 0))
    return -1;
  char *frag = nm_fragment(match, k, &L);
  char *src = frag ? cg_row_source("norm.cu", frag) : NULL;
  int rc = cg_candidate(src, k, src ? nm_plan(match, k, &L) : NULL,
                        "norm: could not generate the candidate (out of memory)", ret_candidate,
                        why, whylen);
  free(frag);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_norm = {
    .name = "norm",
    .match = nm_match,
    .defaults = nm_defaults,
    .check = nm_check,
    .generate = nm_generate,
};
