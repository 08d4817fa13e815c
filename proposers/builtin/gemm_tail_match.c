/* The GEMM matcher's row operations over the output features, each a step of the row tail
 * program: reductions, softmax, group/layer/instance norm, training-mode batch norm, and
 * 1-D pooling. */
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm_internal.h"

static int reduce_dims(json_t *dim, int rank, int ret[MAX_RANK]) {
  int n = 0;
  if (!dim || json_is_null(dim)) {
    for (int d = 0; d < rank; d++)
      ret[n++] = d;
    return n;
  }
  json_t *one[1] = {dim};
  size_t count = json_is_array(dim) ? json_array_size(dim) : 1;
  for (size_t i = 0; i < count && i < MAX_RANK; i++) {
    json_t *v = json_is_array(dim) ? json_array_get(dim, i) : one[0];
    long long d;
    if (mt_json_ll(v, &d) != 0 || d < -rank || d >= rank)
      return -1;
    ret[n++] = (int)(d < 0 ? d + rank : d);
  }
  return n;
}

/* The first dim of shape S (rank r) from which the dims span exactly the stage's cols, or
 * -1. */
static int col_split(const struct matcher *m, const long long *S, int r) {
  for (int s = 0; s <= r; s++)
    if (graph_dims_prod(S, s, r) == m->cols)
      return s;
  return -1;
}

/* True when the reduced dims (with size > 1) are exactly the row's features. */
static bool dims_are_row(const struct matcher *m, const struct val *x, const int *rd, int nrd) {
  int split = col_split(m, x->shape, x->rank);
  if (split < 0)
    return false;
  bool in[MAX_RANK] = {false};
  for (int i = 0; i < nrd; i++)
    in[rd[i]] = true;
  for (int d = 0; d < x->rank; d++)
    if (x->shape[d] > 1 && in[d] != (d >= split))
      return false;
  return true;
}

int mt_reduce_op(struct matcher *m, json_t *node, struct val *out, const char *kind) {
  struct val *x = mt_input_var(m, node);
  if (!x || (x->kind != V_VAR && x->kind != V_TUPLE))
    return mt_fail(m, "%s: input is not the GEMM's value", node_target(node));
  bool tuple = (strcmp(kind, "max") == 0 || strcmp(kind, "min") == 0) && !named(node, "amax") &&
               !named(node, "amin");
  json_t *dim = graph_arg(node, 1, "dim");
  json_t *dtype = json_object_get(json_object_get(node, "kwargs"), "dtype");
  if (dtype && !json_is_null(dtype))
    return mt_fail(m, "%s with dtype is not supported", node_target(node));
  if (tuple && (!dim || json_is_null(dim)))
    return mt_fail(m, "%s over all elements is not supported", node_target(node));
  int rd[MAX_RANK];
  int nrd = reduce_dims(dim, x->rank, rd);
  if (nrd < 0)
    return mt_fail(m, "%s: unsupported dim", node_target(node));
  bool trivial = true;
  for (int i = 0; i < nrd; i++)
    trivial = trivial && x->shape[rd[i]] == 1;
  enum vkind k = tuple ? V_TUPLE : V_VAR;
  if (trivial) { /* over size-1 dims: the value itself, exactly */
    if (x->gen != m->gen)
      return mt_fail(m, "%s: a value from before a row operation is used after it",
                     node_target(node));
    return mt_set_var(m, out, node, x->var, k);
  }
  if (m->phase != PH_EPI && m->phase != PH_ROW)
    return mt_fail(m, "%s after the row was reduced or broadcast", node_target(node));
  if (!dims_are_row(m, x, rd, nrd))
    return mt_fail(m, "%s over dims other than the output features", node_target(node));
  char code[160];
  if (strcmp(kind, "mean") == 0)
    snprintf(code, sizeof code, "  s = ofg_tail_sum(row, n, red) / (float)n;\n");
  else
    snprintf(code, sizeof code, "  s = ofg_tail_%s(row, n, red);\n", kind);
  if (mt_row_op(m, x, kind, PH_SCALAR, 1, code) != 0)
    return -1;
  return mt_set_var(m, out, node, 0, k);
}

