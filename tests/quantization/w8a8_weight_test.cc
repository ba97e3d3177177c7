// W8A8 weights (quantization/w8a8_weight.h): the weight's codes within half a step of each
// row's scale; products equal, to the epilogue's fp32 rounding, the float64 product of the
// per-row quantized input (int8_quantize.h, the definition) with the dequantized weight, for
// decode's few rows (trident's kernel) and prefill's many (oneDNN's), at any thread count;
// stored tensors rebuild the same weight; bad weights and bad stored tensors are refused by name;
// a model whose linear layers are W8A8 keeps its logits near the fp32 model's and releases its
// full-precision weights.
#include "quantization/w8a8_weight.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/grad_mode.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/int8_quantize.h"
#include "models/registry.h"
#include "quantization/quantize_layers.h"
#include "quantization/quantized_matmul.h"
#include "quantization/scheme.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::quantization {
namespace {

using trident::testing::error_of;

TEST(W8a8Weight, CodesWithinHalfAStepOfEachRowsScale) {
  const int64_t rows = 37, cols = 101;
  Generator gen(1);
  const Tensor w = randn({rows, cols}, gen);
  const W8a8Weight q = W8a8Weight::quantize(w, "w");
  const std::vector<float> wf = to_vector<float>(w), wd = to_vector<float>(q.dequantize());
  EXPECT_EQ(q.bytes(), rows * (cols + 1) + rows * 4);
  for (int64_t r = 0; r < rows; ++r) {
    double absmax = 0;
    for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(double(wf[r * cols + c])));
    const double step = absmax / 127;
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_LE(std::fabs(wd[r * cols + c] - wf[r * cols + c]), step * (0.5 + 1e-5)) << "row " << r << " column " << c;
  }
  // A range that starts and ends inside rows.
  const std::vector<float> part = to_vector<float>(q.dequantize(150, 260, DType::kF32));
  for (int64_t i = 0; i < 110; ++i) ASSERT_EQ(part[i], wd[150 + i]);
}

// y (M, rows) in float64 from the definition: x quantized per row, times the weight's codes and scales;
// and the epilogue's bound, 3u (|sum x a_scale x w_scale|), u = 2^-24 (kernels/cpu/int8_gemm.h).
void reference(const std::vector<float>& x, int64_t M, int64_t cols, const W8a8Weight& q, std::vector<double>& y,
               std::vector<double>& tol) {
  const int64_t rows = q.shape()[0];
  std::vector<int8_t> xq(M * cols);
  std::vector<float> xs(M);
  kernels::cpu::quantize_rows_int8(x.data(), M, cols, cols, xq.data(), cols, xs.data(), kernels::cpu::Int8Isa::kScalar);
  // The weight's codes and scales as stored (the dequantized fp32 weight would add a rounding each).
  const auto stored = q.stored();
  const auto* codes = static_cast<const int8_t*>(stored[0].second.raw_data());
  const float* scales = stored[1].second.data_ptr<float>();
  const int64_t ld = stored[0].second.size(1) * 2;
  y.assign(M * rows, 0.0);
  tol.assign(M * rows, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += int64_t{xq[m * cols + c]} * codes[r * ld + c];
      const double s = double(sum) * xs[m] * scales[r];
      y[m * rows + r] = s;
      tol[m * rows + r] = 3.0 * std::ldexp(1.0, -24) * std::fabs(s) + 1e-30;
    }
}

TEST(W8a8Weight, ProductsEqualTheFloat64ProductOfTheQuantizedOperandsOnAnyThreadCount) {
  const int64_t rows = 300, cols = 200;
  Generator gen(2);
  const W8a8Weight q = W8a8Weight::quantize(randn({rows, cols}, gen), "w");
  for (const int64_t M : {int64_t{1}, int64_t{3}, kW8a8OwnKernelRows, kW8a8OwnKernelRows + 1, int64_t{9}, int64_t{64}}) {  // both engines
    const std::vector<float> x = to_vector<float>(randn({M, cols}, gen));
    std::vector<double> want, tol;
    reference(x, M, cols, q, want, tol);
    std::vector<float> y1(M * rows), y2(M * rows);
    set_num_threads(1);
    quantized_matmul<float>(x.data(), M, q, false, y1.data());
    set_num_threads(2);
    quantized_matmul<float>(x.data(), M, q, false, y2.data());
    for (size_t i = 0; i < y1.size(); ++i) {
      ASSERT_NEAR(y1[i], want[i], tol[i]) << "M " << M << ", element " << i;
      ASSERT_EQ(y1[i], y2[i]) << "M " << M << ": the thread count changed element " << i;
    }
    // A row's result does not depend on the rows beside it (or on the engine M picks).
    std::vector<float> y_row(rows);
    quantized_matmul<float>(x.data() + (M - 1) * cols, 1, q, false, y_row.data());
    ASSERT_EQ(std::memcmp(y_row.data(), y1.data() + (M - 1) * rows, rows * sizeof(float)), 0) << "M " << M;
  }
}

