#include "kernels/reference/dropout.h"

#include "core/rng.h"

namespace trident::reference {

Array dropout(const Array& x, double p, uint64_t seed, uint64_t offset) {
  Array out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const uint64_t counter = offset + static_cast<uint64_t>(i / 4);
    const uint32_t bits = philox4x32(seed, counter)[static_cast<size_t>(i % 4)];
    const bool keep = static_cast<double>(uniform_from_bits(bits)) >= p;
    out[i] = x[i] * (keep ? 1.0 / (1.0 - p) : 0.0);
  }
  return out;
}

}  // namespace trident::reference
