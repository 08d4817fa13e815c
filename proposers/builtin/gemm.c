/* The GEMM family: matching a profiled FX graph into a GEMM pipeline (this file's first
 * half) and generating its candidate from the templates gemm.cu and gemm_tail.cu. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/gemm.h"
#include "proposers/builtin/gemm_epilogue.h"

#define MAX_RANK 8
#define H200_SMS 132
#define SMEM_LIMIT (227 * 1024)
#define TAIL_SMEM_LIMIT (200 * 1024)

/* ---- what each graph node evaluates to while matching ---- */

enum vkind {
  V_NONE,   /* not yet evaluated, or a value no op may use */
  V_META,   /* sizes and other non-tensor results (only view ops may read them) */
  V_TENSOR, /* a graph tensor, possibly a transposed view or a diagonal matrix */
  V_VAR,    /* a variable of the pipeline's current segment */
  V_TUPLE,  /* (values, indices) of torch.max/min with dim: values are var */
};

struct val {
  enum vkind kind;
  const char *tensor; /* V_TENSOR: borrowed name */
  bool trans;         /* V_TENSOR: the last two dims are swapped relative to storage */
  bool diag;          /* V_TENSOR: torch.diag of a 1-D tensor */
  int var, gen;       /* V_VAR, V_TUPLE */
  int rank;
  long long shape[MAX_RANK];
};

/* Pipeline phases, in the order a graph may go through them. */
enum phase { PH_PRE, PH_EPI, PH_ROW, PH_SCALAR, PH_EXPAND };

struct matcher {
  json_t *profile, *graph;
  size_t n;
  struct val *vals;
  int *users;
  char *why;
  size_t whylen;
  json_t *match; /* being built */

  enum phase phase;
  int gen;             /* segment generation: vars of older segments are dead */
  struct epi_prog seg; /* the current pointwise segment */
  bool seg_live;
  long long rows, cols; /* the current stage geometry */
  long long gemm_n;     /* the GEMM's N (the features a row tail reduces) */
  const char *gemm_name;

  /* the row tail */
  struct cg_buf tail_fns, tail_body;
  json_t *tail_ops, *tail_operands;
  long long tail_cols_in, tail_tmp;
  int nfn;
  bool has_tail, has_colstats;
  double bn_eps;
};

static int fail(struct matcher *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct matcher *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->why, m->whylen, fmt, ap);
  va_end(ap);
  return -1;
}

static const char *node_name(json_t *node) {
  const char *s = json_string_value(json_object_get(node, "name"));
  return s ? s : "?";
}

static const char *node_target(json_t *node) {
  const char *s = json_string_value(json_object_get(node, "target"));
  return s ? s : "?";
}

static const char *node_op(json_t *node) {
  const char *s = json_string_value(json_object_get(node, "op"));
  return s ? s : "";
}

/* Last dotted component of the target (module class names as they are). */
static const char *short_name(json_t *node) {
  const char *t = node_target(node);
  const char *dot = strrchr(t, '.');
  return dot ? dot + 1 : t;
}

static bool named(json_t *node, const char *name) {
  return strcmp(short_name(node), name) == 0;
}

static int node_index(struct matcher *m, const char *name) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(node_name(json_array_get(m->graph, i)), name) == 0)
      return (int)i;
  return -1;
}

/* The value an argument refers to (a node reference), or NULL for constants. */
static struct val *arg_val(struct matcher *m, json_t *arg) {
  const char *ref = json_string_value(json_object_get(arg, "node"));
  if (!json_is_object(arg) || !ref)
    return NULL;
  int i = node_index(m, ref);
  return i < 0 ? NULL : &m->vals[i];
}

/* Counts how many nodes reference each node (through any nesting of args/kwargs). */
static void count_refs(struct matcher *m, json_t *v) {
  if (json_is_object(v)) {
    const char *ref = json_string_value(json_object_get(v, "node"));
    if (ref && json_object_size(v) == 1) {
      int i = node_index(m, ref);
      if (i >= 0)
        m->users[i]++;
      return;
    }
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
      count_refs(m, x);
    }
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
      count_refs(m, x);
    }
  }
}

/* The tensor's shape from the profile's inputs/params lists. */
static int tensor_shape(struct matcher *m, const char *name, long long shape[MAX_RANK]) {
  static const char *const lists[] = {"inputs", "params"};
  for (size_t l = 0; l < 2; l++) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(m->profile, lists[l]), i, t) {
      const char *n = json_string_value(json_object_get(t, "name"));
      const char *dt = json_string_value(json_object_get(t, "dtype"));
      if (!n || strcmp(n, name) != 0)
        continue;
      if (!dt || strcmp(dt, "float32") != 0)
        return -2;
      return graph_shape(t, shape);
    }
  }
  return -1;
}

static int json_ll(json_t *v, long long *ret) {
  if (!json_is_integer(v))
    return -1;
  *ret = json_integer_value(v);
  return 0;
}

/* The dims list of a reduction argument (int, list of ints, or absent: all dims),
 * normalized to [0, rank). Returns the count, or -1 when malformed. */
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
    if (json_ll(v, &d) != 0 || d < -rank || d >= rank)
      return -1;
    ret[n++] = (int)(d < 0 ? d + rank : d);
  }
  return n;
}

/* ---- resolving arguments for the epilogue translator ---- */

static int resolve_arg(void *ctx, json_t *arg, struct epi_value *ret, char *why, size_t whylen) {
  struct matcher *m = ctx;
  struct val *v = arg_val(m, arg);
  struct epi_value out = {0};
  if (!v) {
    if (json_is_integer(arg) || json_is_real(arg)) {
      out.kind = EPI_CONST;
      out.c = json_number_value(arg);
    } else if (json_is_string(arg) && (strcmp(json_string_value(arg), "inf") == 0 ||
                                       strcmp(json_string_value(arg), "-inf") == 0 ||
                                       strcmp(json_string_value(arg), "nan") == 0)) {
      const char *s = json_string_value(arg);
      out.kind = EPI_CONST;
      out.c = s[0] == 'n' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
    } else {
      snprintf(why, whylen, "a non-numeric constant argument");
      return -1;
    }
    *ret = out;
    return 0;
  }
  if (v->kind == V_VAR) {
    if (v->gen != m->gen) {
      snprintf(why, whylen, "a value from before a row operation is used after it");
      return -1;
    }
    out.kind = EPI_VAR;
    out.var = v->var;
  } else if (v->kind == V_TENSOR && !v->trans && !v->diag) {
    out.kind = EPI_TENSOR;
    out.tensor = v->tensor;
    out.rank = v->rank;
    memcpy(out.shape, v->shape, sizeof out.shape);
  } else {
    snprintf(why, whylen, "an operand that is not a plain tensor, constant or GEMM value");
    return -1;
  }
  *ret = out;
  return 0;
}

/* Sets val to a variable of the current segment with the node's shape. */
static int set_var(struct matcher *m, struct val *v, json_t *node, int var, enum vkind kind) {
  long long s[MAX_RANK];
  json_t *shape_src = node;
  if (kind == V_TUPLE)
    shape_src = json_array_get(json_object_get(node, "outputs"), 0);
  int r = graph_shape(shape_src, s);
  if (r < 0)
    return fail(m, "%s: unknown result shape", node_target(node));
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->var = var;
  v->gen = m->gen;
  v->rank = r;
  memcpy(v->shape, s, sizeof s);
  return 0;
}

/* ---- tensor ops (before the matmul, or on inputs used by the epilogue) ---- */

/* Whether a transpose/swapaxes/permute of a rank-nd tensor swaps exactly its last two
 * dims (*ret_swap) or nothing; -1 when it moves batch dims. */
static int permute_swaps_last(struct matcher *m, json_t *node, int nd, bool *ret_swap) {
  const char *n = short_name(node);
  int perm[MAX_RANK];
  for (int d = 0; d < nd; d++)
    perm[d] = d;
  if (strcmp(n, "permute") == 0) {
    json_t *a1 = graph_arg(node, 1, NULL);
    json_t *dims =
        json_array_size(json_object_get(node, "args")) == 2 && json_is_array(a1) ? a1 : NULL;
    for (int d = 0; d < nd; d++) {
      long long pd;
      json_t *e = dims ? json_array_get(dims, (size_t)d) : graph_arg(node, (size_t)d + 1, NULL);
      if (json_ll(e, &pd) != 0 || pd < -nd || pd >= nd)
        return fail(m, "permute: unsupported dims");
      perm[d] = (int)(pd < 0 ? pd + nd : pd);
    }
  } else {
    long long d0, d1;
    if (json_ll(graph_arg(node, 1, "dim0"), &d0) != 0 ||
        json_ll(graph_arg(node, 2, "dim1"), &d1) != 0 || d0 < -nd || d0 >= nd || d1 < -nd ||
        d1 >= nd)
      return fail(m, "transpose: unsupported dims");
    int a = (int)(d0 < 0 ? d0 + nd : d0), b = (int)(d1 < 0 ? d1 + nd : d1);
    perm[a] = b;
    perm[b] = a;
  }
  for (int d = 0; d < nd - 2; d++)
    if (perm[d] != d)
      return fail(m, "%s of batch dims is not supported", n);
  *ret_swap = nd >= 2 && perm[nd - 2] == nd - 1;
  return 0;
}

static int tensor_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = arg_val(m, graph_arg(node, 0, "input"));
  const char *n = short_name(node);
  if (!x || x->kind != V_TENSOR)
    return fail(m, "unsupported op %s on a non-tensor", node_target(node));
  struct val v = *x;
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (r < 0)
    return fail(m, "%s: unknown shape", node_target(node));
  bool swap_last = false;
  if (named(node, "getattr")) {
    const char *a = json_string_value(graph_arg(node, 1, NULL));
    if (a && strcmp(a, "T") == 0 && x->rank <= 2)
      swap_last = x->rank == 2;
    else if (a && strcmp(a, "mT") == 0 && x->rank >= 2)
      swap_last = true;
    else if (a && (strcmp(a, "shape") == 0 || strcmp(a, "dtype") == 0)) {
      out->kind = V_META;
      return 0;
    } else
      return fail(m, "unsupported attribute %s of a tensor", a ? a : "?");
  } else if (strcmp(n, "t") == 0) {
    swap_last = x->rank == 2;
  } else if (strcmp(n, "transpose") == 0 || strcmp(n, "swapaxes") == 0 ||
             strcmp(n, "permute") == 0) {
    if (permute_swaps_last(m, node, x->rank, &swap_last) != 0)
      return -1;
  } else if (strcmp(n, "clone") == 0 || strcmp(n, "detach") == 0 || strcmp(n, "contiguous") == 0) {
    /* same values; a transposed view stays transposed (we read the storage) */
  } else if (strcmp(n, "unsqueeze") == 0 || strcmp(n, "view") == 0 || strcmp(n, "reshape") == 0 ||
             strcmp(n, "flatten") == 0 || strcmp(n, "squeeze") == 0) {
    if (x->trans || x->diag)
      return fail(m, "%s of a transposed tensor is not supported", n);
  } else if (strcmp(n, "diag") == 0 && x->rank == 1 && !x->trans) {
    v.diag = true;
  } else if (strcmp(n, "size") == 0 || strcmp(n, "dim") == 0) {
    out->kind = V_META;
    return 0;
  } else {
    return fail(m, "unsupported op %s on an input tensor", node_target(node));
  }
  if (swap_last)
    v.trans = !v.trans;
  if (graph_dims_prod(s, 0, r) != graph_dims_prod(x->shape, 0, x->rank) && !v.diag)
    return fail(m, "%s changes the element count", n);
  v.rank = r;
  memcpy(v.shape, s, sizeof s);
  *out = v;
  return 0;
}

static bool is_gemm_node(json_t *node) {
  if (graph_is_module(node))
    return named(node, "Linear");
  const char *op = node_op(node);
  if (strcmp(op, "call_function") != 0 && strcmp(op, "call_method") != 0)
    return false;
  return named(node, "matmul") || named(node, "mm") || named(node, "bmm") ||
         named(node, "linear") || named(node, "addmm") || named(node, "einsum") ||
         named(node, "baddbmm") || named(node, "addbmm") || named(node, "tensordot") ||
         named(node, "matrix_power") || named(node, "mv") || named(node, "addmv");
}

/* ---- the matmul itself ---- */

/* The param of a module whose key ends with suffix ("weight", "bias"), or NULL. */
static const char *module_param(json_t *node, const char *suffix) {
  size_t i;
  json_t *p;
  size_t sl = strlen(suffix);
  json_array_foreach(json_object_get(node, "params"), i, p) {
    const char *s = json_string_value(p);
    size_t l = s ? strlen(s) : 0;
    if (l >= sl && strcmp(s + l - sl, suffix) == 0 &&
        (l == sl || s[l - sl - 1] == '.' || s[l - sl - 1] == ':'))
      return s;
  }
  return NULL;
}

