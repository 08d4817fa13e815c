/* The builtin pooling family: matches max/avg pooling graphs and generates pooling.cu
 * candidates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"
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
  int dims;
  long long planes, in[3], out[3];
  int k[3], s[3], p[3], d[3];
  bool ceil_mode, count_pad;
  int divisor;
  char x[32], y[32];
  long long numel;
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

static const char *const mod_names[] = {"MaxPool1d", "MaxPool2d", "MaxPool3d",
                                        "AvgPool1d", "AvgPool2d", "AvgPool3d"};
static const char *const fn_names[] = {"max_pool1d", "max_pool2d", "max_pool3d",
                                       "avg_pool1d", "avg_pool2d", "avg_pool3d"};

/* ---- matching ----------------------------------------------------------------------- */

/* An int or a list of 1 or n ints into the last n of out[3]. null/absent or an empty list
 * keeps out (the default). Returns 0, or -1 when malformed or out of [lo, hi]. */
static int read_tuple(json_t *v, int n, int lo, int hi, int out[3]) {
  if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
    return 0;
  size_t len = json_is_array(v) ? json_array_size(v) : 1;
  if (len != 1 && len != (size_t)n)
    return -1;
  for (int i = 0; i < n; i++) {
    json_t *e = json_is_array(v) ? json_array_get(v, len == 1 ? 0 : (size_t)i) : v;
    if (!json_is_integer(e) || json_integer_value(e) < lo || json_integer_value(e) > hi)
      return -1;
    out[3 - n + i] = (int)json_integer_value(e);
  }
  return 0;
}

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

/* Which pooling op the node is: 0..5 as in the name tables, -1 none. */
static int pool_kind(json_t *node) {
  bool module = graph_is_module(node);
  for (int i = 0; i < 6; i++) {
    if (graph_target_is(node, module ? mod_names[i] : fn_names[i]))
      return i;
  }
  return -1;
}

/* Reads the operator's parameters (module attrs or call arguments) into s. Returns 0, or
 * -1 with why. */
