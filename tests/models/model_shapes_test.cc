// ModelFamily::shapes (models/model_shapes.h) against the built model, for every family and
// its variants: the same parameters in the same order, with the same shapes and blocks, the
// same tied head, and the tensor-parallel split dimensions the family's plan gives each
// (tensor_parallel.h's rules: Conv1D (in, out), Linear (out, in), Embedding rows).
#include <gtest/gtest.h>

#include "models/causal_lm.h"
#include "models/registry.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/parallel_plan.h"
#include "support/tiny_model_configs.h"

namespace trident::models {
namespace {

using testing::tiny_gpt2;
using testing::tiny_llama;

// The dimension tensor parallelism splits `param` ("weight"/"bias") of `module` along under
// `style`, or -1.
int expected_split(const std::string& style, const nn::Module* module, const std::string& param) {
  const bool conv = dynamic_cast<const nn::Conv1D*>(module) != nullptr;
  const bool bias = param == "bias";
  if (style == nn::tp_style::kColumnwise) return bias ? 0 : (conv ? 1 : 0);
  if (style == nn::tp_style::kRowwise) return bias ? -1 : (conv ? 0 : 1);
  if (style == nn::tp_style::kVocabParallel) return 0;
  return -1;
}

void check_family(const ModelConfig& cfg) {
  SCOPED_TRACE(cfg.arch);
  const ModelShapes shapes = model_family(cfg.arch).shapes(cfg);
  const std::unique_ptr<CausalLM> model = build_model(cfg);
  const std::vector<nn::NamedTensor> params = model->named_parameters();
  ASSERT_EQ(shapes.parameters.size(), params.size());
  std::map<std::string, int> split;  // from the plan
  for (const auto& [path, module] : model->named_modules())
    for (const nn::ParallelPlanEntry& e : model->parallel_plan(2))
      if (nn::plan_pattern_matches(e.pattern, path))
        for (const char* p : {"weight", "bias"}) split[path + "." + p] = expected_split(e.style, module, p);
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParameterShape& s = shapes.parameters[i];
    EXPECT_EQ(s.name, params[i].first);
    EXPECT_EQ(s.shape, params[i].second.shape().vec()) << s.name;
    EXPECT_EQ(s.block, model->block_of(s.name)) << s.name;
    EXPECT_EQ(s.split_dim, split.contains(s.name) ? split[s.name] : -1) << s.name;
    EXPECT_EQ(s.expert, model->expert_of(s.name)) << s.name;
    total += params[i].second.numel();
  }
  // A mixture of experts' sparse blocks, as the model's.
  EXPECT_EQ(shapes.experts, model->num_experts());
  EXPECT_EQ(static_cast<int64_t>(shapes.sparse_layers.size()), shapes.sparse_blocks);
  if (shapes.sparse_blocks > 0) {
    EXPECT_FALSE(shapes.sparse_block.empty());
    EXPECT_EQ(shapes.sparse_block.front().per_token, cfg.n_embd);  // the block's input first
    EXPECT_FALSE(shapes.expert_matmuls.empty());
  }
  EXPECT_EQ(shapes.tied_head_weight, model->tied_head_weight());
  EXPECT_EQ(shapes.num_parameters(), total);
  EXPECT_EQ(shapes.parameters_on_rank(1, 0, cfg.n_layer, true, true), total);
  // Blocks split evenly: two stages of a pipeline hold the whole model between them.
  EXPECT_EQ(shapes.parameters_on_rank(1, 0, 1, true, false) + shapes.parameters_on_rank(1, 1, cfg.n_layer, false, true),
            total);
  EXPECT_LT(shapes.parameters_on_rank(2, 0, cfg.n_layer, true, true), total);
  // A split parameter is smaller on each rank, but one the plan replicates (k and v with more
  // ranks than kv heads) is whole on every rank.
  for (int64_t tp : {int64_t{2}, int64_t{4}}) {
    if (cfg.n_head % tp != 0) continue;
    std::map<std::string, bool> replicated;
    for (const auto& [path, module] : model->named_modules())
      for (const nn::ParallelPlanEntry& e : model->parallel_plan(tp))
        if (nn::plan_pattern_matches(e.pattern, path) && e.style == nn::tp_style::kColumnwiseReplicated)
          for (const char* p : {"weight", "bias"}) replicated[path + "." + p] = true;
    for (const ParameterShape& s : shapes.parameters) {
      if (replicated.contains(s.name)) EXPECT_EQ(s.numel_on_rank(tp), s.numel()) << s.name << " at tp " << tp;
      else if (s.split_dim >= 0) EXPECT_LT(s.numel_on_rank(tp), s.numel()) << s.name << " at tp " << tp;
      else EXPECT_EQ(s.numel_on_rank(tp), s.numel()) << s.name << " at tp " << tp;
    }
  }
}

TEST(ModelShapes, MatchTheBuiltModelOfEveryFamily) {
  for (const ModelFamily& f : model_families()) {
    ASSERT_TRUE(f.shapes) << f.arch << " states no shapes";
  }
  check_family(tiny_gpt2());
  check_family(tiny_llama(false, false));
  check_family(tiny_llama(true, true));
  check_family(testing::tiny_mixtral());
  check_family(testing::tiny_qwen2_moe());
}

TEST(ModelShapes, MatmulFlopsAreTheGemmShapes) {
  // The planner's FLOPs per token and the MFU's GEMM list count the same products.
  for (const ModelConfig& cfg : {tiny_gpt2(), tiny_llama(false, false)}) {
    const ModelShapes s = model_family(cfg.arch).shapes(cfg);
    const int64_t per_token = cfg.n_layer * matmul_flops_per_token(s.block_matmuls) +
                              matmul_flops_per_token({s.head_matmul});
    double gemm = 0;
    for (const auto& g : model_family(cfg.arch).gemm_shapes(cfg, 2, 4)) gemm += g.flops() * static_cast<double>(g.count);
    EXPECT_NEAR(3.0 * static_cast<double>(per_token) * 8, gemm, 1e-6 * gemm) << cfg.arch;
  }
  // A mixture's layers list the router, each expert's products on its N k / E routed rows (8
  // tokens, top-2 of 4: 4 rows each) and a shared expert, not a dense MLP.
  for (const ModelConfig& cfg : {testing::tiny_mixtral(), testing::tiny_qwen2_moe()}) {
    const ModelShapes s = model_family(cfg.arch).shapes(cfg);
    ASSERT_EQ(s.experts, 4);
    const int64_t sparse = s.sparse_blocks, dense = cfg.n_layer - sparse;
    const int64_t per_token = dense * matmul_flops_per_token(s.block_matmuls) +
                              sparse * (matmul_flops_per_token(s.sparse_block_matmuls) +
                                        s.experts_per_token * matmul_flops_per_token(s.expert_matmuls)) +
                              matmul_flops_per_token({s.head_matmul});
    double gemm = 0;
    bool expert_rows = false;
    for (const auto& g : model_family(cfg.arch).gemm_shapes(cfg, 2, 4)) {
      gemm += g.flops() * static_cast<double>(g.count);
      if (g.name == "experts.gate_proj forward") expert_rows = g.M == 4 && g.count == sparse * 4;
    }
    EXPECT_TRUE(expert_rows) << cfg.arch;
    EXPECT_NEAR(3.0 * static_cast<double>(per_token) * 8, gemm, 1e-6 * gemm) << cfg.arch;
  }
  // A sparse block's active products per token: what every token runs through and k rows
  // through one expert.
  const ModelConfig moe = testing::tiny_mixtral();
  const ModelShapes s = model_family(moe.arch).shapes(moe);
  const int64_t dense = matmul_flops_per_token(s.block_matmuls), sparse = matmul_flops_per_token(s.sparse_block_matmuls);
  const int64_t C = moe.n_embd, I = 12;  // tiny_mixtral's moe_intermediate_size
  EXPECT_EQ(s.experts_per_token, 2);
  EXPECT_EQ(matmul_flops_per_token(s.expert_matmuls), 2 * 3 * C * I);
  // The router (C, E) in place of the dense MLP's three products.
  EXPECT_EQ(sparse - 2 * C * s.experts, dense - matmul_flops_per_token({s.block_matmuls.end() - 3, s.block_matmuls.end()}));
}

}  // namespace
}  // namespace trident::models
