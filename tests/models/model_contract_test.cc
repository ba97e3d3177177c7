// The model contract (models/causal_lm.h), the registry and the [model] section with a
// family's own keys (models/model_config.h), checked on GPT-2: a family is built by name, its
// answers about where parameters live agree with each other, its plan names real layers, and
// config files and overrides reach its own keys whatever order they come in.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "config/config_tree.h"
#include "core/factory.h"
#include "models/causal_lm.h"
#include "models/generate.h"
#include "models/gpt2/model.h"
#include "models/registry.h"
#include "nn/parallel_plan.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::models {
namespace {

using testing::tiny_llama;
using testing::tiny_gpt2;

using trident::testing::error_of;

TEST(ModelRegistry, BuildsGpt2ByNameWithTheFamilysOwnInit) {
  const std::unique_ptr<CausalLM> model = build_model(tiny_gpt2());
  EXPECT_EQ(model->model_config().arch, "gpt2");
  const gpt2::GPT2 direct(gpt2::GPT2Config::from(tiny_gpt2()));
  const auto a = model->named_parameters(), b = direct.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(to_vector<float>(a[i].second), to_vector<float>(b[i].second)) << a[i].first;
  }
}

TEST(ModelRegistry, AnUnknownArchNamesTheFamilies) {
  ModelConfig c = tiny_gpt2();
  c.arch = "gpt9";
  const std::string e = error_of([&] { build_model(c); });
  EXPECT_NE(e.find("model.arch = \"gpt9\" is not a model family; the families are: gpt2, llama"), std::string::npos) << e;
}

TEST(ModelConfig, FamilyKeysHaveDefaultsAndBelongToTheirFamily) {
  ModelConfig c = tiny_gpt2();
  EXPECT_EQ(c.family_float("layer_norm_eps"), 1e-5);
  c.family_values["layer_norm_eps"] = 1e-6;
  EXPECT_EQ(gpt2::GPT2Config::from(c).layer_norm_eps, 1e-6);
  EXPECT_NE(error_of([&] { c.family_value("rope_theta"); }).find("model.arch = \"gpt2\" has no key 'rope_theta'"),
            std::string::npos);
  c.family_values["rope_theta"] = 1e4;  // set behind the config's back: validate() names it
  EXPECT_NE(error_of([&] { c.validate(); }).find("has no key 'rope_theta'"), std::string::npos);
  ModelConfig odd = tiny_gpt2();
  odd.n_embd = 15;
  EXPECT_NE(error_of([&] { odd.validate(); }).find("n_embd (15) must be divisible by n_head (2)"), std::string::npos);
}

TEST(ModelConfig, FilesAndOverridesSetTheSelectorFirst) {
  ModelConfig c;
  config::ConfigTree tree;
  tree.bind(c);
  // The family's key before `arch` in the file: still read as GPT-2's.
  ASSERT_TRUE(tree.load_toml_string("[model]\nlayer_norm_eps = 1e-6\nn_layer = 2\narch = \"gpt2\"\n", "t").is_ok());
  EXPECT_EQ(c.family_float("layer_norm_eps"), 1e-6);
  EXPECT_EQ(c.n_layer, 2);
  ASSERT_TRUE(tree.apply_overrides({"model.layer_norm_eps=2e-6", "model.arch=gpt2"}, "cli").is_ok());
  EXPECT_EQ(c.family_float("layer_norm_eps"), 2e-6);
  const Status bad = tree.apply_override("model.rope_theta=1e4", "cli");
  EXPECT_NE(bad.to_string().find("unknown key 'rope_theta' in section [model]"), std::string::npos) << bad.to_string();
  const std::string printed = tree.to_toml();
  EXPECT_EQ(printed.find("arch = \"gpt2\""), printed.find("[model]\n") + 8) << printed;  // arch first
  EXPECT_NE(printed.find("layer_norm_eps = 2e-06"), std::string::npos) << printed;
  EXPECT_NE(tree.help().find("--model.layer_norm_eps"), std::string::npos);
}

