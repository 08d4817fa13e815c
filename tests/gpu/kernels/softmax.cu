// Correct row softmax for level1/23_Softmax (x: 4096 x 393216 fp32, dim=1): one block per
// row; pass 1 keeps an online (max, sum) pair per thread and merges them across the
// block; pass 2 writes exp(x - max) / sum. Requires dim % 4 == 0 and 16-byte rows.
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
  float nm = fmaxf(m, om);
  float a = m == NEG_INF ? 0.0f : s * expf(m - nm);
  float b = om == NEG_INF ? 0.0f : os * expf(om - nm);
  m = nm;
  s = a + b;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
  for (int off = 16; off > 0; off >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, off);
    float os = __shfl_xor_sync(0xffffffffu, s, off);
    merge(m, s, om, os);
  }
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long rows,
             long long dim) {
  __shared__ float sm[32], ss[32];
  long long row = blockIdx.x;
  if (row >= rows) return;
  const float4* xr = reinterpret_cast<const float4*>(x + row * dim);
  float4* yr = reinterpret_cast<float4*>(y + row * dim);
  long long n4 = dim / 4;
  float m = NEG_INF, s = 0.0f;
  for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
    float4 v = xr[i];
    float vm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
    if (vm > m) {
      s = m == NEG_INF ? 0.0f : s * expf(m - vm);
      m = vm;
    }
    s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
  }
  warp_merge(m, s);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    int nw = blockDim.x / 32;
    m = lane < nw ? sm[lane] : NEG_INF;
    s = lane < nw ? ss[lane] : 0.0f;
    warp_merge(m, s);
    if (lane == 0) {
      sm[0] = m;
      ss[0] = s;
    }
  }
  __syncthreads();
  m = sm[0];
  float inv = 1.0f / ss[0];
  for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
    float4 v = xr[i];
    v.x = expf(v.x - m) * inv;
    v.y = expf(v.y - m) * inv;
    v.z = expf(v.z - m) * inv;
    v.w = expf(v.w - m) * inv;
    yr[i] = v;
  }
}
