// int8 and int4 weights in GGUF's Q8_0 and Q4_0 (quantization/ggml_weight.h): the codes and
// scales are ggml's reference quantizers' bit for bit (a transcription of ggml-quants.c here,
// with F16C's conversion as ggml uses on x86), dequantization is ggml's, the fused decode kernel
// on every path this CPU has and the tiled prefill path equal a float64 product with the
// dequantized weight and do not change with the thread count, bad weights are refused by name, a
// device is refused, and a model whose linear layers are quantized computes what the same model
// with the dequantized weights computes, with their full-precision memory released. Also prints
// the error comparison behind Note [Q8_0 rather than per-channel int8].
#include <gtest/gtest.h>

#include <immintrin.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "autograd/grad_mode.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/views.h"
#include "kernels/cpu/ggml_block_gemm.h"
#include "kernels/cpu/ggml_block_matvec.h"
#include "kernels/cpu/ggml_blocks.h"
#include "models/registry.h"
#include "quantization/ggml_weight.h"
#include "quantization/quantize_layers.h"
#include "quantization/quantized_matmul.h"
#include "support/emulated_device.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::quantization {
namespace {

using kernels::cpu::GgmlBlockType;
using trident::testing::emulated_device;
using trident::testing::error_of;

// ---- ggml-quants.c, transcribed (block structs as ggml-common.h declares them) ----
struct block_q8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct block_q4_0 {
  uint16_t d;
  uint8_t qs[16];
};
uint16_t GGML_FP32_TO_FP16(float f) { return _cvtss_sh(f, 0); }  // ggml on x86 with F16C
float GGML_FP16_TO_FP32(uint16_t h) { return _cvtsh_ss(h); }
// Each float operation of ggml's C code rounded on its own, whatever the compiler fuses: a
// float product or sum computed exactly in double, then rounded once (Note [ggml's rounding
// without fused multiply-adds]).
float mul(float a, float b) { return static_cast<float>(static_cast<double>(a) * static_cast<double>(b)); }
float add(float a, float b) { return static_cast<float>(static_cast<double>(a) + static_cast<double>(b)); }

void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t k) {
  const int nb = static_cast<int>(k / 32);
  for (int i = 0; i < nb; i++) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(x[i * 32 + j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = GGML_FP32_TO_FP16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(mul(x[i * 32 + j], id)));
  }
}

void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t k) {
  const int qk = 32, nb = static_cast<int>(k / qk);
  for (int i = 0; i < nb; i++) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < qk; j++) {
      const float v = x[i * qk + j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = GGML_FP32_TO_FP16(d);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = mul(x[i * qk + 0 + j], id);
      const float x1 = mul(x[i * qk + qk / 2 + j], id);
      const uint8_t xi0 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(add(x0, 8.5f)))));
      const uint8_t xi1 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(add(x1, 8.5f)))));
      y[i].qs[j] = xi0;
      y[i].qs[j] |= xi1 << 4;
    }
  }
}

void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; i++)
    for (int j = 0; j < 32; ++j) y[i * 32 + j] = x[i].qs[j] * GGML_FP16_TO_FP32(x[i].d);
}

