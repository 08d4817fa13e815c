/* What a reduction node computes, read from the FX graph (reduce_call_of, with the global
 * adaptive pools as means and maxima), and its canonical [outer, R, inner] shape: the
 * helpers the reduction, norm and softmax families share (see reduction.h). */
#include <math.h>
#include <stdio.h>
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
                                    "all", "any", "aminmax", "var_mean", "std_mean",
                                    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
                                    "adaptive_avg_pool1d", "adaptive_avg_pool2d",
                                    "adaptive_avg_pool3d", "AdaptiveMaxPool1d",
                                    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
                                    "adaptive_max_pool1d", "adaptive_max_pool2d",
                                    "adaptive_max_pool3d"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(t, ops[i]) == 0)
      return true;
  return false;
}

const char *reduce_row_mapping(long long r) {
  return r <= 1024 ? "warp" : "block";
}

/* ---- reduction calls ---- */

/* The spatial dims of an adaptive pool (1, 2 or 3), or 0 when t is not one. */
static int adaptive_dims(const char *t) {
  if (strncmp(t, "Adaptive", 8) == 0 && strlen(t) == 17)
    return t[15] - '0';
  if (strncmp(t, "adaptive_", 9) == 0 && strlen(t) == 19)
    return t[17] - '0';
  return 0;
}

/* True when the adaptive pool's output size is 1 along every pooled dim (a global
 * pool: a mean or max over the trailing dims), or unset dims (None) keep the input's. */
static bool adaptive_global(json_t *node) {
  json_t *os = graph_param(node, 1, "output_size");
  size_t n = json_is_array(os) ? json_array_size(os) : 1;
  for (size_t i = 0; i < n; i++) {
    json_t *d = json_is_array(os) ? json_array_get(os, i) : os;
    if (!json_is_integer(d) || json_integer_value(d) != 1)
      return false;
  }
  return os != NULL && !json_is_true(graph_param(node, 2, "return_indices"));
}

bool reduce_node_is_reduction(json_t *node) {
  const char *t = expr_target(node);
  if (!reduce_is_reduction_op(t))
    return false;
  if (adaptive_dims(t))
    return adaptive_global(node);
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

void reduce_call_clear(struct reduce_call *s) {
  json_decref(s->owned);
  s->owned = NULL;
}

int reduce_call_of(json_t *node, struct reduce_call *s, char *why, size_t whylen) {
  const char *t = expr_target(node);
  *s = (struct reduce_call){.op = t};
  int ad = adaptive_dims(t);
  if (ad) {
    /* A global adaptive pool: a mean or max over its trailing dims, kept as size 1. */
    if (!adaptive_global(node)) {
      snprintf(why, whylen, "%s to an output size other than 1", t);
      return -1;
    }
    s->owned = ad == 1 ? json_pack("[i]", -1) : ad == 2 ? json_pack("[i,i]", -2, -1)
                                                        : json_pack("[i,i,i]", -3, -2, -1);
    s->dims = s->owned;
    s->keepdim = true;
    s->op = strstr(t, "Max") || strstr(t, "max") ? "max" : "mean";
    return s->owned ? 0 : -1;
  }
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

