#include "parallel/zero/gradients.h"

#include <algorithm>

#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "ops/elementwise.h"

namespace trident::parallel::zero {

GradientShards::GradientShards(const ZeroLayout& layout, comm::Communicator& comm, Hooks hooks)
    : layout_(layout), comm_(comm), hooks_(std::move(hooks)), flights_(layout.buckets().size()) {
  for (size_t u = 0; u < flights_.size(); ++u) flights_[u].pending = static_cast<int>(layout_.buckets()[u].params.size());
  arrived_.assign(layout_.num_params(), false);
}

void GradientShards::accumulate(size_t k, const Tensor& slot, const Tensor& g) {
  // The slots are f32, whatever the parameters' dtype (Note [Mixed-dtype add_]: no f32 copy of g).
  if (arrived_[k]) {
    ops::add_(slot, g);
  } else {
    core::copy_(slot, g);
  }
  arrived_[k] = true;
}

void GradientShards::grad_ready(size_t k) {
  // Folding the gradient into its bucket, posting the bucket's reduce-scatter and polling.
  profiler::ProfileScope scope("zero.reduce_scatter", profiler::Phase::kCommunication);
  Tensor p = layout_.param(k);
  const Tensor g = views::view(*p.grad(), {p.numel()});
  const size_t u = layout_.bucket_of(k);
  accumulate(k, slot(k), g);
  p.zero_grad();  // folded into the flat buffers
  if (reduces_now() && --flights_[u].pending == 0) {
    launch(u);
    hooks_.launched(u);
    posted(u);
  }
  // Drive MPI's progress on what is in flight; what a policy does with a reduction found
  // complete is its own (completed()).
  for (size_t other = 0; other < flights_.size(); ++other)
    if (flights_[other].work && flights_[other].work->test()) completed(other);
}

void GradientShards::add(size_t k, const Tensor& grad) {
  const Tensor s = slot(k);
  const Tensor g = views::view(core::contiguous(grad), {grad.numel()});  // any dtype (Note [Mixed-dtype add_])
  accumulate(k, s, g);
}

void GradientShards::launch(size_t u) {
  // Whether this reduction completes the step's gradients is decided now: an interleaved
  // pipeline may fold it in during a later chunk's backward, not the last micro-batch's.
  flights_[u].final = last_micro_batch_;
  if (layout_.buckets()[u].length == 0) {
    // A part whose parameters are all frozen (ZeRO-3) has nothing to reduce; every rank skips
    // it alike, so the collectives still match.
    flights_[u].reduced = true;
    if (flights_[u].final) hooks_.final_shard(u);
    return;
  }
  flights_[u].work = start(u);
}

void GradientShards::finish(size_t u) {
  Flight& f = flights_[u];
  f.work->wait();
  f.work.reset();
  f.reduced = true;
  fold(u);
  if (f.final) hooks_.final_shard(u);
}

void GradientShards::end_backward() {
  if (!reduces_now()) return;
  profiler::ProfileScope scope("zero.reduce_scatter", profiler::Phase::kCommunication);
  // Buckets with a parameter that got no gradient: zeros for it, then launch in bucket order.
  for (size_t u = 0; u < flights_.size(); ++u) {
    if (flights_[u].work || flights_[u].reduced) continue;
    for (size_t k : layout_.buckets()[u].params)
      if (!arrived_[k]) fill_(slot(k), 0.0);
    launch(u);
    hooks_.launched(u);
  }
  for (size_t u = 0; u < flights_.size(); ++u) {
    if (!flights_[u].reduced) finish(u);
    flights_[u].reduced = false;
    flights_[u].pending = static_cast<int>(layout_.buckets()[u].params.size());
  }
  micro_batch_reduced();
  first_micro_batch_ = false;
}

void GradientShards::end_step() {
  forget_arrivals();
  first_micro_batch_ = true;
}

void GradientShards::forget_arrivals() { std::fill(arrived_.begin(), arrived_.end(), false); }

void GradientShards::drain() {
  for (Flight& f : flights_) f.work.reset();
}

}  // namespace trident::parallel::zero
