/* The builtin scan family: matches cumsum/cumprod graphs and generates scan.cu candidates.
 * It is a little longer than 800 lines: the matcher reads every spelling of a scan
 * (reverse by flip, exclusive by pad or by cat on the output side, narrow or slice
 * prefixes, masks) into the one scan_spec the generator reads, and that spec stays
 * private to this file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"
#include "proposers/builtin/scan.h"

#define IDX32_LIMIT 2147483647LL
#define MAX_GRID 2147483647LL

/* What the matcher found, in canonical form. */
struct scan_spec {
  bool prod;
  int dim;
  long long outer, r, inner;   /* input as [outer, r, inner] */
  long long rows_out, r_out;   /* output rows (a prefix of outer) and scanned length */
  bool reverse;
  int excl;                    /* 0 none, 1 pad, 2 sub_self */
  double pad_value;
  int mask;                    /* 0 none, 1 bool, 2 float */
  char x[32], m[32], out[32];
  long long numel;
  long long xdims[8];          /* the scanned input's shape */
  int xrank;
  int sm_count;                /* the device's SMs (builtin_sm_count): sizes default grids */
};

/* How a knob set is realised for a spec (derived, never stored). */
struct scan_layout {
  int kind;                    /* 0 rows, 1 split (two-level), 2 look-back, 3 columns */
  long long k;                 /* logical input elements scanned per row */
  int w;                       /* warps per row group */
  long long nchunk, chunk;     /* split / look-back tiles per row and their length */
  int tx, ty;                  /* column kernel block shape */
  long long ctiles;            /* column tiles per outer index */
  bool idx64;
};

static const char *const excl_names[] = {"none", "pad", "sub_self"};
static const char *const mask_names[] = {"none", "bool", "float"};

/* ---- graph helpers ------------------------------------------------------------------ */

static const char *node_name(json_t *node) {
  return json_string_value(json_object_get(node, "name"));
}

/* A dim argument (int, or a one-element list) normalized against rank; -1 if invalid. */
static int dim_value(json_t *v, int rank) {
  if (json_is_array(v) && json_array_size(v) == 1)
    v = json_array_get(v, 0);
  if (!json_is_integer(v))
    return -1;
  long long d = json_integer_value(v);
  if (d < 0)
    d += rank;
  return d >= 0 && d < rank ? (int)d : -1;
}

/* ---- matching ----------------------------------------------------------------------- */

/* A flip of exactly dim `dim`: returns its input node, else NULL. */
static json_t *flip_input(json_t *profile, json_t *node, int dim, int rank) {
  if (!node || !graph_is_call(node) || !graph_target_is(node, "flip"))
    return NULL;
  json_t *dims = graph_arg(node, 1, "dims");
  return dim_value(dims, rank) == dim ? graph_ref(profile, graph_arg(node, 0, "input")) : NULL;
}

static bool same_shape(json_t *a, json_t *b) {
  return json_equal(json_object_get(a, "shape"), json_object_get(b, "shape"));
}

/* The scanned data: a float32 input, or x * mask of two same-shape inputs. Marks the
 * nodes it uses in seen. Returns 0, or -1 with why. */
static int match_data(json_t *profile, json_t *node, json_t *seen, struct scan_spec *s,
                      char *why, size_t whylen) {
  const char *t = graph_input_tensor(node, "float32");
  if (t) {
    snprintf(s->x, sizeof s->x, "%s", t);
    s->xrank = graph_shape(node, s->xdims);
    return 0;
  }
  if (!node || !graph_is_call(node) || !graph_target_is(node, "mul")) {
    snprintf(why, whylen, "scan of %s: only an input tensor or input * mask is supported",
             node ? json_string_value(json_object_get(node, "target")) : "a constant");
    return -1;
  }
  json_object_set_new(seen, node_name(node), json_true());
  json_t *a = graph_ref(profile, graph_arg(node, 0, "input"));
  json_t *b = graph_ref(profile, graph_arg(node, 1, "other"));
  if (a && b && graph_input_tensor(b, "float32") && !graph_input_tensor(a, "float32")) {
    json_t *tmp = a;
    a = b;
    b = tmp;
  }
  const char *ta = a ? graph_input_tensor(a, "float32") : NULL;
  const char *tb = b ? (graph_input_tensor(b, "bool") ? graph_input_tensor(b, "bool")
                                                       : graph_input_tensor(b, "float32"))
                     : NULL;
  if (!ta || !tb || !same_shape(a, b) || !same_shape(a, node)) {
    snprintf(why, whylen, "masked scan: the mask must be a bool or float32 input of the "
                          "data's shape (no broadcasting)");
    return -1;
  }
  snprintf(s->x, sizeof s->x, "%s", ta);
  snprintf(s->m, sizeof s->m, "%s", tb);
  s->xrank = graph_shape(a, s->xdims);
  s->mask = graph_input_tensor(b, "bool") ? 1 : 2;
  return 0;
}

