/* The builtin loss family: scalar losses reduced in two deterministic stages.
 *   elementwise: mean/sum/batchmean of a per-element term over broadcast inputs: MSE,
 *     L1, Huber, smooth L1, KL-div (log_target or not), hinge, or any expression of
 *     + - * /, neg, abs, pow(c), square, sqrt, exp, log, relu, clamp over the inputs;
 *   rows: cross-entropy with integer targets (log-softmax + NLL, ignore_index), triplet
 *     margin (p = 1 or 2, eps as torch.pairwise_distance, swap), 1 - cosine similarity.
 *
 * Match object (owned by the caller of match):
 *   {"family": "loss", "op": "mse" | "l1" | "smooth_l1" | "huber" | "kl_div" | "hinge" |
 *                            "elementwise" | "cross_entropy" | "triplet_margin" | "cosine",
 *    "summary": "...", "kind": "elementwise" | "rows",
 *    "canonical": [numel] (elementwise) or [N, D] (rows),
 *    "reduction": "mean" | "sum" | "batchmean", "divisor": the count a mean divides by
 *                  (0: cross-entropy's count of non-ignored rows),
 *    elementwise: "expr": C expression of x0..xn, "leaves": [{"tensor", "index"}] (index:
 *                 "" for a full-shape leaf, else a C expression of the flat index e),
 *                 "transcendental": bool,
 *    rows: "tensors": [names], "margin", "eps", "p", "swap", "ignore_index",
 *    "numel": largest element count of the tensors,
 *    "sm_count": 132}   the device's SM count (builtin_sm_count)
 *
 * Template: proposers/builtin/templates/loss.cu (loss_elem or loss_rows, then loss_final). */
#ifndef OPFORGE_BUILTIN_LOSS_H
#define OPFORGE_BUILTIN_LOSS_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_loss;

#endif
