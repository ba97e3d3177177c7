// AdamW update for one parameter tensor, in place, with the arithmetic of
// torch.optim.AdamW (PyTorch 1.13, single-tensor path):
//   p *= 1 - lr * weight_decay                  (decoupled weight decay)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g^2
//   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),   bc_i = 1 - beta_i^step
// p, g (n) of type T; m, v (n) float optimizer state. Accumulation semantics: in place.
//
// f32 parameters (ZeRO-Offload's host masters) take an AVX-512 path on CPUs that have it,
// chosen at run time (a -march=native build for an AVX2 host still uses it on an AVX-512
// one, and GCC's tuning keeps auto-vectorized loops at 256 bits there): 16 lanes with the
// scalar path's operations in the same order, so it agrees with it to an ulp per step.
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1 on the first update (bias correction)
};

template <class T>
void adamw_update(T* param, const T* grad, float* m, float* v, int64_t n, const AdamWStep& s);

// Whether this CPU runs the AVX-512 path: it has AVX-512F and kernels.cpu_avx512 is on
// (core/kernel_switches.h; TRIDENT_CPU_AVX512=0 turns it off).
bool adamw_uses_avx512();
// The f32 update on one path, for tests that compare them: AVX-512 (only where
// adamw_uses_avx512()) or portable scalar code.
void adamw_update_f32(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWStep& s,
                      bool avx512);

}  // namespace trident::kernels::cpu
