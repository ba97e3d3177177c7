// The training loop for a GPT-2 on one process: micro-batches with gradient accumulation,
// global-norm clipping, AdamW with a warmup/cosine schedule, periodic evaluation, metrics
// (JSONL) and progress, and checkpoints that resume bit-identically.
//
// A step: lr = schedule(step); for each of grad_accum_steps micro-batches, loss / accum is
// back-propagated (gradients accumulate in .grad); clip; AdamW; zero the gradients. Under
// mixed precision (precision.dtype bf16/fp16) the model runs in that dtype, gradients fold
// into fp32 master weights, which AdamW steps and checkpoints store; fp16 multiplies the loss
// by a dynamic loss scale and skips steps whose gradients overflow (optim/mixed_precision.h).
//
// Checkpoint directory <out_dir>/step_NNNNNN (checkpoint/checkpoint_dir.h), files:
//   model.safetensors      parameters under Hugging Face GPT-2 names (fp32 masters under mixed precision)
//   optimizer.safetensors  AdamW state: "<param>.exp_avg", "<param>.exp_avg_sq" (f32)
//   trainer_state.json     step, optimizer step, sampler state, dropout RNG state, loss scaler
//   config.toml            the resolved training config
//   config.json            Hugging Face's config for the model (so transformers loads it)
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "data/sampler.h"
#include "models/gpt2/model.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "optim/mixed_precision.h"
#include "train/metrics.h"
#include "train/train_config.h"

namespace trident::train {

class Trainer {
 public:
  // Builds the model (GPT-2 init, or weights from train.init_from), optimizer and samplers,
  // and resumes from the latest checkpoint in train.out_dir when train.resume is set.
  static StatusOr<std::unique_ptr<Trainer>> create(const TrainConfig& cfg);

  // Trains until `until_step` optimizer steps are done (default: train.steps), evaluating
  // and checkpointing on the configured intervals and at the end.
  [[nodiscard]] Status run(int64_t until_step = -1);
  // Mean validation loss over train.eval_batches sequential batches from the start of the
  // validation file (the same batches every time).
  double evaluate();
  [[nodiscard]] Status save_checkpoint();
  [[nodiscard]] Status load_checkpoint(const std::string& dir);

  int64_t step() const { return step_; }
  models::gpt2::GPT2& model() { return *model_; }
  const TrainConfig& config() const { return cfg_; }

  // Observers (tests, the CLI): called after each step / evaluation.
  std::function<void(const StepMetrics&)> on_step;
  std::function<void(int64_t step, double val_loss)> on_eval;
  // Printing: the progress bar and log lines; off for quiet runs.
  bool show_progress = true;

 private:
  explicit Trainer(const TrainConfig& cfg);
  [[nodiscard]] Status init();
  StepMetrics train_step();

  TrainConfig cfg_;
  std::unique_ptr<models::gpt2::GPT2> model_;
  // The tensors the optimizer steps and checkpoints hold: the model's parameters in fp32, the
  // fp32 masters under mixed precision.
  std::vector<nn::NamedTensor> weights() const;

  std::unique_ptr<optim::MasterWeights> master_;  // mixed precision only
  std::unique_ptr<optim::DynamicLossScaler> scaler_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<data::BatchSampler> train_sampler_;
  std::shared_ptr<const data::TokenFile> val_file_;
  int64_t step_ = 0;
};

// Loads model weights from a safetensors file with Hugging Face GPT-2 names (hf_names.h)
// into `model`, converting dtypes; errors name every unknown, missing or mis-shaped tensor.
[[nodiscard]] Status load_gpt2_weights(models::gpt2::GPT2& model, const std::string& path);

// The resolved config as TOML (what `trident train` prints and checkpoints store).
std::string config_to_toml(const TrainConfig& cfg);

}  // namespace trident::train
