/* The convolution family's matcher (see conv.h): one Conv/ConvTranspose module call, or
 * one conv<d>d / conv_transpose<d>d function call, on float32 tensors, whose output ends
 * the graph. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/conv.h"
#include "proposers/builtin/expr.h"

/* The convolution ops: module class, function name, spatial dims, transposed. */
struct conv_op {
  const char *module, *fn;
  int dims;
  bool transposed;
};
static const struct conv_op conv_ops[] = {
    {"Conv1d", "conv1d", 1, false},
    {"Conv2d", "conv2d", 2, false},
    {"Conv3d", "conv3d", 3, false},
    {"ConvTranspose1d", "conv_transpose1d", 1, true},
    {"ConvTranspose2d", "conv_transpose2d", 2, true},
    {"ConvTranspose3d", "conv_transpose3d", 3, true},
};

/* What the matcher reads off the call: window parameters per spatial dim (the last dims
 * of 3, leading ones 1 or 0), channels, groups and tensors. */
struct conv_spec {
  const struct conv_op *op;
  int k[3], s[3], p[3], d[3], op_pad[3];
  long long c, oc, groups, n, in[3], out[3];
  const char *x, *w, *b;
  const char *math; /* the profile's "conv_math" ("tf32", "fp32") or NULL; borrowed */
  bool same;        /* padding='same': p is derived from the window */
};

/* How eager ran node on the profiling device: its "conv_math", "tf32" or "fp32" (a string
 * node owns), or NULL when the profile does not say (a CPU profile) or says another thing. */
static const char *conv_math_of(json_t *node) {
  const char *math = json_string_value(json_object_get(node, "conv_math"));
  return math && (strcmp(math, "tf32") == 0 || strcmp(math, "fp32") == 0) ? math : NULL;
}

/* The convolution op node is, or NULL. */
static const struct conv_op *conv_op_of(json_t *node) {
  bool module = graph_is_module(node);
  for (size_t i = 0; i < sizeof conv_ops / sizeof conv_ops[0]; i++)
    if (graph_target_is(node, module ? conv_ops[i].module : conv_ops[i].fn))
      return &conv_ops[i];
  return NULL;
}

/* The tensor a call argument names: a float32 placeholder's "input:i" or a parameter's
 * "param:<key>" (borrowed from profile), or NULL; its shape into dims and rank into *rank. */
static const char *arg_tensor(json_t *profile, json_t *arg, long long dims[8], int *rank) {
  json_t *ref = expr_ref(profile, arg);
  const char *op = json_string_value(json_object_get(ref, "op"));
  const char *dt = json_string_value(json_object_get(ref, "dtype"));
  if (!op || !dt || strcmp(dt, "float32") != 0 ||
      (strcmp(op, "placeholder") != 0 && strcmp(op, "get_attr") != 0))
    return NULL;
  *rank = graph_shape(ref, dims);
  return json_string_value(json_object_get(ref, "tensor"));
}

/* padding: numbers into s->p, or 'valid' (zeros) or 'same' (s->same). 0, or -1. */
static int read_padding(json_t *v, struct conv_spec *s) {
  const char *text = json_string_value(v);
  if (!text)
    return builtin_read_tuple(v, s->op->dims, 0, 1 << 20, s->p);
  if (strcmp(text, "valid") == 0)
    return 0;
  s->same = strcmp(text, "same") == 0;
  return s->same && !s->op->transposed ? 0 : -1;
}

/* A module's window, channels, groups and parameters into s. 0, or -1 with why. */
static int read_module(json_t *node, struct conv_spec *s, char *why, size_t whylen) {
  int n = s->op->dims;
  json_t *mode = graph_attr(node, "padding_mode"), *g = graph_attr(node, "groups");
  if (mode && (!json_is_string(mode) || strcmp(json_string_value(mode), "zeros") != 0))
    return builtin_refuse(why, whylen, "%s: padding_mode other than 'zeros'", s->op->module);
  if (builtin_read_tuple(graph_attr(node, "kernel_size"), n, 1, 1 << 20, s->k) != 0 ||
      builtin_read_tuple(graph_attr(node, "stride"), n, 1, 1 << 20, s->s) != 0 ||
      builtin_read_tuple(graph_attr(node, "dilation"), n, 1, 1 << 20, s->d) != 0 ||
      builtin_read_tuple(graph_attr(node, "output_padding"), n, 0, 1 << 20, s->op_pad) != 0 ||
      read_padding(graph_attr(node, "padding"), s) != 0 || !json_is_integer(g))
    return builtin_refuse(why, whylen, "%s: kernel_size, stride, padding, dilation, "
                          "output_padding or groups malformed", s->op->module);
  s->groups = json_integer_value(g);
  s->c = json_integer_value(graph_attr(node, "in_channels"));
  s->oc = json_integer_value(graph_attr(node, "out_channels"));
  s->w = graph_module_param(node, "weight");
  s->b = json_is_true(graph_attr(node, "bias")) ? graph_module_param(node, "bias") : NULL;
  if (!s->w || (json_is_true(graph_attr(node, "bias")) && !s->b))
    return builtin_refuse(why, whylen, "%s: its weight or bias is not a parameter",
                          s->op->module);
  return 0;
}

