/* Pointwise chains of a profiled FX graph: the IR builder and its CUDA text (see expr.h
 * for the IR). One concept, and longer than 800 lines for it: the table of about 40 ops
 * and the builder that reads each of them from FX nodes are one unit, and splitting the
 * table from its readers would scatter every op over two files. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/expr.h"

#define EXPR_MAX_STEPS 256 /* steps per chain: bounds the generated source */
#define EXPR_MAX_LEAVES 16 /* tensors one chain may read: bounds kernel parameters */

/* ---- FX node helpers ---- */

json_t *expr_arg(json_t *node, size_t idx, const char *name) {
  json_t *v = NULL;
  if (name)
    v = json_object_get(json_object_get(node, "kwargs"), name);
  if (!v)
    v = json_array_get(json_object_get(node, "args"), idx);
  return json_is_null(v) ? NULL : v;
}

int expr_number(const json_t *v, double *ret) {
  if (json_is_integer(v) || json_is_real(v)) {
    *ret = json_number_value(v);
    return 0;
  }
  if (json_is_boolean(v)) {
    *ret = json_is_true(v) ? 1.0 : 0.0;
    return 0;
  }
  const char *s = json_string_value(v);
  if (!s)
    return -1;
  if (strcmp(s, "inf") == 0)
    *ret = INFINITY;
  else if (strcmp(s, "-inf") == 0)
    *ret = -INFINITY;
  else if (strcmp(s, "nan") == 0)
    *ret = NAN;
  else
    return -1;
  return 0;
}

json_t *expr_ref(json_t *profile, const json_t *v) {
  const char *name = json_string_value(json_object_get(v, "node"));
  return name ? graph_node(profile, name) : NULL;
}

int expr_scalar_input(json_t *profile, json_t *node, double *ret) {
  const char *op = json_string_value(json_object_get(node, "op"));
  const char *tensor = json_string_value(json_object_get(node, "tensor"));
  if (!op || strcmp(op, "placeholder") != 0 || !tensor)
    return -1;
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(profile, "scalar_inputs"), i, s) {
    const char *name = json_string_value(json_object_get(s, "name"));
    if (name && strcmp(name, tensor) == 0)
      return expr_number(json_object_get(s, "value"), ret);
  }
  return -1;
}

json_t *expr_output_node(json_t *profile) {
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    if (op && strcmp(op, "output") == 0) {
      json_t *a = json_array_get(json_object_get(node, "args"), 0);
      return json_object_get(a, "node") ? expr_ref(profile, a) : NULL;
    }
  }
  return NULL;
}

bool expr_graph_has(json_t *profile, bool (*pred)(const char *target), const char **ret_op) {
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    if (!op || strncmp(op, "call_", 5) != 0)
      continue;
    const char *t = expr_target(node);
    if (pred(t)) {
      if (ret_op)
        *ret_op = t;
      return true;
    }
  }
  return false;
}

const char *expr_target(json_t *node) {
  const char *t = json_string_value(json_object_get(node, "target"));
  if (!t)
    return "";
  const char *dot = strrchr(t, '.');
  return dot ? dot + 1 : t;
}

bool expr_is_foreign_op(const char *target) {
  static const char *const foreign[] = {
      "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "Linear", "Bilinear",
      "conv1d", "conv2d", "conv3d", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
      "ConvTranspose2d", "ConvTranspose3d", "conv_transpose1d", "conv_transpose2d",
      "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
      "avg_pool2d", "avg_pool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
      "AvgPool2d", "AvgPool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
      "adaptive_avg_pool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
      "adaptive_max_pool2d", "AdaptiveMaxPool2d", "cumsum", "cumprod", "cummax", "flip",
      "softmax", "log_softmax", "Softmax", "LogSoftmax", "logsumexp", "sum", "mean", "prod",
      "amax", "amin", "argmax", "argmin", "norm", "vector_norm", "linalg_vector_norm",
      "linalg_norm", "var", "std",
      "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "normalize",
      "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
      "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "mse_loss",
      "cross_entropy", "smooth_l1_loss", "huber_loss", "kl_div", "hinge_embedding_loss",
      "triplet_margin_loss", "TripletMarginLoss", "MSELoss", "CrossEntropyLoss",
      "scaled_dot_product_attention", "MultiheadAttention", "cat", "stack",
  };
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
    if (strcmp(target, foreign[i]) == 0)
      return true;
  return false;
}

long long expr_numel(const json_t *shape) {
  if (!json_is_array(shape))
    return -1;
  long long n = 1;
  size_t i;
  json_t *d;
  json_array_foreach(shape, i, d) {
    if (!json_is_integer(d) || json_integer_value(d) < 0)
      return -1;
    n *= json_integer_value(d);
  }
  return n;
}

const char *expr_ctype(const char *dtype) {
  if (!dtype)
    return NULL;
  if (strcmp(dtype, "float32") == 0)
    return "float";
  if (strcmp(dtype, "bool") == 0)
    return "unsigned char";
  if (strcmp(dtype, "int32") == 0)
    return "int";
  if (strcmp(dtype, "int64") == 0)
    return "long long";
  return NULL;
}

/* ---- the IR builder ---- */

struct builder {
  json_t *profile; /* borrowed */
  json_t *bound;   /* borrowed: node name -> symbol, may be NULL */
  json_t *memo;    /* node name -> operand string */
  json_t *leaves, *steps, *ops;
  int fast_ops;
  int depth;
  char *why;
  size_t whylen;
};

static json_t *visit(struct builder *b, const json_t *arg);

/* Records the first failure's reason; returns NULL for the caller to pass on. */
__attribute__((format(printf, 2, 3))) static json_t *fail(struct builder *b, const char *fmt,
                                                            ...) {
  if (!b->why[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, b->whylen, fmt, ap);
    va_end(ap);
  }
  return NULL;
}

/* A constant operand "c:<value>" (new reference). */
static json_t *constant(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "c:%.17g", v);
  return json_string(buf);
}

