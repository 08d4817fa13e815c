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

// OFG_PRAGMA(unroll N): a pragma whose argument is a macro (nvcc does not expand the
// argument of #pragma unroll; NVRTC does).
#define OFG_STR(x) #x
#define OFG_PRAGMA(x) _Pragma(OFG_STR(x))
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

// ---- Vector global loads and stores of VEC floats. VEC arrives as a -D knob: the
// generators that call these always pass it, since the template defaults come later. ----
#ifdef MODE_LDG
#define OFG_LD(p) __ldg(p)
#else
#define OFG_LD(p) (*(p))
#endif

// VEC consecutive floats at p (VEC*4-byte aligned) into r.
__device__ __forceinline__ void ofg_ldv(const float* __restrict__ p, float* r) {
#if VEC == 4
  const float4 t = OFG_LD(reinterpret_cast<const float4*>(p));
  r[0] = t.x; r[1] = t.y; r[2] = t.z; r[3] = t.w;
#elif VEC == 2
  const float2 t = OFG_LD(reinterpret_cast<const float2*>(p));
  r[0] = t.x; r[1] = t.y;
#else
  r[0] = OFG_LD(p);
#endif
}

// One 128-bit (64-bit) global store: a plain float4 store may be split into scalar ones.
__device__ __forceinline__ void ofg_st4(float* p, float4 t) {
#ifdef OFG_EMU
  *reinterpret_cast<float4*>(p) = t;
#else
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(t.x), "f"(t.y), "f"(t.z),
               "f"(t.w) : "memory");
#endif
}

__device__ __forceinline__ void ofg_st2(float* p, float2 t) {
#ifdef OFG_EMU
  *reinterpret_cast<float2*>(p) = t;
#else
  asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(t.x), "f"(t.y) : "memory");
#endif
}

// VEC floats of r to p (VEC*4-byte aligned).
__device__ __forceinline__ void ofg_stv(float* __restrict__ p, const float* r) {
#if VEC == 4
  const float4 t = make_float4(r[0], r[1], r[2], r[3]);
#ifdef MODE_STREAM_STORE
  __stcs(reinterpret_cast<float4*>(p), t);
#else
  ofg_st4(p, t);
#endif
#elif VEC == 2
  const float2 t = make_float2(r[0], r[1]);
#ifdef MODE_STREAM_STORE
  __stcs(reinterpret_cast<float2*>(p), t);
#else
  ofg_st2(p, t);
#endif
#else
#ifdef MODE_STREAM_STORE
  __stcs(p, r[0]);
#else
  *p = r[0];
#endif
#endif
}

// ---- Row kernels (norm, softmax): shared-memory staging and clusters. Only their
// sources define OFG_ROW_HELPERS: only their CPU emulator in the tests supplies the
// ofg_emu_* cluster primitives, and gemm.cu has its own ofg_cp_wait. ----
#ifdef OFG_ROW_HELPERS
// VEC floats from shared memory (16-byte aligned for VEC 4).
__device__ __forceinline__ void ofg_ldsv(const float* p, float* r) {
#if VEC == 4
  const float4 t = *reinterpret_cast<const float4*>(p);
  r[0] = t.x; r[1] = t.y; r[2] = t.z; r[3] = t.w;
#elif VEC == 2
  const float2 t = *reinterpret_cast<const float2*>(p);
  r[0] = t.x; r[1] = t.y;
#else
  r[0] = *p;
#endif
}

// Asynchronous copy of VEC floats global -> shared (cp.async, LDGSTS).
__device__ __forceinline__ void ofg_cp(float* s, const float* g) {
#ifdef OFG_EMU
  for (int j = 0; j < VEC; j++) s[j] = g[j];
#else
  const unsigned a = (unsigned)__cvta_generic_to_shared(s);
#if VEC == 4
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(g) : "memory");
#elif VEC == 2
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(a), "l"(g) : "memory");
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(a), "l"(g) : "memory");
#endif
#endif
}

