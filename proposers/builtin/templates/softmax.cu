// Softmax and log-softmax over the canonical [OFG_OUTER, OFG_R, OFG_INNER].
//   ofg_softmax_rows   inner == 1: OFG_GROUP threads per row (a sub-warp group, a warp
//                      or the block). With OFG_CL > 1 a cluster of OFG_CL blocks shares
//                      a row: each block holds a chunk and the statistics meet through
//                      distributed shared memory. The row (chunk) is cached in registers
//                      (OFG_PATH_REG), staged in shared memory with cp.async
//                      (OFG_PATH_SMEM) or re-read from global memory (OFG_PATH_STREAM).
//   ofg_softmax_part + ofg_softmax_apply   (OFG_MULTI) inner == 1, rows split over SPLIT
//                      blocks in two launches: partial (max, sum) per chunk, then write.
//   ofg_softmax_cols   inner > 1: one thread per VEC columns, looping over R.
// Statistics: two passes (max, then sum of exp) or online (OFG_ONLINE: running max with
// a rescaled sum). Knobs: BLOCK, VEC, ITEMS, ROWS (via OFG_GROUP), UNROLL, MINB, SPLIT,
// MODE_RECIP_MUL, MODE_FAST_MATH, MODE_STREAM_STORE.
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
// The vector load/store, cp.async and cluster helpers, OFG_PRAGMA and the per-row
// skeleton (ofg_row_stage, OFG_ROW_EACH_*) come from common.cuh (OFG_ROW_HELPERS, which
// cg_row_source defines).

#ifdef MODE_FAST_MATH
#define OFG_EXP(x) __expf(x)
#define OFG_LOG(x) __logf(x)
#define OFG_DIV(a, b) __fdividef(a, b)
#else
#define OFG_EXP(x) expf(x)
#define OFG_LOG(x) logf(x)
#define OFG_DIV(a, b) ((a) / (b))
#endif

// The (max, sum of exp) statistics of a set of values.
struct ofg_ms {
  float m, s;
};

__device__ __forceinline__ ofg_ms ofg_ms_merge(ofg_ms a, ofg_ms b) {
  const float m = fmaxf(a.m, b.m);
  ofg_ms r;
  r.m = m;
  r.s = m == -INFINITY ? a.s + b.s
                       : a.s * OFG_EXP(a.m - m) + b.s * OFG_EXP(b.m - m);
  return r;
}

// Online update with one value (-inf adds nothing; NaN poisons the sum as torch does).
__device__ __forceinline__ void ofg_ms_add(ofg_ms& a, float x) {
  if (x > a.m) {
    a.s = a.s * OFG_EXP(a.m - x) + 1.0f;
    a.m = x;
  } else {
    a.s += x == -INFINITY ? 0.0f : OFG_EXP(x - a.m);
  }
}

// @OFG_FRAGMENT@

#if OFG_INNER == 1
// ---- reductions across the threads of one row: group, block, cluster ----

template <int G>
__device__ __forceinline__ float ofg_gmax(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <int G>
__device__ __forceinline__ float ofg_gsum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int G>
__device__ __forceinline__ ofg_ms ofg_gms(ofg_ms a) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) {
    ofg_ms b;
    b.m = __shfl_xor_sync(0xffffffffu, a.m, o);
    b.s = __shfl_xor_sync(0xffffffffu, a.s, o);
    a = ofg_ms_merge(a, b);
  }
  return a;
}

// Row-wide reductions: every thread of the row gets the result. With a cluster, the
// block results are combined in rank order, so every block computes the same value.
__device__ __forceinline__ float ofg_row_max(float v) {
#if OFG_GROUP == BLOCK
  __shared__ float scratch[32];
  __shared__ float slot;
  v = ofg_block_max(v, scratch);
#if OFG_CL > 1
  if (threadIdx.x == 0) slot = v;
  ofg_cluster_sync();
  v = -INFINITY;
  for (unsigned q = 0; q < OFG_CL; q++) v = fmaxf(v, ofg_dsmem_ld(&slot, q));
#endif
  return v;
#else
  return ofg_gmax<OFG_GROUP>(v);
#endif
}

