// Builtin attention template (proposers/builtin/attention.c writes the fragment):
//   ofg_attention: softmax(Q K^T * scale) V in one pass over the keys (online softmax,
//     docs/architecture.md, "Attention"), never writing the [Lq, Lk] weights;
//   ofg_attn_proj / ofg_attn_proj_bias: Y = X W^T (+ b), the projections of a
//     MultiheadAttention, with an optional scale of the first OFG_PROJ_SCALE_COLS columns.
// fp32 throughout (SIMT FMAs, no tensor cores), so the numerics are eager fp32's.
//
// Fragment macros: OFG_D, OFG_DV (head sizes of Q/K and V), OFG_LQ, OFG_LK, OFG_HEADS,
// OFG_CAUSAL, OFG_SCALE_LOG2 (scale * log2(e)); per tensor X of Q, K, V, O the element
// (n, h, l, d) sits at X_OFF + n*X_N + h*X_H + l*X_L + d (K's d times OFG_K_D: 1, or Lk
// when K is read as a [D, Lk] transpose).
// OFG_MASK: 0, or an attn_mask (1 boolean, 2 float added to the scores) of element type
// OFG_MASK_T read at n*OFG_M_N + h*OFG_M_H + row*OFG_M_L + key*OFG_M_K.
// Knobs: BM queries per block, BN keys per tile, TM rows and TN keys per thread,
// UNROLL of the head-dim loop, MINB.
// @OFG_FRAGMENT@

#define OFG_NX (BN / TN)         // threads sharing one row of scores (lanes of one warp)
#define OFG_NY (BM / TM)
#define OFG_NT (OFG_NX * OFG_NY)
#define OFG_QP (BM + 4)          // padded row of the transposed Q tile and of P
#define OFG_KP (BN + 1)          // padded row of the transposed K tile
#define OFG_VC (OFG_DV / OFG_NX) // output columns per thread
#define OFG_UP4(x) (((x) + 3) / 4 * 4)
#define OFG_KS_AT (OFG_D * OFG_QP)   // float offsets of the tiles, 16-byte aligned
#define OFG_VS_AT (OFG_KS_AT + OFG_UP4(OFG_D * OFG_KP))
#define OFG_PS_AT (OFG_VS_AT + OFG_UP4(BN * OFG_DV))
#if MINB > 0
#define OFG_ATT_BOUNDS __launch_bounds__(OFG_NT, MINB)
#else
#define OFG_ATT_BOUNDS __launch_bounds__(OFG_NT)
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

// A thread's TM consecutive rows of a transposed tile (Q^T or P^T) at src, 16-byte
// aligned, into out, as float4 loads.
__device__ __forceinline__ void ofg_att_rows(const float* src, float out[TM]) {
#pragma unroll
  for (int i = 0; i < TM; i += 4) {
    const float4 t = *(const float4*)&src[i];
    out[i] = t.x; out[i + 1] = t.y; out[i + 2] = t.z; out[i + 3] = t.w;
  }
}

// Dynamic shared memory: Q^T [D][QP], K^T [D][KP], V [BN][DV], P^T [BN][QP].
#if OFG_MASK
#define OFG_MASK_PARAM , const OFG_MASK_T* __restrict__ mask
#else
#define OFG_MASK_PARAM
#endif

