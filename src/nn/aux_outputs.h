// AuxOutputs: the channel from a model's forward to the training objective and the metrics,
// for what is not the LM loss: a mixture-of-experts router's load-balancing loss and z-loss
// (added to the objective), its expert load and dropped tokens (reported only), and per layer
// sums such as tokens per expert (nn/aux_layer_sums.h). A model owns
// one (models::CausalLM::aux_outputs()) and hands it to the modules that add to it; the
// trainer sets the loss seed before a step's micro-batches and takes the values after.
//
// A module written for one device adds its loss where it computes it (Megatron-Core's
// MoEAuxLossAutoScaler): add_loss() returns the activation unchanged, and the loss's gradient
// enters the backward where that activation's backward runs (autograd/functions/aux_loss.h).
// So the same model code is right under gradient accumulation, data parallelism, ZeRO,
// pipelines and activation checkpointing: Note [Auxiliary losses and the loss seed].
//
// Not here: combining the values over ranks (the trainer: Note [Auxiliary values over ranks]
// in train/trainer.cc), writing them (train/metrics.h), the losses themselves (the modules).
//
// Thread safety: every member may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/tensor.h"
#include "nn/aux_layer_sums.h"

namespace trident::nn {

// One name's values since the last take(): their sum and how many there were.
struct AuxValue {
  double sum = 0.0;
  int64_t count = 0;
  double mean() const;  // NaN when count is 0
};
using AuxValues = std::map<std::string, AuxValue>;

class AuxOutputs {
 public:
  AuxOutputs() = default;
  AuxOutputs(const AuxOutputs&) = delete;
  AuxOutputs& operator=(const AuxOutputs&) = delete;

  // Adds coefficient x `loss` (a one-element floating tensor) to the training objective and
  // returns x unchanged (a new tensor in grad mode): the backward through the returned tensor
  // starts `loss`'s backward from coefficient x loss_seed(). Records loss's value (without the
  // coefficient) under `name`. Attach the loss to an activation the model's output depends
  // on, computed in the same checkpointed region as the loss (autograd/functions/aux_loss.h).
  // Outside grad mode it only records. With `layer` >= 0 the value is also added to that
  // layer's sums under `name` as [value, 1] (so [sum, count] over the step). Throws for a loss
  // of more than one element or a non-finite coefficient.
  Tensor add_loss(const std::string& name, const Tensor& x, const Tensor& loss, double coefficient,
                  int64_t layer = -1);
  // Records `value` under `name` (a metric: expert load, dropped tokens).
  void add_metric(const std::string& name, double value);
  // Adds `values` element by element to layer `layer`'s sums under `name` (tokens per expert):
  // what a checkpointed region's rerun repeats is not added again, as for add_metric. Throws
  // when the name's earlier values had another length.
  void add_layer_sums(int64_t layer, const std::string& name, std::span<const double> values);
  // The same for a cost the rerun pays again (an exchange's bytes and seconds): added in a
  // rerun too. See Note [Auxiliary values in a checkpointed region].
  void add_layer_cost(int64_t layer, const std::string& name, std::span<const double> values);

  // What the main loss's backward is seeded with in the coming micro-batches: 1 / micro-batches
  // of the step, times fp16's loss scale (MicroBatchRunner::train's loss_seed). 1 until set.
  void set_loss_seed(double seed);
  double loss_seed() const;

  // Per name, the sum and count of the values recorded since the last take(), and forgets them.
  // Values recorded on a device are summed there (in fp32) and read once here.
  AuxValues take();
  // The per-layer sums since the last take_layer_sums(), and forgets them.
  AuxLayerSums take_layer_sums();

 private:
  // A checkpointed region's rerun records nothing: Note [Auxiliary values in a checkpointed region].
  static bool recording();
  void record(const std::string& name, const Tensor& loss, int64_t layer);

  mutable std::mutex mu_;
  double seed_ = 1.0;
  AuxValues values_;
  AuxLayerSums layer_sums_;
  // Per name, the sum of the values recorded on a device (fp32, on that device) and their count.
  std::map<std::string, std::pair<Tensor, int64_t>> device_sums_;
  // ... and per layer for a loss given one.
  std::map<AuxLayerKey, std::pair<Tensor, int64_t>> device_layer_sums_;
};

}  // namespace trident::nn