/* A tensor value for a param name (Linear's weight or bias). */
static int param_val(struct matcher *m, const char *name, struct val *ret) {
  memset(ret, 0, sizeof *ret);
  ret->kind = V_TENSOR;
  ret->tensor = name;
  int r = tensor_shape(m, name, ret->shape);
  if (r < 0)
    return fail(m, "%s: %s", name, r == -2 ? "not float32" : "unknown tensor");
  ret->rank = r;
  return 0;
}

/* The operands of a GEMM node: A, B (logical, possibly transposed views) and an
 * optional bias added in the epilogue. */
struct gemm_args {
  struct val a, b, bias;
  bool has_bias;
};

static int gemm_operands(struct matcher *m, json_t *node, struct gemm_args *g) {
  memset(g, 0, sizeof *g);
  const char *n = short_name(node);
  if (!graph_is_module(node) &&
      (strcmp(n, "einsum") == 0 || strcmp(n, "baddbmm") == 0 || strcmp(n, "addbmm") == 0 ||
       strcmp(n, "tensordot") == 0 || strcmp(n, "matrix_power") == 0 || strcmp(n, "mv") == 0 ||
       strcmp(n, "addmv") == 0))
    return fail(m, "unsupported op %s", node_target(node));
  if (graph_is_module(node)) { /* nn.Linear: x @ W^T + b, W stored [out, in] */
    struct val *x = arg_val(m, graph_arg(node, 0, NULL));
    const char *w = module_param(node, "weight"), *b = module_param(node, "bias");
    if (!x || !w)
      return fail(m, "Linear: missing input or weight");
    g->a = *x;
    if (param_val(m, w, &g->b) != 0)
      return -1;
    g->b.trans = true;
    long long t = g->b.shape[0];
    g->b.shape[0] = g->b.shape[1];
    g->b.shape[1] = t;
    if (json_is_true(graph_attr(node, "bias"))) {
      if (!b || param_val(m, b, &g->bias) != 0)
        return fail(m, "Linear: missing bias");
      g->has_bias = true;
    }
    return 0;
  }
  bool lin = strcmp(n, "linear") == 0, addmm = strcmp(n, "addmm") == 0;
  size_t base = addmm ? 1 : 0;
  struct val *a = arg_val(m, graph_arg(node, base, addmm ? "mat1" : "input"));
  struct val *b = arg_val(m, graph_arg(node, base + 1, addmm ? "mat2" : lin ? "weight" : "other"));
  if (!a || !b)
    return fail(m, "%s: operands are not tensors", node_target(node));
  g->a = *a;
  g->b = *b;
  if (lin) { /* weight [N,K] used transposed */
    if (g->b.rank != 2)
      return fail(m, "linear: weight of rank %d", g->b.rank);
    g->b.trans = !g->b.trans;
    long long t = g->b.shape[0];
    g->b.shape[0] = g->b.shape[1];
    g->b.shape[1] = t;
  }
  json_t *bias = lin ? graph_arg(node, 2, "bias") : addmm ? graph_arg(node, 0, "input") : NULL;
  if (bias && !json_is_null(bias)) {
    struct val *bv = arg_val(m, bias);
    if (!bv || bv->kind != V_TENSOR || bv->trans || bv->diag)
      return fail(m, "%s: bias is not a plain tensor", node_target(node));
    g->bias = *bv;
    g->has_bias = true;
  }
  if (addmm) {
    json_t *kw = json_object_get(node, "kwargs");
    json_t *beta = json_object_get(kw, "beta"), *alpha = json_object_get(kw, "alpha");
    if ((beta && json_number_value(beta) != 1.0) || (alpha && json_number_value(alpha) != 1.0))
      return fail(m, "addmm with beta/alpha other than 1");
  }
  return 0;
}

/* Fills the match's canonical problem from the operands. */
static int gemm_dims(struct matcher *m, json_t *node, struct gemm_args *g, long long *ret_rows) {
  struct val *a = &g->a, *b = &g->b;
  if (a->kind != V_TENSOR || b->kind != V_TENSOR)
    return fail(m, "%s: operands must be graph tensors", node_target(node));
  if (b->diag || (a->diag && a->rank != 2))
    return fail(m, "%s: diagonal operand not supported here", node_target(node));
  long long M, K, N, Kb, batch = 1, abs = 0, bbs = 0;
  int ra = a->rank, rb = b->rank;
  if (ra < 1 || rb < 1)
    return fail(m, "%s: scalar operand", node_target(node));
  M = ra >= 2 ? a->shape[ra - 2] : 1;
  K = a->shape[ra - 1];
  Kb = rb >= 2 ? b->shape[rb - 2] : b->shape[0];
  N = rb >= 2 ? b->shape[rb - 1] : 1;
  if (K != Kb)
    return fail(m, "%s: inner dims %lld and %lld differ", node_target(node), K, Kb);
  long long la = ra > 2 ? graph_dims_prod(a->shape, 0, ra - 2) : 1;
  long long lb = rb > 2 ? graph_dims_prod(b->shape, 0, rb - 2) : 1;
  bool trans_a = ra >= 2 && a->trans, trans_b = rb >= 2 && b->trans;
  if (rb <= 2 && !trans_a) { /* A's batch dims flatten into M */
    M *= la;
  } else if (rb <= 2) {
    batch = la, abs = M * K;
  } else if (ra <= 2) {
    batch = lb, bbs = K * N;
  } else {
    if (ra != rb || memcmp(a->shape, b->shape, sizeof(long long) * (size_t)(ra - 2)) != 0)
      return fail(m, "%s: broadcast batch dims are not supported", node_target(node));
    batch = la, abs = M * K, bbs = K * N;
  }
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (r < 0 || graph_dims_prod(s, 0, r) != batch * M * N)
    return fail(m, "%s: result shape does not match %lldx%lldx%lld", node_target(node), M, N, K);
  json_t *mt = m->match;
  json_object_set_new(mt, "batch", json_integer(batch));
  json_object_set_new(mt, "m", json_integer(M));
  json_object_set_new(mt, "n", json_integer(N));
  json_object_set_new(mt, "k", json_integer(K));
  json_object_set_new(mt, "trans_a", json_boolean(trans_a));
  json_object_set_new(mt, "trans_b", json_boolean(trans_b));
  json_object_set_new(mt, "a", json_string(a->tensor));
  json_object_set_new(mt, "b", json_string(b->tensor));
  json_object_set_new(mt, "a_bstride", json_integer(abs));
  json_object_set_new(mt, "b_bstride", json_integer(bbs));
  *ret_rows = batch * M;
  m->gemm_n = N;
  return 0;
}

/* Decides gemm / gemv / row_scale for the canonical problem. */
static void choose_op(struct matcher *m, bool diag) {
  json_t *mt = m->match;
  long long M = json_integer_value(json_object_get(mt, "m"));
  long long N = json_integer_value(json_object_get(mt, "n"));
  long long batch = json_integer_value(json_object_get(mt, "batch"));
  bool ta = json_is_true(json_object_get(mt, "trans_a"));
  bool tb = json_is_true(json_object_get(mt, "trans_b"));
  const char *op = "gemm";
  bool swap = false;
  if (diag) {
    op = "row_scale";
  } else if (N == 1 && !ta) {
    op = "gemv";
  } else if (M == 1 && batch == 1 && tb) {
    op = "gemv";
    swap = true;
  }
  json_object_set_new(mt, "op", json_string(op));
  json_object_set_new(mt, "gemv_swap", json_boolean(swap));
}

static int start_gemm(struct matcher *m, json_t *node, struct val *out) {
  struct gemm_args g;
  if (m->phase != PH_PRE)
    return fail(m, "more than one matmul (%s)", node_target(node));
  if (gemm_operands(m, node, &g) != 0)
    return -1;
  bool diag = g.a.kind == V_TENSOR && g.a.diag;
  if (diag) { /* diag(a) @ B: a row scaling of B */
    if (g.b.rank != 2 || g.b.trans || g.has_bias)
      return fail(m, "diag matmul: only diag(a) @ B with a plain 2-D B");
    g.a.rank = 2;
    g.a.shape[1] = g.a.shape[0];
  }
  long long rows = 0;
  if (gemm_dims(m, node, &g, &rows) != 0)
    return -1;
  choose_op(m, diag);
  if (diag)
    json_object_set_new(m->match, "k", json_integer(0));
  m->phase = PH_EPI;
  m->rows = rows;
  m->cols = m->gemm_n;
  m->gemm_name = node_name(node);
  if (epi_prog_init(&m->seg, m->rows, m->cols) != 0)
    return fail(m, "out of memory");
  m->seg_live = true;
  int var = 0;
  if (g.has_bias) {
    struct epi_value bv = {.kind = EPI_TENSOR, .tensor = g.bias.tensor, .rank = g.bias.rank};
    memcpy(bv.shape, g.bias.shape, sizeof bv.shape);
    long long s[MAX_RANK];
    int r = graph_shape(node, s);
    if (epi_add_value(&m->seg, 0, &bv, s, r, &var, m->why, m->whylen) != 0)
      return -1;
  }
  return set_var(m, out, node, var, V_VAR);
}

/* ---- segments, the row tail, and the broadcast stage ---- */

/* Starts a new pointwise segment over rows x cols; older vars become dead. */
static int next_segment(struct matcher *m, long long rows, long long cols) {
  epi_prog_clear(&m->seg);
  m->seg_live = false;
  if (epi_prog_init(&m->seg, rows, cols) != 0)
    return fail(m, "out of memory");
  m->seg_live = true;
  m->gen++;
  m->rows = rows;
  m->cols = cols;
  return 0;
}

/* Appends the segment's ops to the match's summary list key. */
static void record_ops(struct matcher *m, json_t *list) {
  size_t i;
  json_t *o;
  json_array_foreach(m->seg.ops, i, o) {
    json_array_append(list, o);
  }
}

/* Emits the current segment as device function name into fns, returning the call with
 * the operand arguments mapped to parameters prefix<i> of operands (deduplicated). */
static char *segment_call(struct matcher *m, const char *name, int out_var, struct cg_buf *fns,
                          json_t *operands, const char *prefix, const char *x, const char *row,
                          const char *col) {
  char *fn = epi_emit_function(&m->seg, name, out_var);
  if (!fn)
    return NULL;
  cg_printf(fns, "%s", fn);
  free(fn);
  size_t n = json_array_size(m->seg.operands);
  char **args = calloc(n + 1, sizeof *args);
  if (!args)
    return NULL;
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    const char *t = json_string_value(json_array_get(m->seg.operands, i));
    size_t j, found = json_array_size(operands);
    json_t *e;
    json_array_foreach(operands, j, e) {
      if (strcmp(json_string_value(e), t) == 0)
        found = j;
    }
    if (found == json_array_size(operands))
      json_array_append_new(operands, json_string(t));
    args[i] = malloc(32);
    if (!args[i]) {
      ok = false;
      break;
    }
    snprintf(args[i], 32, "%s%zu", prefix, found);
  }
  char *call = ok ? epi_emit_call(&m->seg, name, x, row, col, (const char *const *)args) : NULL;
  for (size_t i = 0; i < n; i++)
    free(args[i]);
  free(args);
  return call;
}

/* Ends the GEMM epilogue: its function becomes the match's "epilogue". */
static int finish_epilogue(struct matcher *m, int out_var) {
  struct cg_buf fns = {0};
  json_t *operands = json_array();
  char *call =
      operands ? segment_call(m, "ofg_epi", out_var, &fns, operands, "e", "x", "row", "col") : NULL;
  free(call);
  if (!operands || fns.failed || !call) {
    json_decref(operands);
    cg_free(&fns);
    return fail(m, "out of memory");
  }
  json_t *ops = json_array();
  record_ops(m, ops);
  json_object_set_new(m->match, "epilogue",
                      json_pack("{s:o,s:o,s:s}", "ops", ops, "operands", operands, "code",
                                fns.s ? fns.s : ""));
  cg_free(&fns);
  return 0;
}

/* After a new segment started, the values that held var of the previous generation
 * become its input v0; every other value of that generation is dead. */
static void carry_var(struct matcher *m, int old_gen, int var) {
  for (size_t i = 0; i < m->n; i++) {
    struct val *v = &m->vals[i];
    if ((v->kind == V_VAR || v->kind == V_TUPLE) && v->gen == old_gen && v->var == var) {
      v->var = 0;
      v->gen = m->gen;
    }
  }
}

/* Starts the row tail after the GEMM stage: the epilogue ends at out_var, whose value
 * becomes the row the tail works on. */
static int begin_tail(struct matcher *m, int out_var) {
  if (m->phase != PH_EPI)
    return 0;
  if (finish_epilogue(m, out_var) != 0)
    return -1;
  m->has_tail = true;
  m->tail_cols_in = m->cols;
  m->tail_ops = json_array();
  m->tail_operands = json_array();
  if (!m->tail_ops || !m->tail_operands)
    return fail(m, "out of memory");
  m->phase = PH_ROW;
  int old = m->gen;
  if (next_segment(m, m->rows, m->cols) != 0)
    return -1;
  carry_var(m, old, out_var);
  return 0;
}

