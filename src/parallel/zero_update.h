// ZeRO stages 1-3 as the step's update strategy (parallel/update_strategy.h): the
// ZeroOptimizer (zero.h) over the data-parallel group, with its own mixed precision and
// offload.
#pragma once

#include <memory>

#include "parallel/update_strategy.h"
#include "parallel/zero.h"

namespace trident::parallel {

class ZeroUpdate final : public UpdateStrategy {
 public:
  // `params`: the model's parameters this rank holds, as given to `zero`.
  ZeroUpdate(std::vector<nn::NamedTensor> params, std::unique_ptr<ZeroOptimizer> zero)
      : params_(std::move(params)), zero_(std::move(zero)) {}

  void begin_backward(bool last) override {
    if (zero_->reducer()) zero_->reducer()->set_step(zero_->step_count());
    zero_->begin_backward(last);
  }
  void end_backward() override { zero_->end_backward(); }
  void finish_backward() override {}
  void add_grad(const std::string& name, const Tensor& grad) override { zero_->add_grad(name, grad); }
  StepOutcome step(const StepContext& ctx) override;
  void zero_grads() override {}
  std::vector<nn::NamedTensor> weights() const override { return params_; }
  int64_t step_count() const override { return zero_->step_count(); }
  // The fp32 values are the optimizer's shards (the masters under mixed precision; ZeRO-3
  // holds no whole parameter).
  std::vector<nn::NamedTensor> gather_weights() override { return zero_->gather_masters(); }
  std::vector<nn::NamedTensor> gather_state() override { return zero_->gather_state(); }
  void load_weights(const CheckpointSource&) override {}  // its partition comes with the state
  void load_state(const CheckpointSource& source, bool with_state, int64_t step) override;
  std::vector<nn::NamedTensor> rank_state() const override {
    return zero_->reducer() ? zero_->reducer()->state() : std::vector<nn::NamedTensor>{};
  }

  // The partitioned checkpoint (Note [Sharded checkpoints] in train/trainer_checkpoint.cc)
  // writes each rank's pieces.
  ZeroOptimizer& optimizer() { return *zero_; }

 private:
  std::vector<nn::NamedTensor> params_;
  std::unique_ptr<ZeroOptimizer> zero_;
};

}  // namespace trident::parallel
