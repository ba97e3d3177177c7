// Op-suite cases: attach_aux_loss's forward is the identity on x, whatever the loss. Its
// backward injects a gradient into the loss rather than differentiating the forward, so the
// suite checks only the forward (.no_backward()); tests/autograd/aux_loss_test.cc checks the
// gradients against finite differences of the objective the op stands for.
#include "autograd/functions.h"
#include "op_case.h"

namespace trident::testing {

TRI_OP_CASES(aux_loss_cases) {
  add_case(OpCase("attach_aux_loss", "identity on x, loss from another input")
               .input(normal({3, 7}))
               .input(normal({5}))
               .forward([](const TensorList& x) {
                 return TensorList{trident::attach_aux_loss(x[0], trident::sum(x[1] * x[1]), 0.5)};
               })
               .reference([](const Arrays& x) { return Arrays{x[0]}; })
               .dtypes({DType::kF32, DType::kBF16})
               .no_backward());
  add_case(OpCase("attach_aux_loss", "transposed x, loss from x itself")
               .input(normal({4, 6}).transposed())
               .forward([](const TensorList& x) {
                 return TensorList{trident::attach_aux_loss(x[0], trident::mean(x[0] * x[0]), 0.25)};
               })
               .reference([](const Arrays& x) { return Arrays{x[0]}; })
               .no_backward());
}

}  // namespace trident::testing
