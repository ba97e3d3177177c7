// Loading GPT-2 weights written under Hugging Face's names (GPT2LMHeadModel's state dict:
// "transformer." prefix, tied lm_head, causal-mask buffers), and refusing files that do not
// describe the model.
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "core/factory.h"
#include "core/rng.h"
#include "models/gpt2/model.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

models::gpt2::GPT2Config tiny() {
  models::gpt2::GPT2Config c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 4;
  c.vocab_size = 11;
  return c;
}

class HfWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("trident_hf_" + std::to_string(::getpid()) + ".safetensors")).string();
  }
  void TearDown() override { fs::remove(path_); }
  void write(const std::vector<checkpoint::NamedTensor>& tensors) {
    ASSERT_TRUE(checkpoint::save_safetensors(checkpoint::default_env(), path_, tensors).is_ok());
  }
  std::string path_;
};

TEST_F(HfWeightsTest, LoadsGPT2LMHeadModelNames) {
  models::gpt2::GPT2Config cfg = tiny();
  cfg.init_seed = 1;
  models::gpt2::GPT2 source(cfg);
  std::vector<checkpoint::NamedTensor> file;
  for (auto& [name, t] : source.named_parameters()) file.push_back({"transformer." + name, core::cast(t, DType::kF16)});
  file.push_back({"lm_head.weight", source.parameter("wte.weight")});
  file.push_back({"transformer.h.0.attn.bias", ones({1, 1, 4, 4})});
  file.push_back({"transformer.h.1.attn.masked_bias", scalar_tensor(-1e4)});
  write(file);

  cfg.init_seed = 2;
  models::gpt2::GPT2 target(cfg);
  ASSERT_TRUE(load_hf_weights(target, path_).is_ok());
  for (auto& [name, t] : target.named_parameters()) {
    // Stored as f16 in the file: equal to the source rounded to f16.
    EXPECT_EQ(to_vector<float>(t), to_vector<float>(core::cast(core::cast(source.parameter(name), DType::kF16), DType::kF32)))
        << name;
  }
}

TEST_F(HfWeightsTest, RefusesUnknownMissingAndMisshapedTensors) {
  models::gpt2::GPT2 model(tiny());
  std::vector<checkpoint::NamedTensor> params;
  for (auto& [name, t] : model.named_parameters()) params.push_back({name, t});

  auto with = params;
  with.push_back({"h.0.attn.q_proj.weight", zeros({8, 8})});
  write(with);
  Status s = load_hf_weights(model, path_);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("h.0.attn.q_proj.weight"), std::string::npos) << s.message();

  auto without = params;
  without.erase(without.begin() + 3);
  write(without);
  s = load_hf_weights(model, path_);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("missing parameters: " + params[3].name), std::string::npos) << s.message();

  auto misshaped = params;
  misshaped[0].tensor = zeros({12, 8});  // wte with a different vocabulary
  write(misshaped);
  s = load_hf_weights(model, path_);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("wte.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(12, 8)"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace trident::train
