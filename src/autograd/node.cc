#include "autograd/node.h"

#include "core/copy.h"
#include "ops/elementwise.h"

namespace trident::autograd {

uint64_t Node::next_sequence_nr() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

GradList FunctionNode::apply(std::vector<Tensor>&& grads) {
  TRI_CHECK(!released_, "Trying to run the backward of '", name(),
            "' a second time, but its saved tensors were already freed. Pass "
            "retain_graph=true to the first backward() to backward through a graph twice.");
  BackwardContext ctx{std::move(grads), {}};
  ctx.needs_input_grad.reserve(next_edges.size());
  for (const Edge& e : next_edges) ctx.needs_input_grad.push_back(e.node != nullptr);
  return backward_(ctx);
}

GradList AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor leaf(leaf_);
  Tensor& g = grads[0];
  std::optional<Tensor>& slot = leaf.mutable_grad();
  if (!slot.has_value()) {
    // Steal the incoming buffer when nothing else can see it; otherwise copy, so that
    // a later in-place accumulation never writes into another tensor's gradient.
    const bool unique = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 &&
                        g.is_contiguous() && g.offset() == 0 &&
                        g.storage()->nbytes() == g.nbytes();
    if (unique) {
      const DataPtr& data = g.storage()->data_ptr();
      data.owner()->retag(data, MemoryCategory::kGradient);
      slot = g;
    } else {
      MemoryCategoryGuard guard(MemoryCategory::kGradient);
      slot = core::clone(g);
    }
  } else {
    ops::add_(*slot, g);
  }
  // Copy: a hook may register further hooks.
  const std::vector<GradReadyHook> hooks = leaf.impl().autograd().grad_ready_hooks;
  for (const GradReadyHook& hook : hooks) hook(leaf);
  return {};
}

const Tensor& SavedTensor::get() const {
  TRI_CHECK(tensor_.version() == version_,
            "A tensor saved for backward (", tensor_.str(), ") was modified by an in-place "
            "operation after it was saved (version ", version_, ", now ", tensor_.version(),
            "); its gradient would be wrong. Clone it before modifying it.");
  return tensor_;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta& meta = t.impl().autograd();
  if (meta.grad_fn) return Edge{meta.grad_fn, meta.output_nr};
  if (!meta.requires_grad) return Edge{};
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

}  // namespace trident::autograd
