// Pointwise chain over the flat output index. Each thread moves ITEMS vectors of VEC
// floats per tile, issuing every load before any compute. Knobs: BLOCK, VEC, ITEMS,
// UNROLL (of the tile loop), MINB, MODE_GRID_STRIDE / MODE_PERSISTENT (blocks loop over
// tiles), MODE_LDG (read-only path), MODE_STREAM_STORE (st.global.cs), MODE_IDX32.
// The generated fragment defines OFG_N, OFG_PW_PARAMS / OFG_PW_ARGS (the leaf pointers),
// struct ofg_pw_regs, ofg_pw_load, ofg_pw_store and ofg_pw_scalar.
#ifndef VEC
#define VEC 4
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

#ifdef MODE_IDX32
typedef unsigned int ofg_i;
#else
typedef long long ofg_i;
#endif
// ofg_ldv (and ofg_stv) come from common.cuh.

__device__ __forceinline__ void ofg_st1(float* __restrict__ p, float v) {
#ifdef MODE_STREAM_STORE
  __stcs(p, v);
#else
  *p = v;
#endif
}

// @OFG_FRAGMENT@

// One tile: BLOCK*ITEMS vectors, vector k of thread t at tile*BLOCK*ITEMS + k*BLOCK + t.
__device__ __forceinline__ void ofg_pw_tile(ofg_i tile, OFG_PW_PARAMS, float* __restrict__ out) {
  const ofg_i nvec = (ofg_i)(OFG_N / VEC);
  const ofg_i base = tile * (ofg_i)(BLOCK * ITEMS) + (ofg_i)threadIdx.x;
  ofg_pw_regs r[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; k++) {
    const ofg_i v = base + (ofg_i)(k * BLOCK);
    if (v < nvec) ofg_pw_load(r[k], v * VEC, OFG_PW_ARGS);
  }
#pragma unroll
  for (int k = 0; k < ITEMS; k++) {
    const ofg_i v = base + (ofg_i)(k * BLOCK);
    if (v < nvec) ofg_pw_store(r[k], v * VEC, OFG_PW_ARGS, out);
  }
}

extern "C" __global__ void OFG_BOUNDS ofg_pointwise(OFG_PW_PARAMS, float* __restrict__ out) {
  const ofg_i ntiles = (ofg_i)((OFG_N / VEC + (i64)BLOCK * ITEMS - 1) / ((i64)BLOCK * ITEMS));
#if defined(MODE_GRID_STRIDE) || defined(MODE_PERSISTENT)
  OFG_PRAGMA(unroll UNROLL)
  for (ofg_i t = blockIdx.x; t < ntiles; t += gridDim.x) ofg_pw_tile(t, OFG_PW_ARGS, out);
#else
  if ((ofg_i)blockIdx.x < ntiles) ofg_pw_tile(blockIdx.x, OFG_PW_ARGS, out);
#endif
  // The elements past the last whole vector (fewer than VEC).
  const int tail = (int)(OFG_N % VEC);
  if (tail && blockIdx.x == 0 && (int)threadIdx.x < tail) {
    const ofg_i e = (ofg_i)(OFG_N - tail + threadIdx.x);
    ofg_st1(out + e, ofg_pw_scalar(e, OFG_PW_ARGS));
  }
}