/* Shape-only producers of the cat's zero block (select, unsqueeze, slices of x): marks
 * them seen. Returns 0 when the chain ends at a placeholder, else -1. */
static int mark_shape_chain(json_t *profile, json_t *node, json_t *seen) {
  for (int depth = 0; node && depth < 8; depth++) {
    if (!graph_is_call(node))
      return strcmp(json_string_value(json_object_get(node, "op")), "placeholder") == 0 ? 0
                                                                                       : -1;
    static const char *const ok[] = {"select", "unsqueeze", "getitem", "narrow", "view",
                                     "reshape"};
    bool known = false;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
      known = known || graph_target_is(node, ok[i]);
    if (!known)
      return -1;
    json_object_set_new(seen, node_name(node), json_true());
    node = graph_ref(profile, graph_arg(node, 0, "input"));
  }
  return -1;
}

/* A prefix slice {"slice":[null|0, stop, null|1]} or null (whole dim). */
static bool prefix_slice(json_t *sl) {
  if (json_is_null(sl))
    return true;
  json_t *v = json_object_get(sl, "slice");
  if (!json_is_array(v) || json_array_size(v) != 3)
    return false;
  json_t *start = json_array_get(v, 0), *step = json_array_get(v, 2);
  return (json_is_null(start) || (json_is_integer(start) && json_integer_value(start) == 0)) &&
         (json_is_null(step) || (json_is_integer(step) && json_integer_value(step) == 1));
}

/* getitem of prefix slices over the cat: only dim 0 (rows) and the scanned dim may
 * shrink. Returns the cat node, or NULL with why. */
static json_t *match_slice(json_t *profile, json_t *node, int dim, char *why, size_t whylen) {
  json_t *idx = graph_arg(node, 1, NULL);
  json_t *src = graph_ref(profile, graph_arg(node, 0, NULL));
  bool ok = src != NULL;
  if (json_is_array(idx)) {
    json_t *sl;
    size_t i;
    json_array_foreach(idx, i, sl) ok = ok && prefix_slice(sl);
  } else {
    ok = ok && json_is_object(idx) && prefix_slice(idx);
  }
  long long a[8], b[8];
  int ra = ok ? graph_shape(src, a) : -1, rb = ok ? graph_shape(node, b) : -1;
  ok = ok && ra == rb && ra > 0;
  for (int i = 0; ok && i < ra; i++)
    ok = a[i] == b[i] || i == dim || (i == 0 && dim > 0);
  if (!ok) {
    snprintf(why, whylen, "exclusive scan: only prefix slices of dim 0 and the scanned dim "
                          "are supported");
    return NULL;
  }
  return src;
}

/* cat((zeros_like|ones_like(z), x), dim) [optionally sliced]: the exclusive form. */
static int match_pad(json_t *profile, json_t *node, json_t *seen, struct scan_spec *s,
                     char *why, size_t whylen) {
  long long xs[8];
  json_t *cat = node;
  if (graph_target_is(node, "getitem")) {
    json_object_set_new(seen, node_name(node), json_true());
    if (!(cat = match_slice(profile, node, s->dim, why, whylen)))
      return -1;
  }
  json_t *parts = graph_arg(cat, 0, "tensors");
  int cat_rank = graph_shape(cat, xs);
  json_t *pad = json_array_size(parts) == 2 ? graph_ref(profile, json_array_get(parts, 0)) : NULL;
  json_t *x = json_array_size(parts) == 2 ? graph_ref(profile, json_array_get(parts, 1)) : NULL;
  const char *pad_dt = json_string_value(json_object_get(pad, "dtype"));
  bool like = pad && graph_is_call(pad) && pad_dt && strcmp(pad_dt, "float32") == 0 &&
              (graph_target_is(pad, "zeros_like") || graph_target_is(pad, "ones_like"));
  long long ps[8];
  bool ok = (graph_target_is(cat, "cat") || graph_target_is(cat, "concat")) && like && x &&
            cat_rank > 0 && dim_value(graph_arg(cat, 1, "dim"), cat_rank) == s->dim &&
            graph_shape(pad, ps) == cat_rank && ps[s->dim] == 1;
  if (!ok ||
      mark_shape_chain(profile, graph_ref(profile, graph_arg(pad, 0, "input")), seen) != 0) {
    snprintf(why, whylen, "exclusive scan: expected cat((zeros_like(..) or ones_like(..), x), "
                          "dim=%d) in front of the scan", s->dim);
    return -1;
  }
  json_object_set_new(seen, node_name(cat), json_true());
  json_object_set_new(seen, node_name(pad), json_true());
  s->excl = 1;
  s->pad_value = graph_target_is(pad, "ones_like") ? 1.0 : 0.0;
  return match_data(profile, x, seen, s, why, whylen);
}

