// A layer's bias inside the quantized product (Note [The bias in the quantized product]): for
// every scheme, the decode and prefill row counts, and both weight layouts, quantized_linear with
// a bias equals the product without one plus the add op, bit for bit, as does every path of the
// prefill GEMM; a bias that takes a
// gradient still gets it (through the add op), and a bias of the wrong length is named.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/cpu/ggml_block_gemm.h"
#include "kernels/cpu/ggml_block_matvec.h"
#include "quantization/ggml_weight.h"
#include "quantization/nf4.h"
#include "quantization/quantized_linear.h"
#include "quantization/w8a8_weight.h"
#include "support/error_of.h"

namespace trident::quantization {
namespace {

using trident::testing::error_of;

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> u = to_vector<float>(a), v = to_vector<float>(b);
  return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0;
}

TEST(QuantizedBias, InsideTheProductEqualsTheAddOpBitForBit) {
  const int64_t out = 74, in = 96;  // 3 Q8_0 blocks; 74 columns: 2 steps of 32 and 10, the last panel partial
  Generator gen(5);
  const Tensor w = randn({out, in}, gen), bias = randn({out}, gen);
  std::vector<std::pair<std::string, std::shared_ptr<const QuantizedWeight>>> weights = {
      {"Q8_0", std::make_shared<GgmlWeight>(GgmlWeight::quantize(kernels::cpu::GgmlBlockType::kQ8_0, w))},
      {"Q4_0", std::make_shared<GgmlWeight>(GgmlWeight::quantize(kernels::cpu::GgmlBlockType::kQ4_0, w))},
      {"W8A8", std::make_shared<W8a8Weight>(W8a8Weight::quantize(w))},
      {"NF4 (the tiled product)", std::make_shared<Nf4Weight>(Nf4Weight::quantize(w, true))}};
  autograd::NoGradGuard no_grad;
  for (const auto& [name, q] : weights)
    for (const int64_t M : {1, 8, 9, 200}) {  // decode's rows, the prefill GEMM's, oneDNN's
      const Tensor x = randn({M, in}, gen);
      const Tensor fused = quantized_linear(x, q, false, bias);
      const Tensor separate = trident::add(quantized_linear(x, q, false), bias);
      EXPECT_TRUE(same_bits(fused, separate)) << name << ", " << M << " rows";
    }
  // An (in, out) weight (Hugging Face's Conv1D) takes the tiled product: the bias after it.
  const auto conv = std::make_shared<Nf4Weight>(Nf4Weight::quantize(randn({in, out}, gen), true));
  const Tensor x = randn({5, in}, gen);
  EXPECT_TRUE(same_bits(quantized_linear(x, conv, true, bias), trident::add(quantized_linear(x, conv, true), bias)));
}

// The prefill GEMM's every path (the register tiles add the bias as they store).
TEST(QuantizedBias, EveryPathOfThePrefillGemmAddsItAsTheAddWould) {
  const int64_t out = 74, in = 96, M = 13;  // the last panel partial
  Generator gen(7);
  const Tensor w = randn({out, in}, gen);
  const std::vector<float> x = to_vector<float>(randn({M, in}, gen)), bias = to_vector<float>(randn({out}, gen));
  using kernels::cpu::MatvecIsa;
  for (const auto type : {kernels::cpu::GgmlBlockType::kQ8_0, kernels::cpu::GgmlBlockType::kQ4_0}) {
    const GgmlWeight q = GgmlWeight::quantize(type, w);
    const kernels::cpu::GgmlQ8Activations xq(type, x.data(), M, in);
    for (const MatvecIsa isa : {MatvecIsa::kAvx512, MatvecIsa::kAvx2, MatvecIsa::kScalar}) {
      if (!kernels::cpu::ggml_matvec_supports(isa)) continue;
      std::vector<float> fused(static_cast<size_t>(M * out)), separate(fused.size());
      kernels::cpu::ggml_block_gemm(isa, xq, q.panels(), fused.data(), out, bias.data());
      kernels::cpu::ggml_block_gemm(isa, xq, q.panels(), separate.data(), out);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t o = 0; o < out; ++o) separate[static_cast<size_t>(m * out + o)] += bias[static_cast<size_t>(o)];
      EXPECT_EQ(std::memcmp(fused.data(), separate.data(), fused.size() * sizeof(float)), 0)
          << kernels::cpu::ggml_block_type_name(type) << " on " << kernels::cpu::matvec_isa_name(isa);
    }
  }
}

TEST(QuantizedBias, ABiasThatTakesAGradientGetsItAndAWrongLengthIsNamed) {
  const int64_t out = 64, in = 64;
  Generator gen(6);
  const auto q = std::make_shared<GgmlWeight>(GgmlWeight::quantize(kernels::cpu::GgmlBlockType::kQ8_0, randn({out, in}, gen)));
  Tensor bias = randn({out}, gen);
  bias.set_requires_grad(true);
  const Tensor x = randn({12, in}, gen);
  autograd::backward(trident::sum(quantized_linear(x, q, false, bias)));
  ASSERT_TRUE(bias.grad().has_value());
  for (const float g : to_vector<float>(*bias.grad())) EXPECT_EQ(g, 12.0f);
  const std::string e = error_of([&] { quantized_linear(x, q, false, randn({out + 1}, gen)); });
  EXPECT_NE(e.find("the bias (65,) is not the 64 output features"), std::string::npos) << e;
}

}  // namespace
}  // namespace trident::quantization
