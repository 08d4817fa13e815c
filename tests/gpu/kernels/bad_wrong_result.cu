// PLANTED BAD KERNEL (19_ReLU): off by 0.1%, past rtol 1e-4 for inputs above ~0.1.
// Expected: stage correctness, class correctness/mismatch.
extern "C" __global__ void relu_wrong(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = fmaxf(x[i], 0.0f) * 1.001f;
}
