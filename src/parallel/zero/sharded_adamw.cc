#include "parallel/zero/sharded_adamw.h"

#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "ops/optim.h"

namespace trident::parallel::zero {

ShardedAdamW::ShardedAdamW(const ZeroLayout& layout, const optim::AdamWOptions& options, DType compute, bool offload,
                           StateStore& state)
    : layout_(layout), options_(options), masters_apart_(compute != DType::kF32 || offload), state_(state) {
  state_.allocate_moments();
  if (offload && !layout.device().is_cpu()) {
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

void ShardedAdamW::update(double lr, int64_t step, const std::vector<const Bucket*>& buckets,
                          const std::vector<BucketState>& states, const Shards& shards) const {
  // AdamW on these buckets' segments of this rank's shard, with and without weight decay:
  // two multi-tensor updates.
  for (const bool decay : {true, false}) {
    std::vector<Tensor> w, g, m, v;
    for (size_t i = 0; i < buckets.size(); ++i) {
      const Bucket& b = *buckets[i];
      const BucketState& s = states[i];
      const Tensor masters = s.masters ? *s.masters : shards.params(b);
      const Tensor grad = host_grads_ ? layout_.shard_of(*host_grads_, b) : shards.grads(b);
      const int64_t s0 = layout_.shard_begin(b);
      for (const Segment& seg : b.mine) {
        if ((layout_.param(seg.param).dim() >= 2) != decay) continue;
        const int64_t at = seg.flat - s0;  // offset inside the shard
        w.push_back(flat_slice(masters, at, seg.length));
        g.push_back(flat_slice(grad, at, seg.length));
        m.push_back(flat_slice(*s.m, at, seg.length));
        v.push_back(flat_slice(*s.v, at, seg.length));
      }
    }
    ops::adamw_update_multi_(w, g, m, v,
                             {lr, options_.beta1, options_.beta2, options_.eps,
                              decay ? options_.weight_decay : 0.0, step});
  }
}

void ShardedAdamW::step(double lr, int64_t step, const Shards& shards) {
  wait_copies();  // ZeRO-Offload: the averaged gradient shards, on the host
  const std::vector<Bucket>& buckets = layout_.buckets();
  if (host_grads_ || !state_.resident()) {
    // Bucket by bucket. ZeRO-Offload: each bucket's updated parameters travel back to the
    // device (rounded on the host first under mixed precision) while the host steps the next.
    // The NVMe tier: the next buckets' state is read while this one steps, and this one's is
    // written back as soon as it is stepped (state_store.h).
    for (size_t i = 0; i < buckets.size(); ++i) {
      const Bucket& b = buckets[i];
      const BucketState s = state_.acquire(b);
      for (size_t j = i + 1; j < buckets.size(); ++j) state_.prefetch(buckets[j]);  // as far as buffers allow
      update(lr, step, {&b}, {s}, shards);
      if (host_grads_) {
        copies_in_flight_ = true;
        if (host_params_) {
          const Tensor rounded = layout_.shard_of(*host_params_, b);
          core::copy_(rounded, *s.masters);
          core::copy_async_(shards.params(b), rounded);
        } else {
          core::copy_async_(shards.params(b), *s.masters);
        }
      } else if (masters_apart_) {
        core::copy_(shards.params(b), *s.masters);
      }
      state_.release(b, true);
    }
    wait_copies();
    return;
  }
  std::vector<const Bucket*> all;
  std::vector<BucketState> states;
  for (const Bucket& b : buckets) {
    all.push_back(&b);
    states.push_back(state_.acquire(b));
  }
  update(lr, step, all, states, shards);
  if (masters_apart_)  // the updated masters (rounded) into this rank's shard of the parameters
    for (size_t i = 0; i < buckets.size(); ++i) core::copy_(shards.params(buckets[i]), *states[i].masters);
  for (const Bucket& b : buckets) state_.release(b, true);
}

}  // namespace trident::parallel::zero