void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; i++) {
    const float d = GGML_FP16_TO_FP32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[i * 32 + j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[i * 32 + j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}
// ---- end of the transcription ----

// Weights that reach every branch: Gaussian rows, outliers, an all-zero block, a block whose
// largest magnitude is negative, exact ties of Q4_0's x / d + 8.5 and Q8_0's rounding.
std::vector<float> hard_weights(int64_t rows, int64_t cols, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> w = to_vector<float>(randn({rows, cols}, gen));
  for (size_t i = 0; i < w.size(); i += 97) w[i] *= 25.0f;
  for (int j = 0; j < 32; ++j) w[static_cast<size_t>(cols + j)] = 0.0f;  // row 1, block 0
  w[static_cast<size_t>(2 * cols + 5)] = -100.0f;                       // row 2, block 0: max < 0
  for (int j = 0; j < 32; ++j) w[static_cast<size_t>(3 * cols + j)] = static_cast<float>(j - 16) * 0.5f;  // on a grid
  return w;
}

// Stored (ggml's rows) -> held (panels of 16 rows) -> stored gives the same bytes, and the last
// panel's rows past the weight are zero codes and zero scales.
void expect_round_trip(const GgmlWeight& q) {
  const std::vector<std::pair<std::string, Tensor>> stored = q.stored();
  const GgmlWeight back = GgmlWeight::from_stored(q.type(), DType::kF32, {stored[0].second, stored[1].second});
  const std::vector<std::pair<std::string, Tensor>> again = back.stored();
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(again[i].second.shape(), stored[i].second.shape());
    EXPECT_EQ(std::memcmp(again[i].second.raw_data(), stored[i].second.raw_data(),
                          static_cast<size_t>(stored[i].second.numel()) * element_size(stored[i].second.dtype())),
              0)
        << stored[i].first;
  }
  const kernels::cpu::GgmlPanels w = back.panels();
  for (int64_t r = w.rows; r < w.panels() * kernels::cpu::kGgmlPanelRows; ++r)
    for (int64_t b = 0; b < w.blocks(); ++b) {
      ASSERT_EQ(w.scale(r, b), 0) << "padding row " << r;
      for (int64_t j = 0; j < kernels::cpu::ggml_code_bytes(w.type); ++j) ASSERT_EQ(w.code_byte(r, b, j), 0);
    }
}

TEST(GgmlWeight, Q8_0IsGgmlsReferenceBitForBit) {
  const int64_t rows = 37, cols = 320;
  const std::vector<float> w = hard_weights(rows, cols, 1);
  const GgmlWeight q = GgmlWeight::quantize(GgmlBlockType::kQ8_0, from_vector(w, {rows, cols}));
  std::vector<block_q8_0> ref(static_cast<size_t>(rows * cols / 32));
  for (int64_t r = 0; r < rows; ++r) quantize_row_q8_0_ref(w.data() + r * cols, ref.data() + r * cols / 32, cols);
  const std::vector<std::pair<std::string, Tensor>> stored = q.stored();
  const auto* codes = static_cast<const uint8_t*>(stored[0].second.raw_data());
  const auto* scales = static_cast<const uint16_t*>(stored[1].second.raw_data());
  size_t differ = 0;
  for (size_t b = 0; b < ref.size(); ++b) {
    differ += scales[b] != ref[b].d ? 1 : 0;
    differ += std::memcmp(codes + b * 32, ref[b].qs, 32) != 0 ? 1 : 0;
  }
  EXPECT_EQ(differ, 0u);
  expect_round_trip(q);
  std::vector<float> want(w.size());
  dequantize_row_q8_0(ref.data(), want.data(), static_cast<int64_t>(w.size()));
  EXPECT_EQ(to_vector<float>(q.dequantize()), want);
  EXPECT_EQ(q.bytes(), rows * cols / 32 * 34);  // the stored size: 37 rows, not 3 panels' 48
}

TEST(GgmlWeight, Q4_0IsGgmlsReferenceBitForBit) {
  const int64_t rows = 37, cols = 320;
  std::vector<float> w = hard_weights(rows, cols, 2);
  // Row 4, block 0: x / d + 8.5 exactly k + 0.5 and k for several codes (max = -8: d = 1).
  for (int j = 0; j < 32; ++j) w[static_cast<size_t>(4 * cols + j)] = j == 0 ? -8.0f : static_cast<float>(j % 17 - 8) * 0.5f;
  const GgmlWeight q = GgmlWeight::quantize(GgmlBlockType::kQ4_0, from_vector(w, {rows, cols}));
  std::vector<block_q4_0> ref(static_cast<size_t>(rows * cols / 32));
  for (int64_t r = 0; r < rows; ++r) quantize_row_q4_0_ref(w.data() + r * cols, ref.data() + r * cols / 32, cols);
  const std::vector<std::pair<std::string, Tensor>> stored = q.stored();
  const auto* codes = static_cast<const uint8_t*>(stored[0].second.raw_data());
  const auto* scales = static_cast<const uint16_t*>(stored[1].second.raw_data());
  size_t differ = 0;
  for (size_t b = 0; b < ref.size(); ++b) {
    differ += scales[b] != ref[b].d ? 1 : 0;
    differ += std::memcmp(codes + b * 16, ref[b].qs, 16) != 0 ? 1 : 0;
  }
  EXPECT_EQ(differ, 0u);
  expect_round_trip(q);
  std::vector<float> want(w.size());
  dequantize_row_q4_0(ref.data(), want.data(), static_cast<int64_t>(w.size()));
  EXPECT_EQ(to_vector<float>(q.dequantize()), want);
  EXPECT_EQ(q.bytes(), rows * cols / 32 * 18);
  // Dequantizing a range that starts and ends inside blocks.
  EXPECT_EQ(to_vector<float>(q.dequantize(45, 1000, DType::kF32)),
            std::vector<float>(want.begin() + 45, want.begin() + 1000));
}

double relative_rms_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * double(a[i] - b[i]);
    ref += a[i] * double(a[i]);
  }
  return std::sqrt(err / ref);
}

