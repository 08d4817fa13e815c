/* The row layouts of the row-wise families (softmax, norm): how [outer, R, inner] maps onto
 * threads, blocks and clusters under a knob set, and the default knobs (see reduction.h). */
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/reduction.h"

static int widest_vec(long long n) {
  return n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}

/* Smallest power of two >= n (n <= 32). */
static int pow2_at_least(long long n) {
  int p = 1;
  while (p < n && p < 32)
    p *= 2;
  return p;
}

/* ---- layouts of the row-wise families ---- */

#define ROW_REG_FLOATS 64 /* floats one thread may cache in registers */

static int row_resolve_cols(const long long c[3], const struct knob_set *k,
                            struct row_layout *L, char *why, size_t whylen) {
  L->cols = true;
  L->group = 1;
  L->cl = 1;
  bool reg = strcmp(k->mode, "cached_row") == 0 || c[1] * k->vec <= ROW_REG_FLOATS;
  L->path = reg ? ROW_PATH_REG : ROW_PATH_STREAM;
  if (c[2] % k->vec != 0)
    snprintf(why, whylen, "VEC=%d: inner length %lld is not a multiple of %d", k->vec, c[2],
             k->vec);
  else if (strcmp(k->mode, "warp_per_row") == 0 || strcmp(k->mode, "block_per_row") == 0)
    snprintf(why, whylen, "MODE %s: inner > 1, threads walk the contiguous inner axis",
             k->mode);
  else if (strcmp(k->mode, "smem_row") == 0)
    snprintf(why, whylen, "MODE smem_row: the column kernel keeps its column in registers "
             "or re-reads it; nothing to stage in shared memory");
  else if (reg && c[1] * k->vec > ROW_REG_FLOATS)
    snprintf(why, whylen, "MODE cached_row: %lld rows x VEC=%d exceed %d registers per "
             "thread", c[1], k->vec, ROW_REG_FLOATS);
  else if (k->rows != 1 || k->split != 1 || k->items != 1)
    snprintf(why, whylen, "ROWS, SPLIT and ITEMS apply to rows (inner == 1); the column "
             "kernel uses UNROLL");
  else if (k->unroll < 1 || k->unroll > 16 || (reg && k->unroll != 1))
    snprintf(why, whylen, "UNROLL=%d: %s", k->unroll,
             reg ? "the cached column's loops are fully unrolled" : "1 to 16");
  else
    return 0;
  return -1;
}

/* The path of a row chunk when no MODE forces one. */
static enum row_path row_auto_path(const struct row_layout *L, int vec) {
  if (L->multi)
    return ROW_PATH_STREAM;
  if (L->nvt <= 8 && L->nvt * vec <= 32)
    return ROW_PATH_REG;
  if ((long long)L->rpb * L->chunkv * vec * 4 <= ROW_SMEM_LIMIT)
    return ROW_PATH_SMEM;
  return ROW_PATH_STREAM;
}

/* Checks the knobs that depend on the path of a rows layout. */
static int row_check_path(const long long c[3], const struct knob_set *k,
                          const struct row_layout *L, char *why, size_t whylen) {
  /* The cached values plus about 24 registers of addresses and statistics must fit the
   * 64K registers of an SM at this block size (255 at most per thread). */
  int regs = L->nvt * k->vec + 24, allowed = 65536 / k->block > 255 ? 255 : 65536 / k->block;
  if (L->path == ROW_PATH_REG && L->nvt * k->vec > ROW_REG_FLOATS)
    snprintf(why, whylen, "a row chunk of %lld floats needs %d floats per thread in "
             "registers (max %d): raise BLOCK or SPLIT", L->chunkv * k->vec, L->nvt * k->vec,
             ROW_REG_FLOATS);
  else if (L->path == ROW_PATH_REG && regs > allowed)
    snprintf(why, whylen, "a row chunk of %lld floats needs %d floats per thread in "
             "registers and about %d registers; %d threads per block allow %d",
             L->chunkv * k->vec, L->nvt * k->vec, regs, k->block, allowed);
  else if (L->path == ROW_PATH_SMEM && L->smem > ROW_SMEM_LIMIT)
    snprintf(why, whylen, "%lld bytes of shared memory per block exceed %d: raise SPLIT",
             L->smem, ROW_SMEM_LIMIT);
  else if (L->multi && L->path != ROW_PATH_STREAM)
    snprintf(why, whylen, "SPLIT=%d > 8 splits rows over separate launches, which stream "
             "the row; cached rows split over clusters of at most 8", k->split);
  else if (L->path != ROW_PATH_STREAM && k->items != 1)
    snprintf(why, whylen, "ITEMS=%d batches loads of a streamed row; this row is cached "
             "(use VEC or BLOCK)", k->items);
  else if (k->items < 1 || k->items > 16)
    snprintf(why, whylen, "ITEMS=%d: 1 to 16 vectors per batch", k->items);
  else if (k->unroll < 1 || k->unroll > 16 || (L->path == ROW_PATH_REG && k->unroll != 1))
    snprintf(why, whylen, "UNROLL=%d: %s", k->unroll,
             L->path == ROW_PATH_REG ? "the cached row's loops are fully unrolled" : "1 to 16");
  else
    return 0;
  (void)c;
  return -1;
}

