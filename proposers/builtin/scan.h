/* The builtin scan family: cumsum and cumprod over any dim, reverse, exclusive, masked.
 *
 * Match object (owned by the caller of match):
 *   {"family": "scan", "op": "cumsum" | "cumprod", "summary": "...",
 *    "canonical": [outer, R, inner],   the input as [rows, scanned length, inner]
 *    "dim": d,                         the scanned dim of the input, normalized
 *    "reverse": bool,                  flip(d) -> scan -> flip(d)
 *    "exclusive": "none" | "pad" | "sub_self",
 *                                      pad: cat((zeros_like|ones_like(..), x), d) scanned
 *                                      (optionally sliced to a prefix first); sub_self:
 *                                      scan(x) - x
 *    "pad_value": 0.0 | 1.0,           the value cat puts in front (pad only)
 *    "rows_out": n, "r_out": n,        the output's rows (a prefix of outer) and length
 *    "mask": "none" | "bool" | "float",  x * mask scanned
 *    "tensors": {"x": "input:i", "mask": "input:j" (when masked), "out": "output:0"},
 *    "numel": largest element count of the tensors,
 *    "sm_count": 132}                  the device's SM count (builtin_sm_count)
 *
 * Templates: proposers/builtin/templates/scan.cu (scan_rows, scan_chunk_reduce +
 * scan_chunk_scan, scan_lookback_reset + scan_lookback, scan_cols). */
#ifndef OPFORGE_BUILTIN_SCAN_H
#define OPFORGE_BUILTIN_SCAN_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_scan;

#endif
