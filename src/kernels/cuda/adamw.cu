// AdamW update on the GPU (adamw.cuh), with the arithmetic of kernels/cpu/adamw.cc: the same
// float scalars, computed on the host in the same way (bias corrections in double, then
// rounded to float), and the same per-element float expressions in the same order.
// Elementwise: one thread per element, grid-strided. nvcc may fuse a multiply and an add into
// an FMA, as the CPU build (g++ -O3 -march=native) also does, so fp32 results agree with the
// CPU to about an ulp of each step rather than bit for bit.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace trident::cuda {
namespace {

constexpr int kThreads = 256;

struct AdamWScalars {
  float decay, b1, b2, one_minus_b1, one_minus_b2, step_size, bc2_sqrt, eps;
};

template <class T>
__global__ void adamw_kernel(T* param, const T* grad, float* m, float* v, int64_t n, const AdamWScalars s) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    // float whatever T is (f64 too), as on the CPU.
    const float g = static_cast<float>(to_acc(grad[i]));
    const float p = static_cast<float>(to_acc(param[i])) * s.decay;
    const float mi = m[i] * s.b1 + s.one_minus_b1 * g;
    const float vi = v[i] * s.b2 + s.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float updated = p - s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
    param[i] = from_acc<T>(static_cast<acc_t<T>>(updated));
  }
}

}  // namespace

void launch_adamw(int dtype, void* param, const void* grad, float* m, float* v, int64_t n, const AdamWHyper& h) {
  if (n == 0) return;
  AdamWScalars s;
  s.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  s.b1 = static_cast<float>(h.beta1);
  s.b2 = static_cast<float>(h.beta2);
  s.one_minus_b1 = static_cast<float>(1.0 - h.beta1);
  s.one_minus_b2 = static_cast<float>(1.0 - h.beta2);
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  s.step_size = static_cast<float>(h.lr / bc1);
  s.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  s.eps = static_cast<float>(h.eps);
  dispatch_floating(dtype, "adamw", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adamw_kernel<T><<<grid_for(n, kThreads), kThreads>>>(static_cast<T*>(param), static_cast<const T*>(grad), m, v,
                                                         n, s);
  });
}

}  // namespace trident::cuda
