// GEMM family: error-compensated 3xTF32 GEMM on tensor cores (mma.sync m16n8k8), appended
// after gemm.cu when MODE is tf32x3. Each fp32 operand x splits into big = tf32(x) and
// small = tf32(x - big); each k8 slice accumulates small*big + big*small + big*big in a
// fresh tensor-core accumulator that is added to the fp32 result with an ordinary
// (round-to-nearest) add, so the tensor cores' truncating accumulation never sees the
// large running sum. Each thread owns TM x TN outputs like the SIMT kernel: a
// warp holds (8*TM) x (4*TN) of the block's BM x BN tile, in (TM/2) x (TN/2) mma tiles.
// Shared memory keeps each operand in its global layout (16-byte cp.async where the
// contiguous extent allows): k-contiguous [rows][BK+4], else [BK][rows+8], which makes
// the fragment reads conflict-free.
#if defined(OFG_OP_GEMM) && defined(OFG_TF32X3)

#define MT (TM / 2)                 // m16 tiles per warp
#define NTL (TN / 2)                // n8 tiles per warp
#define WARPS_N (BN / (4 * TN))
#define A_KC (OFG_TRANS_A == 0)     // A stored [M][K]
#define B_KC (OFG_TRANS_B != 0)     // B stored [N][K]
#define LDA_T (A_KC ? BK + 4 : BM + 8)
#define LDB_T (B_KC ? BK + 4 : BN + 8)
#define A_TILE (A_KC ? BM * (BK + 4) : BK * (BM + 8))
#define B_TILE (B_KC ? BN * (BK + 4) : BK * (BN + 8))

// How x splits into big + small (OFG_TF32_SPLIT): 0 rounds both parts to tf32 with
// cvt.rna; 1 rounds big and truncates small; 2 (the default) truncates both with a bit
// mask. The conversion instruction issues at a fraction of the rate of a logic op, and
// each warp converts 24 values per k8 slice, so the masks make the GEMM about 1.2x
// faster; truncation costs about one bit of each part, which keeps the error against
// float64 no larger than eager's.
#ifndef OFG_TF32_SPLIT
#define OFG_TF32_SPLIT 2
#endif

__device__ __forceinline__ unsigned ofg_tf32_rna(float x) {
#ifndef OFG_EMU
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  unsigned u = (unsigned)__float_as_int(x);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return u;
#endif
}

__device__ __forceinline__ unsigned ofg_tf32_trunc(float x) {
  return (unsigned)__float_as_int(x) & 0xffffe000u;
}

// x as big + small, both tf32 bit patterns.
__device__ __forceinline__ void ofg_tf32_split(float x, unsigned* big, unsigned* small) {
#if OFG_TF32_SPLIT == 2
  *big = ofg_tf32_trunc(x);
#else
  *big = ofg_tf32_rna(x);
#endif
  const float rest = x - __int_as_float((int)*big);
#if OFG_TF32_SPLIT == 0
  *small = ofg_tf32_rna(rest);
#else
  *small = ofg_tf32_trunc(rest);
#endif
}

// d = a * b + c for one m16n8k8 tile (tf32 inputs, fp32 accumulate).
__device__ __forceinline__ void ofg_mma(float (&d)[4], const unsigned (&a)[4],
                                        const unsigned (&b)[2]) {
#ifndef OFG_EMU
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  ofg_emu_mma_tf32(d, a, b);
#endif
}

// One operand tile of BK x R at (k0, r0) into shared memory in its global layout. KC:
// k-contiguous (global [r][ld], smem [r][BK+4]); else global [k][ld], smem [k][R+8].
template <int R, bool KC, int V, bool EVR, bool EVK>
__device__ __forceinline__ void ofg_tc_tile(float* S, const float* G, int ld, int r0, int rext,
                                            int k0, int kend, int tid) {
  const int INNER = KC ? BK : R, OUTER = KC ? R : BK, LDS = KC ? BK + 4 : R + 8;
  const int TOTAL = OUTER * INNER / V;
  OFG_UNROLL_N(16)
  for (int i = 0; i < (TOTAL + NT - 1) / NT; ++i) {
    const int idx = tid + i * NT;
    if (TOTAL % NT == 0 || idx < TOTAL) {
      const int o = idx / (INNER / V), in = (idx % (INNER / V)) * V;
      const int gk = k0 + (KC ? in : o), gr = r0 + (KC ? o : in);
      const bool ok = (EVK || gk < kend) && (EVR || gr < rext);
      const float* src = KC ? G + (ofg_idx)gr * ld + gk : G + (ofg_idx)gk * ld + gr;
      ofg_cp_async<V>(S + o * LDS + in, ok ? src : G, ok);
    }
  }
}

