// Op-suite cases: rotary position embedding on (B, T, heads, head_size): LLaMA 2's and
// LLaMA 3's bases, a sequence piece starting at a far position (angles past 1000 rad, where
// fp32 angles would be off by ~1e-4), the smallest head, a non-contiguous x, and Llama 3's
// frequency scaling with every band present (kept, blended and divided frequencies).
#include "autograd/functions.h"
#include "kernels/reference/rope.h"
#include "op_case.h"

namespace trident::testing {
namespace {

void rope_case(const char* name, InputSpec x, RopeParams p, int64_t pos0) {
  add_case(OpCase("rope", name)
               .input(std::move(x))
               .forward([=](const TensorList& t) { return TensorList{trident::rope(t[0], p, pos0)}; })
               .reference([=](const Arrays& a) {
                 return Arrays{reference::rope(a[0], p.theta, pos0, p.factor, p.low_freq_factor, p.high_freq_factor,
                                               static_cast<double>(p.original_max_position))};
               })
               .reduction_length(2)  // each output: two products
               .dtypes({DType::kF32, DType::kBF16, DType::kF16}));
}

}  // namespace

TRI_OP_CASES(rope_cases) {
  rope_case("theta 10000", normal({2, 5, 3, 8}), 10000.0, 0);
  rope_case("theta 500000, positions from 1000", normal({1, 7, 2, 16}), 500000.0, 1000);
  rope_case("head size 2", normal({3, 4, 1, 2}), 10000.0, 3);
  rope_case("transposed x", normal({2, 3, 6, 4}).transposed(), 10000.0, 0);
  // Head size 16 at base 500000: wavelengths 6.3 to ~1e5 against bands at 16/4 and 16/1, so
  // pair 0 is blended and the rest divided by 8; positions from 20 past the original 16.
  RopeParams llama3(500000.0);
  llama3.factor = 8.0;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  llama3.original_max_position = 16;
  rope_case("llama3 scaling", normal({2, 6, 2, 16}), llama3, 20);
  // All three bands (original length 64, bands at 16 and 64): pair 0 (wavelength 6.3) kept,
  // pair 1 (32) blended, the rest (167 and up) divided.
  llama3.original_max_position = 64;
  rope_case("llama3 scaling, all bands", normal({1, 5, 3, 16}), llama3, 3);
}

}  // namespace trident::testing
