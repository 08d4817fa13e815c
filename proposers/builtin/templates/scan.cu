// Scans (cumsum, cumprod; reverse, exclusive, masked) over [rows, R, inner]. scan.c
// prepends common.cuh and the shape constants (SCAN_*); knobs arrive as -D macros.
// Rows (inner == 1) are scanned warp-striped: each lane holds ITEMS vectors of VEC
// consecutive elements, and the scan is hierarchical (in-vector, warp shuffles, warps of
// the group through shared memory, then a carry across tiles), never one serial chain.
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

#if SCAN_OP_PROD
#define SCAN_IDENT 1.0f
#else
#define SCAN_IDENT 0.0f
#endif

// The element's value before it enters the scan: x, or x * mask as PyTorch multiplies
// (a bool mask becomes 1.0f or 0.0f, so NaN * false stays NaN).
#if SCAN_MASK == 1
#define SCAN_MASK_PARAM , const unsigned char* __restrict__ m
#define SCAN_MASK_ARG , m
#define SCAN_APPLY(v, mv) ((v) * ((mv) != 0 ? 1.0f : 0.0f))
typedef unsigned char mask_t;
#elif SCAN_MASK == 2
#define SCAN_MASK_PARAM , const float* __restrict__ m
#define SCAN_MASK_ARG , m
#define SCAN_APPLY(v, mv) ((v) * (mv))
typedef float mask_t;
#else
#define SCAN_MASK_PARAM
#define SCAN_MASK_ARG
#endif

#if defined(MODE_LDG)
#define SCAN_LD(p) __ldg(p)
#else
#define SCAN_LD(p) (*(p))
#endif

__device__ __forceinline__ float scan_op(float a, float b) {
#if SCAN_OP_PROD
  return a * b;
#else
  return a + b;
#endif
}

// Inclusive scan across the warp (a tree of log2(32) steps).
__device__ __forceinline__ float scan_warp_incl(float v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    float y = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v = scan_op(y, v);
  }
  return v;
}

