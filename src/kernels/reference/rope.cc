#include "kernels/reference/rope.h"

#include <cmath>
#include <vector>

namespace trident::reference {

Array rope(const Array& x, double theta, int64_t pos0, double factor, double low_freq_factor,
           double high_freq_factor, double original_max_position, const std::vector<int64_t>& positions) {
  const int64_t B = x.shape[0], T = x.shape[1], H = x.shape[2], D = x.shape[3], half = D / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    double inv = 1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / D);
    if (factor > 0.0) {  // llama3: where(w > low_w, inv / f, inv), then the medium band smoothed
      const double w = 2.0 * M_PI / inv, low_w = original_max_position / low_freq_factor,
                   high_w = original_max_position / high_freq_factor;
      const double scaled = w > low_w ? inv / factor : inv;
      const double smooth = (original_max_position / w - low_freq_factor) / (high_freq_factor - low_freq_factor);
      const bool medium = !(w < high_w) && !(w > low_w);
      inv = medium ? (1.0 - smooth) * scaled / factor + smooth * scaled : scaled;
    }
    inv_freq[static_cast<size_t>(i)] = inv;
  }
  Array out(x.shape);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t p = positions.empty() ? pos0 + t : positions[static_cast<size_t>(b * T + t)];
          const double angle = static_cast<double>(p) * inv_freq[static_cast<size_t>(i)];
          const double first = x.at({b, t, h, i}), second = x.at({b, t, h, i + half});
          out.at({b, t, h, i}) = first * std::cos(angle) - second * std::sin(angle);
          out.at({b, t, h, i + half}) = second * std::cos(angle) + first * std::sin(angle);
        }
  return out;
}

}  // namespace trident::reference
