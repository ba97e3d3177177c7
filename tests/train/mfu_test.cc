// MFU against the measured GEMM ceiling (src/train/mfu.h) and GPT-2's GEMM shapes
// (models/gpt2/gemm_shapes.h): the shapes cover the model's matmul weights, the FLOP count
// and the JSON that train_step_bench and `trident gemm-rates` print.
#include "train/mfu.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/gpt2/gemm_shapes.h"
#include "models/gpt2/model.h"
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
  models::ModelConfig cfg;  // GPT-2 124M
  EXPECT_EQ(palm_flops_per_token(124475904, cfg, 1024), 6.0 * 124475904 + 12.0 * 12 * 768 * 1024);
  EXPECT_EQ(gemm_type_of_precision(DType::kBF16), k::GemmType::kBF16);
  EXPECT_EQ(gemm_type_of_precision(DType::kF32), k::GemmType::kF32);
  EXPECT_EQ(gemm_type_of_precision(DType::kF16), k::GemmType::kF32);  // widened to f32
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
