// The planner's fine-tuning (planner/fine_tuning.h) against the trainer's own functions on built
// models of every family: the adapters apply_lora adds (names, shapes, order, blocks), what it
// and train.freeze leave trainable, the weights quantize_base stores in NF4 and their bytes; the
// same errors for targets and skip items that name no layer; and what the placement table and
// the memory model make of a frozen base.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/lora.h"
#include "adapters/peft_files.h"
#include "core/copy.h"
#include "models/registry.h"
#include "nn/freeze.h"
#include "planner/fine_tuning.h"
#include "planner/memory_model.h"
#include "planner/run_spec.h"
#include "planner/time_model.h"
#include "quantization/nf4.h"
#include "quantization/quantized_base.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::planner {
namespace {

using trident::testing::error_of;
namespace fs = std::filesystem;

struct Case {
  std::string what;
  models::ModelConfig model;
  std::string targets;  // lora.target_modules ("": no LoRA)
  std::string freeze;   // train.freeze
  std::string skip = "lm_head";  // quantization.skip_modules
};

train::TrainConfig config_of(const Case& c, bool nf4) {
  train::TrainConfig cfg;
  cfg.model = c.model;
  cfg.data.seq_len = c.model.block_size;
  cfg.data.batch_size = 2;
  if (!c.targets.empty()) {
    cfg.lora.r = 4;
    cfg.lora.target_modules = c.targets;
  }
  cfg.train.freeze = c.freeze;
  if (nf4) cfg.quantization.base = "nf4";
  cfg.quantization.skip_modules = c.skip;
  return cfg;
}

std::vector<Case> cases() {
  using models::testing::tiny_gpt2;
  using models::testing::tiny_llama;
  return {
      {"llama q,k,v,o", tiny_llama(false), "q_proj,k_proj,v_proj,o_proj", ""},
      {"llama all-linear, tied", tiny_llama(true), "all-linear", ""},
      {"qwen2 biases, glob", tiny_llama(false, true), "layers.1.mlp.*,q_proj", "", "lm_head,layers.0.mlp.*"},
      {"llama the head", tiny_llama(false), "lm_head,down_proj", "", "o_proj"},
      {"gpt2 c_attn,c_proj,c_fc", tiny_gpt2(), "c_attn,c_proj,c_fc", ""},
      {"gpt2 hf names", tiny_gpt2(), "transformer.h.0.attn.c_attn,mlp.c_proj", ""},
      {"llama train.freeze", tiny_llama(false), "", "embed_tokens.weight,layers.0.*"},
      {"gpt2 train.freeze", tiny_gpt2(), "", "h.1.*,wte.weight", "h.1.mlp.c_fc"},
  };
}

// The built model, adapted or frozen as the trainer does it.
std::unique_ptr<models::CausalLM> built(const train::TrainConfig& cfg) {
  auto model = models::build_model(cfg.model);
  nn::freeze_parameters(*model, cfg.train.freeze, "train.freeze");
  if (cfg.lora.enabled()) adapters::apply_lora(*model, cfg.lora);
  return model;
}

TEST(FineTuning, TheAdaptersAndFrozenParametersAreTheTrainers) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const train::TrainConfig cfg = config_of(c, false);
    const RunSpec run = run_spec(cfg);
    const auto model = built(cfg);
    const std::vector<nn::NamedTensor> params = model->named_parameters();
    ASSERT_EQ(run.shapes.parameters.size(), params.size());
    ASSERT_EQ(run.holding.size(), params.size());
    int64_t trained = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const models::ParameterShape& p = run.shapes.parameters[i];
      EXPECT_EQ(p.name, params[i].first);
      EXPECT_EQ(Shape(p.shape), params[i].second.shape()) << p.name;
      EXPECT_EQ(p.block, model->block_of(p.name)) << p.name;
      EXPECT_EQ(run.holding[i] == Holding::kTrained, params[i].second.requires_grad()) << p.name;
      if (params[i].second.requires_grad()) trained += params[i].second.numel();
    }
    EXPECT_EQ(trained_parameters(run), trained);
    EXPECT_GT(trained, 0);
    EXPECT_LT(trained, model->num_parameters());
  }
}

