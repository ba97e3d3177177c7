#include "parallel/zero/sharded_adamw.h"

#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "ops/optim.h"

namespace trident::parallel::zero {
namespace {

Device state_device_of(const ZeroLayout& layout, bool offload) { return offload ? Device::cpu() : layout.device(); }

}  // namespace

Tensor shard_state_buffer(const ZeroLayout& layout, Device state_device, MemoryCategory category) {
  if (state_device == layout.device()) return zeros_in(category, layout.shard_total(), DType::kF32, layout.device());
  MemoryCategoryGuard guard(category);
  Tensor t = empty_pinned({layout.shard_total()}, DType::kF32);
  fill_(t, 0.0);
  return t;
}

ShardedAdamW::ShardedAdamW(const ZeroLayout& layout, const optim::AdamWOptions& options, DType compute, bool offload)
    : layout_(layout),
      options_(options),
      masters_apart_(compute != DType::kF32 || offload),
      m_(shard_state_buffer(layout, state_device_of(layout, offload), MemoryCategory::kOptimizerState)),
      v_(shard_state_buffer(layout, state_device_of(layout, offload), MemoryCategory::kOptimizerState)) {
  if (offload && state_device_of(layout, offload) != layout.device()) {
    host_grads_ = shard_state_buffer(layout, Device::cpu(), MemoryCategory::kGradient);
    MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
    if (compute != DType::kF32) host_params_ = empty_pinned({layout.shard_total()}, compute);
  }
}

ShardedAdamW::~ShardedAdamW() {
  if (copies_in_flight_) {
    try {
      core::wait_async_copies(layout_.device());
    } catch (...) {  // destructors must not throw; the device's error surfaces on its next use
    }
  }
}

void ShardedAdamW::to_host(const Bucket& b, const Tensor& grad) {
  core::copy_async_(layout_.shard_of(*host_grads_, b), grad);
  copies_in_flight_ = true;
}

void ShardedAdamW::scale_host_grads(double factor) {
  wait_copies();
  ops::scale_(*host_grads_, factor);
}

void ShardedAdamW::wait_copies() {
  if (!copies_in_flight_) return;
  core::wait_async_copies(layout_.device());
  copies_in_flight_ = false;
}

void ShardedAdamW::step(double lr, int64_t step, const Shards& shards) {
  wait_copies();  // ZeRO-Offload: the averaged gradient shards, on the host
  const auto step_grad = [&](const Bucket& b) {
    return host_grads_ ? layout_.shard_of(*host_grads_, b) : shards.grads(b);
  };
  // AdamW on these buckets' segments of this rank's shard, with and without weight decay:
  // two multi-tensor updates.
  const auto adamw = [&](const std::vector<const Bucket*>& group) {
    for (const bool decay : {true, false}) {
      std::vector<Tensor> w, g, m, v;
      for (const Bucket* b : group) {
        const int64_t s0 = layout_.shard_begin(*b);
        for (const Segment& s : b->mine) {
          if ((layout_.param(s.param).dim() >= 2) != decay) continue;
          const int64_t at = s.flat - s0;  // offset inside the shard
          w.push_back(flat_slice(shards.masters(*b), at, s.length));
          g.push_back(flat_slice(step_grad(*b), at, s.length));
          m.push_back(flat_slice(exp_avg(*b), at, s.length));
          v.push_back(flat_slice(exp_avg_sq(*b), at, s.length));
        }
      }
      ops::adamw_update_multi_(w, g, m, v,
                               {lr, options_.beta1, options_.beta2, options_.eps,
                                decay ? options_.weight_decay : 0.0, step});
    }
  };
  if (host_grads_) {
    // ZeRO-Offload: bucket by bucket, so each bucket's updated parameters travel back to the
    // device (rounded on the host first under mixed precision) while the host steps the next.
    for (const Bucket& b : layout_.buckets()) {
      adamw({&b});
      const Tensor masters = shards.masters(b);
      copies_in_flight_ = true;
      if (host_params_) {
        const Tensor rounded = layout_.shard_of(*host_params_, b);
        core::copy_(rounded, masters);
        core::copy_async_(shards.params(b), rounded);
      } else {
        core::copy_async_(shards.params(b), masters);
      }
    }
    wait_copies();
  } else {
    std::vector<const Bucket*> all;
    for (const Bucket& b : layout_.buckets()) all.push_back(&b);
    adamw(all);
    if (masters_apart_)  // the updated masters (rounded) into this rank's shard of the parameters
      for (const Bucket& b : layout_.buckets()) core::copy_(shards.params(b), shards.masters(b));
  }
}

}  // namespace trident::parallel::zero