__device__ __forceinline__ float ofg_a_at(const float* As, int m, int k) {
  return A_KC ? As[m * (BK + 4) + k] : As[k * (BM + 8) + m];
}

__device__ __forceinline__ float ofg_b_at(const float* Bs, int k, int n) {
  return B_KC ? Bs[n * (BK + 4) + k] : Bs[k * (BN + 8) + n];
}

// One BK step. For every k8 slice the fragments split into big and small parts, and each
// tile pair's three products accumulate into a zeroed tensor-core partial that is then
// added to acc: the truncating tensor-core adds only ever see 24 products.
__device__ __forceinline__ void ofg_tc_compute(const float* As, const float* Bs,
                                               float (&acc)[MT][NTL][4], int wm, int wn,
                                               int lane) {
  const int g = lane >> 2, t = lane & 3;
  // One k8 slice at a time: unrolling hoists the next slices' fragments and runs out of
  // registers.
  OFG_UNROLL_N(1)
  for (int kk = 0; kk < BK; kk += 8) {
    unsigned ab[MT][4], as[MT][4], bb[NTL][2], bs[NTL][2];
    OFG_PRAGMA(unroll)
    for (int i = 0; i < MT; ++i) {
      const int m = wm + i * 16 + g;
      const float x[4] = {ofg_a_at(As, m, kk + t), ofg_a_at(As, m + 8, kk + t),
                          ofg_a_at(As, m, kk + t + 4), ofg_a_at(As, m + 8, kk + t + 4)};
      OFG_PRAGMA(unroll)
      for (int c = 0; c < 4; ++c) ofg_tf32_split(x[c], &ab[i][c], &as[i][c]);
    }
    OFG_PRAGMA(unroll)
    for (int j = 0; j < NTL; ++j) {
      const int n = wn + j * 8 + g;
      const float x[2] = {ofg_b_at(Bs, kk + t, n), ofg_b_at(Bs, kk + t + 4, n)};
      OFG_PRAGMA(unroll)
      for (int c = 0; c < 2; ++c) ofg_tf32_split(x[c], &bb[j][c], &bs[j][c]);
    }
    OFG_PRAGMA(unroll)
    for (int i = 0; i < MT; ++i)
      OFG_PRAGMA(unroll)
      for (int j = 0; j < NTL; ++j) {
        float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        ofg_mma(p, as[i], bb[j]);
        ofg_mma(p, ab[i], bs[j]);
        ofg_mma(p, ab[i], bb[j]);
        OFG_PRAGMA(unroll)
        for (int c = 0; c < 4; ++c) acc[i][j][c] += p[c];
      }
  }
}

#define TC_A_LD (A_KC ? OFG_K : OFG_M)
#define TC_B_LD (B_KC ? OFG_K : OFG_N)

