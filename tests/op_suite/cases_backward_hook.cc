// Op-suite cases: the backward hook is the identity in both directions, composed with an op
// before and after it so the gradient visibly flows through. (That the hook runs, once and
// at the right moment, is tests/autograd/backward_hook_test.cc's.)
#include "autograd/functions.h"
#include "kernels/reference/elementwise.h"
#include "kernels/reference/pointwise.h"
#include "op_case.h"

namespace trident::testing {

TRI_OP_CASES(backward_hook_cases) {
  add_case(OpCase("backward_hook", "between two ops")
               .input(normal({3, 7}))
               .input(normal({3, 7}))
               .forward([](const TensorList& x) {
                 return TensorList{trident::gelu_tanh(trident::backward_hook(x[0] * x[1], [] {}))};
               })
               .reference([](const Arrays& x) { return Arrays{reference::gelu_tanh(reference::mul(x[0], x[1]))}; })
               .dtypes({DType::kF32, DType::kBF16}));
}

}  // namespace trident::testing
