// Layer wrappers: code from outside a model that changes how one of its layers computes,
// without the layer (or the model) knowing what it does: tensor parallelism (the layer's
// parameters are this rank's shards, parallel/tp_styles.h), adapters (LoRA's y = base(x) +
// B A x, PEFT's LoraLayer), views of the weight (a quantized weight dequantized on the fly).
//
// Each wrappable layer keeps an ordered stack of wrappers. Its forward runs the outermost one,
// which receives the layer's parameters and an `inner`, the rest of the stack down to the
// layer's own single-device computation; it may call inner any number of times, with other
// inputs, other parameters (its shards, a view) or other options (a product without the bias).
// Wrappers are ordered by kind (Note [Wrapper order]). A layer with no wrapper runs its
// single-device computation directly: no stack walk, no allocation; with wrappers, walking the
// stack allocates nothing either (an inner is a cursor of two words, not a std::function).
//
// This file holds what every layer family shares: the kinds, the base class, the parameters a
// wrapper sees (LayerParams), the stack (WrappedModule) and the cursor that walks it
// (StackCursor). Each family declares its wrapper interface and its cursor next to its layers
// (nn/linear.h: Linear and Conv1D; nn/norm.h: LayerNorm and RMSNorm; nn/embedding.h). It does
// not decide which wrappers a layer gets: parallel plans, adapters and tests add them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace trident::nn {

// Note [Wrapper order]
// Why order wrappers by kind rather than by when they were added?
// Parallelism is applied first (parallelize.h's fixed order) but must stay outermost: an
// adapter added afterwards has to run inside the tensor-parallel region, on the gathered input
// and with its partial product summed with the base's (LoRA on a row-parallel layer: A is
// row-split, and A's partial product joins the base's partial sum before the all-reduce and the
// bias). A view of the weight must be innermost, next to the computation that reads the weight,
// so that the adapters and the parallel styles above it see a plain layer. So the kind fixes
// the place: parallelism outermost, then adapters, then weight views; wrappers of one kind run
// in the order they were added (the first added outermost).
enum class WrapperKind {
  kParallelism,  // tensor/sequence parallelism (parallel/tp_styles.h)
  kAdapter,      // adds to the layer's output (LoRA)
  kWeightView,   // replaces the weight the computation reads (a quantized weight)
};
const char* wrapper_kind_name(WrapperKind kind);

class Wrapper {
 public:
  virtual ~Wrapper() = default;
  virtual WrapperKind kind() const = 0;
  // For messages and listings ("columnwise", "lora").
  virtual std::string name() const = 0;
};

// The parameters a wrapper receives and hands inward: the layer's own, or what a wrapper put in
// their place (its shards, a narrowed copy, a dequantized view). References: the caller keeps
// the tensors alive for the call.
inline const std::optional<Tensor> kNoBias;
struct LayerParams {
  const Tensor& weight;
  const std::optional<Tensor>& bias = kNoBias;
};

// A module with a stack of wrappers of interface W (which derives from Wrapper).
// Not thread-safe: add wrappers before running the layer.
template <class W>
class WrappedModule : public Module {
 public:
  // Adds `wrapper` after every wrapper of its kind or an outer one, before those of inner
  // kinds (Note [Wrapper order]). The layer shares ownership.
  void add_wrapper(std::shared_ptr<const W> wrapper) {
    auto at = wrappers_.begin();
    while (at != wrappers_.end() && (*at)->kind() <= wrapper->kind()) ++at;
    wrappers_.insert(at, std::move(wrapper));
  }
  // Outermost first.
  const std::vector<std::shared_ptr<const W>>& wrappers() const { return wrappers_; }
  std::vector<std::string> wrapper_names() const {
    std::vector<std::string> out;
    for (const auto& w : wrappers_) out.push_back(w->name());
    return out;
  }

 protected:
  bool wrapped() const { return !wrappers_.empty(); }

 private:
  std::vector<std::shared_ptr<const W>> wrappers_;
};

// The rest of a layer's stack below one wrapper: wrappers [next, end), then the layer's own
// computation. A family's cursor (LinearInner, ...) derives from this (Self), names its calls
// and forwards each through next(). Layer: the family's base (it has wrappers() and the own
// computations); W: the family's wrapper interface. Two words, passed by reference, nothing
// allocated.
template <class Self, class Layer, class W>
class StackCursor {
 public:
  StackCursor(const Layer& layer, size_t next) : layer_(&layer), next_(next) {}
  const Layer& layer() const { return *layer_; }

 protected:
  // The next wrapper's `wrapped` (called with `args` and the rest of the stack as its inner),
  // or below the last wrapper the layer's `own` (called with `args`).
  template <class Wrapped, class Own, class... Args>
  Tensor next(Wrapped wrapped, Own own, const Args&... args) const {
    const auto& stack = layer_->wrappers();
    if (next_ == stack.size()) return (layer_->*own)(args...);
    return ((*stack[next_]).*wrapped)(args..., Self(*layer_, next_ + 1));
  }

 private:
  const Layer* layer_;
  size_t next_;
};

}  // namespace trident::nn
