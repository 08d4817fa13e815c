/* The builtin reduction family: matcher, knobs and generator (see reduction.h). The
 * helpers it shares with the norm and softmax families are in reduce_call.c (what a
 * reduction node computes) and row_layout.c (row layouts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/expr.h"
#include "proposers/builtin/reduction.h"

/* ---- matching ---- */

/* The graph's last reduction node into *ret and the one before it, if any, into
 * *ret_inner (borrowed, NULL when absent); -1 with why when there are more than two. */
static int find_reduction(json_t *profile, json_t **ret, json_t **ret_inner, char *why,
                          size_t whylen) {
  json_t *calls = graph_calls(profile), *found = NULL, *inner = NULL, *node;
  size_t i, count = 0;
  json_array_foreach(calls, i, node) {
    if (reduce_node_is_reduction(node)) {
      inner = found;
      found = node;
      count++;
    }
  }
  json_decref(calls);
  if (count > 2) {
    snprintf(why, whylen, "%zu reductions in one graph are unsupported", count);
    return -1;
  }
  *ret = found;
  *ret_inner = inner;
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

/* The prologue IR (what is reduced) of red's input, with the norm's abs or square. bound
 * (borrowed, may be NULL) names the inner reduction's value "S1". */
static int red_prologue(json_t *profile, json_t *red, const char *op, json_t *bound,
                        json_t **ret, char *why, size_t whylen) {
  json_t *in = expr_ref(profile, expr_arg(red, 0, "input"));
  json_t *ir = NULL;
  if (!in) {
    snprintf(why, whylen, "%s has no tensor input", expr_target(red));
    return -1;
  }
  if (expr_build(profile, in, bound, &ir, why, whylen) != 0)
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
 * output. Its other leaves (a bias, a residual) are read at the output's index; that the
 * output has the reduced tensor's size is checked by red_object. 0, or -1 with why. */
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
  *ret = ir;
  return 0;
}

/* What an inner reduction (the first of two) computes for the outer one's prologue. */
struct inner_red {
  json_t *node, *val;  /* borrowed: the reduction and the node carrying its value */
  struct reduce_call call;
  const char *op;
  json_t *pro;         /* owned: what it reduces */
  long long c[3];
};

/* Reads the inner reduction of a nested pair: what it reduces and over which dims, and that
 * its value reaches the outer reduction only elementwise (checked on the outer prologue by
 * red_object). 0, or -1 with why. */
static int red_inner(json_t *profile, json_t *node, struct inner_red *in, char *why,
                     size_t whylen) {
  int index = 0, first, last;
  in->node = node;
  if (reduce_call_of(node, &in->call, why, whylen) != 0)
    return -1;
  in->val = in->call.tuple ? value_node(profile, node, &index) : node;
  in->op = final_op(&in->call, index);
  json_t *x = expr_ref(profile, expr_arg(node, 0, "input"));
  if (!in->val || strncmp(in->op, "arg", 3) == 0 || !x) {
    snprintf(why, whylen, "%s: a reduction feeding another must give its values", in->op);
    return -1;
  }
  return red_prologue(profile, node, in->op, NULL, &in->pro, why, whylen) != 0 ||
                 reduce_canonical(json_object_get(x, "shape"), in->call.dims, in->c, &first,
                                  &last, why, whylen) != 0
             ? -1
             : 0;
}

/* True when operand op of ir is computed from the bound symbol sym. */
static bool uses_symbol(const json_t *ir, const char *op, const char *sym, int depth) {
  if (op[0] == 'B')
    return strcmp(op + 2, sym) == 0;
  if (op[0] != 't' || depth > 300)
    return false;
  const json_t *st = json_array_get(json_object_get(ir, "steps"), strtoul(op + 1, NULL, 10));
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(st, "in"), i, v) {
    if (uses_symbol(ir, json_string_value(v), sym, depth + 1))
      return true;
  }
  return false;
}

/* The match's "inner" object of a nested pair (caller owns; takes over in->pro), after
 * checking that the outer prologue pro reads the inner value elementwise. NULL with why. */
