// GEMM family: Hopper (sm_90a) warp-specialized 3xTF32 GEMM on warpgroup MMA (wgmma),
// appended after gemm.cu when MODE is wgmma_tf32x3 (the generator then defines OFG_WGMMA).
// It has not yet run on a GPU: only its compiles and a CPU model of its arithmetic are
// checked (tests/unit/test_gemm_wgmma.c), so the proposer never starts from it and the
// space's grid leaves it out; it is reached only by naming MODE=wgmma_tf32x3.
//
// Knobs (-D macros):
//   BM      rows of the block tile, 64 per consumer warpgroup: 64 (one consumer) or 128
//           (two); CONSUMERS = BM / 64
//   BN      columns of the block tile, the wgmma N: 32, 64 or 128
//   BK      k-depth of one shared-memory stage: 8, 16 or 32 (BK / 8 wgmma k8 slices)
//   STAGES  shared-memory stages filled by the producer, 2 to 6
//   SPLIT   K slices (split-K): partials go to a buffer that gemm_splitk (gemm.cu) sums
//   MODE_WGMMA_TF32X3  selects this kernel. TM, TN and MINB are not read.
// The problem macros (OFG_M, OFG_N, OFG_K, OFG_BATCH, OFG_TRANS_A/B, batch strides,
// OFG_VEC_A/B, OFG_MASK, the epilogue ofg_epi) are gemm.cu's.
//
// Threads: (1 + CONSUMERS) warpgroups of 128. Warpgroup 0 is the producer: it gives
// registers back (setmaxnreg.dec to 56) and only copies and splits operands. Warpgroups
// 1..CONSUMERS are consumers (setmaxnreg.inc): consumer c computes rows 64(c-1)..64c-1 of
// the BM x BN tile with wgmma m64nBNk8, accumulators in registers.
//
// The pipeline. Per K step kt (BK deep) the stage s = kt % STAGES holds A's tile as it
// is stored in memory (k-contiguous [BM][BK+4], else [BK][BM+8]: padded so that the
// consumers' fragment reads are conflict-free) and B's tile split into big and small
// parts, each in the wgmma core-matrix layout below. The producer copies A's tile and B's
// raw tile (into one of two raw buffers, also in B's memory layout) with 16-byte cp.async
// (4-byte where the contiguous extent is not a multiple of 4), zero-filling rows, columns
// and k past the problem (src-size 0). One step later (cp.async.wait_group 1, a barrier of
// the producer's 128 threads), it splits the raw B tile into the stage's big and small
// parts, runs fence.proxy.async (ordinary stores, read next by the tensor cores' async
// proxy) and arrives on the stage's full mbarrier (128 arrivals; release). Consumers wait
// on it (try_wait.parity; acquire), issue their wgmmas, wait for them (wait_group 0) and
// arrive on the stage's empty mbarrier (128 x CONSUMERS arrivals), which the producer waits
// on before it refills the stage STAGES steps later.
// Why cp.async and not the bulk copy engine: cp.async.bulk.tensor needs a CUtensorMap
// kernel parameter, which the launch plan cannot pass; 1-D cp.async.bulk cannot zero-fill
// the tails or copy a row shorter than 16 bytes; and B goes through the producer's
// registers for its split anyway, which is where transposes are done for free. So the
// stage completes on its mbarrier by a plain arrive after cp.async.wait_group, not by
// transaction counts (expect_tx).
//
// 3xTF32. Each fp32 x is big = tf32(x) and small = tf32(x - big) (cvt.rna: x - big is
// exact in fp32), and every k8 slice accumulates small*big + big*small + big*big, small
// products first. The split costs least where each value passes through registers once:
// A's fragments are loaded from shared memory by the consumer that multiplies them and
// split in its registers (wgmma takes A from registers); B must come from shared memory,
// so the producer splits each B value once per stage and writes both parts, which both
// consumers then read. The tensor cores' accumulation is not round-to-nearest, so a K
// step's 3 x BK/8 products go to a zeroed partial (scale-d 0 on the first) that is then
// added to the fp32 accumulator with ordinary adds: the long running sum never passes
// through the tensor cores.
//
// The core-matrix layout (wgmma's K-major operand, no swizzle). A core matrix is 8 rows
// (n) of 16 bytes (4 consecutive k), 128 contiguous bytes. Element (n, k) of a BN x BK
// part lies at float offset ((k/4) * (BN/8) + n/8) * 32 + (n%8) * 4 + k%4: core matrices
// adjacent in n are 128 bytes apart (the descriptor's stride byte offset), adjacent in k
// BN*16 bytes apart (its leading byte offset), and the k8 slice j starts 8*j*BN floats in.
// The producer writes one core-matrix row (4 k of one n) as one 16-byte store.
//
// Known limits, to measure once it runs: a consumer waits for its own wgmmas at the end
// of every K step (wait_group 0, so that A's registers and the stage can be reused),
// leaving the tensor cores to the other consumer meanwhile; B's parts are not swizzled;
// one output tile per block (no persistent grid); the descriptor fields follow the PTX
// ISA's description of the no-swizzle K-major layout and are unverified on hardware.
#if defined(OFG_OP_GEMM) && defined(OFG_WGMMA)
#if defined(OFG_EMU)
#error "the wgmma GEMM has no CPU emulation"
#endif

