// GEMM family: the launches after the GEMM. gemm_colstats computes training-mode batch
// norm statistics per output column; gemm_tail runs the generated row program
// (ofg_tail_body: reductions, softmax, group/layer/instance norm, pooling and pointwise
// maps over the output features) with one block per row and the row in shared memory;
// gemm_expand writes a broadcast output from the generated ofg_expand. The generator
// places ofg_expand before this text and ofg_tail_body after it, and defines OFG_TAIL_COLS_IN, OFG_TAIL_ROWS, OFG_TAIL_PARAMS/ARGS, OFG_CS_ROWS, OFG_CS_COLS,
// OFG_CS_EPS, OFG_EXP_NUMEL, OFG_EXP_COLS, OFG_EXP_PARAMS/ARGS as needed.

#ifndef TAIL_THREADS
#define TAIL_THREADS 256
#endif

// Block-wide reductions that every thread receives; NaN-propagating max/min as PyTorch.
// red holds 32 floats; the leading barrier makes back-to-back calls safe.
__device__ __forceinline__ float ofg_tail_bsum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float ofg_tail_bmax(float v, float* red, int is_min) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_min ? ofg_minf(v, w) : ofg_maxf(v, w);
  }
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : red[0];
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_min ? ofg_minf(v, w) : ofg_maxf(v, w);
  }
  return v;
}

__device__ __forceinline__ float ofg_tail_sum(const float* row, int n, float* red) {
  float s = 0.0f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) s += row[c];
  return ofg_tail_bsum(s, red);
}

__device__ __forceinline__ float ofg_tail_max(const float* row, int n, float* red) {
  float m = row[0];
  for (int c = threadIdx.x; c < n; c += blockDim.x) m = ofg_maxf(m, row[c]);
  return ofg_tail_bmax(m, red, 0);
}

__device__ __forceinline__ float ofg_tail_min(const float* row, int n, float* red) {
  float m = row[0];
  for (int c = threadIdx.x; c < n; c += blockDim.x) m = ofg_minf(m, row[c]);
  return ofg_tail_bmax(m, red, 1);
}

// torch.logsumexp: max m (taken as 0 when infinite), log(sum exp(x - m)) + m.
__device__ __forceinline__ float ofg_tail_lse(const float* row, int n, float* red) {
  float m = ofg_tail_max(row, n, red);
  if (isinf(m)) m = 0.0f;
  float s = 0.0f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) s += expf(row[c] - m);
  s = ofg_tail_bsum(s, red);
  return logf(s) + m;
}

// softmax (log = 0) or log_softmax (log = 1) of the row in place.
__device__ __forceinline__ void ofg_tail_softmax(float* row, int n, float* red, int log) {
  const float m = ofg_tail_max(row, n, red);
  float s = 0.0f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) s += expf(row[c] - m);
  s = ofg_tail_bsum(s, red);
  if (log) {
    const float ls = logf(s);
    for (int c = threadIdx.x; c < n; c += blockDim.x) row[c] = row[c] - m - ls;
  } else {
    for (int c = threadIdx.x; c < n; c += blockDim.x) row[c] = expf(row[c] - m) / s;
  }
  __syncthreads();
}

// Group normalization of the row in place: groups of n / groups consecutive features,
// mean and biased variance (two passes over shared memory), optional affine w, b per
// feature. One group per warp when there are several, the whole block otherwise.
__device__ __forceinline__ void ofg_tail_groupnorm(float* row, int n, int groups, float eps,
                                                   const float* w, const float* b, float* red) {
  const int gs = n / groups;
  if (groups == 1) {
    const float mean = ofg_tail_sum(row, n, red) / (float)n;
    float q = 0.0f;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
      const float d = row[c] - mean;
      q += d * d;
    }
    const float rstd = 1.0f / sqrtf(ofg_tail_bsum(q, red) / (float)n + eps);
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
      float y = (row[c] - mean) * rstd;
      if (w) y *= w[c];
      if (b) y += b[c];
      row[c] = y;
    }
  } else {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int g = warp; g < groups; g += nw) {
      float* x = row + g * gs;
      float s = 0.0f;
      for (int c = lane; c < gs; c += 32) s += x[c];
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      const float mean = s / (float)gs;
      float q = 0.0f;
      for (int c = lane; c < gs; c += 32) {
        const float d = x[c] - mean;
        q += d * d;
      }
      for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
      const float rstd = 1.0f / sqrtf(q / (float)gs + eps);
      for (int c = lane; c < gs; c += 32) {
        float y = (x[c] - mean) * rstd;
        if (w) y *= w[g * gs + c];
        if (b) y += b[g * gs + c];
        x[c] = y;
      }
    }
  }
  __syncthreads();
}