/* The single cumsum/cumprod call (borrowed): 0 none, 1 found, -1 several. */
static int find_scan(json_t *calls, json_t **ret_scan) {
  int n = 0;
  size_t i;
  json_t *node;
  json_array_foreach(calls, i, node) {
    if (graph_target_is(node, "cumsum") || graph_target_is(node, "cumprod")) {
      *ret_scan = node;
      n++;
    }
  }
  return n > 1 ? -1 : n;
}

/* What follows the scan: nothing, flip(dim) (reverse), or - its own input (sub_self).
 * Returns 0, or -1 with why. Sets s->reverse (output side) and s->excl. */
static int match_tail(json_t *profile, json_t *top, json_t *scan, json_t *seen,
                      struct scan_spec *s, bool *ret_flip_out, char *why, size_t whylen) {
  long long d[8];
  int rank = graph_shape(scan, d);
  *ret_flip_out = false;
  if (top == scan)
    return 0;
  if (top && flip_input(profile, top, s->dim, rank) == scan) {
    json_object_set_new(seen, node_name(top), json_true());
    *ret_flip_out = true;
    return 0;
  }
  json_t *scan_in = graph_ref(profile, graph_arg(scan, 0, "input"));
  if (top && graph_is_call(top) && graph_target_is(top, "sub") &&
      graph_ref(profile, graph_arg(top, 0, "input")) == scan &&
      graph_ref(profile, graph_arg(top, 1, "other")) == scan_in && same_shape(top, scan)) {
    json_object_set_new(seen, node_name(top), json_true());
    s->excl = 2;
    return 0;
  }
  snprintf(why, whylen, "scan followed by %s: only flip (reverse) or subtracting the scanned "
                        "input (exclusive) are supported",
           top ? json_string_value(json_object_get(top, "target")) : "a non-tensor output");
  return -1;
}

/* The scan's operand: flip (reverse), the exclusive cat form, or the data itself. */
static int match_head(json_t *profile, json_t *scan, json_t *seen, struct scan_spec *s,
                      bool flip_out, char *why, size_t whylen) {
  long long d[8];
  int rank = graph_shape(scan, d);
  json_t *in = graph_ref(profile, graph_arg(scan, 0, "input"));
  json_t *unflipped = flip_input(profile, in, s->dim, rank);
  if (unflipped) {
    json_object_set_new(seen, node_name(in), json_true());
    in = unflipped;
  }
  if ((unflipped != NULL) != flip_out) {
    snprintf(why, whylen, "reverse scan: flip(dim=%d) must come both before and after the "
                          "scan", s->dim);
    return -1;
  }
  s->reverse = flip_out;
  if (in && graph_is_call(in) &&
      (graph_target_is(in, "getitem") || graph_target_is(in, "cat") ||
       graph_target_is(in, "concat"))) {
    if (s->reverse || s->excl) {
      snprintf(why, whylen, "exclusive scan combined with reverse or subtraction");
      return -1;
    }
    return match_pad(profile, in, seen, s, why, whylen);
  }
  return match_data(profile, in, seen, s, why, whylen);
}

/* cat((zeros_like|ones_like(z), scan), dim) as the output: the exclusive scan written on
 * the output side, equal to the pad form when the pad is the scan's identity (0 for
 * cumsum, 1 for cumprod). 1 when top is that cat (s->excl set), 0 when top is no cat, -1
 * with why. */
static int match_out_pad(json_t *profile, json_t *top, json_t *scan, json_t *seen,
                         struct scan_spec *s, char *why, size_t whylen) {
  if (!top || !graph_is_call(top) ||
      !(graph_target_is(top, "cat") || graph_target_is(top, "concat")))
    return 0;
  json_t *parts = graph_arg(top, 0, "tensors");
  json_t *pad = json_array_size(parts) == 2 ? graph_ref(profile, json_array_get(parts, 0)) : NULL;
  json_t *second = json_array_size(parts) == 2 ? graph_ref(profile, json_array_get(parts, 1))
                                               : NULL;
  long long ts[8], ps[8];
  int rank = graph_shape(top, ts);
  const char *pad_dt = json_string_value(json_object_get(pad, "dtype"));
  bool ok = second == scan && pad && graph_is_call(pad) && pad_dt &&
            strcmp(pad_dt, "float32") == 0 && rank > 0 &&
            dim_value(graph_arg(top, 1, "dim"), rank) == s->dim &&
            graph_shape(pad, ps) == rank && ps[s->dim] == 1 &&
            (s->prod ? graph_target_is(pad, "ones_like") : graph_target_is(pad, "zeros_like"));
  if (!ok ||
      mark_shape_chain(profile, graph_ref(profile, graph_arg(pad, 0, "input")), seen) != 0) {
    snprintf(why, whylen, "exclusive scan: expected cat((%s(..), %s), dim=%d) after the scan",
             s->prod ? "ones_like" : "zeros_like", s->prod ? "cumprod" : "cumsum", s->dim);
    return -1;
  }
  json_object_set_new(seen, node_name(top), json_true());
  json_object_set_new(seen, node_name(pad), json_true());
  s->excl = 1;
  s->pad_value = s->prod ? 1.0 : 0.0;
  return 1;
}

