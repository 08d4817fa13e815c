/* The GEMM family's candidate: the source (common.cuh, problem macros, the epilogue, the
 * templates gemm.cu, gemm_tf32x3.cu, gemm_wgmma.cu and gemm_tail.cu, and the generated row program) and
 * the launch plan with its buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm.h"
#include "proposers/builtin/gemm_internal.h"

static json_t *tensor_arg(const char *name) {
  if (strncmp(name, "buffer:", 7) == 0)
    return json_pack("{s:s}", "buffer", name + 7);
  return json_pack("{s:s}", "tensor", name);
}

/* Appends one launch argument per operand of a stage (a list of tensor names). */
static void add_operand_args(json_t *args, json_t *operands) {
  size_t i;
  json_t *o;
  json_array_foreach(operands, i, o) {
    json_array_append_new(args, tensor_arg(json_string_value(o)));
  }
}

/* -D-style parameter macros for a stage's operands: NAME_PARAMS and NAME_ARGS. */
static void param_macros(struct cg_buf *s, const char *name, json_t *operands, const char *prefix) {
  size_t n = json_array_size(operands);
  cg_printf(s, "#define %s_PARAMS ", name);
  for (size_t i = 0; i < n; i++)
    cg_printf(s, ", const float* __restrict__ %s%zu", prefix, i);
  cg_printf(s, "\n#define %s_ARGS ", name);
  for (size_t i = 0; i < n; i++)
    cg_printf(s, ", %s%zu", prefix, i);
  cg_printf(s, "\n");
}

static json_t *launch(const char *kernel, long long gx, long long gy, long long gz, int bx, int by,
                      long long shared, json_t *args) {
  return json_pack("{s:s,s:[I,I,I],s:[i,i,i],s:I,s:o}", "kernel", kernel, "grid", (json_int_t)gx,
                   (json_int_t)gy, (json_int_t)gz, "block", bx, by, 1, "shared_bytes",
                   (json_int_t)shared, "args", args);
}

static int tail_threads(const struct gm *g) {
  return jint(g->tail, "cols_in") <= 512 ? 128 : 256;
}

/* The problem and stage macros every kernel of the source reads. */
static void problem_macros(struct cg_buf *s, const struct gm *g, const struct layout *L) {
  /* OFG_EMU: the unit tests' CPU emulator of the kernels supplies these itself. */
  cg_printf(s, "#undef OFG_PRAGMA\n#ifndef OFG_EMU\n#define OFG_PRAGMA(x) _Pragma(#x)\n"
               "#define OFG_DYN_SMEM(name) extern __shared__ float4 name[]\n"
               "#else\n#define OFG_PRAGMA(x)\n"
               "#define OFG_DYN_SMEM(name) float4* name = (float4*)ofg_emu_dyn_smem()\n#endif\n"
               "#define OFG_UNROLL_N(n) OFG_PRAGMA(unroll n)\n");
  const char *opm = op_is(g, "gemm")   ? "OFG_OP_GEMM"
                    : op_is(g, "gemv") ? "OFG_OP_GEMV"
                                       : "OFG_OP_ROWSCALE";
  cg_printf(s,
            "#define %s 1\n#define OFG_M %lld\n#define OFG_N %lld\n#define OFG_K %lld\n"
            "#define OFG_BATCH %lld\n#define OFG_TRANS_A %d\n#define OFG_TRANS_B %d\n"
            "#define OFG_A_BSTRIDE %lldLL\n#define OFG_B_BSTRIDE %lldLL\n",
            opm, g->m, g->n, g->k, g->batch, g->ta, g->tb, g->abs, g->bbs);
  cg_printf(s, "#define OFG_MIN_BLOCKS %d\n", L->minb);
  cg_printf(s,
            "#define OFG_PAD_A %d\n#define OFG_PAD_B %d\n#define OFG_VEC_A %d\n"
            "#define OFG_VEC_B %d\n#define OFG_IDX64 %d\n",
            L->pad_a, L->pad_b, L->va, L->vb, L->idx64 ? 1 : 0);
  const char *mk = g->mask ? json_string_value(json_object_get(g->mask, "kind")) : NULL;
  cg_printf(s, "#define OFG_MASK %d\n#define OFG_MASK_DIAG %lld\n",
            mk ? (strcmp(mk, "triu") == 0 ? 1 : 2) : 0, g->mask ? jint(g->mask, "diagonal") : 0);
  if (op_is(g, "gemv"))
    cg_printf(s,
              "#define OFG_GEMV_RPB %lldLL\n#define OFG_GEMV_MBSTRIDE %lldLL\n"
              "#define OFG_GEMV_XBSTRIDE %lldLL\n#define OFG_GEMV_SWAP %d\n",
              g->swap ? g->n : g->m, g->swap ? 0 : g->abs, g->swap ? 0 : g->bbs, g->swap);
  param_macros(s, "OFG_EPI", json_object_get(g->epi, "operands"), "e");
  if (g->tail) {
    cg_printf(s,
              "#define OFG_TAIL_COLS_IN %lld\n#define OFG_TAIL_TMP %lld\n"
              "#define TAIL_THREADS %d\n",
              jint(g->tail, "cols_in"),
              jint(g->tail, "smem_floats") - (jint(g->tail, "cols_in") + 3) / 4 * 4 - 32,
              tail_threads(g));
    param_macros(s, "OFG_TAIL", json_object_get(g->tail, "operands"), "t");
  }
  if (g->colstats)
    cg_printf(s, "#define OFG_CS_ROWS %lld\n#define OFG_CS_COLS %lld\n#define OFG_CS_EPS %.9gf\n",
              g->rows, g->n, json_number_value(json_object_get(g->colstats, "eps")));
  if (g->expand) {
    cg_printf(s,
              "#define OFG_EXP_NUMEL %lldLL\n#define OFG_EXP_COLS %lldLL\n"
              "#define OFG_EXP_CALL %s\n",
              jint(g->expand, "numel"), jint(g->expand, "cols"),
              json_string_value(json_object_get(g->expand, "call")));
    param_macros(s, "OFG_EXP", json_object_get(g->expand, "operands"), "x");
  }
}

