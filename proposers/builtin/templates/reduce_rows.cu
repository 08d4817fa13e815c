// Reductions over the canonical [OFG_OUTER, OFG_R, OFG_INNER] (sum, prod, max, min,
// argmax, argmin; mean and the norms are sums or maxima with a prologue and epilogue).
//   ofg_reduce_rows   inner == 1: OFG_GROUP threads per row (a sub-warp group, a warp
//                     or the block), each thread reading ITEMS vectors of VEC per batch
//                     into UNROLL independent accumulators; SPLIT > 1 gives each row
//                     SPLIT blocks that write partials.
//   ofg_reduce_cols   inner > 1: one thread per VEC columns, looping over R with UNROLL
//                     loads in flight; SPLIT > 1 slices R over blockIdx.y.
//   ofg_reduce_finish combines the SPLIT partials of each output.
// Knobs: BLOCK, VEC, ITEMS, ROWS (through OFG_GROUP), UNROLL, MINB, SPLIT,
// MODE_GRID_STRIDE / MODE_PERSISTENT (rows kernel loops over row tiles), MODE_IDX32.
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

#ifdef MODE_IDX32
typedef unsigned int ofg_i;
#else
typedef long long ofg_i;
#endif
// ofg_ldv (and ofg_stv) come from common.cuh.

// @OFG_FRAGMENT@

#if defined(OFG_KIND_ARGMAX) || defined(OFG_KIND_ARGMIN)
#define OFG_ARG 1
#endif

// The partial buffers of split reductions, as kernel parameters and as arguments.
#if SPLIT > 1
#ifdef OFG_ARG
#define OFG_PART_PARAMS , float* __restrict__ pv, int* __restrict__ pi
#define OFG_PART_ARGS , pv, pi
#else
#define OFG_PART_PARAMS , float* __restrict__ pv
#define OFG_PART_ARGS , pv
#endif
#else
#define OFG_PART_PARAMS
#define OFG_PART_ARGS
#endif

// A partial result: the value and, for argmax/argmin, its position along R.
struct ofg_acc {
  float v;
  int i;
};

__device__ __forceinline__ ofg_acc ofg_acc_init() {
  ofg_acc a;
#if defined(OFG_KIND_SUM)
  a.v = 0.0f;
#elif defined(OFG_KIND_PROD)
  a.v = 1.0f;
#elif defined(OFG_KIND_MAX) || defined(OFG_KIND_ARGMAX)
  a.v = -INFINITY;
#else
  a.v = INFINITY;
#endif
  a.i = 0x7fffffff;
  return a;
}

// Whether (v, i) replaces b: NaN wins (torch propagates it), then the larger (smaller)
// value, then the first position.
__device__ __forceinline__ bool ofg_takes(float v, int i, const ofg_acc& b) {
#if defined(OFG_ARG)
  const bool vn = v != v, bn = b.v != b.v;
  if (vn || bn) return vn && (!bn || i < b.i);
#if defined(OFG_KIND_ARGMAX)
  if (v != b.v) return v > b.v;
#else
  if (v != b.v) return v < b.v;
#endif
  return i < b.i;
#elif defined(OFG_KIND_MAX)
  return v > b.v || v != v;
#else
  return v < b.v || v != v;
#endif
}

__device__ __forceinline__ void ofg_acc_add(ofg_acc& a, float x, int i) {
#if defined(OFG_KIND_SUM)
  a.v += x;
#elif defined(OFG_KIND_PROD)
  a.v *= x;
#else
  if (ofg_takes(x, i, a)) { a.v = x; a.i = i; }
#endif
}

__device__ __forceinline__ ofg_acc ofg_acc_merge(ofg_acc a, const ofg_acc& b) {
  ofg_acc_add(a, b.v, b.i);
  return a;
}

// Reduces within aligned groups of G lanes; every lane of a group gets the result.
template <int G>
__device__ __forceinline__ ofg_acc ofg_group_reduce(ofg_acc a) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) {
    ofg_acc b;
    b.v = __shfl_xor_sync(0xffffffffu, a.v, o);
#ifdef OFG_ARG
    b.i = __shfl_xor_sync(0xffffffffu, a.i, o);
#else
    b.i = 0;
#endif
    a = ofg_acc_merge(a, b);
  }
  return a;
}

