// opforge input staging of a captured program (handlers/export_stage.cu, embedded in
// every export whose forward replays one CUDA graph; docs/architecture.md, "KernelBench export").
// A graph replays on the buffers it was captured with, so each call copies its fresh
// inputs into them first. ofg_stage does those copies in one launch: block row y copies
// tensor y, 16 bytes a thread where both addresses allow it, else byte by byte.
#include <torch/types.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

// Tensors one launch copies; more go in further launches.
constexpr int kOfgStageMax = 16;
constexpr int kOfgStageThreads = 256;
// Enough blocks per tensor to fill a GPU many times over; the loop strides past them.
constexpr long long kOfgStageMaxBlocks = 2048;

// The copies of one launch, passed by value (kernel parameter space).
struct OfgStageTable {
  const unsigned char* src[kOfgStageMax];
  unsigned char* dst[kOfgStageMax];
  long long bytes[kOfgStageMax];
};

__global__ void __launch_bounds__(kOfgStageThreads) ofg_stage_kernel(OfgStageTable table) {
  const unsigned char* src = table.src[blockIdx.y];
  unsigned char* dst = table.dst[blockIdx.y];
  const long long bytes = table.bytes[blockIdx.y];
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const bool aligned =
      ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15) == 0;
  const long long vectors = aligned ? bytes / 16 : 0;
  for (long long i = first; i < vectors; i += stride)
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  for (long long i = vectors * 16 + first; i < bytes; i += stride)
    dst[i] = src[i];
}

// Copies srcs[i] into dsts[i] for every i on stream: dense tensors of equal dtype and
// size on one CUDA device (the caller copies any other pair itself). The tensors stay the
// caller's; throws naming the pair that does not fit, or the launch that failed.
void ofg_stage(std::vector<torch::Tensor> dsts, std::vector<torch::Tensor> srcs,
               int64_t stream) {
  TORCH_CHECK(dsts.size() == srcs.size(), "ofg_stage: ", dsts.size(), " destinations for ",
              srcs.size(), " sources");
  for (size_t start = 0; start < dsts.size(); start += kOfgStageMax) {
    OfgStageTable table{};
    long long most = 0;
    unsigned rows = 0;
    for (size_t i = start; i < dsts.size() && rows < (unsigned)kOfgStageMax; i++, rows++) {
      const torch::Tensor& d = dsts[i];
      const torch::Tensor& s = srcs[i];
      TORCH_CHECK(d.is_cuda() && s.is_cuda() && d.device() == s.device(), "ofg_stage: pair ",
                  i, " is not on one CUDA device");
      TORCH_CHECK(d.scalar_type() == s.scalar_type() && d.numel() == s.numel() &&
                      d.is_contiguous() && s.is_contiguous(),
                  "ofg_stage: pair ", i, " is not two dense tensors of one dtype and size");
      table.src[rows] = static_cast<const unsigned char*>(s.data_ptr());
      table.dst[rows] = static_cast<unsigned char*>(d.data_ptr());
      table.bytes[rows] = (long long)s.nbytes();
      most = table.bytes[rows] > most ? table.bytes[rows] : most;
    }
    if (most == 0)
      continue;
    long long blocks = (most / 16 + kOfgStageThreads - 1) / kOfgStageThreads;
    blocks = blocks < 1 ? 1 : (blocks > kOfgStageMaxBlocks ? kOfgStageMaxBlocks : blocks);
    ofg_stage_kernel<<<dim3((unsigned)blocks, rows, 1), kOfgStageThreads, 0,
                       reinterpret_cast<cudaStream_t>(stream)>>>(table);
    cudaError_t error = cudaGetLastError();
    TORCH_CHECK(error == cudaSuccess, "ofg_stage: the launch for pairs ", start, " to ",
                start + rows - 1, " failed: ", cudaGetErrorString(error));
  }
}
