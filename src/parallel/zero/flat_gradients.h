// ZeRO-1's gradients: one full flat f32 buffer (4P bytes), laid out as the flat parameters,
// in which the step's micro-batches accumulate. Only the last micro-batch's backward
// communicates: each bucket is reduce-scattered in place as soon as it is complete, this
// rank's averaged shard landing at the bucket's start, and a reduction a hook finds complete
// is folded in at once (under ZeRO-Offload its copy to the host then overlaps the backward
// too). With a GradReducer (parallel.grad_compression) the reducer averages each whole
// bucket instead of the reduce-scatter and leaves this rank's mean in the same place.
//
// Not here: the flow of hooks and reductions (gradients.h), the staged buckets of stages 2-3
// (staged_gradients.h).
#pragma once

#include <memory>

#include "parallel/zero/gradients.h"

namespace trident::parallel::zero {

class FlatGradients final : public GradientShards {
 public:
  // Allocates the flat buffer (MemoryCategory::kGradient). `reducer` may be null.
  FlatGradients(const ZeroLayout& layout, comm::Communicator& comm, Hooks hooks, std::unique_ptr<GradReducer> reducer);
  ~FlatGradients() override { drain(); }
  // Gives `reducer` the buckets' layouts (it may allocate state per bucket): before any of
  // ZeRO's buffers (Note [ZeRO's allocation order] in parallel/zero.cc).
  static void prepare(GradReducer& reducer, const ZeroLayout& layout);

  Tensor shard(size_t u) const override;
  GradReducer* reducer() const override { return reducer_.get(); }

 protected:
  Tensor slot(size_t k) override;
  bool reduces_now() const override { return last_micro_batch(); }
  std::unique_ptr<comm::Work> start(size_t u) override;
  void fold(size_t u) override;
  void completed(size_t u) override { finish(u); }

 private:
  std::unique_ptr<GradReducer> reducer_;
  Tensor flat_;
};

}  // namespace trident::parallel::zero