/* Flushes the tail's current segment (result out_var) into the row program: a map over
 * the row, or an update of the row's scalar. */
static int flush_tail_segment(struct matcher *m, int out_var) {
  if (out_var == 0 && json_array_size(m->seg.stmts) == 0)
    return 0;
  char name[32];
  snprintf(name, sizeof name, "ofg_tf%d", m->nfn++);
  bool row = m->phase == PH_ROW;
  char *call = segment_call(m, name, out_var, &m->tail_fns, m->tail_operands, "t",
                            row ? "row[c]" : "s", "r", row ? "c" : "0");
  if (!call)
    return fail(m, "out of memory");
  if (row)
    cg_printf(&m->tail_body,
              "  for (int c = threadIdx.x; c < n; c += blockDim.x) row[c] = %s;\n"
              "  __syncthreads();\n",
              call);
  else
    cg_printf(&m->tail_body, "  s = %s;\n", call);
  free(call);
  record_ops(m, m->tail_ops);
  return 0;
}

/* The tail parameter name of a tensor (appending it to the operands). */
static void tail_param(struct matcher *m, const char *tensor, char *buf, size_t len) {
  if (!tensor) {
    snprintf(buf, len, "(const float*)0");
    return;
  }
  size_t j, found = json_array_size(m->tail_operands);
  json_t *e;
  json_array_foreach(m->tail_operands, j, e) {
    if (strcmp(json_string_value(e), tensor) == 0)
      found = j;
  }
  if (found == json_array_size(m->tail_operands))
    json_array_append_new(m->tail_operands, json_string(tensor));
  snprintf(buf, len, "t%zu", found);
}

/* Runs a row operation on x: flushes the pointwise work before it, appends code (a
 * format over the row program's variables), and moves to the phase it leaves. */
static int row_op(struct matcher *m, struct val *x, const char *opname, enum phase next,
                  long long next_cols, const char *code) {
  if (x->kind != V_VAR && x->kind != V_TUPLE)
    return fail(m, "%s: input is not the GEMM's value", opname);
  if (x->gen != m->gen)
    return fail(m, "%s: a value from before a row operation is used after it", opname);
  if (m->phase == PH_EXPAND || m->phase == PH_SCALAR)
    return fail(m, "%s after the row was reduced or broadcast", opname);
  if (m->phase == PH_EPI && begin_tail(m, x->var) != 0)
    return -1;
  if (flush_tail_segment(m, x->var) != 0)
    return -1;
  cg_printf(&m->tail_body, "%s", code);
  json_array_append_new(m->tail_ops, json_string(opname));
  m->phase = next;
  return next_segment(m, m->rows, next_cols);
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

static struct val *input_var(struct matcher *m, json_t *node) {
  struct val *x = arg_val(m, graph_arg(node, 0, "input"));
  if (!x)
    x = arg_val(m, graph_arg(node, 0, "self"));
  return x;
}

/* sum, mean, max, min, amax, amin, logsumexp over dims. */
static int reduce_op(struct matcher *m, json_t *node, struct val *out, const char *kind) {
  struct val *x = input_var(m, node);
  if (!x || (x->kind != V_VAR && x->kind != V_TUPLE))
    return fail(m, "%s: input is not the GEMM's value", node_target(node));
  bool tuple = (strcmp(kind, "max") == 0 || strcmp(kind, "min") == 0) && !named(node, "amax") &&
               !named(node, "amin");
  json_t *dim = graph_arg(node, 1, "dim");
  json_t *dtype = json_object_get(json_object_get(node, "kwargs"), "dtype");
  if (dtype && !json_is_null(dtype))
    return fail(m, "%s with dtype is not supported", node_target(node));
  if (tuple && (!dim || json_is_null(dim)))
    return fail(m, "%s over all elements is not supported", node_target(node));
  int rd[MAX_RANK];
  int nrd = reduce_dims(dim, x->rank, rd);
  if (nrd < 0)
    return fail(m, "%s: unsupported dim", node_target(node));
  bool trivial = true;
  for (int i = 0; i < nrd; i++)
    trivial = trivial && x->shape[rd[i]] == 1;
  enum vkind k = tuple ? V_TUPLE : V_VAR;
  if (trivial) { /* over size-1 dims: the value itself, exactly */
    if (x->gen != m->gen)
      return fail(m, "%s: a value from before a row operation is used after it", node_target(node));
    return set_var(m, out, node, x->var, k);
  }
  if (m->phase != PH_EPI && m->phase != PH_ROW)
    return fail(m, "%s after the row was reduced or broadcast", node_target(node));
  if (!dims_are_row(m, x, rd, nrd))
    return fail(m, "%s over dims other than the output features", node_target(node));
  char code[160];
  if (strcmp(kind, "mean") == 0)
    snprintf(code, sizeof code, "  s = ofg_tail_sum(row, n, red) / (float)n;\n");
  else
    snprintf(code, sizeof code, "  s = ofg_tail_%s(row, n, red);\n", kind);
  if (row_op(m, x, kind, PH_SCALAR, 1, code) != 0)
    return -1;
  return set_var(m, out, node, 0, k);
}

/* softmax / log_softmax over the features. */
static int softmax_op(struct matcher *m, json_t *node, struct val *out, bool logsm) {
  struct val *x = input_var(m, node);
  if (!x || x->kind != V_VAR)
    return fail(m, "%s: input is not the GEMM's value", node_target(node));
  json_t *dim = graph_param(node, 1, "dim");
  json_t *dtype = json_object_get(json_object_get(node, "kwargs"), "dtype");
  long long d;
  if (json_ll(dim, &d) != 0 || d < -x->rank || d >= x->rank || (dtype && !json_is_null(dtype)))
    return fail(m, "%s: unsupported dim or dtype", node_target(node));
  if (d < 0)
    d += x->rank;
  if (x->shape[d] != m->cols || graph_dims_prod(x->shape, (int)d + 1, x->rank) != 1 ||
      (m->phase != PH_EPI && m->phase != PH_ROW))
    return fail(m, "%s over a dim other than the output features", node_target(node));
  char code[96];
  snprintf(code, sizeof code, "  ofg_tail_softmax(row, n, red, %d);\n", logsm ? 1 : 0);
  if (row_op(m, x, logsm ? "log_softmax" : "softmax", PH_ROW, m->cols, code) != 0)
    return -1;
  return set_var(m, out, node, 0, V_VAR);
}

/* A group normalization of each row (G groups of cols/G features) with optional
 * per-feature affine: group norm, layer norm (G = 1), instance norm (G = 1). */
static int groupnorm_code(struct matcher *m, struct val *x, json_t *node, const char *name,
                          long long groups, double eps, const char *w, const char *b,
                          struct val *out) {
  if (groups < 1 || m->cols % groups != 0)
    return fail(m, "%s: %lld groups do not divide %lld features", name, groups, m->cols);
  if (m->phase != PH_EPI && m->phase != PH_ROW)
    return fail(m, "%s after the row was reduced or broadcast", name);
  if (m->phase == PH_EPI && begin_tail(m, x->var) != 0)
    return -1;
  char wp[32], bp[32], code[256];
  tail_param(m, w, wp, sizeof wp);
  tail_param(m, b, bp, sizeof bp);
  snprintf(code, sizeof code, "  ofg_tail_groupnorm(row, n, %lld, %.9gf, %s, %s, red);\n", groups,
           eps, wp, bp);
  if (row_op(m, x, name, PH_ROW, m->cols, code) != 0)
    return -1;
  return set_var(m, out, node, 0, V_VAR);
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
      w = module_param(node, "weight");
      b = module_param(node, "bias");
    }
  } else {
    struct val *wv = arg_val(m, graph_arg(node, wpos, "weight"));
    struct val *bv = arg_val(m, graph_arg(node, wpos + 1, "bias"));
    if ((wv && wv->kind != V_TENSOR) || (bv && bv->kind != V_TENSOR))
      return fail(m, "%s: weight/bias are not tensors", node_target(node));
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
    return fail(m, "%s: unsupported eps", node_target(node));
  return 0;
}

/* GroupNorm over [rows, C] with C the output features. */
static int group_norm_op(struct matcher *m, json_t *node, struct val *x, struct val *out) {
  long long g;
  double eps;
  const char *w, *b;
  json_t *gv = graph_param(node, 1, "num_groups");
  if (json_ll(gv, &g) != 0 || norm_eps(m, node, 4, &eps) != 0)
    return fail(m, "%s: unsupported arguments", node_target(node));
  if (x->rank < 2 || x->shape[1] != m->cols || graph_dims_prod(x->shape, 2, x->rank) != 1)
    return fail(m, "%s: channels are not the output features", node_target(node));
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
    if (json_ll(json_is_array(ns) ? json_array_get(ns, i) : ns, &d) != 0 || (int)nn > r ||
        d != S[r - (int)nn + (int)i])
      return fail(m, "%s: normalized_shape is not the trailing dims", node_target(node));
    p *= d;
  }
  if (p != m->cols)
    return fail(m, "%s: normalized features are not the output features", node_target(node));
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
    return fail(m, "%s with affine parameters or running statistics is not supported",
                node_target(node));
  if (x->rank < 3 || graph_dims_prod(x->shape, 2, x->rank) != m->cols)
    return fail(m, "%s: spatial dims are not the output features", node_target(node));
  return groupnorm_code(m, x, node, "instance_norm", 1, eps, NULL, NULL, out);
}

static int norm_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = input_var(m, node);
  const char *n = short_name(node);
  if (!x || x->kind != V_VAR || x->gen != m->gen)
    return fail(m, "%s: input is not the GEMM's current value", node_target(node));
  if (strcmp(n, "GroupNorm") == 0 || strcmp(n, "group_norm") == 0)
    return group_norm_op(m, node, x, out);
  if (strcmp(n, "LayerNorm") == 0 || strcmp(n, "layer_norm") == 0)
    return layer_norm_op(m, node, x, out);
  return instance_norm_op(m, node, x, out);
}

static int batchnorm_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = input_var(m, node);
  bool mod = graph_is_module(node);
  if (!x || x->kind != V_VAR || x->gen != m->gen)
    return fail(m, "%s: input is not the GEMM's current value", node_target(node));
  if (m->phase != PH_EPI)
    return fail(m, "%s after a row operation is not supported", node_target(node));
  if (x->rank != 2 || x->shape[1] != m->cols)
    return fail(m, "%s: features are not the GEMM's output columns", node_target(node));
  double eps;
  const char *w, *b;
  json_t *tr = graph_arg(node, 5, "training");
  if (!mod && !json_is_true(tr))
    return fail(m, "%s: only training-mode batch norm is supported", node_target(node));
  if (norm_eps(m, node, 7, &eps) != 0 || affine_params(m, node, "affine", 3, &w, &b) != 0)
    return -1;
  /* The module runs in training mode: statistics over the batch (biased variance). */
  if (begin_tail(m, x->var) != 0)
    return -1;
  m->has_colstats = true;
  m->bn_eps = eps;
  int var;
  if (epi_add_column_affine(&m->seg, 0, "buffer:bn_mean", "buffer:bn_rstd", w, b, &var) != 0)
    return fail(m, "out of memory");
  return set_var(m, out, node, var, V_VAR);
}

static int int_or_first(json_t *v, long long dflt, long long *ret) {
  if (!v || json_is_null(v)) {
    *ret = dflt;
    return 0;
  }
  if (json_is_array(v))
    return json_array_size(v) == 1 ? json_ll(json_array_get(v, 0), ret) : -1;
  return json_ll(v, ret);
}

/* AvgPool1d / MaxPool1d over the features (padding 0, dilation 1, floor mode). */
static int pool_op(struct matcher *m, json_t *node, struct val *out, bool is_max) {
  struct val *x = input_var(m, node);
  if (!x || x->kind != V_VAR || x->gen != m->gen)
    return fail(m, "%s: input is not the GEMM's current value", node_target(node));
  long long k, st, pad, dil = 1;
  json_t *kv = graph_param(node, 1, "kernel_size");
  json_t *sv = graph_param(node, 2, "stride");
  json_t *pv = graph_param(node, 3, "padding");
  json_t *cm = graph_param(node, is_max ? 5 : 4, "ceil_mode");
  json_t *ri = graph_param(node, 6, "return_indices");
  if (int_or_first(kv, 0, &k) != 0 || k < 1 || int_or_first(sv, k, &st) != 0 || st < 1 ||
      int_or_first(pv, 0, &pad) != 0 || pad != 0 || json_is_true(cm) || json_is_true(ri) ||
      (is_max && int_or_first(graph_param(node, 4, "dilation"), 1, &dil) != 0) || dil != 1)
    return fail(m, "%s: only padding 0, dilation 1 and floor mode are supported",
                node_target(node));
  if (x->rank < 2 || x->rank > 3 || x->shape[x->rank - 1] != m->cols ||
      (m->phase != PH_EPI && m->phase != PH_ROW) || m->cols < k)
    return fail(m, "%s: the pooled dim is not the output features", node_target(node));
  long long lout = (m->cols - k) / st + 1;
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (r < 1 || s[r - 1] != lout)
    return fail(m, "%s: unexpected output length", node_target(node));
  char code[160];
  snprintf(code, sizeof code, "  n = ofg_tail_pool(row, tmp, n, %lld, %lld, %d);\n", k, st,
           is_max ? 1 : 0);
  if (lout > m->tail_tmp)
    m->tail_tmp = lout;
  if (row_op(m, x, is_max ? "max_pool1d" : "avg_pool1d", PH_ROW, lout, code) != 0)
    return -1;
  return set_var(m, out, node, 0, V_VAR);
}

