// Builtin convolution template (proposers/builtin/conv.c writes the fragment):
//   ofg_conv: a dense or grouped convolution, or a transposed convolution, in 1D, 2D or
//   3D, as an implicit GEMM per group (docs/architecture.md, "Convolutions"):
//     y[n, g*OCG + m, o] = sum over k = (ci, tap) of W_g[m][k] * X_g[k][(n, o)] (+ b)
//   m an output channel of group g, (n, o) an output position, ci an input channel of the
//   group and tap = (kd, kh, kw) a window offset. X_g is read in place (no im2col buffer):
//   a convolution reads x at o*stride - pad + tap*dilation, a transposed one at
//   (o + pad - tap*dilation) / stride where that divides evenly. fp32 SIMT FMAs.
//
// Fragment macros: OFG_N, OFG_C, OFG_OC, OFG_CG (= C / groups), OFG_OCG (= OC / groups),
// OFG_ID/IH/IW and OFG_OD/OH/OW (spatial sizes, 1 for missing dims), OFG_KD/KH/KW,
// OFG_SD/SH/SW (stride), OFG_PD/PH/PW (padding before), OFG_DD/DH/DW (dilation),
// OFG_TRANSPOSED, OFG_BIAS.
// Knobs: BM output channels and BN output positions per block, BK reduction rows per
// step, TM x TN outputs per thread (4 or 8 each), UNROLL of the step loop, MINB; MODE
// tf32_rna rounds both operands to nearest TF32 as they enter shared memory (the bias
// stays fp32), as cuDNN's TF32 algorithms do: the products of two 11-bit significands
// are exact in fp32, so the result equals eager's TF32 convolution up to fp32 sums.
// @OFG_FRAGMENT@

#define OFG_NX (BN / TN)
#define OFG_NT ((BM / TM) * OFG_NX)
#define OFG_TAPS (OFG_KD * OFG_KH * OFG_KW)
#define OFG_KG (OFG_CG * OFG_TAPS)                  // reduction length of one group
#define OFG_OSP ((i64)OFG_OD * OFG_OH * OFG_OW)     // output positions of one image
#define OFG_ISP ((i64)OFG_ID * OFG_IH * OFG_IW)     // input positions of one image
#define OFG_COLS ((i64)OFG_N * OFG_OSP)
#define OFG_AP (BM + 4)                             // padded row of the weight tile
#if MINB > 0
#define OFG_CONV_BOUNDS __launch_bounds__(OFG_NT, MINB)
#else
#define OFG_CONV_BOUNDS __launch_bounds__(OFG_NT)
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#if OFG_BIAS
#define OFG_BIAS_PARAM , const float* __restrict__ bias
#else
#define OFG_BIAS_PARAM
#endif

#if defined(MODE_TF32_RNA)
// v rounded to nearest TF32, ties away from zero (PTX cvt.rna.tf32.f32): half of TF32's
// last place (bit 12) added to the magnitude's bits, the 13 low mantissa bits dropped.
// Infinities and NaNs pass unchanged.
__device__ __forceinline__ float ofg_conv_operand(float v) {
  const unsigned u = __float_as_uint(v);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return v;
  return __uint_as_float((u + 0x1000u) & ~0x1fffu);
}
#else
__device__ __forceinline__ float ofg_conv_operand(float v) { return v; }
#endif

// Where input position o (one spatial dim) reads the input for tap t: the input index, or
// -1 when the tap falls in the padding (or, transposed, between two strided inputs).
__device__ __forceinline__ int ofg_conv_in(int o, int t, int stride, int pad, int dil, int in) {
#if OFG_TRANSPOSED
  const int u = o + pad - t * dil;
  if (u < 0 || u % stride != 0)
    return -1;
  const int i = u / stride;
#else
  const int i = o * stride - pad + t * dil;
  if (i < 0)
    return -1;
#endif
  return i < in ? i : -1;
}

// The weight of output channel m (of group g) and reduction row k = ci * TAPS + tap.
// Convolution weights are [OC, CG, taps], transposed ones [C, OCG, taps].
__device__ __forceinline__ float ofg_conv_weight(const float* __restrict__ w, int g, int m,
                                                 int k) {
#if OFG_TRANSPOSED
  const int ci = k / OFG_TAPS, tap = k % OFG_TAPS;
  return w[((i64)(g * OFG_CG + ci) * OFG_OCG + m) * OFG_TAPS + tap];
#else
  return w[(i64)(g * OFG_OCG + m) * OFG_KG + k];
#endif
}

