/* The knob grid of every builtin family module: the values each knob may take, chosen for
 * the match where the family's kernels read a knob only in some layouts (a column kernel
 * has no rows per block; a gemv no tiles). space_init adds the defaults' own values, and
 * the family's check() decides which points are valid (docs/architecture.md, section 8,
 * "The builtin space"). Knobs a grid leaves out keep the defaults' values. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/reduction.h"
#include "proposers/builtin/space_internal.h"

#define END (-1)

/* Adds a numeric dim of the values up to END (ascending). */
static void num(struct builtin_space *s, const char *knob, ...) {
  struct space_dim *d = &s->dims[s->ndims++];
  memset(d, 0, sizeof *d);
  snprintf(d->knob, sizeof d->knob, "%s", knob);
  va_list ap;
  va_start(ap, knob);
  for (int v = va_arg(ap, int); v != END && d->n < SPACE_MAX_VALUES; v = va_arg(ap, int))
    d->values[d->n++] = v;
  va_end(ap);
}

/* Adds the MODE dim of the names up to NULL ("" first: the template's default). */
static void modes(struct builtin_space *s, ...) {
  struct space_dim *d = &s->dims[s->ndims++];
  memset(d, 0, sizeof *d);
  snprintf(d->knob, sizeof d->knob, "MODE");
  va_list ap;
  va_start(ap, s);
  for (const char *m = va_arg(ap, const char *); m && d->n < SPACE_MAX_VALUES;
       m = va_arg(ap, const char *))
    snprintf(d->modes[d->n++], sizeof d->modes[0], "%s", m);
  va_end(ap);
}

/* The match's "canonical" [outer, R, inner] (zeros when absent). */
static void canonical(const struct builtin_space *s, long long c[3]) {
  for (size_t i = 0; i < 3; i++)
    c[i] = json_integer_value(json_array_get(json_object_get(s->match, "canonical"), i));
}

static bool op_is(const struct builtin_space *s, const char *op) {
  const char *o = json_string_value(json_object_get(s->match, "op"));
  return o && strcmp(o, op) == 0;
}

#define BLOCKS num(s, "BLOCK", 64, 128, 256, 512, 1024, END)
#define VECS num(s, "VEC", 1, 2, 4, END)

static void grid_pointwise(struct builtin_space *s) {
  BLOCKS;
  VECS;
  num(s, "ITEMS", 1, 2, 4, 8, 16, END);
  num(s, "UNROLL", 0, 2, 4, END);
  num(s, "MINB", 0, 2, 4, END);
  modes(s, "", "grid_stride", "persistent", "ldg", "stream_store", "idx32", "fast_math",
        "channels_last", NULL);
}

static void grid_reduction(struct builtin_space *s) {
  long long c[3];
  canonical(s, c);
  BLOCKS;
  VECS;
  num(s, "MINB", 0, 2, END);
  if (c[2] > 1) { /* the column kernel: threads along inner, UNROLL rows, SPLIT slices of R */
    num(s, "UNROLL", 1, 2, 4, 8, 16, END);
    num(s, "SPLIT", 1, 2, 4, 8, 16, 32, 64, 128, 256, END);
    modes(s, "", "idx32", NULL);
    return;
  }
  num(s, "ITEMS", 1, 2, 4, 8, 16, END);
  num(s, "ROWS", 1, 2, 4, 8, 16, 32, END);
  num(s, "UNROLL", 1, 2, 4, 8, END);
  num(s, "SPLIT", 1, 2, 4, 8, 16, 32, 64, END);
  modes(s, "", "warp_per_row", "block_per_row", "grid_stride", "persistent", "idx32", NULL);
}

/* softmax and the row norms: the layouts of row_layout.c. */
static void grid_rows(struct builtin_space *s, bool norm) {
  long long c[3];
  canonical(s, c);
  BLOCKS;
  VECS;
  num(s, "MINB", 0, 2, END);
  if (c[2] > 1) { /* columns: a thread per VEC columns, looping over R */
    num(s, "UNROLL", 1, 2, 4, 8, 16, END);
    if (norm)
      modes(s, "", "cached_row", "welford", "two_pass", "recip_mul", "fast_math",
            "stream_store", "ldg", NULL);
    else
      modes(s, "", "cached_row", "online", "two_pass", "recip_mul", "fast_math",
            "stream_store", NULL);
    return;
  }
  num(s, "ITEMS", 1, 2, 4, 8, END);
  num(s, "ROWS", 1, 2, 4, 8, 16, 32, END);
  num(s, "UNROLL", 1, 2, 4, 8, END);
  num(s, "SPLIT", 1, 2, 4, 8, 16, 32, 64, END);
  if (norm)
    modes(s, "", "warp_per_row", "block_per_row", "cached_row", "smem_row", "welford",
          "two_pass", "recip_mul", "fast_math", "stream_store", "ldg", NULL);
  else
    modes(s, "", "warp_per_row", "block_per_row", "cached_row", "smem_row", "online",
          "two_pass", "recip_mul", "fast_math", "stream_store", NULL);
}