static int finish_tail(struct matcher *m, bool scalar);

/* Writes the current stage's value var to a buffer that later stages read as a tensor:
 * the GEMM output or the tail's result. */
static int materialize(struct matcher *m, int var) {
  const char *buf;
  if (m->phase == PH_EPI) {
    if (finish_epilogue(m, var) != 0)
      return -1;
    buf = "buffer:gemm_out";
    json_object_set_new(m->match, "gemm_dst", json_string(buf));
  } else {
    if (flush_tail_segment(m, var) != 0)
      return -1;
    buf = "buffer:tail_out";
    json_object_set_new(m->match, "tail_dst", json_string(buf));
    if (finish_tail(m, m->phase == PH_SCALAR) != 0)
      return -1;
  }
  for (size_t i = 0; i < m->n; i++) {
    struct val *v = &m->vals[i];
    if (v->kind == V_VAR && v->gen == m->gen && v->var == var) {
      v->kind = V_TENSOR;
      v->tensor = buf;
      v->trans = v->diag = false;
    }
  }
  return 0;
}

static int pointwise_op(struct matcher *m, json_t *node, struct val *out) {
  long long S[MAX_RANK];
  int r = graph_shape(node, S);
  if (r < 0)
    return fail(m, "%s: unknown shape", node_target(node));
  long long numel = graph_dims_prod(S, 0, r), stage = m->rows * m->cols;
  /* In-place ops must not change a value another node still reads. */
  const char *t = node_target(node);
  size_t tl = strlen(t);
  json_t *ip = graph_is_module(node) ? graph_attr(node, "inplace")
                                     : json_object_get(json_object_get(node, "kwargs"), "inplace");
  if (json_is_true(ip) || strncmp(t, "operator.i", 10) == 0 ||
      (strcmp(node_op(node), "call_method") == 0 && tl > 1 && t[tl - 1] == '_')) {
    struct val *x = arg_val(m, graph_arg(node, 0, NULL));
    if (!x || m->users[x - m->vals] != 1)
      return fail(m, "in-place %s on a value that is used elsewhere", t);
  }
  if (numel > stage) {
    if (m->phase == PH_EXPAND)
      return fail(m, "%s broadcasts the result a second time", t);
    int var = -1;
    for (size_t i = 0; i < 3; i++) {
      struct val *v = arg_val(m, graph_arg(node, i, NULL));
      if (v && v->kind == V_VAR && v->gen == m->gen) {
        if (var >= 0 && v->var != var)
          return fail(m, "%s broadcasts two different GEMM values", t);
        var = v->var;
      }
    }
    if (var < 0 || materialize(m, var) != 0)
      return var < 0 ? fail(m, "%s: unsupported arguments", t) : -1;
    m->phase = PH_EXPAND;
    long long cols = r > 0 ? S[r - 1] : 1;
    if (next_segment(m, numel / cols, cols) != 0)
      return -1;
  } else if (numel != stage) {
    return fail(m, "%s: result is smaller than its input", t);
  }
  int var;
  if (epi_translate(&m->seg, node, resolve_arg, m, &var, m->why, m->whylen) != 0)
    return -1;
  return set_var(m, out, node, var, V_VAR);
}

static bool name_in(const char *n, const char *const *list) {
  for (; *list; list++)
    if (strcmp(n, *list) == 0)
      return true;
  return false;
}

/* getitem / getattr on a (values, indices) tuple or a stage value. */
static int item_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = input_var(m, node);
  json_t *key = graph_arg(node, 1, NULL);
  const char *ks = json_string_value(key);
  if (x && x->kind == V_TUPLE &&
      ((json_is_integer(key) && json_integer_value(key) == 0) ||
       (ks && strcmp(ks, "values") == 0))) {
    if (x->gen != m->gen)
      return fail(m, "a value from before a row operation is used after it");
    return set_var(m, out, node, x->var, V_VAR);
  }
  if (ks && (strcmp(ks, "shape") == 0 || strcmp(ks, "dtype") == 0)) {
    out->kind = V_META;
    return 0;
  }
  if (ks && (strcmp(ks, "T") == 0 || strcmp(ks, "mT") == 0))
    return fail(m, "a transpose of the GEMM's result is not supported");
  return fail(m, "%s: unsupported indexing of a GEMM value (indices or slices)", node_target(node));
}

static int view_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = input_var(m, node);
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (!x || x->kind != V_VAR || r < 0 || graph_dims_prod(s, 0, r) != m->rows * m->cols)
    return fail(m, "%s: unsupported view of a GEMM value", node_target(node));
  if (x->gen != m->gen)
    return fail(m, "a value from before a row operation is used after it");
  return set_var(m, out, node, x->var, V_VAR);
}

/* Records a triu/tril applied straight to the raw product: tiles it zeroes skip the K
 * loop. */
static void note_mask(struct matcher *m, json_t *node) {
  if (m->phase != PH_EPI || json_array_size(m->seg.stmts) != 0 ||
      (!named(node, "triu") && !named(node, "tril")))
    return;
  struct val *x = input_var(m, node);
  int gi = node_index(m, m->gemm_name);
  json_t *dg = graph_arg(node, 1, "diagonal");
  if (!x || x->kind != V_VAR || x->var != 0 || gi < 0 || m->users[gi] != 1 ||
      (dg && !json_is_integer(dg)))
    return;
  json_object_set_new(m->match, "mask",
                      json_pack("{s:s,s:I}", "kind", named(node, "triu") ? "triu" : "tril",
                                "diagonal", (json_int_t)(dg ? json_integer_value(dg) : 0)));
}

static int stage_op(struct matcher *m, json_t *node, struct val *out) {
  static const char *const views[] = {"unsqueeze", "squeeze",   "view", "reshape",
                                      "flatten",   "unflatten", NULL};
  static const char *const norms[] = {"GroupNorm",      "group_norm",     "LayerNorm",
                                      "layer_norm",     "InstanceNorm1d", "InstanceNorm2d",
                                      "InstanceNorm3d", "instance_norm",  NULL};
  const char *n = short_name(node);
  bool mod = graph_is_module(node);
  if (!mod && (strcmp(n, "getitem") == 0 || strcmp(n, "getattr") == 0))
    return item_op(m, node, out);
  if (!mod && (strcmp(n, "size") == 0 || strcmp(n, "dim") == 0)) {
    out->kind = V_META;
    return 0;
  }
  if (!mod && name_in(n, views))
    return view_op(m, node, out);
  if (epi_is_pointwise(node)) {
    note_mask(m, node);
    return pointwise_op(m, node, out);
  }
  if (!mod && (strcmp(n, "sum") == 0 || strcmp(n, "mean") == 0 || strcmp(n, "max") == 0 ||
               strcmp(n, "min") == 0))
    return reduce_op(m, node, out, n);
  if (!mod && (strcmp(n, "amax") == 0 || strcmp(n, "amin") == 0))
    return reduce_op(m, node, out, strcmp(n, "amax") == 0 ? "max" : "min");
  if (!mod && strcmp(n, "logsumexp") == 0)
    return reduce_op(m, node, out, "lse");
  if (strcmp(n, "softmax") == 0 || strcmp(n, "Softmax") == 0)
    return softmax_op(m, node, out, false);
  if (strcmp(n, "log_softmax") == 0 || strcmp(n, "LogSoftmax") == 0)
    return softmax_op(m, node, out, true);
  if (name_in(n, norms))
    return norm_op(m, node, out);
  if (strcmp(n, "BatchNorm1d") == 0 || (!mod && strcmp(n, "batch_norm") == 0))
    return batchnorm_op(m, node, out);
  if (strcmp(n, "AvgPool1d") == 0 || strcmp(n, "avg_pool1d") == 0)
    return pool_op(m, node, out, false);
  if (strcmp(n, "MaxPool1d") == 0 || strcmp(n, "max_pool1d") == 0)
    return pool_op(m, node, out, true);
  return fail(m, "unsupported op %s after the matmul", node_target(node));
}

/* True when any argument (nested) refers to a GEMM value. */
static bool has_stage_arg(struct matcher *m, json_t *v) {
  if (json_is_object(v)) {
    struct val *x = arg_val(m, v);
    if (x)
      return x->kind == V_VAR || x->kind == V_TUPLE;
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
      if (has_stage_arg(m, e))
        return true;
    }
  } else if (json_is_array(v)) {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (has_stage_arg(m, e))
        return true;
    }
  }
  return false;
}

/* The tail's device function ofg_tail_body: segment functions, then the row program
 * ending with the store of its vector or scalar result. */
static int finish_tail(struct matcher *m, bool scalar) {
  struct cg_buf b = {0};
  cg_printf(&b, "%s", m->tail_fns.s ? m->tail_fns.s : "");
  cg_printf(&b,
            "__device__ __forceinline__ void ofg_tail_body(float* row, float* tmp, float* red, "
            "i64 r, float* dst OFG_TAIL_PARAMS) {\n"
            "  int n = %lld;\n  float s = 0.0f;\n  (void)s; (void)tmp; (void)red;\n%s",
            m->tail_cols_in, m->tail_body.s ? m->tail_body.s : "");
  if (scalar)
    cg_printf(&b, "  if (threadIdx.x == 0) dst[r] = s;\n}\n");
  else
    cg_printf(&b, "  ofg_tail_store(dst + r * (i64)n, row, n);\n}\n");
  if (b.failed || m->tail_fns.failed || m->tail_body.failed) {
    cg_free(&b);
    return fail(m, "out of memory");
  }
  long long smem = (m->tail_cols_in + 3) / 4 * 4 + (m->tail_tmp + 3) / 4 * 4 + 32;
  if (smem * 4 > TAIL_SMEM_LIMIT) {
    cg_free(&b);
    return fail(m, "the row tail keeps a row of %lld floats in shared memory: too long",
                m->tail_cols_in);
  }
  json_t *tail =
      json_pack("{s:O,s:O,s:s,s:I,s:I,s:I}", "ops", m->tail_ops, "operands", m->tail_operands,
                "code", b.s, "cols_in", (json_int_t)m->tail_cols_in, "cols_out",
                (json_int_t)(scalar ? 0 : m->cols), "smem_floats", (json_int_t)smem);
  cg_free(&b);
  if (!tail)
    return fail(m, "out of memory");
  json_t *dst = json_object_get(m->match, "tail_dst");
  json_object_set_new(tail, "dst", json_string(dst ? json_string_value(dst) : "output:0"));
  json_object_del(m->match, "tail_dst");
  json_object_set_new(m->match, "tail", tail);
  if (m->has_colstats)
    json_object_set_new(m->match, "colstats", json_pack("{s:f}", "eps", m->bn_eps));
  if (!json_object_get(m->match, "gemm_dst")) {
    bool inplace = !scalar && m->cols == m->tail_cols_in && !dst;
    json_object_set_new(m->match, "gemm_dst",
                        json_string(inplace ? "output:0" : "buffer:gemm_out"));
  }
  return 0;
}

static int finish_expand(struct matcher *m, int var) {
  struct cg_buf fns = {0};
  json_t *operands = json_array();
  char *call = operands
                   ? segment_call(m, "ofg_expand", var, &fns, operands, "x", "0.0f", "row", "col")
                   : NULL;
  if (!call || fns.failed) {
    free(call);
    json_decref(operands);
    cg_free(&fns);
    return fail(m, "out of memory");
  }
  json_t *ops = json_array();
  record_ops(m, ops);
  json_object_set_new(m->match, "expand",
                      json_pack("{s:o,s:o,s:s,s:s,s:I,s:I}", "ops", ops, "operands", operands,
                                "code", fns.s, "call", call, "numel",
                                (json_int_t)(m->rows * m->cols), "cols", (json_int_t)m->cols));
  free(call);
  cg_free(&fns);
  return 0;
}

