/* The builtin reduction family (sum, mean, max, min, prod, argmax, argmin, the L1, L2
 * and max-abs vector norms, and global adaptive average/max pools, over any dim or
 * contiguous group of dims, with a pointwise prologue on the input and a pointwise
 * epilogue on the result that may read other tensors at the output's index; a reduction
 * may reduce the result of another one, as in x.min(1)[0].sum(2)), and the canonical
 * [outer, R, inner] helpers the softmax and norm families share.
 *
 * Match object (owned by the caller of match):
 *   {"family": "reduction", "op": "sum|mean|max|min|prod|argmax|argmin|norm_l1|norm_l2|
 *                                  norm_inf", "summary": "...",
 *    "canonical": [outer, R, inner],  the input as [outer, reduced, inner]
 *    "dims": [first, last],           the reduced dims of the input (contiguous)
 *    "keepdim": bool,
 *    "input_shape": [...], "output": "output:0", "out_dtype": "float32" | "int64",
 *    "prologue": IR,                  what is reduced, over leaves of the input shape
 *                                     (and the inner reduction's value "S1", if any)
 *    "epilogue": IR | null,           applied to the reduced value (bound symbol "S"); its
 *                                     leaves are read at the output element's flat index
 *    "inner": {"op", "canonical": [o, R, i], "prologue": IR}   (optional) a first
 *                                     reduction whose value (element j of its o * i) feeds
 *                                     the prologue as "S1"
 *    "sm_count": 132}                 the device's SM count (builtin_sm_count)
 *
 * Template: proposers/builtin/templates/reduce_rows.cu: ofg_reduce_rows (inner == 1: a warp,
 * a sub-warp group or a block per row, or SPLIT blocks per row), ofg_reduce_cols
 * (inner > 1: threads along inner, a loop over R, or SPLIT slices of R), and
 * ofg_reduce_finish (combines the SPLIT partials). */
#ifndef OPFORGE_BUILTIN_REDUCTION_H
#define OPFORGE_BUILTIN_REDUCTION_H

#include <jansson.h>
#include <stdbool.h>

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_reduction;

/* [outer, R, inner] of reducing a tensor of shape over dims: an integer, a list of
 * integers (negative counts from the end), or NULL/empty for every dim. The dims must
 * form one contiguous run. Returns 0 with ret[3] and the run's first and last dim, or -1
 * with why. */
int reduce_canonical(const json_t *shape, const json_t *dims, long long ret[3],
                     int *ret_first, int *ret_last, char *why, size_t whylen);

/* True for targets that reduce (sum, mean, amax, argmax, norm, max/min over a dim ...). */
bool reduce_is_reduction_op(const char *target);

/* What a reduction node computes, read from its target and arguments. */
struct reduce_call {
  const char *op; /* sum mean prod max min argmax argmin norm_l1 norm_l2 norm_inf */
  json_t *dims;   /* borrowed: an int, a list, or NULL for every dim */
  bool keepdim;
  bool tuple;     /* torch.max/min over a dim: (values, indices) */
  json_t *owned;  /* dims made up for the call (a global adaptive pool's trailing dims);
                     released by reduce_call_clear */
};

/* True when node (borrowed) reduces; max/min with a tensor `other` are elementwise. */
bool reduce_node_is_reduction(json_t *node);
/* Reads what reduction node computes (a global adaptive pool is a mean or max over its
 * trailing dims with keepdim). 0, or -1 with why for unsupported forms (dtype=, p other
 * than 1, 2, fro and inf, matrix norms, var, logsumexp ...). Release *ret with
 * reduce_call_clear either way. */
int reduce_call_of(json_t *node, struct reduce_call *ret, char *why, size_t whylen);
/* Releases what reduce_call_of made for *s (its owned dims). */
void reduce_call_clear(struct reduce_call *s);

/* The default mapping of rows of R contiguous elements for the row families: "warp" (R
 * small: one warp or a sub-warp group per row) or "block". */
const char *reduce_row_mapping(long long r);

/* ---- layouts of the row-wise families (softmax, norm) ---- */

/* Where a thread keeps its part of a row between the statistics and the output. */
enum row_path {
  ROW_PATH_REG,    /* registers: OFG_NVT vectors per thread */
  ROW_PATH_SMEM,   /* dynamic shared memory, filled with cp.async */
  ROW_PATH_STREAM, /* re-read from global memory */
};

/* How [outer, R, inner] maps onto threads and blocks under a knob set. */
struct row_layout {
  bool cols;          /* inner > 1: a thread per VEC columns, looping over R */
  bool warp;          /* rows: OFG_GROUP = 32 / ROWS lanes per row */
  int group;          /* threads per row chunk */
  int rpb;            /* rows per block */
  int cl;             /* blocks per row in one cluster (1 = no cluster) */
  bool multi;         /* SPLIT > 8: separate statistics and output launches */
  enum row_path path;
  long long chunkv;   /* vectors of a row handled by one block */
  int nvt;            /* ROW_PATH_REG: vectors per thread */
  long long smem;     /* dynamic shared bytes per block */
};

/* Dynamic shared memory a row family may ask for: 227 KiB less the static scratch. */
#define ROW_SMEM_LIMIT (227 * 1024 - 2048)

/* Resolves the layout for canonical c under knobs (MODE warp_per_row, block_per_row,
 * cached_row and smem_row force a choice; other modes leave it automatic). Returns 0 and
 * *ret, or -1 with why when the knobs do not fit the shape. */
int row_layout_resolve(const long long c[3], const struct knob_set *k, struct row_layout *ret,
                       char *why, size_t whylen);

/* Default knobs of a row-wise family for canonical c on a device of sm_count SMs (the
 * match's builtin_sm_count): a fast layout with MODE "". */
void row_layout_defaults(const long long c[3], int sm_count, struct knob_set *ret);

/* The checks the row kernels (norm, softmax) share once their layout L is resolved: the
 * MODE refusal their family found (NULL for none; borrowed) and whole rows of lanes per
 * block. Returns 0, or -1 with the reason in why. */
int row_layout_check(const struct row_layout *L, const struct knob_set *k,
                     const char *refusal, char *why, size_t whylen);

#endif