// Block-wide reduction; thread 0 gets the result.
__device__ __forceinline__ ofg_acc ofg_block_reduce(ofg_acc a) {
  __shared__ ofg_acc part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = ofg_group_reduce<32>(a);
  __syncthreads();  // part may still be read by the previous row's reduction
  if (lane == 0) part[warp] = a;
  __syncthreads();
  if (warp == 0) a = ofg_group_reduce<32>(lane < BLOCK / 32 ? part[lane] : ofg_acc_init());
  return a;
}

// The value stored for output idx: the reduced value through the epilogue, whose
// tensors (OFG_EPI_PARAMS) it reads at idx.
__device__ __forceinline__ OFG_OUT_T ofg_result(const ofg_acc& a, ofg_i idx OFG_EPI_PARAMS) {
#ifdef OFG_ARG
  (void)idx;
  return (OFG_OUT_T)a.i;
#else
  float s = a.v;
#ifdef OFG_MEAN
  s = s / (float)OFG_R;
#endif
#ifdef OFG_POST_SQRT
  s = sqrtf(s);
#endif
  return ofg_post_at(s, idx OFG_EPI_ARGS);
#endif
}

// Stores the result of output idx, or the partial of slice part when the rows are split.
__device__ __forceinline__ void ofg_put(const ofg_acc& a, ofg_i idx, int part,
                                        OFG_OUT_T* __restrict__ out OFG_PART_PARAMS
                                        OFG_EPI_PARAMS) {
#if SPLIT > 1
  pv[(ofg_i)part * OFG_NOUT + idx] = a.v;
#ifdef OFG_ARG
  pi[(ofg_i)part * OFG_NOUT + idx] = a.i;
#endif
#else
  out[idx] = ofg_result(a, idx OFG_EPI_ARGS);
#endif
}

#if OFG_INNER == 1
// Work item w = (row, slice) for the group `slot` of this block; items past the end read
// nothing but still take part in the group's shuffles.
__device__ __forceinline__ void ofg_rows_item(ofg_i w, OFG_IN_PARAMS,
                                              OFG_OUT_T* __restrict__ out OFG_PART_PARAMS
                                              OFG_EPI_PARAMS) {
  const int g = threadIdx.x % OFG_GROUP;
  const bool valid = w < (ofg_i)OFG_OUTER * SPLIT;
  const ofg_i row = w / SPLIT;
  const int part = (int)(w % SPLIT);
  const ofg_i lo = (ofg_i)part * OFG_CHUNKV;
  const ofg_i hi = !valid ? lo : (lo + OFG_CHUNKV < OFG_R / VEC ? lo + OFG_CHUNKV : OFG_R / VEC);
  const ofg_i base = row * (ofg_i)OFG_R;
  ofg_acc acc[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; u++) acc[u] = ofg_acc_init();
  for (ofg_i v = lo + g; v < hi; v += (ofg_i)OFG_GROUP * ITEMS) {
    float x[ITEMS][VEC];
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const ofg_i q = v + (ofg_i)k * OFG_GROUP;
      if (q < hi) ofg_in_vec(base + q * VEC, OFG_IN_ARGS, x[k]);
    }
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      const ofg_i q = v + (ofg_i)k * OFG_GROUP;
      if (q < hi) {
#pragma unroll
        for (int j = 0; j < VEC; j++) ofg_acc_add(acc[(k * VEC + j) % UNROLL], x[k][j], (int)(q * VEC + j));
      }
    }
  }
  ofg_acc a = acc[0];
#pragma unroll
  for (int u = 1; u < UNROLL; u++) a = ofg_acc_merge(a, acc[u]);
#if OFG_GROUP == BLOCK
  a = ofg_block_reduce(a);
#else
  a = ofg_group_reduce<OFG_GROUP>(a);
#endif
  if (valid && g == 0) ofg_put(a, row, part, out OFG_PART_ARGS OFG_EPI_ARGS);
}

