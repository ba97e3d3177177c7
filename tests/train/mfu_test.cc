// MFU against the measured GEMM ceiling (src/train/mfu.h) and GPT-2's GEMM shapes
// (models/gpt2/gemm_shapes.h): the shapes cover the model's matmul weights, the FLOP count
// and the JSON that train_step_bench and `trident gemm-rates` print.
#include "train/mfu.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/gpt2/gemm_shapes.h"
#include "models/gpt2/model.h"
#include "models/llama/model.h"
#include "train/train_config.h"

namespace trident::train {
namespace {

namespace k = kernels::cpu;

// A step's GEMM FLOPs are 6 B T times the weights its GEMMs multiply by: every 2-D parameter
// but the position embedding (the token embedding is the LM head).
TEST(Mfu, GemmShapesCoverTheModelsMatmulWeights) {
  models::gpt2::GPT2Config cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.block_size = 16, cfg.vocab_size = 101;
  const models::gpt2::GPT2 model(cfg);
  double weights = 0.0;
  for (const auto& [name, p] : model.named_parameters())
    if (p.dim() == 2 && name != "wpe.weight") weights += static_cast<double>(p.numel());
  const int64_t B = 3, T = 16;
  double flops = 0.0;
  for (const k::GemmShape& s : models::gpt2::gemm_shapes(cfg, B, T)) flops += s.flops() * static_cast<double>(s.count);
  EXPECT_EQ(flops, 6.0 * B * T * weights);
}

TEST(Mfu, PalmCountAndDtypes) {
  models::ModelConfig cfg;  // GPT-2 124M: 124,475,904 parameters, less wpe's 1024 x 768
  EXPECT_EQ(palm_flops_per_token(124475904 - 786432, cfg, 1024), 6.0 * 123689472 + 12.0 * 12 * 768 * 1024);
  EXPECT_EQ(gemm_type_of_precision(DType::kBF16), k::GemmType::kBF16);
  EXPECT_EQ(gemm_type_of_precision(DType::kF32), k::GemmType::kF32);
  EXPECT_EQ(gemm_type_of_precision(DType::kF16), k::GemmType::kF32);  // widened to f32
}

// Note [MFU's N] by hand. GPT-2, L=2 C=32 V=101 block 16: wte 101*32 = 3232 (tied: the head,
// counted), wpe 16*32 = 512 (gathered only: not counted), per block ln_1 64 + c_attn
// 32*96+96 = 3168 + c_proj 32*32+32 = 1056 + ln_2 64 + c_fc 32*128+128 = 4224 + mlp.c_proj
// 128*32+32 = 4128 = 12704, ln_f 64: N = 3232 + 2*12704 + 64 = 28704 of 29216 parameters;
// at T=16: 6*28704 + 12*2*32*16 = 172224 + 12288 = 184512 FLOPs per token.
TEST(Mfu, PalmCountLeavesOutGatheredEmbeddingsGpt2) {
  models::gpt2::GPT2Config cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.block_size = 16, cfg.vocab_size = 101;
  const models::gpt2::GPT2 model(cfg);
  EXPECT_EQ(model.num_parameters(), 29216);
  EXPECT_EQ(palm_parameter_count(model), 28704);
  EXPECT_EQ(palm_flops_per_token(palm_parameter_count(model), model.model_config(), 16), 184512.0);
}

// LLaMA, L=1 C=32 NH=4 KV=2 (head size 8) I=64 V=50 block 16: embed_tokens 50*32 = 1600, per
// block input_layernorm 32 + q 32*32 = 1024 + k, v 32*16 = 512 each + o 1024 +
// post_attention_layernorm 32 + gate, up, down 32*64 = 2048 each = 9280, norm 32, lm_head
// 50*32 = 1600. Untied: embed_tokens is gathered only, N = 9280 + 32 + 1600 = 10912 of 12512,
// 6*10912 + 12*1*32*16 = 65472 + 6144 = 71616 FLOPs per token at T=16. Tied: embed_tokens is the
// head, N = every parameter = 1600 + 9280 + 32 = 10912, the same FLOPs. (LLaMA-125M of
// bench/train_speed_compare.py: 124,668,672 parameters, N = 100,092,672 without embed_tokens'
// 32000*768; 6 N + 12*12*768*1024 = 713,802,240 FLOPs per token at T=1024, not 861,258,240.)
TEST(Mfu, PalmCountLeavesOutGatheredEmbeddingsLlama) {
  models::llama::LlamaConfig cfg;
  cfg.n_layer = 1, cfg.n_head = 4, cfg.n_kv_heads = 2, cfg.n_embd = 32, cfg.intermediate_size = 64;
  cfg.vocab_size = 50, cfg.block_size = 16;
  cfg.tie_word_embeddings = false;
  const models::llama::Llama untied(cfg);
  EXPECT_EQ(untied.num_parameters(), 12512);
  EXPECT_EQ(palm_parameter_count(untied), 10912);
  EXPECT_EQ(palm_flops_per_token(palm_parameter_count(untied), untied.model_config(), 16), 71616.0);
  cfg.tie_word_embeddings = true;
  const models::llama::Llama tied(cfg);
  EXPECT_EQ(tied.num_parameters(), 10912);
  EXPECT_EQ(palm_parameter_count(tied), 10912);
  // Counts by name (the trainer's single-device sizes): the same rule.
  std::map<std::string, int64_t> numel;
  for (const auto& [name, p] : untied.named_parameters()) numel[name] = 2 * p.numel();
  EXPECT_EQ(palm_parameter_count(untied, numel), 2 * 10912);
}

TEST(Mfu, CeilingJsonAndStepMfu) {
  TrainConfig cfg;
  cfg.model.n_layer = 1, cfg.model.n_head = 2, cfg.model.n_embd = 32, cfg.model.block_size = 16;
  cfg.model.vocab_size = 64;
  cfg.data.seq_len = 16;
  cfg.precision.dtype = "bf16";
  k::GemmRateOptions fast;
  fast.seconds_per_shape = 0.0;  // a warm-up and one timed call per shape
  const MfuCeiling m = measure_mfu_ceiling(cfg, 1000, 2, fast);
  EXPECT_EQ(m.dtype, k::GemmType::kBF16);
  EXPECT_GT(m.ceiling_gflops, 0.0);
  EXPECT_EQ(m.total_ceiling_gflops, m.ceiling_gflops);
  EXPECT_EQ(m.flops_per_token, 6.0 * 1000 + 12.0 * 1 * 32 * 16);
  for (const k::GemmRate& r : m.rates.rates) EXPECT_EQ(r.dtype, k::GemmType::kBF16) << r.engine;
  EXPECT_DOUBLE_EQ(m.mfu(1e6), m.flops_per_token * 1e6 / (m.ceiling_gflops * 1e9));
  EXPECT_NE(m.summary().find("bf16"), std::string::npos) << m.summary();

  const nlohmann::ordered_json j = gemm_rates_json(m.rates);
  ASSERT_EQ(j.size(), m.rates.rates.size());
  for (const k::GemmRate& r : m.rates.rates) {
    const auto& e = j.at(r.engine);
    EXPECT_EQ(e.at("dtype"), "bf16");
    EXPECT_EQ(e.at("gflops").get<double>(), r.gflops);
    EXPECT_LE(e.at("min_gflops").get<double>(), e.at("max_gflops").get<double>());
    ASSERT_EQ(e.at("per_shape").size(), m.rates.shapes.size());
    EXPECT_EQ(e.at("per_shape")[0].at("name"), "c_attn forward");
    EXPECT_GT(e.at("per_shape")[0].at("gflops").get<double>(), 0.0);
  }
  const std::string table = gemm_rates_table(m.rates);
  EXPECT_NE(table.find("ceiling bf16"), std::string::npos) << table;
}

}  // namespace
}  // namespace trident::train
