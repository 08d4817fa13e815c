/* The attention family's matcher (see attention.h): one scaled_dot_product_attention call,
 * or one MultiheadAttention module call whose attention weights nobody reads. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/attention.h"
#include "proposers/builtin/expr.h"

/* The largest head sizes the kernel keeps in registers and shared memory. */
#define ATT_MAX_HEAD 128


/* True for the targets of the attention calls the family generates. */
static bool is_attention_target(const char *t) {
  return strcmp(t, "scaled_dot_product_attention") == 0 || strcmp(t, "MultiheadAttention") == 0;
}

/* True for an FX getitem call (borrowed node). */
static bool is_getitem(json_t *node) {
  return strcmp(expr_target(node), "getitem") == 0;
}

/* The tensor name a call argument refers to (a placeholder's "input:i" or a parameter's
 * "param:<key>"; borrowed from profile), or NULL. */
static const char *arg_tensor(json_t *profile, json_t *arg) {
  json_t *ref = expr_ref(profile, arg);
  const char *op = json_string_value(json_object_get(ref, "op"));
  if (!op || (strcmp(op, "placeholder") != 0 && strcmp(op, "get_attr") != 0))
    return NULL;
  return json_string_value(json_object_get(ref, "tensor"));
}

/* The shape of the node an argument refers to into dims; its rank, or -1 when it is not
 * a float32 tensor of known shape. */
static int arg_shape(json_t *profile, json_t *arg, long long dims[8]) {
  json_t *ref = expr_ref(profile, arg);
  const char *dt = json_string_value(json_object_get(ref, "dtype"));
  if (!ref || !dt || strcmp(dt, "float32") != 0)
    return -1;
  return graph_shape(ref, dims);
}

/* True when the optional argument is absent, null, or equal to the given false-like
 * value: a boolean false or the number zero. */
static bool arg_off(json_t *v) {
  double x;
  return !v || json_is_null(v) || json_is_false(v) ||
         (!json_is_boolean(v) && expr_number(v, &x) == 0 && x == 0.0);
}

/* The single attention call of the graph (borrowed): 0 with *ret (NULL when there is
 * none), -1 with why when other ops, or several attention calls, share the graph. Its
 * getitem nodes are the only other calls allowed. */
static int find_attention(json_t *profile, json_t **ret, char *why, size_t whylen) {
  json_t *calls = graph_calls(profile), *node, *found = NULL, *other = NULL;
  size_t i, count = 0;
  json_array_foreach(calls, i, node) {
    if (is_attention_target(expr_target(node))) {
      found = node;
      count++;
    } else if (!is_getitem(node) && !other) {
      other = node;
    }
  }
  int rc = 0;
  if (count > 0 && other)
    rc = builtin_refuse(why, whylen, "%s is not attention", expr_target(other));
  else if (count > 1)
    rc = builtin_refuse(why, whylen, "%zu attention calls in one graph are unsupported", count);
  json_decref(calls);
  *ret = rc == 0 ? found : NULL;
  return rc;
}

/* The match fields every op has (caller owns), or NULL when out of memory. */
static json_t *match_common(const char *op, const char *summary, json_t *profile,
                            long long batch, long long heads, long long lq, long long lk,
                            long long d, long long dv, bool causal, double scale) {
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  return json_pack("{s:s, s:s, s:s, s:O, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:f, s:i}",
                   "family", "gemm", "op", op, "summary", summary, "output",
                   json_object_get(out, "name"), "batch", (json_int_t)batch, "heads",
                   (json_int_t)heads, "lq", (json_int_t)lq, "lk", (json_int_t)lk, "d",
                   (json_int_t)d, "dv", (json_int_t)dv, "causal", causal, "scale", scale,
                   "sm_count", builtin_sm_count(profile));
}

/* The grid's y dimension (65535 at most) holds the (batch, head) pairs of the attention
 * and, for a MultiheadAttention (proj_rows > 0), the 64-row tiles of its projections. 0,
 * or -1 with why. */
static int check_grid(long long pairs, long long proj_rows, char *why, size_t whylen) {
  if (pairs > 65535 || (proj_rows + 63) / 64 > 65535)
    return builtin_refuse(why, whylen, "attention over %lld (batch, head) pairs and %lld projected "
                               "rows exceeds the grid (65535 blocks in y)", pairs, proj_rows);
  return 0;
}

/* Head sizes the kernel can hold: D and Dv in [1, ATT_MAX_HEAD], Dv even (a row's
 * threads split the output columns). */
