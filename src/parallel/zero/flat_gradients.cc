#include "parallel/zero/flat_gradients.h"

#include "ops/optim.h"

namespace trident::parallel::zero {

FlatGradients::FlatGradients(const ZeroLayout& layout, comm::Communicator& comm, Hooks hooks,
                             std::unique_ptr<GradReducer> reducer)
    : GradientShards(layout, comm, std::move(hooks)), reducer_(std::move(reducer)),
      flat_(zeros_in(MemoryCategory::kGradient, layout.total(), DType::kF32, layout.device())) {}

void FlatGradients::prepare(GradReducer& reducer, const ZeroLayout& layout) {
  std::vector<BucketLayout> layouts;
  for (const Bucket& b : layout.buckets()) {
    BucketLayout bucket;
    for (size_t k : b.params) {
      bucket.shapes.push_back(layout.param(k).shape());
      bucket.offsets.push_back(layout.flat_offset(k) - b.begin);
    }
    bucket.numel = b.length;
    layouts.push_back(std::move(bucket));
  }
  reducer.prepare(layouts);
}

Tensor FlatGradients::slot(size_t k) { return flat_slice(flat_, layout_.flat_offset(k), layout_.param(k).numel()); }

Tensor FlatGradients::shard(size_t u) const {
  const Bucket& b = layout_.buckets()[u];
  return flat_slice(flat_, b.begin, layout_.shard_len(b));
}

std::unique_ptr<comm::Work> FlatGradients::start(size_t u) {
  const Bucket& b = layout_.buckets()[u];
  const int64_t n = layout_.shard_len(b);
  const Tensor bucket = flat_slice(flat_, b.begin, b.length);
  if (reducer_) return reducer_->start_shard(u, bucket, flat_slice(bucket, 0, n), comm_.rank());
  return comm_.reduce_scatter_async(bucket, flat_slice(bucket, 0, n), comm::ReduceOp::kSum);
}

void FlatGradients::fold(size_t u) {
  // The reducer left this rank's mean where the reduce-scatter would have, the bucket's start.
  if (reducer_) return;
  ops::scale_(shard(u), 1.0 / static_cast<double>(comm_.size()));
}

}  // namespace trident::parallel::zero
