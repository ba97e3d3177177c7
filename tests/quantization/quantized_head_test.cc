// The LM head under quantization (Note [What stays in full precision]): a head tied to the
// embedding (GPT-2's wte) is quantized as a copy that only the head's product reads, the table
// staying fp32 for lookups; an untied head is a linear layer like the others; int8 takes the head
// by default (as llama.cpp's Q8_0 files), the other schemes leave it.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "models/registry.h"
#include "nn/embedding.h"
#include "quantization/quantize_layers.h"
#include "quantization/quantized_view.h"
#include "quantization/scheme.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::quantization {
namespace {

using trident::testing::error_of;

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (const float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(QuantizedHead, TheHeadReadsTheQuantizedCopyAndLookupsTheTable) {
  autograd::NoGradGuard no_grad;
  Generator gen(7);
  nn::Embedding table(40, 64);
  core::copy_(table.parameter("weight"), randn({40, 64}, gen));
  const std::vector<float> rows = to_vector<float>(table.weight());
  const auto q = find_quant_scheme("int8")->quantize(table.weight(), kTiedHeadParam);
  add_quantized_head(table, q, kTiedHeadParam);
  // 16 rows: prefill's kernel, which rounds h to Q8_0 (Note [Integer GEMM at prefill]); h on
  // Q8_0's grid (codes / 64, each block holding a 127) makes the product exact to fp32 rounding.
  std::vector<float> hv(16 * 64);
  for (size_t i = 0; i < hv.size(); ++i) hv[i] = static_cast<float>(i % 32 == 0 ? 127 : int((i * 37) % 255) - 127) / 64.0f;
  const Tensor h = from_vector(hv, {16, 64});
  const std::vector<float> got = to_vector<float>(table.attend(h));
  const std::vector<float> want = to_vector<float>(trident::linear(h, q->dequantize()));
  EXPECT_LE(max_abs_difference(got, want), 1e-5 * max_abs(want));
  // ... and not the table's own product: the head did change.
  EXPECT_GT(max_abs_difference(got, to_vector<float>(trident::linear(h, table.weight()))), 0.0);
  // Lookups read the fp32 table, bit for bit.
  const std::vector<float> looked = to_vector<float>(table.forward(from_vector(std::vector<int64_t>{3, 0, 39}, {3})));
  for (int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(looked[static_cast<size_t>(c)], rows[static_cast<size_t>(3 * 64 + c)]);
    EXPECT_EQ(looked[static_cast<size_t>(2 * 64 + c)], rows[static_cast<size_t>(39 * 64 + c)]);
  }
  const std::string again = error_of([&] { add_quantized_head(table, q, kTiedHeadParam); });
  EXPECT_NE(again.find("'lm_head.weight' is quantized already"), std::string::npos) << again;
  const std::string shape = error_of([&] {
    nn::Embedding other(40, 32);
    add_quantized_head(other, q, kTiedHeadParam);
  });
  EXPECT_NE(shape.find("'lm_head.weight' is (40, 32)"), std::string::npos) << shape;
}

models::ModelConfig config(const std::string& arch) {
  models::ModelConfig c = arch == "gpt2" ? models::testing::tiny_gpt2() : models::testing::tiny_llama(false);
  c.n_embd = 32;
  if (arch == "llama") c.family_values["intermediate_size"] = int64_t{64};
  return c;
}

// GPT-2 with its tied head quantized against the same model with the head left fp32: one more
// quantized layer, the table kept, logits within the head's Q8_0 error and not equal.
TEST(QuantizedHead, ATiedHeadIsAQuantizedCopyBesideTheTable) {
  const models::ModelConfig cfg = config("gpt2");
  auto with_head = models::build_model(cfg);
  auto without = models::build_model(cfg);  // same seed: same weights
  with_head->eval();
  without->eval();
  const QuantScheme& int8 = *find_quant_scheme("int8");
  EXPECT_EQ(int8.default_skip, "");
  EXPECT_EQ(find_quant_scheme("int4")->default_skip, "lm_head");
  const std::vector<QuantizedParameter> a = quantize_layers(*with_head, int8, int8.default_skip);
  const std::vector<QuantizedParameter> b = quantize_layers(*without, int8, "lm_head");
  ASSERT_EQ(a.size(), b.size() + 1);
  EXPECT_EQ(a.back().param, "lm_head.weight");
  EXPECT_EQ(a.back().tied_to, "wte.weight");
  EXPECT_FALSE(a.back().transposed);
  EXPECT_EQ(a.back().weight->shape(), with_head->parameter("wte.weight").shape());
  EXPECT_GT(with_head->parameter("wte.weight").impl().storage()->nbytes(), 0u) << "the table must stay for lookups";
  for (const QuantizedParameter& l : b) EXPECT_TRUE(l.tied_to.empty()) << l.param;
  autograd::NoGradGuard no_grad;
  for (const int64_t B : {1, 2}) {  // the fused decode kernels (one row) and the tiled path (16 rows)
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < B * 8; ++i) ids.push_back((i * 7 + 3) % cfg.vocab_size);
    const Tensor x = from_vector(ids, {B, 8});
    const std::vector<float> p = to_vector<float>(with_head->forward(x)), r = to_vector<float>(without->forward(x));
    const double err = max_abs_difference(p, r);
    EXPECT_GT(err, 0.0) << "batch " << B << ": the head did not change";
    EXPECT_LE(err, 3e-2 * max_abs(r)) << "batch " << B;
  }
  // Applying the stored copy to a fresh model gives the same logits (what loading does).
  auto loaded = models::build_model(cfg);
  loaded->eval();
  for (const QuantizedParameter& l : a) apply_quantized_layer(*loaded, l);
  const Tensor x = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
  EXPECT_EQ(to_vector<float>(loaded->forward(x)), to_vector<float>(with_head->forward(x)));
  // A tied copy names a table the model does not tie its head to: refused, naming both.
  QuantizedParameter wrong = a.back();
  wrong.tied_to = "wpe.weight";
  const std::string e = error_of([&] { apply_quantized_layer(*models::build_model(cfg), wrong); });
  EXPECT_NE(e.find("'lm_head.weight' is a head tied to 'wpe.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("tied to 'wte.weight'"), std::string::npos) << e;
  const std::string again = error_of([&] { quantize_layers(*with_head, int8, ""); });
  EXPECT_NE(again.find("quantized already"), std::string::npos) << again;
}

// An untied head (LLaMA's lm_head) is a linear layer: quantized unless skipped, nothing tied.
TEST(QuantizedHead, AnUntiedHeadIsALinearLayer) {
  const models::ModelConfig cfg = config("llama");
  auto m = models::build_model(cfg);
  ASSERT_FALSE(m->tied_head_weight());
  const std::vector<QuantizedParameter> all = quantize_layers(*m, *find_quant_scheme("int8"), "");
  EXPECT_EQ(all.back().param, "lm_head.weight");
  EXPECT_TRUE(all.back().tied_to.empty());
  EXPECT_EQ(m->parameter("lm_head.weight").impl().storage()->nbytes(), 0u) << "an untied head is released";
  auto s = models::build_model(cfg);
  EXPECT_EQ(quantize_layers(*s, *find_quant_scheme("int8"), "lm_head").size() + 1, all.size());
}

}  // namespace
}  // namespace trident::quantization
