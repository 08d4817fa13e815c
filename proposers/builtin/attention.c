/* The builtin attention family: knobs, checks and the candidate (see attention.h; the
 * matcher is attention_match.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/attention.h"
#include "proposers/builtin/codegen.h"

#define ATT_SMEM_LIMIT (227 * 1024)
#define ATT_MAX_REGS 168 /* estimated accumulator registers per thread kept below spilling */

/* The match's sizes, read back once (strings borrowed from the match). */
struct att {
  const char *op;
  long long batch, heads, lq, lk, d, dv, embed;
  bool causal, batch_first, same_input, mha, k_transposed, mask_float;
  const char *mask;     /* sdpa's attn_mask tensor, or NULL */
  json_t *mask_strides; /* [n, h, row, key] */
  double scale;
};

/* Reads match m into *a, which borrows m's strings and mask_strides. */
static void att_read(json_t *m, struct att *a) {
  a->op = json_string_value(json_object_get(m, "op"));
  a->mha = a->op && strcmp(a->op, "mha") == 0;
  a->batch = jint(m, "batch");
  a->heads = jint(m, "heads");
  a->lq = jint(m, "lq");
  a->lk = jint(m, "lk");
  a->d = jint(m, "d");
  a->dv = jint(m, "dv");
  a->embed = jint(m, "embed");
  a->causal = json_is_true(json_object_get(m, "causal"));
  a->batch_first = json_is_true(json_object_get(m, "batch_first"));
  a->same_input = json_is_true(json_object_get(m, "same_input"));
  a->k_transposed = json_is_true(json_object_get(m, "k_transposed"));
  a->mask = json_string_value(json_object_get(m, "mask"));
  a->mask_float = json_is_true(json_object_get(m, "mask_float"));
  a->mask_strides = json_object_get(m, "mask_strides");
  a->scale = json_number_value(json_object_get(m, "scale"));
}

/* Threads that share one row of scores: BN / TN. */
static int att_nx(const struct knob_set *k) {
  return k->tn > 0 ? k->bn / k->tn : 0;
}

/* Threads per block: BM/TM row groups of BN/TN threads. */
static int att_threads(const struct knob_set *k) {
  return k->tm > 0 ? att_nx(k) * (k->bm / k->tm) : 0;
}

/* x rounded up to a multiple of 4 (floats of a 16-byte-aligned tile). */
static long long up4(long long x) {
  return (x + 3) / 4 * 4;
}

/* Dynamic shared memory of ofg_attention in bytes (the template's tile offsets). */
static long long att_smem(const struct att *a, const struct knob_set *k) {
  long long qp = k->bm + 4, kp = k->bn + 1;
  return 4 * (a->d * qp + up4(a->d * kp) + up4((long long)k->bn * a->dv) + (long long)k->bn * qp);
}

/* True when x is a positive power of two. */
static bool pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

/* Defaults into *ret: 16 threads per score row (fewer when Dv needs), 16 row groups;
 * 8 rows per thread (128 queries per block) when that makes at least two blocks per SM,
 * else 4 (64 queries). match stays the caller's. */
static void att_defaults(json_t *match, struct knob_set *ret) {
  struct att a;
  att_read(match, &a);
  *ret = (struct knob_set){0};
  int nx = 16;
  while (nx > 2 && a.dv % nx != 0)
    nx /= 2;
  ret->tm = 8;
  ret->bm = 128;
  if ((a.lq + 127) / 128 * a.batch * a.heads < 2LL * builtin_sm_count(match)) {
    ret->tm = 4;
    ret->bm = 64;
  }
  ret->tn = 4;
  ret->bn = nx * ret->tn;
  ret->unroll = 4;
}