static json_t *inner_object(json_t *profile, json_t *red, struct inner_red *in, json_t *pro,
                            char *why, size_t whylen) {
  json_t *x = expr_ref(profile, expr_arg(red, 0, "input"));
  const char *res = json_string_value(json_object_get(pro, "result"));
  if (expr_numel(json_object_get(x, "shape")) != in->c[0] * in->c[2] ||
      !uses_symbol(pro, res, "S1", 0) || in->c[1] >= (1LL << 31)) {
    snprintf(why, whylen, "%s of %s: the inner result must reach the outer reduction "
             "elementwise", expr_target(red), in->op);
    return NULL;
  }
  json_t *o = json_pack("{s:s, s:[I,I,I], s:o}", "op", in->op, "canonical",
                        (json_int_t)in->c[0], (json_int_t)in->c[1], (json_int_t)in->c[2],
                        "prologue", in->pro);
  in->pro = NULL;
  return o;
}

/* The match object of reduction red (caller owns): canonical shape from its input, the
 * prologue, the epilogue (taken over) and a nested inner reduction (in, may be NULL). NULL
 * with why when the output is not the reduced tensor. */
static json_t *red_object(json_t *profile, json_t *red, const struct reduce_call *s,
                          const char *op, json_t *epi, struct inner_red *inr, char *why,
                          size_t whylen) {
  json_t *pro = NULL, *in = expr_ref(profile, expr_arg(red, 0, "input")), *inner = NULL;
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  const char *odt = json_string_value(json_object_get(out, "dtype"));
  bool arg = strncmp(op, "arg", 3) == 0;
  long long c[3];
  int first, last;
  json_t *bound = inr ? json_pack("{s:s}", json_string_value(json_object_get(inr->val, "name")),
                                  "S1")
                      : NULL;
  int rc = red_prologue(profile, red, op, bound, &pro, why, whylen);
  json_decref(bound);
  if (rc != 0 ||
      reduce_canonical(json_object_get(in, "shape"), s->dims, c, &first, &last, why,
                       whylen) != 0 ||
      (inr && !(inner = inner_object(profile, red, inr, pro, why, whylen)))) {
    json_decref(pro);
    json_decref(epi);
    return NULL;
  }
  if (!odt || strcmp(odt, arg ? "int64" : "float32") != 0 || c[1] >= (1LL << 31) ||
      json_integer_value(json_object_get(out, "numel")) != c[0] * c[2] ||
      (epi && expr_numel(json_object_get(epi, "shape")) != c[0] * c[2])) {
    snprintf(why, whylen, "%s: the output is not the reduced tensor", op);
    json_decref(pro);
    json_decref(epi);
    json_decref(inner);
    return NULL;
  }
  char summary[300];
  int used = 0;
  if (inr)
    used = snprintf(summary, sizeof summary, "%s over [%lld, %lld, %lld], then ", inr->op,
                    inr->c[0], inr->c[1], inr->c[2]);
  snprintf(summary + used, sizeof summary - (size_t)used, "%s over dims %d..%d of [%lld, %lld, "
           "%lld]", op, first, last, c[0], c[1], c[2]);
  json_t *m = json_pack("{s:s, s:s, s:s, s:[I,I,I], s:[i,i], s:b, s:O, s:O, s:s, s:o, s:o, s:i}",
                        "family", "reduction", "op", op, "summary", summary, "canonical",
                        (json_int_t)c[0], (json_int_t)c[1], (json_int_t)c[2], "dims", first,
                        last, "keepdim", s->keepdim, "input_shape", json_object_get(in, "shape"),
                        "output", json_object_get(out, "name"), "out_dtype", odt, "prologue",
                        pro, "epilogue", epi ? epi : json_null(), "sm_count",
                        builtin_sm_count(profile));
  if (m && inner)
    json_object_set_new(m, "inner", inner);
  else
    json_decref(inner);
  return m;
}

