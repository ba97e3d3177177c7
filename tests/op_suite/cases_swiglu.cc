// Op-suite cases: the fused SwiGLU gate silu(gate) * up (ops/swiglu.h) on contiguous,
// transposed and strided inputs, a size that splits across threads, and a wide range of gate
// values that reaches silu's tails. Each output element depends on one element of each
// input: reduction_length is 1.
#include "autograd/functions.h"
#include "kernels/reference/pointwise.h"
#include "op_case.h"

namespace trident::testing {
namespace {

void swiglu_case(const std::string& name, InputSpec gate, InputSpec up) {
  add_case(OpCase("swiglu", name)
               .input(std::move(gate))
               .input(std::move(up))
               .forward([](const TensorList& x) { return TensorList{trident::swiglu(x[0], x[1])}; })
               .reference([](const Arrays& x) { return Arrays{reference::swiglu(x[0], x[1])}; })
               .dtypes({DType::kF32, DType::kBF16, DType::kF16}));
}

}  // namespace

TRI_OP_CASES(swiglu_cases) {
  swiglu_case("3d odd sizes", normal({3, 5, 7}), normal({3, 5, 7}));
  swiglu_case("one element", normal({1}), normal({1}));
  swiglu_case("transposed gate", normal({6, 5}).transposed(), normal({6, 5}));
  swiglu_case("strided up", normal({4, 9}), normal({4, 9}).strided());
  swiglu_case("large", normal({129, 257}), normal({129, 257}));  // more than one parallel chunk
  swiglu_case("wide gate range", uniform({9, 23}, -12.0, 12.0), normal({9, 23}));
}

}  // namespace trident::testing
