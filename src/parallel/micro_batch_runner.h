// How a step's micro-batches run forward and backward on this rank: one after another through
// the whole model, or through a pipeline's schedule (pipeline.h). parallelize() (parallelize.h)
// picks it; the trainer's step and evaluation call it, so they have no branch per layout.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "models/causal_lm.h"
#include "parallel/update_strategy.h"

namespace trident::parallel {

struct MicroBatch {
  Tensor inputs, targets;
  // Rows of packed documents (ops/documents.h), or none.
  std::optional<ops::Documents> documents;
  const ops::Documents* docs() const { return documents ? &*documents : nullptr; }
  // Its loss's share of the step: the backward starts from loss_seed * weight, and the sums the
  // runners return add weight * loss. 1 for every micro-batch of equal-sized batches; a loss
  // mask weighs each by its trained tokens (Note [Steps over masked tokens] in train/trainer.cc),
  // and one with none (weight 0: its mean is 0/0) adds nothing.
  double weight = 1.0;
  double weighed(double loss) const { return weight == 1.0 ? loss : weight == 0.0 ? 0.0 : weight * loss; }
};

class MicroBatchRunner {
 public:
  virtual ~MicroBatchRunner() = default;
  // Forward and backward of every micro-batch, each loss multiplied by `loss_seed` before its
  // backward (1 / micro-batches, times fp16's loss scale), telling `update` when each backward
  // begins (begin_backward(last)) and when they have ended (end_backward). Returns the sum of
  // the micro-batches' losses (on every rank of a pipeline).
  virtual double train(const std::vector<MicroBatch>& micro, double loss_seed, UpdateStrategy& update) = 0;
  // The sum of the losses of `batches`, forward only (call under NoGradGuard, in eval mode).
  virtual double evaluate(const std::vector<MicroBatch>& batches) = 0;
};

// The whole model on this rank (one process, data parallel, tensor parallel, ZeRO).
class SequentialRunner final : public MicroBatchRunner {
 public:
  explicit SequentialRunner(models::CausalLM& model) : model_(model) {}
  double train(const std::vector<MicroBatch>& micro, double loss_seed, UpdateStrategy& update) override;
  double evaluate(const std::vector<MicroBatch>& batches) override;

 private:
  models::CausalLM& model_;
};

}  // namespace trident::parallel
