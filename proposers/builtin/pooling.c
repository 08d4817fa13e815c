/* The builtin pooling family: matches max/avg pooling and depthwise convolution graphs
 * (a window slid over each channel on its own) and generates pooling.cu candidates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/pooling.h"

#define IDX32_LIMIT 2147483647LL
#define MAX_GRID 2147483647LL
#define STATIC_SMEM (48 * 1024)
#define STAGE_TARGET (12 * 1024) /* staged bytes a tile aims for (bytes in flight) */
#define WHOLE_TILE (24 * 1024)   /* the largest tile staged in one piece by default */
#define CHUNK_BYTES (16 * 1024)  /* chunk size when the tile is larger */
#define MAX_TAPS 4096            /* window elements the unrolled template accepts */

/* What the matcher found; 1D and 2D are 3D with unit leading spatial dims. */
struct pool_spec {
  bool max;
  bool conv;              /* a depthwise convolution: weights w, optional bias b */
  long long channels;     /* conv: C (plane = n * C + c) */
  char w[160], b[160];    /* conv: the weight's and bias's tensors ("" for no bias) */
  int dims;
  long long planes, in[3], out[3];
  int k[3], s[3], p[3], d[3];
  bool ceil_mode, count_pad;
  int divisor;
  char x[32], y[32];
  long long numel;
  json_t *pre, *post; /* the fused chains (expr.h IRs) or NULL: owned while matching,
                         borrowed from the match when read back */
  int xleaf;          /* the prologue's leaf that is the pooled tensor x */
};

/* How a knob set is realised for a spec (derived, never stored). */
struct pool_layout {
  bool staged;
  bool whole;                   /* the tile staged in one piece (smem_tile, pad_smem) */
  int tx, ty, wi, ch, iht, iwt, srow;
  long long ntw, nth, blocks;
  long long rows, gy;           /* pool_direct */
  bool idx64;
};

/* Kinds 0-5 are pooling, 6-8 depthwise convolution (module, or conv1d/2d/3d whose weight
 * is a parameter); fn_names are the ops' names in matches. */
#define CONV_KIND 6
static const char *const conv_fns[] = {"conv1d", "conv2d", "conv3d"};
static const char *const mod_names[] = {"MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
                                        "AvgPool2d", "AvgPool3d", "Conv1d",    "Conv2d",
                                        "Conv3d"};
static const char *const fn_names[] = {"max_pool1d",       "max_pool2d",       "max_pool3d",
                                       "avg_pool1d",       "avg_pool2d",       "avg_pool3d",
                                       "depthwise_conv1d", "depthwise_conv2d", "depthwise_conv3d"};

/* ---- matching ----------------------------------------------------------------------- */

static bool flag(json_t *v, bool dflt) {
  return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* PyTorch's pooling_output_shape. */
static long long out_size(long long in, int k, int s, int p, int d, bool ceil_mode) {
  long long num = in + 2LL * p - (long long)d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  long long o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p)
    o--;
  return o;
}

/* Whether a Conv module node is depthwise with one output channel per input channel
 * (groups == in_channels == out_channels), zero padding given as numbers. */
static bool depthwise_module(json_t *node) {
  json_t *g = graph_attr(node, "groups"), *in = graph_attr(node, "in_channels"),
         *out = graph_attr(node, "out_channels"), *mode = graph_attr(node, "padding_mode");
  return json_is_integer(g) && json_is_integer(in) && json_is_integer(out) &&
         json_integer_value(g) > 1 && json_integer_value(g) == json_integer_value(in) &&
         json_integer_value(in) == json_integer_value(out) &&
         (!mode || (json_is_string(mode) && strcmp(json_string_value(mode), "zeros") == 0)) &&
         !json_is_string(graph_attr(node, "padding"));
}

/* Whether a conv<dims>d call is depthwise: groups > 1 equals the input's channels, the
 * weight is a parameter of shape [C, 1, *window], padding given as numbers. */
static bool depthwise_call(json_t *profile, json_t *node, int dims) {
  json_t *g = graph_arg(node, 6, "groups");
  long long x[8], w[8];
  int rx = graph_shape(graph_ref(profile, graph_arg(node, 0, "input")), x);
  int rw = graph_shape(graph_ref(profile, graph_arg(node, 1, "weight")), w);
  return json_is_integer(g) && json_integer_value(g) > 1 && rx >= dims + 1 &&
         x[rx - dims - 1] == json_integer_value(g) && rw == dims + 2 &&
         w[0] == json_integer_value(g) && w[1] == 1 &&
         graph_arg_param(profile, node, 1, "weight") &&
         !json_is_string(graph_arg(node, 4, "padding"));
}

/* Which op the node is: 0..8 as in the name tables, -1 none (a convolution that is not
 * depthwise is none: it stays a library step). */
