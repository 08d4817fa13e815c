/* Pointwise programs of the GEMM family: FX pointwise nodes translated into C statements. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/gemm_epilogue.h"

#define EXPR_MAX 1024

/* NaN-propagating helpers matching PyTorch's fp32 CUDA kernels (clamp, minimum and relu
 * keep NaN; fminf/fmaxf would drop it). */
static const char prelude[] =
    "// GEMM epilogue helpers (PyTorch fp32 semantics, NaN-propagating min/max).\n"
    "#if defined(MODE_LDG)\n#define OFG_LDG(p) __ldg(p)\n#else\n#define OFG_LDG(p) (*(p))\n#endif\n"
    "__device__ __forceinline__ float ofg_minf(float a, float b) {\n"
    "  return (a != a || b != b) ? a + b : (a < b ? a : b);\n}\n"
    "__device__ __forceinline__ float ofg_maxf(float a, float b) {\n"
    "  return (a != a || b != b) ? a + b : (a > b ? a : b);\n}\n"
    "__device__ __forceinline__ float ofg_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
    "__device__ __forceinline__ float ofg_siluf(float x) { return x / (1.0f + expf(-x)); }\n"
    "__device__ __forceinline__ float ofg_geluf(float x) {\n"
    "  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));\n}\n"
    "__device__ __forceinline__ float ofg_gelu_tanhf(float x) {\n"
    "  const float k = 0.79788456080286535588f;\n"
    "  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));\n}\n"
    "__device__ __forceinline__ float ofg_softplusf(float x, float beta, float threshold) {\n"
    "  return x * beta > threshold ? x : log1pf(expf(x * beta)) / beta;\n}\n"
    "__device__ __forceinline__ float ofg_mishf(float x) { return x * tanhf(log1pf(expf(x))); }\n"
    "__device__ __forceinline__ float ofg_eluf(float x, float alpha) {\n"
    "  return x > 0.0f ? x : alpha * expm1f(x);\n}\n"
    "__device__ __forceinline__ float ofg_hardsigmoidf(float x) {\n"
    "  return ofg_minf(ofg_maxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;\n}\n"
    "__device__ __forceinline__ float ofg_logsigmoidf(float x) {\n"
    "  return ofg_minf(x, 0.0f) - log1pf(expf(-fabsf(x)));\n}\n";

const char *epi_prelude(void) {
  return prelude;
}

int epi_prog_init(struct epi_prog *p, long long rows, long long cols) {
  memset(p, 0, sizeof *p);
  p->stmts = json_array();
  p->operands = json_array();
  p->ops = json_array();
  if (!p->stmts || !p->operands || !p->ops) {
    epi_prog_clear(p);
    return -1;
  }
  p->nvars = 1;
  p->rows = rows;
  p->cols = cols;
  return 0;
}

void epi_prog_clear(struct epi_prog *p) {
  if (!p)
    return;
  json_decref(p->stmts);
  json_decref(p->operands);
  json_decref(p->ops);
  memset(p, 0, sizeof *p);
}

/* ---- small helpers over FX nodes ---- */

static const char *short_target(json_t *node) {
  const char *t = json_string_value(json_object_get(node, "target"));
  if (!t)
    return "";
  const char *dot = strrchr(t, '.');
  return dot ? dot + 1 : t;
}

/* A JSON number (or "inf"/"-inf"/"nan") as a double. */
static bool json_number(json_t *v, double *ret) {
  if (json_is_integer(v) || json_is_real(v)) {
    *ret = json_number_value(v);
    return true;
  }
  const char *s = json_string_value(v);
  if (!s)
    return false;
  if (strcmp(s, "inf") == 0)
    *ret = INFINITY;
  else if (strcmp(s, "-inf") == 0)
    *ret = -INFINITY;
  else if (strcmp(s, "nan") == 0)
    *ret = NAN;
  else
    return false;
  return true;
}

/* A numeric argument with a default; false when present but not a number. */
static bool num_arg(json_t *node, size_t pos, const char *name, double dflt, double *ret) {
  json_t *v = graph_arg(node, pos, name);
  if (!v || json_is_null(v)) {
    *ret = dflt;
    return true;
  }
  return json_number(v, ret);
}

