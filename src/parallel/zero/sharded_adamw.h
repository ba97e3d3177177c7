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
// pinned bytes) while the host steps the next. Unless the parameters' shard is itself in host
// memory (ZeRO-3's NVMe tier behind a device, sharded_parameters.h): then the host rounds the
// masters straight into it, as for a host model, and nothing goes back to the device.
//
// Where m, v and the masters are kept (memory, or ZeRO-Infinity's NVMe tier) is the state
// store's (state_store.h): a store that is not resident is stepped unit by unit, the next units
// read ahead while one steps.
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
#include "parallel/zero/state_store.h"

namespace trident::parallel::zero {

class ShardedAdamW {
 public:
  // Bucket b's shards that a step reads and writes.
  struct Shards {
    std::function<Tensor(const Bucket&)> params;   // the parameters' shard, compute dtype; the
                                                   // f32 values AdamW steps when `state` has no masters
    std::function<Tensor(const Bucket&)> grads;    // the averaged gradient shard on the device
    // Called once every element of b's parameter shard holds its stepped value (when set).
    std::function<void(const Bucket&)> params_written;
  };
  // Has `state` allocate m and v (MemoryCategory::kOptimizerState), and allocates an offloaded
  // device model's host buffers: the gradient shard (kGradient) and, under mixed precision and
  // unless `params_on_host` (Shards::params hands out host memory: ZeRO-3's NVMe tier), the
  // rounded parameters.
  ShardedAdamW(const ZeroLayout& layout, const optim::AdamWOptions& options, DType compute, bool offload,
               StateStore& state, bool params_on_host = false);
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


 private:
  // AdamW on these units' parts of the buckets' segments (their states in `states`, alike
  // ordered).
  void update(double lr, int64_t step, const std::vector<size_t>& units, const std::vector<UnitState>& states,
              const Shards& shards) const;
  // Unit u's stepped masters (`state`) into the parameters' shards of the buckets it overlaps:
  // rounded on the host and copied asynchronously to the device under ZeRO-Offload of a device
  // model (unless params_on_host_). Where the shard is written in place, a bucket whose shard
  // ends in unit u is complete (units run in order along the shards): then
  // shards.params_written.
  void masters_to_params(size_t u, const UnitState& state, const Shards& shards);

  const ZeroLayout& layout_;
  const optim::AdamWOptions options_;
  const bool masters_apart_;  // mixed precision or offload: the masters are not the parameters
  const bool params_on_host_;  // the parameters' shard is handed out in host memory, model anywhere
  StateStore& state_;
  std::optional<Tensor> host_grads_;   // offload: the gradient shard, copied to the host to step
  std::optional<Tensor> host_params_;  // offload, mixed: the stepped masters rounded, on their way back
  bool copies_in_flight_ = false;      // copies between host and device not yet waited for
};

}  // namespace trident::parallel::zero
