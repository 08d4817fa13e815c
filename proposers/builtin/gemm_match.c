/* The GEMM family's matcher: walks the profiled FX graph node by node, tracking what each
 * node evaluates to, finds the one matmul (or diag(a) @ B, or an einsum read by
 * gemm_einsum.c) and its operands, and leaves the stages after it to gemm_stage_match.c.
 * Builds the match schema of gemm.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm.h"
#include "proposers/builtin/gemm_internal.h"

int mt_fail(struct matcher *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->why, m->whylen, fmt, ap);
  va_end(ap);
  return -1;
}

int mt_node_index(struct matcher *m, const char *name) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(node_name(json_array_get(m->graph, i)), name) == 0)
      return (int)i;
  return -1;
}

/* The value an argument refers to (a node reference), or NULL for constants. */
struct val *mt_arg_val(struct matcher *m, json_t *arg) {
  const char *ref = json_string_value(json_object_get(arg, "node"));
  if (!json_is_object(arg) || !ref)
    return NULL;
  int i = mt_node_index(m, ref);
  return i < 0 ? NULL : &m->vals[i];
}

/* Counts how many nodes reference each node (through any nesting of args/kwargs). */
static void count_refs(struct matcher *m, json_t *v) {
  if (json_is_object(v)) {
    const char *ref = json_string_value(json_object_get(v, "node"));
    if (ref && json_object_size(v) == 1) {
      int i = mt_node_index(m, ref);
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

int mt_json_ll(json_t *v, long long *ret) {
  if (!json_is_integer(v))
    return -1;
  *ret = json_integer_value(v);
  return 0;
}

int mt_set_var(struct matcher *m, struct val *v, json_t *node, int var, enum vkind kind) {
  long long s[MAX_RANK];
  json_t *shape_src = node;
  if (kind == V_TUPLE)
    shape_src = json_array_get(json_object_get(node, "outputs"), 0);
  int r = graph_shape(shape_src, s);
  if (r < 0)
    return mt_fail(m, "%s: unknown result shape", node_target(node));
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
      if (mt_json_ll(e, &pd) != 0 || pd < -nd || pd >= nd)
        return mt_fail(m, "permute: unsupported dims");
      perm[d] = (int)(pd < 0 ? pd + nd : pd);
    }
  } else {
    long long d0, d1;
    if (mt_json_ll(graph_arg(node, 1, "dim0"), &d0) != 0 ||
        mt_json_ll(graph_arg(node, 2, "dim1"), &d1) != 0 || d0 < -nd || d0 >= nd || d1 < -nd ||
        d1 >= nd)
      return mt_fail(m, "transpose: unsupported dims");
    int a = (int)(d0 < 0 ? d0 + nd : d0), b = (int)(d1 < 0 ? d1 + nd : d1);
    perm[a] = b;
    perm[b] = a;
  }
  for (int d = 0; d < nd - 2; d++)
    if (perm[d] != d)
      return mt_fail(m, "%s of batch dims is not supported", n);
  *ret_swap = nd >= 2 && perm[nd - 2] == nd - 1;
  return 0;
}

static int tensor_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = mt_arg_val(m, graph_arg(node, 0, "input"));
  const char *n = short_name(node);
  if (!x || x->kind != V_TENSOR)
    return mt_fail(m, "unsupported op %s on a non-tensor", node_target(node));
  struct val v = *x;
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (r < 0)
    return mt_fail(m, "%s: unknown shape", node_target(node));
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
      return mt_fail(m, "unsupported attribute %s of a tensor", a ? a : "?");
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
      return mt_fail(m, "%s of a transposed tensor is not supported", n);
  } else if (strcmp(n, "diag") == 0 && x->rank == 1 && !x->trans) {
    v.diag = true;
  } else if (strcmp(n, "size") == 0 || strcmp(n, "dim") == 0) {
    out->kind = V_META;
    return 0;
  } else {
    return mt_fail(m, "unsupported op %s on an input tensor", node_target(node));
  }
  if (swap_last)
    v.trans = !v.trans;
  if (graph_dims_prod(s, 0, r) != graph_dims_prod(x->shape, 0, x->rank) && !v.diag)
    return mt_fail(m, "%s changes the element count", n);
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