static int check_heads(long long d, long long dv, char *why, size_t whylen) {
  if (d < 1 || d > ATT_MAX_HEAD || dv < 2 || dv > ATT_MAX_HEAD || dv % 2 != 0)
    return builtin_refuse(why, whylen,
                  "attention with head sizes %lld and %lld: the generated kernel needs both "
                  "at most %d and an even value size",
                  d, dv, ATT_MAX_HEAD);
  return 0;
}

/* The attn_mask of an SDPA call on q of rank r (the kernel's index space (n, h, row, key)
 * is (B, H, Lq, Lk) for rank 4, (B, Lq, Lk) for rank 3, (Lq, Lk) for rank 2) into m:
 * "mask" (its tensor), "mask_float" (added to the scores; else a boolean, true where a
 * key takes part) and "mask_strides" [n, h, row, key] in elements of the contiguous mask,
 * 0 where it broadcasts. 0, or -1 with why. */
static int add_mask(json_t *profile, json_t *arg, int r, const long long *qs, long long lk,
                    json_t *m, char *why, size_t whylen) {
  json_t *ref = expr_ref(profile, arg);
  const char *name = arg_tensor(profile, arg);
  const char *dt = json_string_value(json_object_get(ref, "dtype"));
  long long ms[8], target[4], stride[4] = {0, 0, 0, 0};
  int mr = ref ? graph_shape(ref, ms) : -1;
  if (!name || !dt || (strcmp(dt, "bool") != 0 && strcmp(dt, "float32") != 0))
    return builtin_refuse(why, whylen, "attn_mask must be a bool or float32 input of the region");
  if (r > 4 || mr < 1 || mr > r)
    return builtin_refuse(why, whylen, "attn_mask with q of rank %d and a mask of rank %d is "
                               "unsupported", r, mr);
  /* target dims as (n, h, row, key); a missing batch or head dim is size 1 */
  target[0] = r >= 3 ? qs[0] : 1;
  target[1] = r == 4 ? qs[1] : 1;
  target[2] = qs[r - 2];
  target[3] = lk;
  long long contiguous = 1;
  for (int i = mr - 1; i >= 0; i--) {
    int t = i - mr + 4; /* right-aligned onto (n, h, row, key) for rank 4 */
    if (r == 3 && t <= 1)
      t = t == 1 ? 0 : -1; /* rank 3: (n, row, key) */
    if (r == 2 && t <= 1)
      t = -1;
    if (t < 0 || (ms[i] != 1 && ms[i] != target[t]))
      return builtin_refuse(why, whylen, "attn_mask does not broadcast to the attention's scores");
    stride[t] = ms[i] == 1 ? 0 : contiguous;
    contiguous *= ms[i];
  }
  json_object_set_new(m, "mask", json_string(name));
  json_object_set_new(m, "mask_float", json_boolean(strcmp(dt, "float32") == 0));
  json_object_set_new(m, "mask_strides", json_pack("[I,I,I,I]", (json_int_t)stride[0],
                                                   (json_int_t)stride[1], (json_int_t)stride[2],
                                                   (json_int_t)stride[3]));
  return 0;
}

/* F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p=0, is_causal, scale,
 * enable_gqa=False) on float32 tensors [..., L, D] with equal batch dims. */
