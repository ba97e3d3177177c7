#include "kernels/cpu/nf4.h"

#include <algorithm>

#include "core/dtype.h"

namespace trident::kernels::cpu {
namespace {

// The midpoints between neighbouring values: a value's code is how many lie below it.
struct Midpoints {
  double m[15];
  Midpoints() {
    for (int i = 0; i < 15; ++i) m[i] = 0.5 * (static_cast<double>(kNf4Values[i]) + kNf4Values[i + 1]);
  }
};
const Midpoints kMidpoints;

}  // namespace

int nf4_code(double v) {
  int code = 0;
  for (double m : kMidpoints.m) code += v >= m ? 1 : 0;
  return code;
}

template <class T>
void nf4_dequantize(const Nf4Data& w, int64_t begin, int64_t end, T* out) {
  for (int64_t b = begin / kNf4Block; b * kNf4Block < end; ++b) {
    const float s = w.block_scale(b);
    float lut[16];
    for (int c = 0; c < 16; ++c) lut[c] = kNf4Values[c] * s;
    const int64_t i0 = std::max(begin, b * kNf4Block), i1 = std::min(end, (b + 1) * kNf4Block);
    for (int64_t i = i0; i < i1; ++i) out[i - begin] = static_cast<T>(lut[w.code(i)]);
  }
}

#define TRI_INSTANTIATE(T) template void nf4_dequantize<T>(const Nf4Data&, int64_t, int64_t, T*);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
