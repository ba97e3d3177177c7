#include "kernels/reference/elementwise.h"

namespace trident::reference {

Array add(const Array& a, const Array& b) {
  return broadcast_binary(a, b, [](double x, double y) { return x + y; });
}
Array sub(const Array& a, const Array& b) {
  return broadcast_binary(a, b, [](double x, double y) { return x - y; });
}
Array mul(const Array& a, const Array& b) {
  return broadcast_binary(a, b, [](double x, double y) { return x * y; });
}
Array div(const Array& a, const Array& b) {
  return broadcast_binary(a, b, [](double x, double y) { return x / y; });
}

Array affine(const Array& a, double scale, double shift) {
  Array out(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out[i] = a[i] * scale + shift;
  return out;
}

}  // namespace trident::reference
