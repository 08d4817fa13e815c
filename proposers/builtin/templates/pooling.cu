// Max and average pooling, 1D/2D/3D, PyTorch semantics (padding, dilation, ceil_mode,
// count_include_pad, divisor_override), and depthwise convolution (POOL_CONV: each
// channel's window times that channel's weights, zero padding, an optional bias), with an
// optional fused pointwise prologue and epilogue. pooling.c prepends common.cuh and the
// POOL_* shape constants; 1D and 2D are 3D with unit leading dims. Knobs arrive as -D
// macros.
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

// A fused pointwise prologue (on each input element, given its flat index xi) and
// epilogue (on each output, given its flat index e), with the tensors they read as extra
// kernel parameters; pooling.c defines them when the region has such ops.
#ifndef POOL_PRE
#define POOL_PRE(v, xi) (v)
#endif
#ifndef POOL_POST
#define POOL_POST(v, e) (v)
#endif
#ifndef POOL_EXTRA_PARAMS
#define POOL_EXTRA_PARAMS
#define POOL_EXTRA_ARGS
#endif

#if defined(MODE_LDG)
#define POOL_LD(p) __ldg(p)
#else
#define POOL_LD(p) (*(p))
#endif

#ifndef POOL_CONV
#define POOL_CONV 0
#endif
#ifndef POOL_CONV_BIAS
#define POOL_CONV_BIAS 0
#endif

#if POOL_CONV
// Depthwise convolution: the weights [C, 1, KD, KH, KW] arrive first among the extra
// parameters (qw, then qbias with POOL_CONV_BIAS); plane = n * C + c. Taps accumulate in
// the order PyTorch's depthwise kernel takes them (kd, kh, kw), one fused multiply-add
// each; padding reads as zero.
#define POOL_INIT 0.0f
#define POOL_FILL 0.0f
#define POOL_TAPS (POOL_KD * POOL_KH * POOL_KW)
#define POOL_WEIGHTS(plane) (qw + (idx_t)((plane) % POOL_C) * POOL_TAPS)
#define POOL_TAP(acc, v, wp, kd, kh, kw) fmaf((v), (wp)[((kd) * POOL_KH + (kh)) * POOL_KW + (kw)], (acc))
#if POOL_CONV_BIAS
#define POOL_FINAL(acc, plane) ((acc) + qbias[(plane) % POOL_C])
#else
#define POOL_FINAL(acc, plane) (acc)
#endif
#elif POOL_MAX
#define POOL_INIT (-INFINITY)
#define POOL_FILL (-INFINITY)
// PyTorch's max pool keeps the first NaN it meets: NaN never loses a comparison. One
// max.NaN instruction (sm_80 and later) instead of a compare, a NaN test and a select:
// with a small window the taps, not the bytes, bound the kernel.
__device__ __forceinline__ float pool_op(float a, float v) {
#ifndef OFG_EMU
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(v));
  return r;
#else
  return (v > a || isnan(v)) ? v : a;
#endif
}
#else
#define POOL_INIT 0.0f
#define POOL_FILL 0.0f
__device__ __forceinline__ float pool_op(float a, float v) { return a + v; }
#endif

#if !POOL_CONV
#define POOL_WEIGHTS(plane) ((const float*)0)
#define POOL_TAP(acc, v, wp, kd, kh, kw) pool_op((acc), (v))
#define POOL_FINAL(acc, plane) (acc)
#endif

// The window extent along one axis, as avg_pool computes its divisor.
__device__ __forceinline__ int pool_extent(int o, int s, int p, int k, int in, bool clamp) {
  int start = o * s - p, end = start + k;
  if (end > in + p) end = in + p;
  if (!clamp) return end - start;
  if (start < 0) start = 0;
  if (end > in) end = in;
  return end - start;
}

// The output value of a finished window.
__device__ __forceinline__ float pool_finish(float acc, int od, int oh, int ow) {
#if POOL_MAX || POOL_CONV
  (void)od; (void)oh; (void)ow;
  return acc;
#else
#if POOL_DIVISOR > 0
  const int div = POOL_DIVISOR;
#else
  const int div = pool_extent(od, POOL_SD, POOL_PD, POOL_KD, POOL_ID, !POOL_COUNT_PAD) *
                  pool_extent(oh, POOL_SH, POOL_PH, POOL_KH, POOL_IH, !POOL_COUNT_PAD) *
                  pool_extent(ow, POOL_SW, POOL_PW, POOL_KW, POOL_IW, !POOL_COUNT_PAD);
#endif
#if defined(MODE_RECIP_MUL)
  return acc * (1.0f / (float)div);
#else
  return acc / (float)div;
#endif
#endif
}