#define CONSUMERS (BM / 64)
#define WG_NT (128 * (1 + CONSUMERS))
#define WA_KC (OFG_TRANS_A == 0)  // A stored [M][K]
#define WB_KC (OFG_TRANS_B != 0)  // B stored [N][K]
#define WA_TILE (WA_KC ? BM * (BK + 4) : BK * (BM + 8))
#define WB_RAW (WB_KC ? BN * (BK + 4) : BK * (BN + 8))
#define WB_PART (BN * BK)
#define WA_LD (WA_KC ? OFG_K : OFG_M)
#define WB_LD (WB_KC ? OFG_K : OFG_N)
// Registers per thread after setmaxnreg: the producer keeps 56 (its copy loops spill
// at 40); the consumers take what it frees. One consumer: 256 threads capped at 128
// registers at entry (two blocks' bound), 128 x (56 + 200) = 256 x 128. Two: 384 threads
// at 168, 128 x (56 + 2 x 224) = 384 x 168 (65536 / 384 rounded down to 8).
#define WG_PRODUCER_REGS 56
#if CONSUMERS == 1
#define WG_BOUNDS __launch_bounds__(WG_NT, 2)
#define WG_CONSUMER_REGS 200
#else
#define WG_BOUNDS __launch_bounds__(WG_NT, 1)
#define WG_CONSUMER_REGS 224
#endif

__device__ __forceinline__ unsigned ofg_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// ---- mbarriers ----
__device__ __forceinline__ void ofg_mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(ofg_smem_addr(bar)),
               "r"(count)
               : "memory");
}

__device__ __forceinline__ void ofg_mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(
                   ofg_smem_addr(bar))
               : "memory");
}

// Waits until the phase of parity `parity` of bar has completed.
__device__ __forceinline__ void ofg_mbar_wait(unsigned long long* bar, unsigned parity) {
  const unsigned a = ofg_smem_addr(bar);
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred P;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 P, [%1], %2;\n"
        "selp.u32 %0, 1, 0, P;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  } while (!done);
}

// The producer warpgroup's own barrier (named barrier 1; 0 is __syncthreads').
__device__ __forceinline__ void ofg_producer_sync() {
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
}

// ---- tf32 ----
__device__ __forceinline__ unsigned ofg_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// x as big + small, both tf32 bit patterns (see the header).
__device__ __forceinline__ void ofg_split(float x, unsigned* big, unsigned* small) {
  *big = ofg_tf32(x);
  *small = ofg_tf32(x - __uint_as_float(*big));
}

// ---- warpgroup MMA ----
// The shared-memory descriptor of a K-major core-matrix part (see the header): start
// address, leading byte offset (k direction) BN*16, stride byte offset (n direction) 128,
// no swizzle; each field in 16-byte units.
__device__ __forceinline__ unsigned long long ofg_desc(const float* part) {
  const unsigned long long lbo = (BN * 16) >> 4, sbo = 128 >> 4;
  return (unsigned long long)((ofg_smem_addr(part) >> 4) & 0x3fff) | (lbo << 16) | (sbo << 32);
}