extern "C" __global__ void OFG_BOUNDS ofg_reduce_rows(OFG_IN_PARAMS,
                                                      OFG_OUT_T* __restrict__ out OFG_PART_PARAMS
                                                      OFG_EPI_PARAMS) {
  const int rpb = BLOCK / OFG_GROUP, slot = threadIdx.x / OFG_GROUP;
#if defined(MODE_GRID_STRIDE) || defined(MODE_PERSISTENT)
  // Uniform trip count per block: the groups' shuffles and the block's barriers need it.
  for (ofg_i t = blockIdx.x; t * rpb < (ofg_i)OFG_OUTER * SPLIT; t += gridDim.x)
    ofg_rows_item(t * rpb + slot, OFG_IN_ARGS, out OFG_PART_ARGS OFG_EPI_ARGS);
#else
  ofg_rows_item((ofg_i)blockIdx.x * rpb + slot, OFG_IN_ARGS, out OFG_PART_ARGS OFG_EPI_ARGS);
#endif
}
#else
extern "C" __global__ void OFG_BOUNDS ofg_reduce_cols(OFG_IN_PARAMS,
                                                      OFG_OUT_T* __restrict__ out OFG_PART_PARAMS
                                                      OFG_EPI_PARAMS) {
  const ofg_i ncv = OFG_INNER / VEC;
  const ofg_i t = (ofg_i)blockIdx.x * BLOCK + threadIdx.x;
  if (t >= (ofg_i)OFG_OUTER * ncv) return;
  const ofg_i o = t / ncv, c = (t % ncv) * VEC;
  const int part = (int)blockIdx.y;
  const ofg_i r0 = (ofg_i)part * OFG_CHUNKR;
  const ofg_i r1 = r0 + OFG_CHUNKR < OFG_R ? r0 + OFG_CHUNKR : OFG_R;
  const ofg_i base = o * (ofg_i)OFG_R * OFG_INNER + c;
  ofg_acc acc[UNROLL][VEC];
#pragma unroll
  for (int u = 0; u < UNROLL; u++)
#pragma unroll
    for (int j = 0; j < VEC; j++) acc[u][j] = ofg_acc_init();
  ofg_i r = r0;
  for (; r + UNROLL <= r1; r += UNROLL) {
    float x[UNROLL][VEC];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) ofg_in_vec(base + (r + u) * OFG_INNER, OFG_IN_ARGS, x[u]);
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
      for (int j = 0; j < VEC; j++) ofg_acc_add(acc[u][j], x[u][j], (int)(r + u));
  }
  for (; r < r1; r++) {
    float x[VEC];
    ofg_in_vec(base + r * OFG_INNER, OFG_IN_ARGS, x);
#pragma unroll
    for (int j = 0; j < VEC; j++) ofg_acc_add(acc[0][j], x[j], (int)r);
  }
#pragma unroll
  for (int j = 0; j < VEC; j++) {
    ofg_acc a = acc[0][j];
#pragma unroll
    for (int u = 1; u < UNROLL; u++) a = ofg_acc_merge(a, acc[u][j]);
    ofg_put(a, o * OFG_INNER + c + j, part, out OFG_PART_ARGS OFG_EPI_ARGS);
  }
}
#endif

#if SPLIT > 1
// Combines the SPLIT partials of each output: a warp per output when outputs are few
// (OFG_FINISH_WARP), else a thread per output.
extern "C" __global__ void OFG_BOUNDS ofg_reduce_finish(const float* __restrict__ pv,
#ifdef OFG_ARG
                                                        const int* __restrict__ pi,
#endif
                                                        OFG_OUT_T* __restrict__ out OFG_EPI_PARAMS) {
#ifdef OFG_FINISH_WARP
  const int lane = threadIdx.x & 31;
  const ofg_i idx = (ofg_i)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
  if (idx >= OFG_NOUT) return;  // uniform per warp
  ofg_acc a = ofg_acc_init();
  for (int s = lane; s < SPLIT; s += 32) {
    ofg_acc b;
    b.v = pv[(ofg_i)s * OFG_NOUT + idx];
#ifdef OFG_ARG
    b.i = pi[(ofg_i)s * OFG_NOUT + idx];
#else
    b.i = 0;
#endif
    a = ofg_acc_merge(a, b);
  }
  a = ofg_group_reduce<32>(a);
  if (lane == 0) out[idx] = ofg_result(a, idx OFG_EPI_ARGS);
#else
  const ofg_i idx = (ofg_i)blockIdx.x * BLOCK + threadIdx.x;
  if (idx >= OFG_NOUT) return;
  ofg_acc a = ofg_acc_init();
  for (int s = 0; s < SPLIT; s++) {
    ofg_acc b;
    b.v = pv[(ofg_i)s * OFG_NOUT + idx];
#ifdef OFG_ARG
    b.i = pi[(ofg_i)s * OFG_NOUT + idx];
#else
    b.i = 0;
#endif
    a = ofg_acc_merge(a, b);
  }
  out[idx] = ofg_result(a, idx OFG_EPI_ARGS);
#endif
}
#endif
