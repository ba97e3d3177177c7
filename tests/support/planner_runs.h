// A GPT-2 run as the planner sees it (planner/run_spec.h), without a config: L layers, width C,
// NH heads, sequences of T tokens, G of them per step, in `dtype`, 25 MiB buckets; and the
// shipped cluster files (configs/clusters/) at a number of nodes.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "models/registry.h"
#include "planner/cluster.h"
#include "planner/run_spec.h"

namespace trident::testing {

inline planner::RunSpec gpt_run(int64_t L, int64_t C, int64_t NH, int64_t T, int64_t G, DType dtype = DType::kF32) {
  planner::RunSpec run;
  run.model.n_layer = L;
  run.model.n_head = NH;
  run.model.n_embd = C;
  run.model.block_size = T;
  run.shapes = models::model_family("gpt2").shapes(run.model);
  run.seq_len = T;
  run.global_batch = G;
  run.compute = dtype;
  run.bucket_bytes = 25 << 20;
  return run;
}

// src/planner/named_configs.cc's tiny-moe: a llama of 4 layers, width 256, each a mixture of 4
// experts of 512, top-2; T = 256, 8 sequences.
inline planner::RunSpec tiny_moe_run() {
  planner::RunSpec run = gpt_run(4, 256, 4, 256, 8);
  run.model.arch = "llama";
  run.model.family_values["n_kv_heads"] = int64_t{2};
  run.model.family_values["num_local_experts"] = int64_t{4};
  run.model.family_values["num_experts_per_tok"] = int64_t{2};
  run.model.family_values["moe_intermediate_size"] = int64_t{512};
  run.shapes = models::model_family("llama").shapes(run.model);
  return run;
}

#ifdef TRIDENT_SOURCE_DIR
// configs/clusters/`file` with `nodes` of its nodes.
inline planner::Cluster shipped_cluster(const std::string& file, int64_t nodes) {
  auto c = planner::load_cluster(std::string(TRIDENT_SOURCE_DIR "/configs/clusters/") + file);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  planner::Cluster out = c.is_ok() ? c.value() : planner::Cluster{};
  out.shape.nodes = nodes;
  return out;
}
#endif

}  // namespace trident::testing
