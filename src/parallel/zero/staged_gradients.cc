#include "parallel/zero/staged_gradients.h"

#include "core/copy.h"
#include "ops/elementwise.h"
#include "ops/optim.h"

namespace trident::parallel::zero {

StagedGradients::StagedGradients(const ZeroLayout& layout, comm::Communicator& comm, Hooks hooks)
    : GradientShards(layout, comm, std::move(hooks)),
      shard_(zeros_in(MemoryCategory::kGradient, layout.shard_total(), DType::kF32, layout.device())),
      staging_(layout.buckets().size()) {}

Tensor StagedGradients::shard(size_t u) const { return layout_.shard_of(shard_, layout_.buckets()[u]); }

Tensor StagedGradients::slot(size_t k) {
  // The bucket's staging buffer is allocated on first use in a micro-batch.
  const size_t u = layout_.bucket_of(k);
  const Bucket& b = layout_.buckets()[u];
  if (!staging_[u]) staging_[u] = zeros_in(MemoryCategory::kGradient, b.length, DType::kF32, layout_.device());
  return flat_slice(*staging_[u], layout_.flat_offset(k) - b.begin, layout_.param(k).numel());
}

std::unique_ptr<comm::Work> StagedGradients::start(size_t u) {
  const Tensor& staging = *staging_[u];
  return comm_.reduce_scatter_async(staging, flat_slice(staging, 0, layout_.shard_len(layout_.buckets()[u])),
                                    comm::ReduceOp::kSum);
}

void StagedGradients::fold(size_t u) {
  // Average this micro-batch's shard and add it to the step's gradient shard.
  const Tensor part = flat_slice(*staging_[u], 0, layout_.shard_len(layout_.buckets()[u]));
  ops::scale_(part, 1.0 / static_cast<double>(comm_.size()));
  const Tensor dst = shard(u);
  if (first_micro_batch()) {
    core::copy_(dst, part);
  } else {
    ops::add_(dst, part);
  }
  staging_[u].reset();  // the full bucket exists only while it is being reduced
}

// Note [Staged buckets]
// Stages 2-3 copy each micro-batch's gradients into a full-size f32 staging buffer per bucket
// (allocated at the bucket's first gradient), reduce-scatter it and free it once its shard is
// folded in. Folding in whenever MPI reports a reduce-scatter done made the peak depend on
// MPI's timing (on 2 ranks of the small config, 0 to 14% under the every-bucket bound, by
// run). Instead a bucket is folded in when the next one is posted: the backward has computed a
// whole bucket's gradients since, polling MPI at each, so the wait is rarely a wait; at most
// two buckets are staged besides those still filling (ZeRO-3's root part, open from the
// backward's first gradient to its last), and planner/memory_model.cc predicts the peak
// exactly from the buckets' sizes.
void StagedGradients::posted(size_t u) {
  if (posted_) finish(*posted_);
  posted_ = u;
}

void StagedGradients::micro_batch_reduced() {
  posted_.reset();
  forget_arrivals();  // staging is per micro-batch
}

}  // namespace trident::parallel::zero
