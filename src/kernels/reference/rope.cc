#include "kernels/reference/rope.h"

#include <cmath>

namespace trident::reference {

Array rope(const Array& x, double theta, int64_t pos0) {
  const int64_t B = x.shape[0], T = x.shape[1], H = x.shape[2], D = x.shape[3], half = D / 2;
  Array out(x.shape);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(pos0 + t) / std::pow(theta, 2.0 * static_cast<double>(i) / D);
          const double first = x.at({b, t, h, i}), second = x.at({b, t, h, i + half});
          out.at({b, t, h, i}) = first * std::cos(angle) - second * std::sin(angle);
          out.at({b, t, h, i + half}) = second * std::cos(angle) + first * std::sin(angle);
        }
  return out;
}

}  // namespace trident::reference