/* Looks up the profile's spec (inputs or params) of a tensor name (borrowed). */
static json_t *tensor_spec(json_t *profile, const char *name) {
  static const char *const lists[] = {"inputs", "params"};
  for (size_t l = 0; l < 2; l++) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(profile, lists[l]), i, s) {
      const char *n = json_string_value(json_object_get(s, "name"));
      if (n && strcmp(n, name) == 0)
        return s;
    }
  }
  return NULL;
}

/* Contiguous strides of shape (new reference). */
static json_t *contiguous_strides(const json_t *shape) {
  size_t n = json_array_size(shape);
  long long st[8] = {0}, acc = 1;
  if (n > 8)
    return NULL;
  for (size_t i = n; i-- > 0;) {
    st[i] = acc;
    acc *= json_integer_value(json_array_get(shape, i));
  }
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    json_array_append_new(a, json_integer(st[i]));
  return a;
}

/* Operand "L<i>" for a leaf view (steals shape and strides); reuses an equal leaf. */
static json_t *leaf_operand(struct builder *b, const char *tensor, const char *dtype,
                            json_t *shape, json_t *strides) {
  size_t i;
  json_t *l;
  char buf[24];
  json_array_foreach(b->leaves, i, l) {
    if (strcmp(json_string_value(json_object_get(l, "tensor")), tensor) == 0 &&
        json_equal(json_object_get(l, "shape"), shape) &&
        json_equal(json_object_get(l, "strides"), strides)) {
      json_decref(shape);
      json_decref(strides);
      snprintf(buf, sizeof buf, "L%zu", i);
      return json_string(buf);
    }
  }
  if (json_array_size(b->leaves) >= EXPR_MAX_LEAVES) {
    json_decref(shape);
    json_decref(strides);
    return fail(b, "the chain reads more than %s tensors", "16");
  }
  json_array_append_new(b->leaves, json_pack("{s:s, s:s, s:o, s:o}", "tensor", tensor, "dtype",
                                             dtype, "shape", shape, "strides", strides));
  snprintf(buf, sizeof buf, "L%zu", json_array_size(b->leaves) - 1);
  return json_string(buf);
}

/* A step "t<k>" applying op to ins (borrowed operands) with params. */
static json_t *step(struct builder *b, const char *op, json_t *const *ins, size_t nins,
                    const double *params, size_t np) {
  if (json_array_size(b->steps) >= EXPR_MAX_STEPS)
    return fail(b, "the chain has more than %s steps", "256");
  json_t *in = json_array(), *p = json_array();
  /* Copies: operands are renumbered in place later, and memo entries are shared. */
  for (size_t i = 0; i < nins; i++)
    json_array_append_new(in, json_copy(ins[i]));
  for (size_t i = 0; i < np; i++)
    json_array_append_new(p, json_real(params[i]));
  json_array_append_new(b->steps, json_pack("{s:s, s:o, s:o}", "op", op, "in", in, "p", p));
  json_array_append_new(b->ops, json_string(op));
  static const char *const fast[] = {"div", "reciprocal", "exp", "log", "sigmoid", "silu"};
  for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++)
    if (strcmp(op, fast[i]) == 0)
      b->fast_ops++;
  char buf[24];
  snprintf(buf, sizeof buf, "t%zu", json_array_size(b->steps) - 1);
  return json_string(buf);
}

/* A step over a single operand (stolen). */
static json_t *step1(struct builder *b, const char *op, json_t *a, const double *p, size_t np) {
  if (!a)
    return NULL;
  json_t *r = step(b, op, &a, 1, p, np);
  json_decref(a);
  return r;
}

/* A step over two operands (stolen). */
static json_t *step2(struct builder *b, const char *op, json_t *x, json_t *y) {
  json_t *r = NULL;
  if (x && y) {
    json_t *ins[2] = {x, y};
    r = step(b, op, ins, 2, NULL, 0);
  }
  json_decref(x);
  json_decref(y);
  return r;
}

/* A numeric parameter: kwarg name, positional idx (0 = none), module attr name, else
 * def. Returns 0, or -1 when present but not a number. */
static int param(json_t *node, size_t idx, const char *name, double def, double *ret) {
  json_t *v = json_object_get(json_object_get(node, "kwargs"), name);
  if (!v && idx)
    v = json_array_get(json_object_get(node, "args"), idx);
  if (!v)
    v = json_object_get(json_object_get(node, "attrs"), name);
  if (!v || json_is_null(v)) {
    *ret = def;
    return 0;
  }
  return expr_number(v, ret);
}

/* True when every non-1 size of a equals, in order, every non-1 size of b. */
static bool same_nontrivial(const json_t *a, const json_t *b) {
  size_t i = 0, j = 0, na = json_array_size(a), nb = json_array_size(b);
  for (;;) {
    while (i < na && json_integer_value(json_array_get(a, i)) == 1)
      i++;
    while (j < nb && json_integer_value(json_array_get(b, j)) == 1)
      j++;
    if (i == na || j == nb)
      return i == na && j == nb;
    if (json_integer_value(json_array_get(a, i)) != json_integer_value(json_array_get(b, j)))
      return false;
    i++, j++;
  }
}

/* Strides of a leaf viewed as shape `to` without moving data (new reference), or NULL. */
static json_t *restride(const json_t *from, const json_t *strides, const json_t *to,
                        bool expand) {
  size_t n = json_array_size(to), m = json_array_size(from);
  json_t *out = json_array();
  if (expand) {
    for (size_t d = 0; d < n; d++) {
      long long sz = json_integer_value(json_array_get(to, d)), st = 0;
      if (d + m >= n) {
        size_t j = d + m - n;
        long long old = json_integer_value(json_array_get(from, j));
        if (old == sz)
          st = json_integer_value(json_array_get(strides, j));
        else if (old != 1)
          return json_decref(out), NULL;
      }
      json_array_append_new(out, json_integer(st));
    }
    return out;
  }
  if (same_nontrivial(from, to)) {
    size_t j = 0;
    for (size_t d = 0; d < n; d++) {
      long long sz = json_integer_value(json_array_get(to, d)), st = 0;
      if (sz != 1) {
        while (json_integer_value(json_array_get(from, j)) == 1)
          j++;
        st = json_integer_value(json_array_get(strides, j++));
      }
      json_array_append_new(out, json_integer(st));
    }
    return out;
  }
  json_decref(out);
  json_t *cs = contiguous_strides(from);
  bool contiguous = cs != NULL;
  for (size_t j = 0; contiguous && j < m; j++)
    contiguous = json_integer_value(json_array_get(from, j)) == 1 ||
                 json_integer_value(json_array_get(cs, j)) ==
                     json_integer_value(json_array_get(strides, j));
  json_decref(cs);
  return contiguous ? contiguous_strides(to) : NULL;
}