/* softmax / log_softmax over the features. */
int mt_softmax_op(struct matcher *m, json_t *node, struct val *out, bool logsm) {
  struct val *x = mt_input_var(m, node);
  if (!x || x->kind != V_VAR)
    return mt_fail(m, "%s: input is not the GEMM's value", node_target(node));
  json_t *dim = graph_param(node, 1, "dim");
  json_t *dtype = json_object_get(json_object_get(node, "kwargs"), "dtype");
  long long d;
  if (mt_json_ll(dim, &d) != 0 || d < -x->rank || d >= x->rank || (dtype && !json_is_null(dtype)))
    return mt_fail(m, "%s: unsupported dim or dtype", node_target(node));
  if (d < 0)
    d += x->rank;
  if (x->shape[d] != m->cols || graph_dims_prod(x->shape, (int)d + 1, x->rank) != 1 ||
      (m->phase != PH_EPI && m->phase != PH_ROW))
    return mt_fail(m, "%s over a dim other than the output features", node_target(node));
  char code[96];
  snprintf(code, sizeof code, "  ofg_tail_softmax(row, n, red, %d);\n", logsm ? 1 : 0);
  if (mt_row_op(m, x, logsm ? "log_softmax" : "softmax", PH_ROW, m->cols, code) != 0)
    return -1;
  return mt_set_var(m, out, node, 0, V_VAR);
}

/* A group normalization of each row (G groups of cols/G features) with optional
 * per-feature affine: group norm, layer norm (G = 1), instance norm (G = 1). */
static int groupnorm_code(struct matcher *m, struct val *x, json_t *node, const char *name,
                          long long groups, double eps, const char *w, const char *b,
                          struct val *out) {
  if (groups < 1 || m->cols % groups != 0)
    return mt_fail(m, "%s: %lld groups do not divide %lld features", name, groups, m->cols);
  if (m->phase != PH_EPI && m->phase != PH_ROW)
    return mt_fail(m, "%s after the row was reduced or broadcast", name);
  if (m->phase == PH_EPI && mt_begin_tail(m, x->var) != 0)
    return -1;
  char wp[32], bp[32], code[256];
  mt_tail_param(m, w, wp, sizeof wp);
  mt_tail_param(m, b, bp, sizeof bp);
  snprintf(code, sizeof code, "  ofg_tail_groupnorm(row, n, %lld, %.9gf, %s, %s, red);\n", groups,
           eps, wp, bp);
  if (mt_row_op(m, x, name, PH_ROW, m->cols, code) != 0)
    return -1;
  return mt_set_var(m, out, node, 0, V_VAR);
}

static bool num(json_t *v, double *ret) {
  if (!json_is_number(v))
    return false;
  *ret = json_number_value(v);
  return true;
}

/* The affine weight and bias of a norm: the module's params when its affine_attr is
 * true, else the function's weight/bias arguments at positions wpos, wpos + 1. */
static int affine_params(struct matcher *m, json_t *node, const char *affine_attr, size_t wpos,
                         const char **ret_w, const char **ret_b) {
  const char *w = NULL, *b = NULL;
  if (graph_is_module(node)) {
    if (json_is_true(graph_attr(node, affine_attr))) {
      w = graph_module_param(node, "weight");
      b = graph_module_param(node, "bias");
    }
  } else {
    struct val *wv = mt_arg_val(m, graph_arg(node, wpos, "weight"));
    struct val *bv = mt_arg_val(m, graph_arg(node, wpos + 1, "bias"));
    if ((wv && wv->kind != V_TENSOR) || (bv && bv->kind != V_TENSOR))
      return mt_fail(m, "%s: weight/bias are not tensors", node_target(node));
    w = wv ? wv->tensor : NULL;
    b = bv ? bv->tensor : NULL;
  }
  *ret_w = w;
  *ret_b = b;
  return 0;
}

