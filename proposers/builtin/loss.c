/* The builtin loss family: matches scalar-loss graphs (elementwise terms, cross-entropy,
 * triplet margin, cosine) and generates loss.cu candidates. One concept (a family), and
 * longer than 800 lines because each of its six loss forms brings its own matcher. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"
#include "proposers/builtin/loss.h"

#define IDX32_LIMIT 2147483647LL
#define MAX_GRID 2147483647LL
#define MAX_LEAVES 8
#define EXPR_MAX 4096

enum loss_kind { KIND_ELEM, KIND_CE, KIND_TRIPLET, KIND_COSINE };
enum loss_red { RED_MEAN, RED_SUM, RED_BATCHMEAN };
static const char *const red_names[] = {"mean", "sum", "batchmean"};

/* What the matcher found. */
struct loss_spec {
  enum loss_kind kind;
  char op[24];
  enum loss_red red;
  double div;
  char expr[EXPR_MAX];
  int nleaf;
  char leaf[MAX_LEAVES][32];
  char index[MAX_LEAVES][256];
  bool transc;
  long long numel;             /* elementwise: terms summed */
  long long n, d;              /* rows */
  int ntensor;
  char tensor[3][32];
  double margin, eps;
  int p;
  bool swap;
  long long ignore;
  long long maxnumel;
  int sm_count;                /* the device's SMs (builtin_sm_count): sizes whole waves */
};

/* ---- graph helpers ------------------------------------------------------------------ */

static const char *node_name(json_t *node) {
  return json_string_value(json_object_get(node, "name"));
}

static const char *node_target(json_t *node) {
  return json_string_value(json_object_get(node, "target"));
}

static bool dtype_is(json_t *node, const char *dt) {
  const char *s = json_string_value(json_object_get(node, "dtype"));
  return s && strcmp(s, dt) == 0;
}

static bool absent(json_t *v) {
  return !v || json_is_null(v);
}

/* ---- expression emission -------------------------------------------------------------- */

/* A float literal for a JSON number; false for non-numbers or non-finite values. */
static bool float_literal(json_t *v, char *out, size_t outlen) {
  if (!json_is_number(v) || json_is_boolean(v))
    return false;
  double d = json_number_value(v);
  if (!isfinite(d))
    return false;
  snprintf(out, outlen, "%.9g", d);
  if (!strpbrk(out, ".e"))
    snprintf(out + strlen(out), outlen - strlen(out), ".0");
  snprintf(out + strlen(out), outlen - strlen(out), "f");
  return true;
}

struct ectx {
  json_t *profile, *seen;
  long long full[8];
  int frank;
  struct loss_spec *s;
  char *why;
  size_t whylen;
  int ops;
  bool named;                  /* the root is a loss function or module */
};

/* The index of leaf node x in the full (broadcast) shape: "" when shapes agree, else a C
 * expression of the flat index e. Returns 0, or -1 when x does not broadcast. */
static int broadcast_index(const struct ectx *c, json_t *x, char *out, size_t outlen) {
  long long ls[8];
  int lr = graph_shape(x, ls);
  out[0] = '\0';
  if (lr < 0 || lr > c->frank)
    return -1;
  long long fstride[8], lstride[8], acc = 1;
  for (int i = c->frank - 1; i >= 0; i--) {
    fstride[i] = acc;
    acc *= c->full[i];
  }
  acc = 1;
  for (int i = lr - 1; i >= 0; i--) {
    lstride[i] = acc;
    acc *= ls[i];
  }
  if (acc == fstride[0] * c->full[0])
    return 0;
  struct cg_buf b = {.max = outlen - 1};
  int i = 0;
  cg_printf(&b, "(0");
  while (i < c->frank) {
    int li = i - (c->frank - lr);
    if (li < 0 || ls[li] == 1) {
      i++;
      continue;
    }
    int j = i;  /* extend the run of kept dims: one div/mod per run */
    while (j + 1 < c->frank && ls[j + 1 - (c->frank - lr)] != 1)
      j++;
    for (int q = i; q <= j; q++)
      if (ls[q - (c->frank - lr)] != c->full[q]) {
        cg_free(&b);
        return -1;
      }
    long long span = fstride[i] * c->full[i] / fstride[j];
    cg_printf(&b, " + ((idx_t)(e / %lld) %% %lld) * %lld", fstride[j], span,
           lstride[j - (c->frank - lr)]);
    i = j + 1;
  }
  cg_printf(&b, ")");
  return cg_copy(&b, out, outlen);
}

/* Registers x as a leaf (once) and appends its value's name. */
static int emit_leaf(struct ectx *c, json_t *x, struct cg_buf *b) {
  const char *t = graph_input_tensor(x, "float32");
  if (!t) {
    snprintf(c->why, c->whylen, "loss operand %s is not a float32 input",
             node_name(x) ? node_name(x) : "?");
    return -1;
  }
  int k = 0;
  while (k < c->s->nleaf && strcmp(c->s->leaf[k], t) != 0)
    k++;
  if (k == c->s->nleaf) {
    if (k == MAX_LEAVES || broadcast_index(c, x, c->s->index[k], sizeof c->s->index[k]) != 0) {
      snprintf(c->why, c->whylen, "loss operand %s: too many inputs or no broadcast to the "
                                  "loss shape", t);
      return -1;
    }
    snprintf(c->s->leaf[k], sizeof c->s->leaf[k], "%s", t);
    c->s->nleaf++;
  }
  cg_printf(b, "x%d", k);
  return 0;
}

static int emit(struct ectx *c, json_t *arg, struct cg_buf *b);

/* op(A, B) forms: binary arithmetic. */
static int emit_binary(struct ectx *c, json_t *n, const char *op, struct cg_buf *b) {
  json_t *alpha = json_object_get(json_object_get(n, "kwargs"), "alpha");
  json_t *rm = json_object_get(json_object_get(n, "kwargs"), "rounding_mode");
  if (!absent(alpha) || !absent(rm)) {
    snprintf(c->why, c->whylen, "%s with alpha or rounding_mode is not supported",
             node_target(n));
    return -1;
  }
  cg_printf(b, "(");
  if (emit(c, graph_arg(n, 0, "input"), b) != 0)
    return -1;
  cg_printf(b, " %s ", op);
  if (emit(c, graph_arg(n, 1, "other"), b) != 0)
    return -1;
  cg_printf(b, ")");
  return 0;
}

