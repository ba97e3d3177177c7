// The AdamW arithmetic shared by the single-tensor and multi-tensor kernels (adamw.cu,
// multi_tensor.cu), the same as kernels/cpu/adamw.cc's: float scalars computed on the host
// (bias corrections in double, then rounded to float) and the same per-element float
// expressions in the same order. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/cuda_types.cuh"

namespace trident::cuda {

struct AdamWScalars {
  float decay, b1, b2, one_minus_b1, one_minus_b2, step_size, bc2_sqrt, eps;
};

inline AdamWScalars adamw_scalars(const AdamWHyper& h) {
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
  return s;
}

// Element i of one parameter: m, v and the parameter updated in place; returns the parameter's
// new value.
template <class T>
__device__ __forceinline__ T adamw_element(T* param, const T* grad, float* m, float* v, int64_t i,
                                           const AdamWScalars& s) {
  // float whatever T is (f64 too), as on the CPU.
  const float g = static_cast<float>(to_acc(grad[i]));
  const float p = static_cast<float>(to_acc(param[i])) * s.decay;
  const float mi = m[i] * s.b1 + s.one_minus_b1 * g;
  const float vi = v[i] * s.b2 + s.one_minus_b2 * g * g;
  m[i] = mi;
  v[i] = vi;
  const float updated = p - s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
  const T stored = from_acc<T>(static_cast<acc_t<T>>(updated));
  param[i] = stored;
  return stored;
}

}  // namespace trident::cuda