/* A tensor value for a param name (Linear's weight or bias). */
static int param_val(struct matcher *m, const char *name, struct val *ret) {
  memset(ret, 0, sizeof *ret);
  ret->kind = V_TENSOR;
  ret->tensor = name;
  int r = tensor_shape(m, name, ret->shape);
  if (r < 0)
    return mt_fail(m, "%s: %s", name, r == -2 ? "not float32" : "unknown tensor");
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
  if (!graph_is_module(node) && strcmp(n, "einsum") == 0)
    return mt_einsum_operands(m, node, &g->a, &g->b);
  if (!graph_is_module(node) &&
      (strcmp(n, "baddbmm") == 0 || strcmp(n, "addbmm") == 0 || strcmp(n, "tensordot") == 0 ||
       strcmp(n, "matrix_power") == 0 || strcmp(n, "mv") == 0 || strcmp(n, "addmv") == 0))
    return mt_fail(m, "unsupported op %s", node_target(node));
  if (graph_is_module(node)) { /* nn.Linear: x @ W^T + b, W stored [out, in] */
    struct val *x = mt_arg_val(m, graph_arg(node, 0, NULL));
    const char *w = graph_module_param(node, "weight"), *b = graph_module_param(node, "bias");
    if (!x || !w)
      return mt_fail(m, "Linear: missing input or weight");
    g->a = *x;
    if (param_val(m, w, &g->b) != 0)
      return -1;
    g->b.trans = true;
    long long t = g->b.shape[0];
    g->b.shape[0] = g->b.shape[1];
    g->b.shape[1] = t;
    if (json_is_true(graph_attr(node, "bias"))) {
      if (!b || param_val(m, b, &g->bias) != 0)
        return mt_fail(m, "Linear: missing bias");
      g->has_bias = true;
    }
    return 0;
  }
  bool lin = strcmp(n, "linear") == 0, addmm = strcmp(n, "addmm") == 0;
  size_t base = addmm ? 1 : 0;
  struct val *a = mt_arg_val(m, graph_arg(node, base, addmm ? "mat1" : "input"));
  struct val *b =
      mt_arg_val(m, graph_arg(node, base + 1, addmm ? "mat2" : lin ? "weight" : "other"));
  if (!a || !b)
    return mt_fail(m, "%s: operands are not tensors", node_target(node));
  g->a = *a;
  g->b = *b;
  if (lin) { /* weight [N,K] used transposed */
    if (g->b.rank != 2)
      return mt_fail(m, "linear: weight of rank %d", g->b.rank);
    g->b.trans = !g->b.trans;
    long long t = g->b.shape[0];
    g->b.shape[0] = g->b.shape[1];
    g->b.shape[1] = t;
  }
  json_t *bias = lin ? graph_arg(node, 2, "bias") : addmm ? graph_arg(node, 0, "input") : NULL;
  if (bias && !json_is_null(bias)) {
    struct val *bv = mt_arg_val(m, bias);
    if (!bv || bv->kind != V_TENSOR || bv->trans || bv->diag)
      return mt_fail(m, "%s: bias is not a plain tensor", node_target(node));
    g->bias = *bv;
    g->has_bias = true;
  }
  if (addmm) {
    json_t *kw = json_object_get(node, "kwargs");
    json_t *beta = json_object_get(kw, "beta"), *alpha = json_object_get(kw, "alpha");
    if ((beta && json_number_value(beta) != 1.0) || (alpha && json_number_value(alpha) != 1.0))
      return mt_fail(m, "addmm with beta/alpha other than 1");
  }
  return 0;
}