/* The reason a knob set does not fit the match, or NULL. */
static const char *att_refusal(const struct att *a, const struct knob_set *k) {
  if (k->mode[0])
    return "attention has no MODE: it is one fp32 SIMT kernel with an online softmax";
  if (k->block || k->vec > 1 || k->items || k->rows || k->bk || k->stages > 1 || k->split > 1)
    return "attention's knobs are BM, BN, TM, TN, UNROLL and MINB (threads are BM/TM x BN/TN)";
  if (k->tm != 4 && k->tm != 8)
    return "TM (score rows per thread) must be 4 or 8";
  if (!pow2(k->tn) || k->tn > 16 || k->bm % k->tm != 0 || k->bn % k->tn != 0)
    return "TN must be a power of two up to 16, and BM and BN multiples of TM and TN";
  int nx = att_nx(k), nt = att_threads(k);
  if (!pow2(nx) || nx > 32)
    return "BN/TN (threads of one score row) must be a power of two up to 32";
  if (a->dv % nx != 0)
    return "the value head size must be a multiple of BN/TN";
  if (nt < 32 || nt > 1024 || nt % 32 != 0)
    return "BM/TM x BN/TN threads must be a multiple of 32 in [32, 1024]";
  if (k->tm * k->tn + k->tm * (a->dv / nx) + 2 * k->tm > ATT_MAX_REGS)
    return "the register tile (TM x TN scores and TM x Dv/(BN/TN) outputs) would spill";
  if (att_smem(a, k) > ATT_SMEM_LIMIT)
    return "the tiles do not fit 227 KiB of shared memory";
  if (k->minb && nt * k->minb > 2048)
    return "MINB blocks of this size do not fit an SM (2048 threads)";
  if (k->unroll && (!pow2(k->unroll) || k->unroll > 32))
    return "UNROLL must be a power of two up to 32";
  return NULL;
}

/* 0 when knobs k fit match (both the caller's), else -1 with the reason in why. */
static int att_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  struct att a;
  att_read(match, &a);
  const char *no = att_refusal(&a, k);
  if (no) {
    snprintf(why, whylen, "%s", no);
    return -1;
  }
  return 0;
}

/* Element strides of one tensor of the kernel: X_OFF + n*X_N + h*X_H + l*X_L + d. */
struct att_strides {
  long long off, n, h, l;
};

/* Appends tensor x's OFG_<x>_OFF/_N/_H/_L stride macros to b. */
static void define_strides(struct cg_buf *b, const char *x, struct att_strides s) {
  cg_printf(b, "#define OFG_%s_OFF %lldLL\n#define OFG_%s_N %lldLL\n#define OFG_%s_H %lldLL\n"
               "#define OFG_%s_L %lldLL\n",
            x, s.off, x, s.n, x, s.h, x, s.l);
}

/* The strides of a projected [rows, width] buffer whose rows are (l, n) (or (n, l) when
 * batch_first) and whose head h starts at column off + h*D. */
static struct att_strides mha_strides(const struct att *a, long long len, long long width,
                                      long long off) {
  if (a->batch_first)
    return (struct att_strides){off, len * width, a->d, width};
  return (struct att_strides){off, width, a->d, a->batch * width};
}

/* OFG_MASK (0 none, 1 boolean, 2 added to the scores), its element type and strides
 * over (n, h, row, key). */
static void mask_macros(struct cg_buf *b, const struct att *a) {
  cg_printf(b, "#define OFG_MASK %d\n", !a->mask ? 0 : a->mask_float ? 2 : 1);
  if (!a->mask)
    return;
  cg_printf(b, "#define OFG_MASK_T %s\n", a->mask_float ? "float" : "unsigned char");
  static const char *const names[4] = {"OFG_M_N", "OFG_M_H", "OFG_M_L", "OFG_M_K"};
  for (size_t i = 0; i < 4; i++)
    cg_printf(b, "#define %s %lldLL\n", names[i],
              (long long)json_integer_value(json_array_get(a->mask_strides, i)));
}