/* eps from the module attribute or the function argument at pos (default 1e-5). */
static int norm_eps(struct matcher *m, json_t *node, size_t pos, double *ret_eps) {
  json_t *ev = graph_param(node, pos, "eps");
  *ret_eps = 1e-5;
  if (ev && !json_is_null(ev) && !num(ev, ret_eps))
    return mt_fail(m, "%s: unsupported eps", node_target(node));
  return 0;
}

/* GroupNorm over [rows, C] with C the output features. */
static int group_norm_op(struct matcher *m, json_t *node, struct val *x, struct val *out) {
  long long g;
  double eps;
  const char *w, *b;
  json_t *gv = graph_param(node, 1, "num_groups");
  if (mt_json_ll(gv, &g) != 0 || norm_eps(m, node, 4, &eps) != 0)
    return mt_fail(m, "%s: unsupported arguments", node_target(node));
  if (x->rank < 2 || x->shape[1] != m->cols || graph_dims_prod(x->shape, 2, x->rank) != 1)
    return mt_fail(m, "%s: channels are not the output features", node_target(node));
  if (affine_params(m, node, "affine", 2, &w, &b) != 0)
    return -1;
  return groupnorm_code(m, x, node, "group_norm", g, eps, w, b, out);
}

/* LayerNorm over trailing dims spanning exactly the output features. */
static int layer_norm_op(struct matcher *m, json_t *node, struct val *x, struct val *out) {
  double eps;
  const char *w, *b;
  const long long *S = x->shape;
  int r = x->rank;
  json_t *ns = graph_param(node, 1, "normalized_shape");
  if (norm_eps(m, node, 4, &eps) != 0)
    return -1;
  size_t nn = json_is_array(ns) ? json_array_size(ns) : 1;
  long long p = 1;
  for (size_t i = 0; i < nn; i++) {
    long long d;
    if (mt_json_ll(json_is_array(ns) ? json_array_get(ns, i) : ns, &d) != 0 || (int)nn > r ||
        d != S[r - (int)nn + (int)i])
      return mt_fail(m, "%s: normalized_shape is not the trailing dims", node_target(node));
    p *= d;
  }
  if (p != m->cols)
    return mt_fail(m, "%s: normalized features are not the output features", node_target(node));
  if (affine_params(m, node, "elementwise_affine", 2, &w, &b) != 0)
    return -1;
  return groupnorm_code(m, x, node, "layer_norm", 1, eps, w, b, out);
}

/* InstanceNorm1d/2d/3d: per (batch, channel) over spatial dims spanning the features. */
static int instance_norm_op(struct matcher *m, json_t *node, struct val *x, struct val *out) {
  double eps;
  bool mod = graph_is_module(node);
  if (norm_eps(m, node, 7, &eps) != 0)
    return -1;
  json_t *wa = graph_arg(node, 3, "weight");
  bool affine = mod ? json_is_true(graph_attr(node, "affine")) : (wa && !json_is_null(wa));
  json_t *uis = mod ? NULL : graph_arg(node, 5, "use_input_stats");
  if (affine || (uis && json_is_false(uis)))
    return mt_fail(m, "%s with affine parameters or running statistics is not supported",
                   node_target(node));
  if (x->rank < 3 || graph_dims_prod(x->shape, 2, x->rank) != m->cols)
    return mt_fail(m, "%s: spatial dims are not the output features", node_target(node));
  return groupnorm_code(m, x, node, "instance_norm", 1, eps, NULL, NULL, out);
}

int mt_norm_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = mt_input_var(m, node);
  const char *n = short_name(node);
  if (!x || x->kind != V_VAR || x->gen != m->gen)
    return mt_fail(m, "%s: input is not the GEMM's current value", node_target(node));
  if (strcmp(n, "GroupNorm") == 0 || strcmp(n, "group_norm") == 0)
    return group_norm_op(m, node, x, out);
  if (strcmp(n, "LayerNorm") == 0 || strcmp(n, "layer_norm") == 0)
    return layer_norm_op(m, node, x, out);
  return instance_norm_op(m, node, x, out);
}

