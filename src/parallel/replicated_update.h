// AdamW on this rank's whole trainable parameters (parallel/update_strategy.h): one process,
// data parallel, mixed precision's fp32 masters (on the host under single-process
// ZeRO-Offload), tensor and pipeline parallel without ZeRO; with data parallelism, compressed
// gradients (parallel.grad_compression: a GradReducer of the buckets, or 1-bit Adam's
// optimizer). Each reduction group's gradients are averaged over its own ranks.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "optim/adamw.h"
#include "optim/mixed_precision.h"
#include "parallel/data_parallel.h"
#include "parallel/onebit_adam.h"
#include "parallel/parallel_options.h"
#include "parallel/placement.h"
#include "parallel/update_strategy.h"

namespace trident::parallel {

class ReplicatedUpdate final : public UpdateStrategy {
 public:
  // `groups`: the trainable parameters this rank holds (f32), by reduction group (a group's
  // communicator null: one process, nothing to average). `master` (mixed precision or
  // offload): their fp32 masters, built over the groups' parameters in group order, which the
  // optimizer steps instead. Under tensor or pipeline parallelism the clip's norm sums over
  // `tp` (the `placements`' split parameters) and `pp`. `compression`'s grad_compression and
  // its settings apply to the one data-parallel group.
  ReplicatedUpdate(std::vector<ParamGroup> groups, std::unique_ptr<optim::MasterWeights> master, int64_t bucket_bytes,
                   const optim::AdamWOptions& options, const PlacementTable* placements, comm::Communicator* tp,
                   comm::Communicator* pp, const ParallelOptions& compression = {});

  void begin_backward(bool last) override;
  void end_backward() override;
  void finish_backward() override;
  void add_grad(const std::string& name, const Tensor& grad) override;
  StepOutcome step(const StepContext& ctx) override;
  void zero_grads() override;
  int64_t step_count() const override { return onebit_ ? onebit_->step_count() : optimizer_->step_count(); }
  void load_weights(const CheckpointSource& source) override;
  void load_state(const CheckpointSource& source, bool with_state, int64_t step) override;
  std::vector<HeldPiece> held_pieces() override;
  std::vector<nn::NamedTensor> rank_state() const override;

 private:
  bool local_gradients() const { return onebit_ && onebit_->compressing(); }
  // The tensors the optimizer steps: the parameters, or their fp32 masters.
  std::vector<nn::NamedTensor> weights() const;
  std::vector<nn::NamedTensor> params_;  // every group's, in group order
  std::unique_ptr<optim::MasterWeights> master_;
  std::vector<std::unique_ptr<DataParallel>> dp_;  // one per group with a communicator
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<OnebitAdam> onebit_;  // parallel.grad_compression = onebit_adam
  const PlacementTable* placements_;
  comm::Communicator* tp_;
  comm::Communicator* pp_;
  comm::Communicator* ep_ = nullptr;

 public:
  // Expert parallelism: the experts' gradient squares are summed over `ep` for the norm.
  void set_expert_parallel(comm::Communicator* ep) { ep_ = ep; }
};

}  // namespace trident::parallel
