#include "kernels/cpu/pointwise.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/fast_math.h"

namespace trident::kernels::cpu {
namespace {

// Elements per parallel chunk: enough work to be worth waking a thread.
constexpr int64_t kGrain = 16384;

// out[i] = fn(x[i]), evaluated in acc_t<T>.
template <class T, class Fn>
void map_unary(T* out, const T* x, int64_t n, const Fn& fn) {
  using Acc = acc_t<T>;
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = static_cast<T>(static_cast<Acc>(fn(static_cast<Acc>(x[i]))));
  });
}

// dx[i] = fn(dy[i], saved[i]), evaluated in acc_t<T>; saved is the op's input or output.
template <class T, class Fn>
void map_backward(T* dx, const T* dy, const T* saved, int64_t n, const Fn& fn) {
  using Acc = acc_t<T>;
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dx[i] =
          static_cast<T>(static_cast<Acc>(fn(static_cast<Acc>(dy[i]), static_cast<Acc>(saved[i]))));
  });
}

// Note [Integer powers]
// std::pow is a scalar library call per element. For the exponents models use (squares,
// cubes, reciprocals: small integers) float, bf16 and f16 take a vectorized path instead:
// x^k by binary powering in double over blocks of kPowBlock elements, rounded once on
// store. Binary powering with |k| <= 16 loses at most about |k| * 2^-53 relative, far below
// a float ulp, and it handles negative x like std::pow. f64 always calls std::pow: powering
// in double would not be accurate to double's own ulp. Other exponents use std::pow in
// double, rounded once.
constexpr double kMaxFastExponent = 16;
constexpr int64_t kPowBlock = 256;

bool is_small_integer(double p) {
  return p == std::nearbyint(p) && std::fabs(p) <= kMaxFastExponent;
}

// acc[j] = x[j]^k for j < m <= kPowBlock, in double.
template <class T>
void integer_power(double* acc, const T* x, int64_t m, int64_t k) {
  double base[kPowBlock];
  for (int64_t j = 0; j < m; ++j) {
    base[j] = static_cast<double>(static_cast<acc_t<T>>(x[j]));
    acc[j] = 1.0;
  }
  for (int64_t bits = k < 0 ? -k : k; bits != 0; bits >>= 1) {
    if (bits & 1)
      for (int64_t j = 0; j < m; ++j) acc[j] *= base[j];
    if (bits > 1)
      for (int64_t j = 0; j < m; ++j) base[j] *= base[j];
  }
  if (k < 0)
    for (int64_t j = 0; j < m; ++j) acc[j] = 1.0 / acc[j];
}

// Calls store(i, m, acc) for blocks [i, i + m) of [0, n) with acc[j] = x[i + j]^k.
template <class T, class Store>
void for_each_integer_power_block(const T* x, int64_t k, int64_t n, const Store& store) {
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    double acc[kPowBlock];
    for (int64_t i = begin; i < end; i += kPowBlock) {
      const int64_t m = std::min(kPowBlock, end - i);
      integer_power(acc, x + i, m, k);
      store(i, m, acc);
    }
  });
}

}  // namespace

template <class T>
void exp_forward(T* out, const T* x, int64_t n) {
  map_unary(out, x, n, [](auto v) { return math::exp(v); });
}

template <class T>
void log_forward(T* out, const T* x, int64_t n) {
  map_unary(out, x, n, [](auto v) { return math::log(v); });
}

template <class T>
void tanh_forward(T* out, const T* x, int64_t n) {
  map_unary(out, x, n, [](auto v) { return math::tanh(v); });
}

// Note [sqrt and errno]
// This loop does not vectorize: std::sqrt must set errno for negative inputs, so g++ guards
// every square root with a branch to the library unless the build passes -fno-math-errno.
// One scalar vsqrtss per element is still close to the speed of the memory traffic.
template <class T>
void sqrt_forward(T* out, const T* x, int64_t n) {
  map_unary(out, x, n, [](auto v) { return std::sqrt(v); });
}

template <class T>
void pow_forward(T* out, const T* x, double exponent, int64_t n) {
  if (std::is_same_v<T, double> || !is_small_integer(exponent)) {
    map_unary(out, x, n, [exponent](auto v) { return std::pow(static_cast<double>(v), exponent); });
    return;
  }
  for_each_integer_power_block(x, static_cast<int64_t>(exponent), n,
                               [&](int64_t i, int64_t m, const double* acc) {
                                 for (int64_t j = 0; j < m; ++j)
                                   out[i + j] = static_cast<T>(static_cast<acc_t<T>>(acc[j]));
                               });
}