// int8 with one scale per output row (absmax / 127, round to nearest): the issue's "per output
// channel", for Note [Q8_0 rather than per-channel int8].
std::vector<float> per_channel_int8(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> out(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[static_cast<size_t>(r * cols + c)]));
    const float d = amax / 127.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      out[i] = d > 0 ? std::round(w[i] / d) * d : 0.0f;
    }
  }
  return out;
}

TEST(GgmlWeight, Q8_0IsMoreAccurateThanPerChannelInt8) {
  const int64_t rows = 768, cols = 768;
  Generator gen(7);
  std::vector<float> w = to_vector<float>(randn({rows, cols}, gen));
  for (float& v : w) v *= 0.02f;
  const std::vector<float> plain = w;
  for (size_t i = 0; i < w.size(); i += 1000) w[i] *= 10.0f;  // 0.1% outliers
  for (const auto& [name, v] : {std::pair<const char*, const std::vector<float>*>{"gaussian", &plain}, {"0.1% outliers x10", &w}}) {
    const std::vector<float> q8 = to_vector<float>(GgmlWeight::quantize(GgmlBlockType::kQ8_0, from_vector(*v, {rows, cols})).dequantize());
    const std::vector<float> q4 = to_vector<float>(GgmlWeight::quantize(GgmlBlockType::kQ4_0, from_vector(*v, {rows, cols})).dequantize());
    const double e8 = relative_rms_error(*v, q8), ec = relative_rms_error(*v, per_channel_int8(*v, rows, cols));
    const double e4 = relative_rms_error(*v, q4);
    std::printf("relative RMS error, %s 768x768: Q8_0 %.5f, per-channel int8 %.5f, Q4_0 %.5f\n", name, e8, ec, e4);
    EXPECT_LT(e8, ec);
    EXPECT_LT(e4, 0.12);
  }
}