extern "C" __global__ void OFG_ATT_BOUNDS ofg_attention(const float* __restrict__ q,
                                                        const float* __restrict__ k,
                                                        const float* __restrict__ v,
                                                        float* __restrict__ o OFG_MASK_PARAM) {
  OFG_DYN_SMEM(smem4);
  float* qs = (float*)smem4;
  float* ks = qs + OFG_KS_AT;
  float* vs = qs + OFG_VS_AT;
  float* ps = qs + OFG_PS_AT;
  const int tid = threadIdx.x, tx = tid % OFG_NX, ty = tid / OFG_NX;
  const i64 bh = blockIdx.y, n = bh / OFG_HEADS, h = bh % OFG_HEADS;
  const int q0 = blockIdx.x * BM;
  const float* qb = q + OFG_Q_OFF + n * OFG_Q_N + h * OFG_Q_H;
  const float* kb = k + OFG_K_OFF + n * OFG_K_N + h * OFG_K_H;
  const float* vb = v + OFG_V_OFF + n * OFG_V_N + h * OFG_V_H;
#if OFG_MASK
  const OFG_MASK_T* mb = mask + n * OFG_M_N + h * OFG_M_H;
#endif
  for (int e = tid; e < BM * OFG_D; e += OFG_NT) {
    const int r = e / OFG_D, d = e % OFG_D;
    qs[d * OFG_QP + r] = q0 + r < OFG_LQ ? qb[(i64)(q0 + r) * OFG_Q_L + d] : 0.0f;
  }
  float m[TM], l[TM], acc[TM][OFG_VC];
#pragma unroll
  for (int i = 0; i < TM; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < OFG_VC; c++) acc[i][c] = 0.0f;
  }
  int kend = OFG_LK;
#if OFG_CAUSAL
  if (q0 + BM < kend) kend = q0 + BM;  // key j is seen by query i only when j <= i
#endif
  for (int k0 = 0; k0 < kend; k0 += BN) {
    __syncthreads();  // the previous tile's K, V and P are used up
    for (int e = tid; e < BN * OFG_D; e += OFG_NT) {
#if OFG_K_D == 1
      const int r = e / OFG_D, d = e % OFG_D;  // consecutive threads read along d
#else
      const int r = e % BN, d = e / BN;  // K stored [D, Lk]: consecutive threads along keys
#endif
      ks[d * OFG_KP + r] = k0 + r < OFG_LK ? kb[(i64)(k0 + r) * OFG_K_L + (i64)d * OFG_K_D] : 0.0f;
    }
    for (int e = tid; e < BN * OFG_DV; e += OFG_NT) {
      const int r = e / OFG_DV, d = e % OFG_DV;
      vs[r * OFG_DV + d] = k0 + r < OFG_LK ? vb[(i64)(k0 + r) * OFG_V_L + d] : 0.0f;
    }
    __syncthreads();
    float s[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
      for (int j = 0; j < TN; j++) s[i][j] = 0.0f;
    OFG_UNROLL_N(UNROLL)
    for (int d = 0; d < OFG_D; d++) {
      float a[TM], b[TN];
      ofg_att_rows(&qs[d * OFG_QP + ty * TM], a);
#pragma unroll
      for (int j = 0; j < TN; j++) b[j] = ks[d * OFG_KP + tx + j * OFG_NX];
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) s[i][j] = fmaf(a[i], b[j], s[i][j]);
    }
    // Online softmax in base 2: the running max m and this thread's share l of the row
    // sum; the scores become the probabilities p in place.
#pragma unroll
    for (int i = 0; i < TM; i++) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < TN; j++) {
        const int key = k0 + tx + j * OFG_NX;
        bool keep = key < OFG_LK;
#if OFG_CAUSAL
        keep = keep && key <= q0 + ty * TM + i;
#endif
        float add = 0.0f;
#if OFG_MASK
        const int row = q0 + ty * TM + i;
        if (keep && row < OFG_LQ) {
          const OFG_MASK_T mv = mb[(i64)row * OFG_M_L + (i64)key * OFG_M_K];
#if OFG_MASK == 1
          keep = mv != 0;  // a boolean mask: true where the key takes part
#else
          add = mv * 1.4426950408889634f;  // a float mask is added to the scores
#endif
        }
#endif
        s[i][j] = keep ? s[i][j] * OFG_SCALE_LOG2 + add : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
#pragma unroll
      for (int off = OFG_NX / 2; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mnew = fmaxf(m[i], mx);
      const float base = mnew == -INFINITY ? 0.0f : mnew;  // a row with no key yet
      const float alpha = exp2f(m[i] - base);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < TN; j++) {
        s[i][j] = exp2f(s[i][j] - base);
        sum += s[i][j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = mnew;
#pragma unroll
      for (int c = 0; c < OFG_VC; c++) acc[i][c] *= alpha;
    }
#pragma unroll
    for (int j = 0; j < TN; j++)
#pragma unroll
      for (int i = 0; i < TM; i += 4)
        *(float4*)&ps[(tx + j * OFG_NX) * OFG_QP + ty * TM + i] =
            make_float4(s[i][j], s[i + 1][j], s[i + 2][j], s[i + 3][j]);
    __syncthreads();
    const int jend = kend - k0 < BN ? kend - k0 : BN;
    OFG_UNROLL_N(UNROLL)
    for (int j = 0; j < jend; j++) {
      float p[TM], w[OFG_VC];
      ofg_att_rows(&ps[j * OFG_QP + ty * TM], p);
#pragma unroll
      for (int c = 0; c < OFG_VC; c++) w[c] = vs[j * OFG_DV + tx + c * OFG_NX];
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int c = 0; c < OFG_VC; c++) acc[i][c] = fmaf(p[i], w[c], acc[i][c]);
    }
  }
  float* ob = o + OFG_O_OFF + n * OFG_O_N + h * OFG_O_H;
