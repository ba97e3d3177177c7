// Op-suite cases: layernorm and rmsnorm over the last dim, with and without weight / bias,
// awkward and large C, several row counts (one block of the parameter-gradient reduction and
// many), non-contiguous x and 3-D x; f32 and bf16 storage (f32 accumulation).
#include "autograd/functions.h"
#include "kernels/reference/norm.h"
#include "op_case.h"

namespace trident::testing {
namespace {

const std::vector<DType> kNormTypes = {DType::kF32, DType::kBF16};

// The longest sums: each output sums over its row (C); dweight and dbias sum over rows.
int64_t norm_reduction_length(const InputSpec& x) {
  const int64_t C = x.shape[x.shape.size() - 1];
  int64_t rows = x.shape.product() / C;
  if (x.layout == Layout::kBroadcast) rows = rows / x.shape[0] * x.broadcast_to;
  return std::max(C, rows);
}

// OpCase's builders take rvalues; this adds a list of inputs whose length varies by case.
OpCase with_inputs(OpCase c, std::vector<InputSpec> inputs) {
  for (InputSpec& spec : inputs) std::move(c).input(std::move(spec));
  return c;
}

std::optional<reference::Array> optional_array(const Arrays& x, size_t i, bool present) {
  return present ? std::optional<reference::Array>(x[i]) : std::nullopt;
}
std::optional<Tensor> optional_tensor(const TensorList& x, size_t i, bool present) {
  return present ? std::optional<Tensor>(x[i]) : std::nullopt;
}

void layernorm_case(std::string name, InputSpec x, bool weight, bool bias) {
  const int64_t C = x.shape[x.shape.size() - 1], k = norm_reduction_length(x);
  // Inputs: x, then the weight and the bias that are present, in that order.
  std::vector<InputSpec> inputs = {std::move(x)};
  if (weight) inputs.push_back(normal({C}));
  if (bias) inputs.push_back(normal({C}));
  const size_t bias_at = weight ? 2 : 1;
  add_case(with_inputs(OpCase("layernorm", std::move(name)), std::move(inputs))
               .forward([=](const TensorList& t) {
                 return TensorList{trident::layernorm(t[0], optional_tensor(t, 1, weight),
                                                      optional_tensor(t, bias_at, bias))};
               })
               .reference([=](const Arrays& a) {
                 return Arrays{reference::layernorm(a[0], optional_array(a, 1, weight),
                                                    optional_array(a, bias_at, bias), 1e-5)};
               })
               .reduction_length(k)
               .dtypes(kNormTypes));
}

void rmsnorm_case(std::string name, InputSpec x, bool weight) {
  const int64_t C = x.shape[x.shape.size() - 1], k = norm_reduction_length(x);
  std::vector<InputSpec> inputs = {std::move(x)};
  if (weight) inputs.push_back(normal({C}));
  add_case(with_inputs(OpCase("rmsnorm", std::move(name)), std::move(inputs))
               .forward([=](const TensorList& t) {
                 return TensorList{trident::rmsnorm(t[0], optional_tensor(t, 1, weight))};
               })
               .reference([=](const Arrays& a) {
                 return Arrays{reference::rmsnorm(a[0], optional_array(a, 1, weight), 1e-6)};
               })
               .reduction_length(k)
               .dtypes(kNormTypes));
}

}  // namespace

TRI_OP_CASES(norm_cases) {
  layernorm_case("(4,37) weight and bias", normal({4, 37}), true, true);
  layernorm_case("(5,37) weight only", normal({5, 37}), true, false);
  layernorm_case("(5,37) bias only", normal({5, 37}), false, true);
  layernorm_case("(3,37) no affine", normal({3, 37}), false, false);
  layernorm_case("(1,13) one row", normal({1, 13}), true, true);
  layernorm_case("(3,768) few wide rows", normal({3, 768}), true, true);
  layernorm_case("(300,24) many row blocks", normal({300, 24}), true, true);
  layernorm_case("(2,5,19) 3-D", normal({2, 5, 19}), true, true);
  layernorm_case("(9,24) transposed x", normal({9, 24}).transposed(), true, true);
  layernorm_case("(4,20) strided x", normal({4, 20}).strided(), true, true);
  layernorm_case("(6,11) expanded rows", normal({1, 11}).broadcast(6), true, true);

  rmsnorm_case("(4,37) weight", normal({4, 37}), true);
  rmsnorm_case("(3,37) no weight", normal({3, 37}), false);
  rmsnorm_case("(1,13) one row", normal({1, 13}), true);
  rmsnorm_case("(3,768) few wide rows", normal({3, 768}), true);
  rmsnorm_case("(300,24) many row blocks", normal({300, 24}), true);
  rmsnorm_case("(2,5,19) 3-D", normal({2, 5, 19}), true);
  rmsnorm_case("(9,24) transposed x", normal({9, 24}).transposed(), true);
  rmsnorm_case("(4,20) strided x", normal({4, 20}).strided(), true);
  rmsnorm_case("(6,11) expanded rows", normal({1, 11}).broadcast(6), false);
}

}  // namespace trident::testing
