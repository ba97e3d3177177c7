// Freezes the training config's key set: adding, removing or renaming a key must update
// this list (and the README), so such a change is always a reviewed one.
#include <gtest/gtest.h>

#include "config/config_tree.h"
#include "train/train_config.h"

namespace trident::train {
namespace {

TEST(TrainConfigKeys, AreFrozen) {
  TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  const std::vector<std::string> expected = {
      "model.n_layer", "model.n_head", "model.n_embd", "model.block_size", "model.vocab_size", "model.dropout",
      "model.layer_norm_eps", "model.init_std", "model.init_seed", "model.activation_checkpointing",
      "data.train_file", "data.val_file", "data.tokenizer", "data.vocab_dir", "data.batch_size", "data.seq_len",
      "data.grad_accum_steps", "data.sampler", "data.seed",
      "optim.lr", "optim.beta1", "optim.beta2", "optim.eps", "optim.weight_decay", "optim.grad_clip",
      "lr_schedule.shape", "lr_schedule.warmup_steps", "lr_schedule.decay_steps", "lr_schedule.min_lr",
      "precision.dtype", "precision.initial_loss_scale", "precision.growth_interval", "precision.growth_factor",
      "precision.backoff_factor", "precision.hysteresis", "precision.min_loss_scale",
      "parallel.tp", "parallel.sequence_parallel", "parallel.pp", "parallel.virtual_stages",
      "parallel.pipeline_schedule", "parallel.pipeline_layers", "parallel.zero_stage", "parallel.bucket_mb",
      "parallel.offload_optimizer",
      "train.steps", "train.eval_interval", "train.eval_batches", "train.log_interval", "train.checkpoint_interval",
      "train.checkpoint_keep", "train.out_dir", "train.init_from", "train.resume", "train.threads", "train.device",
      "train.flush_denormals"};
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

}  // namespace
}  // namespace trident::train