/* The scanned operand of the output-side exclusive form: x.narrow(dim, 0, n - 1) or
 * x[..., :-1] of the data x (an input, or input * mask). 0, or -1 with why. */
static int match_prefix(json_t *profile, json_t *scan, json_t *seen, struct scan_spec *s,
                        char *why, size_t whylen) {
  json_t *in = graph_ref(profile, graph_arg(scan, 0, "input"));
  json_t *x = in && graph_is_call(in) ? graph_ref(profile, graph_arg(in, 0, "input")) : NULL;
  long long a[8], b[8];
  int ra = x ? graph_shape(x, a) : -1, rb = in ? graph_shape(in, b) : -1;
  bool ok = x && ra == rb && ra > s->dim && b[s->dim] == a[s->dim] - 1;
  for (int i = 0; ok && i < ra; i++)
    ok = i == s->dim || a[i] == b[i];
  if (ok && graph_target_is(in, "narrow")) {
    json_t *start = graph_arg(in, 2, "start");
    ok = dim_value(graph_arg(in, 1, "dim"), ra) == s->dim && json_is_integer(start) &&
         json_integer_value(start) == 0;
  } else if (ok && graph_target_is(in, "getitem")) {
    ok = match_slice(profile, in, s->dim, why, whylen) == x;
  } else {
    ok = false;
  }
  if (!ok) {
    snprintf(why, whylen, "exclusive scan: the scan must read x.narrow(%d, 0, n - 1) or a "
             "prefix slice of x when cat puts the pad after it", s->dim);
    return -1;
  }
  json_object_set_new(seen, node_name(in), json_true());
  return match_data(profile, x, seen, s, why, whylen);
}

/* Fills the canonical shape from the data and output shapes (of scan: the node giving the
 * output). Returns 0, or -1 with why. */
static int canonical(json_t *scan, struct scan_spec *s, char *why, size_t whylen) {
  long long o[8];
  int orank = graph_shape(scan, o);
  if (s->xrank <= 0 || orank != s->xrank || s->dim >= s->xrank) {
    snprintf(why, whylen, "scan: unknown or mismatched shapes");
    return -1;
  }
  s->outer = graph_dims_prod(s->xdims, 0, s->dim);
  s->r = s->xdims[s->dim];
  s->inner = graph_dims_prod(s->xdims, s->dim + 1, s->xrank);
  s->rows_out = graph_dims_prod(o, 0, s->dim);
  s->r_out = o[s->dim];
  bool ok = graph_dims_prod(o, s->dim + 1, orank) == s->inner && s->rows_out <= s->outer &&
            s->r > 0 && s->outer > 0 && s->inner > 0 && s->rows_out > 0;
  if (s->excl == 1)
    ok = ok && s->r_out >= 1 && s->r_out <= s->r + 1;
  else
    ok = ok && s->rows_out == s->outer && s->r_out == s->r;
  if (!ok) {
    snprintf(why, whylen, "scan: output shape does not follow from the input's");
    return -1;
  }
  long long nout = s->rows_out * s->r_out * s->inner, nin = s->outer * s->r * s->inner;
  s->numel = nout > nin ? nout : nin;
  return 0;
}

/* Every call of the graph must be part of the matched chain, but for the calls that make
 * no tensor (x.size(d) - 1 for narrow's length): the matched nodes' shapes, which the
 * profile records, are what they decide. */
static int all_seen(json_t *calls, json_t *seen, char *why, size_t whylen) {
  size_t i;
  json_t *node;
  json_array_foreach(calls, i, node) {
    if (json_is_null(json_object_get(node, "shape")) &&
        json_is_null(json_object_get(node, "dtype")))
      continue;
    if (!json_object_get(seen, node_name(node))) {
      snprintf(why, whylen, "unsupported op %s next to the scan",
               json_string_value(json_object_get(node, "target")));
      return -1;
    }
  }
  return 0;
}

/* The graph's single output node (borrowed), or NULL. */
static json_t *output_value(json_t *profile) {
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    if (op && strcmp(op, "output") == 0)
      return graph_ref(profile, graph_arg(node, 0, NULL));
  }
  return NULL;
}