/* clamp / clamp_min / clamp_max / relu, keeping NaN like torch. */
static int emit_clamp(struct ectx *c, json_t *n, struct cg_buf *b) {
  json_t *lo = NULL, *hi = NULL;
  char l1[48], l2[48];
  if (graph_target_is(n, "relu")) {
    lo = json_integer(0);
  } else if (graph_target_is(n, "clamp_min")) {
    lo = json_incref(graph_arg(n, 1, "min"));
  } else if (graph_target_is(n, "clamp_max")) {
    hi = json_incref(graph_arg(n, 1, "max"));
  } else {
    lo = json_incref(graph_arg(n, 1, "min"));
    hi = json_incref(graph_arg(n, 2, "max"));
  }
  bool ok = (absent(lo) || float_literal(lo, l1, sizeof l1)) &&
            (absent(hi) || float_literal(hi, l2, sizeof l2)) && !(absent(lo) && absent(hi));
  bool has_lo = !absent(lo), has_hi = !absent(hi);
  json_decref(lo);
  json_decref(hi);
  if (!ok) {
    snprintf(c->why, c->whylen, "%s needs constant bounds", node_target(n));
    return -1;
  }
  cg_printf(b, "%s%s", has_hi ? "ofg_clamp_max(" : "", has_lo ? "ofg_clamp_min(" : "");
  if (emit(c, graph_arg(n, 0, "input"), b) != 0)
    return -1;
  if (has_lo)
    cg_printf(b, ", %s)", l1);
  if (has_hi)
    cg_printf(b, ", %s)", l2);
  return 0;
}

/* pow(A, constant). */
static int emit_pow(struct ectx *c, json_t *n, struct cg_buf *b) {
  json_t *e = graph_arg(n, 1, "exponent");
  char lit[48];
  if (!float_literal(e, lit, sizeof lit)) {
    snprintf(c->why, c->whylen, "pow with a tensor exponent is not supported");
    return -1;
  }
  double x = json_number_value(e);
  cg_printf(b, x == 2.0 ? "ofg_sq(" : x == 0.5 ? "sqrtf(" : x == 1.0 ? "(" : "powf(");
  if (emit(c, graph_arg(n, 0, "input"), b) != 0)
    return -1;
  if (x != 2.0 && x != 0.5 && x != 1.0)
    cg_printf(b, ", %s", lit);
  cg_printf(b, ")");
  return 0;
}

/* Elementwise op nodes; everything else is refused. */
static int emit_call(struct ectx *c, json_t *n, struct cg_buf *b) {
  static const char *const bin[][2] = {{"add", "+"}, {"sub", "-"}, {"mul", "*"},
                                       {"truediv", "/"}, {"div", "/"}};
  static const char *const un[][2] = {{"neg", "-("}, {"abs", "fabsf("}, {"square", "ofg_sq("},
                                      {"sqrt", "sqrtf("}, {"exp", "OFG_EXPF("},
                                      {"log", "OFG_LOGF("}};
  if (!dtype_is(n, "float32")) {
    snprintf(c->why, c->whylen, "%s: loss terms must stay float32", node_target(n));
    return -1;
  }
  json_object_set_new(c->seen, node_name(n), json_true());
  c->ops++;
  for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++)
    if (graph_target_is(n, bin[i][0]))
      return emit_binary(c, n, bin[i][1], b);
  for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
    if (graph_target_is(n, un[i][0])) {
      c->s->transc = c->s->transc || i >= 4;
      cg_printf(b, "%s", un[i][1]);
      if (emit(c, graph_arg(n, 0, "input"), b) != 0)
        return -1;
      cg_printf(b, ")");
      return 0;
    }
  }
  if (graph_target_is(n, "pow"))
    return emit_pow(c, n, b);
  if (graph_target_is(n, "clamp") || graph_target_is(n, "clamp_min") ||
      graph_target_is(n, "clamp_max") || graph_target_is(n, "relu"))
    return emit_clamp(c, n, b);
  snprintf(c->why, c->whylen, "unsupported op %s in the loss term", node_target(n));
  return -1;
}

static int emit(struct ectx *c, json_t *arg, struct cg_buf *b) {
  char lit[48];
  if (float_literal(arg, lit, sizeof lit)) {
    cg_printf(b, "%s", lit);
    return 0;
  }
  json_t *n = graph_ref(c->profile, arg);
  if (!n) {
    snprintf(c->why, c->whylen, "loss term: unsupported argument");
    return -1;
  }
  return graph_is_call(n) ? emit_call(c, n, b) : emit_leaf(c, n, b);
}

/* ---- matching ----------------------------------------------------------------------- */

/* Broadcast shape of two nodes' shapes into c->full. Returns 0, or -1. */
static int broadcast_full(struct ectx *c, json_t *a, json_t *b) {
  long long sa[8], sb[8];
  int ra = a ? graph_shape(a, sa) : 0, rb = b ? graph_shape(b, sb) : 0;
  if (ra < 0 || rb < 0)
    return -1;
  c->frank = ra > rb ? ra : rb;
  for (int i = 0; i < c->frank; i++) {
    int ia = i - (c->frank - ra), ib = i - (c->frank - rb);
    long long da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return -1;
    c->full[i] = da > db ? da : db;
  }
  return 0;
}

/* The reduction argument: 0 and *ret set, or -1 (none, legacy flags, unknown). */
static int read_reduction(json_t *n, size_t pos, size_t legacy_pos, bool batchmean_ok,
                          enum loss_red *ret) {
  json_t *r = graph_param(n, pos, "reduction");
  if (!graph_is_module(n) && (!absent(graph_arg(n, legacy_pos, "size_average")) ||
                              !absent(graph_arg(n, legacy_pos + 1, "reduce"))))
    return -1;
  const char *v = absent(r) ? "mean" : json_string_value(r);
  for (int i = 0; v && i < 3; i++) {
    if (strcmp(v, red_names[i]) == 0 && (i != RED_BATCHMEAN || batchmean_ok)) {
      *ret = (enum loss_red)i;
      return 0;
    }
  }
  return -1;
}

static long long shape_numel(const long long *d, int r) {
  long long n = 1;
  for (int i = 0; i < r; i++)
    n *= d[i];
  return n;
}