static int read_params(json_t *node, struct pool_spec *s, char *why, size_t whylen) {
  int n = s->dims;
  for (int i = 0; i < 3; i++) {
    s->k[i] = s->s[i] = s->d[i] = 1;
    s->p[i] = 0;
  }
  bool bad = read_tuple(graph_param(node, 1, "kernel_size"), n, 1, 1 << 20, s->k) != 0;
  memcpy(s->s, s->k, sizeof s->s);
  bad = bad || read_tuple(graph_param(node, 2, "stride"), n, 1, 1 << 20, s->s) != 0 ||
        read_tuple(graph_param(node, 3, "padding"), n, 0, 1 << 20, s->p) != 0;
  if (s->max) {
    bad = bad || read_tuple(graph_param(node, 4, "dilation"), n, 1, 1 << 20, s->d) != 0;
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

/* Shapes: the input as [planes, ID, IH, IW] and the output, checked against the graph. */
static int read_shapes(json_t *profile, json_t *node, struct pool_spec *s, char *why,
                       size_t whylen) {
  json_t *x = graph_ref(profile, graph_arg(node, 0, "input"));
  const char *t = graph_input_tensor(x, "float32");
  long long in[8], out[8];
  int rin = x ? graph_shape(x, in) : -1, rout = graph_shape(node, out);
  if (!t || (rin != s->dims + 1 && rin != s->dims + 2) || rout != rin) {
    snprintf(why, whylen, "pooling: the operand must be a float32 input of rank %d or %d",
             s->dims + 1, s->dims + 2);
    return -1;
  }
  snprintf(s->x, sizeof s->x, "%s", t);
  snprintf(s->y, sizeof s->y, "output:0");
  int lead = rin - s->dims;
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

/* 1 and s filled when the graph is one pooling call on an input, 0 when the graph is
 * something else, -1 for a pooling call we cannot do. */
static int match_spec(json_t *profile, struct pool_spec *s, char *why, size_t whylen) {
  json_t *calls = graph_calls(profile);
  json_t *node = json_array_size(calls) == 1 ? json_array_get(calls, 0) : NULL;
  int kind = node ? pool_kind(node) : -1;
  int rc = 0;
  if (node && kind < 0 && (graph_target_is(node, "AdaptiveAvgPool2d") ||
                           graph_target_is(node, "adaptive_avg_pool2d") ||
                           graph_target_is(node, "max_pool2d_with_indices") ||
                           graph_target_is(node, "LPPool2d") ||
                           graph_target_is(node, "AdaptiveMaxPool2d"))) {
    snprintf(why, whylen, "unsupported pooling op %s",
             json_string_value(json_object_get(node, "target")));
    rc = -1;
  } else if (kind >= 0) {
    s->max = kind < 3;
    s->dims = kind % 3 + 1;
    const char *dt = json_string_value(json_object_get(node, "dtype"));
    rc = read_params(node, s, why, whylen) == 0 &&
                 read_shapes(profile, node, s, why, whylen) == 0
             ? 1
             : -1;
    if (rc == 1 && (!dt || strcmp(dt, "float32") != 0 ||
                    json_array_size(json_object_get(profile, "outputs")) != 1)) {
      snprintf(why, whylen, "pooling: needs one float32 output");
      rc = -1;
    }
  }
  json_decref(calls);
  return rc;
}

/* The match object of a spec (caller owns), NULL when out of memory. */
static json_t *spec_to_json(const struct pool_spec *s) {
  const char *op = fn_names[(s->max ? 0 : 3) + s->dims - 1];
  char summary[256];
  snprintf(summary, sizeof summary, "%s k=[%d,%d,%d] s=[%d,%d,%d] p=[%d,%d,%d] d=[%d,%d,%d] on "
                                    "[%lld, %lld, %lld, %lld]",
           op, s->k[0], s->k[1], s->k[2], s->s[0], s->s[1], s->s[2], s->p[0], s->p[1], s->p[2],
           s->d[0], s->d[1], s->d[2], s->planes, s->in[0], s->in[1], s->in[2]);
  return json_pack("{s:s, s:s, s:s, s:[I,I,I,I], s:[I,I,I], s:i, s:[i,i,i], s:[i,i,i], "
                   "s:[i,i,i], s:[i,i,i], s:b, s:b, s:i, s:{s:s, s:s}, s:I}",
                   "family", "pooling", "op", op, "summary", summary, "canonical", s->planes,
                   s->in[0], s->in[1], s->in[2], "out", s->out[0], s->out[1], s->out[2],
                   "dims", s->dims, "kernel", s->k[0], s->k[1], s->k[2], "stride", s->s[0],
                   s->s[1], s->s[2], "padding", s->p[0], s->p[1], s->p[2], "dilation", s->d[0],
                   s->d[1], s->d[2], "ceil_mode", s->ceil_mode, "count_include_pad",
                   s->count_pad, "divisor_override", s->divisor, "tensors", "x", s->x, "out",
                   s->y, "numel", s->numel);
}

static int pool_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  struct pool_spec s = {0};
  int rc = match_spec(profile, &s, why, whylen);
  return rc == 1 ? graph_match_result(spec_to_json(&s), ret_match, why, whylen) : rc;
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
  if (is_mode(k, "recip_mul") && !s->max)
    return 0;
  if (is_mode(k, "idx64") && s->numel <= IDX32_LIMIT)
    return 0;
  if (is_mode(k, "recip_mul"))
    snprintf(why, whylen, "max pooling divides nothing: recip_mul applies to average pooling");
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

/* The candidate source (caller frees): common.cuh, the POOL_* constants, pooling.cu. */
static char *build_source(const struct pool_spec *s, const struct pool_layout *l) {
  const char *tmpl = builtin_template("pooling.cu");
  struct cg_buf b = {0};
  if (!tmpl)
    return NULL;
  cg_printf(&b, "// opforge builtin pooling: %s%dd\n", s->max ? "max_pool" : "avg_pool", s->dims);
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
  cg_printf(&b, "%s", tmpl);
  return cg_take(&b);
}

/* The launch plan (caller owns): pool_tile, or pool_direct for thread_per_output. */
static json_t *build_plan(const struct pool_spec *s, const struct knob_set *k,
                          const struct pool_layout *l) {
  json_t *args = json_pack("[{s:s}, {s:s}]", "tensor", s->x, "tensor", s->y);
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