int row_layout_resolve(const long long c[3], const struct knob_set *k, struct row_layout *ret,
                       char *why, size_t whylen) {
  struct row_layout L = {0};
  if (c[2] > 1) {
    if (row_resolve_cols(c, k, &L, why, whylen) != 0)
      return -1;
    *ret = L;
    return 0;
  }
  bool force_warp = strcmp(k->mode, "warp_per_row") == 0;
  bool force_block = strcmp(k->mode, "block_per_row") == 0;
  L.warp = force_warp || (!force_block && k->split == 1 && c[1] <= 1024);
  if (L.warp && k->rows > 32) { /* before 32 / ROWS would make a group of 0 lanes */
    snprintf(why, whylen, "ROWS=%d: rows per warp must be a power of two up to 32", k->rows);
    return -1;
  }
  L.group = L.warp ? 32 / (k->rows ? k->rows : 1) : k->block;
  L.rpb = L.warp ? k->block / L.group : 1;
  L.multi = k->split > 8;
  L.cl = k->split > 1 && k->split <= 8 ? k->split : 1;
  if (c[1] % k->vec != 0) {
    snprintf(why, whylen, "VEC=%d: rows of %lld floats are not %d-byte aligned", k->vec, c[1],
             4 * k->vec);
    return -1;
  }
  if (k->split < 1 || k->split > 1024 || k->split > c[1] / k->vec) {
    snprintf(why, whylen, "SPLIT=%d: 1 to 1024 blocks per row, at most one per vector",
             k->split);
    return -1;
  }
  if (L.warp && (k->split > 1 || k->rows < 1 || k->rows > 32 || (k->rows & (k->rows - 1)))) {
    snprintf(why, whylen, k->split > 1 ? "SPLIT=%d splits a row over blocks: use "
                                         "block_per_row" : "ROWS=%d: rows per warp must be a "
                                                           "power of two up to 32",
             k->split > 1 ? k->split : k->rows);
    return -1;
  }
  if (!L.warp && k->rows != 1) {
    snprintf(why, whylen, "ROWS=%d: a block handles one row (chunk); ROWS applies to "
             "warp_per_row", k->rows);
    return -1;
  }
  long long nv = c[1] / k->vec;
  L.chunkv = (nv + k->split - 1) / k->split;
  long long nvt = (L.chunkv + L.group - 1) / L.group;
  L.nvt = nvt > 1 << 20 ? 1 << 20 : (int)nvt;
  if (strcmp(k->mode, "cached_row") == 0)
    L.path = ROW_PATH_REG;
  else if (strcmp(k->mode, "smem_row") == 0)
    L.path = ROW_PATH_SMEM;
  else
    L.path = row_auto_path(&L, k->vec);
  L.smem = L.path == ROW_PATH_SMEM ? (long long)L.rpb * L.chunkv * k->vec * 4 : 0;
  if (row_check_path(c, k, &L, why, whylen) != 0)
    return -1;
  *ret = L;
  return 0;
}

/* Defaults for rows (inner == 1) on a device of sms SMs. */
static void row_defaults_rows(const long long c[3], long long sms, struct knob_set *k) {
  k->vec = widest_vec(c[1]);
  long long nv = c[1] / k->vec, bytes = c[1] * 4;
  if (c[1] <= 1024) {
    int g = pow2_at_least(nv);
    k->rows = 32 / g;
    return;
  }
  if (nv <= 8192 && c[0] >= 2 * sms) {
    k->block = nv <= 2048 ? 256 : nv <= 4096 ? 512 : 1024;
    return;
  }
  if (bytes <= 64 * 1024 && c[0] >= 2 * sms) {
    k->block = 512;
    return;
  }
  long long want = (bytes + 64 * 1024 - 1) / (64 * 1024);
  if (want > 8)
    want = (bytes + 192 * 1024 - 1) / (192 * 1024);
  if (want <= 8 && c[0] * want >= 2 * sms) {
    k->split = (int)want;
    k->block = bytes / want > 96 * 1024 ? 1024 : 512;
    return;
  }
  /* Rows too long for a cluster, or too few rows to fill the GPU: two launches, chunks of
   * about 64 KiB, at least two blocks per SM. */
  long long split = (bytes + 64 * 1024 - 1) / (64 * 1024);
  long long fill = (2 * sms + c[0] - 1) / c[0];
  split = split < fill ? fill : split;
  split = split < 9 ? 9 : split;
  split = split > 1024 ? 1024 : split;
  split = split > nv ? nv : split;
  k->split = (int)split;
  k->block = 512;
  k->items = 4;
}

void row_layout_defaults(const long long c[3], int sm_count, struct knob_set *ret) {
  struct knob_set k = {.block = 256, .vec = 1, .items = 1, .rows = 1, .unroll = 1,
                       .split = 1};
  if (c[2] == 1) {
    row_defaults_rows(c, sm_count, &k);
  } else {
    k.vec = widest_vec(c[2]);
    while (k.vec > 1 && c[1] * k.vec > ROW_REG_FLOATS)
      k.vec /= 2;
    if (c[1] * k.vec > ROW_REG_FLOATS)
      k.unroll = 4;
  }
  *ret = k;
}