static int match_sdpa(json_t *profile, json_t *node, json_t **ret_match, char *why,
                      size_t whylen) {
  json_t *mask = expr_arg(node, 3, "attn_mask");
  if (!arg_off(expr_arg(node, 4, "dropout_p")))
    return builtin_refuse(why, whylen, "scaled_dot_product_attention with dropout is a random op");
  if (!arg_off(expr_arg(node, 7, "enable_gqa")))
    return builtin_refuse(why, whylen, "scaled_dot_product_attention with enable_gqa is unsupported");
  json_t *causal_arg = expr_arg(node, 5, "is_causal");
  if (causal_arg && !json_is_boolean(causal_arg))
    return builtin_refuse(why, whylen, "is_causal must be a constant boolean");
  long long qs[8], ks[8], vs[8];
  const char *names[3];
  int r = arg_shape(profile, expr_arg(node, 0, "query"), qs);
  if (r < 2 || arg_shape(profile, expr_arg(node, 1, "key"), ks) != r ||
      arg_shape(profile, expr_arg(node, 2, "value"), vs) != r)
    return builtin_refuse(why, whylen, "scaled_dot_product_attention needs float32 q, k and v of one "
                               "rank (at least 2)");
  for (int i = 0; i < 3; i++) {
    names[i] = arg_tensor(profile, expr_arg(node, (size_t)i, i == 0 ? "query"
                                                             : i == 1 ? "key" : "value"));
    if (!names[i])
      return builtin_refuse(why, whylen, "scaled_dot_product_attention of a computed value");
  }
  long long batch = graph_dims_prod(qs, 0, r - 2);
  for (int i = 0; i < r - 2; i++)
    if (qs[i] != ks[i] || qs[i] != vs[i])
      return builtin_refuse(why, whylen, "scaled_dot_product_attention with broadcast batch dims is "
                                 "unsupported");
  long long lq = qs[r - 2], d = qs[r - 1], lk = ks[r - 2], dv = vs[r - 1];
  if (ks[r - 1] != d || vs[r - 2] != lk || lq < 1 || lk < 1 || batch < 1)
    return builtin_refuse(why, whylen, "scaled_dot_product_attention with mismatched q, k, v shapes");
  if (check_heads(d, dv, why, whylen) != 0 || check_grid(batch, 0, why, whylen) != 0)
    return -1;
  double scale = 1.0 / sqrt((double)d);
  json_t *sc = expr_arg(node, 6, "scale");
  if (sc && expr_number(sc, &scale) != 0)
    return builtin_refuse(why, whylen, "scaled_dot_product_attention scale must be a constant");
  bool causal = json_is_true(causal_arg);
  char summary[200];
  snprintf(summary, sizeof summary, "attention %lldx%lldx%lld d%lld dv%lld%s%s", batch, lq, lk,
           d, dv, causal ? " causal" : "", mask ? " masked" : "");
  long long heads = r == 4 ? qs[1] : 1;
  json_t *m = match_common("sdpa", summary, profile, batch / heads, heads, lq, lk, d, dv,
                           causal, scale);
  if (m && mask && add_mask(profile, mask, r, qs, lk, m, why, whylen) != 0) {
    json_decref(m);
    return -1;
  }
  if (m)
    json_object_set_new(m, "inputs", json_pack("[s,s,s]", names[0], names[1], names[2]));
  return graph_match_result(m, ret_match, why, whylen);
}

/* The MultiheadAttention variants the family refuses, from the module's attrs; NULL when
 * the module is one it does. */
static const char *mha_refusal(json_t *attrs) {
  double dropout = json_number_value(json_object_get(attrs, "dropout"));
  if (!json_object_get(attrs, "num_heads"))
    return "the profile lacks MultiheadAttention's sizes (an older evaluator)";
  if (!json_is_true(json_object_get(attrs, "qkv_same_embed_dim")))
    return "MultiheadAttention with separate kdim/vdim projections is unsupported";
  if (json_is_true(json_object_get(attrs, "bias_kv")))
    return "MultiheadAttention with bias_k/bias_v is unsupported";
  if (json_is_true(json_object_get(attrs, "add_zero_attn")))
    return "MultiheadAttention with add_zero_attn is unsupported";
  if (dropout > 0.0 && json_is_true(json_object_get(attrs, "training")))
    return "MultiheadAttention with dropout in training mode is a random op";
  return NULL;
}

/* Whether the graph reads only item 0 (the attention output) of the module's tuple. */
static bool only_output_used(json_t *profile, json_t *node) {
  json_t *calls = graph_calls(profile), *c;
  size_t i;
  bool ok = true;
  json_array_foreach(calls, i, c) {
    if (c == node || !is_getitem(c))
      continue;
    json_t *idx = expr_arg(c, 1, NULL);
    const char *self = json_string_value(json_object_get(c, "name"));
    bool of_node = expr_ref(profile, expr_arg(c, 0, NULL)) == node;
    if (of_node && (!json_is_integer(idx) || json_integer_value(idx) != 0) &&
        graph_user_count(profile, self) > 0)
      ok = false;
  }
  json_decref(calls);
  return ok;
}

/* mha(query, key, value, key_padding_mask=None, need_weights, attn_mask=None,
 * average_attn_weights, is_causal=False) in eval (or without dropout), [L, N, E] or
 * batch_first [N, L, E]. */