/* Fills s from the profile: 1 matched, 0 not a scan, -1 a scan we cannot do. */
static int match_spec(json_t *profile, json_t *calls, json_t *seen, struct scan_spec *s,
                      char *why, size_t whylen) {
  json_t *scan = NULL;
  int found = find_scan(calls, &scan);
  if (found <= 0) {
    if (found < 0)
      snprintf(why, whylen, "more than one cumsum/cumprod in the graph");
    return found;
  }
  long long d[8];
  int rank = graph_shape(scan, d);
  json_t *dt = graph_arg(scan, 2, "dtype");
  const char *sdt = json_string_value(json_object_get(scan, "dtype"));
  s->dim = rank > 0 ? dim_value(graph_arg(scan, 1, "dim"), rank) : -1;
  if (s->dim < 0 || (dt && !json_is_null(dt)) || !sdt || strcmp(sdt, "float32") != 0 ||
      json_array_size(json_object_get(profile, "outputs")) != 1) {
    snprintf(why, whylen, "scan: needs a float32 result over one known dim, one output");
    return -1;
  }
  s->prod = graph_target_is(scan, "cumprod");
  json_object_set_new(seen, node_name(scan), json_true());
  bool flip_out;
  json_t *top = output_value(profile);
  int out_pad = match_out_pad(profile, top, scan, seen, s, why, whylen);
  if (out_pad < 0 ||
      (out_pad ? match_prefix(profile, scan, seen, s, why, whylen)
               : match_tail(profile, top, scan, seen, s, &flip_out, why, whylen) != 0 ||
                     match_head(profile, scan, seen, s, flip_out, why, whylen)) != 0 ||
      canonical(out_pad ? top : scan, s, why, whylen) != 0 ||
      all_seen(calls, seen, why, whylen) != 0)
    return -1;
  snprintf(s->out, sizeof s->out, "output:0");
  return 1;
}

/* The match object of a spec (caller owns), NULL when out of memory. */
static json_t *spec_to_json(const struct scan_spec *s) {
  json_t *t = json_pack("{s:s, s:s}", "x", s->x, "out", s->out);
  if (s->mask)
    json_object_set_new(t, "mask", json_string(s->m));
  char summary[256];
  snprintf(summary, sizeof summary, "%s%s%s%s over dim %d of [%lld, %lld, %lld]",
           s->reverse ? "reverse " : "", s->excl ? "exclusive " : "", s->mask ? "masked " : "",
           s->prod ? "cumprod" : "cumsum", s->dim, s->outer, s->r, s->inner);
  return json_pack("{s:s, s:s, s:s, s:[I,I,I], s:i, s:b, s:s, s:f, s:I, s:I, s:s, s:o, s:I, "
                   "s:i}",
                   "family", "scan", "op", s->prod ? "cumprod" : "cumsum", "summary", summary,
                   "canonical", s->outer, s->r, s->inner, "dim", s->dim, "reverse", s->reverse,
                   "exclusive", excl_names[s->excl], "pad_value", s->pad_value, "rows_out",
                   s->rows_out, "r_out", s->r_out, "mask", mask_names[s->mask], "tensors", t,
                   "numel", s->numel, "sm_count", s->sm_count);
}

static int scan_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  struct scan_spec s = {0};
  json_t *calls = graph_calls(profile), *seen = json_object();
  int rc = calls && seen ? match_spec(profile, calls, seen, &s, why, whylen) : -1;
  json_decref(calls);
  json_decref(seen);
  s.sm_count = builtin_sm_count(profile);
  return rc == 1 ? graph_match_result(spec_to_json(&s), ret_match, why, whylen) : rc;
}

/* Reads a match back. Returns 0, or -1 when it is not a scan match. */
static int spec_from_json(json_t *m, struct scan_spec *s) {
  const char *op = NULL, *excl = NULL, *mask = NULL, *x = NULL, *out = NULL, *mt = NULL;
  json_int_t outer, r, inner, rows_out, r_out, numel;
  int dim, reverse;
  double pad;
  *s = (struct scan_spec){0};
  if (json_unpack(m, "{s:s, s:[I,I,I], s:i, s:b, s:s, s:F, s:I, s:I, s:s, s:{s:s, s:s, s?s}, "
                     "s:I}",
                  "op", &op, "canonical", &outer, &r, &inner, "dim", &dim, "reverse", &reverse,
                  "exclusive", &excl, "pad_value", &pad, "rows_out", &rows_out, "r_out", &r_out,
                  "mask", &mask, "tensors", "x", &x, "out", &out, "mask", &mt, "numel",
                  &numel) != 0)
    return -1;
  *s = (struct scan_spec){.prod = strcmp(op, "cumprod") == 0, .dim = dim, .outer = outer,
                          .r = r, .inner = inner, .rows_out = rows_out, .r_out = r_out,
                          .reverse = reverse, .pad_value = pad, .numel = numel,
                          .sm_count = builtin_sm_count(m)};
  for (int i = 0; i < 3; i++) {
    if (strcmp(excl, excl_names[i]) == 0)
      s->excl = i;
    if (strcmp(mask, mask_names[i]) == 0)
      s->mask = i;
  }
  snprintf(s->x, sizeof s->x, "%s", x);
  snprintf(s->out, sizeof s->out, "%s", out);
  snprintf(s->m, sizeof s->m, "%s", mt ? mt : "");
  return s->mask && !mt ? -1 : 0;
}

/* ---- knobs ---------------------------------------------------------------------------- */

static long long cdiv(long long a, long long b) {
  return (a + b - 1) / b;
}