TEST(GgmlWeight, RefusesWhatItCannotStoreNamingIt) {
  std::vector<float> v(64 * 2, 0.5f);
  v[70] = NAN;
  const std::string e = error_of([&] { GgmlWeight::quantize(GgmlBlockType::kQ8_0, from_vector(v, {2, 64}), "h.0.mlp.c_fc.weight"); });
  EXPECT_NE(e.find("'h.0.mlp.c_fc.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("element 70"), std::string::npos) << e;
  const std::string e2 = error_of([&] { GgmlWeight::quantize(GgmlBlockType::kQ4_0, zeros({4, 48}), "lm_head.weight"); });
  EXPECT_NE(e2.find("48 input features, not a multiple of the block of 32"), std::string::npos) << e2;
  const std::string e3 = error_of([&] { GgmlWeight::quantize(GgmlBlockType::kQ4_0, full({2, 32}, 1e7f), "w"); });
  EXPECT_NE(e3.find("overflows fp16"), std::string::npos) << e3;
  const GgmlWeight q = GgmlWeight::quantize(GgmlBlockType::kQ8_0, zeros({2, 32}));
  const std::string e4 = error_of([&] { (void)q.to(Device::cuda()); });
  EXPECT_NE(e4.find("run on the CPU only for now"), std::string::npos) << e4;
}

// y (M, rows) = x W^T in float64, W the dequantized weight; and the bound of an fp32 sum's
// rounding for each output (Tolerance's rule: eps x sqrt(K) x the sum of |terms|, times 4).
void reference_product(const std::vector<float>& x, int64_t M, const std::vector<float>& w, int64_t rows, int64_t cols,
                       std::vector<double>& y, std::vector<double>& tol) {
  y.assign(static_cast<size_t>(M * rows), 0.0);
  tol.assign(y.size(), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0.0, a = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double t = double(x[static_cast<size_t>(m * cols + c)]) * double(w[static_cast<size_t>(r * cols + c)]);
        s += t;
        a += std::fabs(t);
      }
      y[static_cast<size_t>(m * rows + r)] = s;
      tol[static_cast<size_t>(m * rows + r)] = 4.0 * 1.2e-7 * std::sqrt(double(cols)) * a + 1e-30;
    }
}

// x's rows as the decode kernels see them: quantized to Q8_0 by ggml's reference (the
// transcription above) and dequantized (Note [Integer dot products at decode]).
std::vector<float> q8_0_round_trip(const std::vector<float>& x) {
  std::vector<block_q8_0> blocks(x.size() / 32);
  quantize_row_q8_0_ref(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
  std::vector<float> out(x.size());
  dequantize_row_q8_0(blocks.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

// Every path of the row quantizer the products use (Note [Q8_0 activations in vectors]) against
// the reference: Gaussian rows at several scales, outliers, a zero block, exact ties of roundf
// (amax 127: id = 1, values k + 0.5 of both signs) and values an ulp either side of them, a
// block whose scale is an fp16 subnormal; 40 blocks: two groups of 16 for AVX-512 (Note
// [Sixteen blocks at a time]) and 8 after them.
TEST(GgmlWeight, Q8_0RowQuantizerIsGgmlsReferenceOnEveryPath) {
  const int64_t cols = 32 * 40;
  Generator gen(17);
  std::vector<float> x = to_vector<float>(randn({cols}, gen));
  for (int64_t b = 0; b < cols / 32; ++b)
    for (int64_t j = 0; j < 32; ++j) x[static_cast<size_t>(b * 32 + j)] *= std::ldexp(1.0f, static_cast<int>(b % 13) - 6);
  for (size_t i = 0; i < x.size(); i += 53) x[i] *= 40.0f;
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(4 * 32 + j)] *= 1e-5f;  // an fp16-subnormal scale
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(32 + j)] = 0.0f;
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(64 + j)] = j == 0 ? 127.0f : static_cast<float>(j - 16) + 0.5f;
  for (int j = 0; j < 32; ++j) {
    const float tie = static_cast<float>(j % 16 - 8) + 0.5f;
    x[static_cast<size_t>(96 + j)] = j == 0 ? -127.0f : std::nextafter(tie, j < 16 ? 1000.0f : -1000.0f);
  }
  std::vector<block_q8_0> want(static_cast<size_t>(cols / 32));
  quantize_row_q8_0_ref(x.data(), want.data(), cols);
  using kernels::cpu::GgmlQuantizeIsa;
  for (const GgmlQuantizeIsa isa : {GgmlQuantizeIsa::kScalar, GgmlQuantizeIsa::kAvx2, GgmlQuantizeIsa::kAvx512}) {
    if (!kernels::cpu::ggml_quantize_supports(isa)) {
      std::printf("this CPU has no path %d: not checked\n", static_cast<int>(isa));
      continue;
    }
    std::vector<uint8_t> codes(static_cast<size_t>(cols));
    std::vector<uint16_t> scales(static_cast<size_t>(cols / 32));
    std::vector<int32_t> sums(static_cast<size_t>(cols / 32));
    kernels::cpu::ggml_quantize_q8_0_row(isa, x.data(), cols, codes.data(), scales.data(), sums.data());
    for (int64_t b = 0; b < cols / 32; ++b) {
      const block_q8_0& w = want[static_cast<size_t>(b)];
      ASSERT_EQ(std::memcmp(codes.data() + b * 32, w.qs, 32), 0) << "path " << static_cast<int>(isa) << ", block " << b;
      ASSERT_EQ(scales[static_cast<size_t>(b)], w.d) << "path " << static_cast<int>(isa) << ", block " << b;
      int32_t sum = 0;
      for (const int8_t q : w.qs) sum += q;
      ASSERT_EQ(sums[static_cast<size_t>(b)], sum) << "path " << static_cast<int>(isa) << ", block " << b;
    }
  }
}

class GgmlProduct : public ::testing::TestWithParam<GgmlBlockType> {};

// y (M rows of ldy floats) against the float64 product (M x rows: want, within tol), and its
// columns past `rows` untouched (NaN).
void expect_product(const std::vector<float>& y, int64_t M, int64_t rows, int64_t ldy, const std::vector<double>& want,
                    const std::vector<double>& tol, const std::string& what) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < ldy; ++r) {
      const float v = y[static_cast<size_t>(m * ldy + r)];
      if (r >= rows) {
        ASSERT_TRUE(std::isnan(v)) << what << ": row " << m << ", column " << r << " past the product was written";
        continue;
      }
      const size_t i = static_cast<size_t>(m * rows + r);
      ASSERT_NEAR(v, want[i], tol[i]) << what << ", element " << m << ", " << r;
    }
}

