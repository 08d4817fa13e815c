/* The builtin reduction family: matcher, knobs and generator (see reduction.h), and the
 * canonical [outer, R, inner] helpers the softmax and norm families share. One concept
 * (a family), a little longer than 800 lines with the shared helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/expr.h"
#include "proposers/builtin/reduction.h"


/* ---- canonical shapes ---- */

int reduce_canonical(const json_t *shape, const json_t *dims, long long ret[3],
                     int *ret_first, int *ret_last, char *why, size_t whylen) {
  int rank = (int)json_array_size(shape);
  bool picked[9] = {false};
  size_t n = json_is_array(dims) ? json_array_size(dims) : dims ? 1 : 0;
  if (!json_is_array(shape) || rank > 8) {
    snprintf(why, whylen, "the reduced tensor has no usable shape");
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *d = json_is_array(dims) ? json_array_get(dims, i) : dims;
    long long v = json_integer_value(d);
    if (!json_is_integer(d) || v < -(rank ? rank : 1) || v >= (rank ? rank : 1)) {
      snprintf(why, whylen, "reduction dim is not an integer in range for rank %d", rank);
      return -1;
    }
    v = v < 0 ? v + (rank ? rank : 1) : v;
    if (rank == 0)
      continue;
    if (picked[v]) {
      snprintf(why, whylen, "reduction dim %lld is repeated", v);
      return -1;
    }
    picked[v] = true;
  }
  int first = -1, last = -1;
  for (int d = 0; d < rank; d++)
    if (picked[d] || n == 0) {
      if (first < 0)
        first = d;
      else if (last != d - 1) {
        snprintf(why, whylen, "the reduced dims are not one contiguous group");
        return -1;
      }
      last = d;
    }
  long long r[3] = {1, 1, 1};
  for (int d = 0; d < rank; d++) {
    long long sz = json_integer_value(json_array_get(shape, d));
    r[first < 0 || d < first ? 0 : d <= last ? 1 : 2] *= sz;
  }
  memcpy(ret, r, sizeof r);
  *ret_first = first < 0 ? 0 : first;
  *ret_last = last < 0 ? -1 : last;
  return 0;
}

bool reduce_is_reduction_op(const char *t) {
  static const char *const ops[] = {"sum", "mean", "prod", "amax", "amin", "argmax", "argmin",
                                    "max", "min", "norm", "vector_norm", "linalg_vector_norm",
                                    "linalg_norm", "logsumexp", "var",
                                    "std", "nansum", "nanmean", "median", "count_nonzero",
                                    "all", "any", "aminmax", "var_mean", "std_mean"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(t, ops[i]) == 0)
      return true;
  return false;
}

const char *reduce_row_mapping(long long r) {
  return r <= 1024 ? "warp" : "block";
}

/* ---- matching ---- */

bool reduce_node_is_reduction(json_t *node) {
  const char *t = expr_target(node);
  if (!reduce_is_reduction_op(t))
    return false;
  if (strcmp(t, "max") == 0 || strcmp(t, "min") == 0)
    return !json_object_get(expr_arg(node, 1, "other"), "node");
  return true;
}

/* The norm op for a p / ord argument: 1, 2 / "fro" / null (default 2), inf. */
static const char *norm_op(const json_t *p) {
  double v;
  if (!p || (json_is_string(p) && strcmp(json_string_value(p), "fro") == 0))
    return "norm_l2";
  if (expr_number(p, &v) != 0)
    return NULL;
  return v == 1.0 ? "norm_l1" : v == 2.0 ? "norm_l2" : isinf(v) && v > 0 ? "norm_inf" : NULL;
}

static int norm_spec(json_t *node, struct reduce_call *s, char *why, size_t whylen) {
  const char *full = json_string_value(json_object_get(node, "target"));
  const char *t = expr_target(node);
  bool linalg = (full && strstr(full, "linalg") != NULL) || strncmp(t, "linalg_", 7) == 0;
  bool vector = strcmp(t, "vector_norm") == 0 || strcmp(t, "linalg_vector_norm") == 0;
  json_t *p = expr_arg(node, 1, vector || linalg ? "ord" : "p");
  s->dims = expr_arg(node, 2, "dim");
  s->keepdim = json_is_true(expr_arg(node, 3, "keepdim"));
  /* torch.linalg.norm with an ord over two dims is a matrix norm. */
  if (linalg && !vector && p && json_array_size(s->dims) == 2) {
    snprintf(why, whylen, "matrix norms (linalg.norm with ord over two dims) are unsupported");
    return -1;
  }
  s->op = norm_op(p);
  if (!s->op)
    snprintf(why, whylen, "norm: only p = 1, 2, 'fro' and inf are supported");
  return s->op ? 0 : -1;
}

