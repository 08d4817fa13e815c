/* The builtin convolution family: a dense or grouped convolution, or a transposed one, in
 * 1D, 2D or 3D, with PyTorch's stride, padding ('valid' and 'same' included), dilation,
 * output_padding, groups and optional bias, as one fp32 SIMT implicit-GEMM kernel.
 * docs/architecture.md, "Convolutions".
 *
 * cuDNN usually runs a convolution faster (eager runs it in TF32), so a region this family
 * generates starts as its library step (engine/partition.c marks it `library_first`) and
 * the search tries the generated kernel when the library time is above the region's floor.
 * HTAM learns it under the family name "gemm": its knobs are GEMM tile knobs.
 * Depthwise convolutions stay with the pooling family, which is tried first.
 *
 * Match object (owned by the caller of match):
 *   {"family": "gemm", "op": "conv2d" | "conv_transpose3d" | ..., "summary": "...",
 *    "x": "input:0", "w": "param:conv.weight" | "input:1", "b": "param:..." | null,
 *    "output": "output:0",
 *    "dims": 1 | 2 | 3, "transposed": bool,
 *    "n": N, "c": C, "oc": OC, "groups": G,
 *    "in": [ID, IH, IW], "out": [OD, OH, OW],     unit leading dims below 3D
 *    "kernel": [kd, kh, kw], "stride": [..], "padding": [..] (before), "dilation": [..],
 *    "math": "tf32" | "fp32" | null}     how eager ran it on the profiling GPU (conv_math)
 *
 * MODE: "" computes in strict fp32; "tf32_rna" rounds both operands to nearest TF32 (ties
 * away from zero) before the exact products and fp32 sums, as cuDNN's TF32 algorithms do,
 * so the result equals eager's element-wise where eager ran in TF32. The default is
 * "tf32_rna" when the match's math is "tf32"; a match whose math is "fp32" refuses it
 * (rounded operands would fail the accuracy budget of a strict fp32 reference).
 *
 * Template: proposers/builtin/templates/conv.cu (ofg_conv). */
#ifndef OPFORGE_BUILTIN_CONV_H
#define OPFORGE_BUILTIN_CONV_H

#include <jansson.h>
#include <stddef.h>

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_conv;

/* Matches a sub-profile that is exactly one convolution call (a Conv/ConvTranspose
 * module, or torch's or F's conv<d>d / conv_transpose<d>d) on float32 tensors
 * (conv_match.c). The contract of struct builtin_family's match: 0 for any other graph. */
int conv_match(json_t *profile, json_t **ret_match, char *why, size_t whylen);

#endif
