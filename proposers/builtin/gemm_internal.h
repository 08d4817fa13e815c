/* What the GEMM family's files share, private to them: the matcher's state (gemm_match.c,
 * gemm_stage_match.c, gemm_tail_match.c) and the match read back with the layouts a knob
 * set implies (gemm_layout.c, gemm_knobs.c, gemm_generate.c). The public API is gemm.h. */
#ifndef OPFORGE_BUILTIN_GEMM_INTERNAL_H
#define OPFORGE_BUILTIN_GEMM_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/gemm_epilogue.h"

#define MAX_RANK 8
#define SMEM_LIMIT (227 * 1024)

/* True when n is one of the strings of list (NULL-terminated). */
static inline bool gemm_name_in(const char *n, const char *const *list) {
  for (; *list; list++)
    if (strcmp(n, *list) == 0)
      return true;
  return false;
}

/* ======================= the matcher ======================= */

/* ---- what each graph node evaluates to while matching ---- */

enum vkind {
  V_NONE,   /* not yet evaluated, or a value no op may use */
  V_META,   /* sizes and other non-tensor results (only view ops may read them) */
  V_TENSOR, /* a graph tensor, possibly a transposed view or a diagonal matrix */
  V_VAR,    /* a variable of the pipeline's current segment */
  V_TUPLE,  /* (values, indices) of torch.max/min with dim: values are var */
};

struct val {
  enum vkind kind;
  const char *tensor; /* V_TENSOR: borrowed name */
  bool trans;         /* V_TENSOR: the last two dims are swapped relative to storage */
  bool diag;          /* V_TENSOR: torch.diag of a 1-D tensor */
  int var, gen;       /* V_VAR, V_TUPLE */
  int rank;
  long long shape[MAX_RANK];
};

/* Pipeline phases, in the order a graph may go through them. */
enum phase { PH_PRE, PH_EPI, PH_ROW, PH_SCALAR, PH_EXPAND };

/* The state of one gemm_match() call. It owns vals, users, seg, the tail buffers and
 * lists, and match until gemm_match hands match over; profile and graph are borrowed. */
struct matcher {
  json_t *profile, *graph;
  size_t n;
  struct val *vals;
  int *users;
  char *why;
  size_t whylen;
  json_t *match; /* being built */

  enum phase phase;
  int gen;             /* segment generation: vars of older segments are dead */
  struct epi_prog seg; /* the current pointwise segment */
  bool seg_live;
  long long rows, cols; /* the current stage geometry */
  long long gemm_n;     /* the GEMM's N (the features a row tail reduces) */
  const char *gemm_name;

  /* the row tail */
  struct cg_buf tail_fns, tail_body;
  json_t *tail_ops, *tail_operands;
  long long tail_cols_in, tail_tmp;
  int nfn;
  bool has_tail, has_colstats;
  double bn_eps;
};

/* Node fields as strings borrowed from the node, never NULL. */
static inline const char *node_name(json_t *node) {
  const char *s = json_string_value(json_object_get(node, "name"));
  return s ? s : "?";
}

static inline const char *node_target(json_t *node) {
  const char *s = json_string_value(json_object_get(node, "target"));
  return s ? s : "?";
}

static inline const char *node_op(json_t *node) {
  const char *s = json_string_value(json_object_get(node, "op"));
  return s ? s : "";
}

/* Last dotted component of the target (module class names as they are). */
static inline const char *short_name(json_t *node) {
  const char *t = node_target(node);
  const char *dot = strrchr(t, '.');
  return dot ? dot + 1 : t;
}

static inline bool named(json_t *node, const char *name) {
  return strcmp(short_name(node), name) == 0;
}

/* ---- gemm_match.c: values and the driver's helpers ---- */

