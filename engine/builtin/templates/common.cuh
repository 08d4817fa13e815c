// Shared device helpers for the builtin templates. Generators prepend this file to a
// template's source (NVRTC has no include path for it). Knobs arrive as -D macros.
#pragma once
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef MINB
#define MINB 0
#endif
#if MINB > 0
#define OFG_BOUNDS __launch_bounds__(BLOCK, MINB)
#else
#define OFG_BOUNDS __launch_bounds__(BLOCK)
#endif

typedef long long i64;

#ifndef INFINITY  /* NVRTC has no <math.h> macros */
#define INFINITY __int_as_float(0x7f800000)
#endif

__device__ __forceinline__ float ofg_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float ofg_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float ofg_warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum: every thread gets the total. scratch holds BLOCK/32 floats.
__device__ __forceinline__ float ofg_block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = ofg_warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? scratch[lane] : 0.0f;
  return ofg_warp_sum(v);
}

// Block-wide max: every thread gets the maximum. scratch holds BLOCK/32 floats.
__device__ __forceinline__ float ofg_block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = ofg_warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? scratch[lane] : -INFINITY;
  return ofg_warp_max(v);
}
