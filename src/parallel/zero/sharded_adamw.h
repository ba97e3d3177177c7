// AdamW on a ZeRO rank's shard: the moments m and v of the elements this rank owns (8P/N
// bytes), the update over its segments (two multi-tensor updates, with and without weight
// decay), and the stepped values' way back into the parameters' shard (rounded to the compute
// dtype when the fp32 masters are apart from the parameters).
//
// ZeRO-Offload of a device model: m and v (and the masters, zero.h) live in pinned host memory
// and the multi-threaded CPU AdamW steps them. On the last micro-batch each bucket's gradient
// shard leaves for the host as soon as its reduce-scatter is folded in (to_host, overlapping
// the rest of the backward); the host steps bucket by bucket, and each bucket's updated shard
// goes back to the parameters' device (rounded on the host first under mixed precision: 2P/N
// pinned bytes) while the host steps the next.
//
// Not here: the layout (layout.h), the gradients' reduction (gradients.h), the parameters'
// gathers (parameters.h), the norm and clipping (zero.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "core/allocator.h"
#include "optim/adamw.h"
#include "parallel/zero/layout.h"

namespace trident::parallel::zero {

// A buffer of this rank's concatenated shards' size, f32 zeros, on `state_device`: the
// optimizer's, pinned host memory when that is not the parameters' device (so its copies to
// and from the device run at full speed).
Tensor shard_state_buffer(const ZeroLayout& layout, Device state_device, MemoryCategory category);

class ShardedAdamW {
 public:
  // Bucket b's shards that a step reads and writes.
  struct Shards {
    std::function<Tensor(const Bucket&)> masters;  // the f32 values AdamW steps
    std::function<Tensor(const Bucket&)> params;   // the parameters' shard, compute dtype
    std::function<Tensor(const Bucket&)> grads;    // the averaged gradient shard on the device
  };
  // Allocates m and v (MemoryCategory::kOptimizerState) on the state device (the host when
  // `offload`), and an offloaded device model's host buffers: the gradient shard (kGradient)
  // and, under mixed precision, the rounded parameters.
  ShardedAdamW(const ZeroLayout& layout, const optim::AdamWOptions& options, DType compute, bool offload);
  ~ShardedAdamW();
  ShardedAdamW(const ShardedAdamW&) = delete;
  ShardedAdamW& operator=(const ShardedAdamW&) = delete;

  // ZeRO-Offload of a device model: AdamW reads the gradient shard's host copy.
  bool steps_on_host() const { return host_grads_.has_value(); }
  // Starts copying bucket b's final gradient shard `grad` to the host.
  void to_host(const Bucket& b, const Tensor& grad);
  // Scales the host's copies of the gradient shard (waiting for them first).
  void scale_host_grads(double factor);
  // Waits for the copies between host and device, if any are in flight.
  void wait_copies();

  // AdamW step number `step` with learning rate lr on every bucket's shard, then the updated
  // values into the parameters' shard.
  void step(double lr, int64_t step, const Shards& shards);

  Tensor exp_avg(const Bucket& b) const { return layout_.shard_of(m_, b); }
  Tensor exp_avg_sq(const Bucket& b) const { return layout_.shard_of(v_, b); }

 private:
  const ZeroLayout& layout_;
  const optim::AdamWOptions options_;
  const bool masters_apart_;  // mixed precision or offload: the masters are not the parameters
  Tensor m_, v_;                       // concatenated shards, bucket b's at begin/N
  std::optional<Tensor> host_grads_;   // offload: the gradient shard, copied to the host to step
  std::optional<Tensor> host_params_;  // offload, mixed: the stepped masters rounded, on their way back
  bool copies_in_flight_ = false;      // copies between host and device not yet waited for
};

}  // namespace trident::parallel::zero
