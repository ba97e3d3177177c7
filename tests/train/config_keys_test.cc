// Freezes the training config's key set: adding, removing or renaming a key must update
// this list (and the README), so such a change is always a reviewed one.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "config/config_tree.h"
#include "train/train_config.h"

namespace trident::train {
namespace {

TEST(TrainConfigKeys, AreFrozen) {
  TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  const std::vector<std::string> expected = {
      "model.arch", "model.n_layer", "model.n_head", "model.n_embd", "model.block_size", "model.vocab_size",
      "model.dropout", "model.init_std", "model.init_seed", "model.activation_checkpointing",
      "model.layer_norm_eps",  // GPT-2's own (model.arch = "gpt2", the default)
      "data.train_file", "data.val_file", "data.tokenizer", "data.vocab_dir", "data.batch_size", "data.seq_len",
      "data.grad_accum_steps", "data.sampler", "data.seed", "data.document_masking", "data.end_of_document",
      "optim.lr", "optim.beta1", "optim.beta2", "optim.eps", "optim.weight_decay", "optim.grad_clip",
      "lr_schedule.shape", "lr_schedule.warmup_steps", "lr_schedule.decay_steps", "lr_schedule.min_lr",
      "precision.dtype", "precision.initial_loss_scale", "precision.growth_interval", "precision.growth_factor",
      "precision.backoff_factor", "precision.hysteresis", "precision.min_loss_scale",
      "parallel.tp", "parallel.sequence_parallel", "parallel.pp", "parallel.ep", "parallel.virtual_stages",
      "parallel.pipeline_schedule", "parallel.pipeline_layers", "parallel.zero_stage", "parallel.bucket_mb",
      "parallel.offload_optimizer", "parallel.offload_optimizer_device", "parallel.offload_param", "parallel.nvme_path",
      "parallel.nvme_buffer_count", "parallel.nvme_buffer_mb", "parallel.nvme_queue_depth",
      "parallel.nvme_prefetch_depth",
      "parallel.hierarchical", "parallel.intra_host_gbps", "parallel.inter_host_gbps",
      "parallel.grad_compression", "parallel.powersgd_rank", "parallel.powersgd_start_step",
      "parallel.onebit_warmup_steps", "parallel.onebit_block", "parallel.onebit_bound_update", "parallel.auto", "parallel.auto_cluster",
      "train.steps", "train.eval_interval", "train.eval_batches", "train.log_interval", "train.checkpoint_interval",
      "train.checkpoint_keep", "train.out_dir", "train.init_from", "train.freeze", "train.init_adapter", "train.resume", "train.threads", "train.device",
      "train.flush_denormals", "train.max_runtime", "train.profile_step",
      "train.mfu",
      "lora.r", "lora.alpha", "lora.dropout", "lora.target_modules", "lora.use_rslora", "lora.init_seed",
      "quantization.base", "quantization.double_quant", "quantization.skip_modules",
      "kernels.f32_gemm", "kernels.bf16_gemm", "kernels.cpu_avx512", "kernels.cuda_tf32", "kernels.cuda_cublaslt",
      "kernels.cuda_gelu_epilogue", "kernels.attention_generic", "kernels.cpu_bf16_attention",
      "monitor.port", "monitor.host", "monitor.job", "monitor.token_file", "monitor.tensorboard",
      "monitor.system_interval", "monitor.notify_cooldown", "monitor.notify_timeout"};
  EXPECT_EQ(tree.keys(), expected);
}

TEST(TrainConfigKeys, DefaultsRoundTripThroughToml) {
  TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  const std::string printed = tree.to_toml();
  TrainConfig again;
  config::ConfigTree tree2;
  again.bind(tree2);
  ASSERT_TRUE(tree2.load_toml_string(printed, "printed").is_ok());
  EXPECT_EQ(tree2.to_toml(), printed);
}

// A valid value other than `current` for `f` (the round trip below must see every key change).
OptionValue another_value(const OptionField& f, const OptionValue& current) {
  switch (f.type) {
    case OptionType::kInt: {
      const int64_t v = std::get<int64_t>(current);
      for (const int64_t c : {v + 7, v + 1, v - 1})
        if (f.range.contains(static_cast<double>(c))) return c;
      return v;
    }
    case OptionType::kFloat: {
      // Not a short decimal: the printed text must carry every bit.
      const double v = std::get<double>(current), up = v * 1.1 + 0.1 / 3.0, down = v * (1.0 / 3.0);
      return f.range.contains(up) ? up : down;
    }
    case OptionType::kBool: return !std::get<bool>(current);
    case OptionType::kString:
      if (!f.choices.empty()) return f.choices.front() == std::get<std::string>(current) ? f.choices.back() : f.choices.front();
      if (f.string_check.accepts) return std::string("1-02:03:04");
      // Quotes, a backslash, a tab, a newline and UTF-8: TOML must escape and keep them all.
      return std::get<std::string>(current) + "/a \"b\" c:\\d\te\nf \u00e9\u6f22";
  }
  return current;
}

// What `trident train` prints (and `--print-config`) is a config: with every key overridden
// to a value that is not its default, the printed TOML loads back into the same values.
TEST(TrainConfigKeys, EveryKeyRoundTripsThroughThePrintedToml) {
  TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  const std::string defaults = tree.to_toml();
  std::vector<std::string> keys;
  for (const std::string& key : tree.keys()) {
    const OptionField* f = tree.field(key);
    ASSERT_NE(f, nullptr) << key;
    // model.arch chooses the keys after it: this run keeps GPT-2's (models_test switches families).
    if (key == "model.arch") continue;
    keys.push_back(key);
    const OptionValue before = tree.get(key).value();
    const OptionValue changed = another_value(*f, before);
    ASSERT_NE(changed, before) << key;
    const Status s = tree.set(key, changed, "test");
    ASSERT_TRUE(s.is_ok()) << key << ": " << s.to_string();
  }
  const std::string printed = tree.to_toml();
  TrainConfig again;
  config::ConfigTree tree2;
  again.bind(tree2);
  const Status s = tree2.load_toml_string(printed, "printed");
  ASSERT_TRUE(s.is_ok()) << s.to_string() << "\n" << printed;
  TrainConfig defaults_cfg;
  config::ConfigTree defaults_tree;
  defaults_cfg.bind(defaults_tree);
  for (const std::string& key : keys) {
    EXPECT_EQ(tree2.get(key).value(), tree.get(key).value()) << key;
    EXPECT_NE(tree2.get(key).value(), defaults_tree.get(key).value()) << key << " kept its default";
  }
  EXPECT_EQ(tree2.to_toml(), printed);
  EXPECT_NE(printed, defaults);
}

// kernels.bf16_gemm matters only to bf16 runs: an fp32 run neither checks it (a bad
// TRIDENT_CPU_BF16_GEMM does not stop it) nor resolves it (its printed config also runs on a
// CPU without native bf16); a bf16 run checks it and names the variable.
// 100000 threads on a 2-core machine made OpenMP start them all.
TEST(TrainConfigKeys, ThreadsAreBounded) {
  TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  EXPECT_TRUE(tree.apply_override("train.threads=4096", "test").is_ok());
  const Status s = tree.apply_override("train.threads=100000", "test");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("threads = 100000 is invalid: allowed: between 0 and 4096"), std::string::npos) << s.message();
}

TEST(TrainConfigKeys, Bf16EngineIsCheckedAndResolvedOnlyForBf16Runs) {
  ::setenv("TRIDENT_CPU_BF16_GEMM", "bogus", 1);
  TrainConfig fp32;
  EXPECT_NO_THROW(fp32.validate());
  EXPECT_EQ(fp32.kernels.resolved(fp32.uses_bf16_gemms()).bf16_gemm, "auto");
  EXPECT_NE(fp32.kernels.resolved(fp32.uses_bf16_gemms()).f32_gemm, "auto");
  TrainConfig bf16;
  bf16.precision.dtype = "bf16";
  try {
    bf16.validate();
    ADD_FAILURE() << "a bf16 run accepted TRIDENT_CPU_BF16_GEMM=bogus";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("TRIDENT_CPU_BF16_GEMM=bogus"), std::string::npos) << e.what();
  }
  ::unsetenv("TRIDENT_CPU_BF16_GEMM");
  EXPECT_NE(bf16.kernels.resolved(bf16.uses_bf16_gemms()).bf16_gemm, "auto");
}

}  // namespace
}  // namespace trident::train
