// Op-suite cases: quantized_linear, the product with a frozen quantized weight
// (quantization/quantized_linear.h), for each scheme: NF4 in both weight layouts, with blocks
// that straddle the weight's rows and a partial last block; GGUF's Q8_0 and Q4_0 (int8, int4) on
// (out, in) weights, with few rows of x (decode's kernel) and more (prefill's; both f32 products
// round x to Q8_0, so x is on Q8_0's grid); each against the float64 product with the
// dequantized weight. The weight is a constant of
// the case (it has no gradient); x is the input checked forward, backward and by finite
// differences (the backward in x runs the tiled path for every scheme). Products over several
// tiles: tests/quantization/nf4_test.cc and ggml_weight_test.cc.
#include "autograd/functions.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/reference/linalg.h"
#include "op_case.h"
#include "quantization/nf4.h"
#include "quantization/quantized_linear.h"
#include "quantization/scheme.h"

namespace trident::testing {
namespace {

void quantized_case(const std::string& scheme, const std::string& name, InputSpec x, int64_t rows, int64_t cols,
                    bool in_out, bool double_quant = true) {
  Generator gen(static_cast<uint64_t>(rows * 131 + cols));
  const Tensor w = randn({rows, cols}, gen);
  std::shared_ptr<const quantization::QuantizedWeight> q =
      scheme == "nf4" ? std::make_shared<const quantization::Nf4Weight>(quantization::Nf4Weight::quantize(w, double_quant))
                      : quantization::find_quant_scheme(scheme)->quantize(w, "w");
  // The dequantized weight in float64: the reference's operand.
  const Tensor wd = q->dequantize(0, q->numel(), DType::kF64);
  const reference::Array wa(Shape{rows, cols}, to_vector<double>(wd));
  const int64_t in = in_out ? rows : cols, out = in_out ? cols : rows;
  OpCase c = OpCase("quantized_linear", scheme + ": " + name)
               .input(std::move(x))
               .forward([q, in_out](const TensorList& t) {
                 return TensorList{quantization::quantized_linear(t[0], q->to(t[0].device()), in_out)};
               })
               .reference([wa, in_out](const Arrays& a) {
                 return Arrays{in_out ? reference::matmul(a[0], wa) : reference::linear(a[0], wa, std::nullopt)};
               })
               .reduction_length(std::max(in, out))
               .dtypes({DType::kF32, DType::kBF16, DType::kF16});
  add_case(scheme == "nf4" ? std::move(c) : std::move(c).on_host_only());
}

}  // namespace

TRI_OP_CASES(quantized_cases) {
  quantized_case("nf4", "(out, in), blocks across rows, partial last block", normal({3, 5, 40}), 30, 40, false);
  quantized_case("nf4", "(in, out) as Conv1D", normal({7, 96}), 96, 24, true);
  quantized_case("nf4", "without double quantization", normal({4, 64}), 16, 64, false, false);
  quantized_case("nf4", "transposed x", normal({9, 72}).transposed(), 33, 72, false);
  quantized_case("nf4", "one row", normal({1, 130}), 130, 3, true);
  for (const std::string s : {"int8", "int4"}) {
    // x on Q8_0's grid, which the f32 products (decode's and prefill's kernels) round x to
    // (InputKind::kQ8_0Grid); bf16 and f16 take the tiled GEMM path.
    quantized_case(s, "one row of x (decode)", q8_0_grid({1, 64}), 20, 64, false);
    quantized_case(s, "8 rows of x in a batch (decode)", q8_0_grid({2, 4, 96}), 17, 96, false);
    quantized_case(s, "transposed x, 9 rows (prefill)", q8_0_grid({9, 64}).transposed(), 33, 64, false);
    quantized_case(s, "40 rows of x (prefill)", q8_0_grid({5, 8, 32}), 12, 32, false);
  }
}

}  // namespace trident::testing
