/* The GEMM family of the builtin proposer: GEMM, batched GEMM, linear layers and GEMV,
 * with transposed operands, a fused pointwise epilogue, an optional row tail (reductions,
 * softmax and norms over the output features, as a second launch), training-mode batch
 * norm over the batch, and a broadcast output stage.
 *
 * Match schema (proposers/builtin/builtin.h: the family owns it):
 * {
 *   "family": "gemm",
 *   "op": "gemm" | "gemv" | "row_scale",
 *   "summary": "gemm 1024x8192x8192 B^T epilogue[add,mul,leaky_relu]",
 *   "batch": 1, "m": 1024, "n": 8192, "k": 8192,     canonical problem (row_scale: k = 0)
 *   "trans_a": false, "trans_b": true,                operands stored [K,M] / [N,K]
 *   "a": "input:0", "b": "param:gemm.weight",         tensors (gemv: "a" is the matrix)
 *   "a_bstride": 0, "b_bstride": 0,                   batch strides in elements (0: shared)
 *   "gemv_swap": false,                               gemv over B's rows (M = 1)
 *   "mask": {"kind": "triu"|"tril", "diagonal": 0} | null,   output tiles it zeroes
 *   "epilogue": {"ops": [...], "operands": [...], "code": "<device function ofg_epi>"},
 *   "colstats": {"eps": 1e-5} | null,                 batch norm statistics per column
 *   "tail": {"ops": [...], "operands": [...], "code": "<device function ofg_tail_body>",
 *            "cols_in": 8192, "cols_out": 1 (0: one value per row), "smem_floats": n,
 *            "dst": "output:0" | "buffer:tail_out"} | null,
 *   "expand": {"ops": [...], "operands": [...], "code": "<device function ofg_expand>",
 *              "numel": n, "cols": c} | null,
 *   "gemm_dst": "output:0" | "buffer:gemm_out",
 *   "rows": 1024, "cols": 8192,                       the GEMM stage geometry
 *   "sm_count": 132,                                  the device's SMs (builtin_sm_count)
 *   "capability": "9.0" | null,                       the profile's compute capability
 *   "smem_optin": 232448 | null                       its shared memory per block (opt-in)
 * }
 * Operands are tensor names: "input:i", "param:<key>", or "buffer:<name>" for the
 * plan's own buffers (gemm_out, bn_mean, bn_rstd, tail_out).
 *
 * Knobs (struct knob_set): op gemm uses BM, BN, BK, TM, TN, STAGES, VEC, UNROLL, MINB,
 * SPLIT and MODE (pad_smem, ldg, persistent, predicated_tail, idx64, tf32x3/3xtf32, and
 * wgmma_tf32x3, the Hopper kernel, which reads BM, BN, BK, STAGES and SPLIT only and is
 * reached only when named: see gemm_knobs.c);
 * gemv uses BLOCK, VEC, UNROLL; row_scale uses BLOCK, VEC. check() refuses any other
 * knob set to a non-zero value, and every value a shape cannot take, with the reason. */
#ifndef OPFORGE_BUILTIN_GEMM_H
#define OPFORGE_BUILTIN_GEMM_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_gemm;

/* The family's entry points (also reachable through builtin_family_gemm). See
 * struct builtin_family for the contracts. */
int gemm_match(json_t *profile, json_t **ret_match, char *why, size_t whylen);
void gemm_defaults(json_t *match, struct knob_set *ret_knobs);
int gemm_check(json_t *match, const struct knob_set *knobs, char *why, size_t whylen);
int gemm_generate(json_t *match, const struct knob_set *knobs, json_t **ret_candidate, char *why,
                  size_t whylen);

#endif
