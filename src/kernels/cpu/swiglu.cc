// SwiGLU kernels (see swiglu.h): math::silu and math::silu_grad of pointwise.h, so that the
// loops vectorize (fast_math.h) and f32 rounds exactly as silu followed by mul.
#include "kernels/cpu/swiglu.h"

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/pointwise.h"

namespace trident::kernels::cpu {
namespace {

// Elements per parallel chunk: enough work to be worth waking a thread.
constexpr int64_t kGrain = 16384;

}  // namespace

template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n) {
  using Acc = acc_t<T>;
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // silu(g) held as silu's kernel stores it in f32/f64, then mul's product.
      const Acc s = math::silu(static_cast<Acc>(g[i]));
      h[i] = static_cast<T>(s * static_cast<Acc>(u[i]));
    }
  });
}

template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n) {
  using Acc = acc_t<T>;
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Acc d = static_cast<Acc>(dh[i]), x = static_cast<Acc>(g[i]);
      // mul's backward: ds = dh * u, du = dh * s; then silu's: dg = ds * silu'(g).
      const Acc ds = d * static_cast<Acc>(u[i]);
      du[i] = static_cast<T>(d * math::silu(x));
      dg[i] = static_cast<T>(ds * math::silu_grad(x));
    }
  });
}

#define TRI_INSTANTIATE(T)                                                  \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t);        \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
