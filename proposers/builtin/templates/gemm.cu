// GEMM family: fp32 SIMT tiled GEMM (BM x BN block tile, BK k-step, TM x TN register tile
// per thread), split-K reduction, GEMV and row scaling. The generator defines the problem
// (OFG_M, OFG_N, OFG_K, OFG_BATCH, OFG_TRANS_A, OFG_TRANS_B, batch strides, OFG_PAD_A/B,
// OFG_IDX64, OFG_MASK, the epilogue ofg_epi with OFG_EPI_PARAMS/OFG_EPI_ARGS) and selects
// one of OFG_OP_GEMM, OFG_OP_GEMV, OFG_OP_ROWSCALE; the knobs arrive as -D macros.


// Knob defaults (the generator passes every knob it uses).
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 0
#endif
#ifndef SPLIT
#define SPLIT 1
#endif

#if OFG_IDX64 || defined(MODE_IDX64)
typedef long long ofg_idx;
#else
typedef int ofg_idx;
#endif

// ---- vector helpers (V floats, V = 1, 2, 4) ----
template <int V>
__device__ __forceinline__ void ofg_ld(const float* p, float* out) {
  if (V == 4) {
    const float4 t = *(const float4*)p;
    out[0] = t.x; out[1] = t.y; out[2] = t.z; out[3] = t.w;
  } else if (V == 2) {
    const float2 t = *(const float2*)p;
    out[0] = t.x; out[1] = t.y;
  } else {
    out[0] = *p;
  }
}

template <int V>
__device__ __forceinline__ void ofg_ldg(const float* p, float* out) {
#if defined(MODE_LDG)
  if (V == 4) {
    const float4 t = __ldg((const float4*)p);
    out[0] = t.x; out[1] = t.y; out[2] = t.z; out[3] = t.w;
  } else if (V == 2) {
    const float2 t = __ldg((const float2*)p);
    out[0] = t.x; out[1] = t.y;
  } else {
    out[0] = __ldg(p);
  }
#else
  ofg_ld<V>(p, out);
#endif
}

template <int V>
__device__ __forceinline__ void ofg_st(float* p, const float* v) {
  if (V == 4)
    *(float4*)p = make_float4(v[0], v[1], v[2], v[3]);
  else if (V == 2)
    *(float2*)p = make_float2(v[0], v[1]);
  else
    *p = v[0];
}

#if defined(OFG_OP_GEMM)

// Shared by the SIMT kernel and gemm_tf32x3.cu: each thread owns TM x TN outputs.
#define NT ((BM / TM) * (BN / TN))
#define TILES_M ((OFG_M + BM - 1) / BM)
#define TILES_N ((OFG_N + BN - 1) / BN)
#define TILES (TILES_M * TILES_N)
#define GROUP_M 8
// The K range of one split, a multiple of BK.
#define KCHUNK (((OFG_K + SPLIT - 1) / SPLIT + BK - 1) / BK * BK)
#if defined(MODE_PREDICATED_TAIL)
#define EVEN_M 0
#define EVEN_N 0
#define EVEN_K 0
#else
#define EVEN_M (OFG_M % BM == 0)
#define EVEN_N (OFG_N % BN == 0)
#define EVEN_K (OFG_K % BK == 0 && (SPLIT == 1 || OFG_K % KCHUNK == 0))
#endif
// OFG_MIN_BLOCKS: the MINB knob, or the generator's default for the SIMT tile.
#if OFG_MIN_BLOCKS > 0
#define OFG_GEMM_BOUNDS __launch_bounds__(NT, OFG_MIN_BLOCKS)
#else
#define OFG_GEMM_BOUNDS __launch_bounds__(NT)
#endif

// ---- cp.async (16-, 8- or 4-byte copies; src_bytes 0 writes zeros) ----
template <int V>
__device__ __forceinline__ void ofg_cp_async(float* dst, const float* src, bool ok) {
#ifndef OFG_EMU
  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  const int n = ok ? 4 * V : 0;
  if (V == 4)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n));
  else if (V == 2)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(src), "r"(n));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(n));
