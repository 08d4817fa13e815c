// PLANTED BAD KERNEL (19_ReLU): writes far past the end of y. Expected: stage launch,
// class cuda/CUDA_ERROR_ILLEGAL_ADDRESS, sticky (the evaluator exits and is restarted).
extern "C" __global__ void relu_oob(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i + n * 1024] = fmaxf(x[i], 0.0f);
}