static int pool_kind(json_t *profile, json_t *node) {
  bool module = graph_is_module(node);
  for (int i = 0; i < CONV_KIND; i++) {
    if (graph_target_is(node, module ? mod_names[i] : fn_names[i]))
      return i;
  }
  for (int d = 0; d < 3; d++) {
    if (graph_target_is(node, module ? mod_names[CONV_KIND + d] : conv_fns[d]))
      return (module ? depthwise_module(node) : depthwise_call(profile, node, d + 1))
                 ? CONV_KIND + d
                 : -1;
  }
  return -1;
}

/* A depthwise convolution's window, channels, weight and bias into s, from the module's
 * attributes or conv<dims>d's arguments (input, weight, bias, stride, padding, dilation,
 * groups). 0, or -1 with why. */
static int read_conv_params(json_t *profile, json_t *node, struct pool_spec *s, char *why,
                            size_t whylen) {
  int n = s->dims;
  bool module = graph_is_module(node), bad = false;
  const char *w, *b;
  bool has_bias;
  if (module) {
    bad = builtin_read_tuple(graph_attr(node, "kernel_size"), n, 1, 1 << 20, s->k) != 0;
    w = graph_module_param(node, "weight");
    has_bias = json_is_true(graph_attr(node, "bias"));
    b = has_bias ? graph_module_param(node, "bias") : NULL;
    s->channels = json_integer_value(graph_attr(node, "in_channels"));
  } else {
    long long wd[8];
    graph_shape(graph_ref(profile, graph_arg(node, 1, "weight")), wd);
    for (int i = 0; i < n; i++)
      s->k[3 - n + i] = (int)wd[2 + i];
    w = graph_arg_param(profile, node, 1, "weight");
    json_t *bias = graph_arg(node, 2, "bias");
    has_bias = bias && !json_is_null(bias);
    b = has_bias ? graph_arg_param(profile, node, 2, "bias") : NULL;
    s->channels = wd[0];
  }
  bad = bad || builtin_read_tuple(graph_param(node, 3, "stride"), n, 1, 1 << 20, s->s) != 0 ||
        builtin_read_tuple(graph_param(node, 4, "padding"), n, 0, 1 << 20, s->p) != 0 ||
        builtin_read_tuple(graph_param(node, 5, "dilation"), n, 1, 1 << 20, s->d) != 0;
  long long taps = (long long)s->k[0] * s->k[1] * s->k[2];
  if (bad || taps > MAX_TAPS || !w || (has_bias && !b)) {
    snprintf(why, whylen, "depthwise convolution: kernel_size, stride, padding, dilation or "
                          "parameters malformed (weight and bias must be parameters), or a "
                          "window over %d elements", MAX_TAPS);
    return -1;
  }
  snprintf(s->w, sizeof s->w, "%s", w);
  snprintf(s->b, sizeof s->b, "%s", b ? b : "");
  return 0;
}

/* Reads the operator's parameters (module attrs or call arguments) into s. Returns 0, or
 * -1 with why. */
static int read_params(json_t *profile, json_t *node, struct pool_spec *s, char *why,
                       size_t whylen) {
  int n = s->dims;
  for (int i = 0; i < 3; i++) {
    s->k[i] = s->s[i] = s->d[i] = 1;
    s->p[i] = 0;
  }
  if (s->conv)
    return read_conv_params(profile, node, s, why, whylen);
  bool bad = builtin_read_tuple(graph_param(node, 1, "kernel_size"), n, 1, 1 << 20, s->k) != 0;
  memcpy(s->s, s->k, sizeof s->s);
  bad = bad || builtin_read_tuple(graph_param(node, 2, "stride"), n, 1, 1 << 20, s->s) != 0 ||
        builtin_read_tuple(graph_param(node, 3, "padding"), n, 0, 1 << 20, s->p) != 0;
  if (s->max) {
    bad = bad || builtin_read_tuple(graph_param(node, 4, "dilation"), n, 1, 1 << 20, s->d) != 0;
    s->ceil_mode = flag(graph_param(node, 5, "ceil_mode"), false);
    if (flag(graph_param(node, 6, "return_indices"), false)) {
      snprintf(why, whylen, "%s with return_indices=True (two outputs) is not supported",
               fn_names[(s->max ? 0 : 3) + n - 1]);
      return -1;
    }
  } else {
    s->ceil_mode = flag(graph_param(node, 4, "ceil_mode"), false);
    s->count_pad = flag(graph_param(node, 5, "count_include_pad"), true);
    json_t *dv = n > 1 ? graph_param(node, 6, "divisor_override") : NULL;
    if (dv && !json_is_null(dv) && (!json_is_integer(dv) || json_integer_value(dv) <= 0 ||
                                    json_integer_value(dv) > (1 << 30)))
      bad = true;
    s->divisor = json_is_integer(dv) ? (int)json_integer_value(dv) : 0;
  }
  long long taps = (long long)s->k[0] * s->k[1] * s->k[2];
  if (bad || taps > MAX_TAPS) {
    snprintf(why, whylen, bad ? "pooling: kernel_size, stride, padding or dilation malformed"
                              : "pooling window of %lld elements exceeds the template's %d",
             taps, MAX_TAPS);
    return -1;
  }
  return 0;
}