TEST(FineTuning, TheNf4WeightsAndTheirBytesAreQuantizeBases) {
  for (const Case& c : cases()) {
    for (const bool double_quant : {true, false}) {
      SCOPED_TRACE(c.what + (double_quant ? ", double quantization" : ""));
      train::TrainConfig cfg = config_of(c, true);
      cfg.quantization.double_quant = double_quant;
      const RunSpec run = run_spec(cfg);
      const auto model = built(cfg);
      const quantization::QuantizedBase base =
          quantization::quantize_base(*model, cfg.quantization, [](const std::string&) { return true; });
      int64_t bytes = 0, quantized = 0;
      for (size_t i = 0; i < run.shapes.parameters.size(); ++i) {
        const models::ParameterShape& p = run.shapes.parameters[i];
        EXPECT_EQ(run.holding[i] == Holding::kNf4, base.contains(p.name)) << p.name;
        if (run.holding[i] != Holding::kNf4) continue;
        bytes += quantization::Nf4Weight::bytes_for(p.numel(), double_quant);
        ++quantized;
      }
      EXPECT_EQ(quantized, static_cast<int64_t>(base.layers().size()));
      EXPECT_EQ(bytes, base.bytes());
      EXPECT_GT(quantized, 0);
    }
  }
}

// A run that starts from PEFT's files (train.init_adapter) takes the file's rank and targets,
// here one regular expression as PEFT may write it: the planner's adapters are those apply_lora
// makes from the file.
TEST(FineTuning, TakesTheAdapterOfTrainInitAdapter) {
  const models::ModelConfig llama = models::testing::tiny_llama(false);
  train::TrainConfig made = config_of({"", llama, "q_proj,v_proj", ""}, false);
  made.lora.r = 6;
  auto model = built(made);
  std::vector<checkpoint::NamedTensor> tensors;
  for (const auto& [name, p] : model->named_parameters())
    if (adapters::is_lora_parameter(name)) tensors.push_back({name, p});
  const fs::path dir = fs::temp_directory_path() / ("trident_planner_peft_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  nlohmann::json config = nlohmann::json::parse(adapters::peft_config_json(llama, made.lora, {}, ""));
  config["target_modules"] = R"(model\.layers\.[01]\.self_attn\.(q|v)_proj)";
  ASSERT_TRUE(adapters::write_peft_adapter(dir.string(), llama, config.dump(), tensors).is_ok());

  train::TrainConfig cfg = config_of({"", llama, "", ""}, false);
  cfg.train.init_adapter = dir.string();
  const RunSpec run = run_spec(cfg);
  std::vector<std::string> planned;
  for (size_t i = 0; i < run.shapes.parameters.size(); ++i)
    if (run.holding[i] == Holding::kTrained) planned.push_back(run.shapes.parameters[i].name);
  std::vector<std::string> trained;
  for (const auto& [name, p] : model->named_parameters())
    if (p.requires_grad() && name.starts_with("layers.") && name[7] <= '1') trained.push_back(name);
  EXPECT_EQ(planned, trained);
  ASSERT_EQ(run.shapes.parameters[3].name, "layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(run.shapes.parameters[3].shape, (std::vector<int64_t>{6, llama.n_embd}));  // the file's rank
  fs::remove_all(dir);
}

// The text of an error after its "ValueError: " and before its " (file:line)".
std::string message(const std::string& what) {
  const size_t begin = what.find(": ") + 2, end = what.rfind(" (");
  return what.substr(begin, end - begin);
}

// A target or skip item that names no layer, a layer that takes no adapter, a freeze pattern
// that matches nothing: the planner refuses the run with the trainer's words.
TEST(FineTuning, RefusesWhatTheTrainerRefusesWithItsMessage) {
  const models::ModelConfig llama = models::testing::tiny_llama(false);
  const auto quantized = [](const train::TrainConfig& cfg) {
    quantization::quantize_base(*built(cfg), cfg.quantization, [](const std::string&) { return true; });
  };
  // Case::what: the item the message must name.
  for (const Case& c : std::vector<Case>{{"q_prj", llama, "q_prj", ""},
                                         {"layers.0.input_layernorm", llama, "input_layernorm", ""},
                                         {"embed_tokens", llama, "embed_tokens", ""},
                                         {"layers.9.*", llama, "", "layers.9.*"},
                                         {"o_prj", llama, "q_proj", "", "lm_head,o_prj"}}) {
    SCOPED_TRACE(c.what);
    const train::TrainConfig cfg = config_of(c, true);
    const std::string trainer = error_of([&] { quantized(cfg); });
    ASSERT_FALSE(trainer.empty());
    const std::string planner = error_of([&] { run_spec(cfg); });
    EXPECT_EQ(message(planner), message(trainer)) << planner << "\nvs " << trainer;
    EXPECT_NE(message(planner).find("'" + c.what + "'"), std::string::npos) << planner;
  }
}

// Tensor parallelism splits an adapter only with a layer whose style has adapter factors: the
// vocabulary-parallel head has none, and NF4 does not run under ZeRO-3.
TEST(FineTuning, LayoutsTheTrainerRefuses) {
  const models::ModelConfig llama = models::testing::tiny_llama(false);
  Layout tp2;
  tp2.tp = 2;
  const RunSpec attention = run_spec(config_of({"", llama, "q_proj,k_proj,v_proj,o_proj", ""}, false));
  EXPECT_TRUE(fine_tuning_accepts(attention, tp2));
  Layout tp4 = tp2;
  tp4.tp = 4;  // past the 2 kv heads: k and v replicated, their adapters not split
  std::string why;
  EXPECT_FALSE(fine_tuning_accepts(attention, tp4, &why));
  EXPECT_NE(why.find("k_proj"), std::string::npos) << why;
  const RunSpec head = run_spec(config_of({"", llama, "lm_head", ""}, false));
  EXPECT_TRUE(fine_tuning_accepts(head, Layout{}));
  EXPECT_FALSE(fine_tuning_accepts(head, tp2, &why));
  EXPECT_NE(why.find("lm_head"), std::string::npos) << why;
  const RunSpec nf4 = run_spec(config_of({"", llama, "q_proj", ""}, true));
  Layout zero3;
  zero3.dp = 2;
  zero3.zero_stage = 3;
  EXPECT_FALSE(fine_tuning_accepts(nf4, zero3, &why));
  EXPECT_NE(why.find("zero_stage"), std::string::npos) << why;
  zero3.zero_stage = 2;
  EXPECT_TRUE(fine_tuning_accepts(nf4, zero3));
}

// The model state of a frozen base, on one rank: the parameters in the compute dtype (or NF4),
// the adapters' fp32 gradient, AdamW's moments and, under mixed precision, masters; nothing else.
TEST(FineTuning, ModelStateCountsOnlyTheAdaptersState) {
  const train::TrainConfig full = config_of({"", models::testing::tiny_llama(false), "", ""}, false);
  for (const std::string dtype : {"fp32", "bf16"})
    for (const bool nf4 : {false, true}) {
      SCOPED_TRACE(dtype + (nf4 ? " nf4" : ""));
      train::TrainConfig cfg = config_of({"", models::testing::tiny_llama(false), "q_proj,v_proj", ""}, nf4);
      cfg.precision.dtype = dtype;
      const RunSpec run = run_spec(cfg);
      const int64_t E = static_cast<int64_t>(element_size(run.compute));
      int64_t adapters = 0, frozen = 0;
      for (size_t i = 0; i < run.shapes.parameters.size(); ++i) {
        const int64_t n = run.shapes.parameters[i].numel();
        if (run.holding[i] == Holding::kTrained) adapters += n;
        else frozen += run.holding[i] == Holding::kNf4 ? quantization::Nf4Weight::bytes_for(n, true) : E * n;
      }
      const MemoryEstimate m = predict_memory(run, Layout{}, false);
      EXPECT_EQ(m.category(MemoryCategory::kParameter), E * adapters + frozen);
      EXPECT_EQ(m.category(MemoryCategory::kOptimizerState), (E == 4 ? 8 : 12) * adapters);
      // The gradients: the adapters' fp32 ones, and the fold of the largest into its master.
      EXPECT_GE(m.category(MemoryCategory::kGradient), 4 * adapters);
      train::TrainConfig whole = full;
      whole.precision.dtype = dtype;
      const MemoryEstimate all = predict_memory(run_spec(whole), Layout{}, false);
      EXPECT_LT(m.category(MemoryCategory::kGradient), all.category(MemoryCategory::kGradient) / 10);
    }
}

// Note [Frozen weights' time]: a frozen base's products run no dW GEMM and a frozen head makes
// no dw, so LoRA's backward is the base's dx GEMMs (and the adapters'); nothing else moves.
TEST(FineTuning, AFrozenBasesProductsRunNoWeightGradient) {
  Case c{"gpt2", models::testing::tiny_gpt2(), "c_attn,c_proj,c_fc", ""};
  const train::TrainConfig cfg = config_of(c, false);
  RunSpec full = run_spec(config_of({"gpt2", c.model, "", ""}, false));
  RunSpec lora = run_spec(cfg);
  for (const auto& [in, out] : lora.shapes.block_matmuls) EXPECT_FALSE(product_weight_trains(lora, in, out));
  for (const auto& [in, out] : full.shapes.block_matmuls) EXPECT_TRUE(product_weight_trains(full, in, out));
  EXPECT_FALSE(head_weight_trains(lora));
  EXPECT_TRUE(head_weight_trains(full));
  const AdapterWork adapters = adapter_work(lora, 4);
  EXPECT_EQ(adapters.products.size(), 2u * 4u * static_cast<size_t>(c.model.n_layer));  // A and B of 4 layers a block
  EXPECT_GT(adapters.forward_bytes_per_token, 0.0);
  Cluster cluster;
  cluster.device.gemm_half_rows = 0.0;
  Layout l;
  l.micro_batch = 2;
  const TimeEstimate a = predict_time(full, l, cluster), b = predict_time(lora, l, cluster);
  EXPECT_LT(b.compute_s, a.compute_s);
  // The block GEMMs' dW, a third of their FLOPs, goes; the adapters' r-wide products come.
  const double blocks = static_cast<double>(c.model.n_layer), tokens = 2.0 * static_cast<double>(cfg.data.seq_len);
  const double dw = blocks * tokens * static_cast<double>(models::matmul_flops_per_token(full.shapes.block_matmuls)) /
                    cluster.gemm_flops(full.compute, tokens);
  EXPECT_GT(a.compute_s - b.compute_s, 0.5 * dw);
}

// Note [Adapters' activations]: under "selective" both factors keep their outputs.
TEST(FineTuning, SelectiveKeepsTheAdaptersOutputs) {
  const Case c{"gpt2", models::testing::tiny_gpt2(), "c_attn", ""};
  const RunSpec lora = run_spec(config_of(c, false));
  const RunSpec full = run_spec(config_of({"gpt2", c.model, "", ""}, false));
  ASSERT_EQ(lora.shapes.block.size(), full.shapes.block.size() + 2);
  const models::SavedActivation& y = lora.shapes.block.back();
  EXPECT_EQ(y.per_token, 3 * c.model.n_embd);  // c_attn's outputs
  EXPECT_FALSE(y.kept_none);
  EXPECT_TRUE(y.kept_selective);
  EXPECT_EQ(lora.shapes.block[lora.shapes.block.size() - 2].per_token, 4);  // A's, r = 4
}

}  // namespace
}  // namespace trident::planner