TEST(CausalLM, PartsBlocksAndPipelinePlacesAgree) {
  for (const ModelConfig& cfg :
       {tiny_gpt2(), tiny_llama(false), tiny_llama(true), testing::tiny_mixtral(), testing::tiny_qwen2_moe()}) {
    const std::unique_ptr<CausalLM> model = build_model(cfg);
    std::set<std::string> seen;
    const auto parts = model->parts();
    for (size_t part = 0; part < parts.size(); ++part)
      for (const auto& [name, p] : parts[part]) {
        EXPECT_TRUE(seen.insert(name).second) << cfg.arch << ": " << name << " is in two parts";
        const int64_t block = model->block_of(name);
        EXPECT_EQ(part, block >= 0 ? static_cast<size_t>(block) + 1 : 0) << cfg.arch << ": " << name;
      }
    EXPECT_EQ(seen.size(), model->named_parameters().size()) << cfg.arch;
  }
  const std::unique_ptr<CausalLM> model = build_model(tiny_gpt2());
  std::set<std::string> seen;
  const auto parts = model->parts();
  ASSERT_EQ(parts.size(), static_cast<size_t>(model->num_blocks()) + 1);
  for (size_t part = 0; part < parts.size(); ++part)
    for (const auto& [name, p] : parts[part]) {
      EXPECT_TRUE(seen.insert(name).second) << name << " is in two parts";
      const int64_t block = model->block_of(name);
      // Part i + 1 is block i; the root holds the embedding and the head.
      EXPECT_EQ(part, block >= 0 ? static_cast<size_t>(block) + 1 : 0) << name;
    }
  EXPECT_EQ(seen.size(), model->named_parameters().size());
  EXPECT_EQ(model->block_of("wte.weight"), CausalLM::kEmbedding);
  EXPECT_EQ(model->block_of("ln_f.bias"), CausalLM::kHead);
  EXPECT_EQ(model->block_of("h.2.mlp.c_fc.weight"), 2);
  EXPECT_EQ(model->tied_head_weight(), std::optional<std::string>("wte.weight"));
}

TEST(CausalLM, EveryPlanEntryNamesLayersOfTheModel) {
  const std::unique_ptr<CausalLM> model = build_model(tiny_gpt2());
  const auto layers = model->named_modules();
  for (const nn::ParallelPlanEntry& e : model->parallel_plan(2)) {
    int matched = 0;
    for (const auto& [path, m] : layers) matched += nn::plan_pattern_matches(e.pattern, path) ? 1 : 0;
    EXPECT_GT(matched, 0) << e.pattern;
  }
  EXPECT_NE(error_of([&] { model->check_tensor_parallel(4); }).find("model.n_head (2) must be divisible by parallel.tp (4)"),
            std::string::npos);
}

TEST(Llama, BuildsByNameWithHuggingFacesNamesAndShapes) {
  const std::unique_ptr<CausalLM> model = build_model(tiny_llama(false));
  std::map<std::string, Shape> shapes;
  for (const auto& [name, p] : model->named_parameters()) shapes[name] = p.shape();
  EXPECT_EQ(shapes.at("embed_tokens.weight"), Shape({40, 16}));
  EXPECT_EQ(shapes.at("layers.2.self_attn.q_proj.weight"), Shape({16, 16}));
  EXPECT_EQ(shapes.at("layers.2.self_attn.k_proj.weight"), Shape({8, 16}));  // 2 kv heads of 4
  EXPECT_EQ(shapes.at("layers.0.mlp.gate_proj.weight"), Shape({24, 16}));
  EXPECT_EQ(shapes.at("layers.0.mlp.down_proj.weight"), Shape({16, 24}));
  EXPECT_EQ(shapes.at("norm.weight"), Shape({16}));
  EXPECT_EQ(shapes.at("lm_head.weight"), Shape({40, 16}));
  EXPECT_EQ(shapes.count("layers.0.self_attn.q_proj.bias"), 0u);
  EXPECT_EQ(model->parameter_name_from_hf("model.layers.1.mlp.up_proj.weight"), "layers.1.mlp.up_proj.weight");
  EXPECT_EQ(model->tied_head_weight(), std::nullopt);
  EXPECT_EQ(model->block_of("lm_head.weight"), CausalLM::kHead);
  const std::unique_ptr<CausalLM> tied = build_model(tiny_llama(true));
  EXPECT_EQ(tied->tied_head_weight(), std::optional<std::string>("embed_tokens.weight"));
  EXPECT_EQ(tied->parameter_name_from_hf("lm_head.weight"), std::nullopt);  // the embedding's copy
  EXPECT_NE(tied->hf_config_json().find("\"tie_word_embeddings\": true"), std::string::npos);
}