/* Classifies a mean/sum-of-expression loss by its emitted term. */
static const char *classify(const char *expr) {
  if (strcmp(expr, "ofg_sq((x0 - x1))") == 0 || strcmp(expr, "ofg_sq((x1 - x0))") == 0)
    return "mse";
  if (strcmp(expr, "fabsf((x0 - x1))") == 0 || strcmp(expr, "fabsf((x1 - x0))") == 0)
    return "l1";
  if (strcmp(expr, "ofg_clamp_min((1.0f - (x0 * x1)), 0.0f)") == 0 ||
      strcmp(expr, "ofg_clamp_min((1.0f - (x1 * x0)), 0.0f)") == 0)
    return "hinge";
  return "elementwise";
}

/* torch.mean / torch.sum (or the methods) over every element: the reduced node, else NULL. */
static json_t *full_reduction(json_t *profile, json_t *root, enum loss_red *ret_red) {
  json_t *kw = json_object_get(root, "kwargs");
  bool mean = graph_target_is(root, "mean"), sum = graph_target_is(root, "sum");
  if ((!mean && !sum) || json_array_size(json_object_get(root, "args")) != 1 ||
      !absent(json_object_get(kw, "dim")) || !absent(json_object_get(kw, "dtype")) ||
      json_is_true(json_object_get(kw, "keepdim")))
    return NULL;
  *ret_red = mean ? RED_MEAN : RED_SUM;
  return graph_ref(profile, graph_arg(root, 0, "input"));
}

static int emit_node(struct ectx *c, json_t *n, struct cg_buf *b) {
  return graph_is_call(n) ? emit_call(c, n, b) : emit_leaf(c, n, b);
}

/* mean/sum of an elementwise expression of two or more inputs. 1, or 0 when the graph is
 * not such a loss (a plain reduction, or ops outside the term vocabulary). */
static int match_mean_expr(struct ectx *c, json_t *e, enum loss_red red) {
  struct loss_spec *s = c->s;
  c->frank = e ? graph_shape(e, c->full) : -1;
  if (c->frank < 0 || !graph_is_call(e))
    return 0;
  struct cg_buf b = {.max = sizeof s->expr - 1};
  int rc = emit_node(c, e, &b);
  if (cg_copy(&b, s->expr, sizeof s->expr) != 0 || rc != 0 || s->nleaf < 2)
    return 0;
  s->kind = KIND_ELEM;
  s->red = red;
  s->numel = shape_numel(c->full, c->frank);
  s->div = (double)s->numel;
  snprintf(s->op, sizeof s->op, "%s", classify(s->expr));
  return 1;
}

/* The term of a two-operand loss function, given its operands' expressions. */
static int loss_term(json_t *n, const char *a, const char *t, struct loss_spec *s, char *why,
                     size_t whylen) {
  struct cg_buf b = {.max = sizeof s->expr - 1};
  char lit[48];
  if (graph_target_is(n, "mse_loss") || graph_target_is(n, "MSELoss")) {
    snprintf(s->op, sizeof s->op, "mse");
    cg_printf(&b, "ofg_sq((%s) - (%s))", a, t);
  } else if (graph_target_is(n, "l1_loss") || graph_target_is(n, "L1Loss")) {
    snprintf(s->op, sizeof s->op, "l1");
    cg_printf(&b, "fabsf((%s) - (%s))", a, t);
  } else if (graph_target_is(n, "smooth_l1_loss") || graph_target_is(n, "SmoothL1Loss")) {
    json_t *beta = graph_param(n, 5, "beta");
    if (!absent(beta) && (!float_literal(beta, lit, sizeof lit) || json_number_value(beta) < 0))
      goto bad;
    snprintf(s->op, sizeof s->op, "smooth_l1");
    cg_printf(&b, "ofg_smooth_l1((%s) - (%s), %s)", a, t, absent(beta) ? "1.0f" : lit);
  } else if (graph_target_is(n, "huber_loss") || graph_target_is(n, "HuberLoss")) {
    json_t *delta = graph_param(n, 3, "delta");
    if (!absent(delta) && (!float_literal(delta, lit, sizeof lit) ||
                           json_number_value(delta) <= 0))
      goto bad;
    snprintf(s->op, sizeof s->op, "huber");
    cg_printf(&b, "ofg_huber((%s) - (%s), %s)", a, t, absent(delta) ? "1.0f" : lit);
  } else {
    json_t *lt = graph_param(n, 5, "log_target");
    snprintf(s->op, sizeof s->op, "kl_div");
    s->transc = true;
    int leaf;
    char tail;
    if (json_is_true(lt))
      cg_printf(&b, "(OFG_EXPF(%s) * ((%s) - (%s)))", t, t, a);
    else if (sscanf(a, "OFG_LOGF(x%d)%c", &leaf, &tail) == 1)
      cg_printf(&b, "ofg_kl_logp((%s), x%d)", t, leaf);  /* input = torch.log(leaf) */
    else
      cg_printf(&b, "(ofg_xlogy((%s), (%s)) - (%s) * (%s))", t, t, t, a);
  }
  return cg_copy(&b, s->expr, sizeof s->expr);
bad:
  cg_free(&b);
  snprintf(why, whylen, "%s: beta/delta must be a non-negative constant", node_target(n));
  return -1;
}

/* F.mse_loss / l1_loss / smooth_l1_loss / huber_loss / kl_div and their modules. */
static int match_loss_fn(struct ectx *c, json_t *n) {
  struct loss_spec *s = c->s;
  bool kl = graph_target_is(n, "kl_div") || graph_target_is(n, "KLDivLoss");
  bool huber = graph_target_is(n, "huber_loss") || graph_target_is(n, "HuberLoss");
  if (read_reduction(n, huber ? 2 : 4, huber ? 99 : 2, kl, &s->red) != 0) {
    snprintf(c->why, c->whylen, "%s: only reduction mean or sum%s is supported",
             node_target(n), kl ? " or batchmean" : "");
    return -1;
  }
  bool weighted = graph_target_is(n, "mse_loss") || graph_target_is(n, "l1_loss") || huber;
  if (weighted && !absent(graph_param(n, huber ? 4 : 5, "weight"))) {
    snprintf(c->why, c->whylen, "%s with a weight is not supported", node_target(n));
    return -1;
  }
  json_t *a = graph_ref(c->profile, graph_arg(n, 0, "input"));
  json_t *t = graph_ref(c->profile, graph_arg(n, 1, "target"));
  if (!a || !t || broadcast_full(c, a, t) != 0) {
    snprintf(c->why, c->whylen, "%s: operands must be tensors that broadcast", node_target(n));
    return -1;
  }
  char ea[EXPR_MAX], et[EXPR_MAX];
  struct cg_buf ba = {.max = sizeof ea - 1}, bt = {.max = sizeof et - 1};
  int rc = emit_node(c, a, &ba);
  if (rc == 0)
    rc = emit_node(c, t, &bt);
  int fits = cg_copy(&ba, ea, sizeof ea) | cg_copy(&bt, et, sizeof et);
  if (rc != 0 || fits != 0 || loss_term(n, ea, et, s, c->why, c->whylen) != 0)
    return -1;
  s->kind = KIND_ELEM;
  s->numel = shape_numel(c->full, c->frank);
  long long as[8];
  int ar = graph_shape(a, as);
  if (s->red == RED_BATCHMEAN && ar < 1) {
    snprintf(c->why, c->whylen, "kl_div batchmean of a 0-d input");
    return -1;
  }
  s->div = s->red == RED_BATCHMEAN ? (double)as[0] : (double)s->numel;
  return 1;
}

