// Correct fp32 GEMM for level1/1_Square_matrix_multiplication_ (C = A * B, N = 4096):
// 128x128 block tiles, BK = 8, 256 threads each computing an 8x8 sub-tile with FFMA.
// Requires N % 128 == 0 (true for the task). Plain fp32 arithmetic: no TF32.
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8

extern "C" __global__ void __launch_bounds__(256)
sgemm_128x128(const float* __restrict__ A, const float* __restrict__ B,
              float* __restrict__ C, int N) {
  __shared__ __align__(16) float As[BK][BM];  // A tile, transposed: As[k][m]
  __shared__ __align__(16) float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const float* Ab = A + (size_t)blockIdx.y * BM * N;
  const float* Bb = B + (size_t)blockIdx.x * BN;
  const int a_row = tid >> 1, a_col = (tid & 1) * 4;
  const int b_row = tid >> 5, b_col = (tid & 31) * 4;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < N; k0 += BK) {
    float4 a4 = *reinterpret_cast<const float4*>(Ab + (size_t)a_row * N + k0 + a_col);
    As[a_col + 0][a_row] = a4.x;
    As[a_col + 1][a_row] = a4.y;
    As[a_col + 2][a_row] = a4.z;
    As[a_col + 3][a_row] = a4.w;
    *reinterpret_cast<float4*>(&Bs[b_row][b_col]) =
        *reinterpret_cast<const float4*>(Bb + (size_t)(k0 + b_row) * N + b_col);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; k++) {
      float a[TM], b[TN];
      float4 t;
      t = *reinterpret_cast<const float4*>(&As[k][ty * TM]);
      a[0] = t.x; a[1] = t.y; a[2] = t.z; a[3] = t.w;
      t = *reinterpret_cast<const float4*>(&As[k][ty * TM + 4]);
      a[4] = t.x; a[5] = t.y; a[6] = t.z; a[7] = t.w;
      t = *reinterpret_cast<const float4*>(&Bs[k][tx * TN]);
      b[0] = t.x; b[1] = t.y; b[2] = t.z; b[3] = t.w;
      t = *reinterpret_cast<const float4*>(&Bs[k][tx * TN + 4]);
      b[4] = t.x; b[5] = t.y; b[6] = t.z; b[7] = t.w;
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  float* Cb = C + (size_t)(blockIdx.y * BM + ty * TM) * N + blockIdx.x * BN + tx * TN;
#pragma unroll
  for (int i = 0; i < TM; i++) {
    *reinterpret_cast<float4*>(Cb + (size_t)i * N) =
        make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(Cb + (size_t)i * N + 4) =
        make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}