__device__ __forceinline__ void ofg_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void ofg_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void ofg_wgmma_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

// Tells the compiler that r is read and written here: after wgmma.wait_group, so that no
// use of an accumulator moves above the wait.
__device__ __forceinline__ void ofg_reg_fence(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

// d (+)= a * B, m64 x BN x k8: a this thread's A fragment (tf32), desc B's k8 slice;
// scale_d 0 overwrites d.
#if BN == 32
__device__ __forceinline__ void ofg_wgmma(float (&d)[BN / 2], const unsigned (&a)[4],
                                          unsigned long long desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
      "}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d)
      : "memory");
}
#elif BN == 64
__device__ __forceinline__ void ofg_wgmma(float (&d)[BN / 2], const unsigned (&a)[4],
                                          unsigned long long desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
      "}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d)
      : "memory");
}
#elif BN == 128
__device__ __forceinline__ void ofg_wgmma(float (&d)[BN / 2], const unsigned (&a)[4],
                                          unsigned long long desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
      "}, {%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
        "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
        "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d)
      : "memory");
}
#endif

// ---- the producer ----

// One operand tile of BK x R at (k0, r0) of G (global, read) into S (shared, written) in
// its memory layout, by the producer's 128 threads: KC (k-contiguous: global [r][ld],
// S [r][BK+4]), else global [k][ld], S [k][R+8]. Rows r >= rext and k >= kend are
// zero-filled.
template <int R, bool KC, int V, bool EVR, bool EVK>
__device__ __forceinline__ void ofg_wg_tile(float* S, const float* G, ofg_idx ld, int r0,
                                            int rext, int k0, int kend, int tid) {
  const int INNER = KC ? BK : R, OUTER = KC ? R : BK, LDS = KC ? BK + 4 : R + 8;
  const int TOTAL = OUTER * INNER / V;
  // Not unrolled: unrolled, the copies' addresses are kept across the K loop and spill
  // out of the producer's registers.
  OFG_UNROLL_N(1)
  for (int i = 0; i < (TOTAL + 127) / 128; ++i) {
    const int idx = tid + i * 128;
    if (TOTAL % 128 == 0 || idx < TOTAL) {
      const int o = idx / (INNER / V), in = (idx % (INNER / V)) * V;
      const int gk = k0 + (KC ? in : o), gr = r0 + (KC ? o : in);
      const bool ok = (EVK || gk < kend) && (EVR || gr < rext);
      const float* src = KC ? G + (ofg_idx)gr * ld + gk : G + (ofg_idx)gk * ld + gr;
      ofg_cp_async<V>(S + o * LDS + in, ok ? src : G, ok);
    }
  }
}

// Splits the raw B tile (shared, B's memory layout; read) into the big and small parts of
// a stage (shared, written), in the core-matrix layout: each thread takes (n, 4 k) chunks,
// one 16-byte store per part.
__device__ __forceinline__ void ofg_wg_split_b(const float* raw, float* big, float* small,
                                               int tid) {
  OFG_PRAGMA(unroll)
  for (int i = 0; i < (WB_PART / 4 + 127) / 128; ++i) {
    const int idx = tid + i * 128, n = idx % BN, k4 = idx / BN;
    if (WB_PART % 512 != 0 && idx >= WB_PART / 4) break;
    float x[4];
    if (WB_KC) {
      const float4 v = *(const float4*)(raw + n * (BK + 4) + 4 * k4);
      x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
    } else {
      OFG_PRAGMA(unroll)
      for (int c = 0; c < 4; ++c) x[c] = raw[(4 * k4 + c) * (BN + 8) + n];
    }
    unsigned b[4], s[4];
    OFG_PRAGMA(unroll)
    for (int c = 0; c < 4; ++c) ofg_split(x[c], &b[c], &s[c]);
    const int off = (k4 * (BN / 8) + n / 8) * 32 + (n % 8) * 4;
    *(uint4*)(big + off) = make_uint4(b[0], b[1], b[2], b[3]);
    *(uint4*)(small + off) = make_uint4(s[0], s[1], s[2], s[3]);
  }
}