/* A view op (view, reshape, unsqueeze, squeeze, flatten, expand ...) of the node's first
 * argument: a new leaf view, or the operand itself when the shape does not change. */
static json_t *visit_view(struct builder *b, json_t *node, bool expand) {
  json_t *src_ref = expr_arg(node, 0, "input");
  json_t *src = expr_ref(b->profile, src_ref);
  json_t *to = json_object_get(node, "shape");
  json_t *in = visit(b, src_ref);
  if (!in)
    return NULL;
  if (src && json_equal(json_object_get(src, "shape"), to))
    return in;
  const char *op = json_string_value(in);
  /* A bound symbol (a value the kernel supplies per output element) and a constant keep
   * their flat order through a reshape. */
  if ((op[0] == 'B' || op[0] == 'c') && !expand && src &&
      expr_numel(json_object_get(src, "shape")) == expr_numel(to) && expr_numel(to) >= 0)
    return in;
  if (op[0] != 'L' || !json_is_array(to) || json_array_size(to) > 8) {
    json_decref(in);
    return fail(b, "%s of a computed value (not of an input tensor) is unsupported",
                expr_target(node));
  }
  json_t *leaf = json_array_get(b->leaves, strtoul(op + 1, NULL, 10));
  json_t *strides = restride(json_object_get(leaf, "shape"), json_object_get(leaf, "strides"),
                             to, expand);
  json_decref(in);
  if (!strides)
    return fail(b, "%s of an input cannot be expressed without copying", expr_target(node));
  return leaf_operand(b, json_string_value(json_object_get(leaf, "tensor")),
                      json_string_value(json_object_get(leaf, "dtype")), json_deep_copy(to),
                      strides);
}

/* A placeholder or get_attr leaf, or a scalar input as a constant. */
static json_t *visit_leaf(struct builder *b, json_t *node) {
  double v;
  if (expr_scalar_input(b->profile, node, &v) == 0)
    return constant(v);
  const char *tensor = json_string_value(json_object_get(node, "tensor"));
  json_t *spec = tensor ? tensor_spec(b->profile, tensor) : NULL;
  if (!spec)
    return fail(b, "graph input %s is neither a tensor nor a number",
                json_string_value(json_object_get(node, "name")));
  const char *dtype = json_string_value(json_object_get(spec, "dtype"));
  json_t *shape = json_object_get(spec, "shape");
  if (!expr_ctype(dtype))
    return fail(b, "input dtype %s is unsupported", dtype ? dtype : "?");
  if (!json_is_array(shape) || json_array_size(shape) > 8)
    return fail(b, "input %s has no usable shape", tensor);
  return leaf_operand(b, tensor, dtype, json_deep_copy(shape), contiguous_strides(shape));
}

/* Unary ops: names (function, method or module class), IR op, parameters. */
static const struct unary {
  const char *names[3];
  const char *op;
  const char *pname[2]; /* kwarg / module attribute names */
  size_t pidx[2];       /* positional indices (0: keyword only) */
  double pdef[2];       /* defaults; NAN: required */
} unaries[] = {
    {{"relu", "ReLU"}, "relu", {0}, {0}, {0}},
    {{"sigmoid", "Sigmoid"}, "sigmoid", {0}, {0}, {0}},
    {{"tanh", "Tanh"}, "tanh", {0}, {0}, {0}},
    {{"exp"}, "exp", {0}, {0}, {0}},
    {{"exp2"}, "exp2", {0}, {0}, {0}},
    {{"expm1"}, "expm1", {0}, {0}, {0}},
    {{"log"}, "log", {0}, {0}, {0}},
    {{"log2"}, "log2", {0}, {0}, {0}},
    {{"log10"}, "log10", {0}, {0}, {0}},
    {{"log1p"}, "log1p", {0}, {0}, {0}},
    {{"sqrt"}, "sqrt", {0}, {0}, {0}},
    {{"rsqrt"}, "rsqrt", {0}, {0}, {0}},
    {{"abs", "absolute"}, "abs", {0}, {0}, {0}},
    {{"neg", "negative"}, "neg", {0}, {0}, {0}},
    {{"square"}, "square", {0}, {0}, {0}},
    {{"reciprocal"}, "reciprocal", {0}, {0}, {0}},
    {{"sin"}, "sin", {0}, {0}, {0}},
    {{"cos"}, "cos", {0}, {0}, {0}},
    {{"erf"}, "erf", {0}, {0}, {0}},
    {{"floor"}, "floor", {0}, {0}, {0}},
    {{"ceil"}, "ceil", {0}, {0}, {0}},
    {{"trunc", "fix"}, "trunc", {0}, {0}, {0}},
    {{"silu", "SiLU"}, "silu", {0}, {0}, {0}},
    {{"mish", "Mish"}, "mish", {0}, {0}, {0}},
    {{"softsign", "Softsign"}, "softsign", {0}, {0}, {0}},
    {{"hardsigmoid", "Hardsigmoid"}, "hardsigmoid", {0}, {0}, {0}},
    {{"hardswish", "Hardswish"}, "hardswish", {0}, {0}, {0}},
    {{"logsigmoid", "log_sigmoid", "LogSigmoid"}, "logsigmoid", {0}, {0}, {0}},
    {{"selu", "SELU"}, "selu", {0}, {0}, {0}},
    {{"elu", "ELU"}, "elu", {"alpha"}, {1}, {1.0}},
    {{"celu", "CELU"}, "celu", {"alpha"}, {1}, {1.0}},
    {{"leaky_relu", "LeakyReLU"}, "leaky_relu", {"negative_slope"}, {1}, {0.01}},
    {{"hardtanh", "Hardtanh"}, "hardtanh", {"min_val", "max_val"}, {1, 2}, {-1.0, 1.0}},
    {{"relu6", "ReLU6"}, "relu6", {0}, {0}, {0}},
    {{"softplus", "Softplus"}, "softplus", {"beta", "threshold"}, {1, 2}, {1.0, 20.0}},
    {{"threshold", "Threshold"}, "threshold", {"threshold", "value"}, {1, 2}, {NAN, NAN}},
};