/* Shapes: the input as [planes, ID, IH, IW] and the output, checked against the graph. x
 * is the pooled operand's node, t the tensor the kernel reads for it. */
static int read_shapes(json_t *x, const char *t, json_t *node, struct pool_spec *s, char *why,
                       size_t whylen) {
  long long in[8], out[8];
  int rin = x ? graph_shape(x, in) : -1, rout = graph_shape(node, out);
  if (!t || (rin != s->dims + 1 && rin != s->dims + 2) || rout != rin) {
    snprintf(why, whylen, "pooling: the operand must be a float32 tensor of rank %d or %d",
             s->dims + 1, s->dims + 2);
    return -1;
  }
  snprintf(s->x, sizeof s->x, "%s", t);
  snprintf(s->y, sizeof s->y, "output:0");
  int lead = rin - s->dims;
  if (s->conv && in[lead - 1] != s->channels) {
    snprintf(why, whylen, "depthwise convolution: the input's channels are not in_channels");
    return -1;
  }
  s->planes = 1;
  for (int i = 0; i < lead; i++)
    s->planes *= in[i];
  bool ok = true;
  for (int i = 0; i < 3; i++) {
    int gi = i - (3 - s->dims);  /* index among the spatial dims */
    s->in[i] = gi >= 0 ? in[lead + gi] : 1;
    s->out[i] = out_size(s->in[i], s->k[i], s->s[i], s->p[i], s->d[i], s->ceil_mode);
    ok = ok && s->out[i] >= 1 && (gi < 0 || s->out[i] == out[lead + gi]);
  }
  for (int i = 0; i < lead; i++)
    ok = ok && in[i] == out[i];
  if (!ok || s->planes < 1) {
    snprintf(why, whylen, "pooling: the graph's output shape differs from PyTorch's formula");
    return -1;
  }
  long long nin = s->planes * s->in[0] * s->in[1] * s->in[2];
  long long nout = s->planes * s->out[0] * s->out[1] * s->out[2];
  s->numel = nin > nout ? nin : nout;
  return 0;
}