__device__ __forceinline__ float ofg_row_sum(float v) {
#if OFG_GROUP == BLOCK
  __shared__ float scratch[32];
  __shared__ float slot;
  v = ofg_block_sum(v, scratch);
#if OFG_CL > 1
  if (threadIdx.x == 0) slot = v;
  ofg_cluster_sync();
  v = 0.0f;
  for (unsigned q = 0; q < OFG_CL; q++) v += ofg_dsmem_ld(&slot, q);
#endif
  return v;
#else
  return ofg_gsum<OFG_GROUP>(v);
#endif
}

__device__ __forceinline__ ofg_ms ofg_row_ms(ofg_ms a) {
  a = ofg_gms<(OFG_GROUP < 32 ? OFG_GROUP : 32)>(a);
#if OFG_GROUP == BLOCK
  __shared__ ofg_ms part[32];
  __shared__ ofg_ms slot;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[warp] = a;
  __syncthreads();
  ofg_ms e;
  e.m = -INFINITY;
  e.s = 0.0f;
  a = ofg_gms<32>(lane < BLOCK / 32 ? part[lane] : e);
#if OFG_CL > 1
  if (threadIdx.x == 0) slot = a;
  ofg_cluster_sync();
  a = e;
  for (unsigned q = 0; q < OFG_CL; q++) {
    ofg_ms b;
    b.m = ofg_dsmem_ld(&slot.m, q);
    b.s = ofg_dsmem_ld(&slot.s, q);
    a = ofg_ms_merge(a, b);
  }
#endif
#endif
  return a;
}

// The output of value v of a row with statistics (m, s); inv is 1/s (MODE_RECIP_MUL) and
// ls is log(s).
__device__ __forceinline__ float ofg_out(float v, float m, float s, float inv, float ls) {
#ifdef OFG_LOG_SOFTMAX
  return (v - m) - ls;
#elif defined(MODE_RECIP_MUL)
  return OFG_EXP(v - m) * inv;
#else
  return OFG_DIV(OFG_EXP(v - m), s);
#endif
}

#ifndef OFG_MULTI
// The output from a cached e = exp(v - m).
__device__ __forceinline__ float ofg_scale(float e, float s, float inv) {
#ifdef MODE_RECIP_MUL
  return e * inv;
#else
  return OFG_DIV(e, s);
#endif
}

extern "C" __global__ void OFG_CLUSTER OFG_BOUNDS ofg_softmax_rows(const float* __restrict__ x,
                                                                   float* __restrict__ y) {
#if OFG_CL > 1
  const long long row = blockIdx.x / OFG_CL;
  const long long lo = (long long)ofg_cluster_rank() * OFG_CHUNKV;
  const long long hi = lo + OFG_CHUNKV < OFG_R / VEC ? lo + OFG_CHUNKV : OFG_R / VEC;
  const int g = threadIdx.x, slot = 0;
#else
  const int g = threadIdx.x % OFG_GROUP, slot = threadIdx.x / OFG_GROUP;
  const long long row = (long long)blockIdx.x * (BLOCK / OFG_GROUP) + slot;
  const long long lo = 0, hi = row < OFG_OUTER ? OFG_R / VEC : 0;
#endif
  const float* __restrict__ xr = x + row * OFG_R;
  float* __restrict__ yr = y + row * OFG_R;
  (void)slot;
#if defined(OFG_PATH_REG)
  // The thread's vectors g, g + G, ... of the chunk, in registers.
  float v[OFG_NVT][VEC];
#pragma unroll
  for (int k = 0; k < OFG_NVT; k++) {
    const long long q = lo + g + (long long)k * OFG_GROUP;
    if (q < hi) {
      ofg_ldv(xr + q * VEC, v[k]);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; j++) v[k][j] = -INFINITY;
    }
  }