/* The fragment of attention.cu's macros for *a (caller frees), NULL when out of memory. */
static char *att_fragment(const struct att *a) {
  struct cg_buf b = {0};
  char scale[48];
  cg_float(a->scale * 1.4426950408889634, scale, sizeof scale);
  cg_printf(&b, "#undef OFG_PRAGMA\n#ifndef OFG_EMU\n#define OFG_PRAGMA(x) _Pragma(#x)\n"
                "#define OFG_DYN_SMEM(name) extern __shared__ float4 name[]\n"
                "#else\n#define OFG_PRAGMA(x)\n"
                "#define OFG_DYN_SMEM(name) float4* name = (float4*)ofg_emu_dyn_smem()\n#endif\n"
                "#define OFG_UNROLL_N(n) OFG_PRAGMA(unroll n)\n");
  cg_define_ll(&b, "OFG_D", a->d);
  cg_define_ll(&b, "OFG_DV", a->dv);
  cg_define_ll(&b, "OFG_LQ", a->lq);
  cg_define_ll(&b, "OFG_LK", a->lk);
  cg_define_ll(&b, "OFG_HEADS", a->heads);
  cg_printf(&b, "#define OFG_CAUSAL %d\n#define OFG_SCALE_LOG2 %s\n#define OFG_PROJ %d\n",
            a->causal, scale, a->mha);
  cg_define_ll(&b, "OFG_K_D", a->k_transposed ? a->lk : 1);
  if (!a->mha) { /* contiguous [batch, heads, L, D] (K [batch, heads, D, Lk] transposed) */
    long long h = a->heads, lq = a->lq, lk = a->lk;
    define_strides(&b, "Q", (struct att_strides){0, h * lq * a->d, lq * a->d, a->d});
    define_strides(&b, "K", a->k_transposed ? (struct att_strides){0, h * lk * a->d, lk * a->d, 1}
                                            : (struct att_strides){0, h * lk * a->d, lk * a->d,
                                                                   a->d});
    define_strides(&b, "V", (struct att_strides){0, h * lk * a->dv, lk * a->dv, a->dv});
    define_strides(&b, "O", (struct att_strides){0, h * lq * a->dv, lq * a->dv, a->dv});
  } else if (a->same_input) {
    long long w = 3 * a->embed;
    define_strides(&b, "Q", mha_strides(a, a->lq, w, 0));
    define_strides(&b, "K", mha_strides(a, a->lk, w, a->embed));
    define_strides(&b, "V", mha_strides(a, a->lk, w, 2 * a->embed));
  } else {
    define_strides(&b, "Q", mha_strides(a, a->lq, a->embed, 0));
    define_strides(&b, "K", mha_strides(a, a->lk, a->embed, 0));
    define_strides(&b, "V", mha_strides(a, a->lk, a->embed, 0));
  }
  if (a->mha)
    define_strides(&b, "O", mha_strides(a, a->lq, a->embed, 0));
  mask_macros(&b, a);
  return cg_take(&b);
}

/* A launch of the plan (caller owns; takes over args). */
static json_t *launch(const char *kernel, long long gx, long long gy, int threads,
                      long long smem, json_t *args) {
  return json_pack("{s:s, s:[I,I,i], s:[i,i,i], s:I, s:o}", "kernel", kernel, "grid",
                   (json_int_t)(gx < 1 ? 1 : gx), (json_int_t)(gy < 1 ? 1 : gy), 1, "block",
                   threads, 1, 1, "shared_bytes", (json_int_t)smem, "args", args);
}

/* A launch argument (caller owns) naming a plan buffer ("buffer:<name>") or a tensor. */
static json_t *operand(const char *name) {
  if (strncmp(name, "buffer:", 7) == 0)
    return json_pack("{s:s}", "buffer", name + 7);
  return json_pack("{s:s}", "tensor", name);
}

/* One projection launch: dst[rows, cols] = x W[w_row0 .. w_row0+cols)^T (+ b), its first
 * scale_cols columns times scale. b may be NULL. */
static json_t *proj_launch(const char *x, const char *w, const char *b, const char *dst,
                           long long rows, long long cols, long long inner, long long w_row0,
                           long long scale_cols, double scale) {
  json_t *args = json_pack("[o, o]", operand(x), operand(w));
  if (b)
    json_array_append_new(args, operand(b));
  json_array_append_new(args, operand(dst));
  json_array_append_new(args, json_pack("{s:I}", "i32", (json_int_t)rows));
  json_array_append_new(args, json_pack("{s:I}", "i32", (json_int_t)cols));
  json_array_append_new(args, json_pack("{s:I}", "i32", (json_int_t)inner));
  json_array_append_new(args, json_pack("{s:I}", "i32", (json_int_t)w_row0));
  json_array_append_new(args, json_pack("{s:I}", "i32", (json_int_t)scale_cols));
  json_array_append_new(args, json_pack("{s:f}", "f32", scale));
  return launch(b ? "ofg_attn_proj_bias" : "ofg_attn_proj", (cols + 63) / 64, (rows + 63) / 64,
                256, 0, args);
}