static bool unsupported_pool(json_t *node) {
  static const char *const names[] = {"AdaptiveAvgPool2d", "adaptive_avg_pool2d",
                                      "max_pool2d_with_indices", "LPPool2d",
                                      "AdaptiveMaxPool2d"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (graph_target_is(node, names[i]))
      return true;
  return false;
}

/* The graph's single pooling call (borrowed): 1 found, 0 none, -1 with why when there are
 * several, or an op of another family next to it. */
static int find_pool(json_t *profile, json_t **ret, char *why, size_t whylen) {
  json_t *calls = graph_calls(profile), *node;
  size_t i, n = 0;
  const char *other = NULL;
  *ret = NULL;
  json_array_foreach(calls, i, node) {
    if (pool_kind(profile, node) >= 0) {
      *ret = node;
      n++;
    } else if (unsupported_pool(node)) {
      snprintf(why, whylen, "unsupported pooling op %s",
               json_string_value(json_object_get(node, "target")));
      json_decref(calls);
      return -1;
    } else if (expr_is_foreign_op(expr_target(node))) {
      other = expr_target(node);
    }
  }
  json_decref(calls);
  if (n > 1 || (n == 1 && other)) {
    snprintf(why, whylen, n > 1 ? "several pooling or depthwise convolution ops in one graph "
                                  "are unsupported"
                                : "%s next to the pooling op is not elementwise", other);
    return -1;
  }
  if (other)
    snprintf(why, whylen, "%s is not pooling", other);
  return n == 1 ? 1 : 0;
}

/* The prologue: the pointwise chain computing the pooled operand xn from the graph's
 * tensors. Sets s->pre and s->xleaf, and *ret_t to the tensor of x (borrowed from s->pre).
 * 0, or -1 with why. */
static int match_pre(json_t *profile, json_t *xn, struct pool_spec *s, const char **ret_t,
                     char *why, size_t whylen) {
  char inner[200] = "";
  if (expr_build(profile, xn, NULL, &s->pre, inner, sizeof inner) != 0) {
    snprintf(why, whylen, "pooling after %s: %s", expr_target(xn), inner);
    return -1;
  }
  const json_t *leaves = json_object_get(s->pre, "leaves");
  char off[512];
  for (size_t i = 0; i < json_array_size(leaves); i++) {
    const json_t *l = json_array_get(leaves, i);
    if (strcmp(json_string_value(json_object_get(l, "dtype")), "float32") == 0 &&
        expr_leaf_offset(s->pre, i, "xi", off, sizeof off) == 1) {
      s->xleaf = (int)i;
      *ret_t = json_string_value(json_object_get(l, "tensor"));
      return 0;
    }
  }
  snprintf(why, whylen, "pooling after %s: no float32 tensor of the pooled shape to read",
           expr_target(xn));
  return -1;
}

/* The post chain: the pointwise ops from the pooled value (bound symbol P) to the output.
 * 0, or -1 with why. */
static int match_post(json_t *profile, json_t *node, json_t *root, struct pool_spec *s,
                      char *why, size_t whylen) {
  char inner[200] = "";
  json_t *bound = json_pack("{s:s}", json_string_value(json_object_get(node, "name")), "P");
  int rc = bound && root ? expr_build(profile, root, bound, &s->post, inner, sizeof inner) : -1;
  json_decref(bound);
  if (rc != 0 || !json_equal(json_object_get(s->post, "shape"), json_object_get(node, "shape"))) {
    snprintf(why, whylen, "pooling followed by %s: %s", root ? expr_target(root) : "a tuple",
             inner[0] ? inner : "the output is not the pooled tensor transformed elementwise");
    return -1;
  }
  return 0;
}

/* 1 and s filled when the graph is one pooling call, with pointwise ops before and after
 * it; 0 when the graph is something else, -1 for a pooling graph we cannot do. */
static int match_spec(json_t *profile, struct pool_spec *s, char *why, size_t whylen) {
  json_t *node = NULL;
  int rc = find_pool(profile, &node, why, whylen);
  if (rc != 1)
    return rc;
  int kind = pool_kind(profile, node);
  s->max = kind < 3;
  s->conv = kind >= CONV_KIND;
  s->dims = kind % 3 + 1;
  const char *dt = json_string_value(json_object_get(node, "dtype"));
  json_t *xn = graph_ref(profile, graph_arg(node, 0, "input")), *root = expr_output_node(profile);
  const char *t = graph_input_tensor(xn, "float32");
  if (read_params(profile, node, s, why, whylen) != 0 ||
      (!t && xn && graph_is_call(xn) && match_pre(profile, xn, s, &t, why, whylen) != 0) ||
      read_shapes(xn, t, node, s, why, whylen) != 0 ||
      (root != node && match_post(profile, node, root, s, why, whylen) != 0))
    return -1;
  if (!dt || strcmp(dt, "float32") != 0 ||
      json_array_size(json_object_get(profile, "outputs")) != 1) {
    snprintf(why, whylen, "pooling: needs one float32 output");
    return -1;
  }
  return 1;
}

/* The match object of a spec (caller owns), NULL when out of memory. */
/* Appends " <what> [op,op]" for the ops of chain ir to summary (len bytes). */
static void summary_chain(char *summary, size_t len, const char *what, const json_t *ir) {
  size_t used = strlen(summary), i;
  json_t *o;
  json_array_foreach(json_object_get(ir, "ops"), i, o) {
    if (used < len)
      used += (size_t)snprintf(summary + used, len - used, "%s%s", i ? "," : what,
                               json_string_value(o));
  }
  if (json_array_size(json_object_get(ir, "ops")) && used < len)
    snprintf(summary + used, len - used, "]");
}

/* The op's name in fn_names. */
static const char *spec_op(const struct pool_spec *s) {
  return fn_names[(s->conv ? CONV_KIND : s->max ? 0 : 3) + s->dims - 1];
}

static json_t *spec_to_json(const struct pool_spec *s) {
  const char *op = spec_op(s);
  char summary[512];
  snprintf(summary, sizeof summary, "%s k=[%d,%d,%d] s=[%d,%d,%d] p=[%d,%d,%d] d=[%d,%d,%d] on "
                                    "[%lld, %lld, %lld, %lld]",
           op, s->k[0], s->k[1], s->k[2], s->s[0], s->s[1], s->s[2], s->p[0], s->p[1], s->p[2],
           s->d[0], s->d[1], s->d[2], s->planes, s->in[0], s->in[1], s->in[2]);
  summary_chain(summary, sizeof summary, " prologue[", s->pre);
  summary_chain(summary, sizeof summary, " epilogue[", s->post);
  json_t *m = json_pack("{s:s, s:s, s:s, s:[I,I,I,I], s:[I,I,I], s:i, s:[i,i,i], s:[i,i,i], "
                   "s:[i,i,i], s:[i,i,i], s:b, s:b, s:i, s:{s:s, s:s}, s:I}",
                   "family", "pooling", "op", op, "summary", summary, "canonical", s->planes,
                   s->in[0], s->in[1], s->in[2], "out", s->out[0], s->out[1], s->out[2],
                   "dims", s->dims, "kernel", s->k[0], s->k[1], s->k[2], "stride", s->s[0],
                   s->s[1], s->s[2], "padding", s->p[0], s->p[1], s->p[2], "dilation", s->d[0],
                   s->d[1], s->d[2], "ceil_mode", s->ceil_mode, "count_include_pad",
                   s->count_pad, "divisor_override", s->divisor, "tensors", "x", s->x, "out",
                   s->y, "numel", s->numel);
  if (m && s->pre)
    json_object_set_new(m, "prologue", json_pack("{s:O, s:i}", "ir", s->pre, "x", s->xleaf));
  if (m && s->post)
    json_object_set(m, "epilogue", s->post);
  if (m && s->conv)
    json_object_set_new(m, "conv", json_pack("{s:I, s:s, s:s?}", "channels", s->channels,
                                             "weight", s->w, "bias", s->b[0] ? s->b : NULL));
  return m;
}

static int pool_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  struct pool_spec s = {0};
  int rc = match_spec(profile, &s, why, whylen);
  if (rc == 1)
    rc = graph_match_result(spec_to_json(&s), ret_match, why, whylen);
  json_decref(s.pre);
  json_decref(s.post);
  return rc;
}

