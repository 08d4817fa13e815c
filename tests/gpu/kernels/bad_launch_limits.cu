// PLANTED BAD PLAN (19_ReLU): the kernel is fine; its plan asks for 2048 threads per
// block. Expected: rejected before any launch: stage launch, class plan/block_too_large,
// message "launch 0: block has 2048 threads; the device allows 1024".
extern "C" __global__ void relu_plain(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = fmaxf(x[i], 0.0f);
}