TEST_P(GgmlProduct, ActivationsAreGgmlsQ8_0BlocksBitForBit) {
  Generator gen(6);
  const int64_t M = 3, cols = 352;  // 11 blocks
  std::vector<float> x = to_vector<float>(randn({M, cols}, gen));
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(cols + j)] = 0.0f;                            // a zero block
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(2 * cols + j)] = static_cast<float>(j - 16) * 0.5f;  // ties
  const kernels::cpu::GgmlQ8Activations a(GetParam(), x.data(), M, cols);
  const int32_t offset = GetParam() == GgmlBlockType::kQ8_0 ? 128 : 8;
  for (int64_t m = 0; m < M; ++m) {
    std::vector<block_q8_0> want(static_cast<size_t>(cols / 32));
    quantize_row_q8_0_ref(x.data() + m * cols, want.data(), cols);
    for (int64_t b = 0; b < cols / 32; ++b) {
      const block_q8_0& w = want[static_cast<size_t>(b)];
      ASSERT_EQ(std::memcmp(a.codes(m) + b * 32, w.qs, 32), 0) << "row " << m << ", block " << b;
      ASSERT_EQ(a.scale(m, b), GGML_FP16_TO_FP32(w.d)) << "row " << m << ", block " << b;
      int32_t sum = 0;
      for (const int8_t q : w.qs) sum += q;
      ASSERT_EQ(a.block_corrections(m)[b], -offset * sum) << "row " << m << ", block " << b;
      ASSERT_EQ(a.block_scales(m)[b], a.scale(m, b));
    }
  }
  const std::string e = error_of([&] { kernels::cpu::GgmlQ8Activations(GetParam(), x.data(), M, 48); });
  EXPECT_NE(e.find("48 columns are not whole blocks of 32"), std::string::npos) << e;
  const std::string e2 = error_of([&] { kernels::cpu::GgmlQ8Activations(GetParam(), x.data(), 0, 32); });
  EXPECT_NE(e2.find("0 rows of x (at least 1)"), std::string::npos) << e2;
}

TEST_P(GgmlProduct, FusedKernelsOnEveryPathEqualTheFloat64ProductOfTheQuantizedRows) {
  const int64_t rows = 70;
  Generator gen(4);
  for (const int64_t cols : {384, 352}) {  // 12 and 11 blocks
    const GgmlWeight q = GgmlWeight::quantize(GetParam(), from_vector(hard_weights(rows, cols, 3), {rows, cols}));
    const std::vector<float> wd = to_vector<float>(q.dequantize());
    for (const auto isa :
         {kernels::cpu::MatvecIsa::kScalar, kernels::cpu::MatvecIsa::kAvx2, kernels::cpu::MatvecIsa::kAvx512}) {
      if (!kernels::cpu::ggml_matvec_supports(isa)) {
        std::printf("this CPU has no %s: not checked\n", kernels::cpu::matvec_isa_name(isa));
        continue;
      }
      for (int64_t M = 1; M <= kernels::cpu::kGgmlMatvecMaxRows; ++M) {
        std::vector<float> x = to_vector<float>(randn({M, cols}, gen));
        x[0] = 40.0f;  // an outlier: its block's other codes are small
        const kernels::cpu::GgmlQ8Activations xq(GetParam(), x.data(), M, cols);
        std::vector<double> want, tol;
        reference_product(q8_0_round_trip(x), M, wd, rows, cols, want, tol);
        // Into a y whose rows are longer than the product's: the columns past it stay untouched
        // (the last panel holds 6 rows), and each panel range gives the same bits.
        const int64_t ldy = rows + 3;
        std::vector<float> y(static_cast<size_t>(M * ldy), NAN), split(y);
        const kernels::cpu::GgmlPanels w = q.panels();
        kernels::cpu::ggml_block_matvec(isa, xq, w, 0, w.panels(), y.data(), ldy);
        kernels::cpu::ggml_block_matvec(isa, xq, w, 0, 2, split.data(), ldy);
        kernels::cpu::ggml_block_matvec(isa, xq, w, 2, w.panels(), split.data(), ldy);
        ASSERT_EQ(std::memcmp(y.data(), split.data(), y.size() * sizeof(float)), 0);
        expect_product(y, M, rows, ldy, want, tol,
                       std::string(kernels::cpu::matvec_isa_name(isa)) + ", cols " + std::to_string(cols) + ", M " +
                           std::to_string(M));
      }
    }
  }
  const GgmlWeight q = GgmlWeight::quantize(GetParam(), zeros({4, 64}));
  const std::vector<float> x(64, 1.0f);
  const GgmlBlockType other = GetParam() == GgmlBlockType::kQ8_0 ? GgmlBlockType::kQ4_0 : GgmlBlockType::kQ8_0;
  const kernels::cpu::GgmlQ8Activations xq(other, x.data(), 1, 64);
  std::vector<float> y(4);
  const std::string e = error_of([&] {
    kernels::cpu::ggml_block_matvec(kernels::cpu::MatvecIsa::kScalar, xq, q.panels(), 0, 1, y.data(), 4);
  });
  EXPECT_NE(e.find("activations prepared for"), std::string::npos) << e;
  // More rows than decode's are the prefill kernel's.
  const std::vector<float> x9(9 * 64, 1.0f);
  const kernels::cpu::GgmlQ8Activations xq9(GetParam(), x9.data(), 9, 64);
  std::vector<float> y9(9 * 4);
  const std::string e2 = error_of([&] {
    kernels::cpu::ggml_block_matvec(kernels::cpu::MatvecIsa::kScalar, xq9, q.panels(), 0, 1, y9.data(), 4);
  });
  EXPECT_NE(e2.find("9 rows of x (1 to 8"), std::string::npos) << e2;
}