TEST(Llama, BadShapesAndUnsupportedSettingsNameTheKeys) {
  ModelConfig c = tiny_llama(false);
  c.family_values["n_kv_heads"] = int64_t{3};
  EXPECT_NE(error_of([&] { build_model(c); }).find("n_kv_heads (3) must divide n_head (4)"), std::string::npos);
  c = tiny_llama(false);
  c.dropout = 0.1;
  EXPECT_NE(error_of([&] { build_model(c); }).find("model.dropout = 0.1 with model.arch = \"llama\""), std::string::npos);
  const std::unique_ptr<CausalLM> model = build_model(tiny_llama(false));  // 4 heads, 2 kv heads
  model->check_tensor_parallel(2);  // kv heads split
  model->check_tensor_parallel(4);  // kv heads shared by pairs of ranks
  EXPECT_NE(error_of([&] { model->check_tensor_parallel(3); }).find("model.n_head (4) must be divisible by parallel.tp (3)"),
            std::string::npos);
}

TEST(ModelConfig, SwitchingArchResetsTheFamilysKeys) {
  ModelConfig c;
  config::ConfigTree tree;
  tree.bind(c);
  ASSERT_TRUE(tree.apply_overrides({"model.n_kv_heads=2", "model.arch=llama", "model.n_head=4"}, "cli").is_ok());
  EXPECT_EQ(c.family_int("n_kv_heads"), 2);
  EXPECT_EQ(c.family_float("rope_theta"), 10000.0);  // the family's default
  const std::string printed = tree.to_toml();
  EXPECT_NE(printed.find("n_kv_heads = 2"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("layer_norm_eps"), std::string::npos) << printed;  // GPT-2's, not LLaMA's
  ModelConfig again;
  config::ConfigTree tree2;
  tree2.bind(again);
  ASSERT_TRUE(tree2.load_toml_string(printed, "printed").is_ok());
  EXPECT_EQ(tree2.to_toml(), printed);
  ASSERT_TRUE(tree2.apply_override("model.arch=gpt2", "cli").is_ok());
  EXPECT_TRUE(again.family_values.empty());
  EXPECT_EQ(again.family_float("layer_norm_eps"), 1e-5);
  EXPECT_NE(tree2.help().find("with --model.arch=llama"), std::string::npos);  // the other family's keys
}

// A config.json's values get the checks a TOML [model] section gets, and errors name the file,
// the JSON key, the value and what is allowed (a head count of 0 divided by zero).
TEST(ModelRegistry, HfConfigValuesAreCheckedAsTheModelKeysTheySet) {
  auto error = [](const std::string& json) {
    return error_of([&] { model_config_from_hf(json, "d/config.json"); });
  };
  const std::string gpt2 = R"({"model_type": "gpt2", "n_layer": 1, "n_embd": 32, "n_positions": 32, "vocab_size": 64)";
  EXPECT_EQ(error(gpt2 + R"(, "n_head": 2})"), "");
  EXPECT_NE(error(gpt2 + R"(, "n_head": 0})").find("d/config.json: \"n_head\" = 0 is invalid: allowed: >= 1"),
            std::string::npos);
  EXPECT_NE(error(gpt2 + R"(, "n_head": -2})").find("\"n_head\" = -2 is invalid: allowed: >= 1"), std::string::npos);
  EXPECT_NE(error(gpt2 + R"(, "n_head": 3})").find("d/config.json: model: n_embd (32) must be divisible by n_head (3)"),
            std::string::npos);
  const std::string two = R"({"model_type": "gpt2", "n_head": 2, "n_embd": 32, "n_positions": 32, "vocab_size": 64)";
  EXPECT_NE(error(two + R"(, "n_layer": -1})").find("\"n_layer\" = -1 is invalid: allowed: >= 1"), std::string::npos);
  EXPECT_NE(error(two + R"(, "n_layer": "1"})").find("\"n_layer\" = \"1\" is invalid: expected an integer"),
            std::string::npos);
  EXPECT_NE(error(two + R"(, "n_layer": 1.5})").find("\"n_layer\" = 1.5 is invalid: expected an integer"),
            std::string::npos);
  EXPECT_NE(error(two + R"(, "n_layer": true})").find("\"n_layer\" = true is invalid: expected an integer"),
            std::string::npos);
  EXPECT_NE(error(two + R"(, "n_layer": 18446744073709551615})").find("is invalid: too large"), std::string::npos);
  EXPECT_NE(error(two + R"(, "n_layer": 1, "layer_norm_epsilon": -1})")
                .find("\"layer_norm_epsilon\" = -1 is invalid: allowed: > 0 (model.layer_norm_eps)"),
            std::string::npos);
  EXPECT_NE(error(two + R"(, "n_layer": 1, "layer_norm_epsilon": NaN})")
                .find("(NaN is not a JSON number: the values of a config.json are finite numbers)"),
            std::string::npos);
  const std::string llama = R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 32,
      "intermediate_size": 64, "max_position_embeddings": 32, "vocab_size": 64)";
  EXPECT_EQ(error(llama + R"(, "num_attention_heads": 2})"), "");
  EXPECT_NE(error(llama + R"(, "num_attention_heads": 0})")
                .find("d/config.json: \"num_attention_heads\" = 0 is invalid: allowed: >= 1 (model.n_head)"),
            std::string::npos);
  const std::string heads = llama + R"(, "num_attention_heads": 2)";
  EXPECT_NE(error(heads + R"(, "sliding_window": -4})").find("\"sliding_window\" = -4 is invalid: allowed: >= 0"),
            std::string::npos);
  EXPECT_NE(error(heads + R"(, "rope_theta": -1.0})").find("\"rope_theta\" = -1.0 is invalid: allowed: > 0"),
            std::string::npos);
  EXPECT_NE(error(heads + R"(, "rms_norm_eps": -1e-6})").find("\"rms_norm_eps\" = -1e-06 is invalid: allowed: > 0"),
            std::string::npos);
  EXPECT_NE(error(heads + R"(, "rope_scaling": {"rope_type": "llama3", "factor": -2.0}})")
                .find("\"rope_scaling.factor\" = -2.0 is invalid: allowed: >= 0 (model.rope_scaling_factor)"),
            std::string::npos);
  EXPECT_NE(error(heads + R"(, "rope_scaling": "abc"})")
                .find("rope_scaling \"abc\" is invalid: expected null or an object"),
            std::string::npos);
  EXPECT_NE(error(heads + R"(, "num_key_value_heads": 0})")
                .find("\"num_key_value_heads\" = 0 is invalid: allowed: >= 1"),
            std::string::npos);
}