/* Float32 2-D input placeholders of one shape [N, D]: fills s->tensor, n, d. */
static int row_inputs(json_t *profile, json_t *n, int count, struct loss_spec *s) {
  long long first[8] = {0};
  for (int i = 0; i < count; i++) {
    json_t *x = graph_ref(profile, graph_arg(n, (size_t)i, NULL));
    long long d[8];
    const char *t = x ? graph_input_tensor(x, "float32") : NULL;
    if (!t || graph_shape(x, d) != 2 || (i > 0 && (d[0] != first[0] || d[1] != first[1])))
      return -1;
    if (i == 0)
      memcpy(first, d, sizeof first);
    snprintf(s->tensor[i], sizeof s->tensor[i], "%s", t);
  }
  s->ntensor = count;
  s->n = first[0];
  s->d = first[1];
  s->kind = count == 3 ? KIND_TRIPLET : KIND_COSINE;
  return 0;
}

/* F.cross_entropy / nn.CrossEntropyLoss with class-index targets. */
static int match_ce(struct ectx *c, json_t *n) {
  struct loss_spec *s = c->s;
  json_t *x = graph_ref(c->profile, graph_arg(n, 0, "input"));
  json_t *t = graph_ref(c->profile, graph_arg(n, 1, "target"));
  long long xs[8], ts[8];
  const char *xn = x ? graph_input_tensor(x, "float32") : NULL;
  const char *tn = t ? graph_input_tensor(t, "int64") : NULL;
  json_t *ls = graph_param(n, 7, "label_smoothing"), *ig = graph_param(n, 4, "ignore_index");
  json_t *red = graph_param(n, 6, "reduction");
  const char *rv = absent(red) ? "mean" : json_string_value(red);
  bool ok = xn && tn && graph_shape(x, xs) == 2 && graph_shape(t, ts) == 1 && ts[0] == xs[0] &&
            absent(graph_param(n, 2, "weight")) &&
            json_array_size(json_object_get(n, "params")) == 0 &&
            (graph_is_module(n) || (absent(graph_arg(n, 3, "size_average")) &&
                                    absent(graph_arg(n, 5, "reduce")))) &&
            (absent(ls) || (json_is_number(ls) && json_number_value(ls) == 0.0)) &&
            (absent(ig) || json_is_integer(ig)) && rv &&
            (strcmp(rv, "mean") == 0 || strcmp(rv, "sum") == 0);
  if (!ok) {
    snprintf(c->why, c->whylen, "cross_entropy: only float32 [N, C] logits with int64 [N] "
                                "targets, no weight, no label smoothing, reduction mean or sum");
    return -1;
  }
  s->kind = KIND_CE;
  snprintf(s->op, sizeof s->op, "cross_entropy");
  snprintf(s->tensor[0], sizeof s->tensor[0], "%s", xn);
  snprintf(s->tensor[1], sizeof s->tensor[1], "%s", tn);
  s->ntensor = 2;
  s->n = xs[0];
  s->d = xs[1];
  s->ignore = absent(ig) ? -100 : json_integer_value(ig);
  s->red = strcmp(rv, "sum") == 0 ? RED_SUM : RED_MEAN;
  s->div = 0.0;  /* the count of non-ignored rows */
  s->transc = true;
  return 1;
}

/* F.triplet_margin_loss / nn.TripletMarginLoss. */
static int match_triplet(struct ectx *c, json_t *n) {
  struct loss_spec *s = c->s;
  json_t *margin = graph_param(n, 3, "margin"), *p = graph_param(n, 4, "p");
  json_t *eps = graph_param(n, 5, "eps");
  json_t *swap = graph_param(n, 6, "swap");
  double pv = absent(p) ? 2.0 : json_number_value(p);
  bool ok = row_inputs(c->profile, n, 3, s) == 0 &&
            (absent(margin) || json_is_number(margin)) && (absent(eps) || json_is_number(eps)) &&
            (pv == 1.0 || pv == 2.0) && (absent(swap) || json_is_boolean(swap)) &&
            read_reduction(n, 9, 7, false, &s->red) == 0;
  if (!ok) {
    snprintf(c->why, c->whylen, "triplet_margin_loss: only float32 [N, D] inputs, p of 1 or 2, "
                                "reduction mean or sum");
    return -1;
  }
  snprintf(s->op, sizeof s->op, "triplet_margin");
  s->margin = absent(margin) ? 1.0 : json_number_value(margin);
  s->eps = absent(eps) ? 1e-6 : json_number_value(eps);
  s->p = (int)pv;
  s->swap = json_is_true(swap);
  s->div = (double)s->n;
  return 1;
}

/* mean/sum(1 - cosine_similarity(a, b, dim=1)) over [N, D] inputs: 1, 0, or -1. */
static int match_cosine(struct ectx *c, json_t *e, enum loss_red red) {
  struct loss_spec *s = c->s;
  json_t *one = graph_arg(e, 0, "input");
  json_t *cs = graph_ref(c->profile, graph_arg(e, 1, "other"));
  if (!graph_target_is(e, "sub") || !json_is_number(one) || json_number_value(one) != 1.0 ||
      !cs || !graph_target_is(cs, "cosine_similarity"))
    return 0;
  json_t *dim = graph_arg(cs, 2, "dim"), *eps = graph_arg(cs, 3, "eps");
  long long dv = absent(dim) ? 1 : json_integer_value(dim);
  if (row_inputs(c->profile, cs, 2, s) != 0 || !(dv == 1 || dv == -1) ||
      (!absent(eps) && !json_is_number(eps))) {
    snprintf(c->why, c->whylen, "1 - cosine_similarity: only float32 [N, D] inputs over dim 1");
    return -1;
  }
  json_object_set_new(c->seen, node_name(e), json_true());
  json_object_set_new(c->seen, node_name(cs), json_true());
  snprintf(s->op, sizeof s->op, "cosine");
  s->eps = absent(eps) ? 1e-8 : json_number_value(eps);
  s->red = red;
  s->div = (double)s->n;
  return 1;
}

