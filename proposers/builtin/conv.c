/* The builtin convolution family: knobs, checks and the candidate (see conv.h; the matcher
 * is conv_match.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"
#include "proposers/builtin/conv.h"

#define CONV_STATIC_SMEM (48 * 1024) /* ofg_conv's tiles are static shared memory */

/* The match's sizes, read back once (strings borrowed from the match). */
struct conv {
  long long n, c, oc, groups, in[3], out[3];
  int k[3], s[3], p[3], d[3];
  bool transposed;
  const char *x, *w, *b, *y;
  const char *math; /* "tf32", "fp32" or NULL: how eager ran it (conv.h) */
};

#define MODE_TF32_RNA "tf32_rna" /* operands rounded as cuDNN's TF32 algorithms round them */

/* Reads the 3 ints of array key of m into out. */
static void read3(json_t *m, const char *key, int out[3]) {
  for (size_t i = 0; i < 3; i++)
    out[i] = (int)json_integer_value(json_array_get(json_object_get(m, key), i));
}

/* Reads match m into *c, which borrows m's strings. */
static void conv_read(json_t *m, struct conv *c) {
  c->n = jint(m, "n");
  c->c = jint(m, "c");
  c->oc = jint(m, "oc");
  c->groups = jint(m, "groups");
  for (size_t i = 0; i < 3; i++) {
    c->in[i] = json_integer_value(json_array_get(json_object_get(m, "in"), i));
    c->out[i] = json_integer_value(json_array_get(json_object_get(m, "out"), i));
  }
  read3(m, "kernel", c->k);
  read3(m, "stride", c->s);
  read3(m, "padding", c->p);
  read3(m, "dilation", c->d);
  c->transposed = json_is_true(json_object_get(m, "transposed"));
  c->x = json_string_value(json_object_get(m, "x"));
  c->w = json_string_value(json_object_get(m, "w"));
  c->b = json_string_value(json_object_get(m, "b"));
  c->y = json_string_value(json_object_get(m, "output"));
  c->math = json_string_value(json_object_get(m, "math"));
}

/* True when *c says eager ran it in TF32 on the profiling GPU. */
static bool eager_tf32(const struct conv *c) {
  return c->math && strcmp(c->math, "tf32") == 0;
}

/* Output positions over the batch: the columns of the implicit GEMM. */
static long long conv_cols(const struct conv *c) {
  return c->n * c->out[0] * c->out[1] * c->out[2];
}

/* Threads per block: BM/TM rows of BN/TN threads. */
static int conv_threads(const struct knob_set *k) {
  return k->tm > 0 && k->tn > 0 ? (k->bm / k->tm) * (k->bn / k->tn) : 0;
}

/* Defaults into *ret: 4x4 outputs per thread and 256 threads, the channel tile the
 * smallest of 16, 32 and 64 that holds a group's output channels, the position tile
 * the rest (256, 128 or 64), 8 reduction rows per step; MODE tf32_rna where eager ran
 * the convolution in TF32, strict fp32 otherwise. match stays the caller's. */
static void conv_defaults(json_t *match, struct knob_set *ret) {
  struct conv c;
  conv_read(match, &c);
  long long ocg = c.oc / (c.groups > 0 ? c.groups : 1);
  *ret = (struct knob_set){0};
  ret->tm = ret->tn = 4;
  ret->bm = ocg <= 16 ? 16 : ocg <= 32 ? 32 : 64;
  ret->bn = 256 * 16 / ret->bm;
  ret->bk = 8;
  ret->unroll = 1;
  if (eager_tf32(&c))
    snprintf(ret->mode, sizeof ret->mode, "%s", MODE_TF32_RNA);
}

/* True when x is a positive power of two. */
static bool pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

