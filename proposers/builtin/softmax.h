/* The builtin softmax family: softmax and log-softmax over any dim.
 *
 * Match object (owned by the caller of match):
 *   {"family": "softmax", "op": "softmax" | "log_softmax", "summary": "...",
 *    "canonical": [outer, R, inner],  the input as [outer, softmax dim, inner]
 *    "dim": d,                        the normalized softmax dim
 *    "input": "input:0", "output": "output:0",
 *    "sm_count": 132}                 the device's SM count (builtin_sm_count)
 *
 * Template: proposers/builtin/templates/softmax.cu. The layout (proposers/builtin/softmax.c,
 * softmax_layout) picks one of: ofg_softmax_rows with a sub-warp group, a warp or a block
 * per row, or a cluster of SPLIT <= 8 blocks per row, caching the row in registers or
 * shared memory or streaming it; ofg_softmax_part + ofg_softmax_apply for rows split over
 * more than 8 blocks; ofg_softmax_cols for inner > 1. Statistics are two-pass or online
 * (MODE online / two_pass). */
#ifndef OPFORGE_BUILTIN_SOFTMAX_H
#define OPFORGE_BUILTIN_SOFTMAX_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_softmax;

#endif
