// AdamW on this rank's whole parameters (parallel/update_strategy.h): one process, data
// parallel, mixed precision's fp32 masters (on the host under single-process ZeRO-Offload),
// tensor and pipeline parallel without ZeRO; with data parallelism, compressed gradients
// (parallel.grad_compression: a GradReducer of the buckets, or 1-bit Adam's optimizer).
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "optim/adamw.h"
#include "optim/mixed_precision.h"
#include "parallel/data_parallel.h"
#include "parallel/onebit_adam.h"
#include "parallel/parallel_options.h"
#include "parallel/tensor_parallel.h"
#include "parallel/update_strategy.h"

namespace trident::parallel {

class ReplicatedUpdate final : public UpdateStrategy {
 public:
  // `params`: the model's parameters this rank holds (f32). `master` (mixed precision or
  // offload): their fp32 masters, which the optimizer steps instead; `dp` (several
  // data-parallel ranks): averages the stepped tensors' gradients. Under tensor or pipeline
  // parallelism the clip's norm sums over `tp` (the `plan`'s split parameters) and `pp`.
  // `compression`'s grad_compression and its settings apply to the `dp` group.
  ReplicatedUpdate(std::vector<nn::NamedTensor> params, std::unique_ptr<optim::MasterWeights> master,
                   comm::Communicator* dp, int64_t bucket_bytes, const optim::AdamWOptions& options,
                   const TensorParallelPlan* plan, comm::Communicator* tp, comm::Communicator* pp,
                   const ParallelOptions& compression = {});

  void begin_backward(bool last) override;
  void end_backward() override;
  void finish_backward() override;
  void add_grad(const std::string& name, const Tensor& grad) override;
  StepOutcome step(const StepContext& ctx) override;
  void zero_grads() override;
  std::vector<nn::NamedTensor> weights() const override;
  int64_t step_count() const override { return onebit_ ? onebit_->step_count() : optimizer_->step_count(); }
  std::vector<nn::NamedTensor> gather_weights() override { return weights(); }
  std::vector<nn::NamedTensor> gather_state() override { return optimizer_->state(); }
  void load_weights(const CheckpointSource& source) override;
  void load_state(const CheckpointSource& source, bool with_state, int64_t step) override;
  std::vector<nn::NamedTensor> rank_state() const override;

 private:
  bool local_gradients() const { return onebit_ && onebit_->compressing(); }
  std::vector<nn::NamedTensor> params_;
  std::unique_ptr<optim::MasterWeights> master_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<OnebitAdam> onebit_;  // parallel.grad_compression = onebit_adam
  const TensorParallelPlan* plan_;
  comm::Communicator* tp_;
  comm::Communicator* pp_;
};

}  // namespace trident::parallel