// The producer's loop over the K steps of one tile (see the header). The shared-memory
// pointers are the kernel's; nothing is owned.
__device__ __forceinline__ void ofg_wg_produce(const float* Ab, const float* Bb, float* As,
                                               float* Braw, float* Bbig, float* Bsmall,
                                               unsigned long long* full,
                                               unsigned long long* empty, int m0, int n0,
                                               int kb, int ke, int nk, int tid) {
  for (int kt = 0; kt <= nk; ++kt) {
    if (kt < nk) {
      const int s = kt % STAGES;
      if (kt >= STAGES) ofg_mbar_wait(&empty[s], (unsigned)((kt / STAGES - 1) & 1));
      ofg_wg_tile<BM, WA_KC, OFG_VEC_A, EVEN_M, EVEN_K>(As + s * WA_TILE, Ab, WA_LD, m0, OFG_M,
                                                        kb + kt * BK, ke, tid);
      ofg_wg_tile<BN, WB_KC, OFG_VEC_B, EVEN_N, EVEN_K>(Braw + (kt & 1) * WB_RAW, Bb, WB_LD, n0,
                                                        OFG_N, kb + kt * BK, ke, tid);
    }
    ofg_cp_commit();
    if (kt > 0) {
      const int p = kt - 1, s = p % STAGES;
      ofg_cp_wait<1>();     // this thread's copies of step p have landed
      ofg_producer_sync();  // and everyone's
      ofg_wg_split_b(Braw + (p & 1) * WB_RAW, Bbig + s * WB_PART, Bsmall + s * WB_PART, tid);
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      ofg_mbar_arrive(&full[s]);
      ofg_producer_sync();  // the raw buffer of step p is free for step p + 2
    }
  }
}

// ---- the consumers ----

// This thread's A fragment value (m, k) of a stage's A tile (shared, read).
__device__ __forceinline__ float ofg_wg_a_at(const float* As, int m, int k) {
  return WA_KC ? As[m * (BK + 4) + k] : As[k * (BM + 8) + m];
}

// One K step of one consumer (the stage's shared tiles read, part written): the A
// fragments of every k8 slice split in registers (rows r and r + 8 of the warp's 16,
// k = t and t + 4: wgmma's register layout for tf32 A), then 3 x BK/8 wgmmas into the
// partial part (overwritten by the first), waited for before the stage is released.
__device__ __forceinline__ void ofg_wg_step(const float* As, const float* big, const float* small,
                                            float (&part)[BN / 2], int r, int t) {
  unsigned ab[BK / 8][4], as[BK / 8][4];
  OFG_PRAGMA(unroll)
  for (int j = 0; j < BK / 8; ++j) {
    const float x[4] = {ofg_wg_a_at(As, r, 8 * j + t), ofg_wg_a_at(As, r + 8, 8 * j + t),
                        ofg_wg_a_at(As, r, 8 * j + t + 4), ofg_wg_a_at(As, r + 8, 8 * j + t + 4)};
    OFG_PRAGMA(unroll)
    for (int c = 0; c < 4; ++c) ofg_split(x[c], &ab[j][c], &as[j][c]);
  }
  ofg_wgmma_fence();
  OFG_PRAGMA(unroll)
  for (int j = 0; j < BK / 8; ++j) {
    const unsigned long long db = ofg_desc(big + 8 * j * BN), ds = ofg_desc(small + 8 * j * BN);
    ofg_wgmma(part, as[j], db, j > 0);
    ofg_wgmma(part, ab[j], ds, 1);
    ofg_wgmma(part, ab[j], db, 1);
  }
  ofg_wgmma_commit();
  ofg_wgmma_wait0();
  OFG_PRAGMA(unroll)
  for (int i = 0; i < BN / 2; ++i) ofg_reg_fence(part[i]);
}

