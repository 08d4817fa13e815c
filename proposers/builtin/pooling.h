/* The builtin pooling family: max and average pooling, 1D/2D/3D, with PyTorch's kernel
 * size, stride, padding, dilation, ceil_mode, count_include_pad and divisor_override, and
 * the pointwise ops around it fused: a prologue on the pooled operand (relu, a scale, ...:
 * the padding stays -inf / 0 as PyTorch pads the prologue's result) and an epilogue on
 * the pooled value (clamp, an activation, + bias ...).
 *
 * Match object (owned by the caller of match):
 *   {"family": "pooling", "op": "max_pool1d" | ... | "avg_pool3d", "summary": "...",
 *    "canonical": [planes, ID, IH, IW],   the input as 3D pooling sees it (1D and 2D
 *                                         have unit leading spatial dims)
 *    "out": [OD, OH, OW],
 *    "dims": 1 | 2 | 3,
 *    "kernel": [kd, kh, kw], "stride": [..], "padding": [..], "dilation": [..],
 *    "ceil_mode": bool, "count_include_pad": bool, "divisor_override": n (0 = none),
 *    "tensors": {"x": "input:i", "out": "output:0"}, "numel": largest element count,
 *    "prologue": {"ir": IR, "x": leaf},   (optional) the chain computing the pooled operand
 *                                         (proposers/builtin/expr.h); leaf "x" is the tensor
 *                                         read as x, the others are read at the input
 *                                         element's flat index
 *    "epilogue": IR}                      (optional) the chain from the pooled value (bound
 *                                         symbol P) to the output, its leaves read at the
 *                                         output element's flat index
 *
 * Template: proposers/builtin/templates/pooling.cu (pool_tile: shared-memory staged tile;
 * pool_direct: one thread per output). */
#ifndef OPFORGE_BUILTIN_POOLING_H
#define OPFORGE_BUILTIN_POOLING_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_pooling;

#endif
