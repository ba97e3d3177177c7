// Vocabulary-parallel cross-entropy's local passes (vocab_parallel_cross_entropy.cuh): one
// block per row (rows grid-strided), each thread walking the row with a block-wide stride;
// the block combines the threads' max or double sums (block_max, block_sum). As on the host,
// exponentials are in float and summed in double, and the backward is e^(l - lse) * scale, so the
// two agree to the exponentials' last bits and the sum's order.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/vocab_parallel_cross_entropy.cuh"

namespace trident::cuda {
namespace {

int row_threads(int64_t V) { return V <= 1024 ? 128 : (V <= 16384 ? 256 : 512); }

__global__ void row_max_kernel(float* row_max, const float* logits, int64_t N, int64_t V) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float* row = logits + r * V;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m, scratch);
    if (threadIdx.x == 0) row_max[r] = m;
  }
}

__global__ void sums_kernel(double* sums, const float* logits, const float* row_max, const int64_t* targets,
                            int64_t N, int64_t V, int64_t begin) {
  __shared__ double scratch[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float* row = logits + r * V;
    const float m = row_max[r];
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) s += static_cast<double>(expf(row[j] - m));
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) {
      sums[r] = s;
      const int64_t t = targets[r] - begin;
      sums[N + r] = t >= 0 && t < V ? static_cast<double>(row[t] - m) : 0.0;
    }
  }
}

__global__ void backward_kernel(float* grad, const float* logits, const float* row_max, const double* sums,
                                const int64_t* targets, int64_t N, int64_t V, int64_t begin, int64_t ignore_index,
                                double scale) {
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    float* g = grad + r * V;
    if (targets[r] == ignore_index) {
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x) g[j] = 0.0f;
      continue;
    }
    const float* row = logits + r * V;
    const float lse = row_max[r] + static_cast<float>(log(sums[r]));
    const float sc = static_cast<float>(scale);
    const int64_t t = targets[r] - begin;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float p = expf(row[j] - lse);
      g[j] = (j == t ? p - 1.0f : p) * sc;
    }
  }
}

}  // namespace

void launch_vocab_parallel_row_max(float* row_max, const float* logits, int64_t N, int64_t V) {
  if (N == 0) return;
  row_max_kernel<<<grid_for(N, 1), row_threads(V)>>>(row_max, logits, N, V);
}

void launch_vocab_parallel_sums(double* sums, const float* logits, const float* row_max, const int64_t* targets,
                                int64_t N, int64_t V, int64_t begin) {
  if (N == 0) return;
  sums_kernel<<<grid_for(N, 1), row_threads(V)>>>(sums, logits, row_max, targets, N, V, begin);
}

void launch_vocab_parallel_backward(float* grad, const float* logits, const float* row_max, const double* sums,
                                    const int64_t* targets, int64_t N, int64_t V, int64_t begin,
                                    int64_t ignore_index, double scale) {
  if (N == 0 || V == 0) return;
  backward_kernel<<<grid_for(N, 1), row_threads(V)>>>(grad, logits, row_max, sums, targets, N, V, begin,
                                                      ignore_index, scale);
}

}  // namespace trident::cuda
