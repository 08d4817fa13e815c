// Normalizations over the canonical [OFG_OUTER, OFG_R, OFG_INNER]: layer, RMS, group and
// instance norms and x / f(reduce(g(x))) patterns (L1, L2, RMS written out), plus batch
// norm with training-mode statistics over [N, C, S].
//   ofg_norm_rows   inner == 1: OFG_GROUP threads per row (sub-warp group, warp or block),
//                   or a cluster of OFG_CL blocks per row meeting through distributed
//                   shared memory; the row cached in registers (OFG_PATH_REG), staged in
//                   shared memory (OFG_PATH_SMEM) or re-read (OFG_PATH_STREAM).
//   ofg_norm_part + ofg_norm_apply   (OFG_MULTI) rows split over SPLIT > 8 blocks in two
//                   launches.
//   ofg_norm_cols   inner > 1: a thread per VEC columns looping over R (sum/max only).
//   ofg_bn_part + ofg_bn_finalize + ofg_bn_apply   batch norm: Welford partials per
//                   channel slice, merged per channel, then the elementwise pass over the
//                   same slices.
// Statistics (OFG_STAT_MEANVAR): two passes over a cached row by default, Welford
// (OFG_WELFORD) on request and for streamed rows, three streamed passes with
// OFG_TWO_PASS. OFG_STAT_SUM / OFG_STAT_MAX reduce the prologue ofg_pre(x).
// Knobs: BLOCK, VEC, ITEMS, ROWS (via OFG_GROUP), UNROLL, MINB, SPLIT, MODE_LDG,
// MODE_STREAM_STORE, MODE_FAST_MATH (through the generated code).
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

// Partial statistics: count, mean and sum of squared deviations (Chan et al. merge).
struct ofg_wf {
  float n, mean, m2;
};

__device__ __forceinline__ ofg_wf ofg_wf_merge(const ofg_wf& a, const ofg_wf& b) {
  if (b.n == 0.0f) return a;
  if (a.n == 0.0f) return b;
  ofg_wf r;
  r.n = a.n + b.n;
  const float d = b.mean - a.mean, f = b.n / r.n;
  r.mean = a.mean + d * f;
  r.m2 = a.m2 + b.m2 + d * d * a.n * f;
  return r;
}

// Merges one vector of VEC values as a batch (one division per vector).
__device__ __forceinline__ void ofg_wf_add(ofg_wf& a, const float* v) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < VEC; j++) s += v[j];
  ofg_wf b;
  b.n = (float)VEC;
  b.mean = s * (1.0f / VEC);
  b.m2 = 0.0f;
#pragma unroll
  for (int j = 0; j < VEC; j++) b.m2 += (v[j] - b.mean) * (v[j] - b.mean);
  a = ofg_wf_merge(a, b);
}

template <int G>
__device__ __forceinline__ ofg_wf ofg_gwf(ofg_wf a) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) {
    ofg_wf b;
    b.n = __shfl_xor_sync(0xffffffffu, a.n, o);
    b.mean = __shfl_xor_sync(0xffffffffu, a.mean, o);
    b.m2 = __shfl_xor_sync(0xffffffffu, a.m2, o);
    // Lower lane first, so both lanes of a pair compute the same merge.
    a = (threadIdx.x & o) ? ofg_wf_merge(b, a) : ofg_wf_merge(a, b);
  }
  return a;
}

// Block-wide merge of Welford partials in warp order; every thread gets the result.
__device__ __forceinline__ ofg_wf ofg_block_wf(ofg_wf a) {
  __shared__ ofg_wf part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = ofg_gwf<32>(a);
  __syncthreads();
  if (lane == 0) part[warp] = a;
  __syncthreads();
  ofg_wf e;
  e.n = e.mean = e.m2 = 0.0f;
  return ofg_gwf<32>(lane < BLOCK / 32 ? part[lane] : e);
}

// @OFG_FRAGMENT@

#ifndef OFG_BATCH_NORM
#if OFG_INNER == 1
// ---- reductions across the threads of one row: group, block, then cluster ----