static const char *const loss_fns[] = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                       "kl_div", "MSELoss", "L1Loss", "SmoothL1Loss",
                                       "HuberLoss", "KLDivLoss"};
static const char *const row_fns[] = {"cross_entropy", "CrossEntropyLoss",
                                      "triplet_margin_loss", "TripletMarginLoss"};

/* True when node is a loss function or module this family knows. */
static bool named_loss(json_t *node) {
  for (size_t i = 0; i < sizeof loss_fns / sizeof loss_fns[0]; i++)
    if (graph_target_is(node, loss_fns[i]))
      return true;
  for (size_t i = 0; i < sizeof row_fns / sizeof row_fns[0]; i++)
    if (graph_target_is(node, row_fns[i]))
      return true;
  return false;
}

/* Which loss the root is. 1 matched, 0 not a loss, -1 a loss we cannot do. */
static int match_root(struct ectx *c, json_t *root) {
  const char *const *fns = loss_fns;
  json_object_set_new(c->seen, node_name(root), json_true());
  c->named = true;
  for (size_t i = 0; i < sizeof loss_fns / sizeof loss_fns[0]; i++)
    if (graph_target_is(root, fns[i]))
      return match_loss_fn(c, root);
  if (graph_target_is(root, "cross_entropy") || graph_target_is(root, "CrossEntropyLoss"))
    return match_ce(c, root);
  if (graph_target_is(root, "triplet_margin_loss") ||
      graph_target_is(root, "TripletMarginLoss"))
    return match_triplet(c, root);
  c->named = false;
  enum loss_red red;
  json_t *e = full_reduction(c->profile, root, &red);
  if (!e)
    return 0;
  int rc = match_cosine(c, e, red);
  return rc != 0 ? rc : match_mean_expr(c, e, red);
}

/* Fills s: 1 matched, 0 not a loss, -1 a loss with something we cannot do. */
static int match_spec(json_t *profile, struct loss_spec *s, char *why, size_t whylen) {
  json_t *calls = graph_calls(profile), *seen = json_object(), *root = NULL;
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    if (op && strcmp(op, "output") == 0)
      root = graph_ref(profile, graph_arg(node, 0, NULL));
  }
  long long rs[8];
  int rc = 0;
  struct ectx c = {.profile = profile, .seen = seen, .s = s, .why = why, .whylen = whylen};
  if (calls && seen && root && graph_is_call(root) && graph_shape(root, rs) == 0 &&
      dtype_is(root, "float32") && json_array_size(json_object_get(profile, "outputs")) == 1) {
    rc = match_root(&c, root);
  } else if (root && graph_is_call(root) && named_loss(root)) {
    const char *t = node_target(root), *dot = t ? strrchr(t, '.') : NULL;
    snprintf(why, whylen, "%s: reduction='none' gives a tensor, not a scalar loss",
             dot ? dot + 1 : t ? t : "loss");
    rc = -1;
  }
  json_array_foreach(calls, i, node) {
    if (rc == 1 && !json_object_get(seen, node_name(node))) {
      /* A loss function fed by other ops is ours to refuse; a mean of them is not ours. */
      snprintf(why, whylen, "unsupported op %s feeding the loss", node_target(node));
      rc = c.named ? -1 : 0;
    }
  }
  json_decref(calls);
  json_decref(seen);
  return rc;
}

/* The match object of a spec (caller owns), NULL when out of memory. */
static json_t *spec_to_json(const struct loss_spec *s) {
  char summary[320];
  bool elem = s->kind == KIND_ELEM;
  if (elem)
    snprintf(summary, sizeof summary, "%s %s of %lld terms: %.200s", red_names[s->red], s->op,
             s->numel, s->expr);
  else
    snprintf(summary, sizeof summary, "%s %s over [%lld, %lld]", red_names[s->red], s->op,
             s->n, s->d);
  json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:b, s:I, s:i}", "family", "loss",
                        "op", s->op, "summary", summary, "kind", elem ? "elementwise" : "rows",
                        "reduction", red_names[s->red], "divisor", s->div, "transcendental",
                        s->transc, "numel", s->maxnumel, "sm_count", s->sm_count);
  if (!m)
    return NULL;
  if (elem) {
    json_t *leaves = json_array();
    for (int i = 0; i < s->nleaf; i++)
      json_array_append_new(leaves, json_pack("{s:s, s:s}", "tensor", s->leaf[i], "index",
                                              s->index[i]));
    json_object_set_new(m, "canonical", json_pack("[I]", s->numel));
    json_object_set_new(m, "expr", json_string(s->expr));
    json_object_set_new(m, "leaves", leaves);
  } else {
    json_t *t = json_array();
    for (int i = 0; i < s->ntensor; i++)
      json_array_append_new(t, json_string(s->tensor[i]));
    json_object_set_new(m, "canonical", json_pack("[I, I]", s->n, s->d));
    json_object_set_new(m, "tensors", t);
    json_object_set_new(m, "margin", json_real(s->margin));
    json_object_set_new(m, "eps", json_real(s->eps));
    json_object_set_new(m, "p", json_integer(s->p));
    json_object_set_new(m, "swap", json_boolean(s->swap));
    json_object_set_new(m, "ignore_index", json_integer(s->ignore));
  }
  return m;
}

/* The largest element count among the tensors a match names. */
static long long max_numel(json_t *profile, const struct loss_spec *s) {
  long long most = s->kind == KIND_ELEM ? s->numel : s->n * s->d;
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(profile, "inputs"), i, t) {
    json_int_t n = json_integer_value(json_object_get(t, "numel"));
    most = n > most ? n : most;
  }
  return most;
}