__device__ __forceinline__ float scan_warp_reduce(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = scan_op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

#if SCAN_INNER == 1
// ---- rows: logical element k of row `row` (0 <= k < SCAN_K) ------------------------------

// Loads logical elements [k, k + VEC) in logical order (the reverse scan reads the row
// from its end). Every operand of a vector access is VEC-aligned: scan.c checks it.
__device__ __forceinline__ void scan_load(const float* __restrict__ x SCAN_MASK_PARAM,
                                          idx_t row, idx_t k, float v[VEC]) {
#if SCAN_REVERSE
  const idx_t p = row * (idx_t)SCAN_R + ((idx_t)SCAN_R - k - VEC);
#else
  const idx_t p = row * (idx_t)SCAN_R + k;
#endif
  float t[VEC];
#if VEC == 4
  float4 q = *reinterpret_cast<const float4*>(x + p);
  t[0] = q.x; t[1] = q.y; t[2] = q.z; t[3] = q.w;
#elif VEC == 2
  float2 q = *reinterpret_cast<const float2*>(x + p);
  t[0] = q.x; t[1] = q.y;
#else
  t[0] = SCAN_LD(x + p);
#endif
#if SCAN_MASK
  mask_t mv[VEC];
#if VEC == 4 && SCAN_MASK == 1
  uchar4 mq = *reinterpret_cast<const uchar4*>(m + p);
  mv[0] = mq.x; mv[1] = mq.y; mv[2] = mq.z; mv[3] = mq.w;
#elif VEC == 4
  float4 mq = *reinterpret_cast<const float4*>(m + p);
  mv[0] = mq.x; mv[1] = mq.y; mv[2] = mq.z; mv[3] = mq.w;
#elif VEC == 2 && SCAN_MASK == 1
  uchar2 mq = *reinterpret_cast<const uchar2*>(m + p);
  mv[0] = mq.x; mv[1] = mq.y;
#elif VEC == 2
  float2 mq = *reinterpret_cast<const float2*>(m + p);
  mv[0] = mq.x; mv[1] = mq.y;
#else
  mv[0] = SCAN_LD(m + p);
#endif
#pragma unroll
  for (int c = 0; c < VEC; c++) t[c] = SCAN_APPLY(t[c], mv[c]);
#endif
#pragma unroll
  for (int c = 0; c < VEC; c++) v[c] = SCAN_REVERSE ? t[VEC - 1 - c] : t[c];
}

// Stores the results of logical elements [k, k + VEC). The exclusive (padded) form
// writes element k at k + 1 (VEC is 1 there) and drops what falls past SCAN_ROUT.
__device__ __forceinline__ void scan_store(float* __restrict__ y, idx_t row, idx_t k,
                                           const float v[VEC]) {
#if SCAN_PAD
  if (k + 1 < (idx_t)SCAN_ROUT) y[row * (idx_t)SCAN_ROUT + k + 1] = v[0];
#else
  float t[VEC];
#pragma unroll
  for (int c = 0; c < VEC; c++) t[c] = SCAN_REVERSE ? v[VEC - 1 - c] : v[c];
#if SCAN_REVERSE
  const idx_t p = row * (idx_t)SCAN_ROUT + ((idx_t)SCAN_R - k - VEC);
#else
  const idx_t p = row * (idx_t)SCAN_ROUT + k;
#endif
#if VEC == 4
  *reinterpret_cast<float4*>(y + p) = make_float4(t[0], t[1], t[2], t[3]);
#elif VEC == 2
  *reinterpret_cast<float2*>(y + p) = make_float2(t[0], t[1]);
#else
  y[p] = t[0];
#endif
#endif
}

#define SCAN_WSEG (32 * VEC * ITEMS)   // logical elements of one warp per tile
#define SCAN_GTILE (SCAN_W * SCAN_WSEG) // of one group (SCAN_W warps) per tile

// One tile of a group in registers: v holds each lane's in-vector inclusive scans, off the
// offset of each vector inside the tile (without the carry), tot the group's total.
struct scan_tile {
  float v[ITEMS][VEC];
#if SCAN_SUB_SELF
  float s[ITEMS][VEC];
#endif
  float off[ITEMS];
  float tot;
};

// Loads and scans one tile starting at logical k0 (the group's range ends at k_end).
// Every warp of the block calls it the same number of times (the group barrier is
// __syncthreads); tot_sm holds [2][groups][SCAN_W] floats, double-buffered by parity.
__device__ __forceinline__ void scan_tile_local(const float* __restrict__ x SCAN_MASK_PARAM,
                                                idx_t row, bool row_ok, idx_t k0, idx_t k_end,
                                                int g, int wg, int lane, int parity,
                                                float* tot_sm, scan_tile& t) {
  const idx_t kb = k0 + (idx_t)wg * SCAN_WSEG;
  float itot[ITEMS];
  if (row_ok && kb + SCAN_WSEG <= k_end) {
    // A whole warp segment: unpredicated loads, all in flight at once.
#pragma unroll
    for (int j = 0; j < ITEMS; j++)
      scan_load(x SCAN_MASK_ARG, row, kb + (idx_t)(j * 32 + lane) * VEC, t.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
      const idx_t k = kb + (idx_t)(j * 32 + lane) * VEC;
      if (row_ok && k < k_end) {
        scan_load(x SCAN_MASK_ARG, row, k, t.v[j]);
      } else {
#pragma unroll
        for (int c = 0; c < VEC; c++) t.v[j][c] = SCAN_IDENT;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
#if SCAN_SUB_SELF
#pragma unroll
    for (int c = 0; c < VEC; c++) t.s[j][c] = t.v[j][c];
#endif
#pragma unroll
    for (int c = 1; c < VEC; c++) t.v[j][c] = scan_op(t.v[j][c - 1], t.v[j][c]);
    const float incl = scan_warp_incl(t.v[j][VEC - 1], lane);
    const float excl = __shfl_up_sync(0xffffffffu, incl, 1);
    t.off[j] = lane == 0 ? SCAN_IDENT : excl;
    itot[j] = __shfl_sync(0xffffffffu, incl, 31);
  }
  float ip = SCAN_IDENT;
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    t.off[j] = scan_op(ip, t.off[j]);
    ip = scan_op(ip, itot[j]);
  }
#if SCAN_W > 1
  float* tot = tot_sm + (parity * (BLOCK / 32) + g * SCAN_W);
  if (lane == 0) tot[wg] = ip;
  __syncthreads();
  float wp = SCAN_IDENT, all = SCAN_IDENT;
#pragma unroll
  for (int w = 0; w < SCAN_W; w++) {
    const float tw = tot[w];
    if (w < wg) wp = scan_op(wp, tw);
    all = scan_op(all, tw);
  }
#pragma unroll
  for (int j = 0; j < ITEMS; j++) t.off[j] = scan_op(wp, t.off[j]);
  t.tot = all;
#else
  (void)g; (void)parity; (void)tot_sm;
  t.tot = ip;
#endif
}

// Adds the carry and stores the tile.
__device__ __forceinline__ void scan_tile_store(float* __restrict__ y, idx_t row, bool row_ok,
                                                idx_t k0, idx_t k_end, int wg, int lane,
                                                float carry, const scan_tile& t) {
  const idx_t kb = k0 + (idx_t)wg * SCAN_WSEG;
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    const idx_t k = kb + (idx_t)(j * 32 + lane) * VEC;
    if (!(row_ok && k < k_end)) continue;
    const float base = scan_op(carry, t.off[j]);
    float r[VEC];
#pragma unroll
    for (int c = 0; c < VEC; c++) {
      r[c] = scan_op(base, t.v[j][c]);
#if SCAN_SUB_SELF
      r[c] = r[c] - t.s[j][c];
#endif
    }
    scan_store(y, row, k, r);
  }
}

// Scans logical [k_begin, k_end) of a row, starting from carry.
__device__ __forceinline__ void scan_range(const float* __restrict__ x SCAN_MASK_PARAM,
                                           float* __restrict__ y, idx_t row, bool row_ok,
                                           idx_t k_begin, idx_t k_end, float carry, int g,
                                           int wg, int lane, float* tot_sm) {
  int parity = 0;
  OFG_PRAGMA(unroll UNROLL)
  for (idx_t k0 = k_begin; k0 < k_end; k0 += SCAN_GTILE) {
    scan_tile t;
    scan_tile_local(x SCAN_MASK_ARG, row, row_ok, k0, k_end, g, wg, lane, parity, tot_sm, t);
    scan_tile_store(y, row, row_ok, k0, k_end, wg, lane, carry, t);
    carry = scan_op(carry, t.tot);
    parity ^= 1;
  }
}

#if SCAN_KIND_ROWS
// One group of SCAN_W warps per row, BLOCK / 32 / SCAN_W rows per block.
extern "C" __global__ void OFG_BOUNDS scan_rows(const float* __restrict__ x SCAN_MASK_PARAM,
                                                float* __restrict__ y) {
  __shared__ float tot_sm[2 * (BLOCK / 32)];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = warp / SCAN_W, wg = warp % SCAN_W;
  const idx_t row = (idx_t)blockIdx.x * (BLOCK / 32 / SCAN_W) + g;
  const bool row_ok = row < (idx_t)SCAN_ROWS;
#if SCAN_PAD
  if (row_ok && wg == 0 && lane == 0) y[row * (idx_t)SCAN_ROUT] = SCAN_PAD_VALUE;
#endif
  scan_range(x SCAN_MASK_ARG, y, row, row_ok, 0, SCAN_K, SCAN_CARRY0, g, wg, lane, tot_sm);
}
#endif

#if SCAN_KIND_SPLIT
// Two-level scan, launch 1: the total of each chunk of SCAN_CHUNK logical elements
// (blocks = rows x SCAN_NCHUNK), reduced as a tree.
extern "C" __global__ void OFG_BOUNDS scan_chunk_reduce(const float* __restrict__ x
                                                        SCAN_MASK_PARAM,
                                                        float* __restrict__ partials) {
  __shared__ float red[BLOCK / 32];
  const idx_t row = blockIdx.x / SCAN_NCHUNK;
  const idx_t c = blockIdx.x % SCAN_NCHUNK;
  const idx_t kb = c * (idx_t)SCAN_CHUNK;
  const idx_t ke = kb + SCAN_CHUNK < (idx_t)SCAN_K ? kb + SCAN_CHUNK : (idx_t)SCAN_K;
  float acc = SCAN_IDENT;
  for (idx_t k = kb + (idx_t)threadIdx.x * VEC; k < ke; k += (idx_t)BLOCK * VEC) {
    float v[VEC];
    scan_load(x SCAN_MASK_ARG, row, k, v);
#pragma unroll
    for (int q = 0; q < VEC; q++) acc = scan_op(acc, v[q]);
  }
  acc = scan_warp_reduce(acc);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < BLOCK / 32 ? red[threadIdx.x] : SCAN_IDENT;
    acc = scan_warp_reduce(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
  }
}

// Launch 2: each chunk starts from the combined totals of the chunks before it.
extern "C" __global__ void OFG_BOUNDS scan_chunk_scan(const float* __restrict__ x SCAN_MASK_PARAM,
                                                      const float* __restrict__ partials,
                                                      float* __restrict__ y) {
  __shared__ float tot_sm[2 * (BLOCK / 32)];
  __shared__ float red[BLOCK / 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const idx_t row = blockIdx.x / SCAN_NCHUNK;
  const int c = (int)(blockIdx.x % SCAN_NCHUNK);
  float acc = SCAN_IDENT;
  for (int i = threadIdx.x; i < c; i += BLOCK) acc = scan_op(acc, partials[row * SCAN_NCHUNK + i]);
  acc = scan_warp_reduce(acc);
  if (lane == 0) red[warp] = acc;
  __syncthreads();
  float carry = SCAN_IDENT;
#pragma unroll
  for (int w = 0; w < BLOCK / 32; w++) carry = scan_op(carry, red[w]);
  carry = scan_op(SCAN_CARRY0, carry);
#if SCAN_PAD
  if (c == 0 && threadIdx.x == 0) y[row * (idx_t)SCAN_ROUT] = SCAN_PAD_VALUE;
#endif
  const idx_t kb = (idx_t)c * SCAN_CHUNK;
  const idx_t ke = kb + SCAN_CHUNK < (idx_t)SCAN_K ? kb + SCAN_CHUNK : (idx_t)SCAN_K;
  scan_range(x SCAN_MASK_ARG, y, row, true, kb, ke, carry, 0, warp, lane, tot_sm);
}
#endif

#if SCAN_KIND_LOOKBACK
// Decoupled look-back, launch 1: clears the tile status words and the ticket counter
// (scratch buffers keep their contents between runs).
extern "C" __global__ void OFG_BOUNDS scan_lookback_reset(unsigned long long* st) {
  for (idx_t i = (idx_t)blockIdx.x * BLOCK + threadIdx.x; i <= (idx_t)SCAN_NTILES;
       i += (idx_t)gridDim.x * BLOCK)
    st[i] = 0ull;
}

__device__ __forceinline__ void scan_publish(unsigned long long* st, idx_t t, unsigned flag,
                                             float v) {
  atomicExch(st + t, ((unsigned long long)flag << 32) | __float_as_uint(v));
}

// Launch 2: one tile (a whole block) per ticket; ticket order makes every predecessor
// resident, so the look-back cannot deadlock. Status word: flag (1 aggregate, 2 inclusive
// prefix) in the high half, the float in the low half, published in one store.
extern "C" __global__ void OFG_BOUNDS scan_lookback(const float* __restrict__ x SCAN_MASK_PARAM,
                                                    float* __restrict__ y,
                                                    unsigned long long* st) {
  __shared__ float tot_sm[2 * (BLOCK / 32)];
  __shared__ idx_t s_ticket;
  __shared__ float s_carry;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) s_ticket = (idx_t)atomicAdd(st + SCAN_NTILES, 1ull);
  __syncthreads();
  const idx_t t = s_ticket;
  const idx_t row = t / SCAN_NCHUNK;
  const idx_t c = t % SCAN_NCHUNK;
  const idx_t kb = c * (idx_t)SCAN_GTILE;
  const idx_t ke = kb + SCAN_GTILE < (idx_t)SCAN_K ? kb + SCAN_GTILE : (idx_t)SCAN_K;
  scan_tile tile;
  scan_tile_local(x SCAN_MASK_ARG, row, true, kb, ke, 0, warp, lane, 0, tot_sm, tile);
  if (threadIdx.x == 0) {
    float acc = SCAN_IDENT;
    if (c == 0) {
      acc = SCAN_CARRY0;
    } else {
      scan_publish(st, t, 1u, tile.tot);
      for (idx_t p = t - 1;; --p) {
        unsigned long long s;
        do {
          s = *(volatile unsigned long long*)(st + p);
        } while ((s >> 32) == 0ull);
        acc = scan_op(__uint_as_float((unsigned)s), acc);
        if ((s >> 32) == 2ull) break;
      }
    }
    scan_publish(st, t, 2u, scan_op(acc, tile.tot));
    s_carry = acc;
#if SCAN_PAD
    if (c == 0) y[row * (idx_t)SCAN_ROUT] = SCAN_PAD_VALUE;
#endif
  }
  __syncthreads();
  scan_tile_store(y, row, true, kb, ke, warp, lane, s_carry, tile);
}
#endif

#else
// ---- columns (inner > 1): threadIdx.x walks the contiguous inner axis ---------------------
// Block = SCAN_TX x SCAN_TY threads; each thread owns VEC adjacent columns and ITEMS
// consecutive logical rows of a tile of SCAN_TY * ITEMS rows.

__device__ __forceinline__ idx_t scan_in_row(idx_t k) {
  return SCAN_REVERSE ? (idx_t)SCAN_R - 1 - k : k;
}

__device__ __forceinline__ idx_t scan_out_row(idx_t k) {
  return SCAN_PAD ? k + 1 : scan_in_row(k);
}

__device__ __forceinline__ void scan_col_load(const float* __restrict__ x SCAN_MASK_PARAM,
                                              idx_t p, float v[VEC]) {
#if VEC == 4
  float4 q = *reinterpret_cast<const float4*>(x + p);
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
#elif VEC == 2
  float2 q = *reinterpret_cast<const float2*>(x + p);
  v[0] = q.x; v[1] = q.y;
#else
  v[0] = SCAN_LD(x + p);
#endif
#if SCAN_MASK
#pragma unroll
  for (int c = 0; c < VEC; c++) v[c] = SCAN_APPLY(v[c], SCAN_LD(m + p + c));
#endif
}

__device__ __forceinline__ void scan_col_store(float* __restrict__ y, idx_t p, const float v[VEC]) {
#if VEC == 4
  *reinterpret_cast<float4*>(y + p) = make_float4(v[0], v[1], v[2], v[3]);
#elif VEC == 2
  *reinterpret_cast<float2*>(y + p) = make_float2(v[0], v[1]);
#else
  y[p] = v[0];
#endif
}

extern "C" __global__ void OFG_BOUNDS scan_cols(const float* __restrict__ x SCAN_MASK_PARAM,
                                                float* __restrict__ y) {
  __shared__ float tot[2][SCAN_TY][SCAN_TX * VEC];
  const int tx = threadIdx.x % SCAN_TX, ty = threadIdx.x / SCAN_TX;
  const idx_t o = blockIdx.x / SCAN_CTILES;
  const idx_t i = (idx_t)(blockIdx.x % SCAN_CTILES) * (SCAN_TX * VEC) + (idx_t)tx * VEC;
  const bool col_ok = i < (idx_t)SCAN_INNER;
  const idx_t in_base = o * (idx_t)SCAN_R * SCAN_INNER + i;
  const idx_t out_base = o * (idx_t)SCAN_ROUT * SCAN_INNER + i;
  float carry[VEC];
#pragma unroll
  for (int c = 0; c < VEC; c++) carry[c] = SCAN_CARRY0;
#if SCAN_PAD
  if (col_ok && ty == 0) scan_col_store(y, out_base, carry);
#endif
  int parity = 0;
  OFG_PRAGMA(unroll UNROLL)
  for (idx_t k0 = 0; k0 < (idx_t)SCAN_K; k0 += SCAN_TY * ITEMS) {
    float v[ITEMS][VEC];
#if SCAN_SUB_SELF
    float s[ITEMS][VEC];
#endif
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
      const idx_t k = k0 + ty * ITEMS + j;
      if (col_ok && k < (idx_t)SCAN_K) {
        scan_col_load(x SCAN_MASK_ARG, in_base + scan_in_row(k) * SCAN_INNER, v[j]);
      } else {
#pragma unroll
        for (int c = 0; c < VEC; c++) v[j][c] = SCAN_IDENT;
      }
#if SCAN_SUB_SELF
#pragma unroll
      for (int c = 0; c < VEC; c++) s[j][c] = v[j][c];
#endif
      if (j > 0) {
#pragma unroll
        for (int c = 0; c < VEC; c++) v[j][c] = scan_op(v[j - 1][c], v[j][c]);
      }
    }
#pragma unroll
    for (int c = 0; c < VEC; c++) tot[parity][ty][tx * VEC + c] = v[ITEMS - 1][c];
    __syncthreads();
    float pre[VEC], all[VEC];
#pragma unroll
    for (int c = 0; c < VEC; c++) {
      pre[c] = SCAN_IDENT;
      all[c] = SCAN_IDENT;
    }
    for (int w = 0; w < SCAN_TY; w++) {
#pragma unroll
      for (int c = 0; c < VEC; c++) {
        const float tw = tot[parity][w][tx * VEC + c];
        if (w < ty) pre[c] = scan_op(pre[c], tw);
        all[c] = scan_op(all[c], tw);
      }
    }
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
      const idx_t k = k0 + ty * ITEMS + j;
      if (!(col_ok && k < (idx_t)SCAN_K) || (SCAN_PAD && k + 1 >= (idx_t)SCAN_ROUT)) continue;
      float r[VEC];
#pragma unroll
      for (int c = 0; c < VEC; c++) {
        r[c] = scan_op(scan_op(carry[c], pre[c]), v[j][c]);
#if SCAN_SUB_SELF
        r[c] = r[c] - s[j][c];
#endif
      }
      scan_col_store(y, out_base + scan_out_row(k) * SCAN_INNER, r);
    }
#pragma unroll
    for (int c = 0; c < VEC; c++) carry[c] = scan_op(carry[c], all[c]);
    parity ^= 1;
  }
}
#endif