static void grid_norm(struct builtin_space *s) {
  if (!op_is(s, "batch_norm")) {
    grid_rows(s, true);
    return;
  }
  /* batch norm: per-channel slices (SPLIT) of VEC x ITEMS batches */
  BLOCKS;
  VECS;
  num(s, "ITEMS", 1, 2, 4, 8, 16, END);
  num(s, "UNROLL", 1, 2, 4, END);
  num(s, "SPLIT", 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, END);
  num(s, "MINB", 0, 2, END);
  modes(s, "", "ldg", "stream_store", "fast_math", NULL);
}

static void grid_softmax(struct builtin_space *s) {
  grid_rows(s, false);
}

static void grid_scan(struct builtin_space *s) {
  BLOCKS;
  VECS;
  num(s, "ITEMS", 1, 2, 4, 8, 16, END);
  num(s, "SPLIT", 1, 2, 4, 8, 16, 32, 64, END);
  num(s, "MINB", 0, 2, END);
  modes(s, "", "ldg", "two_level", "decoupled_lookback", "idx64", NULL);
}

static void grid_pooling(struct builtin_space *s) {
  num(s, "BLOCK", 32, 64, 128, 256, 512, 1024, END);
  VECS;
  num(s, "ITEMS", 1, 2, 4, 8, END);
  num(s, "MINB", 0, 2, 4, END);
  modes(s, "", "smem_tile", "pad_smem", "thread_per_output", "ldg", "recip_mul", "idx64",
        NULL);
}

static void grid_loss(struct builtin_space *s) {
  BLOCKS;
  VECS;
  num(s, "ITEMS", 1, 2, 4, 8, 16, END);
  num(s, "MINB", 0, 2, END);
  if (s->defaults.rows) /* row losses: rows per group */
    num(s, "ROWS", 1, 2, 4, 8, END);
  modes(s, "", "ldg", "persistent", "grid_stride", "warp_per_row", "block_per_row",
        "cached_row", "online", "fast_math", "recip_mul", NULL);
}

static void grid_gemm(struct builtin_space *s) {
  if (op_is(s, "gemm")) { /* SIMT and 3xTF32 tiles, pipeline, split-K */
    num(s, "BM", 16, 32, 64, 128, 256, END);
    num(s, "BN", 16, 32, 64, 128, 256, END);
    num(s, "BK", 4, 8, 16, 32, END);
    num(s, "TM", 2, 4, 8, END);
    num(s, "TN", 2, 4, 8, END);
    num(s, "STAGES", 1, 2, 3, 4, END);
    num(s, "SPLIT", 1, 2, 4, 8, 16, END);
    num(s, "MINB", 0, 2, END);
    modes(s, "", "tf32x3", "pad_smem", "persistent", NULL);
    return;
  }
  BLOCKS;
  VECS;
  if (op_is(s, "gemv"))
    num(s, "UNROLL", 1, 2, 4, 8, 16, END);
  modes(s, "", "ldg", NULL);
}

static void grid_attention(struct builtin_space *s) {
  num(s, "BM", 16, 32, 64, 128, 256, END);
  num(s, "BN", 8, 16, 32, 64, 128, END);
  num(s, "TM", 4, 8, END);
  num(s, "TN", 1, 2, 4, 8, 16, END);
  num(s, "UNROLL", 1, 2, 4, 8, END);
  num(s, "MINB", 0, 1, 2, END);
}

static void grid_conv(struct builtin_space *s) {
  num(s, "BM", 16, 32, 64, 128, END);
  num(s, "BN", 16, 32, 64, 128, 256, END);
  num(s, "BK", 4, 8, 16, 32, END);
  num(s, "TM", 4, 8, END);
  num(s, "TN", 4, 8, END);
  num(s, "UNROLL", 1, 2, 4, END);
  num(s, "MINB", 0, 2, END);
  modes(s, "", "tf32_rna", NULL);
}

static const struct {
  const char *module;
  void (*build)(struct builtin_space *s);
} grids[] = {
    {"pointwise", grid_pointwise}, {"reduction", grid_reduction}, {"norm", grid_norm},
    {"softmax", grid_softmax},     {"scan", grid_scan},           {"pooling", grid_pooling},
    {"loss", grid_loss},           {"gemm", grid_gemm},           {"attention", grid_attention},
    {"conv", grid_conv},
};

void space_grid_build(struct builtin_space *s) {
  s->ndims = 0;
  for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++)
    if (strcmp(grids[i].module, s->module) == 0)
      grids[i].build(s);
}

/* The registers a thread may use: the SM's registers over the threads of the blocks that
 * __launch_bounds__ asks to keep resident (MINB, else one), at most 255. */