// 1-D average (is_max = 0) or max pooling of the row, window k, stride st, no padding;
// the result replaces the row. Returns the new length.
__device__ __forceinline__ int ofg_tail_pool(float* row, float* tmp, int n, int k, int st,
                                             int is_max) {
  const int out = (n - k) / st + 1;
  for (int j = threadIdx.x; j < out; j += blockDim.x) {
    const float* x = row + j * st;
    float a = x[0];
    for (int t = 1; t < k; ++t) a = is_max ? ofg_maxf(a, x[t]) : a + x[t];
    tmp[j] = is_max ? a : a / (float)k;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < out; j += blockDim.x) row[j] = tmp[j];
  __syncthreads();
  return out;
}

__device__ __forceinline__ void ofg_tail_store(float* dst, const float* row, int n) {
  if ((n & 3) == 0) {
    for (int c = threadIdx.x * 4; c < n; c += blockDim.x * 4)
      *(float4*)(dst + c) = *(const float4*)(row + c);
  } else {
    for (int c = threadIdx.x; c < n; c += blockDim.x) dst[c] = row[c];
  }
}

#if defined(OFG_TAIL_COLS_IN)
// The generated row program, defined after this text (it calls the helpers above).
__device__ __forceinline__ void ofg_tail_body(float* row, float* tmp, float* red, i64 r,
                                              float* dst OFG_TAIL_PARAMS);

// One block per row: loads row r of src into shared memory and runs the row program. src
// and dst may be the same tensor (each block reads its whole row before writing it).
extern "C" __global__ void __launch_bounds__(TAIL_THREADS) gemm_tail(const float* src, float* dst
                                                                        OFG_TAIL_PARAMS) {
  OFG_DYN_SMEM(ofg_tail_smem4);
  float* row = (float*)ofg_tail_smem4;
  float* tmp = row + (OFG_TAIL_COLS_IN + 3) / 4 * 4;
  float* red = tmp + (OFG_TAIL_TMP + 3) / 4 * 4;
  const i64 r = blockIdx.x;
  const float* s = src + r * (i64)OFG_TAIL_COLS_IN;
  if (OFG_TAIL_COLS_IN % 4 == 0) {
    for (int c = threadIdx.x * 4; c < OFG_TAIL_COLS_IN; c += TAIL_THREADS * 4)
      *(float4*)(row + c) = *(const float4*)(s + c);
  } else {
    for (int c = threadIdx.x; c < OFG_TAIL_COLS_IN; c += TAIL_THREADS) row[c] = s[c];
  }
  __syncthreads();
  ofg_tail_body(row, tmp, red, r, dst OFG_TAIL_ARGS);
}
#endif

#if defined(OFG_CS_ROWS)
// Batch-norm statistics of each column of src [OFG_CS_ROWS, OFG_CS_COLS]: mean and
// 1 / sqrt(biased variance + eps), two passes. Block (32, CS_Y): 32 columns, CS_Y row
// lanes.
#define CS_Y 16
extern "C" __global__ void __launch_bounds__(32 * CS_Y) gemm_colstats(const float* __restrict__ src,
                                                                     float* __restrict__ mean,
                                                                     float* __restrict__ rstd) {
  __shared__ float part[CS_Y][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const bool ok = c < OFG_CS_COLS;
  float s = 0.0f;
  if (ok)
    for (int r = threadIdx.y; r < OFG_CS_ROWS; r += CS_Y) s += src[(i64)r * OFG_CS_COLS + c];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  float tot = 0.0f;
  for (int y = 0; y < CS_Y; ++y) tot += part[y][threadIdx.x];
  const float mu = tot / (float)OFG_CS_ROWS;
  __syncthreads();
  float q = 0.0f;
  if (ok)
    for (int r = threadIdx.y; r < OFG_CS_ROWS; r += CS_Y) {
      const float d = src[(i64)r * OFG_CS_COLS + c] - mu;
      q += d * d;
    }
  part[threadIdx.y][threadIdx.x] = q;
  __syncthreads();
  if (threadIdx.y == 0 && ok) {
    float qt = 0.0f;
    for (int y = 0; y < CS_Y; ++y) qt += part[y][threadIdx.x];
    mean[c] = mu;
    rstd[c] = 1.0f / sqrtf(qt / (float)OFG_CS_ROWS + OFG_CS_EPS);
  }
}
#endif

#if defined(OFG_EXP_NUMEL)
// The broadcast output: element i of [OFG_EXP_NUMEL / OFG_EXP_COLS, OFG_EXP_COLS].
extern "C" __global__ void __launch_bounds__(256) gemm_expand(float* __restrict__ dst
                                                                 OFG_EXP_PARAMS) {
  const i64 i = (i64)blockIdx.x * 256 + threadIdx.x;
  if (i >= (i64)OFG_EXP_NUMEL) return;
  const i64 row = i / OFG_EXP_COLS, col = i % OFG_EXP_COLS;
  dst[i] = OFG_EXP_CALL;
}
#endif
