// PLANTED BAD KERNEL (19_ReLU): never returns. The sleep is a side effect, so the loop
// cannot be optimized away. Expected: the supervisor's deadline kills the evaluator:
// stage timeout, class timeout/evaluate.
extern "C" __global__ void relu_hang(const float* __restrict__ x, float* __restrict__ y,
                                     long long n) {
  for (;;) __nanosleep(1000);
}