// Stores a consumer's accumulators into Cs (global: the output, or a split's partials):
// acc[4j + 2h + c] is row (g + 8h) of the warp's 16, column 8j + 2t + c (wgmma's f32
// accumulator layout), through the epilogue (its tensors, OFG_EPI_PARAMS, read) unless the
// output is a split-K partial.
__device__ __forceinline__ void ofg_wg_store(float* Cs, const float (&acc)[BN / 2], int b,
                                             int row0, int n0, int t OFG_EPI_PARAMS) {
  OFG_PRAGMA(unroll)
  for (int h = 0; h < 2; ++h) {
    const int m = row0 + 8 * h;
    if (!EVEN_M && m >= OFG_M) continue;
    const i64 row = (i64)b * OFG_M + m;
    float* crow = Cs + row * OFG_N;
    OFG_PRAGMA(unroll)
    for (int j = 0; j < BN / 8; ++j) {
      const int n = n0 + 8 * j + 2 * t;
      float v[2];
      OFG_PRAGMA(unroll)
      for (int c = 0; c < 2; ++c) {
        const float x = acc[4 * j + 2 * h + c];
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
}

// ---- the kernel: one BM x BN tile of one (batch, K slice) per block ----
extern "C" __global__ void WG_BOUNDS gemm_main(const float* __restrict__ A,
                                               const float* __restrict__ B,
                                               float* __restrict__ C OFG_EPI_PARAMS) {
  OFG_DYN_SMEM(ofg_smem4);
  float* Bbig = (float*)ofg_smem4;
  float* Bsmall = Bbig + STAGES * WB_PART;
  float* As = Bsmall + STAGES * WB_PART;
  float* Braw = As + STAGES * WA_TILE;
  unsigned long long* full = (unsigned long long*)(Braw + 2 * WB_RAW);
  unsigned long long* empty = full + STAGES;
  const int tid = threadIdx.x, wg = tid / 128;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ofg_mbar_init(&full[s], 128);
      ofg_mbar_init(&empty[s], 128 * CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int b = blockIdx.z / SPLIT, split = blockIdx.z % SPLIT;
  const int kb = split * KCHUNK;
  const int kend = kb + KCHUNK < OFG_K ? kb + KCHUNK : OFG_K;
  const int tile = blockIdx.x, width = GROUP_M * TILES_N, first = (tile / width) * GROUP_M;
  const int gsz = TILES_M - first < GROUP_M ? TILES_M - first : GROUP_M;
  const int m0 = (first + (tile % width) % gsz) * BM, n0 = ((tile % width) / gsz) * BN;
  const int ke = ofg_tile_masked(m0, n0) ? kb : kend;
  const int nk = (ke - kb + BK - 1) / BK;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(WG_PRODUCER_REGS) : "memory");
    ofg_wg_produce(A + (i64)b * OFG_A_BSTRIDE, B + (i64)b * OFG_B_BSTRIDE, As, Braw, Bbig,
                   Bsmall, full, empty, m0, n0, kb, ke, nk, tid);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(WG_CONSUMER_REGS) : "memory");
    const int ct = tid - 128 * wg, warp = ct >> 5, lane = ct & 31, g = lane >> 2, t = lane & 3;
    const int r = 64 * (wg - 1) + 16 * warp + g;  // this thread's first row in the tile
    float acc[BN / 2], part[BN / 2];  // part: one K step's products (scale-d 0 first)
    OFG_PRAGMA(unroll)
    for (int i = 0; i < BN / 2; ++i) acc[i] = part[i] = 0.0f;
    for (int kt = 0; kt < nk; ++kt) {
      const int s = kt % STAGES;
      ofg_mbar_wait(&full[s], (unsigned)((kt / STAGES) & 1));
      ofg_wg_step(As + s * WA_TILE, Bbig + s * WB_PART, Bsmall + s * WB_PART, part, r, t);
      ofg_mbar_arrive(&empty[s]);
      OFG_PRAGMA(unroll)
      for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
    }
    float* Cs = C + (i64)split * ((i64)OFG_BATCH * OFG_M * OFG_N);
    ofg_wg_store(Cs, acc, b, m0 + r, n0, t OFG_EPI_ARGS);
  }
}

#endif  // OFG_OP_GEMM && OFG_WGMMA
