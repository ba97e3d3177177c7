// NF4 weights (issue #48, QLoRA): the code book is QLoRA's, quantization keeps a Gaussian
// weight to NF4's accuracy in ~0.516 bytes per weight, requantizing gives the same values bit
// for bit (Note [Idempotent NF4]), bad weights are refused by name, the tiled products equal the
// products with the dequantized weight on any thread count, and a model whose frozen linear
// layers are quantized computes what the same model with the dequantized weights computes,
// with gradients flowing through them, while their full-precision memory is released.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/nf4.h"
#include "models/registry.h"
#include "nn/freeze.h"
#include "nn/linear.h"
#include "quantization/quantized_matmul.h"
#include "quantization/quantized_base.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::quantization {
namespace {

using trident::testing::error_of;

// The standard normal's inverse CDF by bisection on erfc (no table of our own to trust).
double normal_quantile(double p) {
  double lo = -10.0, hi = 10.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

TEST(Nf4, TheCodeBookIsQloras) {
  // QLoRA's construction (bitsandbytes' create_normal_map, offset 0.9677083): 8 positive
  // quantiles over [offset, 0.5), 7 negative, and 0, scaled to [-1, 1]; float32 linspace steps.
  const double offset = 0.9677083;
  std::vector<double> v{0.0};
  for (int i = 0; i < 8; ++i) v.push_back(normal_quantile(static_cast<float>(offset + (0.5 - offset) * i / 8.0)));
  for (int i = 0; i < 7; ++i) v.push_back(-normal_quantile(static_cast<float>(offset + (0.5 - offset) * i / 7.0)));
  std::sort(v.begin(), v.end());
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(kNf4Values[i], v[static_cast<size_t>(i)] / v.back(), 1e-6) << "value " << i;
  for (int i = 0; i < 16; ++i) EXPECT_EQ(kernels::cpu::nf4_code(kNf4Values[i]), i);
  EXPECT_EQ(kernels::cpu::nf4_code(-2.0f), 0);
  EXPECT_EQ(kernels::cpu::nf4_code(2.0f), 15);
  EXPECT_EQ(kernels::cpu::nf4_code(0.03f), 7);
  EXPECT_EQ(kernels::cpu::nf4_code(0.05f), 8);
}

double relative_rms_error(const Tensor& w, const Tensor& d) {
  const std::vector<float> a = to_vector<float>(core::cast(w, DType::kF32)), b = to_vector<float>(core::cast(d, DType::kF32));
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * double(a[i] - b[i]);
    ref += a[i] * double(a[i]);
  }
  return std::sqrt(err / ref);
}

TEST(Nf4, KeepsAGaussianWeightInHalfAByteAWeight) {
  Generator gen(3);
  const Tensor w = randn({768, 768}, gen);
  const Nf4Weight dq = Nf4Weight::quantize(w, true), plain = Nf4Weight::quantize(w, false);
  const double bytes_dq = double(dq.bytes()) / double(w.numel()), bytes_plain = double(plain.bytes()) / double(w.numel());
  EXPECT_NEAR(bytes_dq, 0.5 + 1.0 / 64 + 4.0 / (64 * 256), 1e-4);
  EXPECT_NEAR(bytes_plain, 0.5 + 4.0 / 64, 1e-4);
  const double e_dq = relative_rms_error(w, dq.dequantize()), e_plain = relative_rms_error(w, plain.dequantize());
  // NF4 on N(0, 1) blocks of 64: ~9% RMS; the scales' 8 bits add a fraction of a percent of it.
  std::printf("NF4 relative RMS error: %.4f (double quantization), %.4f (fp32 scales); bytes/weight %.4f, %.4f\n", e_dq,
              e_plain, bytes_dq, bytes_plain);
  EXPECT_LT(e_plain, 0.11);
  EXPECT_LT(e_dq, e_plain * 1.01);
  EXPECT_EQ(dq.dequantize().dtype(), DType::kF32);
  EXPECT_EQ(dq.dequantize().shape(), w.shape());
}

// The planner counts a QLoRA base by bytes_for, without quantizing: every size where a code
// word, a block, a scale pair or a scale group is partial.
TEST(Nf4, BytesForIsWhatAQuantizedWeightHolds) {
  Generator gen(5);
  for (const int64_t n : {1, 3, 4, 63, 64, 65, 129, 64 * 255, 64 * 256, 64 * 256 + 1, 64 * 513 + 7})
    for (const bool dq : {true, false}) {
      const Nf4Weight q = Nf4Weight::quantize(randn({n}, gen), dq);
      EXPECT_EQ(Nf4Weight::bytes_for(n, dq), q.bytes()) << n << " weights, double_quant " << dq;
    }
}

TEST(Nf4, RequantizingGivesTheSameValuesBitForBit) {
  Generator gen(4);
  Tensor w = randn({37, 300}, gen);  // a partial last block, blocks across rows, two scale groups
  {
    autograd::NoGradGuard no_grad;
    std::vector<float> v = to_vector<float>(w);
    for (size_t i = 0; i < v.size(); i += 97) v[i] *= 40.0f;  // scales two orders apart within a group
    for (size_t i = 640; i < 704; ++i) v[i] = 0.0f;             // an all-zero block
    w = from_vector(v, w.shape());
  }
  for (bool double_quant : {true, false}) {
    const Tensor once = Nf4Weight::quantize(w, double_quant).dequantize();
    const Tensor twice = Nf4Weight::quantize(once, double_quant).dequantize();
    EXPECT_EQ(to_vector<float>(once), to_vector<float>(twice)) << "double_quant " << double_quant;
  }
  // Values on NF4's grid with a block's absmax among them come back exactly.
  std::vector<float> grid;
  for (int i = 0; i < 64; ++i) grid.push_back(kNf4Values[i % 16] * 2.5f);
  EXPECT_EQ(to_vector<float>(Nf4Weight::quantize(from_vector(grid, {64}), true).dequantize()), grid);
}

// QLoRA's scheme in float64, written from the description rather than from trident's kernels:
// blocks of 64 in the flattened weight; a block's absmax; each weight's code the index of the
// NF4 value nearest to weight / absmax (ties to the larger); with double quantization the
// absmax values' 8-bit codes round(absmax / group max x 255) over groups of 256 blocks and the
// block scale group max x (code / 255) in fp32, without it the absmax itself; the value the code
// times the block scale, rounded once to fp32.
std::vector<float> reference_nf4(const std::vector<float>& w, bool double_quant) {
  const size_t n = w.size(), blocks = (n + 63) / 64;
  std::vector<double> absmax(blocks, 0.0);
  for (size_t i = 0; i < n; ++i) absmax[i / 64] = std::max(absmax[i / 64], std::fabs(double(w[i])));
  std::vector<float> scale(blocks);
  for (size_t b = 0; b < blocks; ++b) scale[b] = static_cast<float>(absmax[b]);
  if (double_quant) {
    for (size_t g = 0; g * 256 < blocks; ++g) {
      double s = 0.0;
      for (size_t b = g * 256; b < std::min(blocks, (g + 1) * 256); ++b) s = std::max(s, absmax[b]);
      for (size_t b = g * 256; b < std::min(blocks, (g + 1) * 256); ++b) {
        const double code = s > 0.0 ? std::nearbyint(absmax[b] / s * 255.0) : 0.0;
        scale[b] = static_cast<float>(s) * (static_cast<float>(code) / 255.0f);
      }
    }
  }
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const double v = absmax[i / 64] > 0.0 ? double(w[i]) / absmax[i / 64] : 0.0;
    int best = 0;
    for (int c = 1; c < 16; ++c)
      if (std::fabs(v - kNf4Values[c]) <= std::fabs(v - kNf4Values[best])) best = c;
    out[i] = static_cast<float>(double(kNf4Values[best]) * double(scale[i / 64]));
  }
  return out;
}