static int loss_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  struct loss_spec *s = calloc(1, sizeof *s);
  int rc = s ? match_spec(profile, s, why, whylen) : -1;
  json_t *m = NULL;
  if (rc == 1) {
    s->maxnumel = max_numel(profile, s);
    s->sm_count = builtin_sm_count(profile);
    m = spec_to_json(s);
  }
  free(s);
  return rc == 1 ? graph_match_result(m, ret_match, why, whylen) : rc;
}

/* Reads a match back into s. Returns 0, or -1 when it is not a loss match. */
static int spec_from_json(json_t *m, struct loss_spec *s) {
  const char *op = NULL, *kind = NULL, *red = NULL;
  int transc = 0;
  json_int_t numel = 0;
  memset(s, 0, sizeof *s);
  if (json_unpack(m, "{s:s, s:s, s:s, s:F, s:b, s:I}", "op", &op, "kind", &kind, "reduction",
                  &red, "divisor", &s->div, "transcendental", &transc, "numel", &numel) != 0 ||
      strlen(op) >= sizeof s->op)
    return -1;
  snprintf(s->op, sizeof s->op, "%s", op);
  s->transc = transc;
  s->maxnumel = numel;
  s->sm_count = builtin_sm_count(m);
  for (int i = 0; i < 3; i++)
    if (strcmp(red, red_names[i]) == 0)
      s->red = (enum loss_red)i;
  json_t *canon = json_object_get(m, "canonical");
  if (strcmp(kind, "elementwise") == 0) {
    const char *expr = json_string_value(json_object_get(m, "expr"));
    json_t *leaves = json_object_get(m, "leaves");
    if (!expr || strlen(expr) >= sizeof s->expr || json_array_size(leaves) > MAX_LEAVES)
      return -1;
    s->kind = KIND_ELEM;
    s->numel = json_integer_value(json_array_get(canon, 0));
    snprintf(s->expr, sizeof s->expr, "%s", expr);
    s->nleaf = (int)json_array_size(leaves);
    for (int i = 0; i < s->nleaf; i++) {
      json_t *l = json_array_get(leaves, (size_t)i);
      snprintf(s->leaf[i], sizeof s->leaf[i], "%s",
               json_string_value(json_object_get(l, "tensor")));
      snprintf(s->index[i], sizeof s->index[i], "%s",
               json_string_value(json_object_get(l, "index")));
    }
    return s->numel > 0 ? 0 : -1;
  }
  s->kind = strcmp(op, "cross_entropy") == 0 ? KIND_CE
            : strcmp(op, "triplet_margin") == 0 ? KIND_TRIPLET
                                                 : KIND_COSINE;
  s->n = json_integer_value(json_array_get(canon, 0));
  s->d = json_integer_value(json_array_get(canon, 1));
  json_t *t = json_object_get(m, "tensors");
  s->ntensor = (int)json_array_size(t);
  for (int i = 0; i < s->ntensor && i < 3; i++)
    snprintf(s->tensor[i], sizeof s->tensor[i], "%s", json_string_value(json_array_get(t, i)));
  s->margin = json_number_value(json_object_get(m, "margin"));
  s->eps = json_number_value(json_object_get(m, "eps"));
  s->p = (int)json_integer_value(json_object_get(m, "p"));
  s->swap = json_is_true(json_object_get(m, "swap"));
  s->ignore = json_integer_value(json_object_get(m, "ignore_index"));
  return s->n > 0 && s->d > 0 && s->ntensor >= 2 && s->ntensor <= 3 ? 0 : -1;
}

/* ---- knobs ---------------------------------------------------------------------------- */

/* How a knob set is realised for a spec (derived, never stored). */
struct loss_layout {
  int g;                       /* rows: threads per row group (32 or BLOCK) */
  bool cached;                 /* cross-entropy row kept in registers */
  long long ntiles, nrb, grid;
  bool idx64;
};

static long long cdiv(long long a, long long b) {
  return (a + b - 1) / b;
}

static bool is_mode(const struct knob_set *k, const char *m) {
  return strcmp(k->mode, m) == 0;
}

/* Threads per row group when MODE does not choose: a block for long rows. */
static int default_group(const struct loss_spec *s, const struct knob_set *k) {
  return s->d >= 1024 ? k->block : 32;
}

static void layout_of(const struct loss_spec *s, const struct knob_set *k,
                      struct loss_layout *l) {
  *l = (struct loss_layout){0};
  l->idx64 = s->maxnumel > IDX32_LIMIT || is_mode(k, "idx64");
  long long wave = (long long)s->sm_count * (2048 / k->block > 0 ? 2048 / k->block : 1);
  if (s->kind == KIND_ELEM) {
    l->ntiles = cdiv(s->numel / k->vec, (long long)k->block * k->items);
    long long cap = is_mode(k, "persistent") ? wave : 4 * wave;
    l->grid = l->ntiles < cap ? l->ntiles : cap;
    return;
  }
  l->g = is_mode(k, "warp_per_row") ? 32 : is_mode(k, "block_per_row") ? k->block
                                                                        : default_group(s, k);
  l->cached = s->kind == KIND_CE &&
              (is_mode(k, "cached_row") ||
               (!is_mode(k, "online") && s->d <= (long long)l->g * k->vec * k->items));
  int rows = k->rows > 0 ? k->rows : 1;
  l->nrb = cdiv(s->n, (long long)(k->block / l->g) * rows);
  long long cap = is_mode(k, "persistent") ? wave : 4 * wave;
  l->grid = l->nrb < cap ? l->nrb : cap;
}

static void loss_defaults(json_t *match, struct knob_set *ret_knobs) {
  struct loss_spec s;
  struct knob_set k = {.block = 256, .vec = 1, .items = 4, .unroll = 1};
  if (spec_from_json(match, &s) == 0) {
    long long len = s.kind == KIND_ELEM ? s.numel : s.d;
    k.vec = len % 4 == 0 ? 4 : len % 2 == 0 ? 2 : 1;
    k.rows = s.kind == KIND_ELEM ? 0 : 1;
  }
  *ret_knobs = k;
}

/* The row-mapping MODEs (warp/block per row, cached or streamed softmax rows): why one is
 * refused, or NULL when it changes the code. a is the layout MODE "" would get. */