#define OFG_EACH(BODY)                                                 \
  _Pragma("unroll") for (int k = 0; k < OFG_NVT; k++) {                \
    const long long q = lo + g + (long long)k * OFG_GROUP;             \
    float* const val = v[k];                                           \
    (void)q;                                                           \
    BODY                                                               \
  }
#define OFG_EACH_IN(BODY) OFG_EACH(if (q < hi) { BODY })
#define OFG_EACH_RW(BODY) OFG_EACH_IN(BODY)
#elif defined(OFG_PATH_SMEM)
  float* const sm = ofg_row_stage<OFG_GROUP, OFG_CHUNKV>(xr, lo, hi, g, slot);
#define OFG_EACH_IN(BODY) OFG_ROW_EACH_SMEM(BODY)
#define OFG_EACH(BODY) OFG_EACH_IN(BODY)
// Visits the values and stores them back (BODY may change val).
#define OFG_EACH_RW(BODY)                                                        \
  OFG_ROW_EACH_SMEM(BODY _Pragma("unroll") for (int j = 0; j < VEC; j++)         \
                        sm[(q - lo) * VEC + j] = val[j];)
#else
  // Streamed: every pass reads the row from global memory, ITEMS vectors per batch.
#define OFG_EACH_IN(BODY) OFG_ROW_EACH_STREAM(BODY)
#define OFG_EACH(BODY) OFG_EACH_IN(BODY)
#endif

#ifdef OFG_ONLINE
  ofg_ms st;
  st.m = -INFINITY;
  st.s = 0.0f;
  OFG_EACH_IN(_Pragma("unroll") for (int j = 0; j < VEC; j++) ofg_ms_add(st, val[j]);)
  st = ofg_row_ms(st);
  const float m = st.m, s = st.s;
#else
  float m = -INFINITY;
  OFG_EACH(_Pragma("unroll") for (int j = 0; j < VEC; j++) m = fmaxf(m, val[j]);)
  m = ofg_row_max(m);
  float s = 0.0f;
#if defined(OFG_PATH_STREAM) || defined(OFG_LOG_SOFTMAX)
  OFG_EACH_IN(_Pragma("unroll") for (int j = 0; j < VEC; j++) s += OFG_EXP(val[j] - m);)
#else
  // A cached row keeps exp(x - m) in place of x: the output pass only divides.
#define OFG_CACHED_EXP 1
  OFG_EACH_RW(_Pragma("unroll") for (int j = 0; j < VEC; j++) {
    val[j] = OFG_EXP(val[j] - m);
    s += val[j];
  })
#endif
  s = ofg_row_sum(s);
#endif
#if OFG_CL > 1
  // No block may leave while another still reads its statistics.
  ofg_cluster_sync();
#endif
  const float inv = 1.0f / s, ls = OFG_LOG(s);
  (void)inv;
  (void)ls;
#ifdef OFG_CACHED_EXP
  OFG_EACH_IN(float o[VEC];
              _Pragma("unroll") for (int j = 0; j < VEC; j++) o[j] = ofg_scale(val[j], s, inv);
              ofg_stv(yr + q * VEC, o);)
#else
  OFG_EACH_IN(float o[VEC];
              _Pragma("unroll") for (int j = 0; j < VEC; j++) o[j] = ofg_out(val[j], m, s, inv, ls);
              ofg_stv(yr + q * VEC, o);)
#endif
}

#else
// ---- two launches for rows too long (or too few) for one block or cluster ----