TEST(Nf4, EqualsAFloat64ReferenceOfQlorasSchemeBitForBit) {
  Generator gen(11);
  // 300 x 701 weights: blocks across rows, a partial last block, 3,286 blocks in 13 groups,
  // scales spread over two orders of magnitude.
  std::vector<float> w = to_vector<float>(randn({300, 701}, gen));
  for (size_t i = 0; i < w.size(); i += 331) w[i] *= 60.0f;
  for (bool double_quant : {true, false}) {
    const std::vector<float> want = reference_nf4(w, double_quant);
    const std::vector<float> got = to_vector<float>(Nf4Weight::quantize(from_vector(w, {300, 701}), double_quant).dequantize());
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i] ? 1 : 0;
    EXPECT_EQ(differ, 0u) << "double_quant " << double_quant;
  }
}

TEST(Nf4, RefusesANonFiniteWeightNamingIt) {
  std::vector<float> v(200, 0.5f);
  v[130] = NAN;
  const std::string e = error_of([&] { Nf4Weight::quantize(from_vector(v, {200}), true, "h.0.mlp.c_fc.weight"); });
  EXPECT_NE(e.find("'h.0.mlp.c_fc.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("element 130"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { Nf4Weight::quantize(from_vector(std::vector<int64_t>{1, 2}, {2}), true); }).find("not a floating"),
            std::string::npos);
}

// x (M, in) @ the dequantized weight, by one GEMM.
template <class T>
std::vector<float> plain_product(const std::vector<T>& a, int64_t M, const Tensor& wd, bool trans_w, int64_t k, int64_t n) {
  const Tensor wt = core::contiguous(core::cast(wd, dtype_of<T>()));
  std::vector<float> c(static_cast<size_t>(M * n));
  kernels::cpu::gemm_to_f32<T>(false, trans_w, M, n, k, 1.0f, a.data(), k, wt.data_ptr<T>(), trans_w ? k : n, 0.0f,
                               c.data(), n);
  return c;
}

template <class T>
void check_tiled_products(double tol) {
  Generator gen(9);
  // (out, in) = (1100, 320) and (in, out) = (1100, 320): 352,000 weights, two tiles of rows.
  const int64_t rows = 1100, cols = 320, M = 5;
  ASSERT_LT(quantized_tile_rows(rows, cols), rows);
  const Nf4Weight q = Nf4Weight::quantize(randn({rows, cols}, gen), true);
  const Tensor wd = q.dequantize();
  for (bool in_out : {false, true}) {
    const int64_t in = in_out ? rows : cols, out = in_out ? cols : rows;
    std::vector<T> x, dy;
    for (float v : to_vector<float>(randn({M, in}, gen))) x.push_back(static_cast<T>(v));
    for (float v : to_vector<float>(randn({M, out}, gen))) dy.push_back(static_cast<T>(v));
    const std::vector<float> want_y = plain_product(x, M, wd, !in_out, in, out);
    const std::vector<float> want_dx = plain_product(dy, M, wd, in_out, out, in);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      std::vector<T> y(static_cast<size_t>(M * out)), dx(static_cast<size_t>(M * in));
      quantized_matmul<T>(x.data(), M, q, in_out, y.data());
      quantized_matmul_input_grad<T>(dy.data(), M, q, in_out, dx.data());
      double err_y = 0, err_dx = 0, ref_y = 0, ref_dx = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        err_y = std::max(err_y, double(std::fabs(float(y[i]) - want_y[i])));
        ref_y = std::max(ref_y, double(std::fabs(want_y[i])));
      }
      for (size_t i = 0; i < dx.size(); ++i) {
        err_dx = std::max(err_dx, double(std::fabs(float(dx[i]) - want_dx[i])));
        ref_dx = std::max(ref_dx, double(std::fabs(want_dx[i])));
      }
      EXPECT_LT(err_y / ref_y, tol) << "y, in_out " << in_out << ", threads " << threads;
      EXPECT_LT(err_dx / ref_dx, tol) << "dx, in_out " << in_out << ", threads " << threads;
    }
    set_num_threads(2);
    std::vector<T> y1(static_cast<size_t>(M * out)), y2(y1.size());
    set_num_threads(1);
    quantized_matmul<T>(x.data(), M, q, in_out, y1.data());
    set_num_threads(2);
    quantized_matmul<T>(x.data(), M, q, in_out, y2.data());
    for (size_t i = 0; i < y1.size(); ++i) ASSERT_EQ(float(y1[i]), float(y2[i])) << "thread count changed element " << i;
  }
}