/* Reads a match back. Returns 0, or -1 when it is not a pooling match. */
static int spec_from_json(json_t *m, struct pool_spec *s) {
  const char *op = NULL, *x = NULL, *y = NULL;
  json_int_t planes, in[3], out[3], numel;
  int ceil_mode, count_pad;
  *s = (struct pool_spec){0};
  if (json_unpack(m, "{s:s, s:[I,I,I,I], s:[I,I,I], s:i, s:[i,i,i], s:[i,i,i], s:[i,i,i], "
                     "s:[i,i,i], s:b, s:b, s:i, s:{s:s, s:s}, s:I}",
                  "op", &op, "canonical", &planes, &in[0], &in[1], &in[2], "out", &out[0],
                  &out[1], &out[2], "dims", &s->dims, "kernel", &s->k[0], &s->k[1], &s->k[2],
                  "stride", &s->s[0], &s->s[1], &s->s[2], "padding", &s->p[0], &s->p[1],
                  &s->p[2], "dilation", &s->d[0], &s->d[1], &s->d[2], "ceil_mode", &ceil_mode,
                  "count_include_pad", &count_pad, "divisor_override", &s->divisor, "tensors",
                  "x", &x, "out", &y, "numel", &numel) != 0)
    return -1;
  s->max = strncmp(op, "max", 3) == 0;
  s->conv = strncmp(op, "depthwise", 9) == 0;
  if (s->conv) {
    const char *w = NULL;
    json_int_t ch = 0;
    json_t *conv = json_object_get(m, "conv");
    if (json_unpack(conv, "{s:I, s:s}", "channels", &ch, "weight", &w) != 0 || ch < 1)
      return -1;
    const char *b = json_string_value(json_object_get(conv, "bias"));
    s->channels = ch;
    snprintf(s->w, sizeof s->w, "%s", w);
    snprintf(s->b, sizeof s->b, "%s", b ? b : "");
  }
  s->planes = planes;
  for (int i = 0; i < 3; i++) {
    s->in[i] = in[i];
    s->out[i] = out[i];
  }
  s->ceil_mode = ceil_mode;
  s->count_pad = count_pad;
  s->numel = numel;
  snprintf(s->x, sizeof s->x, "%s", x);
  snprintf(s->y, sizeof s->y, "%s", y);
  json_t *pro = json_object_get(m, "prologue");
  s->pre = json_object_get(pro, "ir");
  s->xleaf = (int)json_integer_value(json_object_get(pro, "x"));
  s->post = json_object_get(m, "epilogue");
  return 0;
}

/* ---- knobs ---------------------------------------------------------------------------- */

static long long cdiv(long long a, long long b) {
  return (a + b - 1) / b;
}

static bool is_mode(const struct knob_set *k, const char *m) {
  return strcmp(k->mode, m) == 0;
}

static int pow2_at_least(long long n, int cap) {
  int p = 1;
  while (p < cap && p < n)
    p *= 2;
  return p;
}

/* Windows overlap along H or W: neighbouring outputs share input (the halo pays off). */
static bool overlapping(const struct pool_spec *s, int axis) {
  return s->s[axis] < (s->k[axis] - 1) * s->d[axis] + 1;
}

/* Tile rows/columns of input behind ty*items output rows and tx*wi output columns. */
static void tile_dims(const struct pool_spec *s, int th, int tw, int *ret_iht, int *ret_iwt) {
  *ret_iht = (th - 1) * s->s[1] + (s->k[1] - 1) * s->d[1] + 1;
  *ret_iwt = (tw - 1) * s->s[2] + (s->k[2] - 1) * s->d[2] + 1;
}

