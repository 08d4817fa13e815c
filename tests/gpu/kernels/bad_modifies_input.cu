// PLANTED BAD KERNEL (19_ReLU): correct output, but clobbers the input afterwards.
// Expected: stage check, class check/inputs_modified.
extern "C" __global__ void relu_clobber(float* __restrict__ x, float* __restrict__ y,
                                        long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = x[i];
    y[i] = fmaxf(v, 0.0f);
    x[i] = -v;
  }
}