__device__ __forceinline__ void ofg_cp_wait() {
#ifndef OFG_EMU
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Cluster helpers (Hopper): barrier with release/acquire semantics, this block's rank,
// and a load from the shared memory of block `rank` of the cluster. OFG_EMU: the tests'
// CPU emulator.
__device__ __forceinline__ void ofg_cluster_sync() {
#ifdef OFG_EMU
  ofg_emu_cluster_sync();
#else
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
#endif
}

__device__ __forceinline__ unsigned ofg_cluster_rank() {
#ifdef OFG_EMU
  return ofg_emu_cluster_rank();
#else
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
#endif
}

__device__ __forceinline__ float ofg_dsmem_ld(const float* p, unsigned rank) {
#ifdef OFG_EMU
  return ofg_emu_dsmem_ld(p, rank);
#else
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  unsigned r;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
  return v;
#endif
}

// ---- The per-row skeleton of ofg_norm_rows and ofg_softmax_rows: staging a row in
// shared memory and visiting the thread's vectors of it. The macros expand in the kernel,
// after the fragment has defined OFG_GROUP and the path, and read the kernel's lo, hi (the
// thread's vectors, of VEC floats, lie in [lo, hi)), g (its lane among the row's
// OFG_GROUP threads) and xr (the row in global memory) or sm (the row staged). ----

// Copies the thread's vectors lo + g, lo + g + G, ... below hi of row xr into dynamic
// shared memory (cp.async) and waits until all G threads of the row have theirs there.
// Returns the staged row: vector q at (q - lo) * VEC. Row slot of the block owns CHUNKV
// vectors of the buffer. Template arguments, not macros: the fragment that defines
// OFG_GROUP and OFG_CHUNKV comes after this file.
template <int G, long long CHUNKV>
__device__ __forceinline__ float* ofg_row_stage(const float* __restrict__ xr, long long lo,
                                                long long hi, int g, int slot) {
#ifdef OFG_EMU
  float4* const smem4 = (float4*)ofg_emu_dyn_smem();
#else
  extern __shared__ float4 ofg_smem4[];
  float4* const smem4 = ofg_smem4;
#endif
  float* const sm = reinterpret_cast<float*>(smem4) + (long long)slot * CHUNKV * VEC;
  for (long long q = lo + g; q < hi; q += G) ofg_cp(sm + (q - lo) * VEC, xr + q * VEC);
  ofg_cp_wait();
  if (G == BLOCK)
    __syncthreads();
  else
    __syncwarp();
  return sm;
}

// Visits the thread's vectors q of the row staged at sm; val holds the VEC values of
// vector q while BODY runs.
#define OFG_ROW_EACH_SMEM(BODY)                                        \
  OFG_PRAGMA(unroll UNROLL)                                            \
  for (long long q = lo + g; q < hi; q += OFG_GROUP) {                 \
    float val[VEC];                                                    \
    ofg_ldsv(sm + (q - lo) * VEC, val);                                \
    BODY                                                               \
  }

// Visits the thread's vectors q of [lo, hi) read from global memory, ITEMS per batch; val
// points at the VEC values of vector q.
#define OFG_ROW_EACH_STREAM(BODY)                                      \
  OFG_PRAGMA(unroll UNROLL)                                            \
  for (long long q0 = lo + g; q0 < hi; q0 += (long long)OFG_GROUP * ITEMS) { \
    float vb[ITEMS][VEC];                                              \
    _Pragma("unroll") for (int k = 0; k < ITEMS; k++) {                \
      const long long q = q0 + (long long)k * OFG_GROUP;               \
      if (q < hi) ofg_ldv(xr + q * VEC, vb[k]);                        \
    }                                                                  \
    _Pragma("unroll") for (int k = 0; k < ITEMS; k++) {                \
      const long long q = q0 + (long long)k * OFG_GROUP;               \
      float* const val = vb[k];                                        \
      if (q < hi) { BODY }                                             \
    }                                                                  \
  }
#endif  // OFG_ROW_HELPERS