static int match_mha(json_t *profile, json_t *node, json_t **ret_match, char *why,
                     size_t whylen) {
  json_t *attrs = json_object_get(node, "attrs");
  const char *no = mha_refusal(attrs);
  if (no)
    return builtin_refuse(why, whylen, "%s", no);
  if (!arg_off(expr_arg(node, 3, "key_padding_mask")) || !arg_off(expr_arg(node, 5, "attn_mask")))
    return builtin_refuse(why, whylen, "MultiheadAttention with a mask is unsupported");
  if (!arg_off(expr_arg(node, 7, "is_causal")))
    return builtin_refuse(why, whylen, "MultiheadAttention with is_causal is unsupported");
  if (!only_output_used(profile, node))
    return builtin_refuse(why, whylen, "the attention weights of MultiheadAttention are used");
  long long e = json_integer_value(json_object_get(attrs, "embed_dim"));
  long long heads = json_integer_value(json_object_get(attrs, "num_heads"));
  bool bf = json_is_true(json_object_get(attrs, "batch_first"));
  long long qs[8], ks[8], vs[8];
  if (arg_shape(profile, expr_arg(node, 0, "query"), qs) != 3 ||
      arg_shape(profile, expr_arg(node, 1, "key"), ks) != 3 ||
      arg_shape(profile, expr_arg(node, 2, "value"), vs) != 3)
    return builtin_refuse(why, whylen, "MultiheadAttention needs batched float32 inputs (rank 3)");
  const char *names[3];
  for (int i = 0; i < 3; i++) {
    names[i] = arg_tensor(profile, expr_arg(node, (size_t)i, i == 0 ? "query"
                                                             : i == 1 ? "key" : "value"));
    if (!names[i])
      return builtin_refuse(why, whylen, "MultiheadAttention of a computed value");
  }
  int lax = bf ? 1 : 0, nax = bf ? 0 : 1;
  long long n = qs[nax], lq = qs[lax], lk = ks[lax];
  if (heads < 1 || e < 1 || e % heads != 0 || qs[2] != e || ks[2] != e || vs[2] != e ||
      ks[nax] != n || vs[nax] != n || vs[lax] != lk)
    return builtin_refuse(why, whylen, "MultiheadAttention with mismatched input shapes");
  const char *w_in = graph_module_param(node, "in_proj_weight");
  const char *w_out = graph_module_param(node, "out_proj.weight");
  const char *b_in = graph_module_param(node, "in_proj_bias");
  const char *b_out = graph_module_param(node, "out_proj.bias");
  if (!w_in || !w_out)
    return builtin_refuse(why, whylen, "MultiheadAttention's projection weights are not in the profile");
  long long dh = e / heads;
  if (check_heads(dh, dh, why, whylen) != 0 ||
      check_grid(n * heads, n * (lq > lk ? lq : lk), why, whylen) != 0)
    return -1;
  bool same = strcmp(names[0], names[1]) == 0 && strcmp(names[1], names[2]) == 0;
  char summary[200];
  snprintf(summary, sizeof summary, "multihead attention %lldx%lldx%lld heads %lld d%lld%s",
           n, lq, lk, heads, dh, same ? " self" : "");
  json_t *m = match_common("mha", summary, profile, n, heads, lq, lk, dh, dh, false, 1.0);
  if (m) {
    json_object_set_new(m, "inputs", json_pack("[s,s,s]", names[0], names[1], names[2]));
    json_object_set_new(m, "embed", json_integer(e));
    json_object_set_new(m, "batch_first", json_boolean(bf));
    json_object_set_new(m, "same_input", json_boolean(same));
    json_object_set_new(m, "q_scale", json_real(1.0 / sqrt((double)dh)));
    json_object_set_new(m, "w_in", json_string(w_in));
    json_object_set_new(m, "w_out", json_string(w_out));
    json_object_set_new(m, "b_in", b_in ? json_string(b_in) : json_null());
    json_object_set_new(m, "b_out", b_out ? json_string(b_out) : json_null());
  }
  return graph_match_result(m, ret_match, why, whylen);
}

/* ---- the explicit spelling: softmax(q @ k^T [* c | / c], dim=-1) @ v ---- */

/* True for matmul (function, method or @) and bmm calls; node may be NULL. */
static bool is_matmul(json_t *node) {
  const char *t = expr_target(node);
  return node && (strcmp(t, "matmul") == 0 || strcmp(t, "bmm") == 0);
}

/* Whether node swaps exactly the last two dims of a rank-r value: transpose(-2, -1) in
 * any spelling of the two dims, or a permute that does only that. */