// Partial statistics of chunk (row, part): pm/ps[row * SPLIT + part].
extern "C" __global__ void OFG_BOUNDS ofg_softmax_part(const float* __restrict__ x,
                                                       float* __restrict__ pm,
                                                       float* __restrict__ ps) {
  const long long row = blockIdx.x / SPLIT, part = blockIdx.x % SPLIT;
  const long long lo = part * OFG_CHUNKV;
  const long long hi = lo + OFG_CHUNKV < OFG_R / VEC ? lo + OFG_CHUNKV : OFG_R / VEC;
  const float* __restrict__ xr = x + row * OFG_R;
  const int g = threadIdx.x;
  ofg_ms st;
  st.m = -INFINITY;
  st.s = 0.0f;
  OFG_PRAGMA(unroll UNROLL)
  for (long long q0 = lo + g; q0 < hi; q0 += (long long)BLOCK * ITEMS) {
    float vb[ITEMS][VEC];
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const long long q = q0 + (long long)k * BLOCK;
      if (q < hi) ofg_ldv(xr + q * VEC, vb[k]);
    }
#pragma unroll
    for (int k = 0; k < ITEMS; k++)
      if (q0 + (long long)k * BLOCK < hi)
#pragma unroll
        for (int j = 0; j < VEC; j++) ofg_ms_add(st, vb[k][j]);
  }
  st = ofg_row_ms(st);
  if (threadIdx.x == 0) {
    pm[blockIdx.x] = st.m;
    ps[blockIdx.x] = st.s;
  }
}

// Merges the row's SPLIT partials (in a fixed order, so every block of the row gets the
// same statistics) and writes chunk (row, part).
extern "C" __global__ void OFG_BOUNDS ofg_softmax_apply(const float* __restrict__ x,
                                                        const float* __restrict__ pm,
                                                        const float* __restrict__ ps,
                                                        float* __restrict__ y) {
  // Chunks in reverse order: the first blocks re-read what ofg_softmax_part read last,
  // which is still in L2.
  const long long b = gridDim.x - 1 - blockIdx.x, row = b / SPLIT, part = b % SPLIT;
  ofg_ms a;
  a.m = -INFINITY;
  a.s = 0.0f;
  for (int p = threadIdx.x; p < SPLIT; p += BLOCK) {
    ofg_ms b;
    b.m = pm[row * SPLIT + p];
    b.s = ps[row * SPLIT + p];
    a = ofg_ms_merge(a, b);
  }
  a = ofg_row_ms(a);
  const float m = a.m, s = a.s, inv = 1.0f / s, ls = OFG_LOG(s);
  const long long lo = part * OFG_CHUNKV;
  const long long hi = lo + OFG_CHUNKV < OFG_R / VEC ? lo + OFG_CHUNKV : OFG_R / VEC;
  const float* __restrict__ xr = x + row * OFG_R;
  float* __restrict__ yr = y + row * OFG_R;
  OFG_PRAGMA(unroll UNROLL)
  for (long long q0 = lo + threadIdx.x; q0 < hi; q0 += (long long)BLOCK * ITEMS) {
    float vb[ITEMS][VEC];
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const long long q = q0 + (long long)k * BLOCK;
      if (q < hi) ofg_ldv(xr + q * VEC, vb[k]);
    }
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const long long q = q0 + (long long)k * BLOCK;
      if (q < hi) {
        float o[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) o[j] = ofg_out(vb[k][j], m, s, inv, ls);
        ofg_stv(yr + q * VEC, o);
      }
    }
  }
}
#endif
#else
// ---- inner > 1: a thread per VEC columns, looping over R ----

__device__ __forceinline__ float ofg_col_out(float v, float m, float s, float inv, float ls) {
#ifdef OFG_LOG_SOFTMAX
  return (v - m) - ls;
#elif defined(MODE_RECIP_MUL)
  return OFG_EXP(v - m) * inv;
#else
  return OFG_DIV(OFG_EXP(v - m), s);
#endif
}