int reduce_call_of(json_t *node, struct reduce_call *s, char *why, size_t whylen) {
  const char *t = expr_target(node);
  *s = (struct reduce_call){.op = t};
  json_t *dtype = expr_arg(node, 99, "dtype");
  if (dtype && strcmp(json_string_value(dtype) ? json_string_value(dtype) : "",
                      "torch.float32") != 0) {
    snprintf(why, whylen, "%s with dtype=%s is unsupported", t,
             json_string_value(dtype) ? json_string_value(dtype) : "?");
    return -1;
  }
  if (strcmp(t, "norm") == 0 || strcmp(t, "vector_norm") == 0 ||
      strcmp(t, "linalg_vector_norm") == 0 || strcmp(t, "linalg_norm") == 0)
    return norm_spec(node, s, why, whylen);
  s->dims = expr_arg(node, 1, "dim");
  s->keepdim = json_is_true(expr_arg(node, 2, "keepdim"));
  if (strcmp(t, "amax") == 0 || strcmp(t, "amin") == 0)
    s->op = t[2] == 'a' ? "max" : "min";
  else if ((strcmp(t, "max") == 0 || strcmp(t, "min") == 0) && s->dims)
    s->tuple = true;
  else if (strcmp(t, "sum") != 0 && strcmp(t, "mean") != 0 && strcmp(t, "prod") != 0 &&
           strcmp(t, "argmax") != 0 && strcmp(t, "argmin") != 0 && strcmp(t, "max") != 0 &&
           strcmp(t, "min") != 0) {
    snprintf(why, whylen, "unsupported reduction %s", t);
    return -1;
  }
  return 0;
}

/* The single reduction node of the graph (borrowed); -1 with why when there are several. */
static int find_reduction(json_t *profile, json_t **ret, char *why, size_t whylen) {
  json_t *calls = graph_calls(profile), *found = NULL, *node;
  size_t i, count = 0;
  json_array_foreach(calls, i, node) {
    if (reduce_node_is_reduction(node)) {
      found = node;
      count++;
    }
  }
  json_decref(calls);
  if (count > 1) {
    snprintf(why, whylen, "%zu reductions in one graph are unsupported", count);
    return -1;
  }
  *ret = found;
  return 0;
}

/* The node carrying the reduced value: red itself, or the getitem taking element 0
 * (values) or 1 (indices) of a (values, indices) pair; *ret_index says which. */
static json_t *value_node(json_t *profile, json_t *red, int *ret_index) {
  const char *name = json_string_value(json_object_get(red, "name"));
  json_t *calls = graph_calls(profile), *node, *found = NULL;
  size_t i, users = 0;
  json_array_foreach(calls, i, node) {
    json_t *src = expr_arg(node, 0, NULL);
    const char *ref = json_string_value(json_object_get(src, "node"));
    if (ref && strcmp(ref, name) == 0) {
      users++;
      if (strcmp(expr_target(node), "getitem") == 0 &&
          json_is_integer(json_array_get(json_object_get(node, "args"), 1))) {
        found = node;
        *ret_index = (int)json_integer_value(json_array_get(json_object_get(node, "args"), 1));
      }
    }
  }
  json_decref(calls);
  return users == 1 && found && (*ret_index == 0 || *ret_index == 1) ? found : NULL;
}

/* Targets another family owns (for the reduction family: anything foreign that is not
 * itself a reduction). */
static bool foreign_to_reduction(const char *t) {
  return expr_is_foreign_op(t) && !reduce_is_reduction_op(t);
}

/* The final op name: torch.max/min pairs become max/min or argmax/argmin. */
static const char *final_op(const struct reduce_call *s, int index) {
  if (s->tuple)
    return index == 1 ? (s->op[1] == 'a' ? "argmax" : "argmin") : s->op;
  return s->op;
}

/* The prologue IR (what is reduced) of red's input, with the norm's abs or square. */
static int red_prologue(json_t *profile, json_t *red, const char *op, json_t **ret,
                        char *why, size_t whylen) {
  json_t *in = expr_ref(profile, expr_arg(red, 0, "input"));
  json_t *ir = NULL;
  if (!in) {
    snprintf(why, whylen, "%s has no tensor input", expr_target(red));
    return -1;
  }
  if (expr_build(profile, in, NULL, &ir, why, whylen) != 0)
    return -1;
  if (!expr_all_full(ir)) {
    snprintf(why, whylen, "broadcasting before a reduction is unsupported");
    json_decref(ir);
    return -1;
  }
  int rc = 0;
  if (strcmp(op, "norm_l2") == 0)
    rc = expr_append(ir, "square");
  else if (strcmp(op, "norm_l1") == 0 || strcmp(op, "norm_inf") == 0)
    rc = expr_append(ir, "abs");
  if (rc != 0) {
    json_decref(ir);
    return -1;
  }
  *ret = ir;
  return 0;
}

/* The epilogue IR on the reduced value (bound symbol S), NULL when the value is the
 * output. 0 when it reads no other tensor; 1 when it does (a norm, not a reduction). */