static bool swaps_last_two(json_t *node, int r) {
  const char *t = expr_target(node);
  if (strcmp(t, "transpose") == 0) {
    json_t *a = expr_arg(node, 1, "dim0"), *b = expr_arg(node, 2, "dim1");
    if (!json_is_integer(a) || !json_is_integer(b))
      return false;
    long long x = json_integer_value(a), y = json_integer_value(b);
    x = x < 0 ? x + r : x;
    y = y < 0 ? y + r : y;
    return (x == r - 2 && y == r - 1) || (x == r - 1 && y == r - 2);
  }
  if (strcmp(t, "permute") != 0)
    return false;
  json_t *dims = expr_arg(node, 1, "dims");
  bool listed = json_is_array(dims);
  for (int i = 0; i < r; i++) {
    json_t *d = listed ? json_array_get(dims, (size_t)i) : expr_arg(node, (size_t)i + 1, NULL);
    long long want = i == r - 2 ? r - 1 : i == r - 1 ? r - 2 : i;
    if (!json_is_integer(d))
      return false;
    long long got = json_integer_value(d);
    if ((got < 0 ? got + r : got) != want)
      return false;
  }
  return true;
}

/* The softmax over the last dim of a rank-r value that node is, else false. */
static bool is_last_dim_softmax(json_t *node, int r) {
  const char *t = expr_target(node);
  bool module = graph_is_module(node);
  if (strcmp(t, module ? "Softmax" : "softmax") != 0 || expr_arg(node, 99, "dtype"))
    return false;
  json_t *dim = module ? graph_attr(node, "dim") : expr_arg(node, 1, "dim");
  long long d = json_is_integer(dim) ? json_integer_value(dim) : -99;
  return d == -1 || d == r - 1;
}

/* The chain's nodes as the walk back from the output finds them. */
struct spelled {
  json_t *pv, *softmax, *scale_op, *qk, *kt; /* scale_op and kt may be NULL */
  double scale;
};

/* A scale of the scores: node = x * c, c * x or x / c with c a number. Sets *ret_x and
 * multiplies *scale. */
static bool scale_of(json_t *profile, json_t *node, json_t **ret_x, double *scale) {
  const char *t = expr_target(node);
  bool mul = strcmp(t, "mul") == 0, div = strcmp(t, "truediv") == 0 || strcmp(t, "div") == 0;
  if (!mul && !div)
    return false;
  json_t *a = expr_arg(node, 0, "input"), *b = expr_arg(node, 1, "other");
  double c;
  if (expr_ref(profile, a) && expr_number(b, &c) == 0 && (mul || c != 0.0)) {
    *ret_x = expr_ref(profile, a);
    *scale *= mul ? c : 1.0 / c;
    return true;
  }
  if (mul && expr_ref(profile, b) && expr_number(a, &c) == 0) {
    *ret_x = expr_ref(profile, b);
    *scale *= c;
    return true;
  }
  return false;
}

/* Walks back from root through matmul(softmax(scale(matmul(q, kt))), v); 0 with *sp
 * filled, or -1 when root is not that chain. */
static int walk_spelled(json_t *profile, json_t *root, int r, struct spelled *sp) {
  *sp = (struct spelled){.pv = root, .scale = 1.0};
  if (!is_matmul(root))
    return -1;
  sp->softmax = expr_ref(profile, expr_arg(root, 0, "input"));
  if (!sp->softmax || !is_last_dim_softmax(sp->softmax, r))
    return -1;
  json_t *x = expr_ref(profile, expr_arg(sp->softmax, 0, "input"));
  while (x && !is_matmul(x)) {
    json_t *inner;
    if (!scale_of(profile, x, &inner, &sp->scale) || sp->scale_op)
      return -1;
    sp->scale_op = x;
    x = inner;
  }
  if (!x)
    return -1;
  sp->qk = x;
  json_t *k = expr_ref(profile, expr_arg(x, 1, "other"));
  if (k && graph_is_call(k)) {
    if (!swaps_last_two(k, r))
      return -1;
    sp->kt = k;
  }
  return 0;
}

/* Every call of the graph is one of the chain's nodes. */
static bool only_chain(json_t *profile, const struct spelled *sp) {
  json_t *calls = graph_calls(profile);
  size_t n = json_array_size(calls);
  json_decref(calls);
  return n == 3u + (sp->scale_op ? 1u : 0u) + (sp->kt ? 1u : 0u);
}