static int red_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  const char *foreign = NULL;
  json_t *red = NULL, *root = expr_output_node(profile);
  if (expr_graph_has(profile, foreign_to_reduction, &foreign)) {
    snprintf(why, whylen, "%s is not a reduction", foreign);
    return 0;
  }
  json_t *inner = NULL;
  if (find_reduction(profile, &red, &inner, why, whylen) != 0)
    return -1;
  if (!red || !root) {
    snprintf(why, whylen, red ? "reductions need one output" : "no reduction in the graph");
    return 0;
  }
  struct reduce_call s;
  struct inner_red inr = {0};
  int index = 0;
  json_t *m = NULL, *epi = NULL;
  if (reduce_call_of(red, &s, why, whylen) != 0)
    return -1;
  json_t *val = s.tuple ? value_node(profile, red, &index) : red;
  const char *op = final_op(&s, index);
  if (!val)
    snprintf(why, whylen, "%s: only one of values or indices may be used", s.op);
  else if (inner && red_inner(profile, inner, &inr, why, whylen) != 0)
    ;
  else if (red_epilogue(profile, root, val, &epi, why, whylen) != 0)
    ;
  else if (strncmp(op, "arg", 3) == 0 && epi)
    snprintf(why, whylen, "%s followed by other ops is unsupported", op);
  else
    m = red_object(profile, red, &s, op, epi, inner ? &inr : NULL, why, whylen), epi = NULL;
  json_decref(epi);
  json_decref(inr.pro);
  reduce_call_clear(&inr.call);
  reduce_call_clear(&s);
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
 * flat input index i through the prologue (and, for a nested pair, the inner reduction's
 * value there). */
static void red_loader(const json_t *pro, bool nested, struct cg_buf *b) {
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
  cg_printf(b, "%s);\n}\n", nested ? (n ? ", ofg_inner(i + k, OFG_IN_ARGS)"
                                         : "ofg_inner(i + k, OFG_IN_ARGS)")
                                    : "");
}

/* ofg_inner(j, ...): the inner reduction of a nested pair at element j of its result,
 * reading its input (leaves n<l>) through its own prologue ofg_pre1. */
static int red_inner_fn(const json_t *inner, struct cg_buf *b) {
  const char *op = json_string_value(json_object_get(inner, "op"));
  const json_t *pro = json_object_get(inner, "prologue"), *c = json_object_get(inner, "canonical");
  long long r = json_integer_value(json_array_get(c, 1)), in = json_integer_value(json_array_get(c, 2));
  bool sum = strcmp(op, "sum") == 0 || strcmp(op, "mean") == 0 || strncmp(op, "norm_l", 6) == 0;
  bool max = strcmp(op, "max") == 0 || strcmp(op, "norm_inf") == 0;
  if (expr_emit(pro, "ofg_pre1", NULL, 0, false, b) != 0)
    return -1;
  cg_printf(b, "__device__ __forceinline__ float ofg_inner(ofg_i j, OFG_IN_PARAMS) {\n"
               "  const ofg_i b = j / %lldLL * %lldLL + j %% %lldLL;\n  float acc = %s;\n"
               "  for (ofg_i r = 0; r < %lldLL; r++) {\n    const ofg_i q = b + r * %lldLL;\n"
               "    const float v = ofg_pre1(",
            in, r * in, in, sum ? "0.0f" : strcmp(op, "prod") == 0 ? "1.0f"
                                     : max ? "(-INFINITY)" : "INFINITY", r, in);
  for (size_t l = 0; l < json_array_size(json_object_get(pro, "leaves")); l++)
    cg_printf(b, "%s(float)OFG_LD(n%zu + q)", l ? ", " : "", l);
  char fin[64];
  if (strcmp(op, "mean") == 0)
    snprintf(fin, sizeof fin, "acc / (float)%lld", r);
  else
    snprintf(fin, sizeof fin, "%s", strcmp(op, "norm_l2") == 0 ? "sqrtf(acc)" : "acc");
  cg_printf(b, ");\n    %s;\n  }\n  return %s;\n}\n",
            sum ? "acc += v" : strcmp(op, "prod") == 0 ? "acc *= v"
            : max ? "acc = (v > acc || v != v) ? v : acc" : "acc = (v < acc || v != v) ? v : acc",
            fin);
  return b->failed ? -1 : 0;
}

/* Appends the pointers of ir's leaves named <letter><l>, typed or not, each after sep (or
 * ", " once one has been written: *count counts them). */
static void leaf_list(const json_t *ir, char letter, bool typed, const char *sep, int *count,
                      struct cg_buf *b) {
  const json_t *leaves = json_object_get(ir, "leaves");
  for (size_t l = 0; l < json_array_size(leaves); l++) {
    const char *dt = json_string_value(json_object_get(json_array_get(leaves, l), "dtype"));
    cg_printf(b, "%s", *count || !sep ? ", " : sep);
    if (typed)
      cg_printf(b, "const %s* __restrict__ ", expr_ctype(dt));
    cg_printf(b, "%c%zu", letter, l);
    (*count)++;
  }
}