static int red_epilogue(json_t *profile, json_t *root, json_t *val, json_t **ret, char *why,
                        size_t whylen) {
  *ret = NULL;
  if (root == val)
    return 0;
  json_t *bound = json_pack("{s:s}", json_string_value(json_object_get(val, "name")), "S");
  json_t *ir = NULL;
  int rc = expr_build(profile, root, bound, &ir, why, whylen);
  json_decref(bound);
  if (rc != 0)
    return -1;
  if (json_array_size(json_object_get(ir, "leaves")) > 0) {
    json_decref(ir);
    snprintf(why, whylen, "the reduced value is combined with other tensors");
    return 1;
  }
  *ret = ir;
  return 0;
}

/* The match object of reduction red (caller owns): canonical shape from its input, the
 * prologue, and the epilogue (taken over). NULL with why when the output is not the
 * reduced tensor. */
static json_t *red_object(json_t *profile, json_t *red, const struct reduce_call *s,
                          const char *op, json_t *epi, char *why, size_t whylen) {
  json_t *pro = NULL, *in = expr_ref(profile, expr_arg(red, 0, "input"));
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  const char *odt = json_string_value(json_object_get(out, "dtype"));
  bool arg = strncmp(op, "arg", 3) == 0;
  long long c[3];
  int first, last;
  if (red_prologue(profile, red, op, &pro, why, whylen) != 0 ||
      reduce_canonical(json_object_get(in, "shape"), s->dims, c, &first, &last, why,
                       whylen) != 0) {
    json_decref(pro);
    json_decref(epi);
    return NULL;
  }
  if (!odt || strcmp(odt, arg ? "int64" : "float32") != 0 || c[1] >= (1LL << 31) ||
      json_integer_value(json_object_get(out, "numel")) != c[0] * c[2]) {
    snprintf(why, whylen, "%s: the output is not the reduced tensor", op);
    json_decref(pro);
    json_decref(epi);
    return NULL;
  }
  char summary[200];
  snprintf(summary, sizeof summary, "%s over dims %d..%d of [%lld, %lld, %lld]", op, first,
           last, c[0], c[1], c[2]);
  return json_pack("{s:s, s:s, s:s, s:[I,I,I], s:[i,i], s:b, s:O, s:O, s:s, s:o, s:o, s:i}",
                   "family", "reduction", "op", op, "summary", summary, "canonical",
                   (json_int_t)c[0], (json_int_t)c[1], (json_int_t)c[2], "dims", first, last,
                   "keepdim", s->keepdim, "input_shape", json_object_get(in, "shape"), "output",
                   json_object_get(out, "name"), "out_dtype", odt, "prologue", pro, "epilogue",
                   epi ? epi : json_null(), "sm_count", builtin_sm_count(profile));
}

static int red_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  const char *foreign = NULL;
  json_t *red = NULL, *root = expr_output_node(profile);
  if (expr_graph_has(profile, foreign_to_reduction, &foreign)) {
    snprintf(why, whylen, "%s is not a reduction", foreign);
    return 0;
  }
  if (find_reduction(profile, &red, why, whylen) != 0)
    return -1;
  if (!red || !root) {
    snprintf(why, whylen, red ? "reductions need one output" : "no reduction in the graph");
    return 0;
  }
  struct reduce_call s;
  int index = 0;
  if (reduce_call_of(red, &s, why, whylen) != 0)
    return -1;
  json_t *val = s.tuple ? value_node(profile, red, &index) : red;
  if (!val) {
    snprintf(why, whylen, "%s: only one of values or indices may be used", s.op);
    return -1;
  }
  const char *op = final_op(&s, index);
  json_t *epi = NULL;
  int erc = red_epilogue(profile, root, val, &epi, why, whylen);
  if (erc != 0)
    return erc > 0 ? 0 : -1;
  if (strncmp(op, "arg", 3) == 0 && epi) {
    json_decref(epi);
    snprintf(why, whylen, "%s followed by other ops is unsupported", op);
    return -1;
  }
  json_t *m = red_object(profile, red, &s, op, epi, why, whylen);
  if (!m)
    return -1;
  *ret_match = m;
  return 1;
}

/* ---- knobs ---- */

static void red_canon(json_t *match, long long c[3]) {
  for (size_t i = 0; i < 3; i++)
    c[i] = json_integer_value(json_array_get(json_object_get(match, "canonical"), i));
}

static int widest_vec(long long n) {
  return n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}

/* Smallest power of two >= n (n <= 32). */
static int pow2_at_least(long long n) {
  int p = 1;
  while (p < n && p < 32)
    p *= 2;
  return p;
}

/* Whether the rows kernel uses a warp (or sub-warp group) per row. */
static bool red_warp_mapping(json_t *match, const struct knob_set *k) {
  long long c[3];
  red_canon(match, c);
  if (strcmp(k->mode, "warp_per_row") == 0)
    return true;
  if (strcmp(k->mode, "block_per_row") == 0)
    return false;
  return strcmp(reduce_row_mapping(c[1]), "warp") == 0;
}