/* The reason knob set k does not fit c, or NULL. */
static const char *conv_refusal(const struct conv *c, const struct knob_set *k) {
  if (k->mode[0] && strcmp(k->mode, MODE_TF32_RNA) != 0)
    return "the convolution's MODEs are tf32_rna (operands rounded to TF32 as cuDNN rounds "
           "them) and none (strict fp32)";
  if (k->mode[0] && c->math && strcmp(c->math, "fp32") == 0)
    return "MODE tf32_rna: eager runs this convolution in strict fp32 on this GPU, so "
           "operands rounded to TF32 would fail its accuracy budget";
  if (k->block || k->vec > 1 || k->items || k->rows || k->stages > 1 || k->split > 1)
    return "the convolution's knobs are BM, BN, BK, TM, TN, UNROLL and MINB";
  if ((k->tm != 4 && k->tm != 8) || (k->tn != 4 && k->tn != 8))
    return "TM and TN (outputs per thread) must be 4 or 8";
  if (k->bm % (k->tm * k->tn) != 0 || k->bn % k->tn != 0)
    return "BM must be a multiple of TM x TN (every thread loads one position column) and "
           "BN of TN";
  int nt = conv_threads(k);
  if (nt < 32 || nt > 1024 || nt % 32 != 0)
    return "BM/TM x BN/TN threads must be a multiple of 32 in [32, 1024]";
  if (k->bk < 1 || k->bk > 64)
    return "BK (reduction rows per step) must be in [1, 64]";
  if (4LL * k->bk * (k->bm + 4 + k->bn) > CONV_STATIC_SMEM)
    return "the tiles do not fit 48 KiB of static shared memory";
  if ((c->oc / c->groups + k->bm - 1) / k->bm > 65535)
    return "more than 65535 channel tiles per group";
  if ((conv_cols(c) + k->bn - 1) / k->bn > 0x7fffffffLL)
    return "more than 2^31 - 1 position tiles";
  if (k->minb && nt * k->minb > 2048)
    return "MINB blocks of this size do not fit an SM (2048 threads)";
  if (k->unroll && (!pow2(k->unroll) || k->unroll > 8))
    return "UNROLL must be a power of two up to 8";
  return NULL;
}

/* 0 when knobs k fit match (both the caller's), else -1 with the reason in why. */
static int conv_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  struct conv c;
  conv_read(match, &c);
  const char *no = conv_refusal(&c, k);
  return no ? builtin_refuse(why, whylen, "%s", no) : 0;
}

/* Appends `#define OFG_<p><suffix[i]> v[i]` for the three spatial dims. */
static void define3(struct cg_buf *b, const char *p, const int v[3]) {
  static const char *const dim[3] = {"D", "H", "W"};
  for (int i = 0; i < 3; i++)
    cg_printf(b, "#define OFG_%s%s %d\n", p, dim[i], v[i]);
}

/* The fragment of conv.cu's macros for *c (caller frees), NULL when out of memory. */
static char *conv_fragment(const struct conv *c) {
  struct cg_buf b = {0};
  static const char *const dim[3] = {"D", "H", "W"};
  cg_define_ll(&b, "OFG_N", c->n);
  cg_define_ll(&b, "OFG_C", c->c);
  cg_define_ll(&b, "OFG_OC", c->oc);
  cg_define_ll(&b, "OFG_CG", c->c / c->groups);
  cg_define_ll(&b, "OFG_OCG", c->oc / c->groups);
  for (int i = 0; i < 3; i++) {
    cg_printf(&b, "#define OFG_I%s %lld\n", dim[i], c->in[i]);
    cg_printf(&b, "#define OFG_O%s %lld\n", dim[i], c->out[i]);
  }
  define3(&b, "K", c->k);
  define3(&b, "S", c->s);
  define3(&b, "P", c->p);
  define3(&b, "D", c->d);
  cg_printf(&b, "#define OFG_TRANSPOSED %d\n#define OFG_BIAS %d\n", c->transposed, c->b != NULL);
  return cg_take(&b);
}

/* The launch plan (caller owns) of *c under knobs k: one ofg_conv launch. */
static json_t *conv_plan(const struct conv *c, const struct knob_set *k) {
  json_t *args = json_pack("[{s:s}, {s:s}]", "tensor", c->x, "tensor", c->w);
  if (c->b)
    json_array_append_new(args, json_pack("{s:s}", "tensor", c->b));
  json_array_append_new(args, json_pack("{s:s}", "tensor", c->y));
  long long gx = (conv_cols(c) + k->bn - 1) / k->bn, gy = (c->oc / c->groups + k->bm - 1) / k->bm;
  json_t *launch = json_pack("{s:s, s:[I,I,I], s:[i,i,i], s:i, s:o}", "kernel", "ofg_conv",
                             "grid", (json_int_t)gx, (json_int_t)gy, (json_int_t)c->groups,
                             "block", conv_threads(k), 1, 1, "shared_bytes", 0, "args", args);
  return json_pack("{s:[], s:[o]}", "buffers", "launches", launch);
}

/* The candidate of match under knobs k into *ret_candidate (caller owns), or -1 with why. */
static int conv_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                         char *why, size_t whylen) {
  struct conv c;
  conv_read(match, &c);
  if (conv_check(match, k, why, whylen) != 0)
    return -1;
  char *frag = conv_fragment(&c);
  char *src = frag ? cg_source("conv.cu", frag) : NULL;
  int rc = cg_candidate(src, k, src ? conv_plan(&c, k) : NULL,
                        "convolution: could not generate the candidate (out of memory)",
                        ret_candidate, why, whylen);
  free(frag);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_conv = {
    .name = "gemm",
    .match = conv_match,
    .defaults = conv_defaults,
    .check = conv_check,
    .generate = conv_generate,
};