TEST(W8a8Weight, StoredTensorsRebuildTheSameWeight) {
  const int64_t rows = 19, cols = 33;  // odd: a padding byte per row
  Generator gen(3);
  const W8a8Weight q = W8a8Weight::quantize(randn({rows, cols}, gen), "w");
  const auto stored = q.stored();
  const std::vector<StoredSpec> specs = W8a8Weight::layout(q.shape());
  ASSERT_EQ(stored.size(), specs.size());
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(stored[i].first, specs[i].role);
    EXPECT_EQ(stored[i].second.dtype(), specs[i].dtype);
    EXPECT_EQ(stored[i].second.shape(), specs[i].shape);
    tensors.push_back(stored[i].second);
  }
  const W8a8Weight back = W8a8Weight::from_stored(q.shape(), DType::kF32, tensors);
  EXPECT_EQ(to_vector<float>(back.dequantize()), to_vector<float>(q.dequantize()));
  const std::vector<float> x = to_vector<float>(randn({6, cols}, gen));
  std::vector<float> a(6 * rows), b(6 * rows);
  ASSERT_TRUE(q.fused_product(DType::kF32, x.data(), 6, a.data(), nullptr));
  ASSERT_TRUE(back.fused_product(DType::kF32, x.data(), 6, b.data(), nullptr));
  EXPECT_EQ(a, b);
  EXPECT_EQ(find_quant_scheme("w8a8")->format, "W8A8");
}

TEST(W8a8Weight, RefusesWhatItCannotStoreOrRebuildNamingIt) {
  std::vector<float> v(2 * 8, 0.5f);
  v[11] = std::numeric_limits<float>::infinity();
  const std::string e = error_of([&] { W8a8Weight::quantize(from_vector(v, {2, 8}), "h.0.mlp.c_fc.weight"); });
  EXPECT_NE(e.find("'h.0.mlp.c_fc.weight' holds inf at row 1, column 3"), std::string::npos) << e;
  const std::string e2 = error_of([&] { W8a8Weight::quantize(zeros({8}), "ln.weight"); });
  EXPECT_NE(e2.find("'ln.weight' is (8,), not a non-empty (out, in) matrix"), std::string::npos) << e2;
  const W8a8Weight q = W8a8Weight::quantize(from_vector(std::vector<float>(16, 1.0f), {2, 8}), "w");
  const std::string e3 = error_of([&] { (void)q.to(Device::cuda()); });
  EXPECT_NE(e3.find("w8a8 weights run on the CPU only"), std::string::npos) << e3;
  // Stored tensors with a negative scale, a NaN scale, a code of -128.
  auto stored_with = [&](float scale1, int code_byte3) {
    auto s = q.stored();
    s[1].second.data_ptr<float>()[1] = scale1;
    static_cast<int8_t*>(s[0].second.raw_data())[3] = static_cast<int8_t>(code_byte3);
    return std::vector<Tensor>{s[0].second, s[1].second};
  };
  const std::string e4 = error_of([&] { W8a8Weight::from_stored(q.shape(), DType::kF32, stored_with(-1.0f, 1)); });
  EXPECT_NE(e4.find("the scale of row 1 is -1: scales are finite and >= 0"), std::string::npos) << e4;
  const std::string e5 = error_of([&] { W8a8Weight::from_stored(q.shape(), DType::kF32, stored_with(NAN, 1)); });
  EXPECT_NE(e5.find("the scale of row 1 is nan"), std::string::npos) << e5;
  const std::string e6 = error_of([&] { W8a8Weight::from_stored(q.shape(), DType::kF32, stored_with(0.1f, -128)); });
  EXPECT_NE(e6.find("the code at row 0, column 3 is -128"), std::string::npos) << e6;
}

// The model with W8A8 layers against the same model in fp32. Each product's error is what
// quantizing both operands allows (kernels test QuantizedProductWithinTheQuantizationBound);
// through a tiny model's two blocks the logits stay within 2% of their largest magnitude.
TEST(W8a8Weight, AQuantizedModelStaysNearTheFp32ModelAndReleasesTheWeights) {
  for (const std::string arch : {"gpt2", "llama"}) {
    const models::ModelConfig cfg = arch == "gpt2" ? models::testing::tiny_gpt2() : models::testing::tiny_llama(false);
    auto q = models::build_model(cfg);
    auto f = models::build_model(cfg);  // same seed: same weights
    q->eval();
    f->eval();
    const std::vector<QuantizedParameter> layers = quantize_layers(*q, *find_quant_scheme("w8a8"), "lm_head");
    ASSERT_EQ(layers.size(), static_cast<size_t>(cfg.n_layer * (arch == "gpt2" ? 4 : 7))) << arch;
    for (const QuantizedParameter& l : layers) {
      EXPECT_EQ(q->parameter(l.param).impl().storage()->nbytes(), 0u) << l.param << ": not released";
      EXPECT_EQ(l.transposed, arch == "gpt2") << l.param;
    }
    autograd::NoGradGuard no_grad;
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 16; ++i) ids.push_back((i * 7 + 3) % cfg.vocab_size);
    for (const int64_t B : {1, 2}) {
      const Tensor x = from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + B * 8), {B, 8});
      const std::vector<float> a = to_vector<float>(q->forward(x)), b = to_vector<float>(f->forward(x));
      double err = 0, ref = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        err = std::max(err, double(std::fabs(a[i] - b[i])));
        ref = std::max(ref, double(std::fabs(b[i])));
      }
      EXPECT_LE(err, 0.02 * ref) << arch << ", batch " << B;
      EXPECT_GT(err, 0.0) << arch << ": the activations were not quantized";
    }
  }
}

}  // namespace
}  // namespace trident::quantization