// TM (or TN) consecutive floats of a 16-byte aligned shared row into out.
__device__ __forceinline__ void ofg_conv_row4(const float* src, float* out, int n) {
  for (int i = 0; i < n; i += 4) {
    const float4 t = *(const float4*)&src[i];
    out[i] = t.x; out[i + 1] = t.y; out[i + 2] = t.z; out[i + 3] = t.w;
  }
}

// Grid: (ceil(N * OSP / BN), ceil(OCG / BM), groups); OFG_NT threads. The thread that
// loads column c of the position tile keeps c's decomposition for the whole reduction.
extern "C" __global__ void OFG_CONV_BOUNDS ofg_conv(const float* __restrict__ x,
                                                    const float* __restrict__ w OFG_BIAS_PARAM,
                                                    float* __restrict__ y) {
  // The tiles, as float4 for 16-byte alignment: weights [k][m], input values [k][position].
  __shared__ float4 as4[BK * OFG_AP / 4], bs4[BK * BN / 4];
  float (*as)[OFG_AP] = (float (*)[OFG_AP])as4;
  float (*bs)[BN] = (float (*)[BN])bs4;
  const int tid = threadIdx.x, tx = tid % OFG_NX, ty = tid / OFG_NX;
  const int g = blockIdx.z, m0 = blockIdx.y * BM;
  const i64 c0 = (i64)blockIdx.x * BN;
  // The column this thread loads: its image and output coordinates.
  const int lc = tid % BN, lr = tid / BN;
  const i64 col = c0 + lc;
  const bool col_ok = col < OFG_COLS;
  const i64 nb = col_ok ? col / OFG_OSP : 0;
  const int sp = col_ok ? (int)(col % OFG_OSP) : 0;
  const int od = sp / (OFG_OH * OFG_OW), oh = (sp / OFG_OW) % OFG_OH, ow = sp % OFG_OW;
  const float* xb = x + (nb * OFG_C + (i64)g * OFG_CG) * OFG_ISP;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++)
      acc[i][j] = 0.0f;
  OFG_PRAGMA(unroll UNROLL)
  for (int k0 = 0; k0 < OFG_KG; k0 += BK) {
    for (int e = tid; e < BM * BK; e += OFG_NT) {
      const int kk = e % BK, mm = e / BK, k = k0 + kk, m = m0 + mm;
      as[kk][mm] =
          k < OFG_KG && m < OFG_OCG ? ofg_conv_operand(ofg_conv_weight(w, g, m, k)) : 0.0f;
    }
    for (int r = lr; r < BK; r += OFG_NT / BN) {
      const int k = k0 + r, ci = k / OFG_TAPS, tap = k % OFG_TAPS;
      const int kd = tap / (OFG_KH * OFG_KW), kh = (tap / OFG_KW) % OFG_KH, kw = tap % OFG_KW;
      const int id = ofg_conv_in(od, kd, OFG_SD, OFG_PD, OFG_DD, OFG_ID);
      const int ih = ofg_conv_in(oh, kh, OFG_SH, OFG_PH, OFG_DH, OFG_IH);
      const int iw = ofg_conv_in(ow, kw, OFG_SW, OFG_PW, OFG_DW, OFG_IW);
      const bool ok = col_ok && k < OFG_KG && id >= 0 && ih >= 0 && iw >= 0;
      bs[r][lc] = ok ? ofg_conv_operand(OFG_LD(&xb[ci * OFG_ISP + ((i64)id * OFG_IH + ih) * OFG_IW + iw]))
                     : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float a[TM], b[TN];
      ofg_conv_row4(&as[kk][ty * TM], a, TM);
      ofg_conv_row4(&bs[kk][tx * TN], b, TN);
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
          acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < TN; j++) {
    const i64 c = c0 + tx * TN + j;
    if (c >= OFG_COLS)
      continue;
    const i64 n = c / OFG_OSP, s = c % OFG_OSP;
#pragma unroll
    for (int i = 0; i < TM; i++) {
      const int m = m0 + ty * TM + i;
      if (m >= OFG_OCG)
        continue;
      const int oc = g * OFG_OCG + m;
#if OFG_BIAS
      y[(n * OFG_OC + oc) * OFG_OSP + s] = acc[i][j] + bias[oc];
#else
      y[(n * OFG_OC + oc) * OFG_OSP + s] = acc[i][j];
#endif
    }
  }
}