// Prefill's kernel (Note [Integer GEMM at prefill]) on every path this CPU runs: even and odd
// block counts, rows of x not a multiple of its register tile (4), weight rows not a multiple of
// its panels (16, taken 2 at a time: 50 = 32 + 16 + 2 and 70 = 64 + 6), into a y whose rows are
// longer than the product's (the columns past it stay untouched); the float64 product of the
// dequantized weight and the Q8_0-rounded x, within fp32 summation error; and the same bits on
// 1, 2 and 3 threads.
TEST_P(GgmlProduct, PrefillKernelOnEveryPathEqualsTheFloat64ProductOfTheQuantizedRows) {
  Generator gen(8);
  const int threads = num_threads();
  for (const int64_t rows : {50, 70})
    for (const int64_t cols : {384, 352}) {
      const GgmlWeight q = GgmlWeight::quantize(GetParam(), from_vector(hard_weights(rows, cols, 5), {rows, cols}));
      const std::vector<float> wd = to_vector<float>(q.dequantize());
      for (const int64_t M : {9, 11, 30, 33}) {
        std::vector<float> x = to_vector<float>(randn({M, cols}, gen));
        x[static_cast<size_t>(cols + 5)] = -40.0f;  // an outlier: its block's other codes are small
        const kernels::cpu::GgmlQ8Activations xq(GetParam(), x.data(), M, cols);
        std::vector<double> want, tol;
        reference_product(q8_0_round_trip(x), M, wd, rows, cols, want, tol);
        const int64_t ldy = rows + 3;
        for (const auto isa :
             {kernels::cpu::MatvecIsa::kScalar, kernels::cpu::MatvecIsa::kAvx2, kernels::cpu::MatvecIsa::kAvx512}) {
          if (!kernels::cpu::ggml_matvec_supports(isa)) {
            std::printf("this CPU has no %s: not checked\n", kernels::cpu::matvec_isa_name(isa));
            continue;
          }
          std::vector<float> first;
          for (const int n : {1, 2, 3}) {
            set_num_threads(n);
            std::vector<float> y(static_cast<size_t>(M * ldy), NAN);
            kernels::cpu::ggml_block_gemm(isa, xq, q.panels(), y.data(), ldy);
            if (first.empty()) {
              expect_product(y, M, rows, ldy, want, tol,
                             std::string(kernels::cpu::matvec_isa_name(isa)) + ", rows " + std::to_string(rows) +
                                 ", cols " + std::to_string(cols) + ", M " + std::to_string(M));
              first = y;
            } else {
              ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
                  << kernels::cpu::matvec_isa_name(isa) << ", M " << M << ": " << n << " threads changed the result";
            }
          }
        }
      }
    }
  set_num_threads(threads);
  const GgmlWeight q = GgmlWeight::quantize(GetParam(), zeros({4, 64}));
  const std::vector<float> x(9 * 64, 1.0f);
  const GgmlBlockType other = GetParam() == GgmlBlockType::kQ8_0 ? GgmlBlockType::kQ4_0 : GgmlBlockType::kQ8_0;
  const kernels::cpu::GgmlQ8Activations xq(other, x.data(), 9, 64);
  std::vector<float> y(9 * 4);
  const std::string e = error_of([&] {
    kernels::cpu::ggml_block_gemm(kernels::cpu::MatvecIsa::kScalar, xq, q.panels(), y.data(), 4);
  });
  EXPECT_NE(e.find("activations prepared for"), std::string::npos) << e;
}