static bool name_in(const char *t, const char *const *names, size_t n) {
  for (size_t i = 0; i < n && names[i]; i++)
    if (strcmp(t, names[i]) == 0)
      return true;
  return false;
}

/* The first tensor operand of a call: args[0] (functions, methods, modules) or the
 * "input" keyword. */
static json_t *first_operand(struct builder *b, json_t *node) {
  json_t *a = expr_arg(node, 0, "input");
  return a ? visit(b, a) : fail(b, "%s has no input", expr_target(node));
}

static json_t *visit_unary(struct builder *b, json_t *node, const struct unary *u) {
  double p[3] = {0};
  size_t np = 0;
  for (size_t i = 0; i < 2 && u->pname[i]; i++, np++) {
    if (param(node, u->pidx[i], u->pname[i], u->pdef[i], &p[i]) != 0 || isnan(p[i]))
      return fail(b, "%s: parameter %s must be a constant number", u->op, u->pname[i]);
  }
  const char *op = u->op;
  if (strcmp(op, "relu6") == 0) {
    op = "hardtanh";
    p[0] = 0.0, p[1] = 6.0, np = 2;
  } else if (strcmp(op, "elu") == 0 || strcmp(op, "selu") == 0 || strcmp(op, "celu") == 0) {
    /* Torch's one formula: x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale. */
    double alpha = p[0], scale = 1.0, in_scale = 1.0;
    if (strcmp(op, "selu") == 0)
      alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
    else if (strcmp(op, "celu") == 0)
      in_scale = 1.0 / alpha;
    p[0] = (double)((float)alpha * (float)scale), p[1] = scale, p[2] = in_scale, np = 3;
  }
  return step1(b, op, first_operand(b, node), p, np);
}

/* gelu with approximate "none" (erf) or "tanh". */
static json_t *visit_gelu(struct builder *b, json_t *node) {
  json_t *a = json_object_get(json_object_get(node, "kwargs"), "approximate");
  if (!a)
    a = json_object_get(json_object_get(node, "attrs"), "approximate");
  const char *mode = a ? json_string_value(a) : "none";
  if (!mode || (strcmp(mode, "none") != 0 && strcmp(mode, "tanh") != 0))
    return fail(b, "gelu: approximate=%s is unsupported", mode ? mode : "?");
  return step1(b, strcmp(mode, "tanh") == 0 ? "gelu_tanh" : "gelu", first_operand(b, node),
               NULL, 0);
}

/* pow(x, c) with the specializations torch uses for common exponents, or the general
 * powf for a tensor exponent or base. */
static json_t *visit_pow(struct builder *b, json_t *node) {
  json_t *base = expr_arg(node, 0, "input"), *ex = expr_arg(node, 1, "exponent");
  if (!base)
    base = expr_arg(node, 0, "self");
  double e;
  if (!base || !ex)
    return fail(b, "pow needs a base and an exponent");
  if (expr_number(ex, &e) != 0) {
    json_t *x = visit(b, base);
    json_t *y = visit(b, ex);
    return step2(b, "pow", x, y);
  }
  json_t *x = visit(b, base);
  if (e == 0.0) {
    json_decref(x);
    return x ? constant(1.0) : NULL;
  }
  if (e == 1.0)
    return x;
  static const struct {
    double e;
    const char *op;
  } special[] = {{2.0, "square"}, {3.0, "cube"}, {0.5, "sqrt"}, {-0.5, "rsqrt"},
                 {-1.0, "reciprocal"}};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
    if (e == special[i].e)
      return step1(b, special[i].op, x, NULL, 0);
  if (e == -2.0)
    return step1(b, "reciprocal", step1(b, "square", x, NULL, 0), NULL, 0);
  return step2(b, "pow", x, constant(e));
}

/* clamp/clip/clamp_min/clamp_max with number bounds (params) or tensor bounds
 * (maximum/minimum steps). */
static json_t *visit_clamp(struct builder *b, json_t *node, const char *t) {
  json_t *lo = NULL, *hi = NULL;
  if (strcmp(t, "clamp_min") == 0)
    lo = expr_arg(node, 1, "min");
  else if (strcmp(t, "clamp_max") == 0)
    hi = expr_arg(node, 1, "max");
  else
    lo = expr_arg(node, 1, "min"), hi = expr_arg(node, 2, "max");
  double vlo, vhi;
  bool nlo = lo && expr_number(lo, &vlo) == 0, nhi = hi && expr_number(hi, &vhi) == 0;
  if (!lo && !hi)
    return fail(b, "%s without bounds", t);
  json_t *x = first_operand(b, node);
  if (nlo && nhi) {
    double p[2] = {vlo, vhi};
    return step1(b, "clamp", x, p, 2);
  }
  if (lo)
    x = nlo ? step1(b, "clamp_min", x, &vlo, 1) : step2(b, "maximum", x, visit(b, lo));
  if (hi)
    x = nhi ? step1(b, "clamp_max", x, &vhi, 1) : step2(b, "minimum", x, visit(b, hi));
  return x;
}