static int finish(struct matcher *m, json_t *node) {
  json_t *a = graph_arg(node, 0, NULL);
  while (json_is_array(a) && json_array_size(a) == 1)
    a = json_array_get(a, 0);
  struct val *v = arg_val(m, a);
  json_t *outs = json_object_get(m->profile, "outputs");
  if (json_array_size(outs) != 1)
    return fail(m, "the model returns %zu outputs", json_array_size(outs));
  if (!v || v->kind != V_VAR || v->gen != m->gen)
    return fail(m, "the output is not the GEMM pipeline's final value");
  long long s[MAX_RANK];
  int r = graph_shape(json_array_get(outs, 0), s);
  if (r < 0 || graph_dims_prod(s, 0, r) != m->rows * m->cols)
    return fail(m, "the output's element count does not match the pipeline");
  switch (m->phase) {
  case PH_EPI:
    json_object_set_new(m->match, "gemm_dst", json_string("output:0"));
    return finish_epilogue(m, v->var);
  case PH_ROW:
  case PH_SCALAR:
    if (flush_tail_segment(m, v->var) != 0)
      return -1;
    return finish_tail(m, m->phase == PH_SCALAR);
  case PH_EXPAND:
    return finish_expand(m, v->var);
  default:
    return fail(m, "no matmul");
  }
}

/* A one-line description of the match for logs and the UI. */
static void set_summary(json_t *mt) {
  char buf[512];
  size_t used = 0;
#define ADD(...)                                                                                   \
  do {                                                                                             \
    int k_ = snprintf(buf + used, sizeof buf - used, __VA_ARGS__);                                 \
    if (k_ > 0 && (size_t)k_ < sizeof buf - used)                                                  \
      used += (size_t)k_;                                                                          \
  } while (0)
  ADD("%s %lldx%lldx%lld", json_string_value(json_object_get(mt, "op")),
      (long long)json_integer_value(json_object_get(mt, "m")),
      (long long)json_integer_value(json_object_get(mt, "n")),
      (long long)json_integer_value(json_object_get(mt, "k")));
  if (json_integer_value(json_object_get(mt, "batch")) > 1)
    ADD(" batch %lld", (long long)json_integer_value(json_object_get(mt, "batch")));
  if (json_is_true(json_object_get(mt, "trans_a")))
    ADD(" A^T");
  if (json_is_true(json_object_get(mt, "trans_b")))
    ADD(" B^T");
  static const char *const parts[] = {"epilogue", "tail", "expand"};
  for (size_t p = 0; p < 3; p++) {
    json_t *ops = json_object_get(json_object_get(mt, parts[p]), "ops");
    if (json_array_size(ops) == 0)
      continue;
    if (p == 1 && json_object_get(mt, "colstats") && json_object_get(mt, "colstats") != json_null())
      ADD(" colstats");
    ADD(" %s[", parts[p]);
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o) {
      ADD("%s%s", i ? "," : "", json_string_value(o));
    }
    ADD("]");
  }
#undef ADD
  json_object_set_new(mt, "summary", json_string(buf));
}

/* diag(A) @ B written as A.unsqueeze(1) * B (KernelBench's form): a row scaling. */
static int match_row_scale(json_t *profile, json_t **ret_match) {
  json_t *calls = graph_calls(profile);
  int ok = 0;
  if (json_array_size(calls) == 2) {
    json_t *u = json_array_get(calls, 0), *mul = json_array_get(calls, 1);
    json_t *ua = graph_arg(u, 0, NULL), *ud = graph_arg(u, 1, "dim");
    const char *uname = json_string_value(json_object_get(ua, "node"));
    json_t *a = uname ? graph_node(profile, uname) : NULL;
    long long as[MAX_RANK], bs[MAX_RANK], os[MAX_RANK];
    if (a && named(u, "unsqueeze") && json_is_integer(ud) &&
        (json_integer_value(ud) == 1 || json_integer_value(ud) == -1) &&
        strcmp(node_op(a), "placeholder") == 0 && graph_shape(a, as) == 1 &&
        graph_target_is(mul, "mul") && strcmp(node_op(mul), "call_function") == 0) {
      json_t *x = graph_arg(mul, 0, NULL), *y = graph_arg(mul, 1, NULL);
      const char *xn = json_string_value(json_object_get(x, "node"));
      const char *yn = json_string_value(json_object_get(y, "node"));
      const char *other = xn && strcmp(xn, node_name(u)) == 0   ? yn
                          : yn && strcmp(yn, node_name(u)) == 0 ? xn
                                                                : NULL;
      json_t *b = other ? graph_node(profile, other) : NULL;
      json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
      const char *bt = json_string_value(json_object_get(b, "tensor"));
      const char *at = json_string_value(json_object_get(a, "tensor"));
      if (b && bt && at && strcmp(node_op(b), "placeholder") == 0 && graph_shape(b, bs) == 2 &&
          bs[0] == as[0] && graph_shape(out, os) == 2 && os[0] == bs[0] && os[1] == bs[1] &&
          json_array_size(json_object_get(profile, "outputs")) == 1) {
        json_t *mt = json_pack(
            "{s:s,s:s,s:I,s:I,s:I,s:I,s:b,s:b,s:s,s:s,s:I,s:I,s:b,s:n,s:n,s:n,s:n,s:s,s:I,s:I}",
            "family", "gemm", "op", "row_scale", "batch", (json_int_t)1, "m", (json_int_t)bs[0],
            "n", (json_int_t)bs[1], "k", (json_int_t)0, "trans_a", 0, "trans_b", 0, "a", at, "b",
            bt, "a_bstride", (json_int_t)0, "b_bstride", (json_int_t)0, "gemv_swap", 0, "mask",
            "colstats", "tail", "expand", "gemm_dst", "output:0", "rows", (json_int_t)bs[0], "cols",
            (json_int_t)bs[1]);
        if (mt) {
          json_object_set_new(mt, "epilogue",
                              json_pack("{s:[],s:[],s:s}", "ops", "operands", "code", ""));
          set_summary(mt);
          *ret_match = mt;
          ok = 1;
        }
      }
    }
  }
  json_decref(calls);
  return ok;
}

/* 1 when the graph has a matmul; 0 when it has none or has a convolution (another
 * family's task), with the reason in why. ATen-level graphs (the profile's torch.export
 * fallback) name ops "aten.<op>.<overload>". */
static int has_gemm(json_t *graph, char *why, size_t whylen) {
  size_t i;
  json_t *node;
  bool gemm = false;
  json_array_foreach(graph, i, node) {
    const char *op = node_op(node);
    if (strncmp(op, "call_", 5) != 0)
      continue;
    const char *t = node_target(node);
    char aten[64] = "";
    if (strncmp(t, "aten.", 5) == 0)
      snprintf(aten, sizeof aten, "%.*s", (int)strcspn(t + 5, "."), t + 5);
    const char *n = aten[0] ? aten : short_name(node);
    if (strncmp(n, "conv", 4) == 0 || strncmp(n, "Conv", 4) == 0) {
      snprintf(why, whylen, "a convolution (%s): not a GEMM task", t);
      return 0;
    }
    if (is_gemm_node(node) ||
        (aten[0] &&
         (strcmp(aten, "mm") == 0 || strcmp(aten, "bmm") == 0 || strcmp(aten, "addmm") == 0 ||
          strcmp(aten, "linear") == 0 || strcmp(aten, "matmul") == 0)))
      gemm = true;
  }
  if (!gemm)
    snprintf(why, whylen, "no matmul in the graph");
  return gemm ? 1 : 0;
}

static int eval_node(struct matcher *m, size_t i) {
  json_t *node = json_array_get(m->graph, i);
  const char *op = node_op(node);
  struct val *v = &m->vals[i];
  if (strcmp(op, "placeholder") == 0 || strcmp(op, "get_attr") == 0) {
    const char *t = json_string_value(json_object_get(node, "tensor"));
    long long s[MAX_RANK];
    int r = t ? tensor_shape(m, t, s) : -1;
    if (r >= 0) {
      v->kind = V_TENSOR;
      v->tensor = t;
      v->rank = r;
      memcpy(v->shape, s, sizeof s);
    }
    return 0;
  }
  if (strcmp(op, "output") == 0)
    return finish(m, node);
  if (is_gemm_node(node))
    return start_gemm(m, node, v);
  if (has_stage_arg(m, json_object_get(node, "args")) ||
      has_stage_arg(m, json_object_get(node, "kwargs")))
    return stage_op(m, node, v);
  return tensor_op(m, node, v);
}

static void matcher_clear(struct matcher *m) {
  free(m->vals);
  free(m->users);
  epi_prog_clear(&m->seg);
  cg_free(&m->tail_fns);
  cg_free(&m->tail_body);
  json_decref(m->tail_ops);
  json_decref(m->tail_operands);
  json_decref(m->match);
}

int gemm_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  json_t *graph = json_object_get(profile, "graph");
  if (!json_is_array(graph))
    return 0;
  if (!has_gemm(graph, why, whylen))
    return match_row_scale(profile, ret_match);
  const char *src = json_string_value(json_object_get(profile, "graph_source"));
  if (src && strcmp(src, "export") == 0) {
    snprintf(why, whylen,
             "a matmul in an ATen-level graph (torch.export fallback): the gemm "
             "family matches FX graphs only");
    return -1;
  }
  struct matcher m = {.profile = profile,
                      .graph = graph,
                      .n = json_array_size(graph),
                      .why = why,
                      .whylen = whylen};
  m.vals = calloc(m.n + 1, sizeof *m.vals);
  m.users = calloc(m.n + 1, sizeof *m.users);
  m.match = json_pack("{s:s,s:s,s:n,s:n,s:n,s:n}", "family", "gemm", "op", "gemm", "mask",
                      "colstats", "tail", "expand");
  if (!m.vals || !m.users || !m.match) {
    matcher_clear(&m);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  size_t i;
  json_t *node;
  json_array_foreach(graph, i, node) {
    count_refs(&m, json_object_get(node, "args"));
    count_refs(&m, json_object_get(node, "kwargs"));
  }
  int rc = 0;
  for (i = 0; i < m.n && rc == 0; i++)
    rc = eval_node(&m, i);
  if (rc == 0 && !json_object_get(m.match, "epilogue"))
    rc = fail(&m, "the graph has no output");
  if (rc == 0 && strcmp(json_string_value(json_object_get(m.match, "op")), "row_scale") == 0 &&
      (json_array_size(json_object_get(json_object_get(m.match, "epilogue"), "ops")) != 0 ||
       json_object_get(m.match, "tail") != json_null() ||
       json_object_get(m.match, "expand") != json_null()))
    rc = fail(&m, "diag matmul followed by other ops is not supported");
  if (rc != 0) {
    matcher_clear(&m);
    return -1;
  }
  json_object_set_new(m.match, "rows",
                      json_integer(json_integer_value(json_object_get(m.match, "batch")) *
                                   json_integer_value(json_object_get(m.match, "m"))));
  json_object_set_new(m.match, "cols", json_integer(m.gemm_n));
  set_summary(m.match);
  *ret_match = json_incref(m.match);
  matcher_clear(&m);
  return 1;
}

/* ======================= knobs, checks and generation ======================= */

/* The match fields generation reads. */
struct gm {
  const char *op;
  long long batch, m, n, k, abs, bbs, rows;
  bool ta, tb, swap;
  json_t *epi, *tail, *colstats, *expand, *mask;
  const char *a, *b, *gemm_dst;
};

static long long jint(json_t *o, const char *k) {
  return json_integer_value(json_object_get(o, k));
}

static json_t *jobj(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_object(v) ? v : NULL;
}

static int gm_read(json_t *match, struct gm *g, char *why, size_t whylen) {
  memset(g, 0, sizeof *g);
  g->op = json_string_value(json_object_get(match, "op"));
  g->a = json_string_value(json_object_get(match, "a"));
  g->b = json_string_value(json_object_get(match, "b"));
  g->gemm_dst = json_string_value(json_object_get(match, "gemm_dst"));
  g->batch = jint(match, "batch");
  g->m = jint(match, "m");
  g->n = jint(match, "n");
  g->k = jint(match, "k");
  g->abs = jint(match, "a_bstride");
  g->bbs = jint(match, "b_bstride");
  g->rows = g->batch * g->m;
  g->ta = json_is_true(json_object_get(match, "trans_a"));
  g->tb = json_is_true(json_object_get(match, "trans_b"));
  g->swap = json_is_true(json_object_get(match, "gemv_swap"));
  g->epi = jobj(match, "epilogue");
  g->tail = jobj(match, "tail");
  g->colstats = jobj(match, "colstats");
  g->expand = jobj(match, "expand");
  g->mask = jobj(match, "mask");
  if (!g->op || !g->a || !g->b || !g->gemm_dst || !g->epi || g->batch < 1 || g->m < 1 || g->n < 1 ||
      g->k < 0) {
    snprintf(why, whylen, "malformed gemm match");
    return -1;
  }
  return 0;
}

static bool op_is(const struct gm *g, const char *op) {
  return strcmp(g->op, op) == 0;
}