// What quantizing the activations costs: the relative RMS error of the fused product against the
// float64 product of the same quantized weight with the unquantized x, beside the weight's own
// error (the float64 product with the fp32 weight). Gaussian x and weights, GPT-2's widths.
TEST_P(GgmlProduct, QuantizingTheActivationsAddsLessErrorThanTheWeightsOwn) {
  Generator gen(7);
  const int64_t rows = 256, cols = 768, M = 4;
  const Tensor w = randn({rows, cols}, gen);
  const GgmlWeight q = GgmlWeight::quantize(GetParam(), w);
  const std::vector<float> wf = to_vector<float>(w), wd = to_vector<float>(q.dequantize());
  const std::vector<float> x = to_vector<float>(randn({M, cols}, gen));
  std::vector<double> exact, weight_only, tol;
  reference_product(x, M, wf, rows, cols, exact, tol);
  reference_product(x, M, wd, rows, cols, weight_only, tol);
  const kernels::cpu::GgmlQ8Activations xq(GetParam(), x.data(), M, cols);
  std::vector<float> y(static_cast<size_t>(M * rows));
  kernels::cpu::ggml_block_matvec(kernels::cpu::ggml_matvec_isa(), xq, q.panels(), 0, q.panels().panels(), y.data(),
                                  rows);
  double e_act = 0, e_w = 0, norm = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    e_act += (y[i] - weight_only[i]) * (y[i] - weight_only[i]);
    e_w += (weight_only[i] - exact[i]) * (weight_only[i] - exact[i]);
    norm += exact[i] * exact[i];
  }
  e_act = std::sqrt(e_act / norm);
  e_w = std::sqrt(e_w / norm);
  std::printf("%s: relative RMS error of the weights %.3f%%, added by Q8_0 activations %.3f%%\n",
              kernels::cpu::ggml_block_type_name(GetParam()), 100 * e_w, 100 * e_act);
  EXPECT_GT(e_act, 0.0);       // the activations were rounded
  EXPECT_LT(e_act, 0.006);     // Q8_0's own bound on Gaussian rows (~0.5%)
  EXPECT_LT(e_act, 1.5 * e_w);  // of the order of the weight's own rounding, or far below (Q4_0)
}