/* Fills the match's canonical problem from the operands. */
static int gemm_dims(struct matcher *m, json_t *node, struct gemm_args *g, long long *ret_rows) {
  struct val *a = &g->a, *b = &g->b;
  if (a->kind != V_TENSOR || b->kind != V_TENSOR)
    return mt_fail(m, "%s: operands must be graph tensors", node_target(node));
  if (b->diag || (a->diag && a->rank != 2))
    return mt_fail(m, "%s: diagonal operand not supported here", node_target(node));
  long long M, K, N, Kb, batch = 1, abs = 0, bbs = 0;
  int ra = a->rank, rb = b->rank;
  if (ra < 1 || rb < 1)
    return mt_fail(m, "%s: scalar operand", node_target(node));
  M = ra >= 2 ? a->shape[ra - 2] : 1;
  K = a->shape[ra - 1];
  Kb = rb >= 2 ? b->shape[rb - 2] : b->shape[0];
  N = rb >= 2 ? b->shape[rb - 1] : 1;
  if (K != Kb)
    return mt_fail(m, "%s: inner dims %lld and %lld differ", node_target(node), K, Kb);
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
      return mt_fail(m, "%s: broadcast batch dims are not supported", node_target(node));
    batch = la, abs = M * K, bbs = K * N;
  }
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (r < 0 || graph_dims_prod(s, 0, r) != batch * M * N)
    return mt_fail(m, "%s: result shape does not match %lldx%lldx%lld", node_target(node), M, N, K);
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
    return mt_fail(m, "more than one matmul (%s)", node_target(node));
  if (gemm_operands(m, node, &g) != 0)
    return -1;
  bool diag = g.a.kind == V_TENSOR && g.a.diag;
  if (diag) { /* diag(a) @ B: a row scaling of B */
    if (g.b.rank != 2 || g.b.trans || g.has_bias)
      return mt_fail(m, "diag matmul: only diag(a) @ B with a plain 2-D B");
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
    return mt_fail(m, "out of memory");
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
  return mt_set_var(m, out, node, var, V_VAR);
}

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
          json_object_set_new(mt, "sm_count", json_integer(builtin_sm_count(profile)));
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
    return mt_finish(m, node);
  if (is_gemm_node(node))
    return start_gemm(m, node, v);
  if (mt_has_stage_arg(m, json_object_get(node, "args")) ||
      mt_has_stage_arg(m, json_object_get(node, "kwargs")))
    return mt_stage_op(m, node, v);
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
    rc = mt_fail(&m, "the graph has no output");
  if (rc == 0 && strcmp(json_string_value(json_object_get(m.match, "op")), "row_scale") == 0 &&
      (json_array_size(json_object_get(json_object_get(m.match, "epilogue"), "ops")) != 0 ||
       json_object_get(m.match, "tail") != json_null() ||
       json_object_get(m.match, "expand") != json_null()))
    rc = mt_fail(&m, "diag matmul followed by other ops is not supported");
  if (rc != 0) {
    matcher_clear(&m);
    return -1;
  }
  json_object_set_new(m.match, "rows",
                      json_integer(json_integer_value(json_object_get(m.match, "batch")) *
                                   json_integer_value(json_object_get(m.match, "m"))));
  json_object_set_new(m.match, "cols", json_integer(m.gemm_n));
  json_object_set_new(m.match, "sm_count", json_integer(builtin_sm_count(profile)));
  /* What the Hopper kernel's check reads (MODE wgmma_tf32x3): null when not said. */
  const char *cap = builtin_capability(profile);
  long long optin = builtin_smem_optin(profile);
  json_object_set_new(m.match, "capability", cap ? json_string(cap) : json_null());
  json_object_set_new(m.match, "smem_optin", optin ? json_integer(optin) : json_null());
  set_summary(m.match);
  *ret_match = json_incref(m.match);
  matcher_clear(&m);
  return 1;
}

