/* The builtin attention family: scaled dot-product attention and nn.MultiheadAttention in
 * fp32, as one pass over the keys with an online softmax (the [Lq, Lk] weights are never
 * written). docs/architecture.md, "Attention".
 *
 * HTAM learns it under the family name "gemm" (builtin_family_attention.name): its knobs
 * are the GEMM tile knobs (BM, BN, TM, TN, UNROLL, MINB), so the GEMM strategies of the
 * memory are its moves.
 *
 * Match object (owned by the caller of match):
 *   {"family": "gemm", "op": "sdpa" | "mha", "summary": "...",
 *    "q": "input:0", "k": "input:1", "v": "input:2",  the attention's inputs (mha: the
 *                                         query, key and value before the projections)
 *    "output": "output:0",
 *    "batch": n, "heads": h, "lq": Lq, "lk": Lk, "d": D, "dv": Dv,
 *    "causal": false, "scale": s,         softmax(Q K^T * scale) V (mha: the projection
 *                                         already scales Q, and scale is 1)
 *    sdpa only: "k_transposed": true when k is read as a [..., D, Lk] input (the
 *    explicit spelling softmax(q @ k^T * c, dim=-1) @ v with k^T made outside the region),
 *    mha only: "embed": E, "batch_first": false, "same_input": true (query, key and
 *    value are one tensor: one projection launch),
 *    "w_in": "param:attn.in_proj_weight", "b_in": "param:..." | null,
 *    "w_out": "param:attn.out_proj.weight", "b_out": "param:..." | null,
 *    "sm_count": 132}
 *
 * Template: proposers/builtin/templates/attention.cu (ofg_attention, and for mha the
 * projections ofg_attn_proj[_bias]). */
#ifndef OPFORGE_BUILTIN_ATTENTION_H
#define OPFORGE_BUILTIN_ATTENTION_H

#include <jansson.h>
#include <stddef.h>

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_attention;

/* Matches a sub-profile that is exactly one scaled_dot_product_attention call, one
 * MultiheadAttention module call with its getitem(s), or the explicit chain
 * matmul(softmax(matmul(q, k^T) [* c | / c], dim=-1), v) (attention_match.c). The
 * contract of struct builtin_family's match. */
int attention_match(json_t *profile, json_t **ret_match, char *why, size_t whylen);

#endif