/* The candidate's source: shared helpers, problem macros, the epilogue, the GEMM
 * template (gemm.cu, with gemm_tf32x3.cu or gemm_wgmma.cu after it for those modes),
 * then the tail's template and generated row program. Caller owns the result. */
static char *build_source(const struct gm *g, const struct layout *L, bool tf32, bool wgmma) {
  const char *main_t = builtin_template("gemm.cu");
  const char *tc_t = builtin_template(wgmma ? "gemm_wgmma.cu" : "gemm_tf32x3.cu");
  const char *tail_t = builtin_template("gemm_tail.cu");
  if (!main_t || !tail_t || !tc_t)
    return NULL;
  struct cg_buf s = {0};
  cg_printf(&s, "// opforge builtin gemm: generated\n");
  if (cg_common(&s) != 0) {
    cg_free(&s);
    return NULL;
  }
  if (tf32)
    cg_printf(&s, "#define OFG_TF32X3 1\n");
  if (wgmma)
    cg_printf(&s, "#define OFG_WGMMA 1\n");
  problem_macros(&s, g, L);
  cg_printf(&s, "%s", epi_prelude());
  cg_printf(&s, "%s\n", json_string_value(json_object_get(g->epi, "code")));
  cg_printf(&s, "%s\n", main_t);
  if (tf32 || wgmma)
    cg_printf(&s, "%s\n", tc_t);
  if (g->tail || g->colstats || g->expand) {
    if (g->expand)
      cg_printf(&s, "%s\n", json_string_value(json_object_get(g->expand, "code")));
    cg_printf(&s, "%s\n", tail_t);
    if (g->tail)
      cg_printf(&s, "%s\n", json_string_value(json_object_get(g->tail, "code")));
  }
  return cg_take(&s);
}

/* The launches after the first: split-K reduction, column statistics, row tail and the
 * broadcast stage. */
static void tail_launches(const struct gm *g, json_t *launches, json_t *buffers) {
  const char *dst = g->gemm_dst;
  if (g->colstats) {
    json_array_append_new(
        buffers, json_pack("{s:s,s:I}", "name", "bn_mean", "bytes", (json_int_t)(g->n * 4)));
    json_array_append_new(
        buffers, json_pack("{s:s,s:I}", "name", "bn_rstd", "bytes", (json_int_t)(g->n * 4)));
    json_t *args =
        json_pack("[o,{s:s},{s:s}]", tensor_arg(dst), "buffer", "bn_mean", "buffer", "bn_rstd");
    json_array_append_new(launches,
                          launch("gemm_colstats", (g->n + 31) / 32, 1, 1, 32, 16, 0, args));
  }
  if (g->tail) {
    const char *tdst = json_string_value(json_object_get(g->tail, "dst"));
    if (strcmp(tdst, "buffer:tail_out") == 0) {
      long long co = jint(g->tail, "cols_out");
      json_array_append_new(buffers, json_pack("{s:s,s:I}", "name", "tail_out", "bytes",
                                               (json_int_t)(g->rows * (co ? co : 1) * 4)));
    }
    json_t *args = json_pack("[o,o]", tensor_arg(dst), tensor_arg(tdst));
    add_operand_args(args, json_object_get(g->tail, "operands"));
    json_array_append_new(launches, launch("gemm_tail", g->rows, 1, 1, tail_threads(g), 1,
                                           jint(g->tail, "smem_floats") * 4, args));
  }
  if (g->expand) {
    json_t *args = json_pack("[{s:s}]", "tensor", "output:0");
    add_operand_args(args, json_object_get(g->expand, "operands"));
    json_array_append_new(launches, launch("gemm_expand", (jint(g->expand, "numel") + 255) / 256, 1,
                                           1, 256, 1, 0, args));
  }
}

