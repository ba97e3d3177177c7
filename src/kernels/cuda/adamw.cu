// AdamW update on the GPU (adamw.cuh), with the arithmetic of kernels/cpu/adamw.cc
// (adamw_math.cuh). Elementwise: one thread per element, grid-strided. nvcc may fuse a multiply
// and an add into an FMA, as the CPU build (g++ -O3 -march=native) also does, so fp32 results
// agree with the CPU to about an ulp of each step rather than bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/adamw_math.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace trident::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void adamw_kernel(T* param, const T* grad, float* m, float* v, int64_t n, const AdamWScalars s) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) adamw_element(param, grad, m, v, i, s);
}

}  // namespace

void launch_adamw(int dtype, void* param, const void* grad, float* m, float* v, int64_t n, const AdamWHyper& h) {
  if (n == 0) return;
  const AdamWScalars s = adamw_scalars(h);
  dispatch_floating(dtype, "adamw", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adamw_kernel<T><<<grid_for(n, kThreads), kThreads>>>(static_cast<T*>(param), static_cast<const T*>(grad), m, v,
                                                         n, s);
  });
}

}  // namespace trident::cuda