// A model whose f32 weights exceed the machine's memory is refused before a block is built
// (Note [A model larger than the machine]): it used to allocate until the allocator failed.
TEST(ModelRegistry, AModelLargerThanTheMachineIsRefusedBeforeItIsBuilt) {
  for (ModelConfig cfg : {tiny_gpt2(), tiny_llama(false)}) {
    cfg.n_layer = 1000000000;
    const std::string what = error_of([&] { build_model(cfg); });
    EXPECT_NE(what.find("model.n_layer = 1000000000"), std::string::npos) << what;
    EXPECT_NE(what.find("exceed this machine's memory"), std::string::npos) << what;
  }
  EXPECT_NE(build_model(tiny_gpt2()), nullptr);
}

TEST(ParallelPlan, PatternsMatchWholeComponents) {
  EXPECT_TRUE(nn::plan_pattern_matches("h.*.attn.c_attn", "h.12.attn.c_attn"));
  EXPECT_FALSE(nn::plan_pattern_matches("h.*.attn.c_attn", "h.12.attn.c_attn2"));
  EXPECT_FALSE(nn::plan_pattern_matches("h.*.attn", "h.1.attn.c_attn"));
  EXPECT_FALSE(nn::plan_pattern_matches("h.*.attn.c_attn", "h.attn.c_attn"));
  EXPECT_TRUE(nn::plan_pattern_matches("ln_f", "ln_f"));
  EXPECT_FALSE(nn::plan_pattern_matches("ln_f", "ln_f2"));
}

TEST(CausalLM, GenerationWorksThroughTheContract) {
  for (const ModelConfig& cfg : {tiny_gpt2(), tiny_llama(false), testing::tiny_mixtral(), testing::tiny_qwen2_moe()}) {
    const std::unique_ptr<CausalLM> model = build_model(cfg);
    model->eval();
    const std::vector<int64_t> greedy = generate(*model, {1, 2, 3}, SampleOptions{12, 0.0, 0, 1});
    ASSERT_EQ(greedy.size(), 12u) << cfg.arch;  // past block_size (8): the context is cropped
    for (int64_t t : greedy) EXPECT_TRUE(t >= 0 && t < 40) << t;
    EXPECT_EQ(generate(*model, {1, 2, 3}, SampleOptions{12, 0.0, 0, 1}), greedy) << cfg.arch;
  }
}

}  // namespace
}  // namespace trident::models
