// Op-suite cases: rotary position embedding on (B, T, heads, head_size): LLaMA 2's and
// LLaMA 3's bases, a sequence piece starting at a far position (angles past 1000 rad, where
// fp32 angles would be off by ~1e-4), the smallest head, and a non-contiguous x.
#include "autograd/functions.h"
#include "kernels/reference/rope.h"
#include "op_case.h"

namespace trident::testing {
namespace {

void rope_case(const char* name, InputSpec x, double theta, int64_t pos0) {
  add_case(OpCase("rope", name)
               .input(std::move(x))
               .forward([=](const TensorList& t) { return TensorList{trident::rope(t[0], theta, pos0)}; })
               .reference([=](const Arrays& a) { return Arrays{reference::rope(a[0], theta, pos0)}; })
               .reduction_length(2)  // each output: two products
               .dtypes({DType::kF32, DType::kBF16, DType::kF16}));
}

}  // namespace

TRI_OP_CASES(rope_cases) {
  rope_case("theta 10000", normal({2, 5, 3, 8}), 10000.0, 0);
  rope_case("theta 500000, positions from 1000", normal({1, 7, 2, 16}), 500000.0, 1000);
  rope_case("head size 2", normal({3, 4, 1, 2}), 10000.0, 3);
  rope_case("transposed x", normal({2, 3, 6, 4}).transposed(), 10000.0, 0);
}

}  // namespace trident::testing
