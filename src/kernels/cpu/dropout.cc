#include "kernels/cpu/dropout.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace trident::kernels::cpu {

template <class T>
void dropout_forward(T* out, const T* in, int64_t n, double p, uint64_t seed, uint64_t offset) {
  using Acc = acc_t<T>;
  // keep iff (bits >> 8) >= threshold: exact integer form of uniform_from_bits(bits) >= p
  // (p * 2^24 is exact in double, and the uniform is an integer multiple of 2^-24).
  const uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 0x1p24));
  const Acc scale = static_cast<Acc>(1.0 / (1.0 - p));
  // Blocks of whole counters: draw the bits of a block, then one branch-free pass over it.
  constexpr int64_t kBlock = 1024;  // elements, a multiple of 4
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(0, blocks, 16, [&](int64_t bb, int64_t be) {
    uint32_t bits[kBlock];
    for (int64_t b = bb; b < be; ++b) {
      const int64_t first = b * kBlock, width = std::min(kBlock, n - first);
      const uint64_t counter0 = offset + static_cast<uint64_t>(first / 4);
      for (int64_t g = 0; g < (width + 3) / 4; ++g) {
        const std::array<uint32_t, 4> r = philox4x32(seed, counter0 + static_cast<uint64_t>(g));
        std::copy(r.begin(), r.end(), bits + 4 * g);
      }
      const T* x = in + first;
      T* y = out + first;
      for (int64_t j = 0; j < width; ++j) {
        const Acc multiplier = static_cast<Acc>((bits[j] >> 8) >= threshold) * scale;
        y[j] = static_cast<T>(static_cast<Acc>(x[j]) * multiplier);
      }
    }
  });
}

#define TRI_INSTANTIATE(T) \
  template void dropout_forward<T>(T*, const T*, int64_t, double, uint64_t, uint64_t);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