/* add/sub with torch's alpha: a + alpha * b. rsub swaps the operands. */
static json_t *visit_addsub(struct builder *b, json_t *node, const char *op, bool swap) {
  json_t *x = expr_arg(node, 0, "input"), *y = expr_arg(node, 1, "other");
  double alpha;
  if (!x || !y)
    return fail(b, "%s needs two operands", op);
  if (param(node, 0, "alpha", 1.0, &alpha) != 0)
    return fail(b, "%s: alpha must be a constant number", op);
  json_t *a = visit(b, swap ? y : x), *c = visit(b, swap ? x : y);
  if (alpha != 1.0)
    c = step2(b, "mul", c, constant(alpha));
  return step2(b, op, a, c);
}

static json_t *visit_binary(struct builder *b, json_t *node, const char *op) {
  json_t *x = expr_arg(node, 0, "input"), *y = expr_arg(node, 1, "other");
  if (!x || !y)
    return fail(b, "%s needs two operands", op);
  /* Operands in order (C leaves argument evaluation unordered): leaves are numbered as
   * they are met. */
  json_t *a = visit(b, x);
  json_t *c = visit(b, y);
  return step2(b, op, a, c);
}

/* True for ops that write into their input (x.relu_(), operator.iadd, inplace=True). */
static bool in_place(json_t *node, const char *t) {
  const char *full = json_string_value(json_object_get(node, "target"));
  size_t n = strlen(t);
  if (n > 1 && t[n - 1] == '_' && t[0] != '_')
    return true;
  if (full && strncmp(full, "operator.i", 10) == 0)
    return true;
  return json_is_true(json_object_get(json_object_get(node, "kwargs"), "inplace")) ||
         json_is_true(json_object_get(json_object_get(node, "attrs"), "inplace"));
}

/* The out-of-place name of in-place op t ("relu_" -> "relu", "iadd" of operator.iadd ->
 * "add") in buf, or t itself when it has no in-place spelling. */
static const char *out_of_place_name(const char *t, char *buf, size_t len) {
  size_t n = strlen(t);
  static const char *const ops[] = {"iadd", "isub", "imul", "itruediv"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(t, ops[i]) == 0)
      return ops[i] + 1;
  if (n > 1 && n < len && t[n - 1] == '_' && t[0] != '_') {
    snprintf(buf, len, "%.*s", (int)(n - 1), t);
    return buf;
  }
  return t;
}

/* Dropout is the identity only when it drops nothing (p == 0) or is not training; the
 * evaluator runs models in training mode. */
static json_t *visit_dropout(struct builder *b, json_t *node) {
  double p, training;
  if (param(node, 1, "p", 0.5, &p) != 0 || param(node, 2, "training", 1.0, &training) != 0)
    return fail(b, "%s: p and training must be constants", expr_target(node));
  if (p != 0.0 && training != 0.0)
    return fail(b, "%s with p=%g in training mode is random", expr_target(node), p);
  return first_operand(b, node);
}

/* An arithmetic or activation op (the node produces float32); NULL with why when the op
 * is unknown. */
static json_t *visit_op(struct builder *b, json_t *node, const char *t) {
  if (strcmp(t, "add") == 0 || strcmp(t, "sub") == 0 || strcmp(t, "subtract") == 0)
    return visit_addsub(b, node, t[0] == 'a' ? "add" : "sub", false);
  if (strcmp(t, "rsub") == 0)
    return visit_addsub(b, node, "sub", true);
  if (strcmp(t, "mul") == 0 || strcmp(t, "multiply") == 0)
    return visit_binary(b, node, "mul");
  if (strcmp(t, "truediv") == 0 || strcmp(t, "div") == 0 || strcmp(t, "divide") == 0 ||
      strcmp(t, "true_divide") == 0) {
    if (expr_arg(node, 99, "rounding_mode"))
      return fail(b, "%s with a rounding_mode is unsupported", t);
    return visit_binary(b, node, "div");
  }
  if (strcmp(t, "pow") == 0)
    return visit_pow(b, node);
  if (strcmp(t, "maximum") == 0 || strcmp(t, "minimum") == 0 || strcmp(t, "fmax") == 0 ||
      strcmp(t, "fmin") == 0)
    return visit_binary(b, node, t);
  if (strcmp(t, "max") == 0 || strcmp(t, "min") == 0) {
    json_t *other = expr_arg(node, 1, "other");
    if (!json_object_get(other, "node"))
      return fail(b, "foreign op %s", t); /* a reduction over a dim */
    return visit_binary(b, node, t[1] == 'a' ? "maximum" : "minimum");
  }
  if (strcmp(t, "clamp") == 0 || strcmp(t, "clip") == 0 || strcmp(t, "clamp_min") == 0 ||
      strcmp(t, "clamp_max") == 0)
    return visit_clamp(b, node, t);
  if (strcmp(t, "gelu") == 0 || strcmp(t, "GELU") == 0)
    return visit_gelu(b, node);
  if (strcmp(t, "round") == 0) {
    double d;
    if (param(node, 0, "decimals", 0.0, &d) != 0 || d != 0.0)
      return fail(b, "round with decimals is unsupported");
    return step1(b, "round", first_operand(b, node), NULL, 0);
  }
  for (size_t i = 0; i < sizeof unaries / sizeof unaries[0]; i++)
    if (name_in(t, unaries[i].names, 3))
      return visit_unary(b, node, &unaries[i]);
  return fail(b, "unsupported op %s", t);
}

/* A call node: in-place ops refused, views and identities passed through, ops of other
 * families reported as foreign, the rest translated by visit_op. */
