// LoRA applied from outside a model (issue #48): the adapted model starts as the base exactly,
// only the adapters train, A is drawn as PEFT draws it, targets follow PEFT's rule (and bad ones
// are errors naming them), PEFT's files load back bit for bit and their config is refused where
// trident does not implement it, and the merged weight gives the adapter model's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "adapters/lora.h"
#include "adapters/peft_files.h"
#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "models/registry.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::adapters {
namespace {

namespace fs = std::filesystem;
using models::testing::tiny_gpt2;
using models::testing::tiny_llama;

Tensor tokens(const models::ModelConfig& cfg) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2 * 8; ++i) ids.push_back((i * 7 + 3) % cfg.vocab_size);
  return from_vector(ids, {2, 8});
}

using trident::testing::error_of;

LoraOptions lora(const std::string& targets, int64_t r = 4, double alpha = 8.0) {
  LoraOptions o;
  o.r = r;
  o.alpha = alpha;
  o.target_modules = targets;
  o.init_seed = 5;
  return o;
}

// Fills every lora_B with values (B starts at zero, which would hide a wrong product).
void randomize_b(models::CausalLM& m, uint64_t seed) {
  Generator g(seed);
  autograd::NoGradGuard no_grad;
  for (const auto& [name, p] : m.named_parameters())
    if (name.ends_with(".lora_B.weight")) normal_(p, g, 0.0, 0.05);
}

class LoraModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  models::ModelConfig config() const { return GetParam() == "gpt2" ? tiny_gpt2() : tiny_llama(false); }
  // Every linear layer of the family's blocks (GPT-2's c_fc carries a fused GELU).
  std::string all_targets() const {
    return GetParam() == "gpt2" ? "c_attn,c_proj,c_fc" : "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
  }
};

TEST_P(LoraModelTest, StartsAsTheBaseBitForBitAndOnlyAdaptersTrain) {
  const models::ModelConfig cfg = config();
  auto base = models::build_model(cfg);
  auto adapted = models::build_model(cfg);
  const std::vector<LoraLayerInfo> layers = apply_lora(*adapted, lora(all_targets()));
  EXPECT_EQ(layers.size(), static_cast<size_t>(cfg.n_layer * (GetParam() == "gpt2" ? 4 : 7)));
  autograd::NoGradGuard no_grad;
  const std::vector<float> want = to_vector<float>(base->forward(tokens(cfg)));
  const std::vector<float> got = to_vector<float>(adapted->forward(tokens(cfg)));
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "logit " << i;  // B = 0: + 0.0 exactly

  int64_t trainable = 0;
  for (const auto& [name, p] : adapted->named_parameters()) {
    EXPECT_EQ(p.requires_grad(), is_lora_parameter(name)) << name;
    if (!p.requires_grad()) continue;
    trainable += p.numel();
    if (name.ends_with(".lora_B.weight")) {
      for (float v : to_vector<float>(p)) ASSERT_EQ(v, 0.0f) << name;
    } else {  // PEFT's kaiming_uniform_(a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)), and it is drawn
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.size(1)));
      double max_abs = 0.0;
      for (float v : to_vector<float>(p)) max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
      EXPECT_LE(max_abs, bound) << name;
      EXPECT_GT(max_abs, 0.8 * bound) << name;
    }
  }
  int64_t want_trainable = 0;
  for (const LoraLayerInfo& l : layers) want_trainable += 4 * (l.in + l.out);
  EXPECT_EQ(trainable, want_trainable);
}

TEST_P(LoraModelTest, GradientsReachOnlyTheAdapters) {
  const models::ModelConfig cfg = config();
  auto m = models::build_model(cfg);
  (void)apply_lora(*m, lora(all_targets()));
  randomize_b(*m, 3);
  const Tensor x = tokens(cfg);
  const Tensor y = from_vector(std::vector<int64_t>(16, 1), {2, 8});
  autograd::backward(m->loss(x, y));
  for (const auto& [name, p] : m->named_parameters()) {
    EXPECT_EQ(p.grad().has_value(), is_lora_parameter(name)) << name;
    if (p.grad()) {
      double sum = 0;
      for (float v : to_vector<float>(*p.grad())) sum += std::fabs(v);
      EXPECT_GT(sum, 0.0) << name;
    }
  }
}