/* Derives the launch layout of a knob set (check() decides whether it is valid). */
static void layout_of(const struct pool_spec *s, const struct knob_set *k,
                      struct pool_layout *l) {
  *l = (struct pool_layout){0};
  l->idx64 = s->numel > IDX32_LIMIT || is_mode(k, "idx64");
  bool whole = is_mode(k, "smem_tile") || is_mode(k, "pad_smem");
  l->staged = !is_mode(k, "thread_per_output");
  int items = k->items > 0 ? k->items : 1;
  l->tx = s->out[1] == 1 ? pow2_at_least(s->out[2], k->block)
                         : pow2_at_least(s->out[2], k->block < 32 ? k->block : 32);
  l->ty = k->block / l->tx;
  l->wi = 1;
  int pad = is_mode(k, "pad_smem") ? 1 : 0;
  for (;;) {
    tile_dims(s, l->ty * items, l->tx * l->wi, &l->iht, &l->iwt);
    long long bytes = (long long)l->iht * (l->iwt + pad) * 4;
    int iht2, iwt2;
    tile_dims(s, l->ty * items, l->tx * l->wi * 2, &iht2, &iwt2);
    if (l->wi >= 16 || (long long)l->tx * l->wi >= s->out[2] || bytes >= STAGE_TARGET ||
        (long long)iht2 * (iwt2 + pad) * 4 > WHOLE_TILE)
      break;
    l->wi *= 2;
  }
  l->srow = l->iwt + pad;
  long long whole_bytes = (long long)l->iht * l->srow * 4;
  l->whole = whole;
  if (whole || whole_bytes <= WHOLE_TILE)
    l->ch = l->iht;
  else
    l->ch = (int)(CHUNK_BYTES / (l->srow * 4)) > 0 ? (int)(CHUNK_BYTES / (l->srow * 4)) : 1;
  if (!whole && (long long)l->ch * l->srow * 4 > STATIC_SMEM)
    l->staged = false; /* a single staged row would not fit: read windows directly */
  l->ntw = cdiv(s->out[2], (long long)l->tx * l->wi);
  l->nth = cdiv(s->out[1], (long long)l->ty * items);
  l->blocks = l->ntw * l->nth * s->out[0] * s->planes;
  l->rows = s->planes * s->out[0] * s->out[1];
  l->gy = l->rows < 65535 ? l->rows : 65535;
}

static void pool_defaults(json_t *match, struct knob_set *ret_knobs) {
  struct pool_spec s;
  struct knob_set k = {.block = 256, .vec = 1, .items = 1};
  if (spec_from_json(match, &s) == 0) {
    k.vec = s.in[2] % 4 == 0 ? 4 : s.in[2] % 2 == 0 ? 2 : 1;
    /* A strip of output rows per thread when windows overlap vertically. */
    k.items = s.out[1] >= 8 && overlapping(&s, 1) ? 4 : 1;
    /* Windows that share no input (stride >= window in every axis): staging buys no
     * reuse and adds a pass through shared memory, while one thread per output streams
     * the input once, at the memory-bandwidth floor. */
    if (!overlapping(&s, 0) && !overlapping(&s, 1) && !overlapping(&s, 2))
      snprintf(k.mode, sizeof k.mode, "thread_per_output");
  }
  *ret_knobs = k;
}

/* MODE values pooling accepts, and why the others do not apply. */
static int check_mode(const struct pool_spec *s, const struct knob_set *k, char *why,
                      size_t whylen) {
  static const char *const ok[] = {"", "smem_tile", "pad_smem", "thread_per_output", "ldg"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (is_mode(k, ok[i]))
      return 0;
  if (is_mode(k, "recip_mul") && !s->max && !s->conv)
    return 0;
  if (is_mode(k, "idx64") && s->numel <= IDX32_LIMIT)
    return 0;
  if (is_mode(k, "recip_mul"))
    snprintf(why, whylen, "%s divides nothing: recip_mul applies to average pooling",
             s->conv ? "a depthwise convolution" : "max pooling");
  else if (is_mode(k, "idx64"))
    snprintf(why, whylen, "indices are already 64-bit: a tensor has %lld >= 2^31 elements",
             s->numel);
  else if (is_mode(k, "idx32"))
    snprintf(why, whylen, s->numel > IDX32_LIMIT
                              ? "32-bit indices cannot address a tensor of %lld elements"
                              : "indices are already 32-bit for %lld elements (the default)",
             s->numel);
  else if (is_mode(k, "inner_coalesced"))
    snprintf(why, whylen, "the pooling window includes the contiguous axis (W); threadIdx.x "
                          "already walks the output width");
  else if (is_mode(k, "predicated_tail"))
    snprintf(why, whylen, "every pooling tile is already bounds-checked per element");
  else
    snprintf(why, whylen, "MODE %s does not apply to pooling", k->mode);
  return -1;
}

static int pool_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  struct pool_spec s;
  if (spec_from_json(match, &s) != 0) {
    snprintf(why, whylen, "not a pooling match");
    return -1;
  }
  if (check_mode(&s, k, why, whylen) != 0)
    return -1;
  if (k->block % 32 != 0 || k->block < 32 || k->block > 1024) {
    snprintf(why, whylen, "BLOCK=%d must be a multiple of 32 in [32, 1024]", k->block);
    return -1;
  }
  if ((k->vec != 1 && k->vec != 2 && k->vec != 4) || s.in[2] % k->vec != 0) {
    snprintf(why, whylen, "VEC=%d: input rows of %lld floats need VEC in {1, 2, 4} dividing "
                          "them", k->vec, s.in[2]);
    return -1;
  }
  struct pool_layout l;
  layout_of(&s, k, &l);
  if (k->items < 1 || k->items * l.wi > 64) {
    snprintf(why, whylen, "ITEMS=%d x %d columns: at most 64 accumulators per thread",
             k->items, l.wi);
    return -1;
  }
  if (is_mode(k, "smem_tile") && !overlapping(&s, 1) && !overlapping(&s, 2)) {
    snprintf(why, whylen, "windows do not overlap (stride >= window extent): a halo tile "
                          "saves no reads");
    return -1;
  }
  long long smem = (long long)l.ch * l.srow * 4;
  if (l.staged && smem > STATIC_SMEM) {
    snprintf(why, whylen, "the staged tile needs %lld bytes of shared memory, over 48 KiB",
             smem);
    return -1;
  }
  if (k->minb > 0 && (k->block * k->minb > 2048 ||
                      65536 / (k->block * k->minb) < 32 + k->items * l.wi)) {
    snprintf(why, whylen, "__launch_bounds__(%d, %d) leaves too few registers per thread",
             k->block, k->minb);
    return -1;
  }
  if (l.staged ? l.blocks > MAX_GRID : cdiv(s.out[2], k->block) > MAX_GRID) {
    snprintf(why, whylen, "%lld blocks exceed the grid limit", l.blocks);
    return -1;
  }
  return 0;
}