/* Writes the reason into m->why and returns -1. */
int mt_fail(struct matcher *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The index of the graph node named name, or -1. */
int mt_node_index(struct matcher *m, const char *name);
/* The value an argument refers to (a node reference; points into m->vals), or NULL for
 * constants. */
struct val *mt_arg_val(struct matcher *m, json_t *arg);
/* An integer argument into *ret: 0, or -1 when v is not an integer. */
int mt_json_ll(json_t *v, long long *ret);
/* Sets *v to variable var of the current segment with the node's shape (of its first
 * output for V_TUPLE). 0, or -1 with the reason in m->why. */
int mt_set_var(struct matcher *m, struct val *v, json_t *node, int var, enum vkind kind);

/* ---- gemm_einsum.c ---- */

/* The logical operands of an einsum node that is a (batched) matmul into *ret_a and *ret_b
 * (rank 2, or 3 with the batch first; trans when stored [K, M] / [N, K]). 0, or -1 with
 * the reason in m->why. */
int mt_einsum_operands(struct matcher *m, json_t *node, struct val *ret_a, struct val *ret_b);

/* ---- gemm_stage_match.c: the stages after the matmul ---- */

/* The value of a node's input (or self) argument, or NULL. */
struct val *mt_input_var(struct matcher *m, json_t *node);
/* Evaluates a node that reads a GEMM value into *out. 0, or -1 with m->why. */
int mt_stage_op(struct matcher *m, json_t *node, struct val *out);
/* True when any argument in v (nested) refers to a GEMM value. */
bool mt_has_stage_arg(struct matcher *m, json_t *v);
/* Ends the pipeline at the graph's output node: the last stage goes into m->match. */
int mt_finish(struct matcher *m, json_t *node);
/* Starts the row tail after the GEMM stage, its epilogue ending at out_var. */
int mt_begin_tail(struct matcher *m, int out_var);
/* The tail parameter name ("t<i>", or a null pointer for a NULL tensor) into buf, adding
 * tensor (borrowed) to the tail's operands. */
void mt_tail_param(struct matcher *m, const char *tensor, char *buf, size_t len);
/* Runs a row operation on x: flushes the pointwise work before it, appends code (copied)
 * to the row program, and moves to phase next with next_cols columns. 0, or -1. */
int mt_row_op(struct matcher *m, struct val *x, const char *opname, enum phase next,
              long long next_cols, const char *code);

/* ---- gemm_tail_match.c: the row operations over the output features ---- */

/* sum, mean, max, min (kind "max"/"min" also for amax/amin) and "lse" over the features. */
int mt_reduce_op(struct matcher *m, json_t *node, struct val *out, const char *kind);
/* softmax, or log_softmax when logsm, over the features. */
int mt_softmax_op(struct matcher *m, json_t *node, struct val *out, bool logsm);
/* GroupNorm, LayerNorm and InstanceNorm (modules or functions) over the features. */
int mt_norm_op(struct matcher *m, json_t *node, struct val *out);
/* Training-mode BatchNorm1d over the batch: column statistics, then the affine map. */
int mt_batchnorm_op(struct matcher *m, json_t *node, struct val *out);
/* AvgPool1d, or MaxPool1d when is_max, over the features. */
int mt_pool_op(struct matcher *m, json_t *node, struct val *out, bool is_max);

/* ======================= the match read back ======================= */

/* The match fields knobs and generation read; strings and objects borrowed from the match. */
struct gm {
  const char *op;
  long long batch, m, n, k, abs, bbs, rows;
  bool ta, tb, swap;
  json_t *epi, *tail, *colstats, *expand, *mask;
  const char *a, *b, *gemm_dst;
  long long sm_count; /* the device's SMs (builtin_sm_count) */
  const char *capability; /* the device's compute capability, NULL when not said */
  long long smem_optin;   /* its shared memory per block in bytes, 0 when not said */
};

/* Reads match (borrowed; *g borrows from it). 0, or -1 with why when malformed. */
int gm_read(json_t *match, struct gm *g, char *why, size_t whylen);

static inline bool op_is(const struct gm *g, const char *op) {
  return strcmp(g->op, op) == 0;
}

static inline bool mode_is(const struct knob_set *k, const char *m) {
  return strcmp(k->mode, m) == 0;
}

static inline bool tf32x3_mode(const struct knob_set *k) {
  return mode_is(k, "tf32x3") || mode_is(k, "3xtf32");
}

/* MODE wgmma_tf32x3: the Hopper kernel (templates/gemm_wgmma.cu), never a default. */
static inline bool wgmma_mode(const struct knob_set *k) {
  return mode_is(k, "wgmma_tf32x3");
}

/* The derived layout of a SIMT GEMM under knobs k. */
struct layout {
  int nt, va, vb, pad_a, pad_b, vec;
  int minb, minb_default; /* __launch_bounds__ min blocks: the knob's, else the default */
  long long smem, tiles, kchunk, nk, grid_x;
  bool even, idx64;
};

/* ---- gemm_layout.c ---- */

/* Registers per thread the SIMT kernel is estimated to need under k. */
int gemm_est_regs(const struct knob_set *k);
/* The SIMT kernel's layout of g under k into *L. */
void gemm_derive(const struct gm *g, const struct knob_set *k, struct layout *L);
/* The 3xTF32 tensor-core kernel's layout of g under k into *L. */
void gemm_derive_tf32(const struct gm *g, const struct knob_set *k, struct layout *L);
/* The Hopper wgmma kernel's layout of g under k into *L: threads (1 + BM/64 warpgroups),
 * copy widths, shared memory (stages, the two raw B buffers, mbarriers), grid. */
void gemm_derive_wgmma(const struct gm *g, const struct knob_set *k, struct layout *L);

#endif