TEST_P(LoraModelTest, TheMergedWeightGivesTheAdapterModelsLogits) {
  const models::ModelConfig cfg = config();
  auto adapted = models::build_model(cfg);
  auto merged = models::build_model(cfg);
  const LoraOptions o = lora(all_targets());
  const std::vector<LoraLayerInfo> layers = apply_lora(*adapted, o);
  randomize_b(*adapted, 9);
  {
    autograd::NoGradGuard no_grad;
    for (const LoraLayerInfo& l : layers) {
      const Tensor w = merged->parameter(l.path + ".weight");
      core::copy_(w, merge_lora_weight(w, adapted->parameter(l.path + ".lora_A.weight"),
                                       adapted->parameter(l.path + ".lora_B.weight"), o.scaling(), l.in_out));
    }
  }
  autograd::NoGradGuard no_grad;
  const std::vector<float> want = to_vector<float>(adapted->forward(tokens(cfg)));
  const std::vector<float> base = to_vector<float>(models::build_model(cfg)->forward(tokens(cfg)));
  const std::vector<float> got = to_vector<float>(merged->forward(tokens(cfg)));
  double max_diff = 0, max_change = 0, max_abs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    max_change = std::max(max_change, std::fabs(static_cast<double>(base[i]) - want[i]));
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(want[i])));
  }
  EXPECT_GT(max_change, 1e-3) << "the adapters must change the logits for the check to mean anything";
  EXPECT_LE(max_diff, 1e-5 * std::max(1.0, max_abs)) << "merged vs adapter logits";
}