int mt_batchnorm_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = mt_input_var(m, node);
  bool mod = graph_is_module(node);
  if (!x || x->kind != V_VAR || x->gen != m->gen)
    return mt_fail(m, "%s: input is not the GEMM's current value", node_target(node));
  if (m->phase != PH_EPI)
    return mt_fail(m, "%s after a row operation is not supported", node_target(node));
  if (x->rank != 2 || x->shape[1] != m->cols)
    return mt_fail(m, "%s: features are not the GEMM's output columns", node_target(node));
  double eps;
  const char *w, *b;
  json_t *tr = graph_arg(node, 5, "training");
  if (!mod && !json_is_true(tr))
    return mt_fail(m, "%s: only training-mode batch norm is supported", node_target(node));
  if (norm_eps(m, node, 7, &eps) != 0 || affine_params(m, node, "affine", 3, &w, &b) != 0)
    return -1;
  /* The module runs in training mode: statistics over the batch (biased variance). */
  if (mt_begin_tail(m, x->var) != 0)
    return -1;
  m->has_colstats = true;
  m->bn_eps = eps;
  int var;
  if (epi_add_column_affine(&m->seg, 0, "buffer:bn_mean", "buffer:bn_rstd", w, b, &var) != 0)
    return mt_fail(m, "out of memory");
  return mt_set_var(m, out, node, var, V_VAR);
}

static int int_or_first(json_t *v, long long dflt, long long *ret) {
  if (!v || json_is_null(v)) {
    *ret = dflt;
    return 0;
  }
  if (json_is_array(v))
    return json_array_size(v) == 1 ? mt_json_ll(json_array_get(v, 0), ret) : -1;
  return mt_json_ll(v, ret);
}

/* AvgPool1d / MaxPool1d over the features (padding 0, dilation 1, floor mode). */
int mt_pool_op(struct matcher *m, json_t *node, struct val *out, bool is_max) {
  struct val *x = mt_input_var(m, node);
  if (!x || x->kind != V_VAR || x->gen != m->gen)
    return mt_fail(m, "%s: input is not the GEMM's current value", node_target(node));
  long long k, st, pad, dil = 1;
  json_t *kv = graph_param(node, 1, "kernel_size");
  json_t *sv = graph_param(node, 2, "stride");
  json_t *pv = graph_param(node, 3, "padding");
  json_t *cm = graph_param(node, is_max ? 5 : 4, "ceil_mode");
  json_t *ri = graph_param(node, 6, "return_indices");
  if (int_or_first(kv, 0, &k) != 0 || k < 1 || int_or_first(sv, k, &st) != 0 || st < 1 ||
      int_or_first(pv, 0, &pad) != 0 || pad != 0 || json_is_true(cm) || json_is_true(ri) ||
      (is_max && int_or_first(graph_param(node, 4, "dilation"), 1, &dil) != 0) || dil != 1)
    return mt_fail(m, "%s: only padding 0, dilation 1 and floor mode are supported",
                   node_target(node));
  if (x->rank < 2 || x->rank > 3 || x->shape[x->rank - 1] != m->cols ||
      (m->phase != PH_EPI && m->phase != PH_ROW) || m->cols < k)
    return mt_fail(m, "%s: the pooled dim is not the output features", node_target(node));
  long long lout = (m->cols - k) / st + 1;
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (r < 1 || s[r - 1] != lout)
    return mt_fail(m, "%s: unexpected output length", node_target(node));
  char code[160];
  snprintf(code, sizeof code, "  n = ofg_tail_pool(row, tmp, n, %lld, %lld, %d);\n", k, st,
           is_max ? 1 : 0);
  if (lout > m->tail_tmp)
    m->tail_tmp = lout;
  if (mt_row_op(m, x, is_max ? "max_pool1d" : "avg_pool1d", PH_ROW, lout, code) != 0)
    return -1;
  return mt_set_var(m, out, node, 0, V_VAR);
}