/* A numeric module attribute with a default. */
static bool num_attr(json_t *node, const char *name, double dflt, double *ret) {
  json_t *v = graph_attr(node, name);
  if (!v) {
    *ret = dflt;
    return true;
  }
  return json_number(v, ret);
}

/* ---- operand indexing ---- */

/* C expression of coordinate d of shape S (rank r) at element (row, col) of the stage.
 * S is a row-major view of rows x cols: when a suffix of S spans exactly cols, its dims
 * come from col and the rest from row; otherwise from the linear index. The modulo is
 * left out when the quotient cannot reach S[d]. */
static void coord_expr(const struct epi_prog *p, const long long *S, int r, int d, char *buf,
                       size_t len) {
  int split = -1;
  for (int s = 0; s <= r && split < 0; s++)
    if (graph_dims_prod(S, s, r) == p->cols)
      split = s;
  long long inner = graph_dims_prod(S, d + 1, r);
  char q[96];
  bool bounded;
  if (split >= 0 && d >= split) {
    snprintf(q, sizeof q, "col");
    bounded = graph_dims_prod(S, split, d) == 1;
  } else if (split >= 0) {
    snprintf(q, sizeof q, "row");
    inner /= p->cols;
    bounded = graph_dims_prod(S, 0, d) == 1;
  } else {
    snprintf(q, sizeof q, "(row * %lldLL + col)", p->cols);
    bounded = graph_dims_prod(S, 0, d) == 1;
  }
  char div[200];
  if (inner == 1)
    snprintf(div, sizeof div, "%s", q);
  else
    snprintf(div, sizeof div, "(%s / %lldLL)", q, inner);
  if (bounded)
    snprintf(buf, len, "%s", div);
  else
    snprintf(buf, len, "(%s %% %lldLL)", div, S[d]);
}

/* Index of tensor name among the operands, appending it when new; -1 on OOM. */
static int operand_slot(struct epi_prog *p, const char *name) {
  size_t i;
  json_t *v;
  json_array_foreach(p->operands, i, v) {
    if (strcmp(json_string_value(v), name) == 0)
      return (int)i;
  }
  if (json_array_append_new(p->operands, json_string(name)) != 0)
    return -1;
  return (int)json_array_size(p->operands) - 1;
}

/* The C expression of value v read at the element of node shape S (rank r). */
static int value_expr(struct epi_prog *p, const struct epi_value *v, const long long *S, int r,
                      char *buf, size_t len, char *why, size_t whylen) {
  if (v->kind == EPI_VAR) {
    snprintf(buf, len, "v%d", v->var);
    return 0;
  }
  if (v->kind == EPI_CONST) {
    cg_float(v->c, buf, len);
    return 0;
  }
  if (v->rank > r) {
    snprintf(why, whylen, "operand %s of rank %d broadcasts beyond the result", v->tensor, v->rank);
    return -1;
  }
  int slot = operand_slot(p, v->tensor);
  if (slot < 0) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  char off[EXPR_MAX] = "";
  size_t used = 0;
  for (int od = 0; od < v->rank; od++) {
    int d = r - v->rank + od;
    if (v->shape[od] == 1)
      continue;
    if (v->shape[od] != S[d]) {
      snprintf(why, whylen, "operand %s does not broadcast to the result's shape", v->tensor);
      return -1;
    }
    char c[400];
    coord_expr(p, S, r, d, c, sizeof c);
    long long stride = graph_dims_prod(v->shape, od + 1, v->rank);
    int n = stride == 1 ? snprintf(off + used, sizeof off - used, "%s%s", used ? " + " : "", c)
                        : snprintf(off + used, sizeof off - used, "%s%s * %lldLL",
                                   used ? " + " : "", c, stride);
    if (n < 0 || (size_t)n >= sizeof off - used) {
      snprintf(why, whylen, "operand index of %s too long", v->tensor);
      return -1;
    }
    used += (size_t)n;
  }
  snprintf(buf, len, "OFG_LDG(e%d + %s)", slot, used ? off : "0");
  return 0;
}

