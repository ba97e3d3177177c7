// ZeRO stages 1-3 as the step's update strategy (parallel/update_strategy.h): one
// ZeroOptimizer (zero.h) per reduction group (the placement table's: dense parameters over the
// data-parallel axes, an expert's over its expert-data-parallel group), each with its own
// mixed precision and offload. The global norm for clipping sums every group's squares (each
// over its own ranks), then the tensor-parallel shards' over tp and everything over the
// pipeline's stages, as one group's did alone. Under ZeRO-3 every group's optimizer gathers
// its part of each part of the model around the part's forward (chained part hooks).
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "nn/part_hooks.h"
#include "parallel/update_strategy.h"
#include "parallel/zero.h"

namespace trident::parallel {

class ZeroUpdate final : public UpdateStrategy, public nn::PartHooks {
 public:
  // `groups`: one optimizer per reduction group (none on a stage whose parameters are all
  // frozen), built over the group's parameters (with its
  // communicator, split flags set). `tp` and `pp` (null without them): where the norm's squares
  // of split parameters, and all of them, are summed further.
  ZeroUpdate(std::vector<std::unique_ptr<ZeroOptimizer>> groups, comm::Communicator* tp, comm::Communicator* pp);

  void begin_backward(bool last) override;
  void end_backward() override;
  void finish_backward() override {}
  void add_grad(const std::string& name, const Tensor& grad) override;
  StepOutcome step(const StepContext& ctx) override;
  void zero_grads() override {}
  int64_t step_count() const override { return steps_; }
  void load_weights(const CheckpointSource&) override {}  // its partition comes with the state
  void load_state(const CheckpointSource& source, bool with_state, int64_t step) override;
  std::vector<HeldPiece> held_pieces() override;
  std::vector<nn::NamedTensor> rank_state() const override;
  std::optional<TierTraffic> tier_traffic() const override;

  // ZeRO-3, as the model's part hooks: the part's forward through every group's gathering.
  Tensor run(size_t part, const nn::PartForward& forward, const Tensor& x) override;

 private:
  // Through groups [g, end): group g gathers around the rest.
  Tensor run_from(size_t g, size_t part, const nn::PartForward& forward, const Tensor& x);

  std::vector<std::unique_ptr<ZeroOptimizer>> groups_;
  comm::Communicator* tp_;
  comm::Communicator* pp_;
  comm::Communicator* ep_ = nullptr;
  std::vector<bool> expert_groups_;

 public:
  // Expert parallelism: groups[k] holds experts' parameters when expert_groups[k], and their
  // gradient squares are summed over `ep` for the norm.
  void set_expert_parallel(comm::Communicator* ep, std::vector<bool> expert_groups) {
    ep_ = ep;
    expert_groups_ = std::move(expert_groups);
  }
  // Steps taken: every group's count, and a pipeline stage's whose parameters are all frozen
  // (no group, but the same collectives as the other stages).
  int64_t steps_ = 0;
};

}  // namespace trident::parallel