static bool mode_is(const struct knob_set *k, const char *m) {
  return strcmp(k->mode, m) == 0;
}

static bool tf32x3_mode(const struct knob_set *k) {
  return mode_is(k, "tf32x3") || mode_is(k, "3xtf32");
}

/* The derived layout of a SIMT GEMM under knobs k. */
struct layout {
  int nt, va, vb, pad_a, pad_b, vec;
  int minb, minb_default; /* __launch_bounds__ min blocks: the knob's, else the default */
  long long smem, tiles, kchunk, nk, grid_x;
  bool even, idx64;
};

static bool pow2(long long v) {
  return v > 0 && (v & (v - 1)) == 0;
}

/* Resident blocks per SM for nt threads and smem bytes (registers estimated). */
static int occupancy(int nt, long long smem, int regs) {
  int by_threads = 2048 / nt, by_smem = smem > 0 ? (int)((228LL * 1024) / (smem + 1024)) : 32;
  int by_regs = 65536 / (nt * (regs < 32 ? 32 : regs));
  int o = by_threads < by_smem ? by_threads : by_smem;
  o = o < by_regs ? o : by_regs;
  o = o < 32 ? o : 32; /* resident blocks per SM */
  return o < 1 ? 1 : o;
}

static int est_regs(const struct knob_set *k) {
  return k->tm * k->tn + k->tm + k->tn + 40;
}

static void derive(const struct gm *g, const struct knob_set *k, struct layout *L) {
  memset(L, 0, sizeof *L);
  L->nt = (k->bm / k->tm) * (k->bn / k->tn);
  L->vec = k->vec ? k->vec : 4;
  bool a_rc = g->ta, b_rc = !g->tb;
  bool regpath = k->stages == 1;
  L->va = a_rc ? (g->m % L->vec == 0 ? L->vec : 1) : (regpath && g->k % L->vec == 0 ? L->vec : 1);
  L->vb = b_rc ? (g->n % L->vec == 0 ? L->vec : 1) : (regpath && g->k % L->vec == 0 ? L->vec : 1);
  bool pad_all = mode_is(k, "pad_smem");
  L->pad_a = (!a_rc || pad_all) ? 4 : 0;
  L->pad_b = (!b_rc || pad_all) ? 4 : 0;
  L->smem = (long long)k->stages * k->bk * ((k->bm + L->pad_a) + (k->bn + L->pad_b)) * 4;
  L->tiles = ((g->m + k->bm - 1) / k->bm) * ((g->n + k->bn - 1) / k->bn);
  int split = k->split ? k->split : 1;
  L->kchunk = ((g->k + split - 1) / split + k->bk - 1) / k->bk * k->bk;
  L->nk = (L->kchunk + k->bk - 1) / k->bk;
  L->even = g->m % k->bm == 0 && g->n % k->bn == 0 && g->k % k->bk == 0 &&
            (split == 1 || g->k % L->kchunk == 0);
  long long big = 1LL << 31;
  L->idx64 = (g->ta ? g->k * g->m : g->m * g->k) >= big || g->k * g->n >= big || g->m * g->n >= big;
  /* Two resident blocks per SM when the register estimate fits 65536 / (2 x threads):
   * a barrier of one block then leaves the SM's other block computing. NVRTC fits the
   * 8 x 8 tiles in 128 registers without spills for BK = 8, two stages, one batch and
   * 32-bit indexing; deeper pipelines and wider address math spill under that cap. */
  bool wide = L->idx64 || mode_is(k, "idx64") || g->batch > 1 || split > 1;
  bool two = 2 * L->nt <= 2048 && est_regs(k) <= 65536 / (2 * L->nt) &&
             2 * L->smem <= 228LL * 1024 && k->bk <= 8 && k->stages <= 2 && !wide;
  L->minb_default = two ? 2 : 0;
  L->minb = k->minb ? k->minb : L->minb_default;
  L->grid_x = L->tiles;
  if (mode_is(k, "persistent")) {
    long long cap = (long long)H200_SMS * occupancy(L->nt, L->smem, est_regs(k));
    if (L->minb > 0 && (long long)H200_SMS * L->minb < cap)
      cap = (long long)H200_SMS * L->minb;
    L->grid_x = L->tiles < cap ? L->tiles : cap;
  }
}

/* Split-K for problems whose tiles cannot fill the GPU: a power of two giving about
 * two blocks per SM, keeping at least 16 K steps per slice. */
static int default_split(const struct gm *g, const struct knob_set *k) {
  long long tiles = ((g->m + k->bm - 1) / k->bm) * ((g->n + k->bn - 1) / k->bn) * g->batch;
  int split = 1;
  while (tiles * split * 2 <= 2 * H200_SMS && g->k / (split * 2) >= 16LL * k->bk && split < 256)
    split *= 2;
  return split;
}

static int check_tf32x3(const struct gm *g, const struct knob_set *k, char *why, size_t whylen);

/* Replaces the SIMT defaults in k by the 3xTF32 tensor-core kernel when it fits the
 * problem: 16-deep K steps in a 4-stage cp.async pipeline (fewer stages for short K),
 * the same block and warp tiles. On the H200 it beat the SIMT kernel on every GEMM
 * swept (4096^3: 2.43 ms against 3.05 ms, cuBLAS 2.68 ms) with an error against float64
 * of 0.3-1.0x eager's. k is left alone when the kernel does not fit. */
static void prefer_tf32x3(const struct gm *g, struct knob_set *k) {
  struct knob_set t = *k;
  snprintf(t.mode, sizeof t.mode, "tf32x3");
  t.bk = g->k >= 32 ? 16 : 8;
  long long steps = (g->k + t.bk - 1) / t.bk;
  t.stages = steps >= 4 ? 4 : (int)steps;
  t.split = 1;
  t.split = default_split(g, &t);
  /* Two blocks per SM (128 registers each) were 5-6% faster than
   * one on the GEMMs swept, except 4096^3 where it tied. Only for tiles that divide the
   * problem without split-K (check_tf32x3 says why). */
  t.minb = 2;
  char why[256];
  if (t.stages < 2)
    return;
  if (check_tf32x3(g, &t, why, sizeof why) != 0)
    t.minb = 0;
  if (check_tf32x3(g, &t, why, sizeof why) == 0)
    *k = t;
}

void gemm_defaults(json_t *match, struct knob_set *ret_knobs) {
  struct knob_set k = {0};
  struct gm g;
  char why[64];
  if (gm_read(match, &g, why, sizeof why) != 0) {
    *ret_knobs = k;
    return;
  }
  if (op_is(&g, "gemm")) {
    /* 256 threads of 8 x 8 outputs, 8-deep K steps double-buffered by cp.async. MINB
     * stays 0 (the kernel's own default bound applies) so that MODE tf32x3, which needs
     * more registers per thread, remains one move away. */
    k.bm = k.bn = 128;
    k.bk = 8;
    k.tm = k.tn = 8;
    k.stages = 2;
    k.split = 1;
    /* Small M or N: a narrower tile side (16 threads along it, 2 outputs each at least,
     * which MODE tf32x3 needs) keeps blocks busy. */
    while (k.bm > 32 && g.m <= k.bm / 2)
      k.bm /= 2;
    while (k.bn > 32 && g.n <= k.bn / 2)
      k.bn /= 2;
    k.tm = k.bm / 16;
    k.tn = k.bn / 16;
    /* Short K: fewer, shallower K steps (the pipeline needs at least STAGES of them). */
    while (k.bk > 8 && g.k <= k.bk / 2)
      k.bk /= 2;
    if ((g.k + k.bk - 1) / k.bk < 2)
      k.stages = 1;
    k.split = default_split(&g, &k);
    prefer_tf32x3(&g, &k);
  } else if (op_is(&g, "gemv")) {
    k.block = 256;
    k.vec = g.k % 4 == 0 ? 4 : g.k % 2 == 0 ? 2 : 1;
    k.unroll = 4;
  } else {
    k.block = 256;
    k.vec = g.n % 4 == 0 ? 4 : g.n % 2 == 0 ? 2 : 1;
  }
  *ret_knobs = k;
}

static int refuse(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t whylen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
  return -1;
}

/* Knobs an op does not read must stay 0 (a move on them would change nothing). */
static int check_unused(const char *op, const struct knob_set *k, const char *used, char *why,
                        size_t whylen) {
  const struct {
    const char *name;
    int v;
  } f[] = {{"BLOCK", k->block}, {"VEC", k->vec},       {"ITEMS", k->items},   {"ROWS", k->rows},
           {"BM", k->bm},       {"BN", k->bn},         {"BK", k->bk},         {"TM", k->tm},
           {"TN", k->tn},       {"STAGES", k->stages}, {"UNROLL", k->unroll}, {"MINB", k->minb},
           {"SPLIT", k->split}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    char pat[16];
    snprintf(pat, sizeof pat, ",%s,", f[i].name);
    bool ok = strstr(used, pat) != NULL || (strcmp(f[i].name, "SPLIT") == 0 && f[i].v == 1);
    if (f[i].v != 0 && !ok) {
      if (strcmp(f[i].name, "BLOCK") == 0 && strcmp(op, "gemm") == 0)
        return refuse(why, whylen,
                      "BLOCK: gemm derives its threads from the tiles, "
                      "(BM/TM)*(BN/TN); move BM, BN, TM or TN instead");
      return refuse(why, whylen, "%s is not used by %s", f[i].name, op);
    }
  }
  return 0;
}

static int check_mode_common(const struct gm *g, const struct knob_set *k, char *why,
                             size_t whylen) {
  if (mode_is(k, "fused_epilogue"))
    return refuse(why, whylen,
                  "fused_epilogue: the epilogue is always fused into the GEMM's "
                  "store (or the split-K reduction)");
  if (mode_is(k, "epilogue_partials"))
    return refuse(why, whylen,
                  "epilogue_partials: the row tail reads the GEMM output in a "
                  "second launch (under 1%% of the GEMM's time here)");
  if (mode_is(k, "ldg")) {
    size_t n = json_array_size(json_object_get(g->epi, "operands")) +
               json_array_size(json_object_get(g->tail, "operands")) +
               json_array_size(json_object_get(g->expand, "operands"));
    bool direct = !op_is(g, "gemm") || k->stages == 1;
    if (!direct && n == 0)
      return refuse(why, whylen,
                    "ldg: with cp.async (STAGES>1) the operands do not pass "
                    "through registers and the epilogue reads no tensors");
  }
  return 0;
}

/* The register cap of L's threads at k's MINB (255 at most), shared by the SIMT and the
 * 3xTF32 kernel: refuses knobs whose estimate regs (per kernel; tf32 picks the wording)
 * exceeds the cap, or whose MINB blocks do not fit one SM. Returns 0 and *ret_cap, or -1
 * with the reason in why. */
static int check_regs_fit(const struct knob_set *k, const struct layout *L, int regs, bool tf32,
                          int *ret_cap, char *why, size_t whylen) {
  int cap = 65536 / (L->nt * (k->minb > 0 ? k->minb : 1));
  if (cap > 255)
    cap = 255;
  if (regs > cap && tf32)
    return refuse(why, whylen,
                  "registers: TM*TN=%d outputs per thread need about %d "
                  "registers with 3xTF32, above the cap of %d (MINB=%d)",
                  k->tm * k->tn, regs, cap, k->minb);
  if (regs > cap)
    return refuse(why, whylen,
                  "registers: TM*TN=%d accumulators need about %d registers, "
                  "above the cap of %d (MINB=%d)",
                  k->tm * k->tn, regs, cap, k->minb);
  if (k->minb > 0 && (L->nt * k->minb > 2048 || L->smem * k->minb > 228LL * 1024))
    return refuse(why, whylen,
                  "MINB=%d blocks of %d threads and %lld bytes of shared memory "
                  "do not fit one SM",
                  k->minb, L->nt, L->smem);
  *ret_cap = cap;
  return 0;
}