#else
  for (int j = 0; j < V; ++j) dst[j] = ok ? src[j] : 0.0f;
#endif
}

__device__ __forceinline__ void ofg_cp_commit() {
#ifndef OFG_EMU
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N>
__device__ __forceinline__ void ofg_cp_wait() {
#ifndef OFG_EMU
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// True when the output mask (triu/tril of the product) zeroes the whole tile.
__device__ __forceinline__ bool ofg_tile_masked(int m0, int n0) {
#if OFG_MASK == 1
  return (long long)(n0 + BN - 1) - m0 < (long long)OFG_MASK_DIAG;
#elif OFG_MASK == 2
  return (long long)n0 - (m0 + BM - 1) > (long long)OFG_MASK_DIAG;
#else
  (void)m0; (void)n0;
  return false;
#endif
}

#if !defined(OFG_TF32X3) && !defined(OFG_WGMMA)
// ---- the SIMT kernel ----
#define TX (BN / TN)
#define TY (BM / TM)
#define FM (TM % 4 == 0 ? 4 : (TM % 2 == 0 ? 2 : 1))
#define FN (TN % 4 == 0 ? 4 : (TN % 2 == 0 ? 2 : 1))
#define LDA (BM + OFG_PAD_A)
#define LDB (BN + OFG_PAD_B)
#define A_STAGE (BK * LDA)
#define B_STAGE (BK * LDB)
// Global vector widths: an operand stored with its M/N dim contiguous loads VEC floats
// along it; a k-contiguous operand loads VEC floats along k (register path) or single
// floats (cp.async path, which cannot transpose).
#define VA (OFG_VEC_A)
#define VB (OFG_VEC_B)

// Thread (ty, tx) of the TY x TX grid: warps hold 4 x 8 lanes when the tile allows, so
// a warp's fragment reads touch 4 distinct A and 8 distinct B vectors.
__device__ __forceinline__ void ofg_thread_coords(int tid, int* ty, int* tx) {
#if (TX % 8 == 0) && (TY % 4 == 0)
  const int warp = tid >> 5, lane = tid & 31;
  *tx = (warp % (TX / 8)) * 8 + (lane & 7);
  *ty = (warp / (TX / 8)) * 4 + (lane >> 3);
#else
  *tx = tid % TX;
  *ty = tid / TX;
#endif
}

// Element (k, r) of an operand tile: RC (r contiguous) storage is [k][ld], else [r][ld].
// Copies the BK x R tile at (k0, r0) into S[k][r] (row length LD), zero-filling k >= kend
// and r >= rext.
template <int R, int LD, bool RC, int V, bool EVR, bool EVK>
__device__ __forceinline__ void ofg_tile_async(float* S, const float* G, int ld, int r0,
                                               int rext, int k0, int kend, int tid) {
  if (RC) {
    const int VPR = R / V, TOTAL = BK * VPR;
    OFG_UNROLL_N(16)
    for (int i = 0; i < (TOTAL + NT - 1) / NT; ++i) {
      const int idx = tid + i * NT;
      if (TOTAL % NT == 0 || idx < TOTAL) {
        const int kk = idx / VPR, rr = (idx % VPR) * V;
        const int gk = k0 + kk, gr = r0 + rr;
        const bool ok = (EVK || gk < kend) && (EVR || gr < rext);
        ofg_cp_async<V>(S + kk * LD + rr, ok ? G + (ofg_idx)gk * ld + gr : G, ok);
      }
    }
  } else {
    // 8 consecutive k per row segment: a warp covers 4 rows x 8 k (full 32-byte sectors)
    // and, with LD = 4 mod 32, 32 distinct banks.
    const int KC = BK < 8 ? BK : 8, TOTAL = BK * R;
    OFG_UNROLL_N(16)
    for (int i = 0; i < (TOTAL + NT - 1) / NT; ++i) {
      const int idx = tid + i * NT;
      if (TOTAL % NT == 0 || idx < TOTAL) {
        const int kk = (idx / (KC * R)) * KC + idx % KC, rr = (idx / KC) % R;
        const int gk = k0 + kk, gr = r0 + rr;
        const bool ok = (EVK || gk < kend) && (EVR || gr < rext);
        ofg_cp_async<1>(S + kk * LD + rr, ok ? G + (ofg_idx)gr * ld + gk : G, ok);
      }
    }
  }
}

// Register-staged loads (STAGES == 1): the tile's next K step is read into registers
// while the block computes on shared memory, then stored (transposed when k-contiguous).
template <int R, bool RC, int V>
struct ofg_stage {
  enum { PER = (BK * R / V + NT - 1) / NT };
  float v[PER * V];
};

template <int R, int LD, bool RC, int V, bool EVR, bool EVK>
__device__ __forceinline__ void ofg_tile_regs_load(ofg_stage<R, RC, V>& st, const float* G,
                                                   int ld, int r0, int rext, int k0, int kend,
                                                   int tid) {
  const int TOTAL = BK * R / V;
  OFG_UNROLL_N(16)
  for (int i = 0; i < ofg_stage<R, RC, V>::PER; ++i) {
    const int idx = tid + i * NT;
    int kk, rr;
    if (RC) {
      kk = idx / (R / V), rr = (idx % (R / V)) * V;
    } else {
      kk = (idx % (BK / V)) * V, rr = idx / (BK / V);
    }
    const int gk = k0 + kk, gr = r0 + rr;
    const bool ok = (TOTAL % NT == 0 || idx < TOTAL) && (EVK || gk < kend) && (EVR || gr < rext);
    if (ok)
      ofg_ldg<V>(RC ? G + (ofg_idx)gk * ld + gr : G + (ofg_idx)gr * ld + gk, st.v + i * V);
    else
      for (int j = 0; j < V; ++j) st.v[i * V + j] = 0.0f;
  }
}

template <int R, int LD, bool RC, int V>
__device__ __forceinline__ void ofg_tile_regs_store(const ofg_stage<R, RC, V>& st, float* S,
                                                    int tid) {
  const int TOTAL = BK * R / V;
  OFG_UNROLL_N(16)
  for (int i = 0; i < ofg_stage<R, RC, V>::PER; ++i) {
    const int idx = tid + i * NT;
    if (TOTAL % NT == 0 || idx < TOTAL) {
      if (RC) {
        const int kk = idx / (R / V), rr = (idx % (R / V)) * V;
        ofg_st<V>(S + kk * LD + rr, st.v + i * V);
      } else {
        const int kk = (idx % (BK / V)) * V, rr = idx / (BK / V);
        for (int j = 0; j < V; ++j) S[(kk + j) * LD + rr] = st.v[i * V + j];
      }
    }
  }
}

// One BK step of the outer-product micro-kernel on shared-memory stage (As, Bs).
__device__ __forceinline__ void ofg_compute(const float* As, const float* Bs,
                                            float (&acc)[TM][TN], int ty, int tx) {
#if UNROLL > 0
  OFG_UNROLL_N(UNROLL)
#else
  OFG_PRAGMA(unroll)
#endif
  for (int kk = 0; kk < BK; ++kk) {
    float a[TM], b[TN];
    OFG_PRAGMA(unroll)
    for (int g = 0; g < TM / FM; ++g) ofg_ld<FM>(As + kk * LDA + g * TY * FM + ty * FM, a + g * FM);
    OFG_PRAGMA(unroll)
    for (int g = 0; g < TN / FN; ++g) ofg_ld<FN>(Bs + kk * LDB + g * TX * FN + tx * FN, b + g * FN);
    OFG_PRAGMA(unroll)
    for (int i = 0; i < TM; ++i) {
      OFG_PRAGMA(unroll)
      for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }
}

#define A_RC (OFG_TRANS_A != 0)   // A stored [K, M]: M contiguous
#define B_RC (OFG_TRANS_B == 0)   // B stored [K, N]: N contiguous
#define A_LD (A_RC ? OFG_M : OFG_K)
#define B_LD (B_RC ? OFG_N : OFG_K)

// The K loop over [kb, ke) for the tile at (m0, n0).
__device__ __forceinline__ void ofg_mainloop(float* As, float* Bs, const float* A, const float* B,
                                             int m0, int n0, int kb, int ke,
                                             float (&acc)[TM][TN], int tid, int ty, int tx) {
  const int nk = (ke - kb + BK - 1) / BK;
#if STAGES > 1
  OFG_PRAGMA(unroll)
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) {
      ofg_tile_async<BM, LDA, A_RC, (A_RC ? VA : 1), EVEN_M, EVEN_K>(
          As + s * A_STAGE, A, A_LD, m0, OFG_M, kb + s * BK, ke, tid);
      ofg_tile_async<BN, LDB, B_RC, (B_RC ? VB : 1), EVEN_N, EVEN_K>(
          Bs + s * B_STAGE, B, B_LD, n0, OFG_N, kb + s * BK, ke, tid);
    }
    ofg_cp_commit();
  }
  for (int kt = 0; kt < nk; ++kt) {
    ofg_cp_wait<STAGES - 2>();
    __syncthreads();
    const int pf = kt + STAGES - 1;
    if (pf < nk) {
      const int st = pf % STAGES;
      ofg_tile_async<BM, LDA, A_RC, (A_RC ? VA : 1), EVEN_M, EVEN_K>(
          As + st * A_STAGE, A, A_LD, m0, OFG_M, kb + pf * BK, ke, tid);
      ofg_tile_async<BN, LDB, B_RC, (B_RC ? VB : 1), EVEN_N, EVEN_K>(
          Bs + st * B_STAGE, B, B_LD, n0, OFG_N, kb + pf * BK, ke, tid);
    }
    ofg_cp_commit();
    const int cs = kt % STAGES;
    ofg_compute(As + cs * A_STAGE, Bs + cs * B_STAGE, acc, ty, tx);
  }
  ofg_cp_wait<0>();
#else
  ofg_stage<BM, A_RC, VA> ra;
  ofg_stage<BN, B_RC, VB> rb;
  if (nk > 0) {
    ofg_tile_regs_load<BM, LDA, A_RC, VA, EVEN_M, EVEN_K>(ra, A, A_LD, m0, OFG_M, kb, ke, tid);
    ofg_tile_regs_load<BN, LDB, B_RC, VB, EVEN_N, EVEN_K>(rb, B, B_LD, n0, OFG_N, kb, ke, tid);
  }
  for (int kt = 0; kt < nk; ++kt) {
    ofg_tile_regs_store<BM, LDA, A_RC, VA>(ra, As, tid);
    ofg_tile_regs_store<BN, LDB, B_RC, VB>(rb, Bs, tid);
    __syncthreads();
    if (kt + 1 < nk) {
      const int k1 = kb + (kt + 1) * BK;
      ofg_tile_regs_load<BM, LDA, A_RC, VA, EVEN_M, EVEN_K>(ra, A, A_LD, m0, OFG_M, k1, ke, tid);
      ofg_tile_regs_load<BN, LDB, B_RC, VB, EVEN_N, EVEN_K>(rb, B, B_LD, n0, OFG_N, k1, ke, tid);
    }
    ofg_compute(As, Bs, acc, ty, tx);
    __syncthreads();
  }
#endif
}

// Applies the epilogue (or keeps the raw partial sum under split-K) and stores the
// thread's TM x TN outputs with FN-wide stores.
__device__ __forceinline__ void ofg_store(float* C, const float (&acc)[TM][TN], int b, int m0,
                                          int n0, int ty, int tx OFG_EPI_PARAMS) {
  OFG_PRAGMA(unroll)
  for (int g = 0; g < TM / FM; ++g) {
    OFG_PRAGMA(unroll)
    for (int ii = 0; ii < FM; ++ii) {
      const int m = m0 + g * TY * FM + ty * FM + ii;
      if (!EVEN_M && m >= OFG_M) continue;
      const i64 row = (i64)b * OFG_M + m;
      float* crow = C + row * OFG_N;
      OFG_PRAGMA(unroll)
      for (int h = 0; h < TN / FN; ++h) {
        const int n = n0 + h * TX * FN + tx * FN;
        float v[FN];
        OFG_PRAGMA(unroll)
        for (int jj = 0; jj < FN; ++jj) {
          const float x = acc[g * FM + ii][h * FN + jj];
#if SPLIT > 1
          v[jj] = x;
#else
          v[jj] = (EVEN_N || n + jj < OFG_N) ? ofg_epi(x, row, n + jj OFG_EPI_ARGS) : 0.0f;
#endif
        }
        if (OFG_N % FN == 0) {
          if (EVEN_N || n < OFG_N) ofg_st<FN>(crow + n, v);
        } else {
          for (int jj = 0; jj < FN; ++jj)
            if (n + jj < OFG_N) crow[n + jj] = v[jj];
        }
      }
    }
  }
}

// C (or the split-K partials, [SPLIT][BATCH*M*N]) for tiles blockIdx.x (+ gridDim.x ...)
// of batch blockIdx.z / SPLIT and K split blockIdx.z % SPLIT.
extern "C" __global__ void OFG_GEMM_BOUNDS gemm_main(const float* __restrict__ A,
                                                    const float* __restrict__ B,
                                                    float* __restrict__ C OFG_EPI_PARAMS) {
  OFG_DYN_SMEM(ofg_smem4);
  float* As = (float*)ofg_smem4;
  float* Bs = As + STAGES * A_STAGE;
  const int tid = threadIdx.x;
  int ty, tx;
  ofg_thread_coords(tid, &ty, &tx);
  const int b = blockIdx.z / SPLIT, split = blockIdx.z % SPLIT;
  const float* Ab = A + (i64)b * OFG_A_BSTRIDE;
  const float* Bb = B + (i64)b * OFG_B_BSTRIDE;
  float* Cs = C + (i64)split * ((i64)OFG_BATCH * OFG_M * OFG_N);
  const int kb = split * KCHUNK;
  const int ke = kb + KCHUNK < OFG_K ? kb + KCHUNK : OFG_K;
  for (int tile = blockIdx.x; tile < TILES; tile += gridDim.x) {
    const int width = GROUP_M * TILES_N, first = (tile / width) * GROUP_M;
    const int gsz = TILES_M - first < GROUP_M ? TILES_M - first : GROUP_M;
    const int m0 = (first + (tile % width) % gsz) * BM, n0 = ((tile % width) / gsz) * BN;
    float acc[TM][TN];
    OFG_PRAGMA(unroll)
    for (int i = 0; i < TM; ++i) {
      OFG_PRAGMA(unroll)
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }
    ofg_mainloop(As, Bs, Ab, Bb, m0, n0, kb, ofg_tile_masked(m0, n0) ? kb : ke, acc, tid, ty, tx);
    ofg_store(Cs, acc, b, m0, n0, ty, tx OFG_EPI_ARGS);
#if defined(MODE_PERSISTENT)
    __syncthreads();
#endif
  }
}

#endif  // !OFG_TF32X3 && !OFG_WGMMA

#if SPLIT > 1
#define SKV (OFG_N % 4 == 0 ? 4 : 1)
// Sums the SPLIT partial products in a fixed order and applies the epilogue.
extern "C" __global__ void __launch_bounds__(256) gemm_splitk(const float* __restrict__ P,
                                                             float* __restrict__ C
                                                                 OFG_EPI_PARAMS) {
  const i64 total = (i64)OFG_BATCH * OFG_M * OFG_N;
  const i64 i = ((i64)blockIdx.x * 256 + threadIdx.x) * SKV;
  if (i >= total) return;
  float v[SKV];
  ofg_ld<SKV>(P + i, v);
  for (int s = 1; s < SPLIT; ++s) {
    float w[SKV];
    ofg_ld<SKV>(P + (i64)s * total + i, w);
    for (int j = 0; j < SKV; ++j) v[j] += w[j];
  }
  const i64 row = i / OFG_N, col = i % OFG_N;
  for (int j = 0; j < SKV; ++j) v[j] = ofg_epi(v[j], row, col + j OFG_EPI_ARGS);
  ofg_st<SKV>(C + i, v);
}
#endif

#endif  // OFG_OP_GEMM

#if defined(OFG_OP_GEMV)
// One block per output: the dot product of a matrix row with the vector, UNROLL
// independent VEC-wide loads in flight per thread, then a block sum and the epilogue.
// Row r of batch r / OFG_GEMV_RPB: Mat + batch * OFG_GEMV_MBSTRIDE + (r % RPB) * K.
extern "C" __global__ void __launch_bounds__(BLOCK) gemv_main(const float* __restrict__ Mat,
                                                             const float* __restrict__ X,
                                                             float* __restrict__ C
                                                                 OFG_EPI_PARAMS) {
  __shared__ float red[32];
  const i64 r = blockIdx.x;
  const i64 bt = r / OFG_GEMV_RPB;
  const float* mrow = Mat + bt * OFG_GEMV_MBSTRIDE + (r % OFG_GEMV_RPB) * (i64)OFG_K;
  const float* xv = X + bt * OFG_GEMV_XBSTRIDE;
  float acc[UNROLL];
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.0f;
  for (i64 i0 = (i64)threadIdx.x * VEC; i0 < OFG_K; i0 += (i64)BLOCK * VEC * UNROLL) {
    OFG_PRAGMA(unroll)
    for (int u = 0; u < UNROLL; ++u) {
      const i64 i = i0 + (i64)u * BLOCK * VEC;
      if (i < OFG_K) {
        float a[VEC], x[VEC];
        ofg_ldg<VEC>(mrow + i, a);
        ofg_ldg<VEC>(xv + i, x);
        for (int j = 0; j < VEC; ++j) acc[u] = fmaf(a[j], x[j], acc[u]);
      }
    }
  }
  float s = 0.0f;
  for (int u = 0; u < UNROLL; ++u) s += acc[u];
  s = ofg_block_sum(s, red);
  if (threadIdx.x == 0) {
#if OFG_GEMV_SWAP
    C[r] = ofg_epi(s, 0, r OFG_EPI_ARGS);
#else
    C[r] = ofg_epi(s, r, 0 OFG_EPI_ARGS);
#endif
  }
}
#endif  // OFG_OP_GEMV

#if defined(OFG_OP_ROWSCALE)
// C[i][j] = a[i] * B[i][j] (diag(a) @ B), VEC-wide.
extern "C" __global__ void __launch_bounds__(BLOCK) row_scale(const float* __restrict__ a,
                                                             const float* __restrict__ Bm,
                                                             float* __restrict__ C) {
  const i64 i = ((i64)blockIdx.x * BLOCK + threadIdx.x) * VEC;
  if (i >= (i64)OFG_M * OFG_N) return;
  const float s = OFG_LDG(a + i / OFG_N);
  float v[VEC];
  ofg_ldg<VEC>(Bm + i, v);
  for (int j = 0; j < VEC; ++j) v[j] *= s;
  ofg_st<VEC>(C + i, v);
}
#endif  // OFG_OP_ROWSCALE