static int reg_cap(const struct builtin_space *s, long long threads, int minb) {
  long long cap = threads > 0 ? s->device.regs_per_sm / (threads * (minb > 0 ? minb : 1)) : 255;
  return cap > 255 ? 255 : (int)cap;
}

/* The device's registers: the values a thread keeps (per module, calibrated on NVRTC for
 * sm_90a by test_space's samples) plus about 32 of addresses and indices must fit the
 * cap; a MINB that leaves fewer than 48 registers spills whatever the kernel. */
static bool regs_fit(const struct builtin_space *s, const struct knob_set *k, char *why,
                     size_t whylen) {
  bool tiled = !k->block && k->bm && k->bn && k->tm && k->tn;
  long long threads = tiled ? (long long)(k->bm / k->tm) * (k->bn / k->tn) : k->block;
  int cap = reg_cap(s, threads, k->minb);
  if (k->minb > 0 && cap < 48) {
    snprintf(why, whylen, "registers: MINB=%d blocks of %lld threads leave %d registers per "
             "thread (48 at least)", k->minb, threads, cap);
    return false;
  }
  int vec = k->vec > 0 ? k->vec : 1, items = k->items > 0 ? k->items : 1;
  int unroll = k->unroll > 0 ? k->unroll : 1;
  long long need = 0;
  if (strcmp(s->module, "pointwise") == 0)
    need = 32 + (long long)items * vec;
  else if (strcmp(s->module, "reduction") == 0)
    need = 32 + (long long)(items > unroll ? items : unroll) * vec;
  else if (strcmp(s->module, "scan") == 0)
    need = 32 + (long long)items * (vec + 1);
  else if (strcmp(s->module, "loss") == 0)
    need = 32 + 2LL * items * vec;
  else if (strcmp(s->module, "conv") == 0)
    need = (long long)k->tm * k->tn + k->tm + k->tn + 48;
  else if (strcmp(s->module, "softmax") == 0 ||
           (strcmp(s->module, "norm") == 0 && !op_is(s, "batch_norm"))) {
    long long c[3];
    struct row_layout L;
    char no[8];
    canonical(s, c);
    if (row_layout_resolve(c, k, &L, no, sizeof no) == 0 && L.path == ROW_PATH_REG)
      need = 32 + (long long)L.nvt * vec;
  }
  if (need > cap) {
    snprintf(why, whylen, "registers: about %lld per thread, above the cap of %d for %lld "
             "threads (MINB=%d)", need, cap, threads, k->minb);
    return false;
  }
  return true;
}

bool space_grid_prefilter(const struct builtin_space *s, const struct knob_set *k, char *why,
                          size_t whylen) {
  /* Tiled kernels (GEMM, attention, convolution): (BM/TM) x (BN/TN) threads, a whole
   * number of warps, and tiles that the register tile divides. */
  if (k->bm && k->tm && k->bn && k->tn && !k->block) {
    if (k->bm % k->tm || k->bn % k->tn) {
      snprintf(why, whylen, "TM and TN must divide BM and BN");
      return false;
    }
    long long nt = (long long)(k->bm / k->tm) * (k->bn / k->tn);
    if (nt < 32 || nt > 1024 || nt % 32) {
      snprintf(why, whylen, "(BM/TM)*(BN/TN) = %lld threads: a multiple of 32 in [32, 1024]",
               nt);
      return false;
    }
  }
  /* Points NVRTC spills for although their registers fit (local arrays), found by
   * test_space's samples. */
  long long nt = k->block ? k->block
                          : (k->tm && k->tn ? (long long)(k->bm / k->tm) * (k->bn / k->tn) : 0);
  if (strcmp(s->module, "conv") == 0 && strcmp(k->mode, "tf32_rna") == 0 && k->unroll >= 4 &&
      nt >= 256) {
    snprintf(why, whylen, "MODE tf32_rna with UNROLL=%d and %lld threads spills", k->unroll, nt);
    return false;
  }
  if (strcmp(s->module, "gemm") == 0 && op_is(s, "gemm") && strcmp(k->mode, "tf32x3") != 0 &&
      k->tm * k->tn >= 64 && k->bk >= 32) {
    snprintf(why, whylen, "the SIMT kernel spills %dx%d outputs per thread with BK=%d", k->tm,
             k->tn, k->bk);
    return false;
  }
  if ((strcmp(s->module, "softmax") == 0 || strcmp(s->module, "norm") == 0) &&
      strcmp(k->mode, "fast_math") == 0 &&
      (k->items * k->vec >= 32 || nt * (k->minb > 0 ? k->minb : 1) >= 1024)) {
    snprintf(why, whylen, "MODE fast_math spills with ITEMS x VEC = %d or %lld threads x MINB %d",
             k->items * k->vec, nt, k->minb);
    return false;
  }
  if (strcmp(s->module, "gemm") != 0 && strcmp(s->module, "attention") != 0 &&
      !regs_fit(s, k, why, whylen))
    return false;
  return true;
}
