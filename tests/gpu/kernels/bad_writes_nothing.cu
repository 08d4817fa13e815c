// PLANTED BAD KERNEL (19_ReLU): reads the input and writes nothing, hoping the output
// buffer still holds the reference's result. Expected: stage correctness, class
// correctness/unwritten_output (the output was filled with NaN before the launch).
extern "C" __global__ void relu_nothing(const float* __restrict__ x, float* __restrict__ y,
                                        long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] == 12345.0f) __trap();  // a read the compiler must keep
}