static void red_defaults(json_t *match, struct knob_set *ret) {
  long long c[3], sms = builtin_sm_count(match);
  red_canon(match, c);
  struct knob_set k = {.block = 256, .rows = 1, .items = 1, .unroll = 1, .split = 1};
  if (c[2] == 1) {
    k.vec = widest_vec(c[1]);
    long long nv = c[1] / k.vec;
    if (strcmp(reduce_row_mapping(c[1]), "warp") == 0) {
      k.rows = 32 / pow2_at_least(nv);
      k.items = nv > 256 ? 8 : nv > 32 ? (int)((nv + 31) / 32) : 1;
    } else {
      k.block = c[1] >= 16384 ? 512 : 256;
      k.items = 4;
      k.unroll = 4;
      /* Too few rows for two blocks per SM: give each row several blocks. */
      long long split = (2 * sms + c[0] - 1) / c[0];
      long long most = nv / ((long long)k.block * k.items * 4);
      split = split > most ? most : split;
      k.split = split > 1024 ? 1024 : split < 1 ? 1 : (int)split;
    }
  } else {
    k.vec = widest_vec(c[2]);
    k.unroll = 8;
    long long threads = c[0] * (c[2] / k.vec);
    long long split = sms * 2048 / (threads ? threads : 1);
    long long most = c[1] / 32;
    split = split > most ? most : split;
    k.split = split > 1024 ? 1024 : split < 1 ? 1 : (int)split;
  }
  *ret = k;
}