static json_t *visit_call(struct builder *b, json_t *node) {
  const char *t = expr_target(node);
  const char *dtype = json_string_value(json_object_get(node, "dtype"));
  static const char *const views[] = {"view", "reshape", "unsqueeze", "squeeze", "flatten",
                                      "unflatten", "view_as", "reshape_as"};
  static const char *const expands[] = {"expand", "expand_as", "broadcast_to"};
  static const char *const idents[] = {"contiguous", "clone", "detach", "Identity", "float",
                                       "to", "type_as"};
  static const char *const dropouts[] = {"dropout", "Dropout", "dropout1d", "dropout2d",
                                         "dropout3d", "Dropout1d", "Dropout2d", "Dropout3d",
                                         "alpha_dropout", "AlphaDropout"};
  char plain[64];
  if (in_place(node, t)) {
    /* Out of place is the same value when nothing else reads what the op overwrites. */
    const char *src = json_string_value(json_object_get(expr_arg(node, 0, "input"), "node"));
    if (!src || graph_user_count(b->profile, src) != 1)
      return fail(b, "in-place op %s on a value that other nodes read is unsupported", t);
    t = out_of_place_name(t, plain, sizeof plain);
  }
  if (name_in(t, views, 8))
    return visit_view(b, node, false);
  if (name_in(t, expands, 3))
    return visit_view(b, node, true);
  if (expr_is_foreign_op(t))
    return fail(b, "foreign op %s", t);
  if (!dtype || strcmp(dtype, "float32") != 0)
    return fail(b, "op %s produces %s; only float32 chains are supported", t,
                dtype ? dtype : "a non-tensor");
  if (name_in(t, idents, 7))
    return first_operand(b, node);
  if (name_in(t, dropouts, 10))
    return visit_dropout(b, node);
  return visit_op(b, node, t);
}

static json_t *visit(struct builder *b, const json_t *arg) {
  double v;
  const char *name = json_string_value(json_object_get(arg, "node"));
  if (!name) {
    if (expr_number(arg, &v) == 0)
      return constant(v);
    return fail(b, "an argument is neither a graph node nor a number");
  }
  json_t *sym = b->bound ? json_object_get(b->bound, name) : NULL;
  if (sym) {
    char buf[80];
    snprintf(buf, sizeof buf, "B:%s", json_string_value(sym));
    return json_string(buf);
  }
  json_t *memo = json_object_get(b->memo, name);
  if (memo)
    return json_incref(memo);
  json_t *node = graph_node(b->profile, name);
  if (!node)
    return fail(b, "unknown graph node %s", name);
  if (b->depth >= 512)
    return fail(b, "the chain is nested too deeply");
  const char *op = json_string_value(json_object_get(node, "op"));
  b->depth++;
  json_t *r;
  if (op && (strcmp(op, "placeholder") == 0 || strcmp(op, "get_attr") == 0))
    r = visit_leaf(b, node);
  else if (op && strncmp(op, "call_", 5) == 0)
    r = visit_call(b, node);
  else
    r = fail(b, "unsupported graph node %s", name);
  b->depth--;
  if (r)
    json_object_set(b->memo, name, r);
  return r;
}

/* Renames operand *op ("L<old>") through map, in place. */
static void rename_leaf(json_t *op, const long *map) {
  const char *s = json_string_value(op);
  if (s && s[0] == 'L') {
    char buf[24];
    snprintf(buf, sizeof buf, "L%ld", map[strtol(s + 1, NULL, 10)]);
    json_string_set(op, buf);
  }
}

/* Drops leaves no step or result reads (a view replaces the leaf it was taken of) and
 * renumbers the rest in order. */
static void prune_leaves(struct builder *b, json_t *result) {
  long map[EXPR_MAX_LEAVES];
  bool used[EXPR_MAX_LEAVES] = {false};
  size_t k, j;
  json_t *s, *op;
  const char *r = json_string_value(result);
  if (r[0] == 'L')
    used[strtol(r + 1, NULL, 10)] = true;
  json_array_foreach(b->steps, k, s) json_array_foreach(json_object_get(s, "in"), j, op) {
    const char *o = json_string_value(op);
    if (o[0] == 'L')
      used[strtol(o + 1, NULL, 10)] = true;
  }
  long next = 0;
  size_t n = json_array_size(b->leaves);
  for (size_t i = 0; i < n; i++)
    map[i] = used[i] ? next++ : -1;
  for (size_t i = n; i-- > 0;)
    if (!used[i])
      json_array_remove(b->leaves, i);
  rename_leaf(result, map);
  json_array_foreach(b->steps, k, s) json_array_foreach(json_object_get(s, "in"), j, op)
      rename_leaf(op, map);
}

int expr_build(json_t *profile, json_t *root, json_t *bound, json_t **ret_ir, char *why,
               size_t whylen) {
  char local[8];
  struct builder b = {.profile = profile, .bound = bound, .memo = json_object(),
                      .leaves = json_array(), .steps = json_array(), .ops = json_array(),
                      .why = why ? why : local, .whylen = why ? whylen : sizeof local};
  b.why[0] = '\0';
  json_t *ref = json_pack("{s:s}", "node", json_string_value(json_object_get(root, "name")));
  json_t *res = ref && b.memo && b.leaves && b.steps && b.ops ? visit(&b, ref) : NULL;
  json_t *shape = json_object_get(root, "shape");
  json_t *ir = NULL;
  if (res) {
    json_t *own = json_copy(res);
    json_decref(res);
    res = own;
  }
  if (res)
    prune_leaves(&b, res);
  if (res && !json_is_array(shape))
    fail(&b, "%s has no known shape", json_string_value(json_object_get(root, "name")));
  else if (res)
    ir = json_pack("{s:O, s:O, s:O, s:O, s:O, s:i}", "shape", shape, "leaves", b.leaves,
                   "steps", b.steps, "result", res, "ops", b.ops, "fast_ops", b.fast_ops);
  char off[512];
  for (size_t i = 0; ir && i < json_array_size(b.leaves); i++)
    if (expr_leaf_offset(ir, i, "i", off, sizeof off) < 0) {
      fail(&b, "%s does not broadcast to the result shape",
           json_string_value(json_object_get(json_array_get(b.leaves, i), "tensor")));
      json_decref(ir);
      ir = NULL;
    }
  if (!ir && !b.why[0])
    snprintf(b.why, b.whylen, "out of memory");
  json_decref(ref);
  json_decref(res);
  json_decref(b.memo);
  json_decref(b.leaves);
  json_decref(b.steps);
  json_decref(b.ops);
  if (!ir)
    return -1;
  *ret_ir = ir;
  return 0;
}

