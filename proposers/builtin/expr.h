/* Pointwise chains of a profiled FX graph as a small IR and its CUDA text, which the
 * pointwise, reduction, softmax and norm families share.
 *
 * IR (a JSON object, owned by whoever built it):
 *   {"shape": [...],                 the shape the chain produces (broadcast of leaves)
 *    "leaves": [{"tensor": "input:0" | "param:<key>", "dtype": "float32|bool|int32|int64",
 *                "shape": [...], "strides": [...]}],   the leaf as viewed (after unsqueeze,
 *                                     view, expand ...); strides in elements, 0 = broadcast
 *    "steps": [{"op": "add", "in": ["L0", "c:1"], "p": [..]}],
 *    "result": "t2" | "L0" | "c:<value>" | "B:<name>",
 *    "ops": ["abs", "add", "div"],   the step ops in order (for summaries and matching)
 *    "fast_ops": n}                  steps that have a fast-math form (exp, log, div...)
 * Operands: "L<i>" leaf i, "t<k>" step k, "c:<number>" a constant, "B:<name>" a bound
 * symbol (a value the caller supplies, e.g. a row statistic). */
#ifndef OPFORGE_BUILTIN_EXPR_H
#define OPFORGE_BUILTIN_EXPR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/codegen.h"

/* ---- FX node helpers ---- */

/* Argument idx of node (positional) or its keyword name (borrowed), NULL if absent or
 * JSON null. name may be NULL (positional only). */
json_t *expr_arg(json_t *node, size_t idx, const char *name);
/* A numeric constant (int, real, bool, "inf", "-inf", "nan") as a double. Returns 0 and
 * *ret, or -1 when v is not a number. */
int expr_number(const json_t *v, double *ret);
/* The node referenced by v ({"node": name}) in profile (borrowed), or NULL. */
json_t *expr_ref(json_t *profile, const json_t *v);
/* The scalar input value of a placeholder node (a Python number passed to forward), or
 * -1 when node is not such a placeholder. */
int expr_scalar_input(json_t *profile, json_t *node, double *ret);
/* True when the op name belongs to a family other than pointwise (matmul, conv, pooling,
 * scans, losses, norms, softmax, reductions): a chain containing it is not pointwise. */
bool expr_is_foreign_op(const char *target);
/* The node whose value is the graph's single output (borrowed), or NULL when the graph
 * is missing or returns a tuple. */
json_t *expr_output_node(json_t *profile);
/* True when any call node of the graph has a target (last dotted component) for which
 * pred holds; *ret_op (may be NULL) gets its name (borrowed). */
bool expr_graph_has(json_t *profile, bool (*pred)(const char *target), const char **ret_op);
/* The last dotted component of a node's target (static storage of the node). */
const char *expr_target(json_t *node);

/* ---- the IR ---- */

/* Builds the IR of the pointwise computation producing root (borrowed), walking back to
 * placeholders/get_attr leaves. bound (borrowed, may be NULL) maps node names to symbol
 * names: those nodes become operands "B:<symbol>" and are not walked through. Returns 0
 * and *ret_ir (caller owns), or -1 with why naming the op or shape it cannot express
 * (why starts with "foreign op" when the op belongs to another family). */
int expr_build(json_t *profile, json_t *root, json_t *bound, json_t **ret_ir, char *why,
               size_t whylen);

/* Appends a parameterless unary step (e.g. "abs", "square") applied to the IR's result,
 * which becomes the new result. 0, or -1 when op is unknown or memory runs out. */
int expr_append(json_t *ir, const char *op);

/* True when every leaf of the IR is float32 or narrower data read at the flat index of
 * the IR's shape (no broadcasting). */
bool expr_all_full(const json_t *ir);

/* Emits `__device__ __forceinline__ float NAME(float L0, ..., float B_<sym>...)` computing
 * the IR; the bound symbols follow the leaves in the order of the syms array (borrowed
 * strings, may be NULL when nsyms is 0). fast selects the fast-math forms. Also emits the
 * helper functions the body needs, guarded so that several bodies can share them. Returns
 * 0, or -1 when out of memory. */
int expr_emit(const json_t *ir, const char *name, const char *const *syms, size_t nsyms,
              bool fast, struct cg_buf *out);

/* The C expression of leaf i's element offset, given the flat output index variable var
 * (an i64 expression). Returns 1 when the leaf is read at the flat index itself (a full,
 * contiguous leaf of the output shape), 0 with the expression in out otherwise, -1 when
 * out is too small. */
int expr_leaf_offset(const json_t *ir, size_t leaf, const char *var, char *out,
                     size_t outlen);

/* Leaf `leaf`'s sizes and element strides over the result's dims (right-aligned
 * broadcasting; stride 0 where it broadcasts) into size and stride. Returns the rank, or
 * -1 when the leaf does not broadcast to the result shape or the rank exceeds 8. */
int expr_broadcast_strides(const json_t *ir, size_t leaf, long long size[8],
                           long long stride[8]);

/* A copy of ir (caller owns) whose shape, and every leaf's shape and strides, are in the
 * channels-last memory order of a rank-4 or rank-5 result, (N, H, W, C) or
 * (N, D, H, W, C), so that a flat index walks that order. The leaves whose tensor names
 * physical (borrowed array of strings) lists are stored channels-last: they must be full
 * and contiguous leaves of the result's shape, and read at the flat index. Other leaves
 * keep their memory strides, reordered. NULL when the rank is not 4 or 5, a leaf does not
 * broadcast, or a listed leaf is not full and contiguous (expr_layout.c). */
json_t *expr_channels_last(const json_t *ir, const json_t *physical);

/* The CUDA pointer type of a leaf dtype ("float", "unsigned char" for bool, "int",
 * "long long"), NULL for dtypes the IR refuses. */
const char *expr_ctype(const char *dtype);

/* Number of elements of a shape array (1 for []), -1 if malformed. */
long long expr_numel(const json_t *shape);

#endif