static const char *red_mode_refusal(long long inner, const char *mode) {
  static const struct {
    const char *mode, *why;
  } refused[] = {
      {"shuffle", "partials are already combined with warp shuffles"},
      {"idx64", "indices are already 64-bit unless MODE idx32 is set"},
      {"predicated_tail", "every row and column loop is already bounds-checked"},
      {"pad_smem", "no shared-memory tile to pad: shuffles and a 32-entry scratch only"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (strcmp(mode, refused[i].mode) == 0)
      return refused[i].why;
  if (strcmp(mode, "inner_coalesced") == 0)
    return inner > 1 ? "threads already walk the contiguous inner axis when inner > 1"
                     : "inner is 1: rows are contiguous, use warp_per_row or block_per_row";
  bool rows_only = strcmp(mode, "warp_per_row") == 0 || strcmp(mode, "block_per_row") == 0 ||
                   strcmp(mode, "grid_stride") == 0 || strcmp(mode, "persistent") == 0;
  if (rows_only && inner > 1)
    return "inner > 1: the column kernel gives each thread its own output columns";
  if (rows_only || mode[0] == '\0' || strcmp(mode, "idx32") == 0)
    return NULL;
  return "this MODE does not apply to reductions";
}

/* Checks of the rows kernel (inner == 1). */
static int red_check_rows(json_t *match, const struct knob_set *k, const long long c[3],
                          char *why, size_t whylen) {
  bool warp = red_warp_mapping(match, k);
  if (c[1] % k->vec != 0)
    snprintf(why, whylen, "VEC=%d: rows of %lld floats are not %d-byte aligned", k->vec, c[1],
             4 * k->vec);
  else if (warp && (k->rows < 1 || k->rows > 32 || (k->rows & (k->rows - 1)) != 0))
    snprintf(why, whylen, "ROWS=%d: rows per warp must be a power of two up to 32", k->rows);
  else if (!warp && k->rows != 1)
    snprintf(why, whylen, "ROWS=%d: a block reduces one row; ROWS applies to warp_per_row",
             k->rows);
  else if (k->items < 1 || k->items > 16)
    snprintf(why, whylen, "ITEMS=%d: 1 to 16 vectors per thread per batch", k->items);
  else if (k->split > c[1] / k->vec)
    snprintf(why, whylen, "SPLIT=%d: rows have only %lld vectors", k->split, c[1] / k->vec);
  else
    return 0;
  return -1;
}

static int red_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  long long c[3];
  red_canon(match, c);
  if (cg_check_common(k, why, whylen) != 0)
    return -1;
  const char *refusal = red_mode_refusal(c[2], k->mode);
  long long numel = c[0] * c[1] * c[2];
  if (refusal)
    snprintf(why, whylen, "MODE %s: %s", k->mode, refusal);
  else if (k->unroll < 1 || k->unroll > 16 || k->unroll * k->vec > 64)
    snprintf(why, whylen, "UNROLL=%d: 1 to 16 accumulators, at most 64 floats with VEC=%d",
             k->unroll, k->vec);
  else if (k->split < 1 || k->split > 1024)
    snprintf(why, whylen, "SPLIT=%d: 1 to 1024 slices per row", k->split);
  else if (strcmp(k->mode, "idx32") == 0 && numel >= (1LL << 31) - 65536)
    snprintf(why, whylen, "MODE idx32: %lld input elements need 64-bit indices", numel);
  else if (c[2] == 1)
    return red_check_rows(match, k, c, why, whylen);
  else if (c[2] % k->vec != 0)
    snprintf(why, whylen, "VEC=%d: inner length %lld is not a multiple of %d", k->vec, c[2],
             k->vec);
  else if (k->rows != 1)
    snprintf(why, whylen, "ROWS=%d: the column kernel has no rows per block", k->rows);
  else if (k->items != 1)
    snprintf(why, whylen, "ITEMS=%d: the column kernel batches UNROLL rows per thread; use "
             "UNROLL", k->items);
  else if (k->split > c[1])
    snprintf(why, whylen, "SPLIT=%d: only %lld rows to split", k->split, c[1]);
  else
    return 0;
  return -1;
}

/* ---- generation ---- */

/* The load function of the reduced values: ofg_in_vec(i, ..., x) reads VEC elements at the
 * flat input index i through the prologue. */
static void red_loader(const json_t *pro, struct cg_buf *b) {
  size_t n = json_array_size(json_object_get(pro, "leaves"));
  cg_printf(b, "__device__ __forceinline__ void ofg_in_vec(ofg_i i, OFG_IN_PARAMS, float* x) {\n");
  for (size_t l = 0; l < n; l++) {
    const char *dt = json_string_value(
        json_object_get(json_array_get(json_object_get(pro, "leaves"), l), "dtype"));
    if (strcmp(dt, "float32") == 0)
      cg_printf(b, "  float a%zu[VEC];\n  ofg_ldv(p%zu + i, a%zu);\n", l, l, l);
  }
  cg_printf(b, "#pragma unroll\n  for (int k = 0; k < VEC; k++) x[k] = ofg_pre(");
  for (size_t l = 0; l < n; l++) {
    const char *dt = json_string_value(
        json_object_get(json_array_get(json_object_get(pro, "leaves"), l), "dtype"));
    if (strcmp(dt, "float32") == 0)
      cg_printf(b, "%sa%zu[k]", l ? ", " : "", l);
    else
      cg_printf(b, "%s(float)p%zu[i + k]", l ? ", " : "", l);
  }
  cg_printf(b, ");\n}\n");
}

/* The leaf pointers as OFG_IN_PARAMS / OFG_IN_ARGS. */
static void red_params(const json_t *pro, struct cg_buf *b) {
  size_t n = json_array_size(json_object_get(pro, "leaves"));
  cg_printf(b, "#define OFG_IN_PARAMS ");
  for (size_t l = 0; l < n; l++) {
    const char *dt = json_string_value(
        json_object_get(json_array_get(json_object_get(pro, "leaves"), l), "dtype"));
    cg_printf(b, "%sconst %s* __restrict__ p%zu", l ? ", " : "", expr_ctype(dt), l);
  }
  cg_printf(b, "\n#define OFG_IN_ARGS ");
  for (size_t l = 0; l < n; l++)
    cg_printf(b, "%sp%zu", l ? ", " : "", l);
  cg_printf(b, "\n");
}

/* Whether ofg_reduce_finish combines the SPLIT partials of an output with a warp (few
 * outputs: at most 64 per SM) rather than a thread. */
static bool red_finish_warp(json_t *match, long long nout) {
  return nout <= (long long)builtin_sm_count(match) * 64;
}

static char *red_fragment(json_t *match, const struct knob_set *k) {
  long long c[3];
  red_canon(match, c);
  const char *op = json_string_value(json_object_get(match, "op"));
  const char *kind = strcmp(op, "mean") == 0 || strcmp(op, "norm_l1") == 0 ||
                             strcmp(op, "norm_l2") == 0 ? "SUM"
                     : strcmp(op, "norm_inf") == 0 ? "MAX"
                     : strcmp(op, "sum") == 0 ? "SUM"
                     : strcmp(op, "prod") == 0 ? "PROD"
                     : strcmp(op, "max") == 0 ? "MAX"
                     : strcmp(op, "min") == 0 ? "MIN"
                     : strcmp(op, "argmax") == 0 ? "ARGMAX" : "ARGMIN";
  long long nv = c[1] / k->vec;
  struct cg_buf b = {0};
  cg_define_ll(&b, "OFG_OUTER", c[0]);
  cg_define_ll(&b, "OFG_R", c[1]);
  cg_define_ll(&b, "OFG_INNER", c[2]);
  cg_define_ll(&b, "OFG_NOUT", c[0] * c[2]);
  cg_define_ll(&b, "OFG_CHUNKV", (nv + k->split - 1) / k->split);
  cg_define_ll(&b, "OFG_CHUNKR", (c[1] + k->split - 1) / k->split);
  cg_printf(&b, "#define OFG_GROUP %d\n#define OFG_KIND_%s 1\n#define OFG_OUT_T %s\n",
            red_warp_mapping(match, k) ? 32 / k->rows : k->block, kind,
            strncmp(op, "arg", 3) == 0 ? "long long" : "float");
  if (strcmp(op, "mean") == 0)
    cg_printf(&b, "#define OFG_MEAN 1\n");
  if (strcmp(op, "norm_l2") == 0)
    cg_printf(&b, "#define OFG_POST_SQRT 1\n");
  if (red_finish_warp(match, c[0] * c[2]))
    cg_printf(&b, "#define OFG_FINISH_WARP 1\n");
  const json_t *pro = json_object_get(match, "prologue");
  const json_t *epi = json_object_get(match, "epilogue");
  const char *sym = "S";
  red_params(pro, &b);
  if (expr_emit(pro, "ofg_pre", NULL, 0, false, &b) != 0 ||
      (json_is_object(epi) && expr_emit(epi, "ofg_post", &sym, 1, false, &b) != 0)) {
    cg_free(&b);
    return NULL;
  }
  if (!json_is_object(epi))
    cg_printf(&b, "__device__ __forceinline__ float ofg_post(float B_S) { return B_S; }\n");
  red_loader(pro, &b);
  return cg_take(&b);
}

static json_t *launch(const char *kernel, long long gx, long long gy, int block, json_t *args) {
  return json_pack("{s:s, s:[I,I,i], s:[i,i,i], s:i, s:o}", "kernel", kernel, "grid",
                   (json_int_t)(gx < 1 ? 1 : gx), (json_int_t)gy, 1, "block", block, 1, 1,
                   "shared_bytes", 0, "args", args);
}

/* Blocks of the rows kernel: one per tile of rows, or a capped grid that loops. */
static long long red_rows_grid(json_t *match, const struct knob_set *k, long long items) {
  int rpb = red_warp_mapping(match, k) ? k->block / (32 / k->rows) : 1;
  long long tiles = (items + rpb - 1) / rpb;
  int per_sm = 2048 / k->block > 32 ? 32 : 2048 / k->block;
  long long sms = builtin_sm_count(match);
  long long cap = strcmp(k->mode, "grid_stride") == 0  ? sms * per_sm * 4
                  : strcmp(k->mode, "persistent") == 0 ? sms * per_sm
                                                       : tiles;
  return tiles < cap ? tiles : cap;
}

static json_t *red_plan(json_t *match, const struct knob_set *k) {
  long long c[3];
  red_canon(match, c);
  bool arg = strcmp(json_string_value(json_object_get(match, "out_dtype")), "int64") == 0;
  const json_t *out = json_object_get(match, "output");
  long long nout = c[0] * c[2];
  json_t *args = json_array(), *buffers = json_array(), *launches = json_array();
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(json_object_get(match, "prologue"), "leaves"), i, l)
    json_array_append_new(args, json_pack("{s:O}", "tensor", json_object_get(l, "tensor")));
  json_array_append_new(args, json_pack("{s:O}", "tensor", out));
  if (k->split > 1) {
    json_array_append_new(buffers, json_pack("{s:s, s:I}", "name", "pv", "bytes",
                                             (json_int_t)(4 * k->split * nout)));
    json_array_append_new(args, json_pack("{s:s}", "buffer", "pv"));
    if (arg) {
      json_array_append_new(buffers, json_pack("{s:s, s:I}", "name", "pi", "bytes",
                                               (json_int_t)(4 * k->split * nout)));
      json_array_append_new(args, json_pack("{s:s}", "buffer", "pi"));
    }
  }
  if (c[2] == 1)
    json_array_append_new(launches, launch("ofg_reduce_rows",
                                           red_rows_grid(match, k, c[0] * k->split), 1,
                                           k->block, args));
  else
    json_array_append_new(launches,
                          launch("ofg_reduce_cols",
                                 (c[0] * (c[2] / k->vec) + k->block - 1) / k->block, k->split,
                                 k->block, args));
  if (k->split > 1) {
    json_t *fargs = arg ? json_pack("[{s:s}, {s:s}, {s:O}]", "buffer", "pv", "buffer", "pi",
                                    "tensor", out)
                        : json_pack("[{s:s}, {s:O}]", "buffer", "pv", "tensor", out);
    long long per = red_finish_warp(match, nout) ? k->block / 32 : k->block;
    json_array_append_new(launches, launch("ofg_reduce_finish", (nout + per - 1) / per, 1,
                                           k->block, fargs));
  }
  return json_pack("{s:o, s:o}", "buffers", buffers, "launches", launches);
}