static bool is_mode(const struct knob_set *k, const char *m) {
  return strcmp(k->mode, m) == 0;
}

/* The widest vector the row (or column) layout admits. */
static int best_vec(const struct scan_spec *s) {
  if (s->inner > 1)
    return s->inner % 4 == 0 ? 4 : s->inner % 2 == 0 ? 2 : 1;
  if (s->excl == 1)
    return 1;
  return s->r % 4 == 0 ? 4 : s->r % 2 == 0 ? 2 : 1;
}

/* Derives the launch layout of a (checked) knob set. */
static void layout_of(const struct scan_spec *s, const struct knob_set *k,
                      struct scan_layout *l) {
  *l = (struct scan_layout){0};
  l->k = s->excl == 1 ? (s->r < s->r_out - 1 ? s->r : s->r_out - 1) : s->r;
  l->idx64 = s->numel > IDX32_LIMIT || is_mode(k, "idx64");
  long long wseg = 32LL * k->vec * k->items;
  if (s->inner > 1) {
    l->kind = 3;
    long long cols = cdiv(s->inner, k->vec);
    l->tx = 1;
    while (l->tx < 32 && l->tx < cols)
      l->tx *= 2;
    l->ty = k->block / l->tx;
    l->ctiles = cdiv(s->inner, (long long)l->tx * k->vec);
  } else if (is_mode(k, "decoupled_lookback")) {
    l->kind = 2;
    l->w = k->block / 32;
    l->chunk = l->w * wseg;
    l->nchunk = cdiv(l->k, l->chunk);
  } else if (k->split > 1 || is_mode(k, "two_level")) {
    l->kind = 1;
    l->w = k->block / 32;
    long long n = k->split > 1 ? k->split : cdiv(l->k, l->w * wseg);
    n = n > 1024 ? 1024 : n < 1 ? 1 : n;
    l->chunk = cdiv(cdiv(l->k, n), k->vec) * k->vec;
    l->nchunk = cdiv(l->k, l->chunk);
  } else {
    long long want = cdiv(l->k, wseg);
    int wmax = k->block / 32;
    l->w = 1;
    while (l->w * 2 <= wmax && l->w * 2 <= want && wmax % (l->w * 2) == 0)
      l->w *= 2;
  }
}

static void scan_defaults(json_t *match, struct knob_set *ret_knobs) {
  struct scan_spec s;
  struct knob_set k = {.block = 256, .vec = 1, .items = 8, .unroll = 1, .split = 1};
  if (spec_from_json(match, &s) == 0) {
    k.vec = best_vec(&s);
    k.items = s.inner > 1 ? 4 : k.vec == 4 ? 4 : 8;
    struct scan_layout l;
    layout_of(&s, &k, &l);
    /* Few long rows cannot fill the SMs with one group per row: split each row. */
    long long blocks = l.kind == 0 ? cdiv(s.rows_out, k.block / 32 / l.w) : 0;
    long long tile = 32LL * k.vec * k.items * (k.block / 32);
    if (l.kind == 0 && blocks < 2LL * s.sm_count && l.k >= 8 * tile) {
      long long split = cdiv(4LL * s.sm_count, s.rows_out);
      long long most = l.k / tile;
      k.split = (int)(split > most ? most : split > 1024 ? 1024 : split);
      if (k.split < 2)
        k.split = 1;
    }
  }
  *ret_knobs = k;
}

/* MODE values a scan accepts, and why the others do not apply. */
static int check_mode(const struct scan_spec *s, const struct knob_set *k, char *why,
                      size_t whylen) {
  if (!k->mode[0] || is_mode(k, "ldg"))
    return 0;
  if (is_mode(k, "two_level") || is_mode(k, "decoupled_lookback")) {
    if (s->inner == 1)
      return 0;
    snprintf(why, whylen, "MODE %s splits rows along the contiguous axis; this scan runs over "
                          "a strided axis (inner = %lld) and uses the column kernel",
             k->mode, s->inner);
  } else if (is_mode(k, "idx64")) {
    if (s->numel <= IDX32_LIMIT)
      return 0;
    snprintf(why, whylen, "indices are already 64-bit: a tensor has %lld >= 2^31 elements",
             s->numel);
  } else if (is_mode(k, "idx32")) {
    snprintf(why, whylen, s->numel > IDX32_LIMIT
                              ? "32-bit indices cannot address a tensor of %lld elements"
                              : "indices are already 32-bit for %lld elements (the default)",
             s->numel);
  } else if (is_mode(k, "inner_coalesced")) {
    snprintf(why, whylen, s->inner == 1 ? "the scanned axis is the contiguous one (inner = 1): "
                                          "rows are already read along threadIdx.x"
                                        : "the column kernel already maps threadIdx.x to the "
                                          "inner axis");
  } else if (is_mode(k, "pad_smem")) {
    snprintf(why, whylen, "the scan keeps its tiles in registers; shared memory holds only "
                          "per-warp totals, read without bank conflicts");
  } else if (is_mode(k, "predicated_tail")) {
    snprintf(why, whylen, "every scan tile is already predicated element by element");
  } else {
    snprintf(why, whylen, "MODE %s does not apply to scans", k->mode);
  }
  return -1;
}