#if POOL_STAGED
// Staged tile: a block computes TY*ITEMS output rows x TX*WI output columns of one
// (plane, od). For each kd it copies the input rows of the tile (with the halo) into
// shared memory, POOL_CH rows at a time, then every thread updates its ITEMS x WI
// outputs from there; each input row is read once per kd from global memory.
#define POOL_FOOT ((ITEMS - 1) * POOL_SH + (POOL_KH - 1) * POOL_DH + 1)

// Copies tile rows [c0, c0 + rows) of input plane slice xp (at flat index xb) into sm
// (padding = POOL_FILL), through the prologue.
__device__ __forceinline__ void pool_stage(const float* __restrict__ xp, idx_t xb, float* sm,
                                           int ih0, int iw0, int c0, int rows POOL_EXTRA_PARAMS) {
  (void)xb;
#if VEC > 1
  // VEC-aligned vectors: a vector is entirely inside [0, IW) or entirely padding,
  // because POOL_IW is a multiple of VEC (pooling.c checks it).
  const int a0 = iw0 >= 0 ? iw0 / VEC * VEC : -((-iw0 + VEC - 1) / VEC) * VEC;
  const int nq = (iw0 + POOL_IWT - a0 + VEC - 1) / VEC;
#pragma unroll 4
  for (int e = threadIdx.x; e < rows * nq; e += BLOCK) {
    const int r = e / nq, col = a0 + (e % nq) * VEC;
    const int ih = ih0 + c0 + r;
    float v[VEC];
    if (ih >= 0 && ih < POOL_IH && col >= 0 && col < POOL_IW) {
      const float* p = xp + (idx_t)ih * POOL_IW + col;
#if VEC == 4
      const float4 q = *reinterpret_cast<const float4*>(p);
      v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
#else
      const float2 q = *reinterpret_cast<const float2*>(p);
      v[0] = q.x; v[1] = q.y;
#endif
#pragma unroll
      for (int c = 0; c < VEC; c++) v[c] = POOL_PRE(v[c], xb + (idx_t)ih * POOL_IW + col + c);
    } else {
#pragma unroll
      for (int c = 0; c < VEC; c++) v[c] = POOL_FILL;
    }
#pragma unroll
    for (int c = 0; c < VEC; c++) {
      const int lc = col + c - iw0;
      if (lc >= 0 && lc < POOL_IWT) sm[r * POOL_SROW + lc] = v[c];
    }
  }
#else
#pragma unroll 4
  for (int e = threadIdx.x; e < rows * POOL_IWT; e += BLOCK) {
    const int r = e / POOL_IWT, lc = e % POOL_IWT;
    const int ih = ih0 + c0 + r, iw = iw0 + lc;
    sm[r * POOL_SROW + lc] = (ih >= 0 && ih < POOL_IH && iw >= 0 && iw < POOL_IW)
                                 ? POOL_PRE(POOL_LD(xp + (idx_t)ih * POOL_IW + iw),
                                            xb + (idx_t)ih * POOL_IW + iw)
                                 : POOL_FILL;
  }
#endif
}