/* The SIMT kernel's registers, occupancy, unroll, split and mode constraints. */
static int check_simt_budget(const struct gm *g, const struct knob_set *k, const struct layout *lp,
                             char *why, size_t whylen) {
  const struct layout L = *lp;
  if (k->minb > 0 && k->minb == L.minb_default)
    return refuse(why, whylen,
                  "MINB=%d is already the SIMT kernel's default for %d threads of %dx%d outputs",
                  k->minb, L.nt, k->tm, k->tn);
  int cap;
  if (check_regs_fit(k, &L, est_regs(k), false, &cap, why, whylen) != 0)
    return -1;
  if (k->unroll && (k->unroll >= k->bk || k->bk % k->unroll != 0))
    return refuse(why, whylen,
                  "UNROLL=%d: must divide BK=%d and be smaller (the default "
                  "unrolls BK fully)",
                  k->unroll, k->bk);
  int split = k->split ? k->split : 1;
  if (split > 1 && (split - 1) * L.kchunk >= g->k)
    return refuse(why, whylen, "SPLIT=%d leaves empty K slices (K=%lld, BK=%d)", split, g->k,
                  k->bk);
  if (k->stages > 1 && k->stages > L.nk)
    return refuse(why, whylen, "STAGES=%d exceeds the %lld K steps of BK=%d", k->stages, L.nk,
                  k->bk);
  if (g->batch * split > 65535)
    return refuse(why, whylen, "batch %lld x SPLIT %d exceeds the grid's z limit", g->batch, split);
  if (split > 1 && split * g->rows * g->n * 4 > (4LL << 30))
    return refuse(why, whylen, "SPLIT=%d: the partials buffer would exceed 4 GiB", split);
  if (mode_is(k, "persistent") && L.grid_x >= L.tiles)
    return refuse(why, whylen, "persistent: the %lld tiles already fit one wave", L.tiles);
  if (mode_is(k, "pad_smem") && !g->ta && g->tb)
    return refuse(why, whylen,
                  "pad_smem: both tiles are already padded (k-contiguous operands "
                  "are transposed into shared memory with a 4-float pad)");
  if (mode_is(k, "predicated_tail") && !L.even)
    return refuse(why, whylen,
                  "predicated_tail: the shape already uses the predicated path "
                  "(M, N or K not divisible by the tile)");
  if (mode_is(k, "idx64") && L.idx64)
    return refuse(why, whylen, "idx64: the operands already need 64-bit indexing");
  /* derive() keeps two blocks per SM off for these: NVRTC spilled 56-296 bytes under the
   * resulting register cap (deeper K steps, more stages, 64-bit or batched addressing). */
  bool spills = k->bk > 8 || k->stages > 2 || L.idx64 || mode_is(k, "idx64") || g->batch > 1 ||
                (k->split ? k->split : 1) > 1;
  if (k->minb >= 2 && cap <= 128 && spills)
    return refuse(why, whylen,
                  "MINB=%d caps the SIMT kernel at %d registers, and with BK=%d, STAGES=%d, "
                  "batched, split or 64-bit addressing it spills under that cap",
                  k->minb, cap, k->bk, k->stages);
  return check_mode_common(g, k, why, whylen);
}

static int check_simt(const struct gm *g, const struct knob_set *k, char *why, size_t whylen) {
  static const char *const modes[] = {"",      "pad_smem", "ldg", "persistent", "predicated_tail",
                                      "idx64", NULL};
  if (mode_is(k, "fused_epilogue") || mode_is(k, "epilogue_partials"))
    return check_mode_common(g, k, why, whylen);
  if (!name_in(k->mode, modes))
    return refuse(why, whylen, "MODE %s does not apply to gemm", k->mode);
  if (!pow2(k->bm) || !pow2(k->bn) || k->bm < 16 || k->bn < 16)
    return refuse(why, whylen, "BM=%d, BN=%d: tile sides must be powers of two >= 16", k->bm,
                  k->bn);
  if (!pow2(k->tm) || !pow2(k->tn) || k->tm > 16 || k->tn > 16 || k->bm % k->tm || k->bn % k->tn)
    return refuse(why, whylen, "TM=%d, TN=%d: powers of two <= 16 that divide BM=%d, BN=%d", k->tm,
                  k->tn, k->bm, k->bn);
  if (k->bk < 4 || k->bk % 4 != 0 || (k->bk > 8 && k->bk % 8 != 0))
    return refuse(why, whylen, "BK=%d: must be 4 or a multiple of 8", k->bk);
  struct layout L;
  derive(g, k, &L);
  if (L.nt < 32 || L.nt > 1024 || L.nt % 32 != 0)
    return refuse(why, whylen,
                  "(BM/TM)*(BN/TN) = %d threads: must be a multiple of 32 in "
                  "[32, 1024]",
                  L.nt);
  if (k->stages < 1 || k->stages > 6)
    return refuse(why, whylen, "STAGES=%d outside [1, 6]", k->stages);
  if (L.smem > SMEM_LIMIT)
    return refuse(why, whylen,
                  "shared memory %lld bytes (STAGES x BK x (BM+BN+pads) x 4) "
                  "exceeds 227 KiB",
                  L.smem);
  if (k->vec && k->vec != 1 && k->vec != 2 && k->vec != 4)
    return refuse(why, whylen, "VEC=%d: gemm loads 1, 2 or 4 floats", k->vec);
  if (k->vec > 1 && L.va == 1 && L.vb == 1)
    return refuse(why, whylen, "VEC=%d applies to no operand: %s", k->vec,
                  k->stages > 1 ? "k-contiguous operands are copied one float at a time by "
                                  "cp.async (STAGES>1), and no M/N-contiguous operand has an "
                                  "extent divisible by it"
                                : "the contiguous extents are not divisible by it");
  if (k->vec == 1 && k->stages > 1 && g->tb && !g->ta)
    return refuse(why, whylen,
                  "VEC=1 changes nothing: both operands are k-contiguous and "
                  "cp.async copies them one float at a time");
  return check_simt_budget(g, k, &L, why, whylen);
}

static int check_tf32x3(const struct gm *g, const struct knob_set *k, char *why, size_t whylen);

int gemm_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  struct gm g;
  if (gm_read(match, &g, why, whylen) != 0)
    return -1;
  if (op_is(&g, "gemm")) {
    if (tf32x3_mode(k)) {
      if (check_unused("gemm tf32x3", k, ",BM,BN,BK,TM,TN,STAGES,MINB,SPLIT,", why, whylen) != 0)
        return -1;
      return check_tf32x3(&g, k, why, whylen);
    }
    if (check_unused("gemm", k, ",BM,BN,BK,TM,TN,STAGES,VEC,UNROLL,MINB,SPLIT,", why, whylen) != 0)
      return -1;
    return check_simt(&g, k, why, whylen);
  }
  const char *op = g.op;
  bool gemv = op_is(&g, "gemv");
  if (check_unused(op, k, gemv ? ",BLOCK,VEC,UNROLL," : ",BLOCK,VEC,", why, whylen) != 0)
    return -1;
  if (k->mode[0] && !mode_is(k, "ldg"))
    return refuse(why, whylen, "MODE %s does not apply to %s", k->mode, op);
  if (k->block < 32 || k->block > 1024 || k->block % 32 != 0)
    return refuse(why, whylen, "BLOCK=%d: a multiple of 32 in [32, 1024]", k->block);
  long long ext = gemv ? g.k : g.n;
  if (k->vec != 1 && k->vec != 2 && k->vec != 4)
    return refuse(why, whylen, "VEC=%d: 1, 2 or 4", k->vec);
  if (ext % k->vec != 0)
    return refuse(why, whylen, "VEC=%d does not divide the contiguous length %lld", k->vec, ext);
  if (gemv && (k->unroll < 1 || k->unroll > 16))
    return refuse(why, whylen, "UNROLL=%d outside [1, 16]", k->unroll);
  return check_mode_common(&g, k, why, whylen);
}

static json_t *tensor_arg(const char *name) {
  if (strncmp(name, "buffer:", 7) == 0)
    return json_pack("{s:s}", "buffer", name + 7);
  return json_pack("{s:s}", "tensor", name);
}

/* Appends one launch argument per operand of a stage (a list of tensor names). */
static void add_operand_args(json_t *args, json_t *operands) {
  size_t i;
  json_t *o;
  json_array_foreach(operands, i, o) {
    json_array_append_new(args, tensor_arg(json_string_value(o)));
  }
}

/* -D-style parameter macros for a stage's operands: NAME_PARAMS and NAME_ARGS. */
static void param_macros(struct cg_buf *s, const char *name, json_t *operands, const char *prefix) {
  size_t n = json_array_size(operands);
  cg_printf(s, "#define %s_PARAMS ", name);
  for (size_t i = 0; i < n; i++)
    cg_printf(s, ", const float* __restrict__ %s%zu", prefix, i);
  cg_printf(s, "\n#define %s_ARGS ", name);
  for (size_t i = 0; i < n; i++)
    cg_printf(s, ", %s%zu", prefix, i);
  cg_printf(s, "\n");
}

static json_t *launch(const char *kernel, long long gx, long long gy, long long gz, int bx, int by,
                      long long shared, json_t *args) {
  return json_pack("{s:s,s:[I,I,I],s:[i,i,i],s:I,s:o}", "kernel", kernel, "grid", (json_int_t)gx,
                   (json_int_t)gy, (json_int_t)gz, "block", bx, by, 1, "shared_bytes",
                   (json_int_t)shared, "args", args);
}

static int tail_threads(const struct gm *g) {
  return jint(g->tail, "cols_in") <= 512 ? 128 : 256;
}

/* The problem and stage macros every kernel of the source reads. */
static void problem_macros(struct cg_buf *s, const struct gm *g, const struct layout *L) {
  /* OFG_EMU: the unit tests' CPU emulator of the kernels supplies these itself. */
  cg_printf(s, "#ifndef OFG_EMU\n#define OFG_PRAGMA(x) _Pragma(#x)\n"
               "#define OFG_DYN_SMEM(name) extern __shared__ float4 name[]\n"
               "#else\n#define OFG_PRAGMA(x)\n"
               "#define OFG_DYN_SMEM(name) float4* name = (float4*)ofg_emu_dyn_smem()\n#endif\n"
               "#define OFG_UNROLL_N(n) OFG_PRAGMA(unroll n)\n");
  const char *opm = op_is(g, "gemm")   ? "OFG_OP_GEMM"
                    : op_is(g, "gemv") ? "OFG_OP_GEMV"
                                       : "OFG_OP_ROWSCALE";
  cg_printf(s,
            "#define %s 1\n#define OFG_M %lld\n#define OFG_N %lld\n#define OFG_K %lld\n"
            "#define OFG_BATCH %lld\n#define OFG_TRANS_A %d\n#define OFG_TRANS_B %d\n"
            "#define OFG_A_BSTRIDE %lldLL\n#define OFG_B_BSTRIDE %lldLL\n",
            opm, g->m, g->n, g->k, g->batch, g->ta, g->tb, g->abs, g->bbs);
  cg_printf(s, "#define OFG_MIN_BLOCKS %d\n", L->minb);
  cg_printf(s,
            "#define OFG_PAD_A %d\n#define OFG_PAD_B %d\n#define OFG_VEC_A %d\n"
            "#define OFG_VEC_B %d\n#define OFG_IDX64 %d\n",
            L->pad_a, L->pad_b, L->va, L->vb, L->idx64 ? 1 : 0);
  const char *mk = g->mask ? json_string_value(json_object_get(g->mask, "kind")) : NULL;
  cg_printf(s, "#define OFG_MASK %d\n#define OFG_MASK_DIAG %lld\n",
            mk ? (strcmp(mk, "triu") == 0 ? 1 : 2) : 0, g->mask ? jint(g->mask, "diagonal") : 0);
  if (op_is(g, "gemv"))
    cg_printf(s,
              "#define OFG_GEMV_RPB %lldLL\n#define OFG_GEMV_MBSTRIDE %lldLL\n"
              "#define OFG_GEMV_XBSTRIDE %lldLL\n#define OFG_GEMV_SWAP %d\n",
              g->swap ? g->n : g->m, g->swap ? 0 : g->abs, g->swap ? 0 : g->bbs, g->swap);
  param_macros(s, "OFG_EPI", json_object_get(g->epi, "operands"), "e");
  if (g->tail) {
    cg_printf(s,
              "#define OFG_TAIL_COLS_IN %lld\n#define OFG_TAIL_TMP %lld\n"
              "#define TAIL_THREADS %d\n",
              jint(g->tail, "cols_in"),
              jint(g->tail, "smem_floats") - (jint(g->tail, "cols_in") + 3) / 4 * 4 - 32,
              tail_threads(g));
    param_macros(s, "OFG_TAIL", json_object_get(g->tail, "operands"), "t");
  }
  if (g->colstats)
    cg_printf(s, "#define OFG_CS_ROWS %lld\n#define OFG_CS_COLS %lld\n#define OFG_CS_EPS %.9gf\n",
              g->rows, g->n, json_number_value(json_object_get(g->colstats, "eps")));
  if (g->expand) {
    cg_printf(s,
              "#define OFG_EXP_NUMEL %lldLL\n#define OFG_EXP_COLS %lldLL\n"
              "#define OFG_EXP_CALL %s\n",
              jint(g->expand, "numel"), jint(g->expand, "cols"),
              json_string_value(json_object_get(g->expand, "call")));
    param_macros(s, "OFG_EXP", json_object_get(g->expand, "operands"), "x");
  }
}

/* The candidate's source: shared helpers, problem macros, the epilogue, the GEMM
 * template, then the tail's template and generated row program. */
