// NF4 dequantization (see nf4.cuh): one thread per weight in a grid-stride loop; the 16 values
// in constant memory (every thread of a warp reads few of them), each thread reads its code's
// nibble and its block's scale. Memory-bound: half a byte in, 2-4 bytes out per weight.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/nf4.cuh"

namespace trident::cuda {
namespace {

constexpr int kThreads = 256;
__constant__ float kValues[16] = {TRI_NF4_VALUES};

template <class T>
__global__ void nf4_dequantize_kernel(T* out, trident::Nf4Data w, int64_t begin, int64_t n) {
  for (int64_t k = global_thread(); k < n; k += grid_threads()) {
    const int64_t i = begin + k;
    out[k] = from_acc<T>(static_cast<acc_t<T>>(kValues[w.code(i)] * w.block_scale(i / trident::kNf4Block)));
  }
}

}  // namespace

void launch_nf4_dequantize(int dtype, void* out, const trident::Nf4Data& w, int64_t begin, int64_t end) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  dispatch_floating(dtype, "nf4_dequantize", [&](auto tag) {
    using E = typename decltype(tag)::type;
    nf4_dequantize_kernel<E><<<grid_for(n, kThreads), kThreads>>>(static_cast<E*>(out), w, begin, n);
  });
}

}  // namespace trident::cuda
