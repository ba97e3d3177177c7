// ZeRO 2-3's gradients: this rank's persistent gradient shard (4P/N bytes, f32), and per
// micro-batch a transient full-size f32 staging buffer per bucket in which the backward's
// gradients gather. Every micro-batch's backward reduce-scatters each bucket as soon as it is
// complete, averages this rank's part and adds it into the gradient shard (the step's first
// micro-batch copies it), and frees the staging buffer. A bucket is folded in when the next
// one is posted, not when a hook finds its reduce-scatter done, so that the staged memory is a
// fixed number (Note [Staged buckets] in staged_gradients.cc).
//
// Not here: the flow of hooks and reductions (gradients.h), stage 1's full flat buffer
// (flat_gradients.h); compressed gradients (GradReducer) compose with stage 1 only.
#pragma once

#include <optional>
#include <vector>

#include "parallel/zero/gradients.h"

namespace trident::parallel::zero {

class StagedGradients final : public GradientShards {
 public:
  // Allocates the gradient shard (MemoryCategory::kGradient).
  StagedGradients(const ZeroLayout& layout, comm::Communicator& comm, Hooks hooks);
  ~StagedGradients() override { drain(); }

  Tensor shard(size_t u) const override;

 protected:
  Tensor slot(size_t k) override;
  bool reduces_now() const override { return true; }
  std::unique_ptr<comm::Work> start(size_t u) override;
  void fold(size_t u) override;
  void posted(size_t u) override;
  void micro_batch_reduced() override;

 private:
  Tensor shard_;                                 // concatenated shards, bucket b's at begin/N
  std::vector<std::optional<Tensor>> staging_;   // per bucket: this micro-batch's full gradients
  // The bucket whose reduce-scatter was posted last and is not folded in yet.
  std::optional<size_t> posted_;
};

}  // namespace trident::parallel::zero
