// A mixture-of-experts model under weight quantization (issue #51): the experts' layers are
// quantized like every linear layer, and the sparse MLP then runs each expert through its
// quantized layer (moe/sparse_moe.h: wrapped experts skip the grouped products, which read
// the full-precision weights that quantization releases). Logits stay close to the fp32
// model's; without the fallback they would read released weights.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "models/registry.h"
#include "quantization/quantize_layers.h"
#include "quantization/scheme.h"
#include "support/tiny_model_configs.h"

namespace trident::quantization {
namespace {

TEST(QuantizedExperts, ExpertsAreQuantizedAndTheLogitsStayClose) {
  autograd::NoGradGuard no_grad;
  for (models::ModelConfig cfg : {models::testing::tiny_mixtral(), models::testing::tiny_qwen2_moe()}) {
    // Q8_0's blocks of 32 along every layer's input.
    cfg.n_embd = 64;
    cfg.family_values["intermediate_size"] = int64_t{64};
    cfg.family_values["moe_intermediate_size"] = int64_t{32};
    if (cfg.family_int("shared_expert_intermediate_size") > 0) cfg.family_values["shared_expert_intermediate_size"] = int64_t{32};
    SCOPED_TRACE(cfg.family_bool("qkv_bias") ? "qwen2_moe" : "mixtral");
    const std::unique_ptr<models::CausalLM> model = models::build_model(cfg);
    model->eval();
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 2 * 8; ++i) ids.push_back((i * 7 + 3) % cfg.vocab_size);
    const Tensor idx = from_vector(ids, {2, 8});
    const std::vector<float> full = to_vector<float>(model->forward(idx));
    const std::vector<QuantizedParameter> q = quantize_layers(*model, *find_quant_scheme("int8"), "");
    int64_t experts = 0;
    for (const QuantizedParameter& p : q) experts += p.param.find(".experts.") != std::string::npos ? 1 : 0;
    EXPECT_GT(experts, 0);
    const std::vector<float> quantized = to_vector<float>(model->forward(idx));
    ASSERT_EQ(quantized.size(), full.size());
    double err = 0, scale = 0;
    for (size_t i = 0; i < full.size(); ++i) {
      err = std::max(err, double(std::fabs(full[i] - quantized[i])));
      scale = std::max(scale, double(std::fabs(full[i])));
    }
    EXPECT_LT(err, 0.05 * scale);  // Q8_0 on every layer: about 1% of the logits' range
    EXPECT_GT(err, 0.0);           // the quantized layers did run
  }
}

}  // namespace
}  // namespace trident::quantization
