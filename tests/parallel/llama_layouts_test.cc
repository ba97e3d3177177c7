// The LLaMA family (issue #22) under every layout: data parallel, ZeRO 1-3, tensor and
// sequence parallelism (its plan), pipelines (its untied head on the last stage; a tied one through the
// pipeline's weight exchange), mixed precision, activation checkpointing: per-step losses of a
// tiny LLaMA with grouped-query attention equal the single-process run's within 1e-5 relative
// in fp32 (1e-3 in bf16, as GPT-2's layouts).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/mpi_training_test.h"

namespace trident::train {
namespace {

class LlamaLayoutsTest : public testing::MpiTrainingTest {
 protected:
  TrainConfig config(const std::string& out, bool tied) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.model.arch = "llama";
    cfg.model.n_head = 4;
    cfg.model.family_values = {{"n_kv_heads", int64_t{2}}, {"intermediate_size", int64_t{48}},
                               {"tie_word_embeddings", tied}};
    cfg.data.grad_accum_steps = 2;
    cfg.train.steps = 8;
    cfg.train.eval_interval = 4;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }
  // Sets the layout, trains it and the single process, and compares losses and validation.
  Run compare_layout(TrainConfig cfg, const std::string& name, int64_t tp, int64_t pp, int64_t zero, bool sp) {
    cfg.parallel.tp = tp;
    cfg.parallel.pp = pp;
    cfg.parallel.zero_stage = zero;
    cfg.parallel.sequence_parallel = sp;
    const Run ref = single(cfg);
    const Run got = train(cfg, world);
    expect_close(got.losses, ref.losses, "llama " + name);
    expect_close(got.val, ref.val, "llama " + name + " validation");
    return ref;
  }
  Run single(TrainConfig cfg) {
    cfg.parallel = {};
    cfg.train.out_dir += "_single_rank" + std::to_string(world->rank());
    return train(cfg, nullptr);
  }
};

TEST_F(LlamaLayoutsTest, LayoutsGiveTheSingleProcessLosses) {
  if (world->size() < 2) GTEST_SKIP() << "one rank: no layout to compare";
  struct Layout {
    const char* name;
    int64_t zero, pp;
    const char* dtype;
    bool tied;
    const char* checkpointing;
  };
  const Layout layouts[] = {{"dp", 0, 1, "fp32", false, "none"},
                            {"zero1_bf16", 1, 1, "bf16", false, "none"},
                            {"zero3_full", 3, 1, "fp32", true, "full"},
                            {"pp2_untied", 0, 2, "fp32", false, "none"},
                            {"pp2_tied_bf16", 1, 2, "bf16", true, "selective"}};
  for (const Layout& l : layouts) {
    if (world->size() % l.pp != 0) continue;
    TrainConfig cfg = config(l.name, l.tied);
    cfg.parallel.zero_stage = l.zero;
    cfg.parallel.pp = l.pp;
    cfg.precision.dtype = l.dtype;
    cfg.model.activation_checkpointing = l.checkpointing;
    const Run ref = single(cfg);
    const Run got = train(cfg, world);
    if (std::string(l.dtype) == "fp32") {
      expect_close(got.losses, ref.losses, std::string("llama ") + l.name);
      expect_close(got.val, ref.val, std::string("llama ") + l.name + " validation");
    } else {  // bf16 rounds sums taken in other orders differently: GPT-2's layouts allow 1e-3 too
      ASSERT_EQ(got.losses.size(), ref.losses.size());
      for (size_t i = 0; i < ref.losses.size(); ++i)
        EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-3 * std::abs(ref.losses[i])) << l.name << ", step " << i + 1;
      ASSERT_EQ(got.val.size(), ref.val.size());
      for (size_t i = 0; i < ref.val.size(); ++i)
        EXPECT_NEAR(got.val[i], ref.val[i], 1e-3 * std::abs(ref.val[i])) << l.name << ", evaluation " << i + 1;
    }
  }
}

// Tensor (and sequence) parallelism with grouped-query attention: kv heads split when the
// ranks divide them, replicated (each rank the head its query heads read) when there are fewer
// kv heads than ranks, multi-query attention (one kv head), tied and untied heads, with data
// and pipeline parallelism, and Mistral's sliding window under sequence parallelism: fp32
// losses equal the single-process run's within 1e-5.
TEST_F(LlamaLayoutsTest, TensorParallelLayoutsGiveTheSingleProcessLosses) {
  if (world->size() < 2) GTEST_SKIP() << "one rank has no tensor parallelism";
  struct Layout {
    const char* name;
    int64_t tp, pp, zero, kv_heads;
    bool sp, tied;
    int64_t window;  // Mistral's sliding window (0: none)
  };
  const Layout layouts[] = {{"tp2_kv2_split", 2, 1, 0, 2, false, false, 0},
                            {"tp2_sp_mqa_tied", 2, 1, 0, 1, true, true, 0},
                            {"tp4_kv2_replicated", 4, 1, 0, 2, false, false, 0},
                            {"tp4_sp_kv2_replicated_tied", 4, 1, 0, 2, true, true, 0},
                            {"tp2_dp2_zero1", 2, 1, 1, 2, false, false, 0},
                            {"tp2_pp2", 2, 2, 0, 2, false, true, 0},
                            {"tp2_sp_sliding_window", 2, 1, 0, 2, true, false, 5}};
  for (const Layout& l : layouts) {
    if (world->size() % (l.tp * l.pp) != 0) continue;
    if (l.zero > 0 && world->size() == l.tp * l.pp) continue;  // ZeRO needs data-parallel ranks
    TrainConfig cfg = config(l.name, l.tied);
    cfg.model.family_values["n_kv_heads"] = l.kv_heads;
    cfg.model.family_values["sliding_window"] = l.window;
    compare_layout(cfg, l.name, l.tp, l.pp, l.zero, l.sp);
  }
}

