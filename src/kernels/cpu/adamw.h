// AdamW update for one parameter tensor, in place, with the arithmetic of
// torch.optim.AdamW (PyTorch 1.13, single-tensor path):
//   p *= 1 - lr * weight_decay                  (decoupled weight decay)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g^2
//   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),   bc_i = 1 - beta_i^step
// p, g (n) of type T; m, v (n) float optimizer state. Accumulation semantics: in place.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1 on the first update (bias correction)
};

template <class T>
void adamw_update(T* param, const T* grad, float* m, float* v, int64_t n, const AdamWStep& s);

}  // namespace trident::kernels::cpu