#pragma unroll
  for (int i = 0; i < TM; i++) {
    float total = l[i];
#pragma unroll
    for (int off = OFG_NX / 2; off > 0; off >>= 1)
      total += __shfl_xor_sync(0xffffffffu, total, off);
    const int row = q0 + ty * TM + i;
    if (row < OFG_LQ) {
      const float inv = 1.0f / total;
#pragma unroll
      for (int c = 0; c < OFG_VC; c++) ob[(i64)row * OFG_O_L + tx + c * OFG_NX] = acc[i][c] * inv;
    }
  }
}

#if OFG_PROJ
// Y[r, c] = (sum_k X[r, k] W[w_row0 + c, k] (+ b[w_row0 + c])) * (c < scale_cols ? scale : 1)
// for r < rows, c < cols: a 64x64 tile per block of 256 threads, 4x4 per thread.
#define OFG_PT 64
#define OFG_PK 16
__device__ __forceinline__ void ofg_proj_tile(const float* __restrict__ x,
                                              const float* __restrict__ w,
                                              const float* __restrict__ b,
                                              float* __restrict__ y, int rows, int cols,
                                              int inner, int w_row0, int scale_cols,
                                              float scale) {
  __shared__ float as[OFG_PK][OFG_PT + 4], ws[OFG_PK][OFG_PT + 4];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int r0 = blockIdx.y * OFG_PT, c0 = blockIdx.x * OFG_PT;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < inner; k0 += OFG_PK) {
    __syncthreads();
#pragma unroll
    for (int t = 0; t < 4; t++) {
      const int e = tid + t * 256, r = e / OFG_PK, kk = e % OFG_PK;
      const bool in_k = k0 + kk < inner;
      as[kk][r] = in_k && r0 + r < rows ? x[(i64)(r0 + r) * inner + k0 + kk] : 0.0f;
      ws[kk][r] = in_k && c0 + r < cols ? w[(i64)(w_row0 + c0 + r) * inner + k0 + kk] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < OFG_PK; kk++) {
      const float4 a = *(const float4*)&as[kk][ty * 4];
      const float4 c = *(const float4*)&ws[kk][tx * 4];
      const float av[4] = {a.x, a.y, a.z, a.w}, cv[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], cv[j], acc[i][j]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int r = r0 + ty * 4 + i;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int c = c0 + tx * 4 + j;
      if (r < rows && c < cols) {
        float val = acc[i][j];
        if (b) val += b[w_row0 + c];
        if (c < scale_cols) val *= scale;
        y[(i64)r * cols + c] = val;
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) ofg_attn_proj(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int rows,
    int cols, int inner, int w_row0, int scale_cols, float scale) {
  ofg_proj_tile(x, w, nullptr, y, rows, cols, inner, w_row0, scale_cols, scale);
}

extern "C" __global__ void __launch_bounds__(256) ofg_attn_proj_bias(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ y, int rows, int cols, int inner, int w_row0, int scale_cols,
    float scale) {
  ofg_proj_tile(x, w, b, y, rows, cols, inner, w_row0, scale_cols, scale);
}
#endif
