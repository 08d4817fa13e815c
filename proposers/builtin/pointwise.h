/* The builtin pointwise family: one fused kernel for a chain of elementwise ops with
 * broadcasting and scalar constants (relu, gelu, softsign, A * s, diag(A) @ B as
 * A.unsqueeze(1) * B, ...).
 *
 * Match object (owned by the caller of match):
 *   {"family": "pointwise", "op": "<the single op>" | "chain" | "copy", "summary": "...",
 *    "ops": ["abs", "add", "div"],   the chain's ops in order
 *    "numel": n, "shape": [...],     the output
 *    "output": "output:0",
 *    "expr": {...},                  the chain's IR (proposers/builtin/expr.h)
 *    "sm_count": 132}                the device's SM count (builtin_sm_count)
 *
 * Template: proposers/builtin/templates/pointwise.cu (kernel ofg_pointwise). The plan has one
 * launch whose arguments are the leaf tensors in IR order, then the output. */
#ifndef OPFORGE_BUILTIN_POINTWISE_H
#define OPFORGE_BUILTIN_POINTWISE_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_pointwise;

#endif