/* ---- CUDA text ---- */

/* Accurate and fast-math forms: $a, $b are the operands, $0..$2 the parameters. */
static const struct form {
  const char *op, *acc, *fast;
} forms[] = {
    {"add", "$a + $b", NULL},
    {"sub", "$a - $b", NULL},
    {"mul", "$a * $b", NULL},
    {"div", "$a / $b", "__fdividef($a, $b)"},
    {"pow", "powf($a, $b)", NULL},
    {"maximum", "ofg_maximum($a, $b)", NULL},
    {"minimum", "ofg_minimum($a, $b)", NULL},
    {"fmax", "fmaxf($a, $b)", NULL},
    {"fmin", "fminf($a, $b)", NULL},
    {"neg", "-$a", NULL},
    {"abs", "fabsf($a)", NULL},
    {"relu", "($a < 0.0f ? 0.0f : $a)", NULL},
    {"sigmoid", "1.0f / (1.0f + expf(-$a))", "__fdividef(1.0f, 1.0f + __expf(-$a))"},
    {"tanh", "tanhf($a)", NULL},
    {"exp", "expf($a)", "__expf($a)"},
    {"exp2", "exp2f($a)", NULL},
    {"expm1", "expm1f($a)", NULL},
    {"log", "logf($a)", "__logf($a)"},
    {"log2", "log2f($a)", NULL},
    {"log10", "log10f($a)", NULL},
    {"log1p", "log1pf($a)", NULL},
    {"sqrt", "sqrtf($a)", NULL},
    {"rsqrt", "rsqrtf($a)", NULL},
    {"square", "$a * $a", NULL},
    {"cube", "$a * $a * $a", NULL},
    {"reciprocal", "1.0f / $a", "__fdividef(1.0f, $a)"},
    {"sin", "sinf($a)", NULL},
    {"cos", "cosf($a)", NULL},
    {"erf", "erff($a)", NULL},
    {"floor", "floorf($a)", NULL},
    {"ceil", "ceilf($a)", NULL},
    {"trunc", "truncf($a)", NULL},
    {"round", "rintf($a)", NULL},
    {"gelu", "$a * 0.5f * (1.0f + erff($a * 0.707106781186547524f))", NULL},
    {"gelu_tanh",
     "0.5f * $a * (1.0f + tanhf(0.797884560802865356f * ($a + 0.044715f * ($a * $a * $a))))",
     NULL},
    {"silu", "$a / (1.0f + expf(-$a))", "__fdividef($a, 1.0f + __expf(-$a))"},
    {"mish", "$a * tanhf(log1pf(expf($a)))", NULL},
    {"softsign", "$a / (1.0f + fabsf($a))", NULL},
    {"hardsigmoid", "ofg_clamp($a + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f)", NULL},
    {"hardswish", "$a * ofg_clamp($a + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f)", NULL},
    {"logsigmoid", "fminf($a, 0.0f) - log1pf(expf(-fabsf($a)))", NULL},
    {"elu", "($a <= 0.0f ? expm1f($a * $2) * $0 : $a * $1)", NULL},
    {"selu", "($a <= 0.0f ? expm1f($a * $2) * $0 : $a * $1)", NULL},
    {"celu", "($a <= 0.0f ? expm1f($a * $2) * $0 : $a * $1)", NULL},
    {"leaky_relu", "($a > 0.0f ? $a : $a * $0)", NULL},
    {"hardtanh", "ofg_clamp($a, $0, $1)", NULL},
    {"clamp", "ofg_clamp($a, $0, $1)", NULL},
    {"clamp_min", "ofg_clamp_min($a, $0)", NULL},
    {"clamp_max", "ofg_clamp_max($a, $0)", NULL},
    {"softplus", "($a * $0 > $1 ? $a : log1pf(expf($a * $0)) / $0)", NULL},
    {"threshold", "($a > $0 ? $a : $1)", NULL},
};

/* NaN-propagating helpers with torch's semantics (fminf/fmaxf would drop NaN). */
static const char helpers[] =
    "#ifndef OFG_EXPR_HELPERS\n"
    "#define OFG_EXPR_HELPERS\n"
    "__device__ __forceinline__ float ofg_clamp(float x, float lo, float hi) {\n"
    "  return x != x ? x : fminf(fmaxf(x, lo), hi);\n}\n"
    "__device__ __forceinline__ float ofg_clamp_min(float x, float lo) {\n"
    "  return x != x ? x : fmaxf(x, lo);\n}\n"
    "__device__ __forceinline__ float ofg_clamp_max(float x, float hi) {\n"
    "  return x != x ? x : fminf(x, hi);\n}\n"
    "__device__ __forceinline__ float ofg_maximum(float a, float b) {\n"
    "  return (a != a || a > b) ? a : b;\n}\n"
    "__device__ __forceinline__ float ofg_minimum(float a, float b) {\n"
    "  return (a != a || a < b) ? a : b;\n}\n"
    "#endif\n";

/* The C text of an operand into out. */
static void operand_text(const char *op, char *out, size_t outlen) {
  if (strncmp(op, "c:", 2) == 0)
    cg_float(strtod(op + 2, NULL), out, outlen);
  else if (strncmp(op, "B:", 2) == 0)
    snprintf(out, outlen, "B_%s", op + 2);
  else
    snprintf(out, outlen, "%s", op);
}

/* Appends one step's expression: the form with operands and parameters substituted. */
static void emit_form(struct cg_buf *out, const char *form, const json_t *in, const json_t *p) {
  for (const char *c = form; *c; c++) {
    char text[64];
    if (c[0] == '$' && (c[1] == 'a' || c[1] == 'b')) {
      operand_text(json_string_value(json_array_get(in, c[1] == 'a' ? 0 : 1)), text,
                   sizeof text);
      cg_printf(out, "%s", text);
      c++;
    } else if (c[0] == '$' && c[1] >= '0' && c[1] <= '2') {
      cg_float(json_number_value(json_array_get(p, (size_t)(c[1] - '0'))), text, sizeof text);
      cg_printf(out, "%s", text);
      c++;
    } else {
      cg_printf(out, "%c", *c);
    }
  }
}

