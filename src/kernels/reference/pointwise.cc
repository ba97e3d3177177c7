#include "kernels/reference/pointwise.h"

#include <cmath>
#include <numbers>

#include "core/check.h"

namespace trident::reference {
namespace {

template <class Fn>
Array map(const Array& x, Fn fn) {
  Array out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = fn(x[i]);
  return out;
}

}  // namespace

Array exp(const Array& x) {
  return map(x, [](double v) { return std::exp(v); });
}
Array log(const Array& x) {
  return map(x, [](double v) { return std::log(v); });
}
Array tanh(const Array& x) {
  return map(x, [](double v) { return std::tanh(v); });
}
Array sqrt(const Array& x) {
  return map(x, [](double v) { return std::sqrt(v); });
}
Array pow(const Array& x, double exponent) {
  return map(x, [exponent](double v) { return std::pow(v, exponent); });
}

Array gelu_tanh(const Array& x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return map(x,
             [k](double v) { return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))); });
}

Array gelu(const Array& x) {
  return map(x, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::numbers::sqrt2)); });
}

Array silu(const Array& x) {
  return map(x, [](double v) { return v / (1.0 + std::exp(-v)); });
}

Array swiglu(const Array& gate, const Array& up) {
  TRI_CHECK(gate.shape == up.shape, "reference::swiglu: gate ", gate.shape, " and up ", up.shape, " differ");
  Array out(gate.shape);
  for (int64_t i = 0; i < gate.numel(); ++i) out[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  return out;
}

}  // namespace trident::reference