static char *build_source(const struct gm *g, const struct layout *L, bool tf32) {
  const char *common = builtin_template("common.cuh");
  const char *main_t = builtin_template("gemm.cu");
  const char *tc_t = builtin_template("gemm_tf32x3.cu");
  const char *tail_t = builtin_template("gemm_tail.cu");
  if (!common || !main_t || !tail_t || !tc_t)
    return NULL;
  struct cg_buf s = {0};
  cg_printf(&s, "// opforge builtin gemm: generated\n"
                "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n");
  cg_printf(&s, "%s\n", common);
  if (tf32)
    cg_printf(&s, "#define OFG_TF32X3 1\n");
  problem_macros(&s, g, L);
  cg_printf(&s, "%s", epi_prelude());
  cg_printf(&s, "%s\n", json_string_value(json_object_get(g->epi, "code")));
  cg_printf(&s, "%s\n", main_t);
  if (tf32)
    cg_printf(&s, "%s\n", tc_t);
  if (g->tail || g->colstats || g->expand) {
    if (g->expand)
      cg_printf(&s, "%s\n", json_string_value(json_object_get(g->expand, "code")));
    cg_printf(&s, "%s\n", tail_t);
    if (g->tail)
      cg_printf(&s, "%s\n", json_string_value(json_object_get(g->tail, "code")));
  }
  return cg_take(&s);
}

/* The launches after the first: split-K reduction, column statistics, row tail and the
 * broadcast stage. */
static void tail_launches(const struct gm *g, json_t *launches, json_t *buffers) {
  const char *dst = g->gemm_dst;
  if (g->colstats) {
    json_array_append_new(
        buffers, json_pack("{s:s,s:I}", "name", "bn_mean", "bytes", (json_int_t)(g->n * 4)));
    json_array_append_new(
        buffers, json_pack("{s:s,s:I}", "name", "bn_rstd", "bytes", (json_int_t)(g->n * 4)));
    json_t *args =
        json_pack("[o,{s:s},{s:s}]", tensor_arg(dst), "buffer", "bn_mean", "buffer", "bn_rstd");
    json_array_append_new(launches,
                          launch("gemm_colstats", (g->n + 31) / 32, 1, 1, 32, 16, 0, args));
  }
  if (g->tail) {
    const char *tdst = json_string_value(json_object_get(g->tail, "dst"));
    if (strcmp(tdst, "buffer:tail_out") == 0) {
      long long co = jint(g->tail, "cols_out");
      json_array_append_new(buffers, json_pack("{s:s,s:I}", "name", "tail_out", "bytes",
                                               (json_int_t)(g->rows * (co ? co : 1) * 4)));
    }
    json_t *args = json_pack("[o,o]", tensor_arg(dst), tensor_arg(tdst));
    add_operand_args(args, json_object_get(g->tail, "operands"));
    json_array_append_new(launches, launch("gemm_tail", g->rows, 1, 1, tail_threads(g), 1,
                                           jint(g->tail, "smem_floats") * 4, args));
  }
  if (g->expand) {
    json_t *args = json_pack("[{s:s}]", "tensor", "output:0");
    add_operand_args(args, json_object_get(g->expand, "operands"));
    json_array_append_new(launches, launch("gemm_expand", (jint(g->expand, "numel") + 255) / 256, 1,
                                           1, 256, 1, 0, args));
  }
}

/* The first launch (and split-K's reduction) of a SIMT GEMM, GEMV or row scaling. */
static void main_launches(const struct gm *g, const struct knob_set *k, const struct layout *L,
                          json_t *launches, json_t *buffers) {
  json_t *epi_ops = json_object_get(g->epi, "operands");
  if (strcmp(g->gemm_dst, "buffer:gemm_out") == 0)
    json_array_append_new(buffers, json_pack("{s:s,s:I}", "name", "gemm_out", "bytes",
                                             (json_int_t)(g->rows * g->n * 4)));
  if (op_is(g, "row_scale")) {
    json_t *args =
        json_pack("[{s:s},{s:s},o]", "tensor", g->a, "tensor", g->b, tensor_arg(g->gemm_dst));
    long long n = g->m * g->n / k->vec;
    json_array_append_new(
        launches, launch("row_scale", (n + k->block - 1) / k->block, 1, 1, k->block, 1, 0, args));
    return;
  }
  if (op_is(g, "gemv")) {
    json_t *args = json_pack("[{s:s},{s:s},o]", "tensor", g->swap ? g->b : g->a, "tensor",
                             g->swap ? g->a : g->b, tensor_arg(g->gemm_dst));
    add_operand_args(args, epi_ops);
    json_array_append_new(
        launches, launch("gemv_main", g->swap ? g->n : g->rows, 1, 1, k->block, 1, 0, args));
    return;
  }
  int split = k->split ? k->split : 1;
  const char *dst = g->gemm_dst;
  if (split > 1) {
    json_array_append_new(buffers, json_pack("{s:s,s:I}", "name", "partials", "bytes",
                                             (json_int_t)(split * g->rows * g->n * 4)));
    dst = "buffer:partials";
  }
  json_t *args = json_pack("[{s:s},{s:s},o]", "tensor", g->a, "tensor", g->b, tensor_arg(dst));
  add_operand_args(args, epi_ops);
  json_array_append_new(
      launches, launch("gemm_main", L->grid_x, 1, g->batch * split, L->nt, 1, L->smem, args));
  if (split > 1) {
    long long skv = g->n % 4 == 0 ? 4 : 1, total = g->rows * g->n / skv;
    json_t *rargs = json_pack("[{s:s},o]", "buffer", "partials", tensor_arg(g->gemm_dst));
    add_operand_args(rargs, epi_ops);
    json_array_append_new(launches,
                          launch("gemm_splitk", (total + 255) / 256, 1, 1, 256, 1, 0, rargs));
  }
}

static int generate_tf32x3(const struct gm *g, const struct knob_set *k, json_t *launches,
                           json_t *buffers, struct layout *L);

int gemm_generate(json_t *match, const struct knob_set *knobs, json_t **ret_candidate, char *why,
                  size_t whylen) {
  struct gm g;
  if (gm_read(match, &g, why, whylen) != 0 || gemm_check(match, knobs, why, whylen) != 0)
    return -1;
  struct knob_set k = *knobs;
  struct layout L = {0};
  bool tf32 = op_is(&g, "gemm") && tf32x3_mode(&k);
  json_t *launches = json_array(), *buffers = json_array();
  if (op_is(&g, "gemm") && !tf32) {
    derive(&g, &k, &L);
    main_launches(&g, &k, &L, launches, buffers);
  } else if (tf32) {
    if (generate_tf32x3(&g, &k, launches, buffers, &L) != 0) {
      json_decref(launches);
      json_decref(buffers);
      return refuse(why, whylen, "tf32x3: generation failed");
    }
  } else {
    L.idx64 = true;
    main_launches(&g, &k, &L, launches, buffers);
  }
  tail_launches(&g, launches, buffers);
  char *src = build_source(&g, &L, tf32);
  json_t *opts = knob_options(&k);
  json_t *cand = src && opts ? json_pack("{s:s,s:o,s:{s:o,s:o}}", "source", src, "options", opts,
                                         "plan", "buffers", buffers, "launches", launches)
                             : NULL;
  free(src);
  if (!cand) {
    if (!opts || !src) {
      json_decref(opts);
      json_decref(buffers);
      json_decref(launches);
    }
    return refuse(why, whylen, "out of memory building the candidate");
  }
  *ret_candidate = cand;
  return 0;
}

/* ---- 3xTF32 (error-compensated TF32 on tensor cores) ---- */

/* The layout of the tensor-core kernel: each thread owns TM x TN outputs, a warp
 * (8*TM) x (4*TN); operands keep their global layout in shared memory. */
static void derive_tf32(const struct gm *g, const struct knob_set *k, struct layout *L) {
  memset(L, 0, sizeof *L);
  L->nt = (k->bm / k->tm) * (k->bn / k->tn);
  bool a_kc = !g->ta, b_kc = g->tb;
  L->va = (a_kc ? g->k : g->m) % 4 == 0 ? 4 : 1;
  L->vb = (b_kc ? g->k : g->n) % 4 == 0 ? 4 : 1;
  long long at = a_kc ? (long long)k->bm * (k->bk + 4) : (long long)k->bk * (k->bm + 8);
  long long bt = b_kc ? (long long)k->bn * (k->bk + 4) : (long long)k->bk * (k->bn + 8);
  L->smem = (long long)k->stages * (at + bt) * 4;
  L->tiles = ((g->m + k->bm - 1) / k->bm) * ((g->n + k->bn - 1) / k->bn);
  int split = k->split ? k->split : 1;
  L->kchunk = ((g->k + split - 1) / split + k->bk - 1) / k->bk * k->bk;
  L->nk = (L->kchunk + k->bk - 1) / k->bk;
  long long big = 1LL << 31;
  L->idx64 = g->m * g->k >= big || g->k * g->n >= big || g->m * g->n >= big;
  L->grid_x = L->tiles;
  L->minb = k->minb;
}

/* Registers of the tensor-core kernel: the accumulators, the fragments of one operand
 * at a time, addressing. Calibrated on NVRTC for sm_90a: the 8 x 8 tile (64
 * accumulators) fits 128 registers, with at most 16 bytes spilled for B^T layouts. */
static int est_regs_tf32(const struct knob_set *k) {
  return k->tm * k->tn + 2 * k->tm + k->tn + 40;
}

static int check_tf32x3(const struct gm *g, const struct knob_set *k, char *why, size_t whylen) {
  if (!pow2(k->bm) || !pow2(k->bn) || k->bm < 16 || k->bn < 16)
    return refuse(why, whylen, "BM=%d, BN=%d: tile sides must be powers of two >= 16", k->bm,
                  k->bn);
  if (!pow2(k->tm) || !pow2(k->tn) || k->tm < 2 || k->tn < 2 || k->bm % (8 * k->tm) != 0 ||
      k->bn % (4 * k->tn) != 0)
    return refuse(why, whylen,
                  "tf32x3: TM=%d, TN=%d must be powers of two >= 2 with BM %% "
                  "(8*TM) == 0 and BN %% (4*TN) == 0 (warp tile 8*TM x 4*TN)",
                  k->tm, k->tn);
  if (k->bk < 8 || k->bk % 8 != 0)
    return refuse(why, whylen, "tf32x3: BK=%d must be a multiple of 8 (the mma k)", k->bk);
  if (k->stages < 2)
    return refuse(why, whylen, "tf32x3 pipelines with cp.async: STAGES must be >= 2");
  struct layout L;
  derive_tf32(g, k, &L);
  if (L.nt < 32 || L.nt > 1024)
    return refuse(why, whylen, "(BM/TM)*(BN/TN) = %d threads: must be in [32, 1024]", L.nt);
  if (L.smem > SMEM_LIMIT)
    return refuse(why, whylen, "shared memory %lld bytes exceeds 227 KiB", L.smem);
  if (k->stages > L.nk)
    return refuse(why, whylen, "STAGES=%d exceeds the %lld K steps of BK=%d", k->stages, L.nk,
                  k->bk);
  int cap;
  if (check_regs_fit(k, &L, est_regs_tf32(k), true, &cap, why, whylen) != 0)
    return -1;
  int split = k->split ? k->split : 1;
  /* Predicated edge tiles and split-K address math do not fit the 128 registers of two
   * blocks per SM: NVRTC spilled 24-244 bytes (8205x5921x2949, and SPLIT=4). */
  bool even = g->m % k->bm == 0 && g->n % k->bn == 0 && g->k % k->bk == 0;
  if ((!even || split > 1) && (cap <= 128 || k->bk > 16))
    return refuse(why, whylen,
                  "the 3xTF32 kernel spills with %d-register threads (MINB=%d, %d threads) "
                  "or BK=%d > 16 when tiles do not divide the problem (%lldx%lldx%lld by "
                  "%dx%dx%d) or K is split (SPLIT=%d)",
                  cap, k->minb, L.nt, k->bk, g->m, g->n, g->k, k->bm, k->bn, k->bk, split);
  if (split > 1 && (split - 1) * L.kchunk >= g->k)
    return refuse(why, whylen, "SPLIT=%d leaves empty K slices (K=%lld, BK=%d)", split, g->k,
                  k->bk);
  if (g->batch * split > 65535)
    return refuse(why, whylen, "batch %lld x SPLIT %d exceeds the grid's z limit", g->batch, split);
  if (split > 1 && split * g->rows * g->n * 4 > (4LL << 30))
    return refuse(why, whylen, "SPLIT=%d: the partials buffer would exceed 4 GiB", split);
  return 0;
}

static int generate_tf32x3(const struct gm *g, const struct knob_set *k, json_t *launches,
                           json_t *buffers, struct layout *L) {
  derive_tf32(g, k, L);
  main_launches(g, k, L, launches, buffers);
  return 0;
}

const struct builtin_family builtin_family_gemm = {
    .name = "gemm",
    .match = gemm_match,
    .defaults = gemm_defaults,
    .check = gemm_check,
    .generate = gemm_generate,
};