/* ---- generation ----------------------------------------------------------------------- */

/* Appends the extra parameter list (with types when typed) of the chains' tensors other
 * than x: "qa<i>" for prologue leaf i, "qb<i>" for epilogue leaf i. */
static void chain_params(const struct pool_spec *s, bool typed, struct cg_buf *b) {
  const json_t *lists[2] = {json_object_get(s->pre, "leaves"), json_object_get(s->post, "leaves")};
  for (int l = 0; l < 2; l++)
    for (size_t i = 0; i < json_array_size(lists[l]); i++) {
      if (l == 0 && (int)i == s->xleaf)
        continue;
      const char *dt = json_string_value(json_object_get(json_array_get(lists[l], i), "dtype"));
      if (typed)
        cg_printf(b, " , const %s* __restrict__ q%c%zu", expr_ctype(dt), l ? 'b' : 'a', i);
      else
        cg_printf(b, " , q%c%zu", l ? 'b' : 'a', i);
    }
}

/* The kernel's extra parameters (with types when typed): a convolution's weights qw and
 * bias qbias, then the chains' tensors (chain_params). */
static void extra_params(const struct pool_spec *s, bool typed, struct cg_buf *b) {
  if (s->conv)
    cg_printf(b, typed ? " , const float* __restrict__ qw" : " , qw");
  if (s->conv && s->b[0])
    cg_printf(b, typed ? " , const float* __restrict__ qbias" : " , qbias");
  chain_params(s, typed, b);
}

/* POOL_EXTRA_PARAMS/ARGS (extra_params), and the fused chains: POOL_PRE / POOL_POST over
 * ofg_pool_pre and ofg_pool_post with their other leaves loaded at the element's flat
 * index. 0, or -1. */
static int emit_chains(const struct pool_spec *s, struct cg_buf *b) {
  if (!s->pre && !s->post && !s->conv)
    return 0;
  cg_printf(b, "#define POOL_EXTRA_PARAMS");
  extra_params(s, true, b);
  cg_printf(b, "\n#define POOL_EXTRA_ARGS");
  extra_params(s, false, b);
  cg_printf(b, "\n");
  const char *sym = "P";
  for (int l = 0; l < 2; l++) {
    const json_t *ir = l ? s->post : s->pre;
    const char *var = l ? "e" : "xi";
    if (!ir)
      continue;
    if (expr_emit(ir, l ? "ofg_pool_post" : "ofg_pool_pre", l ? &sym : NULL, l ? 1 : 0, false,
                  b) != 0)
      return -1;
    cg_printf(b, "__device__ __forceinline__ float ofg_pool_%s_at(float v, idx_t %s "
                 "POOL_EXTRA_PARAMS) {\n  (void)%s;\n  return ofg_pool_%s(",
              l ? "post" : "pre", var, var, l ? "post" : "pre");
    size_t n = json_array_size(json_object_get(ir, "leaves"));
    for (size_t i = 0; i < n; i++) {
      char off[512];
      expr_leaf_offset(ir, i, var, off, sizeof off);
      if (l == 0 && (int)i == s->xleaf)
        cg_printf(b, "%sv", i ? ", " : "");
      else
        cg_printf(b, "%s(float)OFG_LD(q%c%zu + %s)", i ? ", " : "", l ? 'b' : 'a', i, off);
    }
    cg_printf(b, "%s);\n}\n#define POOL_%s(v, %s) ofg_pool_%s_at(v, %s POOL_EXTRA_ARGS)\n",
              l ? (n ? ", v" : "v") : "", l ? "POST" : "PRE", var, l ? "post" : "pre", var);
  }
  return b->failed ? -1 : 0;
}

