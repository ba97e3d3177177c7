// Op-suite cases: views and layout changes (reshape, transpose, permute, narrow, expand,
// contiguous, dtype conversion).
#include "autograd/functions.h"
#include "kernels/reference/shape.h"
#include "op_case.h"

namespace trident::testing {

TRI_OP_CASES(shape_cases) {
  const std::vector<DType> types = {DType::kF32, DType::kBF16};
  add_case(OpCase("reshape", "view")
               .input(normal({4, 6}))
               .forward([](const TensorList& x) { return TensorList{trident::reshape(x[0], {2, -1, 3})}; })
               .reference([](const Arrays& x) { return Arrays{reference::reshape(x[0], Shape{2, 4, 3})}; })
               .dtypes(types));
  add_case(OpCase("reshape", "copy of transposed")
               .input(normal({4, 6}).transposed())
               .forward([](const TensorList& x) { return TensorList{trident::reshape(x[0], {24})}; })
               .reference([](const Arrays& x) { return Arrays{reference::reshape(x[0], Shape{24})}; })
               .dtypes(types));
  add_case(OpCase("reshape", "unsqueeze squeeze")
               .input(normal({3, 5}))
               .forward([](const TensorList& x) {
                 return TensorList{trident::squeeze(trident::unsqueeze(x[0], 1), 1)};
               })
               .reference([](const Arrays& x) { return Arrays{x[0]}; })
               .dtypes(types));
  add_case(OpCase("transpose", "last two")
               .input(normal({2, 3, 4}))
               .forward([](const TensorList& x) { return TensorList{trident::transpose(x[0], -1, -2)}; })
               .reference([](const Arrays& x) { return Arrays{reference::transpose(x[0], -1, -2)}; })
               .dtypes(types));
  add_case(OpCase("permute", "(B,T,H,D)->(B,H,T,D)")
               .input(normal({2, 3, 4, 5}))
               .forward([](const TensorList& x) { return TensorList{trident::permute(x[0], {0, 2, 1, 3})}; })
               .reference([](const Arrays& x) { return Arrays{reference::permute(x[0], {0, 2, 1, 3})}; })
               .dtypes(types));
  add_case(OpCase("narrow", "middle of dim 1")
               .input(normal({3, 10}))
               .forward([](const TensorList& x) { return TensorList{trident::narrow(x[0], 1, 2, 5)}; })
               .reference([](const Arrays& x) { return Arrays{reference::narrow(x[0], 1, 2, 5)}; })
               .dtypes(types));
  add_case(OpCase("expand", "broadcast rows")
               .input(normal({1, 6}))
               .forward([](const TensorList& x) { return TensorList{trident::expand(x[0], Shape{2, 4, 6})}; })
               .reference([](const Arrays& x) { return Arrays{reference::expand(x[0], Shape{2, 4, 6})}; })
               .reduction_length(8)
               .dtypes(types));
  add_case(OpCase("contiguous", "of transposed")
               .input(normal({5, 7}).transposed())
               .forward([](const TensorList& x) { return TensorList{trident::contiguous(x[0])}; })
               .reference([](const Arrays& x) { return Arrays{x[0]}; })
               .dtypes(types));
  // Widening conversions are exact, so the reference is the identity; the gradient is
  // rounded back to the input's dtype.
  for (auto [target, from] : {std::pair{DType::kF64, std::vector<DType>{DType::kF32, DType::kBF16}},
                              std::pair{DType::kF32, std::vector<DType>{DType::kBF16, DType::kF16}}}) {
    add_case(OpCase("to", std::string("widen to ") + dtype_name(target))
                 .input(normal({4, 5}))
                 .forward([target](const TensorList& x) { return TensorList{trident::to(x[0], target)}; })
                 .reference([](const Arrays& x) { return Arrays{x[0]}; })
                 .dtypes(from));
  }
}

}  // namespace trident::testing