TEST_P(LoraModelTest, PeftFilesLoadBackBitForBit) {
  const models::ModelConfig cfg = config();
  auto m = models::build_model(cfg);
  const LoraOptions o = lora(all_targets(), 8, 16);
  const std::vector<LoraLayerInfo> layers = apply_lora(*m, o);
  randomize_b(*m, 11);
  std::vector<checkpoint::NamedTensor> tensors;
  for (const auto& [name, p] : m->named_parameters())
    if (is_lora_parameter(name)) tensors.push_back({name, p});
  const fs::path dir = fs::temp_directory_path() / ("trident_peft_" + GetParam() + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(write_peft_adapter(dir.string(), cfg, peft_config_json(cfg, o, layers, "base/dir"), tensors).is_ok());

  // PEFT's names and fields.
  std::ifstream in(dir / kPeftConfigFile);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_EQ(j["r"], 8);
  EXPECT_EQ(j["lora_alpha"], 16);
  EXPECT_EQ(j["fan_in_fan_out"], GetParam() == "gpt2");
  EXPECT_EQ(j["base_model_name_or_path"], "base/dir");
  EXPECT_EQ(j["bias"], "none");
  auto read = read_peft_adapter(dir.string());
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  const std::string first = read.value().tensors.front().name;
  EXPECT_EQ(first, GetParam() == "gpt2" ? "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"
                                        : "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");

  auto fresh = models::build_model(cfg);
  auto options = lora_options_for(read.value(), LoraOptions{});
  ASSERT_TRUE(options.is_ok()) << options.status().message();
  (void)apply_lora(*fresh, options.value(), read.value().targets);
  ASSERT_TRUE(load_peft_weights(*fresh, read.value()).is_ok());
  for (const checkpoint::NamedTensor& t : tensors)
    EXPECT_EQ(to_vector<float>(fresh->parameter(t.name)), to_vector<float>(t.tensor)) << t.name;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, LoraModelTest, ::testing::Values("gpt2", "llama"));

TEST(LoraTargets, FollowPeftsRuleAndNameWhatCannotBeAdapted) {
  auto m = models::build_model(tiny_llama(false));
  const size_t L = static_cast<size_t>(tiny_llama(false).n_layer);
  // Suffix names, in trident's or Hugging Face's paths; a glob; all-linear spares the LM head.
  EXPECT_EQ(apply_lora(*models::build_model(tiny_llama(false)), lora("self_attn.q_proj")).size(), L);
  EXPECT_EQ(apply_lora(*models::build_model(tiny_llama(false)), lora("model.layers.1.mlp.up_proj")).size(), 1u);
  EXPECT_EQ(apply_lora(*models::build_model(tiny_llama(false)), lora("layers.0.*_proj")).size(), 7u);
  const std::vector<LoraLayerInfo> all = apply_lora(*models::build_model(tiny_llama(false)), lora("all-linear"));
  EXPECT_EQ(all.size(), 7 * L);
  for (const LoraLayerInfo& l : all) EXPECT_NE(l.path, "lm_head");
  // A regular expression from a PEFT file, over Hugging Face's paths.
  EXPECT_EQ(apply_lora(*models::build_model(tiny_llama(false)), lora("x"),
                       LoraTargets{{}, std::string(R"(model\.layers\.\d+\.self_attn\.(q|v)_proj)")})
                .size(),
            2 * L);

  std::string e = error_of([&] { apply_lora(*m, lora("q_prj")); });
  EXPECT_NE(e.find("lora.target_modules: 'q_prj' matches no layer of the model"), std::string::npos) << e;
  e = error_of([&] { apply_lora(*m, lora("embed_tokens")); });
  EXPECT_NE(e.find("names layer 'embed_tokens', which is not a linear layer"), std::string::npos) << e;
  e = error_of([&] { apply_lora(*m, lora("")); });
  EXPECT_NE(e.find("lora.target_modules is empty"), std::string::npos) << e;
}

TEST(PeftFiles, RefuseWhatTridentDoesNotImplementNamingTheField) {
  const fs::path dir = fs::temp_directory_path() / ("trident_peft_bad_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto error_for = [&](const nlohmann::json& config) {
    std::ofstream(dir / kPeftConfigFile) << config.dump();
    auto r = read_peft_adapter(dir.string());
    return r.is_ok() ? std::string() : r.status().message();
  };
  const nlohmann::json good = {{"peft_type", "LORA"}, {"r", 4}, {"lora_alpha", 8}, {"target_modules", {"q_proj"}}};
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* says;
  };
  for (const Case& c : {Case{"peft_type", "PREFIX_TUNING", "trident reads LoRA adapters"},
                        Case{"r", 0, "the rank must be an integer in [1, 65536]"},
                        Case{"r", 2.5, "the rank must be an integer"},
                        Case{"lora_alpha", -1, "it must be a number > 0"},
                        Case{"lora_dropout", 1.0, "in [0, 1)"},
                        Case{"use_dora", true, "does not implement DoRA"},
                        Case{"bias", "all", "train no biases"},
                        Case{"modules_to_save", {"lm_head"}, "does not implement it"},
                        Case{"rank_pattern", {{"q_proj", 8}}, "the same r and alpha"},
                        Case{"target_modules", 3, "a list of module names or one regular expression"},
                        Case{"task_type", "SEQ_CLS", "causal LMs"}}) {
    nlohmann::json j = good;
    j[c.field] = c.value;
    const std::string e = error_for(j);
    EXPECT_NE(e.find(std::string("adapter_config.json: \"") + c.field + "\""), std::string::npos) << e;
    EXPECT_NE(e.find(c.says), std::string::npos) << c.field << ": " << e;
  }
  std::ofstream(dir / kPeftConfigFile) << "{\"r\": 4,";
  EXPECT_NE(read_peft_adapter(dir.string()).status().message().find("adapter_config.json"), std::string::npos);
  // A good config without its weights file names the missing file.
  const std::string e = error_for(good);
  EXPECT_NE(e.find("adapter_model.safetensors"), std::string::npos) << e;
  fs::remove_all(dir);
  EXPECT_NE(read_peft_adapter(dir.string()).status().message().find("cannot read adapter_config.json"),
            std::string::npos);
}

}  // namespace
}  // namespace trident::adapters