template <class T>
void gelu_tanh_forward(T* out, const T* x, int64_t n) {
  map_unary(out, x, n, [](auto v) { return math::gelu_tanh(v); });
}

template <class T>
void gelu_forward(T* out, const T* x, int64_t n) {
  map_unary(out, x, n, [](auto v) { return math::gelu(v); });
}

template <class T>
void silu_forward(T* out, const T* x, int64_t n) {
  map_unary(out, x, n, [](auto v) { return math::silu(v); });
}

template <class T>
void exp_backward(T* dx, const T* dy, const T* y, int64_t n) {
  map_backward(dx, dy, y, n, [](auto g, auto yi) { return g * yi; });  // d e^x = e^x
}

template <class T>
void log_backward(T* dx, const T* dy, const T* x, int64_t n) {
  map_backward(dx, dy, x, n, [](auto g, auto xi) { return g / xi; });  // d log x = 1/x
}

template <class T>
void tanh_backward(T* dx, const T* dy, const T* y, int64_t n) {
  using Acc = acc_t<T>;
  map_backward(dx, dy, y, n, [](Acc g, Acc yi) { return g * (Acc(1) - yi * yi); });  // 1 - tanh^2
}

template <class T>
void sqrt_backward(T* dx, const T* dy, const T* y, int64_t n) {
  map_backward(dx, dy, y, n, [](auto g, auto yi) { return g / (yi + yi); });  // 1 / (2 sqrt x)
}

template <class T>
void pow_backward(T* dx, const T* dy, const T* x, double exponent, int64_t n) {
  using Acc = acc_t<T>;
  if (exponent == 0.0) {
    // x^0 is constant: the gradient is 0 even where x^-1 is not finite.
    parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
      std::fill(dx + begin, dx + end, static_cast<T>(Acc(0)));
    });
    return;
  }
  if (std::is_same_v<T, double> || !is_small_integer(exponent - 1)) {
    map_backward(dx, dy, x, n, [exponent](Acc g, Acc v) {
      return static_cast<double>(g) * exponent * std::pow(static_cast<double>(v), exponent - 1);
    });
    return;
  }
  // dy is read after x^(p-1) is computed for the block, so dx may alias dy.
  for_each_integer_power_block(
      x, static_cast<int64_t>(exponent) - 1, n, [&](int64_t i, int64_t m, const double* acc) {
        for (int64_t j = 0; j < m; ++j)
          dx[i + j] = static_cast<T>(static_cast<Acc>(
              static_cast<double>(static_cast<Acc>(dy[i + j])) * exponent * acc[j]));
      });
}

template <class T>
void gelu_tanh_backward(T* dx, const T* dy, const T* x, int64_t n) {
  map_backward(dx, dy, x, n, [](auto g, auto xi) { return g * math::gelu_tanh_grad(xi); });
}

template <class T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n) {
  map_backward(dx, dy, x, n, [](auto g, auto xi) { return g * math::gelu_grad(xi); });
}

template <class T>
void silu_backward(T* dx, const T* dy, const T* x, int64_t n) {
  map_backward(dx, dy, x, n, [](auto g, auto xi) { return g * math::silu_grad(xi); });
}

#define TRI_INSTANTIATE(T)                                                \
  template void exp_forward<T>(T*, const T*, int64_t);                    \
  template void log_forward<T>(T*, const T*, int64_t);                    \
  template void tanh_forward<T>(T*, const T*, int64_t);                   \
  template void sqrt_forward<T>(T*, const T*, int64_t);                   \
  template void pow_forward<T>(T*, const T*, double, int64_t);            \
  template void gelu_tanh_forward<T>(T*, const T*, int64_t);              \
  template void gelu_forward<T>(T*, const T*, int64_t);                   \
  template void silu_forward<T>(T*, const T*, int64_t);                   \
  template void exp_backward<T>(T*, const T*, const T*, int64_t);         \
  template void log_backward<T>(T*, const T*, const T*, int64_t);         \
  template void tanh_backward<T>(T*, const T*, const T*, int64_t);        \
  template void sqrt_backward<T>(T*, const T*, const T*, int64_t);        \
  template void pow_backward<T>(T*, const T*, const T*, double, int64_t); \
  template void gelu_tanh_backward<T>(T*, const T*, const T*, int64_t);   \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);        \
  template void silu_backward<T>(T*, const T*, const T*, int64_t);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