TEST(Nf4Matmul, TiledProductsEqualTheDequantizedProductsOnAnyThreadCount) {
  check_tiled_products<float>(1e-5);
  check_tiled_products<bf16>(2e-2);
}

class QuantizedBaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  models::ModelConfig config() const {
    return GetParam() == "gpt2" ? models::testing::tiny_gpt2() : models::testing::tiny_llama(false);
  }
};

Tensor tokens(const models::ModelConfig& cfg, int64_t shift) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2 * 8; ++i) ids.push_back((i * 7 + 3 + shift) % cfg.vocab_size);
  return from_vector(ids, {2, 8});
}

TEST_P(QuantizedBaseTest, ComputesWhatTheDequantizedModelComputesAndReleasesTheWeights) {
  const models::ModelConfig cfg = config();
  auto q = models::build_model(cfg);
  auto d = models::build_model(cfg);  // same seed: same weights
  // The blocks are frozen; the embeddings and the head train, so gradients cross every block.
  const std::string frozen = GetParam() == "gpt2" ? "h.*" : "layers.*";
  nn::freeze_parameters(*q, frozen, "test");
  nn::freeze_parameters(*d, frozen, "test");
  QuantizationOptions options;
  options.base = "nf4";
  const QuantizedBase base = quantize_base(*q, options, [](const std::string&) { return true; });
  const int64_t linears_per_block = GetParam() == "gpt2" ? 4 : 7;
  EXPECT_EQ(base.layers().size(), static_cast<size_t>(cfg.n_layer * linears_per_block));
  {
    autograd::NoGradGuard no_grad;
    for (const QuantizedLayer& l : base.layers()) core::copy_(d->parameter(l.param), base.dequantized(l.param));
  }
  int64_t released = 0;
  for (const QuantizedLayer& l : base.layers()) {
    const Tensor w = q->parameter(l.param);
    released += w.impl().storage()->nbytes() == 0 ? 1 : 0;
    EXPECT_EQ(w.shape(), l.weight->shape()) << l.param;
  }
  EXPECT_EQ(released, static_cast<int64_t>(base.layers().size()));
  // Tiny weights: a group's fp32 scale is shared by a few blocks only (0.516 at scale, above).
  EXPECT_LT(double(base.bytes()) / double(base.params()), 0.54);

  const Tensor x = tokens(cfg, 0), y = tokens(cfg, 1);
  const Tensor lq = q->loss(x, y), ld = d->loss(x, y);
  EXPECT_NEAR(lq.item(), ld.item(), 1e-5 * std::fabs(ld.item()));
  autograd::backward(lq);
  autograd::backward(ld);
  int64_t compared = 0;
  for (const auto& [name, p] : q->named_parameters()) {
    if (!p.requires_grad()) continue;
    const Tensor pd = d->parameter(name);
    ASSERT_TRUE(p.grad().has_value() && pd.grad().has_value()) << name;
    const std::vector<float> a = to_vector<float>(*p.grad()), b = to_vector<float>(*pd.grad());
    double err = 0, ref = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      err = std::max(err, double(std::fabs(a[i] - b[i])));
      ref = std::max(ref, double(std::fabs(b[i])));
    }
    EXPECT_LE(err, 1e-4 * ref + 1e-7) << name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST_P(QuantizedBaseTest, NamesWhatCannotBeQuantized) {
  const models::ModelConfig cfg = config();
  QuantizationOptions options;
  options.base = "nf4";
  auto trains = models::build_model(cfg);
  const std::string e = error_of([&] { quantize_base(*trains, options, [](const std::string&) { return true; }); });
  EXPECT_NE(e.find("no linear layer of the model is frozen"), std::string::npos) << e;
  auto m = models::build_model(cfg);
  nn::freeze_parameters(*m, "*", "test");
  options.skip_modules = "lm_head,mlpp";
  const std::string e2 = error_of([&] { quantize_base(*m, options, [](const std::string&) { return true; }); });
  EXPECT_NE(e2.find("'mlpp' matches no layer"), std::string::npos) << e2;
  if (GetParam() == "gpt2") options.skip_modules = "lm_head, h.*.mlp.*";
  else options.skip_modules = "lm_head, layers.*.mlp.*";
  const QuantizedBase base = quantize_base(*m, options, [](const std::string&) { return true; });
  EXPECT_EQ(base.layers().size(), static_cast<size_t>(cfg.n_layer * (GetParam() == "gpt2" ? 2 : 4)));
  for (const QuantizedLayer& l : base.layers()) EXPECT_EQ(l.param.find(".mlp."), std::string::npos) << l.param;
}

INSTANTIATE_TEST_SUITE_P(Families, QuantizedBaseTest, ::testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace trident::quantization