/* Appends "float vN = <fmt>;" and returns N, or -1 on OOM. */
static int emit(struct epi_prog *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int emit(struct epi_prog *p, const char *fmt, ...) {
  char expr[4 * EXPR_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(expr, sizeof expr, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof expr)
    return -1;
  int var = p->nvars;
  if (json_array_append_new(p->stmts, json_sprintf("float v%d = %s;", var, expr)) != 0)
    return -1;
  p->nvars++;
  return var;
}

/* ---- translation ---- */

/* One translation in progress: the node, its output shape, and the error buffer. */
struct tr {
  struct epi_prog *p;
  json_t *node;
  epi_resolve_fn resolve;
  void *ctx;
  long long S[EPI_MAX_RANK];
  int r;
  const char *name; /* the op's name for messages */
  char *why;
  size_t whylen;
};

/* The expression of argument (pos, kw) into buf; -1 with why when absent or invalid. */
static int arg_expr(struct tr *t, size_t pos, const char *kw, char *buf, size_t len) {
  json_t *a = graph_arg(t->node, pos, kw);
  if (!a) {
    snprintf(t->why, t->whylen, "%s: missing argument %s", t->name, kw ? kw : "");
    return -1;
  }
  struct epi_value v;
  if (t->resolve(t->ctx, a, &v, t->why, t->whylen) != 0)
    return -1;
  return value_expr(t->p, &v, t->S, t->r, buf, len, t->why, t->whylen);
}

/* The value of argument (pos, kw) when it is the program's variable; used for identities. */
static int arg_var(struct tr *t, size_t pos, int *ret_var) {
  json_t *a = graph_arg(t->node, pos, NULL);
  struct epi_value v;
  if (!a || t->resolve(t->ctx, a, &v, t->why, t->whylen) != 0)
    return -1;
  if (v.kind != EPI_VAR) {
    snprintf(t->why, t->whylen, "%s: its input is not the GEMM's value", t->name);
    return -1;
  }
  *ret_var = v.var;
  return 0;
}

static int oom(struct tr *t) {
  snprintf(t->why, t->whylen, "out of memory");
  return -1;
}

static int bad_param(struct tr *t, const char *what) {
  snprintf(t->why, t->whylen, "%s: unsupported %s", t->name, what);
  return -1;
}

/* add/sub/mul/div (and rsub), with torch.add's alpha. */
static int tr_binary(struct tr *t, char opch, bool reversed, int *ret_var) {
  char a[EXPR_MAX], b[EXPR_MAX], al[64];
  if (arg_expr(t, 0, "input", a, sizeof a) != 0 || arg_expr(t, 1, "other", b, sizeof b) != 0)
    return -1;
  double alpha = 1.0;
  json_t *av = json_object_get(json_object_get(t->node, "kwargs"), "alpha");
  if (av && !json_number(av, &alpha))
    return bad_param(t, "alpha");
  if (alpha != 1.0 && opch != '+' && opch != '-')
    return bad_param(t, "alpha");
  json_t *rm = json_object_get(json_object_get(t->node, "kwargs"), "rounding_mode");
  if (rm && !json_is_null(rm))
    return bad_param(t, "rounding_mode");
  int v;
  if (alpha != 1.0) {
    cg_float(alpha, al, sizeof al);
    v = reversed ? emit(t->p, "%s * %s %c %s", al, b, opch, a)
                 : emit(t->p, "%s %c %s * %s", a, opch, al, b);
  } else {
    v = reversed ? emit(t->p, "%s %c %s", b, opch, a) : emit(t->p, "%s %c %s", a, opch, b);
  }
  if (v < 0)
    return oom(t);
  *ret_var = v;
  return 0;
}

/* A unary function of argument 0: fmt has one %s for the argument. */
static int tr_unary(struct tr *t, const char *fmt, int *ret_var) {
  char a[EXPR_MAX], body[3 * EXPR_MAX];
  if (arg_expr(t, 0, "input", a, sizeof a) != 0)
    return -1;
    /* The format comes from this file's table only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  snprintf(body, sizeof body, fmt, a, a, a);
#pragma GCC diagnostic pop
  int v = emit(t->p, "%s", body);
  if (v < 0)
    return oom(t);
  *ret_var = v;
  return 0;
}

/* Elementwise min/max of two values (NaN-propagating unless fmin/fmax). */
static int tr_minmax(struct tr *t, const char *fn, int *ret_var) {
  char a[EXPR_MAX], b[EXPR_MAX];
  if (arg_expr(t, 0, "input", a, sizeof a) != 0 || arg_expr(t, 1, "other", b, sizeof b) != 0)
    return -1;
  int v = emit(t->p, "%s(%s, %s)", fn, a, b);
  if (v < 0)
    return oom(t);
  *ret_var = v;
  return 0;
}

/* clamp(x, min, max), clamp_min, clamp_max, hardtanh, relu6; min/max may be tensors. */
static int tr_clamp(struct tr *t, bool has_lo, bool has_hi, int *ret_var) {
  char x[EXPR_MAX], lo[EXPR_MAX] = "", hi[EXPR_MAX] = "";
  if (arg_expr(t, 0, "input", x, sizeof x) != 0)
    return -1;
  json_t *lov = has_lo ? graph_arg(t->node, 1, "min") : NULL;
  json_t *hiv = has_hi ? graph_arg(t->node, has_lo ? 2 : 1, "max") : NULL;
  if (lov && !json_is_null(lov) && arg_expr(t, 1, "min", lo, sizeof lo) != 0)
    return -1;
  if (hiv && !json_is_null(hiv) && arg_expr(t, has_lo ? 2 : 1, "max", hi, sizeof hi) != 0)
    return -1;
  if (!lo[0] && !hi[0])
    return bad_param(t, "clamp without bounds");
  char inner[3 * EXPR_MAX];
  if (lo[0])
    snprintf(inner, sizeof inner, "ofg_maxf(%s, %s)", x, lo);
  else
    snprintf(inner, sizeof inner, "%s", x);
  int v = hi[0] ? emit(t->p, "ofg_minf(%s, %s)", inner, hi) : emit(t->p, "%s", inner);
  if (v < 0)
    return oom(t);
  *ret_var = v;
  return 0;
}

/* hardtanh with constant bounds from args or module attributes. */
static int tr_hardtanh(struct tr *t, double lo, double hi, int *ret_var) {
  char x[EXPR_MAX], l[64], h[64];
  if (arg_expr(t, 0, "input", x, sizeof x) != 0)
    return -1;
  cg_float(lo, l, sizeof l);
  cg_float(hi, h, sizeof h);
  int v = emit(t->p, "ofg_minf(ofg_maxf(%s, %s), %s)", x, l, h);
  if (v < 0)
    return oom(t);
  *ret_var = v;
  return 0;
}

/* triu/tril: keeps col - row >= diagonal (triu) or <= diagonal (tril) of the last two
 * dims. */
static int tr_mask(struct tr *t, bool upper, int *ret_var) {
  if (t->r < 2)
    return bad_param(t, "input rank below 2");
  double diag;
  if (!num_arg(t->node, 1, "diagonal", 0, &diag) || diag != floor(diag))
    return bad_param(t, "diagonal");
  char x[EXPR_MAX], ri[400], ci[400];
  if (arg_expr(t, 0, "input", x, sizeof x) != 0)
    return -1;
  coord_expr(t->p, t->S, t->r, t->r - 2, ri, sizeof ri);
  coord_expr(t->p, t->S, t->r, t->r - 1, ci, sizeof ci);
  int v = emit(t->p, "(%s - %s %s %lldLL) ? %s : 0.0f", ci, ri,
               upper ? ">=" : "<=", (long long)diag, x);
  if (v < 0)
    return oom(t);
  *ret_var = v;
  return 0;
}

/* pow(x, c) with a constant exponent. */
static int tr_pow(struct tr *t, int *ret_var) {
  double c;
  json_t *e = graph_arg(t->node, 1, "exponent");
  if (!e || !json_number(e, &c))
    return bad_param(t, "exponent (only a constant)");
  char x[EXPR_MAX], cs[64];
  if (arg_expr(t, 0, "input", x, sizeof x) != 0)
    return -1;
  cg_float(c, cs, sizeof cs);
  int v = c == 2.0   ? emit(t->p, "%s * %s", x, x)
          : c == 1.0 ? emit(t->p, "%s", x)
          : c == 0.5 ? emit(t->p, "sqrtf(%s)", x)
                     : emit(t->p, "powf(%s, %s)", x, cs);
  if (v < 0)
    return oom(t);
  *ret_var = v;
  return 0;
}

/* The op's canonical name: module class names lowered, in-place spellings stripped. */
static void canonical_name(json_t *node, char *buf, size_t len) {
  const char *s = short_target(node);
  size_t n = 0;
  for (; s[n] && n + 1 < len; n++)
    buf[n] = graph_is_module(node) ? (char)(s[n] >= 'A' && s[n] <= 'Z' ? s[n] + 32 : s[n]) : s[n];
  buf[n] = 0;
  if (n > 1 && buf[n - 1] == '_' && buf[n - 2] != '_')
    buf[n - 1] = 0;
  static const char *const inplace[][2] = {{"iadd", "add"},
                                           {"isub", "sub"},
                                           {"imul", "mul"},
                                           {"itruediv", "truediv"},
                                           {"leakyrelu", "leaky_relu"},
                                           {"multiply", "mul"},
                                           {"subtract", "sub"},
                                           {"divide", "div"},
                                           {"true_divide", "div"},
                                           {"negative", "neg"},
                                           {"absolute", "abs"},
                                           {"clip", "clamp"},
                                           {"logsigmoid", "logsigmoid"}};
  for (size_t i = 0; i < sizeof inplace / sizeof inplace[0]; i++)
    if (strcmp(buf, inplace[i][0]) == 0)
      snprintf(buf, len, "%s", inplace[i][1]);
}

/* True when min/max (torch.min, torch.max, method) is the elementwise two-tensor form. */
static bool minmax_is_binary(json_t *node) {
  json_t *other = graph_arg(node, 1, "other");
  return other && json_is_object(other) && json_object_get(other, "node") &&
         !json_object_get(json_object_get(node, "kwargs"), "dim");
}

/* Unary functions without parameters: name -> format over the argument. */
static const struct {
  const char *name;
  const char *fmt;
} unary_table[] = {
    {"relu", "%s < 0.0f ? 0.0f : %s"},
    {"sigmoid", "ofg_sigmoidf(%s)"},
    {"tanh", "tanhf(%s)"},
    {"silu", "ofg_siluf(%s)"},
    {"mish", "ofg_mishf(%s)"},
    {"selu", "1.05070098735548049342f * ofg_eluf(%s, 1.67326324235437728482f)"},
    {"hardsigmoid", "ofg_hardsigmoidf(%s)"},
    {"hardswish", "%s * ofg_hardsigmoidf(%s)"},
    {"softsign", "%s / (1.0f + fabsf(%s))"},
    {"logsigmoid", "ofg_logsigmoidf(%s)"},
    {"neg", "-%s"},
    {"abs", "fabsf(%s)"},
    {"exp", "expf(%s)"},
    {"log", "logf(%s)"},
    {"log1p", "log1pf(%s)"},
    {"expm1", "expm1f(%s)"},
    {"sqrt", "sqrtf(%s)"},
    {"rsqrt", "1.0f / sqrtf(%s)"},
    {"reciprocal", "1.0f / %s"},
    {"square", "%s * %s"},
};

/* Identities: the result is the argument's variable. */
static bool is_identity(const char *n, json_t *node, struct tr *t, bool *ret_ok) {
  *ret_ok = true;
  if (strcmp(n, "clone") == 0 || strcmp(n, "detach") == 0 || strcmp(n, "contiguous") == 0 ||
      strcmp(n, "identity") == 0 || strcmp(n, "positive") == 0)
    return true;
  if (strcmp(n, "dropout") == 0) {
    double pr = 0.5;
    bool training = true;
    if (graph_is_module(node)) {
      num_attr(node, "p", 0.5, &pr);
    } else {
      num_arg(node, 1, "p", 0.5, &pr);
      json_t *tv = graph_arg(node, 2, "training");
      training = !tv || !json_is_false(tv);
    }
    /* The model runs in training mode: dropout with p > 0 is random. */
    if (pr != 0.0 && training) {
      snprintf(t->why, t->whylen, "dropout with p=%g in training mode is random", pr);
      *ret_ok = false;
    }
    return true;
  }
  return false;
}

bool epi_is_pointwise(json_t *node) {
  char n[64];
  canonical_name(node, n, sizeof n);
  for (size_t i = 0; i < sizeof unary_table / sizeof unary_table[0]; i++)
    if (strcmp(n, unary_table[i].name) == 0)
      return true;
  static const char *const others[] = {
      "add",      "sub",        "mul",       "div",       "truediv", "rsub",
      "gelu",     "leaky_relu", "hardtanh",  "relu6",     "elu",     "celu",
      "softplus", "clamp",      "clamp_min", "clamp_max", "minimum", "maximum",
      "fmin",     "fmax",       "triu",      "tril",      "pow",     "clone",
      "detach",   "contiguous", "identity",  "positive",  "dropout"};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    if (strcmp(n, others[i]) == 0)
      return true;
  if (strcmp(n, "min") == 0 || strcmp(n, "max") == 0)
    return !graph_is_module(node) && minmax_is_binary(node);
  return false;
}

/* Parametrized activations: parameters from module attributes or call arguments. */
static int tr_param_unary(struct tr *t, const char *n, int *ret_var) {
  json_t *node = t->node;
  bool mod = graph_is_module(node);
  char c1[64], c2[64];
  double a, b;
  if (strcmp(n, "gelu") == 0) {
    json_t *ap = graph_param(node, 1, "approximate");
    const char *approx = ap ? json_string_value(ap) : "none";
    if (!approx || (strcmp(approx, "none") != 0 && strcmp(approx, "tanh") != 0))
      return bad_param(t, "approximate");
    return tr_unary(t, strcmp(approx, "tanh") == 0 ? "ofg_gelu_tanhf(%s)" : "ofg_geluf(%s)",
                    ret_var);
  }
  if (strcmp(n, "leaky_relu") == 0) {
    if (!(mod ? num_attr(node, "negative_slope", 0.01, &a)
              : num_arg(node, 1, "negative_slope", 0.01, &a)))
      return bad_param(t, "negative_slope");
    cg_float(a, c1, sizeof c1);
    char fmt[128];
    snprintf(fmt, sizeof fmt, "%%s > 0.0f ? %%s : %%s * %s", c1);
    return tr_unary(t, fmt, ret_var);
  }
  if (strcmp(n, "elu") == 0 || strcmp(n, "celu") == 0) {
    if (!(mod ? num_attr(node, "alpha", 1.0, &a) : num_arg(node, 1, "alpha", 1.0, &a)))
      return bad_param(t, "alpha");
    cg_float(a, c1, sizeof c1);
    char fmt[160];
    if (strcmp(n, "elu") == 0)
      snprintf(fmt, sizeof fmt, "ofg_eluf(%%s, %s)", c1);
    else /* celu: max(0,x) + min(0, alpha * (exp(x / alpha) - 1)) */
      snprintf(fmt, sizeof fmt, "%%s > 0.0f ? %%s : %s * expm1f(%%s / %s)", c1, c1);
    return tr_unary(t, fmt, ret_var);
  }
  if (strcmp(n, "softplus") == 0) {
    if (!(mod ? num_attr(node, "beta", 1.0, &a) : num_arg(node, 1, "beta", 1.0, &a)) ||
        !(mod ? num_attr(node, "threshold", 20.0, &b) : num_arg(node, 2, "threshold", 20.0, &b)))
      return bad_param(t, "beta/threshold");
    cg_float(a, c1, sizeof c1);
    cg_float(b, c2, sizeof c2);
    char fmt[160];
    snprintf(fmt, sizeof fmt, "ofg_softplusf(%%s, %s, %s)", c1, c2);
    return tr_unary(t, fmt, ret_var);
  }
  if (strcmp(n, "relu6") == 0)
    return tr_hardtanh(t, 0.0, 6.0, ret_var);
  /* hardtanh */
  if (!(mod ? num_attr(node, "min_val", -1.0, &a) : num_arg(node, 1, "min_val", -1.0, &a)) ||
      !(mod ? num_attr(node, "max_val", 1.0, &b) : num_arg(node, 2, "max_val", 1.0, &b)))
    return bad_param(t, "min_val/max_val");
  return tr_hardtanh(t, a, b, ret_var);
}

static int tr_dispatch(struct tr *t, const char *n, int *ret_var) {
  for (size_t i = 0; i < sizeof unary_table / sizeof unary_table[0]; i++)
    if (strcmp(n, unary_table[i].name) == 0)
      return tr_unary(t, unary_table[i].fmt, ret_var);
  if (strcmp(n, "add") == 0)
    return tr_binary(t, '+', false, ret_var);
  if (strcmp(n, "sub") == 0)
    return tr_binary(t, '-', false, ret_var);
  if (strcmp(n, "rsub") == 0)
    return tr_binary(t, '-', true, ret_var);
  if (strcmp(n, "mul") == 0)
    return tr_binary(t, '*', false, ret_var);
  if (strcmp(n, "div") == 0 || strcmp(n, "truediv") == 0)
    return tr_binary(t, '/', false, ret_var);
  if (strcmp(n, "gelu") == 0 || strcmp(n, "leaky_relu") == 0 || strcmp(n, "elu") == 0 ||
      strcmp(n, "celu") == 0 || strcmp(n, "softplus") == 0 || strcmp(n, "relu6") == 0 ||
      strcmp(n, "hardtanh") == 0)
    return tr_param_unary(t, n, ret_var);
  if (strcmp(n, "clamp") == 0)
    return tr_clamp(t, true, true, ret_var);
  if (strcmp(n, "clamp_min") == 0)
    return tr_clamp(t, true, false, ret_var);
  if (strcmp(n, "clamp_max") == 0)
    return tr_clamp(t, false, true, ret_var);
  if (strcmp(n, "minimum") == 0 || strcmp(n, "min") == 0)
    return tr_minmax(t, "ofg_minf", ret_var);
  if (strcmp(n, "maximum") == 0 || strcmp(n, "max") == 0)
    return tr_minmax(t, "ofg_maxf", ret_var);
  if (strcmp(n, "fmin") == 0)
    return tr_minmax(t, "fminf", ret_var);
  if (strcmp(n, "fmax") == 0)
    return tr_minmax(t, "fmaxf", ret_var);
  if (strcmp(n, "triu") == 0 || strcmp(n, "tril") == 0)
    return tr_mask(t, strcmp(n, "triu") == 0, ret_var);
  if (strcmp(n, "pow") == 0)
    return tr_pow(t, ret_var);
  snprintf(t->why, t->whylen, "unsupported op %s", t->name);
  return -1;
}

int epi_translate(struct epi_prog *p, json_t *node, epi_resolve_fn resolve, void *ctx, int *ret_var,
                  char *why, size_t whylen) {
  struct tr t = {
      .p = p, .node = node, .resolve = resolve, .ctx = ctx, .why = why, .whylen = whylen};
  t.name = json_string_value(json_object_get(node, "target"));
  if (!t.name)
    t.name = "?";
  const char *dtype = json_string_value(json_object_get(node, "dtype"));
  if (!dtype || strcmp(dtype, "float32") != 0) {
    snprintf(why, whylen, "%s: result is not float32", t.name);
    return -1;
  }
  t.r = graph_shape(node, t.S);
  if (t.r < 0 || graph_dims_prod(t.S, 0, t.r) != p->rows * p->cols) {
    snprintf(why, whylen, "%s: result shape is not a view of the %lld x %lld stage", t.name,
             p->rows, p->cols);
    return -1;
  }
  char n[64];
  canonical_name(node, n, sizeof n);
  bool ok;
  if (is_identity(n, node, &t, &ok)) {
    if (!ok || arg_var(&t, 0, ret_var) != 0)
      return -1;
    return json_array_append_new(p->ops, json_string(n)) == 0 ? 0 : oom(&t);
  }
  if ((strcmp(n, "min") == 0 || strcmp(n, "max") == 0) &&
      (graph_is_module(node) || !minmax_is_binary(node))) {
    snprintf(why, whylen, "%s: a reduction, not a pointwise op", t.name);
    return -1;
  }
  size_t before = json_array_size(p->stmts);
  if (tr_dispatch(&t, n, ret_var) != 0) {
    /* A failed op leaves no half-written statements. */
    while (json_array_size(p->stmts) > before)
      json_array_remove(p->stmts, json_array_size(p->stmts) - 1);
    p->nvars = (int)json_array_size(p->stmts) + 1;
    return -1;
  }
  return json_array_append_new(p->ops, json_string(n)) == 0 ? 0 : oom(&t);
}

int epi_add_column_affine(struct epi_prog *p, int x, const char *mean, const char *rstd,
                          const char *weight, const char *bias, int *ret_var) {
  int sm = operand_slot(p, mean), sr = operand_slot(p, rstd);
  int sw = weight ? operand_slot(p, weight) : 0, sb = bias ? operand_slot(p, bias) : 0;
  if (sm < 0 || sr < 0 || sw < 0 || sb < 0)
    return -1;
  char w[32] = "", b[32] = "";
  if (weight)
    snprintf(w, sizeof w, " * OFG_LDG(e%d + col)", sw);
  if (bias)
    snprintf(b, sizeof b, " + OFG_LDG(e%d + col)", sb);
  int v = emit(p, "(v%d - OFG_LDG(e%d + col)) * OFG_LDG(e%d + col)%s%s", x, sm, sr, w, b);
  if (v < 0 || json_array_append_new(p->ops, json_string("batch_norm")) != 0)
    return -1;
  *ret_var = v;
  return 0;
}

int epi_add_value(struct epi_prog *p, int x, const struct epi_value *value, const long long *S,
                  int r, int *ret_var, char *why, size_t whylen) {
  char e[EXPR_MAX];
  if (value_expr(p, value, S, r, e, sizeof e, why, whylen) != 0)
    return -1;
  int v = emit(p, "v%d + %s", x, e);
  if (v < 0 || json_array_append_new(p->ops, json_string("bias")) != 0) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  *ret_var = v;
  return 0;
}

/* ---- emission ---- */

char *epi_emit_function(const struct epi_prog *p, const char *name, int out_var) {
  struct cg_buf b = {0};
  cg_printf(&b, "__device__ __forceinline__ float %s(float v0, i64 row, i64 col", name);
  for (size_t i = 0; i < json_array_size(p->operands); i++)
    cg_printf(&b, ", const float* __restrict__ e%zu", i);
  cg_printf(&b, ") {\n  (void)row; (void)col;\n");
  size_t i;
  json_t *s;
  json_array_foreach(p->stmts, i, s) {
    cg_printf(&b, "  %s\n", json_string_value(s));
  }
  cg_printf(&b, "  return v%d;\n}\n", out_var);
  return cg_take(&b);
}

char *epi_emit_call(const struct epi_prog *p, const char *name, const char *x, const char *row,
                    const char *col, const char *const *args) {
  struct cg_buf b = {0};
  cg_printf(&b, "%s(%s, %s, %s", name, x, row, col);
  for (size_t i = 0; i < json_array_size(p->operands); i++)
    cg_printf(&b, ", %s", args[i]);
  cg_printf(&b, ")");
  return cg_take(&b);
}
