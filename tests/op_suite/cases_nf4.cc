// Op-suite cases: nf4_linear, the product with a frozen NF4 weight (quantization/nf4_linear.h),
// for both weight layouts, blocks that straddle the weight's rows and a partial last block,
// against the float64 product with the dequantized weight. The weight is a constant of the
// case (it has no gradient); x is the input checked forward, backward and by finite
// differences. Products over several tiles are checked in tests/quantization/nf4_test.cc.
#include "autograd/functions.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/reference/linalg.h"
#include "op_case.h"
#include "ops/nf4.h"
#include "quantization/nf4_linear.h"

namespace trident::testing {
namespace {

void nf4_case(const std::string& name, InputSpec x, int64_t rows, int64_t cols, bool in_out, bool double_quant) {
  Generator gen(static_cast<uint64_t>(rows * 131 + cols));
  const Tensor w = randn({rows, cols}, gen);
  auto q = std::make_shared<const quantization::Nf4Weight>(quantization::Nf4Weight::quantize(w, double_quant));
  // The dequantized weight in float64: the reference's operand.
  const Tensor wd = ops::nf4_dequantize(q->data(), Device::cpu(), 0, q->numel(), DType::kF64);
  const reference::Array wa(Shape{rows, cols}, to_vector<double>(wd));
  const int64_t in = in_out ? rows : cols, out = in_out ? cols : rows;
  add_case(OpCase("nf4_linear", name)
               .input(std::move(x))
               .forward([q, in_out](const TensorList& t) {
                 const auto here = std::make_shared<const quantization::Nf4Weight>(q->to(t[0].device()));
                 return TensorList{quantization::nf4_linear(t[0], here, in_out)};
               })
               .reference([wa, in_out](const Arrays& a) {
                 return Arrays{in_out ? reference::matmul(a[0], wa) : reference::linear(a[0], wa, std::nullopt)};
               })
               .reduction_length(std::max(in, out))
               .dtypes({DType::kF32, DType::kBF16, DType::kF16}));
}

}  // namespace

TRI_OP_CASES(nf4_cases) {
  nf4_case("(out, in), blocks across rows, partial last block", normal({3, 5, 40}), 30, 40, false, true);
  nf4_case("(in, out) as Conv1D", normal({7, 96}), 96, 24, true, true);
  nf4_case("without double quantization", normal({4, 64}), 16, 64, false, false);
  nf4_case("transposed x", normal({9, 72}).transposed(), 33, 72, false, true);
  nf4_case("one row", normal({1, 130}), 130, 3, true, true);
}

}  // namespace trident::testing