/* Vector width and register checks. */
static int check_shape(const struct scan_spec *s, const struct knob_set *k, char *why,
                       size_t whylen) {
  if (k->block % 32 != 0 || k->block < 32 || k->block > 1024) {
    snprintf(why, whylen, "BLOCK=%d must be a multiple of 32 in [32, 1024]", k->block);
    return -1;
  }
  if (k->vec != 1 && k->vec != 2 && k->vec != 4) {
    snprintf(why, whylen, "VEC=%d: scans use 1, 2 or 4", k->vec);
    return -1;
  }
  if (k->items < 1 || k->items * k->vec > 64) {
    snprintf(why, whylen, "ITEMS*VEC=%d values per thread exceed the 64-register budget",
             k->items * k->vec);
    return -1;
  }
  if (s->inner > 1 && s->inner % k->vec != 0) {
    snprintf(why, whylen, "inner=%lld is not a multiple of VEC=%d", s->inner, k->vec);
    return -1;
  }
  if (s->inner == 1 && k->vec > 1 && s->excl == 1) {
    snprintf(why, whylen, "the exclusive form writes element k at k+1 (output rows of %lld), "
                          "so stores cannot be vectors: VEC must be 1", s->r_out);
    return -1;
  }
  if (s->inner == 1 && s->r % k->vec != 0) {
    snprintf(why, whylen, "row length R=%lld is not a multiple of VEC=%d", s->r, k->vec);
    return -1;
  }
  if (k->minb > 0) {
    int cap = 65536 / (k->block * k->minb), need = 24 + k->items * (k->vec + 1) *
                                                         (s->excl == 2 ? 2 : 1);
    if (k->block * k->minb > 2048 || cap < need) {
      snprintf(why, whylen, "__launch_bounds__(%d, %d) caps registers at %d per thread; the "
                            "tile needs about %d", k->block, k->minb, cap > 255 ? 255 : cap,
               need);
      return -1;
    }
  }
  return 0;
}

static int scan_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  struct scan_spec s;
  if (spec_from_json(match, &s) != 0) {
    snprintf(why, whylen, "not a scan match");
    return -1;
  }
  if (check_shape(&s, k, why, whylen) != 0 || check_mode(&s, k, why, whylen) != 0)
    return -1;
  /* MODE decoupled_lookback is one pass whatever SPLIT says (SPLIT only ever grows). */
  if (k->split > 1 && s.inner > 1) {
    snprintf(why, whylen, "SPLIT splits rows along the contiguous axis; this scan is strided "
                          "(inner = %lld)", s.inner);
    return -1;
  }
  struct scan_layout l;
  layout_of(&s, k, &l);
  if (l.kind == 1 && k->split > 1 && cdiv(l.k, k->split) < 32LL * k->vec) {
    snprintf(why, whylen, "SPLIT=%d leaves chunks of %lld elements, under one warp's %d",
             k->split, cdiv(l.k, k->split), 32 * k->vec);
    return -1;
  }
  long long blocks = l.kind == 0 ? cdiv(s.rows_out, k->block / 32 / l.w)
                     : l.kind == 3 ? s.rows_out * l.ctiles
                                   : s.rows_out * l.nchunk;
  if (blocks > MAX_GRID || (l.kind == 2 && (blocks + 1) * 8 > (4LL << 30))) {
    snprintf(why, whylen, "%lld blocks exceed the grid or scratch limits", blocks);
    return -1;
  }
  return 0;
}

/* ---- generation ----------------------------------------------------------------------- */