/* A function call's weight, bias, window, groups into s (channels from the weight). 0, or
 * -1 with why. */
static int read_function(json_t *profile, json_t *node, struct conv_spec *s, char *why,
                         size_t whylen) {
  int n = s->op->dims, rank = -1, brank = -1;
  long long w[8], b[8];
  s->w = arg_tensor(profile, graph_arg(node, 1, "weight"), w, &rank);
  json_t *bias = graph_arg(node, 2, "bias");
  s->b = bias && !json_is_null(bias) ? arg_tensor(profile, bias, b, &brank) : NULL;
  if (!s->w || rank != n + 2 || (bias && !json_is_null(bias) && (!s->b || brank != 1)))
    return builtin_refuse(why, whylen, "%s: the weight must be a float32 tensor of rank %d "
                          "and the bias one of rank 1", s->op->fn, n + 2);
  bool t = s->op->transposed;
  json_t *g = graph_arg(node, 6, "groups");
  s->groups = !g || json_is_null(g) ? 1 : json_is_integer(g) ? json_integer_value(g) : 0;
  if (builtin_read_tuple(graph_arg(node, 3, "stride"), n, 1, 1 << 20, s->s) != 0 ||
      read_padding(graph_arg(node, 4, "padding"), s) != 0 ||
      builtin_read_tuple(graph_arg(node, t ? 7 : 5, "dilation"), n, 1, 1 << 20, s->d) != 0 ||
      (t && builtin_read_tuple(graph_arg(node, 5, "output_padding"), n, 0, 1 << 20,
                               s->op_pad) != 0) ||
      s->groups < 1)
    return builtin_refuse(why, whylen, "%s: stride, padding, dilation, output_padding or "
                          "groups malformed", s->op->fn);
  for (int i = 0; i < n; i++)
    s->k[3 - n + i] = (int)w[2 + i];
  s->oc = t ? w[1] * s->groups : w[0];
  s->c = t ? w[0] : w[1] * s->groups;
  return 0;
}

/* The spatial output size PyTorch computes for dim i (of 3). */
static long long expected_out(const struct conv_spec *s, int i) {
  long long span = (long long)s->d[i] * (s->k[i] - 1);
  if (s->op->transposed)
    return (s->in[i] - 1) * s->s[i] - 2LL * s->p[i] + span + s->op_pad[i] + 1;
  return (s->in[i] + 2LL * s->p[i] - span - 1) / s->s[i] + 1;
}

/* The input's and output's shapes into s, checked against the window: 0, or -1 with why. */
static int read_shapes(json_t *profile, json_t *node, struct conv_spec *s, char *why,
                       size_t whylen) {
  int n = s->op->dims, rank = -1;
  long long x[8], y[8];
  s->x = arg_tensor(profile, graph_arg(node, 0, "input"), x, &rank);
  if (!s->x || strncmp(s->x, "input:", 6) != 0 || (rank != n + 1 && rank != n + 2) ||
      graph_shape(node, y) != rank)
    return builtin_refuse(why, whylen, "%s: the input must be a float32 tensor of rank %d or "
                          "%d", s->op->fn, n + 1, n + 2);
  int lead = rank - n;
  s->n = lead == 2 ? x[0] : 1;
  if (x[lead - 1] != s->c || y[lead - 1] != s->oc || (lead == 2 && y[0] != s->n))
    return builtin_refuse(why, whylen, "%s: the input's or output's channels are not the "
                          "weight's", s->op->fn);
  for (int i = 0; i < 3; i++) {
    int gi = i - (3 - n);
    s->in[i] = gi >= 0 ? x[lead + gi] : 1;
    s->out[i] = gi >= 0 ? y[lead + gi] : 1;
    if (s->same)
      s->p[i] = s->d[i] * (s->k[i] - 1) / 2;
    long long want = s->same ? s->in[i] : expected_out(s, i);
    if (s->out[i] != want || s->out[i] < 1)
      return builtin_refuse(why, whylen, "%s: the output's size %lld does not follow from the "
                            "input and the window (%lld)", s->op->fn, s->out[i], want);
  }
  return 0;
}

