// Op-suite cases: activation checkpointing. The region is a small residual MLP block,
// x + gelu_tanh(layernorm(x) W1^T + b1) W2^T, with every tensor it uses passed as an input so
// that the runner checks all their gradients; each recompute policy is a case. The region's
// result must equal the plain composition, and its gradients those of the plain graph.
#include "autograd/functions.h"
#include "kernels/reference/elementwise.h"
#include "kernels/reference/linalg.h"
#include "kernels/reference/norm.h"
#include "kernels/reference/pointwise.h"
#include "op_case.h"

namespace trident::testing {
namespace {

Tensor block(const TensorList& x) {
  const Tensor h = trident::linear(trident::layernorm(x[0], x[1], x[2]), x[3], x[4]);
  return x[0] + trident::linear(trident::gelu_tanh(h), x[5]);
}

// The same block with its first layer and GELU as one op (GPT-2's MLP).
Tensor fused_block(const TensorList& x) {
  const Tensor h = trident::linear_gelu_tanh(trident::layernorm(x[0], x[1], x[2]), x[3], x[4]);
  return x[0] + trident::linear(h, x[5]);
}

void checkpoint_case(const char* name, RecomputePolicy policy, int64_t rows, bool fused = false) {
  const int64_t C = 8, H = 12;
  add_case(OpCase("activation_checkpoint", name)
               .input(normal({rows, C}))
               .input(normal({C}))
               .input(normal({C}))
               .input(normal({H, C}))
               .input(normal({H}))
               .input(normal({C, H}))
               .forward([policy, fused](const TensorList& x) {
                 return TensorList{trident::activation_checkpoint(fused ? fused_block : block, x, policy)};
               })
               .reference([](const Arrays& x) {
                 const reference::Array h =
                     reference::linear(reference::layernorm(x[0], x[1], x[2], 1e-5), x[3], x[4]);
                 return Arrays{reference::add(x[0], reference::linear(reference::gelu_tanh(h), x[5], std::nullopt))};
               })
               // Weight gradients sum over the rows; the chain runs through two products of
               // length up to H and the norm's sums over C.
               .reduction_length(std::max<int64_t>(4 * rows, 3 * H))
               .dtypes({DType::kF32, DType::kBF16}));
}

}  // namespace

TRI_OP_CASES(activation_checkpoint_cases) {
  checkpoint_case("full", RecomputePolicy::kEverything, 5);
  checkpoint_case("selective (keeps matmul outputs)", RecomputePolicy::kAllButMatmuls, 5);
  checkpoint_case("full, rows split across threads", RecomputePolicy::kEverything, 300);
  checkpoint_case("full, fused linear + GELU", RecomputePolicy::kEverything, 5, true);
  checkpoint_case("selective, fused linear + GELU (keeps its product)", RecomputePolicy::kAllButMatmuls, 5, true);
}

}  // namespace trident::testing