/* softmax(q @ k^T * scale, dim=-1) @ v with q, k, v inputs of the region (k^T either
 * transposed inside it, or read as a [..., D, Lk] input). 0 when the graph is not that
 * chain, 1 on a match, -1 when it is but the shapes are not ones the kernel does. */
static int match_spelled(json_t *profile, json_t *root, json_t **ret_match, char *why,
                         size_t whylen) {
  long long os[8], qs[8], ks[8], vs[8];
  int r = root ? graph_shape(root, os) : -1;
  struct spelled sp;
  const char *odt = json_string_value(json_object_get(root, "dtype"));
  if (r < 2 || walk_spelled(profile, root, r, &sp) != 0 || !only_chain(profile, &sp))
    return 0;
  if (!odt || strcmp(odt, "float32") != 0)
    return builtin_refuse(why, whylen, "attention must make one float32 output");
  json_t *q_arg = expr_arg(sp.qk, 0, "input"), *v_arg = expr_arg(sp.pv, 1, "other");
  json_t *k_arg = sp.kt ? expr_arg(sp.kt, 0, "input") : expr_arg(sp.qk, 1, "other");
  const char *names[3] = {arg_tensor(profile, q_arg), arg_tensor(profile, k_arg),
                          arg_tensor(profile, v_arg)};
  if (!names[0] || !names[1] || !names[2])
    return builtin_refuse(why, whylen, "attention of a computed value");
  if (arg_shape(profile, q_arg, qs) != r || arg_shape(profile, k_arg, ks) != r ||
      arg_shape(profile, v_arg, vs) != r)
    return builtin_refuse(why, whylen, "attention needs float32 q, k and v of one rank");
  bool k_t = sp.kt == NULL; /* k read as the [..., D, Lk] input itself */
  long long lq = qs[r - 2], d = qs[r - 1], lk = k_t ? ks[r - 1] : ks[r - 2];
  long long kd = k_t ? ks[r - 2] : ks[r - 1], dv = vs[r - 1];
  for (int i = 0; i < r - 2; i++)
    if (qs[i] != ks[i] || qs[i] != vs[i])
      return builtin_refuse(why, whylen, "attention with broadcast batch dims is unsupported");
  if (kd != d || vs[r - 2] != lk || os[r - 2] != lq || os[r - 1] != dv)
    return builtin_refuse(why, whylen, "attention with mismatched q, k, v shapes");
  long long batch = graph_dims_prod(qs, 0, r - 2);
  if (check_heads(d, dv, why, whylen) != 0 || check_grid(batch, 0, why, whylen) != 0)
    return -1;
  char summary[200];
  snprintf(summary, sizeof summary, "attention %lldx%lldx%lld d%lld dv%lld (matmul, softmax, "
           "matmul)", batch, lq, lk, d, dv);
  json_t *m = match_common("sdpa", summary, profile, batch, 1, lq, lk, d, dv, false, sp.scale);
  if (m) {
    json_object_set_new(m, "inputs", json_pack("[s,s,s]", names[0], names[1], names[2]));
    json_object_set_new(m, "k_transposed", json_boolean(k_t));
  }
  return graph_match_result(m, ret_match, why, whylen);
}

int attention_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  json_t *node = NULL, *root = expr_output_node(profile);
  if (find_attention(profile, &node, why, whylen) != 0)
    return -1;
  if (!node) {
    why[0] = 0;
    int rc = match_spelled(profile, root, ret_match, why, whylen);
    if (rc == 0)
      snprintf(why, whylen, "no attention in the graph");
    return rc;
  }
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  const char *odt = json_string_value(json_object_get(out, "dtype"));
  if (json_array_size(json_object_get(profile, "outputs")) != 1 || !odt ||
      strcmp(odt, "float32") != 0)
    return builtin_refuse(why, whylen, "attention must make one float32 output");
  if (strcmp(expr_target(node), "MultiheadAttention") == 0) {
    bool item0 = root && is_getitem(root) && expr_ref(profile, expr_arg(root, 0, NULL)) == node &&
                 json_integer_value(expr_arg(root, 1, NULL)) == 0;
    if (!item0)
      return builtin_refuse(why, whylen, "MultiheadAttention must end the graph with its output [0]");
    return match_mha(profile, node, ret_match, why, whylen);
  }
  if (root != node)
    return builtin_refuse(why, whylen, "scaled_dot_product_attention must end the graph");
  return match_sdpa(profile, node, ret_match, why, whylen);
}
