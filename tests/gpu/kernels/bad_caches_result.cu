// PLANTED BAD KERNEL (19_ReLU): remembers the (x, y) pointers of its first call in a
// module global and, when called again with the same pointers, returns at once, leaving
// y as the first call left it. Timing would then measure an empty kernel.
// Expected: libopforge_gpu resets module globals before every run (the scratch buffers
// are zeroed too), so the cache never hits and the kernel computes every time; if the
// driver could not resolve the global, the evaluator's re-verification after timing
// (new input values, same pointers) catches it: check/repeat_inconsistent.
__device__ const float* g_seen_x;
__device__ float* g_seen_y;

extern "C" __global__ void relu_cached(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
  if (g_seen_x == x && g_seen_y == y) return;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = fmaxf(x[i], 0.0f);
}

// Second launch of the plan: records the pointers once every block of the first is done.
extern "C" __global__ void relu_cached_mark(const float* x, float* y) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    g_seen_x = x;
    g_seen_y = y;
  }
}
