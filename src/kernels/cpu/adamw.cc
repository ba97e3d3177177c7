#include "kernels/cpu/adamw.h"

#include <cmath>

#include "core/dtype.h"
#include "core/parallel.h"

namespace trident::kernels::cpu {

template <class T>
void adamw_update(T* param, const T* grad, float* m, float* v, int64_t n, const AdamWStep& s) {
  const float decay = static_cast<float>(1.0 - s.lr * s.weight_decay);
  const float b1 = static_cast<float>(s.beta1), b2 = static_cast<float>(s.beta2);
  const float one_minus_b1 = static_cast<float>(1.0 - s.beta1), one_minus_b2 = static_cast<float>(1.0 - s.beta2);
  const double bc1 = 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
  const double bc2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.step));
  const float step_size = static_cast<float>(s.lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float eps = static_cast<float>(s.eps);
  parallel_for(0, n, 16384, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const float g = static_cast<float>(grad[i]);
      const float p = static_cast<float>(param[i]) * decay;
      const float mi = m[i] * b1 + one_minus_b1 * g;
      const float vi = v[i] * b2 + one_minus_b2 * g * g;
      m[i] = mi;
      v[i] = vi;
      param[i] = static_cast<T>(p - step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps)));
    }
  });
}

#define TRI_INSTANTIATE(T) \
  template void adamw_update<T>(T*, const T*, float*, float*, int64_t, const AdamWStep&);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