extern "C" __global__ void OFG_BOUNDS ofg_softmax_cols(const float* __restrict__ x,
                                                       float* __restrict__ y) {
  const long long ncv = OFG_INNER / VEC;
  const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (t >= (long long)OFG_OUTER * ncv) return;
  const long long o = t / ncv, c = (t % ncv) * VEC;
  const float* __restrict__ xc = x + o * OFG_R * OFG_INNER + c;
  float* __restrict__ yc = y + o * OFG_R * OFG_INNER + c;
  float m[VEC], s[VEC];
#if defined(OFG_PATH_REG)
  float v[OFG_R][VEC];
#pragma unroll
  for (int r = 0; r < OFG_R; r++) ofg_ldv(xc + (long long)r * OFG_INNER, v[r]);
#pragma unroll
  for (int j = 0; j < VEC; j++) {
#ifdef OFG_ONLINE
    ofg_ms st;
    st.m = -INFINITY;
    st.s = 0.0f;
#pragma unroll
    for (int r = 0; r < OFG_R; r++) ofg_ms_add(st, v[r][j]);
    m[j] = st.m;
    s[j] = st.s;
#else
    m[j] = -INFINITY;
#pragma unroll
    for (int r = 0; r < OFG_R; r++) m[j] = fmaxf(m[j], v[r][j]);
    s[j] = 0.0f;
#pragma unroll
    for (int r = 0; r < OFG_R; r++) s[j] += OFG_EXP(v[r][j] - m[j]);
#endif
  }
#pragma unroll
  for (int r = 0; r < OFG_R; r++) {
    float out[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j++)
      out[j] = ofg_col_out(v[r][j], m[j], s[j], 1.0f / s[j], OFG_LOG(s[j]));
    ofg_stv(yc + (long long)r * OFG_INNER, out);
  }
#else
#ifdef OFG_ONLINE
  ofg_ms st[VEC];
#pragma unroll
  for (int j = 0; j < VEC; j++) {
    st[j].m = -INFINITY;
    st[j].s = 0.0f;
  }
  OFG_PRAGMA(unroll UNROLL)
  for (long long r = 0; r < OFG_R; r++) {
    float v[VEC];
    ofg_ldv(xc + r * OFG_INNER, v);
#pragma unroll
    for (int j = 0; j < VEC; j++) ofg_ms_add(st[j], v[j]);
  }
#pragma unroll
  for (int j = 0; j < VEC; j++) {
    m[j] = st[j].m;
    s[j] = st[j].s;
  }
#else
#pragma unroll
  for (int j = 0; j < VEC; j++) {
    m[j] = -INFINITY;
    s[j] = 0.0f;
  }
  OFG_PRAGMA(unroll UNROLL)
  for (long long r = 0; r < OFG_R; r++) {
    float v[VEC];
    ofg_ldv(xc + r * OFG_INNER, v);
#pragma unroll
    for (int j = 0; j < VEC; j++) m[j] = fmaxf(m[j], v[j]);
  }
  OFG_PRAGMA(unroll UNROLL)
  for (long long r = 0; r < OFG_R; r++) {
    float v[VEC];
    ofg_ldv(xc + r * OFG_INNER, v);
#pragma unroll
    for (int j = 0; j < VEC; j++) s[j] += OFG_EXP(v[j] - m[j]);
  }
#endif
  float inv[VEC], ls[VEC];
#pragma unroll
  for (int j = 0; j < VEC; j++) {
    inv[j] = 1.0f / s[j];
    ls[j] = OFG_LOG(s[j]);
  }
  OFG_PRAGMA(unroll UNROLL)
  for (long long r = 0; r < OFG_R; r++) {
    float v[VEC], out[VEC];
    ofg_ldv(xc + r * OFG_INNER, v);
#pragma unroll
    for (int j = 0; j < VEC; j++) out[j] = ofg_col_out(v[j], m[j], s[j], inv[j], ls[j]);
    ofg_stv(yc + r * OFG_INNER, out);
  }
#endif
}
#endif