static int red_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                        char *why, size_t whylen) {
  if (red_check(match, k, why, whylen) != 0)
    return -1;
  char *frag = red_fragment(match, k);
  char *src = frag ? cg_source("reduce_rows.cu", frag) : NULL;
  int rc = cg_candidate(src, k, src ? red_plan(match, k) : NULL,
                        "reduction: could not generate the candidate (out of memory)",
                        ret_candidate, why, whylen);
  free(frag);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_reduction = {
    .name = "reduction",
    .match = red_match,
    .defaults = red_defaults,
    .check = red_check,
    .generate = red_generate,
};

/* ---- layouts of the row-wise families ---- */

#define ROW_REG_FLOATS 64 /* floats one thread may cache in registers */

static int row_resolve_cols(const long long c[3], const struct knob_set *k,
                            struct row_layout *L, char *why, size_t whylen) {
  L->cols = true;
  L->group = 1;
  L->cl = 1;
  bool reg = strcmp(k->mode, "cached_row") == 0 || c[1] * k->vec <= ROW_REG_FLOATS;
  L->path = reg ? ROW_PATH_REG : ROW_PATH_STREAM;
  if (c[2] % k->vec != 0)
    snprintf(why, whylen, "VEC=%d: inner length %lld is not a multiple of %d", k->vec, c[2],
             k->vec);
  else if (strcmp(k->mode, "warp_per_row") == 0 || strcmp(k->mode, "block_per_row") == 0)
    snprintf(why, whylen, "MODE %s: inner > 1, threads walk the contiguous inner axis",
             k->mode);
  else if (strcmp(k->mode, "smem_row") == 0)
    snprintf(why, whylen, "MODE smem_row: the column kernel keeps its column in registers "
             "or re-reads it; nothing to stage in shared memory");
  else if (reg && c[1] * k->vec > ROW_REG_FLOATS)
    snprintf(why, whylen, "MODE cached_row: %lld rows x VEC=%d exceed %d registers per "
             "thread", c[1], k->vec, ROW_REG_FLOATS);
  else if (k->rows != 1 || k->split != 1 || k->items != 1)
    snprintf(why, whylen, "ROWS, SPLIT and ITEMS apply to rows (inner == 1); the column "
             "kernel uses UNROLL");
  else if (k->unroll < 1 || k->unroll > 16 || (reg && k->unroll != 1))
    snprintf(why, whylen, "UNROLL=%d: %s", k->unroll,
             reg ? "the cached column's loops are fully unrolled" : "1 to 16");
  else
    return 0;
  return -1;
}

/* The path of a row chunk when no MODE forces one. */
static enum row_path row_auto_path(const struct row_layout *L, int vec) {
  if (L->multi)
    return ROW_PATH_STREAM;
  if (L->nvt <= 8 && L->nvt * vec <= 32)
    return ROW_PATH_REG;
  if ((long long)L->rpb * L->chunkv * vec * 4 <= ROW_SMEM_LIMIT)
    return ROW_PATH_SMEM;
  return ROW_PATH_STREAM;
}

/* Checks the knobs that depend on the path of a rows layout. */
static int row_check_path(const long long c[3], const struct knob_set *k,
                          const struct row_layout *L, char *why, size_t whylen) {
  /* The cached values plus about 24 registers of addresses and statistics must fit the
   * 64K registers of an SM at this block size (255 at most per thread). */
  int regs = L->nvt * k->vec + 24, allowed = 65536 / k->block > 255 ? 255 : 65536 / k->block;
  if (L->path == ROW_PATH_REG && L->nvt * k->vec > ROW_REG_FLOATS)
    snprintf(why, whylen, "a row chunk of %lld floats needs %d floats per thread in "
             "registers (max %d): raise BLOCK or SPLIT", L->chunkv * k->vec, L->nvt * k->vec,
             ROW_REG_FLOATS);
  else if (L->path == ROW_PATH_REG && regs > allowed)
    snprintf(why, whylen, "a row chunk of %lld floats needs %d floats per thread in "
             "registers and about %d registers; %d threads per block allow %d",
             L->chunkv * k->vec, L->nvt * k->vec, regs, k->block, allowed);
  else if (L->path == ROW_PATH_SMEM && L->smem > ROW_SMEM_LIMIT)
    snprintf(why, whylen, "%lld bytes of shared memory per block exceed %d: raise SPLIT",
             L->smem, ROW_SMEM_LIMIT);
  else if (L->multi && L->path != ROW_PATH_STREAM)
    snprintf(why, whylen, "SPLIT=%d > 8 splits rows over separate launches, which stream "
             "the row; cached rows split over clusters of at most 8", k->split);
  else if (L->path != ROW_PATH_STREAM && k->items != 1)
    snprintf(why, whylen, "ITEMS=%d batches loads of a streamed row; this row is cached "
             "(use VEC or BLOCK)", k->items);
  else if (k->items < 1 || k->items > 16)
    snprintf(why, whylen, "ITEMS=%d: 1 to 16 vectors per batch", k->items);
  else if (k->unroll < 1 || k->unroll > 16 || (L->path == ROW_PATH_REG && k->unroll != 1))
    snprintf(why, whylen, "UNROLL=%d: %s", k->unroll,
             L->path == ROW_PATH_REG ? "the cached row's loops are fully unrolled" : "1 to 16");
  else
    return 0;
  (void)c;
  return -1;
}

int row_layout_resolve(const long long c[3], const struct knob_set *k, struct row_layout *ret,
                       char *why, size_t whylen) {
  struct row_layout L = {0};
  if (c[2] > 1) {
    if (row_resolve_cols(c, k, &L, why, whylen) != 0)
      return -1;
    *ret = L;
    return 0;
  }
  bool force_warp = strcmp(k->mode, "warp_per_row") == 0;
  bool force_block = strcmp(k->mode, "block_per_row") == 0;
  L.warp = force_warp || (!force_block && k->split == 1 && c[1] <= 1024);
  L.group = L.warp ? 32 / (k->rows ? k->rows : 1) : k->block;
  L.rpb = L.warp ? k->block / L.group : 1;
  L.multi = k->split > 8;
  L.cl = k->split > 1 && k->split <= 8 ? k->split : 1;
  if (c[1] % k->vec != 0) {
    snprintf(why, whylen, "VEC=%d: rows of %lld floats are not %d-byte aligned", k->vec, c[1],
             4 * k->vec);
    return -1;
  }
  if (k->split < 1 || k->split > 1024 || k->split > c[1] / k->vec) {
    snprintf(why, whylen, "SPLIT=%d: 1 to 1024 blocks per row, at most one per vector",
             k->split);
    return -1;
  }
  if (L.warp && (k->split > 1 || k->rows < 1 || k->rows > 32 || (k->rows & (k->rows - 1)))) {
    snprintf(why, whylen, k->split > 1 ? "SPLIT=%d splits a row over blocks: use "
                                         "block_per_row" : "ROWS=%d: rows per warp must be a "
                                                           "power of two up to 32",
             k->split > 1 ? k->split : k->rows);
    return -1;
  }
  if (!L.warp && k->rows != 1) {
    snprintf(why, whylen, "ROWS=%d: a block handles one row (chunk); ROWS applies to "
             "warp_per_row", k->rows);
    return -1;
  }
  long long nv = c[1] / k->vec;
  L.chunkv = (nv + k->split - 1) / k->split;
  long long nvt = (L.chunkv + L.group - 1) / L.group;
  L.nvt = nvt > 1 << 20 ? 1 << 20 : (int)nvt;
  if (strcmp(k->mode, "cached_row") == 0)
    L.path = ROW_PATH_REG;
  else if (strcmp(k->mode, "smem_row") == 0)
    L.path = ROW_PATH_SMEM;
  else
    L.path = row_auto_path(&L, k->vec);
  L.smem = L.path == ROW_PATH_SMEM ? (long long)L.rpb * L.chunkv * k->vec * 4 : 0;
  if (row_check_path(c, k, &L, why, whylen) != 0)
    return -1;
  *ret = L;
  return 0;
}

/* Defaults for rows (inner == 1) on a device of sms SMs. */
static void row_defaults_rows(const long long c[3], long long sms, struct knob_set *k) {
  k->vec = widest_vec(c[1]);
  long long nv = c[1] / k->vec, bytes = c[1] * 4;
  if (c[1] <= 1024) {
    int g = pow2_at_least(nv);
    k->rows = 32 / g;
    return;
  }
  if (nv <= 8192 && c[0] >= 2 * sms) {
    k->block = nv <= 2048 ? 256 : nv <= 4096 ? 512 : 1024;
    return;
  }
  if (bytes <= 64 * 1024 && c[0] >= 2 * sms) {
    k->block = 512;
    return;
  }
  long long want = (bytes + 64 * 1024 - 1) / (64 * 1024);
  if (want > 8)
    want = (bytes + 192 * 1024 - 1) / (192 * 1024);
  if (want <= 8 && c[0] * want >= 2 * sms) {
    k->split = (int)want;
    k->block = bytes / want > 96 * 1024 ? 1024 : 512;
    return;
  }
  /* Rows too long for a cluster, or too few rows to fill the GPU: two launches, chunks of
   * about 64 KiB, at least two blocks per SM. */
  long long split = (bytes + 64 * 1024 - 1) / (64 * 1024);
  long long fill = (2 * sms + c[0] - 1) / c[0];
  split = split < fill ? fill : split;
  split = split < 9 ? 9 : split;
  split = split > 1024 ? 1024 : split;
  split = split > nv ? nv : split;
  k->split = (int)split;
  k->block = 512;
  k->items = 4;
}

void row_layout_defaults(const long long c[3], int sm_count, struct knob_set *ret) {
  struct knob_set k = {.block = 256, .vec = 1, .items = 1, .rows = 1, .unroll = 1,
                       .split = 1};
  if (c[2] == 1) {
    row_defaults_rows(c, sm_count, &k);
  } else {
    k.vec = widest_vec(c[2]);
    while (k.vec > 1 && c[1] * k.vec > ROW_REG_FLOATS)
      k.vec /= 2;
    if (c[1] * k.vec > ROW_REG_FLOATS)
      k.unroll = 4;
  }
  *ret = k;
}