/* The candidate source (caller frees): common.cuh, the shape constants, scan.cu. */
static char *build_source(const struct scan_spec *s, const struct knob_set *k,
                          const struct scan_layout *l) {
  const char *tmpl = builtin_template("scan.cu");
  struct cg_buf b = {0};
  if (!tmpl)
    return NULL;
  cg_printf(&b, "// opforge builtin scan: %s%s%s%s over [%lld, %lld, %lld]\n",
            s->reverse ? "reverse " : "", s->excl ? "exclusive " : "", s->mask ? "masked " : "",
            s->prod ? "cumprod" : "cumsum", s->outer, s->r, s->inner);
  if (cg_common(&b) != 0) {
    cg_free(&b);
    return NULL;
  }
  cg_printf(&b, "typedef %s idx_t;\n", l->idx64 ? "long long" : "int");
  cg_printf(&b, "#define SCAN_OP_PROD %d\n#define SCAN_REVERSE %d\n#define SCAN_MASK %d\n"
                "#define SCAN_SUB_SELF %d\n#define SCAN_PAD %d\n#define SCAN_PAD_VALUE %s\n"
                "#define SCAN_CARRY0 %s\n",
            s->prod, s->reverse, s->mask, s->excl == 2, s->excl == 1,
            s->pad_value == 1.0 ? "1.0f" : "0.0f",
            s->excl == 1 ? (s->pad_value == 1.0 ? "1.0f" : "0.0f") : s->prod ? "1.0f" : "0.0f");
  cg_define_ll(&b, "SCAN_ROWS", s->rows_out);
  cg_define_ll(&b, "SCAN_R", s->r);
  cg_define_ll(&b, "SCAN_ROUT", s->r_out);
  cg_define_ll(&b, "SCAN_INNER", s->inner);
  cg_define_ll(&b, "SCAN_K", l->k);
  cg_define_ll(&b, "SCAN_W", l->w);
  cg_define_ll(&b, "SCAN_NCHUNK", l->nchunk);
  cg_define_ll(&b, "SCAN_CHUNK", l->chunk);
  cg_define_ll(&b, "SCAN_NTILES", s->rows_out * l->nchunk);
  cg_define_ll(&b, "SCAN_TX", l->tx);
  cg_define_ll(&b, "SCAN_TY", l->ty);
  cg_define_ll(&b, "SCAN_CTILES", l->ctiles);
  cg_printf(&b, "#define SCAN_KIND_ROWS %d\n#define SCAN_KIND_SPLIT %d\n"
                "#define SCAN_KIND_LOOKBACK %d\n",
            l->kind == 0, l->kind == 1, l->kind == 2);
  cg_printf(&b, "%s", tmpl);
  return cg_take(&b);
}

/* The data arguments of a launch, x then the mask when there is one (caller owns). */
static json_t *data_args(const struct scan_spec *s) {
  json_t *a = json_pack("[{s:s}]", "tensor", s->x);
  if (a && s->mask)
    json_array_append_new(a, json_pack("{s:s}", "tensor", s->m));
  return a;
}

/* One launch of the plan (caller owns); takes over args. */
static json_t *launch(const char *kernel, long long grid, int block, json_t *args) {
  return json_pack("{s:s, s:[I,i,i], s:[i,i,i], s:i, s:o}", "kernel", kernel, "grid", grid, 1,
                   1, "block", block, 1, 1, "shared_bytes", 0, "args", args);
}

/* The launch plan (caller owns). */
static json_t *build_plan(const struct scan_spec *s, const struct knob_set *k,
                          const struct scan_layout *l) {
  json_t *buffers = json_array(), *launches = json_array(), *a;
  json_t *out = json_pack("{s:s}", "tensor", s->out);
  long long tiles = s->rows_out * l->nchunk;
  switch (l->kind) {
  case 0:
  case 3:
    a = data_args(s);
    json_array_append(a, out);
    json_array_append_new(launches, launch(l->kind == 0 ? "scan_rows" : "scan_cols",
                                           l->kind == 0 ? cdiv(s->rows_out, k->block / 32 / l->w)
                                                        : s->rows_out * l->ctiles,
                                           k->block, a));
    break;
  case 1:
    json_array_append_new(buffers, json_pack("{s:s, s:I}", "name", "partials", "bytes",
                                             tiles * 4));
    a = data_args(s);
    json_array_append_new(a, json_pack("{s:s}", "buffer", "partials"));
    json_array_append_new(launches, launch("scan_chunk_reduce", tiles, k->block, a));
    a = data_args(s);
    json_array_append_new(a, json_pack("{s:s}", "buffer", "partials"));
    json_array_append(a, out);
    json_array_append_new(launches, launch("scan_chunk_scan", tiles, k->block, a));
    break;
  default:
    json_array_append_new(buffers, json_pack("{s:s, s:I}", "name", "status", "bytes",
                                             (tiles + 1) * 8));
    a = json_pack("[{s:s}]", "buffer", "status");
    long long rgrid = cdiv(tiles + 1, k->block);
    json_array_append_new(launches, launch("scan_lookback_reset", rgrid > 1024 ? 1024 : rgrid,
                                           k->block, a));
    a = data_args(s);
    json_array_append(a, out);
    json_array_append_new(a, json_pack("{s:s}", "buffer", "status"));
    json_array_append_new(launches, launch("scan_lookback", tiles, k->block, a));
  }
  json_decref(out);
  return json_pack("{s:o, s:o}", "buffers", buffers, "launches", launches);
}

static int scan_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                         char *why, size_t whylen) {
  struct scan_spec s;
  if (scan_check(match, k, why, whylen) != 0 || spec_from_json(match, &s) != 0)
    return -1;
  struct scan_layout l;
  layout_of(&s, k, &l);
  char *src = build_source(&s, k, &l);
  int rc = cg_candidate(src, k, src ? build_plan(&s, k, &l) : NULL,
                        "out of memory generating the scan candidate", ret_candidate, why,
                        whylen);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_scan = {
    .name = "scan",
    .match = scan_match,
    .defaults = scan_defaults,
    .check = scan_check,
    .generate = scan_generate,
};