/* The string at key k of m (borrowed), or NULL. */
static const char *str(json_t *m, const char *k) {
  return json_string_value(json_object_get(m, k));
}

/* The in-projection launches and the buffers they fill, then the names ofg_attention
 * reads q, k and v from (static storage). */
static void mha_in_proj(json_t *m, const struct att *a, json_t *launches, json_t *buffers,
                        const char *ret_qkv[3]) {
  json_t *in = json_object_get(m, "inputs");
  const char *w = str(m, "w_in"), *b = str(m, "b_in");
  long long e = a->embed, rq = a->lq * a->batch, rk = a->lk * a->batch;
  double qs = json_number_value(json_object_get(m, "q_scale"));
  if (a->same_input) {
    json_array_append_new(buffers, json_pack("{s:s, s:I}", "name", "qkv", "bytes",
                                             (json_int_t)(rq * 3 * e * 4)));
    json_array_append_new(launches, proj_launch(json_string_value(json_array_get(in, 0)), w, b,
                                                "buffer:qkv", rq, 3 * e, e, 0, e, qs));
    ret_qkv[0] = ret_qkv[1] = ret_qkv[2] = "buffer:qkv";
    return;
  }
  static const char *const bufs[3] = {"buffer:q", "buffer:k", "buffer:v"};
  for (int i = 0; i < 3; i++) {
    long long rows = i == 0 ? rq : rk;
    json_array_append_new(buffers, json_pack("{s:s, s:I}", "name", bufs[i] + 7, "bytes",
                                             (json_int_t)(rows * e * 4)));
    json_array_append_new(launches, proj_launch(json_string_value(json_array_get(in, i)), w, b,
                                                bufs[i], rows, e, e, i * e, i == 0 ? e : 0, qs));
    ret_qkv[i] = bufs[i];
  }
}

/* The launch plan (caller owns) of match m (read into *a) under knobs k. */
static json_t *att_plan(json_t *m, const struct att *a, const struct knob_set *k) {
  json_t *launches = json_array(), *buffers = json_array();
  const char *qkv[3], *out = str(m, "output"), *dst = out;
  json_t *in = json_object_get(m, "inputs");
  if (a->mha) {
    mha_in_proj(m, a, launches, buffers, qkv);
    dst = "buffer:attn_out";
    json_array_append_new(buffers, json_pack("{s:s, s:I}", "name", "attn_out", "bytes",
                                             (json_int_t)(a->lq * a->batch * a->embed * 4)));
  } else {
    for (int i = 0; i < 3; i++)
      qkv[i] = json_string_value(json_array_get(in, i));
  }
  json_t *args = json_pack("[o, o, o, o]", operand(qkv[0]), operand(qkv[1]), operand(qkv[2]),
                           operand(dst));
  if (a->mask)
    json_array_append_new(args, operand(a->mask));
  json_array_append_new(launches, launch("ofg_attention", (a->lq + k->bm - 1) / k->bm,
                                         a->batch * a->heads, att_threads(k), att_smem(a, k),
                                         args));
  if (a->mha)
    json_array_append_new(launches, proj_launch("buffer:attn_out", str(m, "w_out"),
                                                str(m, "b_out"), out, a->lq * a->batch,
                                                a->embed, a->embed, 0, 0, 1.0));
  return json_pack("{s:o, s:o}", "buffers", buffers, "launches", launches);
}

/* The candidate of match under knobs k into *ret_candidate (caller owns), or -1 with why. */
static int att_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                        char *why, size_t whylen) {
  struct att a;
  att_read(match, &a);
  if (att_check(match, k, why, whylen) != 0)
    return -1;
  char *frag = att_fragment(&a);
  char *src = frag ? cg_source("attention.cu", frag) : NULL;
  int rc = cg_candidate(src, k, src ? att_plan(match, &a, k) : NULL,
                        "attention: could not generate the candidate (out of memory)",
                        ret_candidate, why, whylen);
  free(frag);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_attention = {
    .name = "gemm",
    .match = attention_match,
    .defaults = att_defaults,
    .check = att_check,
    .generate = att_generate,
};
