#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/vocab_parallel_embedding.cuh"

namespace trident::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void local_ids_kernel(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                                 int64_t rows) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t id = ids[i] - begin;
    const bool mine = id >= 0 && id < rows;
    local[i] = mine ? id : 0;
    mask[i] = mine ? 1.0f : 0.0f;
  }
}

}  // namespace

void launch_vocab_parallel_local_ids(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                                     int64_t rows) {
  if (n == 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  local_ids_kernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), kThreads>>>(local, mask, ids, n, begin, rows);
}

}  // namespace trident::cuda