int expr_emit(const json_t *ir, const char *name, const char *const *syms, size_t nsyms,
              bool fast, struct cg_buf *out) {
  cg_printf(out, "%s__device__ __forceinline__ float %s(", helpers, name);
  size_t nleaves = json_array_size(json_object_get(ir, "leaves"));
  for (size_t i = 0; i < nleaves; i++)
    cg_printf(out, "%sfloat L%zu", i ? ", " : "", i);
  for (size_t i = 0; i < nsyms; i++)
    cg_printf(out, "%sfloat B_%s", i || nleaves ? ", " : "", syms[i]);
  cg_printf(out, ") {\n");
  size_t k;
  json_t *s;
  json_array_foreach(json_object_get(ir, "steps"), k, s) {
    const char *op = json_string_value(json_object_get(s, "op"));
    const struct form *f = NULL;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0] && !f; i++)
      if (strcmp(forms[i].op, op) == 0)
        f = &forms[i];
    if (!f)
      return -1;
    cg_printf(out, "  const float t%zu = ", k);
    emit_form(out, fast && f->fast ? f->fast : f->acc, json_object_get(s, "in"),
              json_object_get(s, "p"));
    cg_printf(out, ";\n");
  }
  char text[64];
  operand_text(json_string_value(json_object_get(ir, "result")), text, sizeof text);
  cg_printf(out, "  return %s;\n}\n", text);
  return out->failed ? -1 : 0;
}

int expr_broadcast_strides(const json_t *ir, size_t leaf, long long size[8],
                           long long stride[8]) {
  const json_t *shape = json_object_get(ir, "shape");
  const json_t *l = json_array_get(json_object_get(ir, "leaves"), leaf);
  const json_t *ls = json_object_get(l, "shape"), *lst = json_object_get(l, "strides");
  size_t n = json_array_size(shape), m = json_array_size(ls);
  if (n > 8 || m > n || !l)
    return -1;
  for (size_t d = 0; d < n; d++) {
    size[d] = json_integer_value(json_array_get(shape, d));
    stride[d] = 0;
    if (d + m >= n) {
      size_t j = d + m - n;
      long long s = json_integer_value(json_array_get(ls, j));
      if (s == size[d])
        stride[d] = s == 1 ? 0 : json_integer_value(json_array_get(lst, j));
      else if (s != 1)
        return -1;
    }
  }
  return (int)n;
}

/* An index constant: plain when it fits an int, so that 32-bit index math stays 32-bit. */
static const char *ll(long long v) {
  return v > 2147483647LL ? "LL" : "";
}

int expr_leaf_offset(const json_t *ir, size_t leaf, const char *var, char *out,
                     size_t outlen) {
  long long size[8], stride[8];
  int n = expr_broadcast_strides(ir, leaf, size, stride);
  if (n < 0)
    return -1;
  /* Full: the leaf's strides are the result's contiguous strides (size-1 dims aside). */
  bool full = true;
  long long acc = 1;
  for (int d = n - 1; d >= 0; d--) {
    if (size[d] != 1 && stride[d] != acc)
      full = false;
    acc *= size[d];
  }
  if (full)
    return snprintf(out, outlen, "%s", var) < (int)outlen ? 1 : -1;
  /* Merge runs of dims that index the leaf linearly, innermost first, then emit one
   * (var / div % size) * stride term per run with a non-zero stride. */
  size_t used = 0;
  int terms = 0;
  long long div = 1;
  used += (size_t)snprintf(out, outlen, "(");
  for (int d = n - 1; d >= 0;) {
    long long run_size = size[d], run_stride = stride[d];
    int e = d - 1;
    while (e >= 0 && (size[e] == 1 || stride[e] == (run_stride == 0 ? 0 : run_stride * run_size)))
      run_size *= size[e], e--;
    if (run_stride != 0 && run_size > 1 && used < outlen) {
      bool outer = div * run_size == acc;
      used += (size_t)snprintf(out + used, outlen - used, "%s(%s", terms ? " + " : "", var);
      if (div > 1 && used < outlen)
        used += (size_t)snprintf(out + used, outlen - used, " / %lld%s", div, ll(div));
      if (!outer && used < outlen)
        used += (size_t)snprintf(out + used, outlen - used, " %% %lld%s", run_size,
                                 ll(run_size));
      if (used < outlen)
        used += (size_t)snprintf(out + used, outlen - used, ")");
      if (run_stride != 1 && used < outlen)
        used += (size_t)snprintf(out + used, outlen - used, " * %lld%s", run_stride,
                                 ll(run_stride));
      terms++;
    }
    div *= run_size;
    d = e;
  }
  if (used < outlen)
    used += (size_t)snprintf(out + used, outlen - used, "%s)", terms ? "" : "0");
  return used < outlen ? 0 : -1;
}

int expr_append(json_t *ir, const char *op) {
  json_t *steps = json_object_get(ir, "steps");
  const json_t *result = json_object_get(ir, "result");
  if (!json_is_array(steps) || !json_is_string(result))
    return -1;
  char buf[24];
  snprintf(buf, sizeof buf, "t%zu", json_array_size(steps));
  if (json_array_append_new(steps, json_pack("{s:s, s:[O], s:[]}", "op", op, "in", result,
                                             "p")) != 0 ||
      json_array_append_new(json_object_get(ir, "ops"), json_string(op)) != 0 ||
      json_object_set_new(ir, "result", json_string(buf)) != 0)
    return -1;
  return 0;
}

bool expr_all_full(const json_t *ir) {
  char off[512];
  for (size_t i = 0; i < json_array_size(json_object_get(ir, "leaves")); i++)
    if (expr_leaf_offset(ir, i, "i", off, sizeof off) != 1)
      return false;
  return true;
}
