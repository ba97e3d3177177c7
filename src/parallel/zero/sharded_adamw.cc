#include "parallel/zero/sharded_adamw.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "ops/optim.h"

namespace trident::parallel::zero {

ShardedAdamW::ShardedAdamW(const ZeroLayout& layout, const optim::AdamWOptions& options, DType compute, bool offload,
                           StateStore& state, bool params_on_host)
    : layout_(layout),
      options_(options),
      masters_apart_(compute != DType::kF32 || offload),
      params_on_host_(params_on_host),
      state_(state) {
  state_.allocate_moments();
  if (offload && !layout.device().is_cpu()) {
    host_grads_ = shard_state_buffer(layout, Device::cpu(), MemoryCategory::kGradient);
    MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
    if (compute != DType::kF32 && !params_on_host) host_params_ = empty_pinned({layout.shard_total()}, compute);
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

namespace {

// The buckets whose shards overlap `unit`: [first, last) of layout.buckets(), which lie in
// order along the concatenated shards (a bisection, not a scan: this runs per unit and step).
std::pair<size_t, size_t> buckets_of(const ZeroLayout& layout, const StateUnit& unit) {
  const std::vector<Bucket>& all = layout.buckets();
  const auto ends_after = [&](const Bucket& b) { return layout.shard_offset(b) + layout.shard_len(b); };
  const auto first = std::partition_point(all.begin(), all.end(), [&](const Bucket& b) { return ends_after(b) <= unit.begin; });
  const auto last = std::partition_point(first, all.end(),
                                         [&](const Bucket& b) { return layout.shard_offset(b) < unit.begin + unit.length; });
  return {static_cast<size_t>(first - all.begin()), static_cast<size_t>(last - all.begin())};
}

}  // namespace

void ShardedAdamW::update(double lr, int64_t step, const std::vector<size_t>& units,
                          const std::vector<UnitState>& states, const Shards& shards) const {
  // AdamW on these units' parts of this rank's shard, with and without weight decay: two
  // multi-tensor updates.
  const std::vector<StateUnit>& all = state_.units();
  for (const bool decay : {true, false}) {
    std::vector<Tensor> w, g, m, v;
    for (size_t i = 0; i < units.size(); ++i) {
      const StateUnit& unit = all[units[i]];
      const UnitState& s = states[i];
      const auto [first, last] = buckets_of(layout_, unit);
      for (size_t k = first; k < last; ++k) {
        const Bucket& b = layout_.buckets()[k];
        const int64_t b0 = layout_.shard_offset(b), s0 = layout_.shard_begin(b);
        const Tensor grad = host_grads_ ? layout_.shard_of(*host_grads_, b) : shards.grads(b);
        for (const Segment& seg : b.mine) {
          if ((layout_.param(seg.param).dim() >= 2) != decay) continue;
          const int64_t at = b0 + (seg.flat - s0);  // in the concatenated shards
          const int64_t lo = std::max(at, unit.begin), hi = std::min(at + seg.length, unit.begin + unit.length);
          if (hi <= lo) continue;
          // The masters, m and v by the unit's offsets; the gradient (and parameters that are
          // their own masters) by the bucket's. The parameters are asked for only then: on
          // ZeRO-3's NVMe tier shards.params hands out a buffer to write.
          w.push_back(s.masters ? flat_slice(*s.masters, lo - unit.begin, hi - lo)
                                : flat_slice(shards.params(b), lo - b0, hi - lo));
          g.push_back(flat_slice(grad, lo - b0, hi - lo));
          m.push_back(flat_slice(*s.m, lo - unit.begin, hi - lo));
          v.push_back(flat_slice(*s.v, lo - unit.begin, hi - lo));
        }
      }
    }
    ops::adamw_update_multi_(w, g, m, v,
                             {lr, options_.beta1, options_.beta2, options_.eps,
                              decay ? options_.weight_decay : 0.0, step});
  }
}

void ShardedAdamW::masters_to_params(size_t u, const UnitState& state, const Shards& shards) {
  const StateUnit& unit = state_.units()[u];
  const auto [first, last] = buckets_of(layout_, unit);
  for (size_t k = first; k < last; ++k) {
    const Bucket& b = layout_.buckets()[k];
    const int64_t b0 = layout_.shard_offset(b);
    const int64_t lo = std::max(b0, unit.begin), hi = std::min(b0 + layout_.shard_len(b), unit.begin + unit.length);
    if (hi <= lo) continue;
    const Tensor masters = flat_slice(*state.masters, lo - unit.begin, hi - lo);
    const Tensor params = flat_slice(shards.params(b), lo - b0, hi - lo);
    if (!host_grads_ || params_on_host_) {
      core::copy_(params, masters);  // rounded to the compute dtype
      if (shards.params_written && hi == b0 + layout_.shard_len(b)) shards.params_written(b);
      continue;
    }
    copies_in_flight_ = true;
    if (host_params_) {
      const Tensor rounded = flat_slice(*host_params_, lo, hi - lo);
      core::copy_(rounded, masters);
      core::copy_async_(params, rounded);
    } else {
      core::copy_async_(params, masters);
    }
  }
}

void ShardedAdamW::step(double lr, int64_t step, const Shards& shards) {
  wait_copies();  // ZeRO-Offload: the averaged gradient shards, on the host
  const size_t units = state_.units().size();
  if (host_grads_ || !state_.resident()) {
    // Unit by unit. ZeRO-Offload: each unit's updated parameters travel back to the device
    // (rounded on the host first under mixed precision) while the host steps the next. The
    // NVMe tier: the next units' state is read while this one steps, and this one's is written
    // back as soon as it is stepped (state_store.h).
    for (size_t u = 0; u < units; ++u) {
      const UnitState s = state_.acquire(u);
      for (size_t next = u + 1; next < units; ++next) state_.prefetch(next);  // as far as buffers allow
      update(lr, step, {u}, {s}, shards);
      if (masters_apart_) masters_to_params(u, s, shards);
      // On the tier a released unit's buffer is written back and then refilled: an fp32
      // device model's copies read the masters from it, so they finish first (mixed precision
      // copies its own rounded values).
      if (host_grads_ && !host_params_ && !state_.resident()) wait_copies();
      state_.release(u, true);
    }
    wait_copies();
    return;
  }
  std::vector<size_t> all;
  std::vector<UnitState> states;
  for (size_t u = 0; u < units; ++u) {
    all.push_back(u);
    states.push_back(state_.acquire(u));
  }
  update(lr, step, all, states, shards);
  // The updated masters (rounded) into this rank's shard of the parameters.
  if (masters_apart_)
    for (size_t u = 0; u < units; ++u) masters_to_params(u, states[u], shards);
  for (size_t u = 0; u < units; ++u) state_.release(u, true);
}

}  // namespace trident::parallel::zero