// LoRA (issue #48) under tensor and sequence parallelism: each adapter's factor on the split side
// of its layer is split with it (q, k, v, gate, up: B's rows; o, down: A's columns), the other is
// whole with its gradient summed over the ranks. Replicated kv heads (n_kv_heads < tp) take no
// adapter on k and v yet: a clear error naming the layer.
TEST_F(LlamaLayoutsTest, LoraUnderTensorParallelismGivesTheSingleProcessLosses) {
  if (world->size() < 2) GTEST_SKIP() << "one rank has no tensor parallelism";
  struct Layout {
    const char* name;
    int64_t tp, pp, zero, kv_heads;
    bool sp;
    const char* targets;
  };
  const char* all = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
  const Layout layouts[] = {{"lora_tp2", 2, 1, 0, 2, false, all},
                            {"lora_tp2_sp_mqa", 2, 1, 0, 1, true, "q_proj,o_proj,gate_proj,up_proj,down_proj"},
                            {"lora_tp2_dp2_zero3", 2, 1, 3, 2, false, all},
                            {"lora_tp2_pp2", 2, 2, 0, 2, false, all}};
  for (const Layout& l : layouts) {
    if (world->size() % (l.tp * l.pp) != 0) continue;
    if (l.zero > 0 && world->size() == l.tp * l.pp) continue;  // ZeRO needs data-parallel ranks
    TrainConfig cfg = config(l.name, false);
    cfg.model.family_values["n_kv_heads"] = l.kv_heads;
    cfg.lora.r = 4;
    cfg.lora.alpha = 8;
    cfg.lora.target_modules = l.targets;
    cfg.optim.lr = 1e-2;  // the adapters must move the loss for the comparison to see them
    const Run ref = compare_layout(cfg, l.name, l.tp, l.pp, l.zero, l.sp);
    ASSERT_GE(ref.losses.size(), 3u);
    EXPECT_NE(ref.losses.back(), ref.losses.front()) << l.name;
  }
  TrainConfig cfg = config("lora_tp2_replicated_kv", false);
  cfg.model.family_values["n_kv_heads"] = int64_t{1};
  cfg.lora.r = 4;
  cfg.lora.target_modules = "k_proj";
  cfg.parallel.tp = 2;
  try {
    auto t = Trainer::create(cfg, world);
    ADD_FAILURE() << "LoRA on replicated kv heads was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'layers.0.self_attn.k_proj' (columnwise_replicated) has an adapter"),
              std::string::npos)
        << e.what();
  }
}

// Note [One entry per input] (parallel/tp_styles.h): q, k and v read one input, gate and up
// another, and each group enters the tensor-parallel region once, as Megatron's fused layers.
// One more layer adds per micro-batch what one more GPT-2 layer adds: 4 all-reduces, or under
// sequence parallelism 4 all-gathers and 4 reduce-scatters (one per entry and one per
// row-parallel output, each forward and backward); replicated kv heads add their weights'
// gradients' all-reduces. Entering per layer gave 7 of each (5 entries).
// Split kv heads (tp 2) and, on 4 ranks, replicated ones (tp 4 over 2 kv heads).
TEST_F(LlamaLayoutsTest, EachInputEntersTheTensorParallelRegionOnce) {
  if (world->size() < 2) GTEST_SKIP() << "one rank has no tensor parallelism";
  for (int64_t tp : {int64_t{2}, int64_t{4}}) {
    if (world->size() % tp != 0) continue;
    for (bool sp : {false, true}) {
      std::vector<comm::CommStats> stats;
      for (int64_t layers : {2, 3}) {
        TrainConfig cfg = config("entries_tp" + std::to_string(tp) + (sp ? "_sp" : "") + std::to_string(layers), false);
        cfg.model.n_layer = layers;
        cfg.parallel.tp = tp;
        cfg.parallel.sequence_parallel = sp;
        cfg.data.grad_accum_steps = 1;
        stats.push_back(tp_stats_of_one_step(cfg, world));
      }
      auto added = [&](comm::CommOp op) { return stats[1].of(op).calls - stats[0].of(op).calls; };
      const std::string what = "tp " + std::to_string(tp) + (sp ? " with sequence parallelism" : "");
      if (sp) {
        EXPECT_EQ(added(comm::CommOp::kAllGather), 4) << what;
        EXPECT_EQ(added(comm::CommOp::kReduceScatter), 4) << what;
      } else {
        // Replicated kv heads (tp 4 over 2) add their k and v weights' gradients, summed over the ranks.
        EXPECT_EQ(added(comm::CommOp::kAllReduce), tp == 4 ? 6 : 4) << what;
      }
    }
  }
}