// `which` picks the cluster exchange slot: a block may still read a peer's slot of the
// previous reduction when that peer writes its next one, so consecutive reductions of one
// row use different slots.
__device__ __forceinline__ float ofg_row_sum(float v, int which) {
#if OFG_GROUP == BLOCK
  __shared__ float scratch[32];
  __shared__ float slot[2];
  v = ofg_block_sum(v, scratch);
#if OFG_CL > 1
  if (threadIdx.x == 0) slot[which] = v;
  ofg_cluster_sync();
  v = 0.0f;
  for (unsigned q = 0; q < OFG_CL; q++) v += ofg_dsmem_ld(&slot[which], q);
#endif
  return v;
#else
  (void)which;
#pragma unroll
  for (int o = OFG_GROUP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
#endif
}

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
#pragma unroll
  for (int o = OFG_GROUP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
#endif
}

__device__ __forceinline__ ofg_wf ofg_row_wf(ofg_wf a) {
#if OFG_GROUP == BLOCK
  __shared__ ofg_wf slot;
  a = ofg_block_wf(a);
#if OFG_CL > 1
  if (threadIdx.x == 0) slot = a;
  ofg_cluster_sync();
  a.n = a.mean = a.m2 = 0.0f;
  for (unsigned q = 0; q < OFG_CL; q++) {
    ofg_wf b;
    b.n = ofg_dsmem_ld(&slot.n, q);
    b.mean = ofg_dsmem_ld(&slot.mean, q);
    b.m2 = ofg_dsmem_ld(&slot.m2, q);
    a = ofg_wf_merge(a, b);
  }
#endif
  return a;
#else
  return ofg_gwf<OFG_GROUP>(a);
#endif
}

// The statistics of the row through the thread's values (OFG_EACH_IN visits them), and
// the finalized per-row constants.
#if defined(OFG_STAT_MEANVAR) && !defined(OFG_WELFORD) && !defined(OFG_PATH_STREAM)
#define OFG_TWO_PASS 1
#endif

#define OFG_ROW_STATS(f)                                                         \
  ofg_fin f;                                                                     \
  {                                                                              \
    OFG_ROW_STATS_BODY                                                           \
  }

#if defined(OFG_STAT_MEANVAR) && defined(OFG_TWO_PASS)
#define OFG_ROW_STATS_BODY                                                       \
  float s1 = 0.0f;                                                               \
  OFG_EACH_IN(_Pragma("unroll") for (int j = 0; j < VEC; j++) s1 += val[j];)     \
  const float mean = ofg_row_sum(s1, 0) / (float)OFG_R;                          \
  float s2 = 0.0f;                                                               \
  OFG_EACH_IN(_Pragma("unroll") for (int j = 0; j < VEC; j++) {                  \
    const float d = val[j] - mean;                                               \
    s2 += d * d;                                                                 \
  })                                                                             \
  f = ofg_finalize(mean, ofg_row_sum(s2, 1) / (float)OFG_R);
#elif defined(OFG_STAT_MEANVAR)
#define OFG_ROW_STATS_BODY                                                       \
  ofg_wf w;                                                                      \
  w.n = w.mean = w.m2 = 0.0f;                                                    \
  OFG_EACH_IN(ofg_wf_add(w, val);)                                               \
  w = ofg_row_wf(w);                                                             \
  f = ofg_finalize(w.mean, w.m2 / w.n);
#elif defined(OFG_STAT_SUM)
#define OFG_ROW_STATS_BODY                                                       \
  float s1 = 0.0f;                                                               \
  OFG_EACH_IN(_Pragma("unroll") for (int j = 0; j < VEC; j++) s1 += ofg_pre(val[j]);) \
  f = ofg_finalize(ofg_row_sum(s1, 0), 0.0f);
#else
#define OFG_ROW_STATS_BODY                                                       \
  float s1 = -INFINITY;                                                          \
  OFG_EACH_IN(_Pragma("unroll") for (int j = 0; j < VEC; j++) s1 = fmaxf(s1, ofg_pre(val[j]));) \
  f = ofg_finalize(ofg_row_max(s1), 0.0f);
#endif

#ifndef OFG_MULTI
extern "C" __global__ void OFG_CLUSTER OFG_BOUNDS ofg_norm_rows(const float* __restrict__ x,
                                                                float* __restrict__ y
                                                                OFG_AFF_PARAMS) {
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
  float v[OFG_NVT][VEC];
#pragma unroll
  for (int k = 0; k < OFG_NVT; k++) {
    const long long q = lo + g + (long long)k * OFG_GROUP;
    if (q < hi) ofg_ldv(xr + q * VEC, v[k]);
  }
#define OFG_EACH_IN(BODY)                                              \
  _Pragma("unroll") for (int k = 0; k < OFG_NVT; k++) {                \
    const long long q = lo + g + (long long)k * OFG_GROUP;             \
    float* const val = v[k];                                           \
    if (q < hi) { BODY }                                               \
  }
#elif defined(OFG_PATH_SMEM)
  float* const sm = ofg_row_stage<OFG_GROUP, OFG_CHUNKV>(xr, lo, hi, g, slot);
#define OFG_EACH_IN(BODY) OFG_ROW_EACH_SMEM(BODY)
#else
#define OFG_EACH_IN(BODY) OFG_ROW_EACH_STREAM(BODY)
#endif
  OFG_ROW_STATS(f)
#if OFG_CL > 1
  // No block may leave while another still reads its statistics.
  ofg_cluster_sync();
#endif
  OFG_EACH_IN(float o[VEC];
              _Pragma("unroll") for (int j = 0; j < VEC; j++)
                  o[j] = ofg_norm_out(val[j], f, row, q * VEC + j, row * OFG_R + q * VEC + j OFG_AFF_ARGS);
              ofg_stv(yr + q * VEC, o);)
}

#else
// ---- rows split over SPLIT blocks in two launches ----

// Partial statistics of chunk (row, part) into p0/p1/p2[row * SPLIT + part]. Blocks run
// chunk-major (rows fastest), like ofg_norm_apply, whose consecutive blocks then share one
// chunk of the affine parameters in L2.
extern "C" __global__ void OFG_BOUNDS ofg_norm_part(const float* __restrict__ x,
                                                    float* __restrict__ p0,
                                                    float* __restrict__ p1,
                                                    float* __restrict__ p2) {
  const long long row = blockIdx.x % OFG_OUTER, part = blockIdx.x / OFG_OUTER;
  const long long at = row * SPLIT + part;
  const long long lo = part * OFG_CHUNKV;
  const long long hi = lo + OFG_CHUNKV < OFG_R / VEC ? lo + OFG_CHUNKV : OFG_R / VEC;
  const float* __restrict__ xr = x + row * OFG_R;
  const int g = threadIdx.x;
#ifdef OFG_STAT_MEANVAR
  ofg_wf w;
  w.n = w.mean = w.m2 = 0.0f;
  OFG_ROW_EACH_STREAM(ofg_wf_add(w, val);)
  w = ofg_block_wf(w);
  if (threadIdx.x == 0) {
    p0[at] = w.n;
    p1[at] = w.mean;
    p2[at] = w.m2;
  }
#elif defined(OFG_STAT_SUM)
  __shared__ float scratch[32];
  float s1 = 0.0f;
  OFG_ROW_EACH_STREAM(_Pragma("unroll") for (int j = 0; j < VEC; j++) s1 += ofg_pre(val[j]);)
  s1 = ofg_block_sum(s1, scratch);
  if (threadIdx.x == 0) p0[at] = s1;
#else
  __shared__ float scratch[32];
  float s1 = -INFINITY;
  OFG_ROW_EACH_STREAM(_Pragma("unroll") for (int j = 0; j < VEC; j++) s1 = fmaxf(s1, ofg_pre(val[j]));)
  s1 = ofg_block_max(s1, scratch);
  if (threadIdx.x == 0) p0[at] = s1;
#endif
  (void)p1;
  (void)p2;
}

// Merges the row's partials in a fixed order (every block of the row gets the same
// statistics) and writes chunk (row, part).
extern "C" __global__ void OFG_BOUNDS ofg_norm_apply(const float* __restrict__ x,
                                                     const float* __restrict__ p0,
                                                     const float* __restrict__ p1,
                                                     const float* __restrict__ p2,
                                                     float* __restrict__ y OFG_AFF_PARAMS) {
  // Chunk-major with rows fastest, so that consecutive blocks share one chunk of the affine
  // parameters in L2; in reverse order, so that the first blocks re-read what
  // ofg_norm_part read last, which is still in L2.
  const long long b = gridDim.x - 1 - blockIdx.x, row = b % OFG_OUTER, part = b / OFG_OUTER;
  const long long lo = part * OFG_CHUNKV;
  const long long hi = lo + OFG_CHUNKV < OFG_R / VEC ? lo + OFG_CHUNKV : OFG_R / VEC;
  const float* __restrict__ xr = x + row * OFG_R;
  float* __restrict__ yr = y + row * OFG_R;
  const int g = threadIdx.x;
  ofg_fin f;
#ifdef OFG_STAT_MEANVAR
  ofg_wf w;
  w.n = w.mean = w.m2 = 0.0f;
  for (int p = threadIdx.x; p < SPLIT; p += BLOCK) {
    ofg_wf b;
    b.n = p0[row * SPLIT + p];
    b.mean = p1[row * SPLIT + p];
    b.m2 = p2[row * SPLIT + p];
    w = ofg_wf_merge(w, b);
  }
  w = ofg_block_wf(w);
  f = ofg_finalize(w.mean, w.m2 / w.n);
#elif defined(OFG_STAT_SUM)
  __shared__ float scratch[32];
  float s1 = 0.0f;
  for (int p = threadIdx.x; p < SPLIT; p += BLOCK) s1 += p0[row * SPLIT + p];
  f = ofg_finalize(ofg_block_sum(s1, scratch), 0.0f);
#else
  __shared__ float scratch[32];
  float s1 = -INFINITY;
  for (int p = threadIdx.x; p < SPLIT; p += BLOCK) s1 = fmaxf(s1, p0[row * SPLIT + p]);
  f = ofg_finalize(ofg_block_max(s1, scratch), 0.0f);
#endif
  (void)p1;
  (void)p2;
  OFG_ROW_EACH_STREAM(float o[VEC];
                      _Pragma("unroll") for (int j = 0; j < VEC; j++)
                          o[j] = ofg_norm_out(val[j], f, row, q * VEC + j, row * OFG_R + q * VEC + j OFG_AFF_ARGS);
                      ofg_stv(yr + q * VEC, o);)
}
#endif
#else
// ---- inner > 1: a thread per VEC columns, looping over R (sum and max statistics) ----

extern "C" __global__ void OFG_BOUNDS ofg_norm_cols(const float* __restrict__ x,
                                                    float* __restrict__ y OFG_AFF_PARAMS) {
  const long long ncv = OFG_INNER / VEC;
  const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (t >= (long long)OFG_OUTER * ncv) return;
  const long long o = t / ncv, c = (t % ncv) * VEC;
  const float* __restrict__ xc = x + o * OFG_R * OFG_INNER + c;
  float* __restrict__ yc = y + o * OFG_R * OFG_INNER + c;
  float acc[VEC];
#pragma unroll
  for (int j = 0; j < VEC; j++) acc[j] = OFG_COL_INIT;
#if defined(OFG_PATH_REG)
  float v[OFG_R][VEC];
#pragma unroll
  for (int r = 0; r < OFG_R; r++) ofg_ldv(xc + (long long)r * OFG_INNER, v[r]);
#pragma unroll
  for (int r = 0; r < OFG_R; r++)
#pragma unroll
    for (int j = 0; j < VEC; j++) acc[j] = OFG_COL_ACC(acc[j], ofg_pre(v[r][j]));
#else
  OFG_PRAGMA(unroll UNROLL)
  for (long long r = 0; r < OFG_R; r++) {
    float v[VEC];
    ofg_ldv(xc + r * OFG_INNER, v);
#pragma unroll
    for (int j = 0; j < VEC; j++) acc[j] = OFG_COL_ACC(acc[j], ofg_pre(v[j]));
  }
#endif
  ofg_fin f[VEC];
#pragma unroll
  for (int j = 0; j < VEC; j++) f[j] = ofg_finalize(acc[j], 0.0f);
#if defined(OFG_PATH_REG)
#pragma unroll
  for (int r = 0; r < OFG_R; r++) {
    float out[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j++)
      out[j] = ofg_norm_out(v[r][j], f[j], o, r, (o * OFG_R + r) * OFG_INNER + c + j OFG_AFF_ARGS);
    ofg_stv(yc + (long long)r * OFG_INNER, out);
  }
#else
  OFG_PRAGMA(unroll UNROLL)
  for (long long r = 0; r < OFG_R; r++) {
    float v[VEC], out[VEC];
    ofg_ldv(xc + r * OFG_INNER, v);
#pragma unroll
    for (int j = 0; j < VEC; j++)
      out[j] = ofg_norm_out(v[j], f[j], o, r, (o * OFG_R + r) * OFG_INNER + c + j OFG_AFF_ARGS);
    ofg_stv(yc + r * OFG_INNER, out);
  }
#endif
}
#endif
#else
// ---- batch norm over [OFG_N, OFG_C, OFG_S], statistics per channel ----

// Welford partial of slice p of channel c: its vectors of the channel's N*S elements.
extern "C" __global__ void OFG_BOUNDS ofg_bn_part(const float* __restrict__ x,
                                                  float* __restrict__ p0,
                                                  float* __restrict__ p1,
                                                  float* __restrict__ p2) {
  const long long c = blockIdx.x / SPLIT, p = blockIdx.x % SPLIT;
  const long long nv = OFG_N * OFG_S / VEC;
  const long long lo = p * OFG_CHUNKV, hi = lo + OFG_CHUNKV < nv ? lo + OFG_CHUNKV : nv;
  ofg_wf w;
  w.n = w.mean = w.m2 = 0.0f;
  OFG_PRAGMA(unroll UNROLL)
  for (long long q0 = lo + threadIdx.x; q0 < hi; q0 += (long long)BLOCK * ITEMS) {
    float vb[ITEMS][VEC];
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const long long q = q0 + (long long)k * BLOCK;
      if (q < hi) {
        const long long e = q * VEC, n = e / OFG_S, s = e % OFG_S;
        ofg_ldv(x + (n * OFG_C + c) * OFG_S + s, vb[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < ITEMS; k++)
      if (q0 + (long long)k * BLOCK < hi) ofg_wf_add(w, vb[k]);
  }
  w = ofg_block_wf(w);
  if (threadIdx.x == 0) {
    p0[blockIdx.x] = w.n;
    p1[blockIdx.x] = w.mean;
    p2[blockIdx.x] = w.m2;
  }
}

// Merges the SPLIT partials of channel blockIdx.x into (mean, 1/sqrt(var + eps)).
extern "C" __global__ void OFG_BOUNDS ofg_bn_finalize(const float* __restrict__ p0,
                                                      const float* __restrict__ p1,
                                                      const float* __restrict__ p2,
                                                      float* __restrict__ stats) {
  const long long c = blockIdx.x;
  ofg_wf w;
  w.n = w.mean = w.m2 = 0.0f;
  for (int p = threadIdx.x; p < SPLIT; p += BLOCK) {
    ofg_wf b;
    b.n = p0[c * SPLIT + p];
    b.mean = p1[c * SPLIT + p];
    b.m2 = p2[c * SPLIT + p];
    w = ofg_wf_merge(w, b);
  }
  w = ofg_block_wf(w);
  if (threadIdx.x == 0) {
    const ofg_fin f = ofg_finalize(w.mean, w.m2 / w.n);
    stats[2 * c] = f.a;
    stats[2 * c + 1] = f.b;
  }
}

// y = w[c] * (x - mean[c]) * invstd[c] + b[c] over the slices of ofg_bn_part, in reverse
// order: the first blocks re-read what ofg_bn_part read last, which is still in L2.
extern "C" __global__ void OFG_BOUNDS ofg_bn_apply(const float* __restrict__ x,
                                                   const float* __restrict__ stats,
                                                   float* __restrict__ y OFG_AFF_PARAMS) {
  const long long b = gridDim.x - 1 - blockIdx.x, c = b / SPLIT, p = b % SPLIT;
  const long long nv = OFG_N * OFG_S / VEC;
  const long long lo = p * OFG_CHUNKV, hi = lo + OFG_CHUNKV < nv ? lo + OFG_CHUNKV : nv;
  ofg_fin f;
  f.a = stats[2 * c];
  f.b = stats[2 * c + 1];
  OFG_PRAGMA(unroll UNROLL)
  for (long long q0 = lo + threadIdx.x; q0 < hi; q0 += (long long)BLOCK * ITEMS) {
    float vb[ITEMS][VEC];
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const long long q = q0 + (long long)k * BLOCK;
      if (q < hi) {
        const long long e = q * VEC, n = e / OFG_S, s = e % OFG_S;
        ofg_ldv(x + (n * OFG_C + c) * OFG_S + s, vb[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const long long q = q0 + (long long)k * BLOCK;
      if (q < hi) {
        const long long e = q * VEC, n = e / OFG_S, s = e % OFG_S, at = (n * OFG_C + c) * OFG_S + s;
        float o[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) o[j] = ofg_norm_out(vb[k][j], f, c, 0, at + j OFG_AFF_ARGS);
        ofg_stv(y + at, o);
      }
    }
  }
}
#endif
