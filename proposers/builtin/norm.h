/* The builtin norm family: layer, RMS, group, instance and batch norms (modules and
 * functionals; batch norm with training-mode batch statistics and the biased variance),
 * F.normalize, and normalizations written out as x op f(reduce(g(x))) over a dim with
 * keepdim, or over leading dims without it (L1, L2, RMS by hand, x / torch.norm(x) ...). A module norm may be followed by a pointwise chain
 * (the post chain below), which its kernel applies before the store.
 *
 * Match object (owned by the caller of match):
 *   {"family": "norm", "op": "layer_norm|rms_norm|group_norm|instance_norm|batch_norm|
 *                            l1_norm|l2_norm|linf_norm|normalize|rownorm",
 *    "summary": "...",
 *    "canonical": [outer, R, inner],  rows of R normalized together; for batch_norm
 *                                     [N, C, S] with statistics per C over N and S
 *    "stat": "meanvar" | "sum" | "max",
 *    "eps": e,                        inside the square root (meanvar, rms_norm)
 *    "weight": "param:..." | null, "bias": "param:..." | null,
 *    "groups": G, "channels": C, "spatial": S,   affine indexing of group/instance norm
 *    "reduce": "sum|mean|max|norm_l1|norm_l2|norm_inf" | null,   the statistic of a
 *                                     written-out norm (sum and max kinds)
 *    "prologue": IR | null,           what is reduced (proposers/builtin/expr.h)
 *    "epilogue": IR | null,           the output from x (leaf 0) and the statistic S
 *    "post": IR,                      (module norms, when the graph goes on) the pointwise
 *                                     chain from the norm's value (bound symbol N) to the
 *                                     output: a scale, an activation, a residual add; its
 *                                     leaves are read at the output element's index
 *    "input": "input:0", "output": "output:0",
 *    "sm_count": 132}                 the device's SM count (builtin_sm_count)
 *
 * Template: proposers/builtin/templates/norm.cu (ofg_norm_rows, ofg_norm_part +
 * ofg_norm_apply, ofg_norm_cols, ofg_bn_part + ofg_bn_finalize + ofg_bn_apply). */
#ifndef OPFORGE_BUILTIN_NORM_H
#define OPFORGE_BUILTIN_NORM_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_norm;

#endif