TEST_F(LlamaLayoutsTest, KvHeadsAndRanksThatDoNotDivideAreRefused) {
  if (world->size() < 4) GTEST_SKIP() << "needs 4 ranks for tp 4";
  TrainConfig cfg = config("tp_bad", false);
  cfg.model.n_head = 12;
  cfg.model.n_embd = 48;
  cfg.model.family_values["n_kv_heads"] = int64_t{3};
  cfg.parallel.tp = 4;
  try {
    auto t = Trainer::create(cfg, world);
    ADD_FAILURE() << "n_kv_heads 3 over tp 4 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_kv_heads (3) and parallel.tp (4) must divide one another"),
              std::string::npos)
        << e.what();
  }
}

// QLoRA (issue #48): the frozen base in NF4 under data, ZeRO, pipeline and tensor (and sequence)
// parallelism. Each rank quantizes the weights it computes with (Note [Where a quantized base
// comes from]): a whole weight quantizes alike on every rank, and a tensor-parallel shard as its
// part of the whole weight when its rows are whole 64-weight blocks (here: 128 features, 64 per
// rank) and each block keeps its own fp32 scale (double_quant = false); with double quantization
// a block's 8-bit scale is relative to its group of 256 blocks, which a shard cuts differently.
// fp32 losses equal the single-process run's within 1e-5.
TEST_F(LlamaLayoutsTest, QloraUnderEveryLayoutGivesTheSingleProcessLosses) {
  if (world->size() < 2) GTEST_SKIP() << "one rank: no layout to compare";
  struct Layout {
    const char* name;
    int64_t tp, pp, zero;
    bool sp, double_quant;
  };
  const Layout layouts[] = {{"qlora_dp", 1, 1, 0, false, true},
                            {"qlora_zero2", 1, 1, 2, false, true},
                            {"qlora_pp2", 1, 2, 0, false, true},
                            {"qlora_tp2", 2, 1, 0, false, false},
                            {"qlora_tp2_sp", 2, 1, 0, true, false}};
  for (const Layout& l : layouts) {
    if (world->size() % (l.tp * l.pp) != 0) continue;
    TrainConfig cfg = config(l.name, false);
    cfg.model.n_embd = 128;
    cfg.model.n_head = 4;
    cfg.model.family_values["intermediate_size"] = int64_t{128};
    cfg.lora.r = 4;
    cfg.lora.alpha = 8;
    cfg.lora.target_modules = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
    cfg.quantization.base = "nf4";
    cfg.quantization.double_quant = l.double_quant;
    cfg.optim.lr = 1e-2;
    const Run ref = compare_layout(cfg, l.name, l.tp, l.pp, l.zero, l.sp);
    ASSERT_GE(ref.losses.size(), 3u);
    EXPECT_NE(ref.losses.back(), ref.losses.front()) << l.name;
  }
}

// Packed documents (data.document_masking): the documents and their positions reach every
// stage, rank and rerun (GPT-2's learned positions too, split by sequence parallelism). The phrase corpus' token 12 ends a phrase of one pattern in eight,
// so most 16-token rows hold a boundary.
TEST_F(LlamaLayoutsTest, DocumentMasksUnderEveryLayoutGiveTheSingleProcessLosses) {
  if (world->size() < 2) GTEST_SKIP() << "one rank: no layout to compare";
  struct Layout {
    const char* name;
    int64_t tp, pp, zero;
    bool sp;
    const char* checkpointing;
    bool gpt2 = false;  // learned positions, split by sequence parallelism
  };
  const Layout layouts[] = {{"documents_dp", 1, 1, 0, false, "none"},
                            {"documents_zero3_full_checkpointing", 1, 1, 3, false, "full"},
                            {"documents_pp2", 1, 2, 0, false, "none"},
                            {"documents_tp2_sp", 2, 1, 0, true, "selective"},
                            {"documents_gpt2_tp2_sp", 2, 1, 0, true, "none", true}};
  for (const Layout& l : layouts) {
    if (world->size() % (l.tp * l.pp) != 0) continue;
    TrainConfig cfg = config(l.name, false);
    cfg.data.document_masking = true;
    cfg.data.end_of_document = 12;
    cfg.model.activation_checkpointing = l.checkpointing;
    if (l.gpt2) {
      cfg.model.arch = "gpt2";
      cfg.model.family_values.clear();
    }
    const Run ref = compare_layout(cfg, l.name, l.tp, l.pp, l.zero, l.sp);
    ASSERT_GE(ref.losses.size(), 3u);
    // The masks change the run: the same run without them has other losses.
    cfg.data.document_masking = false;
    cfg.data.end_of_document = -1;
    cfg.train.out_dir += "_unmasked";
    const Run unmasked = single(cfg);
    EXPECT_NE(unmasked.losses.front(), ref.losses.front()) << l.name;
  }
}

}  // namespace
}  // namespace trident::train