/* The candidate source (caller frees): common.cuh, the POOL_* constants, pooling.cu. */
static char *build_source(const struct pool_spec *s, const struct pool_layout *l) {
  const char *tmpl = builtin_template("pooling.cu");
  struct cg_buf b = {0};
  if (!tmpl)
    return NULL;
  cg_printf(&b, "// opforge builtin pooling: %s\n", spec_op(s));
  if (cg_common(&b) != 0) {
    cg_free(&b);
    return NULL;
  }
  cg_printf(&b, "typedef %s idx_t;\n", l->idx64 ? "long long" : "int");
  static const char *const axis[] = {"D", "H", "W"};
  char name[32];
  for (int i = 0; i < 3; i++) {
    const long long vals[] = {s->k[i], s->s[i], s->p[i], s->d[i], s->in[i], s->out[i]};
    static const char *const what[] = {"K", "S", "P", "D", "I", "O"};
    for (int j = 0; j < 6; j++) {
      snprintf(name, sizeof name, "POOL_%s%s", what[j], axis[i]);
      cg_define_ll(&b, name, vals[j]);
    }
  }
  cg_printf(&b, "#define POOL_MAX %d\n#define POOL_COUNT_PAD %d\n#define POOL_STAGED %d\n"
                "#define POOL_WHOLE_TILE %d\n",
            s->max, s->count_pad, l->staged, l->whole);
  cg_define_ll(&b, "POOL_DIVISOR", s->divisor);
  cg_printf(&b, "#define POOL_CONV %d\n#define POOL_CONV_BIAS %d\n", s->conv,
            s->conv && s->b[0]);
  cg_define_ll(&b, "POOL_C", s->conv ? s->channels : 1);
  cg_define_ll(&b, "POOL_ROWS", l->rows);
  cg_define_ll(&b, "POOL_TX", l->tx);
  cg_define_ll(&b, "POOL_TY", l->ty);
  cg_define_ll(&b, "POOL_WI", l->wi);
  cg_define_ll(&b, "POOL_CH", l->ch);
  cg_define_ll(&b, "POOL_IHT", l->iht);
  cg_define_ll(&b, "POOL_IWT", l->iwt);
  cg_define_ll(&b, "POOL_SROW", l->srow);
  cg_define_ll(&b, "POOL_NTW", l->ntw);
  cg_define_ll(&b, "POOL_NTH", l->nth);
  if (emit_chains(s, &b) != 0) {
    cg_free(&b);
    return NULL;
  }
  cg_printf(&b, "%s", tmpl);
  return cg_take(&b);
}

/* The launch plan (caller owns): pool_tile, or pool_direct for thread_per_output. */
static json_t *build_plan(const struct pool_spec *s, const struct knob_set *k,
                          const struct pool_layout *l) {
  json_t *args = json_pack("[{s:s}, {s:s}]", "tensor", s->x, "tensor", s->y);
  if (s->conv)
    json_array_append_new(args, json_pack("{s:s}", "tensor", s->w));
  if (s->conv && s->b[0])
    json_array_append_new(args, json_pack("{s:s}", "tensor", s->b));
  const json_t *lists[2] = {json_object_get(s->pre, "leaves"), json_object_get(s->post, "leaves")};
  for (int li = 0; li < 2; li++)
    for (size_t i = 0; i < json_array_size(lists[li]); i++)
      if (li == 1 || (int)i != s->xleaf)
        json_array_append_new(args, json_pack("{s:O}", "tensor",
                                              json_object_get(json_array_get(lists[li], i),
                                                              "tensor")));
  json_t *launch =
      l->staged ? json_pack("{s:s, s:[I,i,i], s:[i,i,i], s:i, s:o}", "kernel", "pool_tile",
                            "grid", l->blocks, 1, 1, "block", k->block, 1, 1, "shared_bytes", 0,
                            "args", args)
                : json_pack("{s:s, s:[I,I,i], s:[i,i,i], s:i, s:o}", "kernel", "pool_direct",
                            "grid", cdiv(s->out[2], k->block), l->gy, 1, "block", k->block, 1,
                            1, "shared_bytes", 0, "args", args);
  return json_pack("{s:[], s:[o]}", "buffers", "launches", launch);
}

static int pool_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                         char *why, size_t whylen) {
  struct pool_spec s;
  if (pool_check(match, k, why, whylen) != 0 || spec_from_json(match, &s) != 0)
    return -1;
  struct pool_layout l;
  layout_of(&s, k, &l);
  char *src = build_source(&s, &l);
  int rc = cg_candidate(src, k, src ? build_plan(&s, k, &l) : NULL,
                        "out of memory generating the pooling candidate", ret_candidate, why,
                        whylen);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_pooling = {
    .name = "pooling",
    .match = pool_match,
    .defaults = pool_defaults,
    .check = pool_check,
    .generate = pool_generate,
};