/* The leaf pointers as OFG_IN_PARAMS / OFG_IN_ARGS (the prologue's p<l>, then a nested
 * inner reduction's n<l>) and OFG_EPI_PARAMS / OFG_EPI_ARGS (the epilogue's e<l>, each
 * with a leading comma). */
static void red_params(json_t *match, struct cg_buf *b) {
  const json_t *pro = json_object_get(match, "prologue");
  const json_t *inner = json_object_get(json_object_get(match, "inner"), "prologue");
  const json_t *epi = json_object_get(match, "epilogue");
  for (int typed = 1; typed >= 0; typed--) {
    int count = 0;
    cg_printf(b, "#define OFG_IN_%s ", typed ? "PARAMS" : "ARGS");
    leaf_list(pro, 'p', typed, "", &count, b);
    leaf_list(inner, 'n', typed, "", &count, b);
    cg_printf(b, "\n");
  }
  for (int typed = 1; typed >= 0; typed--) {
    int count = 0;
    cg_printf(b, "#define OFG_EPI_%s", typed ? "PARAMS" : "ARGS");
    leaf_list(epi, 'e', typed, NULL, &count, b);
    cg_printf(b, "\n");
  }
}

/* ofg_post_at(s, idx, ...): the epilogue on the reduced value s of output idx, its other
 * leaves loaded at their offsets of idx. */
static int red_post_fn(const json_t *epi, struct cg_buf *b) {
  const char *sym = "S";
  if (!json_is_object(epi)) {
    cg_printf(b, "__device__ __forceinline__ float ofg_post_at(float s, ofg_i idx "
                 "OFG_EPI_PARAMS) {\n  (void)idx;\n  return s;\n}\n");
    return b->failed ? -1 : 0;
  }
  if (expr_emit(epi, "ofg_post", &sym, 1, false, b) != 0)
    return -1;
  cg_printf(b, "__device__ __forceinline__ float ofg_post_at(float s, ofg_i idx "
               "OFG_EPI_PARAMS) {\n  (void)idx;\n  return ofg_post(");
  for (size_t l = 0; l < json_array_size(json_object_get(epi, "leaves")); l++) {
    char off[512];
    expr_leaf_offset(epi, l, "idx", off, sizeof off);
    cg_printf(b, "(float)OFG_LD(e%zu + %s), ", l, off);
  }
  cg_printf(b, "s);\n}\n");
  return b->failed ? -1 : 0;
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
  const json_t *inner = json_object_get(match, "inner");
  const char *sym = "S1";
  red_params(match, &b);
  if (expr_emit(pro, "ofg_pre", inner ? &sym : NULL, inner ? 1 : 0, false, &b) != 0 ||
      red_post_fn(json_object_get(match, "epilogue"), &b) != 0 ||
      (inner && red_inner_fn(inner, &b) != 0)) {
    cg_free(&b);
    return NULL;
  }
  red_loader(pro, inner != NULL, &b);
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
  json_t *inner = json_object_get(json_object_get(match, "inner"), "prologue");
  json_array_foreach(json_object_get(inner, "leaves"), i, l)
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
  /* The epilogue's tensors come last, for whichever launch stores the outputs. */
  json_t *epi = json_array();
  json_array_foreach(json_object_get(json_object_get(match, "epilogue"), "leaves"), i, l)
    json_array_append_new(epi, json_pack("{s:O}", "tensor", json_object_get(l, "tensor")));
  json_array_extend(args, epi);
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
    json_array_extend(fargs, epi);
    long long per = red_finish_warp(match, nout) ? k->block / 32 : k->block;
    json_array_append_new(launches, launch("ofg_reduce_finish", (nout + per - 1) / per, 1,
                                           k->block, fargs));
  }
  json_decref(epi);
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

int row_layout_check(const struct row_layout *L, const struct knob_set *k,
                     const char *refusal, char *why, size_t whylen) {
  if (refusal) {
    snprintf(why, whylen, "MODE %s: %s", k->mode, refusal);
    return -1;
  }
  if (L->warp && k->block % L->group != 0) {
    snprintf(why, whylen, "BLOCK=%d is not a multiple of %d lanes per row", k->block, L->group);
    return -1;
  }
  return 0;
}