/* The first launch (and split-K's reduction) of a SIMT GEMM, GEMV or row scaling. */
static void main_launches(const struct gm *g, const struct knob_set *k, const struct layout *L,
                          json_t *launches, json_t *buffers) {
  json_t *epi_ops = json_object_get(g->epi, "operands");
  if (strcmp(g->gemm_dst, "buffer:gemm_out") == 0)
    json_array_append_new(buffers, json_pack("{s:s,s:I}", "name", "gemm_out", "bytes",
                                             (json_int_t)(g->rows * g->n * 4)));
  if (op_is(g, "row_scale")) {
    json_t *args =
        json_pack("[{s:s},{s:s},o]", "tensor", g->a, "tensor", g->b, tensor_arg(g->gemm_dst));
    long long n = g->m * g->n / k->vec;
    json_array_append_new(
        launches, launch("row_scale", (n + k->block - 1) / k->block, 1, 1, k->block, 1, 0, args));
    return;
  }
  if (op_is(g, "gemv")) {
    json_t *args = json_pack("[{s:s},{s:s},o]", "tensor", g->swap ? g->b : g->a, "tensor",
                             g->swap ? g->a : g->b, tensor_arg(g->gemm_dst));
    add_operand_args(args, epi_ops);
    json_array_append_new(
        launches, launch("gemv_main", g->swap ? g->n : g->rows, 1, 1, k->block, 1, 0, args));
    return;
  }
  int split = k->split ? k->split : 1;
  const char *dst = g->gemm_dst;
  if (split > 1) {
    json_array_append_new(buffers, json_pack("{s:s,s:I}", "name", "partials", "bytes",
                                             (json_int_t)(split * g->rows * g->n * 4)));
    dst = "buffer:partials";
  }
  json_t *args = json_pack("[{s:s},{s:s},o]", "tensor", g->a, "tensor", g->b, tensor_arg(dst));
  add_operand_args(args, epi_ops);
  json_array_append_new(
      launches, launch("gemm_main", L->grid_x, 1, g->batch * split, L->nt, 1, L->smem, args));
  if (split > 1) {
    long long skv = g->n % 4 == 0 ? 4 : 1, total = g->rows * g->n / skv;
    json_t *rargs = json_pack("[{s:s},o]", "buffer", "partials", tensor_arg(g->gemm_dst));
    add_operand_args(rargs, epi_ops);
    json_array_append_new(launches,
                          launch("gemm_splitk", (total + 255) / 256, 1, 1, 256, 1, 0, rargs));
  }
}

int gemm_generate(json_t *match, const struct knob_set *knobs, json_t **ret_candidate, char *why,
                  size_t whylen) {
  struct gm g;
  if (gm_read(match, &g, why, whylen) != 0 || gemm_check(match, knobs, why, whylen) != 0)
    return -1;
  struct knob_set k = *knobs;
  struct layout L = {0};
  bool tf32 = op_is(&g, "gemm") && tf32x3_mode(&k);
  bool wgmma = op_is(&g, "gemm") && wgmma_mode(&k);
  json_t *launches = json_array(), *buffers = json_array();
  if (wgmma) {
    gemm_derive_wgmma(&g, &k, &L);
  } else if (op_is(&g, "gemm") && !tf32) {
    gemm_derive(&g, &k, &L);
  } else if (tf32) {
    gemm_derive_tf32(&g, &k, &L);
  } else {
    L.idx64 = true;
  }
  main_launches(&g, &k, &L, launches, buffers);
  tail_launches(&g, launches, buffers);
  char *src = build_source(&g, &L, tf32, wgmma);
  json_t *plan = json_pack("{s:o,s:o}", "buffers", buffers, "launches", launches);
  int rc = cg_candidate(src, &k, plan, "out of memory building the candidate", ret_candidate,
                        why, whylen);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_gemm = {
    .name = "gemm",
    .match = gemm_match,
    .defaults = gemm_defaults,
    .check = gemm_check,
    .generate = gemm_generate,
};
