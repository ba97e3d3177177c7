// Op-suite cases: matmul (2-D, batched, broadcast batch, transposed operands), linear, and
// linear fused with a GELU.
#include "autograd/functions.h"
#include "kernels/reference/linalg.h"
#include "kernels/reference/pointwise.h"
#include "op_case.h"

namespace trident::testing {

namespace {
const std::vector<DType> kMatmulTypes = {DType::kF32, DType::kBF16, DType::kF16};

void matmul_case(const char* name, InputSpec a, InputSpec b) {
  const int64_t k = a.shape[a.shape.size() - 1];
  const int64_t m = a.shape[a.shape.size() - 2];
  add_case(OpCase("matmul", name)
               .input(std::move(a))
               .input(std::move(b))
               .forward([](const TensorList& x) { return TensorList{trident::matmul(x[0], x[1])}; })
               .reference([](const Arrays& x) { return Arrays{reference::matmul(x[0], x[1])}; })
               // Forward sums over K; the gradient of b sums over M (and the batch).
               .reduction_length(std::max<int64_t>(k, m * 4))
               .dtypes(kMatmulTypes));
}
}  // namespace

TRI_OP_CASES(linalg_cases) {
  matmul_case("2d", normal({7, 5}), normal({5, 6}));
  matmul_case("2d transposed a", normal({7, 5}).transposed(), normal({5, 6}));
  matmul_case("2d transposed b", normal({7, 5}), normal({5, 6}).transposed());
  matmul_case("batched", normal({3, 4, 5}), normal({3, 5, 6}));
  matmul_case("batched transposed both", normal({2, 4, 5}).transposed(), normal({2, 5, 3}).transposed());
  matmul_case("batch folded into rows", normal({2, 3, 4, 8}), normal({8, 5}));
  matmul_case("broadcast batch", normal({2, 1, 3, 4}), normal({5, 4, 6}));
  matmul_case("expanded batch", normal({1, 3, 4}).broadcast(4), normal({4, 4, 2}));
  matmul_case("strided a", normal({6, 5}).strided(), normal({5, 4}));
  matmul_case("large", normal({64, 96}), normal({96, 80}));

  for (bool bias : {true, false}) {
    InputSpec b = normal({7});
    if (!bias) b.no_grad();  // unused: no gradient can reach it
    add_case(OpCase("linear", bias ? "with bias" : "no bias")
                 .input(normal({2, 5, 12}))
                 .input(normal({7, 12}))
                 .input(b)
                 .forward([bias](const TensorList& x) {
                   return TensorList{trident::linear(x[0], x[1], bias ? std::optional<Tensor>(x[2]) : std::nullopt)};
                 })
                 .reference([bias](const Arrays& x) {
                   return Arrays{reference::linear(x[0], x[1], bias ? std::optional<reference::Array>(x[2]) : std::nullopt)};
                 })
                 .reduction_length(40)
                 .dtypes(kMatmulTypes));
  }
  add_case(OpCase("linear", "transposed input and weight")
               .input(normal({6, 9}).transposed())
               .input(normal({4, 9}).transposed())
               .input(normal({4}))
               .forward([](const TensorList& x) { return TensorList{trident::linear(x[0], x[1], x[2])}; })
               .reference([](const Arrays& x) { return Arrays{reference::linear(x[0], x[1], x[2])}; })
               .reduction_length(24)
               .dtypes(kMatmulTypes));

  // On a GPU, 24 and 64 output features (multiples of 8) run cuBLASLt's GELU epilogue; 7
  // runs the unfused fallback (a bias-epilogue GEMM, then the GELU kernel).
  struct GeluShape {
    const char* name;
    InputSpec x, w;
    bool bias;
  };
  for (GeluShape c : {GeluShape{"with bias", normal({2, 5, 16}), normal({24, 16}), true},
                      GeluShape{"no bias", normal({2, 5, 16}), normal({24, 16}), false},
                      GeluShape{"7 features (unfused on a GPU)", normal({9, 12}), normal({7, 12}), true},
                      GeluShape{"transposed input and weight", normal({6, 32}).transposed(),
                                normal({64, 32}).transposed(), true}}) {
    const int64_t out_features = c.w.shape[0];
    InputSpec b = normal({out_features});
    if (!c.bias) b.no_grad();
    const bool bias = c.bias;
    add_case(OpCase("linear_gelu_tanh", c.name)
                 .input(std::move(c.x))
                 .input(std::move(c.w))
                 .input(b)
                 .forward([bias](const TensorList& x) {
                   return TensorList{
                       trident::linear_gelu_tanh(x[0], x[1], bias ? std::optional<Tensor>(x[2]) : std::nullopt)};
                 })
                 .reference([bias](const Arrays& x) {
                   return Arrays{reference::gelu_tanh(
                       reference::linear(x[0], x[1], bias ? std::optional<reference::Array>(x[2]) : std::nullopt))};
                 })
                 .reduction_length(40)
                 .dtypes(kMatmulTypes));
  }
}

}  // namespace trident::testing
