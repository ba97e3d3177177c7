// The tiny GPT-2 run the training tests share: 2 layers, 2 heads, width 32, context 16,
// vocabulary 64, batches of 8 x 16 tokens from DIR/train.bin and DIR/val.bin (written from
// phrase_corpus()), lr 3e-3 with 3 warmup steps, 20 steps evaluated every 10 on 2 batches.
#pragma once

#include <filesystem>
#include <vector>

#include "data/token_file.h"
#include "support/phrase_corpus.h"
#include "train/train_config.h"

namespace trident::testing {

// Writes the run's data: DIR/train.bin (phrase_corpus()) and DIR/val.bin (its first 3000 tokens).
inline Status write_tiny_run_data(const std::filesystem::path& dir) {
  const std::vector<uint16_t> tokens = phrase_corpus();
  Status s = data::write_token_file(dir / "train.bin", tokens);
  if (!s.is_ok()) return s;
  return data::write_token_file(dir / "val.bin", std::vector<uint16_t>(tokens.begin(), tokens.begin() + 3000));
}

inline train::TrainConfig tiny_run_config(const std::filesystem::path& dir) {
  train::TrainConfig cfg;
  cfg.model.n_layer = 2;
  cfg.model.n_head = 2;
  cfg.model.n_embd = 32;
  cfg.model.block_size = 16;
  cfg.model.vocab_size = 64;
  cfg.data.train_file = (dir / "train.bin").string();
  cfg.data.val_file = (dir / "val.bin").string();
  cfg.data.batch_size = 8;
  cfg.data.seq_len = 16;
  cfg.optim.lr = 3e-3;
  cfg.lr_schedule.warmup_steps = 3;
  cfg.train.steps = 20;
  cfg.train.eval_interval = 10;
  cfg.train.eval_batches = 2;
  return cfg;
}

}  // namespace trident::testing