/* Sizes the kernel's int arithmetic and grid hold: 0, or -1 with why. */
static int check_limits(const struct conv_spec *s, char *why, size_t whylen) {
  long long taps = (long long)s->k[0] * s->k[1] * s->k[2];
  long long osp = s->out[0] * s->out[1] * s->out[2], isp = s->in[0] * s->in[1] * s->in[2];
  if (s->groups < 1 || s->groups > 65535 || s->c % s->groups != 0 || s->oc % s->groups != 0)
    return builtin_refuse(why, whylen, "groups must divide the channels and be at most 65535");
  if (taps * (s->c / s->groups) > INT_MAX / 2 || osp > INT_MAX / 2 || isp > INT_MAX / 2 ||
      s->n * osp > (long long)INT_MAX * 64)
    return builtin_refuse(why, whylen, "a convolution of this size overflows the kernel's "
                          "32-bit indices");
  return 0;
}

/* "a x b x c" of the last n of v into out. */
static void dims_text(const int v[3], int n, char *out, size_t len) {
  size_t used = 0;
  for (int i = 3 - n; i < 3 && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%d", i > 3 - n ? "x" : "", v[i]);
}

/* The match object of s (caller owns), NULL when out of memory. */
static json_t *conv_match_object(json_t *profile, const struct conv_spec *s) {
  char k[40], st[40], p[40], d[40], summary[256];
  int n = s->op->dims;
  dims_text(s->k, n, k, sizeof k);
  dims_text(s->s, n, st, sizeof st);
  dims_text(s->p, n, p, sizeof p);
  dims_text(s->d, n, d, sizeof d);
  snprintf(summary, sizeof summary, "%s %lld->%lld kernel %s stride %s padding %s dilation %s "
           "groups %lld%s, batch %lld",
           s->op->fn, s->c, s->oc, k, st, p, d, s->groups, s->b ? ", bias" : "", s->n);
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s, s:i, s:b, s:I, s:I, s:I, s:I,"
                   " s:[I,I,I], s:[I,I,I], s:[i,i,i], s:[i,i,i], s:[i,i,i], s:[i,i,i], s:i, s:s?}",
                   "family", "gemm", "op", s->op->fn, "summary", summary, "x", s->x, "w", s->w,
                   "b", s->b, "output", "output:0", "dims", n, "transposed", s->op->transposed,
                   "n", (json_int_t)s->n, "c", (json_int_t)s->c, "oc", (json_int_t)s->oc,
                   "groups", (json_int_t)s->groups, "in", (json_int_t)s->in[0],
                   (json_int_t)s->in[1], (json_int_t)s->in[2], "out", (json_int_t)s->out[0],
                   (json_int_t)s->out[1], (json_int_t)s->out[2], "kernel", s->k[0], s->k[1],
                   s->k[2], "stride", s->s[0], s->s[1], s->s[2], "padding", s->p[0], s->p[1],
                   s->p[2], "dilation", s->d[0], s->d[1], s->d[2], "sm_count",
                   builtin_sm_count(profile), "math", s->math);
}

int conv_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  json_t *calls = graph_calls(profile);
  json_t *node = json_array_size(calls) == 1 ? json_array_get(calls, 0) : NULL;
  const struct conv_op *op = node ? conv_op_of(node) : NULL;
  json_decref(calls);
  if (!op || expr_output_node(profile) != node) {
    snprintf(why, whylen, "not a single convolution");
    return 0;
  }
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  const char *odt = json_string_value(json_object_get(out, "dtype"));
  if (json_array_size(json_object_get(profile, "outputs")) != 1 || !odt ||
      strcmp(odt, "float32") != 0)
    return builtin_refuse(why, whylen, "%s must make one float32 output", op->fn);
  struct conv_spec s = {.op = op, .math = conv_math_of(node)};
  for (int i = 0; i < 3; i++)
    s.k[i] = s.s[i] = s.d[i] = 1;
  int rc = graph_is_module(node) ? read_module(node, &s, why, whylen)
                                 : read_function(profile, node, &s, why, whylen);
  if (rc != 0 || read_shapes(profile, node, &s, why, whylen) != 0 ||
      check_limits(&s, why, whylen) != 0)
    return -1;
  return graph_match_result(conv_match_object(profile, &s), ret_match, why, whylen);
}