static const char *rows_mode_refusal(const struct loss_spec *s, const struct knob_set *k,
                                     const struct loss_layout *a, char *buf, size_t buflen) {
  if (is_mode(k, "warp_per_row") || is_mode(k, "block_per_row")) {
    if (s->kind == KIND_ELEM)
      return "an elementwise loss has no rows";
    bool warp = is_mode(k, "warp_per_row");
    if ((warp && a->g == 32) || (!warp && a->g == k->block)) {
      snprintf(buf, buflen, "already one %s per row (rows of %lld)", warp ? "warp" : "block",
               s->d);
      return buf;
    }
    return NULL;
  }
  if (s->kind != KIND_CE)
    return "only cross-entropy has a softmax row to cache or stream";
  bool want = is_mode(k, "cached_row");
  if (want && s->d > (long long)a->g * k->vec * k->items) {
    snprintf(buf, buflen, "a row of %lld logits exceeds the %lld registers of a group "
                          "(group x VEC x ITEMS)", s->d, (long long)a->g * k->vec * k->items);
    return buf;
  }
  if (want == a->cached) {
    snprintf(buf, buflen, "rows of %lld logits are already %s by default", s->d,
             want ? "kept in registers" : "streamed with an online max");
    return buf;
  }
  return NULL;
}

/* Why a MODE that does not change this loss's code is refused (NULL when it applies). */
static const char *mode_refusal(const struct loss_spec *s, const struct knob_set *k,
                                char *buf, size_t buflen) {
  struct knob_set auto_k = *k;
  auto_k.mode[0] = '\0';
  struct loss_layout a;
  layout_of(s, &auto_k, &a);
  if (!k->mode[0] || is_mode(k, "ldg") || is_mode(k, "persistent"))
    return NULL;
  if (is_mode(k, "grid_stride"))
    return s->kind != KIND_ELEM ? "row losses hand whole rows to groups; use MODE persistent "
                                  "for a whole-wave grid"
                                : NULL;
  if (is_mode(k, "warp_per_row") || is_mode(k, "block_per_row") ||
      is_mode(k, "cached_row") || is_mode(k, "online"))
    return rows_mode_refusal(s, k, &a, buf, buflen);
  if (is_mode(k, "fast_math"))
    return s->transc ? NULL : "this loss evaluates no exp or log";
  if (is_mode(k, "recip_mul"))
    return s->red == RED_SUM ? "reduction='sum' divides nothing" : NULL;
  if (is_mode(k, "idx64"))
    return s->maxnumel <= IDX32_LIMIT
               ? NULL
               : "indices are already 64-bit for tensors of 2^31 elements or more";
  if (is_mode(k, "idx32"))
    return s->maxnumel > IDX32_LIMIT ? "32-bit indices cannot address these tensors"
                                     : "indices are already 32-bit (the default)";
  if (is_mode(k, "shuffle"))
    return "block reductions already use warp shuffles, then one value per warp";
  if (is_mode(k, "fused_reduce"))
    return "the terms and their reduction already run in one pass (then one final launch)";
  if (is_mode(k, "stable_lse"))
    return s->kind == KIND_CE ? "the log-sum-exp already subtracts the row maximum"
                              : "this loss has no log-sum-exp";
  if (is_mode(k, "predicated_tail"))
    return "every loss kernel already bounds-checks its tail";
  snprintf(buf, buflen, "MODE %s does not apply to losses", k->mode);
  return buf;
}

static int check_knobs(const struct loss_spec *s, const struct knob_set *k, char *why,
                       size_t whylen) {
  long long len = s->kind == KIND_ELEM ? s->numel : s->d;
  if (k->block % 32 != 0 || k->block < 32 || k->block > 1024)
    snprintf(why, whylen, "BLOCK=%d must be a multiple of 32 in [32, 1024]", k->block);
  else if ((k->vec != 1 && k->vec != 2 && k->vec != 4) || len % k->vec != 0)
    snprintf(why, whylen, "VEC=%d: %s of %lld floats needs VEC in {1, 2, 4} dividing it",
             k->vec, s->kind == KIND_ELEM ? "a tensor" : "a row", len);
  else if (k->items < 1 || k->items * k->vec > 64)
    snprintf(why, whylen, "ITEMS*VEC=%d values per thread exceed the 64-register budget",
             k->items * k->vec);
  else if (k->split > 1)
    snprintf(why, whylen, "SPLIT=%d: the loss already reduces in two deterministic stages "
                          "(block partials, then one final block); splitting further or "
                          "combining with atomics would make the scalar order-dependent",
             k->split);
  else if (s->kind == KIND_ELEM && k->rows > 1)
    snprintf(why, whylen, "ROWS=%d: an elementwise loss has no rows", k->rows);
  else if (s->kind != KIND_ELEM && k->rows > s->n)
    snprintf(why, whylen, "ROWS=%d exceeds the %lld rows", k->rows, s->n);
  else if (k->minb > 0 && (k->block * k->minb > 2048 ||
                           65536 / (k->block * k->minb) < 32 + k->items * k->vec * 3))
    snprintf(why, whylen, "__launch_bounds__(%d, %d) leaves too few registers per thread",
             k->block, k->minb);
  else
    return 0;
  return -1;
}

static int loss_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  struct loss_spec *s = malloc(sizeof *s);
  char buf[256];
  int rc = -1;
  if (!s || spec_from_json(match, s) != 0) {
    snprintf(why, whylen, "not a loss match");
  } else if (check_knobs(s, k, why, whylen) == 0) {
    const char *no = mode_refusal(s, k, buf, sizeof buf);
    struct loss_layout l;
    layout_of(s, k, &l);
    if (no)
      snprintf(why, whylen, "%s", no);
    else if (l.grid > MAX_GRID || l.grid * 8 > (4LL << 30))
      snprintf(why, whylen, "%lld blocks exceed the grid or scratch limits", l.grid);
    else if (s->kind != KIND_ELEM && k->block % l.g != 0)
      snprintf(why, whylen, "BLOCK=%d is not a multiple of the row group", k->block);
    else
      rc = 0;
  }
  free(s);
  return rc;
}

/* ---- generation ----------------------------------------------------------------------- */

/* Appends `#define name <float literal of v>` ("0.0f" for a non-finite v). */
static void put_float(struct cg_buf *b, const char *name, double v) {
  char lit[48];
  json_t *j = json_real(v);
  if (!float_literal(j, lit, sizeof lit))
    snprintf(lit, sizeof lit, "0.0f");
  json_decref(j);
  cg_printf(b, "#define %s %s\n", name, lit);
}