extern "C" __global__ void OFG_BOUNDS pool_tile(const float* __restrict__ x,
                                                float* __restrict__ y POOL_EXTRA_PARAMS) {
  __shared__ float sm[POOL_CH * POOL_SROW];
  const int tx = threadIdx.x % POOL_TX, ty = threadIdx.x / POOL_TX;
  idx_t b = blockIdx.x;
  const int tw = (int)(b % POOL_NTW);
  b /= POOL_NTW;
  const int th = (int)(b % POOL_NTH);
  b /= POOL_NTH;
  const int od = (int)(b % POOL_OD);
  const idx_t plane = b / POOL_OD;
  const int ow0 = tw * (POOL_TX * POOL_WI), oh0 = th * (POOL_TY * ITEMS);
  const int iw0 = ow0 * POOL_SW - POOL_PW, ih0 = oh0 * POOL_SH - POOL_PH;
  const float* const wp = POOL_WEIGHTS(plane);
  (void)wp;
  float acc[ITEMS][POOL_WI];
#pragma unroll
  for (int i = 0; i < ITEMS; i++)
#pragma unroll
    for (int j = 0; j < POOL_WI; j++) acc[i][j] = POOL_INIT;
  for (int kd = 0; kd < POOL_KD; kd++) {
    const int id = od * POOL_SD - POOL_PD + kd * POOL_DD;
    if (id < 0 || id >= POOL_ID) continue;  // the same for the whole block
    const idx_t xb = (plane * POOL_ID + id) * ((idx_t)POOL_IH * POOL_IW);
    const float* xp = x + xb;
#if POOL_WHOLE_TILE
    // The whole halo tile in one piece: every row a thread needs is staged.
    {
      const int c0 = 0, rows = POOL_IHT;
#else
    for (int c0 = 0; c0 < POOL_IHT; c0 += POOL_CH) {
      const int rows = POOL_IHT - c0 < POOL_CH ? POOL_IHT - c0 : POOL_CH;
#endif
      __syncthreads();
      pool_stage(xp, xb, sm, ih0, iw0, c0, rows POOL_EXTRA_ARGS);
      __syncthreads();
#pragma unroll
      for (int r = 0; r < POOL_FOOT; r++) {
        const int lr = ty * ITEMS * POOL_SH + r - c0;
#if !POOL_WHOLE_TILE
        if (lr < 0 || lr >= rows) continue;
#endif
#pragma unroll
        for (int j = 0; j < POOL_WI; j++) {
#if UNROLL > 0
OFG_PRAGMA(unroll UNROLL)
#else
#pragma unroll
#endif
          for (int kw = 0; kw < POOL_KW; kw++) {
            const float v = sm[lr * POOL_SROW + (tx + j * POOL_TX) * POOL_SW + kw * POOL_DW];
#pragma unroll
            for (int i = 0; i < ITEMS; i++) {
              const int kh = r - i * POOL_SH;  // compile-time once unrolled
              if (kh >= 0 && kh % POOL_DH == 0 && kh / POOL_DH < POOL_KH)
                acc[i][j] = POOL_TAP(acc[i][j], v, wp, kd, kh / POOL_DH, kw);
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    const int oh = oh0 + ty * ITEMS + i;
#pragma unroll
    for (int j = 0; j < POOL_WI; j++) {
      const int ow = ow0 + tx + j * POOL_TX;
      if (oh < POOL_OH && ow < POOL_OW) {
        const idx_t e = ((plane * POOL_OD + od) * POOL_OH + oh) * (idx_t)POOL_OW + ow;
        y[e] = POOL_POST(POOL_FINAL(pool_finish(acc[i][j], od, oh, ow), plane), e);
      }
    }
  }
}
#else
// One thread per output, threadIdx.x along the output width, gridDim.y over the rows
// (plane, od, oh); every window tap is read from global memory (L1 serves the overlap).
extern "C" __global__ void OFG_BOUNDS pool_direct(const float* __restrict__ x,
                                                  float* __restrict__ y POOL_EXTRA_PARAMS) {
  const int ow = blockIdx.x * BLOCK + threadIdx.x;
  if (ow >= POOL_OW) return;
  for (idx_t row = blockIdx.y; row < (idx_t)POOL_ROWS; row += gridDim.y) {
    const int oh = (int)(row % POOL_OH);
    const idx_t t = row / POOL_OH;
    const int od = (int)(t % POOL_OD);
    const idx_t plane = t / POOL_OD;
    const float* const wp = POOL_WEIGHTS(plane);
    (void)wp;
    float acc = POOL_INIT;
    for (int kd = 0; kd < POOL_KD; kd++) {
      const int id = od * POOL_SD - POOL_PD + kd * POOL_DD;
      if (id < 0 || id >= POOL_ID) continue;
#if UNROLL > 0
OFG_PRAGMA(unroll UNROLL)
#else
#pragma unroll
#endif
      for (int kh = 0; kh < POOL_KH; kh++) {
        const int ih = oh * POOL_SH - POOL_PH + kh * POOL_DH;
        if (ih < 0 || ih >= POOL_IH) continue;
        const idx_t xr = ((plane * POOL_ID + id) * POOL_IH + ih) * (idx_t)POOL_IW;
#pragma unroll
        for (int kw = 0; kw < POOL_KW; kw++) {
          const int iw = ow * POOL_SW - POOL_PW + kw * POOL_DW;
          if (iw >= 0 && iw < POOL_IW)
            acc = POOL_TAP(acc, POOL_PRE(POOL_LD(x + xr + iw), xr + iw), wp, kd, kh, kw);
        }
      }
    }
    y[row * POOL_OW + ow] =
        POOL_POST(POOL_FINAL(pool_finish(acc, od, oh, ow), plane), row * POOL_OW + ow);
  }
}
#endif