TEST_P(GgmlProduct, DecodeAndPrefillPathsEqualTheFloat64ProductOnAnyThreadCount) {
  // 1100 x 320: 1100 rows are 34 steps of 32 and 12 (half a panel) for prefill's threads.
  const int64_t rows = 1100, cols = 320;
  Generator gen(5);
  const GgmlWeight q = GgmlWeight::quantize(GetParam(), randn({rows, cols}, gen));
  const std::vector<float> wd = to_vector<float>(q.dequantize());
  for (const int64_t M : {1, 3, 8, 9, 33}) {  // decode's kernel up to 8 rows, prefill's beyond (x in Q8_0 on both)
    const std::vector<float> x = to_vector<float>(randn({M, cols}, gen));
    std::vector<double> want, tol;
    reference_product(q8_0_round_trip(x), M, wd, rows, cols, want, tol);
    std::vector<float> y1(static_cast<size_t>(M * rows)), y2(y1.size());
    set_num_threads(1);
    quantized_matmul<float>(x.data(), M, q, false, y1.data());
    set_num_threads(2);
    quantized_matmul<float>(x.data(), M, q, false, y2.data());
    for (size_t i = 0; i < y1.size(); ++i) {
      ASSERT_NEAR(y1[i], want[i], tol[i]) << "M " << M << ", element " << i;
      ASSERT_EQ(y1[i], y2[i]) << "M " << M << ": the thread count changed element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GgmlProduct, ::testing::Values(GgmlBlockType::kQ8_0, GgmlBlockType::kQ4_0),
                         [](const auto& info) { return std::string(kernels::cpu::ggml_block_type_name(info.param)); });

// Tiny models with 32-wide layers (Q8_0's blocks need in % 32 == 0).
models::ModelConfig model_config(const std::string& arch) {
  models::ModelConfig c = arch == "gpt2" ? models::testing::tiny_gpt2() : models::testing::tiny_llama(false);
  c.n_embd = 32;
  if (arch == "llama") c.family_values["intermediate_size"] = int64_t{64};
  return c;
}

class QuantizedModel : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(QuantizedModel, ComputesWhatTheDequantizedModelComputesAndReleasesTheWeights) {
  const auto& [arch, scheme_name] = GetParam();
  const models::ModelConfig cfg = model_config(arch);
  auto q = models::build_model(cfg);
  auto d = models::build_model(cfg);  // same seed: same weights
  q->eval();
  d->eval();
  const QuantScheme& scheme = *find_quant_scheme(scheme_name);
  const std::vector<QuantizedParameter> layers = quantize_layers(*q, scheme, "lm_head");
  const int64_t per_block = arch == "gpt2" ? 4 : 7;
  EXPECT_EQ(layers.size(), static_cast<size_t>(cfg.n_layer * per_block));
  {
    autograd::NoGradGuard no_grad;
    for (const QuantizedParameter& l : layers) {
      const Tensor v = l.weight->dequantize();
      core::copy_(d->parameter(l.param), l.transposed ? core::contiguous(views::transpose(v, 0, 1)) : v);
      EXPECT_EQ(q->parameter(l.param).impl().storage()->nbytes(), 0u) << l.param << ": not released";
      EXPECT_EQ(l.transposed, arch == "gpt2" && scheme.blocks_along_input) << l.param;
    }
  }
  autograd::NoGradGuard no_grad;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2 * 8; ++i) ids.push_back((i * 7 + 3) % cfg.vocab_size);
  for (const int64_t B : {1, 2}) {  // 8 rows of x per product (decode's kernel) and 16 (prefill's)
    const Tensor x = from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + B * 8), {B, 8});
    const std::vector<float> a = to_vector<float>(q->forward(x)), b = to_vector<float>(d->forward(x));
    double err = 0, ref = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      err = std::max(err, double(std::fabs(a[i] - b[i])));
      ref = std::max(ref, double(std::fabs(b[i])));
    }
    // int8 and int4 round x to Q8_0 in their products, decode's and prefill's (Note [Integer dot
    // products at decode], Note [Integer GEMM at prefill]): ~0.5% per product, a few products deep.
    const bool rounded = scheme_name != "nf4";
    EXPECT_LE(err, (rounded ? 3e-2 : 1e-5) * ref) << "batch " << B;
  }
  // Quantizing again is refused, naming the weight; an unknown skip item too.
  const std::string e = error_of([&] { quantize_layers(*q, scheme, "lm_head"); });
  EXPECT_NE(e.find("quantized already"), std::string::npos) << e;
  auto m = models::build_model(cfg);
  const std::string e2 = error_of([&] { quantize_layers(*m, scheme, "mlpp"); });
  EXPECT_NE(e2.find("'mlpp' matches no layer"), std::string::npos) << e2;
}

// int8/int4 run on the host only: a model on a device is refused when it is quantized, naming the
// scheme and the device, before any weight is released; NF4 (which has device kernels) quantizes.
TEST(QuantizedModelOnADevice, IsRefusedForHostOnlySchemes) {
  const models::ModelConfig cfg = model_config("gpt2");
  for (const std::string scheme : {"int8", "int4", "nf4"}) {
    auto m = models::build_model(cfg);
    m->to(emulated_device());
    if (scheme == "nf4") {
      EXPECT_EQ(quantize_layers(*m, *find_quant_scheme(scheme), "lm_head").front().weight->device(), emulated_device());
      continue;
    }
    const std::string e = error_of([&] { quantize_layers(*m, *find_quant_scheme(scheme), "lm_head"); });
    EXPECT_NE(e.find(scheme + " (Q"), std::string::npos) << e;
    EXPECT_NE(e.find("run on the CPU only for now"), std::string::npos) << e;
    EXPECT_NE(e.find(emulated_device().str()), std::string::npos) << e;
    for (const auto& [name, p] : m->named_parameters()) EXPECT_GT(p.impl().storage()->nbytes(), 0u) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(FamiliesAndSchemes, QuantizedModel,
                         ::testing::Combine(::testing::Values("gpt2", "llama"), ::testing::Values("int8", "int4", "nf4")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace trident::quantization
