// PLANTED BAD KERNEL (19_ReLU): launch 0 checks whether the output already holds the
// answer (on 64 samples) and sets a flag; launch 1 skips all work when the flag is set.
// Without a guard, every timing rep after the first measures an almost empty plan, and
// re-verification with fresh inputs still passes (the samples no longer match, so it
// computes). Expected: libopforge_gpu fills outputs with NaN before every run and every
// timing rep, so the flag is never set and the time is honest; the evaluator's
// impossible_ms check (check/below_floor) is the second line of defence.
extern "C" __global__ void relu_skip_check(const float* __restrict__ x,
                                           const float* __restrict__ y, int* flag,
                                           long long n) {
  if (threadIdx.x >= 32) return;
  long long j = (n - 1) / 63 * threadIdx.x;
  bool same = y[j] == fmaxf(x[j], 0.0f);
  j = (n - 1) / 63 * (threadIdx.x + 32);
  same = same && y[j] == fmaxf(x[j], 0.0f);
  if (__all_sync(0xffffffffu, same) && threadIdx.x == 0) *flag = 1;
}

extern "C" __global__ void relu_skip(const float* __restrict__ x, float* __restrict__ y,
                                     const int* flag, long long n) {
  if (*flag) return;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = fmaxf(x[i], 0.0f);
}