extern "C" __global__ void OFG_GEMM_BOUNDS gemm_main(const float* __restrict__ A,
                                                    const float* __restrict__ B,
                                                    float* __restrict__ C OFG_EPI_PARAMS) {
  OFG_DYN_SMEM(ofg_smem4);
  float* As = (float*)ofg_smem4;
  float* Bs = As + STAGES * A_TILE;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp / WARPS_N) * (8 * TM), wn = (warp % WARPS_N) * (4 * TN);
  const int b = blockIdx.z / SPLIT, split = blockIdx.z % SPLIT;
  const float* Ab = A + (i64)b * OFG_A_BSTRIDE;
  const float* Bb = B + (i64)b * OFG_B_BSTRIDE;
  float* Cs = C + (i64)split * ((i64)OFG_BATCH * OFG_M * OFG_N);
  const int kb = split * KCHUNK;
  const int kend = kb + KCHUNK < OFG_K ? kb + KCHUNK : OFG_K;
  for (int tile = blockIdx.x; tile < TILES; tile += gridDim.x) {
    const int width = GROUP_M * TILES_N, first = (tile / width) * GROUP_M;
    const int gsz = TILES_M - first < GROUP_M ? TILES_M - first : GROUP_M;
    const int m0 = (first + (tile % width) % gsz) * BM, n0 = ((tile % width) / gsz) * BN;
    float acc[MT][NTL][4];
    OFG_PRAGMA(unroll)
    for (int i = 0; i < MT; ++i)
      OFG_PRAGMA(unroll)
      for (int j = 0; j < NTL; ++j)
        OFG_PRAGMA(unroll)
        for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
    const int ke = ofg_tile_masked(m0, n0) ? kb : kend;
    const int nk = (ke - kb + BK - 1) / BK;
    OFG_PRAGMA(unroll)
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nk) {
        ofg_tc_tile<BM, A_KC, OFG_VEC_A, EVEN_M, EVEN_K>(As + s * A_TILE, Ab, TC_A_LD, m0, OFG_M,
                                                          kb + s * BK, ke, tid);
        ofg_tc_tile<BN, B_KC, OFG_VEC_B, EVEN_N, EVEN_K>(Bs + s * B_TILE, Bb, TC_B_LD, n0, OFG_N,
                                                          kb + s * BK, ke, tid);
      }
      ofg_cp_commit();
    }
    for (int kt = 0; kt < nk; ++kt) {
      ofg_cp_wait<STAGES - 2>();
      __syncthreads();
      const int pf = kt + STAGES - 1;
      if (pf < nk) {
        const int st = pf % STAGES;
        ofg_tc_tile<BM, A_KC, OFG_VEC_A, EVEN_M, EVEN_K>(As + st * A_TILE, Ab, TC_A_LD, m0,
                                                          OFG_M, kb + pf * BK, ke, tid);
        ofg_tc_tile<BN, B_KC, OFG_VEC_B, EVEN_N, EVEN_K>(Bs + st * B_TILE, Bb, TC_B_LD, n0,
                                                          OFG_N, kb + pf * BK, ke, tid);
      }
      ofg_cp_commit();
      const int cs = kt % STAGES;
      ofg_tc_compute(As + cs * A_TILE, Bs + cs * B_TILE, acc, wm, wn, lane);
    }
    ofg_cp_wait<0>();
    // Epilogue: c0, c1 at (g, 2t), (g, 2t+1); c2, c3 eight rows below.
    const int g = lane >> 2, t = lane & 3;
    OFG_PRAGMA(unroll)
    for (int i = 0; i < MT; ++i)
      OFG_PRAGMA(unroll)
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wm + i * 16 + g + h * 8;
        if (!EVEN_M && m >= OFG_M) continue;
        const i64 row = (i64)b * OFG_M + m;
        float* crow = Cs + row * OFG_N;
        OFG_PRAGMA(unroll)
        for (int j = 0; j < NTL; ++j) {
          const int n = n0 + wn + j * 8 + 2 * t;
          float v[2];
          OFG_PRAGMA(unroll)
          for (int c = 0; c < 2; ++c) {
            const float x = acc[i][j][2 * h + c];
#if SPLIT > 1
            v[c] = x;
#else
            v[c] = (EVEN_N || n + c < OFG_N) ? ofg_epi(x, row, n + c OFG_EPI_ARGS) : 0.0f;
#endif
          }
          if (OFG_N % 2 == 0) {
            if (EVEN_N || n < OFG_N) ofg_st<2>(crow + n, v);
          } else {
            for (int c = 0; c < 2; ++c)
              if (n + c < OFG_N) crow[n + c] = v[c];
          }
        }
      }
    __syncthreads();
  }
}

#endif  // OFG_OP_GEMM && OFG_TF32X3