/* The leaf parameter macros and the loss_in type, before the template. */
static void put_term(struct cg_buf *b, const struct loss_spec *s) {
  cg_printf(b, "#define LOSS_LEAF_PARAMS ");
  for (int i = 0; i < s->nleaf; i++)
    cg_printf(b, "%sconst float* __restrict__ p%d", i ? ", " : "", i);
  cg_printf(b, "\n#define LOSS_LEAF_ARGS ");
  for (int i = 0; i < s->nleaf; i++)
    cg_printf(b, "%sp%d", i ? ", " : "", i);
  cg_printf(b, "\nstruct loss_in {\n  float v[%d][VEC];\n};\n", s->nleaf);
}

/* loss_load and loss_terms, after the template: each leaf is read as a vector when it has
 * the loss's full shape, else element by element through its broadcast index. */
static void put_loss_fns(struct cg_buf *b, const struct loss_spec *s) {
  cg_printf(b, "\n// generated: the leaves and the loss term\n"
               "__device__ __forceinline__ void loss_load(LOSS_LEAF_PARAMS, idx_t i, loss_in& r) "
               "{\n");
  for (int i = 0; i < s->nleaf; i++) {
    if (!s->index[i][0])
      cg_printf(b, "  loss_ldv(p%d + i, r.v[%d]);\n", i, i);
    else
      cg_printf(b, "#pragma unroll\n  for (int c = 0; c < VEC; c++) {\n"
                   "    const idx_t e = i + c;\n    r.v[%d][c] = LOSS_LD(p%d + %s);\n  }\n",
                i, i, s->index[i]);
  }
  cg_printf(b, "}\n\n__device__ __forceinline__ float loss_terms(const loss_in& r) {\n"
               "  float s = 0.0f;\n#pragma unroll\n  for (int c = 0; c < VEC; c++) {\n");
  for (int i = 0; i < s->nleaf; i++)
    cg_printf(b, "    const float x%d = r.v[%d][c];\n", i, i);
  cg_printf(b, "    s += %s;\n  }\n  return s;\n}\n", s->expr);
}

/* The candidate source (caller frees). */
static char *build_source(const struct loss_spec *s, const struct loss_layout *l) {
  const char *tmpl = builtin_template("loss.cu");
  struct cg_buf b = {0};
  if (!tmpl)
    return NULL;
  cg_printf(&b, "// opforge builtin loss: %s %s\n", red_names[s->red], s->op);
  if (cg_common(&b) != 0) {
    cg_free(&b);
    return NULL;
  }
  cg_printf(&b, "typedef %s idx_t;\n", l->idx64 ? "long long" : "int");
  cg_printf(&b, "#define LOSS_KIND_ELEM %d\n#define LOSS_KIND_CE %d\n"
                "#define LOSS_KIND_TRIPLET %d\n#define LOSS_KIND_COSINE %d\n#define LOSS_SUM %d\n"
                "#define LOSS_DIV_BY_COUNT %d\n#define LOSS_DIV %.17g\n#define LOSS_CACHED %d\n"
                "#define LOSS_P %d\n#define LOSS_SWAP %d\n",
            s->kind == KIND_ELEM, s->kind == KIND_CE, s->kind == KIND_TRIPLET,
            s->kind == KIND_COSINE, s->red == RED_SUM, s->kind == KIND_CE && s->red != RED_SUM,
            s->div > 0 ? s->div : 1.0, l->cached, s->p, s->swap);
  cg_define_ll(&b, "LOSS_NUMEL", s->numel);
  cg_define_ll(&b, "LOSS_NTILES", l->ntiles);
  cg_define_ll(&b, "LOSS_N", s->n);
  cg_define_ll(&b, "LOSS_D", s->d);
  cg_define_ll(&b, "LOSS_G", l->g);
  cg_define_ll(&b, "LOSS_NRB", l->nrb);
  cg_define_ll(&b, "LOSS_NPART", l->grid);
  cg_define_ll(&b, "LOSS_IGNORE", s->ignore);
  put_float(&b, "LOSS_MARGIN", s->margin);
  put_float(&b, "LOSS_EPS", s->eps);
  if (s->kind == KIND_ELEM)
    put_term(&b, s);
  cg_printf(&b, "%s", tmpl);
  if (s->kind == KIND_ELEM)
    put_loss_fns(&b, s);
  return cg_take(&b);
}

/* The launch plan (caller owns): the first stage, then loss_final over the partials. */
static json_t *build_plan(const struct loss_spec *s, const struct knob_set *k,
                          const struct loss_layout *l) {
  json_t *args = json_array();
  if (s->kind == KIND_ELEM)
    for (int i = 0; i < s->nleaf; i++)
      json_array_append_new(args, json_pack("{s:s}", "tensor", s->leaf[i]));
  else
    for (int i = 0; i < s->ntensor; i++)
      json_array_append_new(args, json_pack("{s:s}", "tensor", s->tensor[i]));
  json_array_append_new(args, json_pack("{s:s}", "buffer", "partials"));
  json_t *first = json_pack("{s:s, s:[I,i,i], s:[i,i,i], s:i, s:o}", "kernel",
                            s->kind == KIND_ELEM ? "loss_elem" : "loss_rows", "grid", l->grid,
                            1, 1, "block", k->block, 1, 1, "shared_bytes", 0, "args", args);
  json_t *final = json_pack("{s:s, s:[i,i,i], s:[i,i,i], s:i, s:[{s:s}, {s:s}]}", "kernel",
                            "loss_final", "grid", 1, 1, 1, "block", k->block, 1, 1,
                            "shared_bytes", 0, "args", "buffer", "partials", "tensor",
                            "output:0");
  return json_pack("{s:[{s:s, s:I}], s:[o, o]}", "buffers", "name", "partials", "bytes",
                   l->grid * 8, "launches", first, final);
}

static int loss_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                         char *why, size_t whylen) {
  struct loss_spec *s = malloc(sizeof *s);
  int rc = -1;
  if (!s)
    snprintf(why, whylen, "out of memory generating the loss candidate");
  else if (loss_check(match, k, why, whylen) == 0 && spec_from_json(match, s) == 0) {
    struct loss_layout l;
    layout_of(s, k, &l);
    char *src = build_source(s, &l);
    rc = cg_candidate(src, k, src ? build_plan(s, k, &l) : NULL,
                      "out of memory generating the loss candidate", ret_candidate, why, whylen);
    free(src);
  }
  free(s);
  return rc;
}

const struct builtin_family builtin_family_loss = {
    .name = "loss",
    .match = loss_match,
    .defaults = loss_defaults,
    .check = loss_check,
    .generate = loss_generate,
};
