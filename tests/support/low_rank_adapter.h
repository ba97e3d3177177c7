// A toy low-rank adapter for the wrapper tests, LoRA's shape without its scaling or dropout:
// y = inner(x) + (x A^T) B^T, with A (r, in) and B (out, r) in PEFT's layouts (lora_A, lora_B).
// It adds its product before the layer's activation: it asks the layers below it for the
// product without the activation, adds its own, then applies the activation the caller asked
// for; and it leaves the bias to whoever asked for it (a row-parallel style asks for none). A
// tensor-parallel test routes a replicated factor through copy_to_tp with `enter_a`/`enter_b`,
// so that its gradient sums the ranks' parts. Not a LoRA implementation: no merge, no scale.
#pragma once

#include <functional>
#include <utility>

#include "autograd/functions.h"
#include "nn/linear.h"

namespace trident::testing {

class LowRankAdapter final : public nn::LinearWrapper {
 public:
  using Enter = std::function<Tensor(const Tensor&)>;
  LowRankAdapter(Tensor a, Tensor b, Enter enter_a = {}, Enter enter_b = {})
      : a_(std::move(a)), b_(std::move(b)), enter_a_(std::move(enter_a)), enter_b_(std::move(enter_b)) {}
  nn::WrapperKind kind() const override { return nn::WrapperKind::kAdapter; }
  std::string name() const override { return "low_rank"; }
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner& inner) const override {
    const Tensor base = inner.forward(x, p, {.bias = call.bias, .act = nn::Activation::kNone});
    const Tensor a = enter_a_ ? enter_a_(a_) : a_, b = enter_b_ ? enter_b_(b_) : b_;
    const Tensor y = base + trident::linear(trident::linear(x, a), b);
    return call.act == nn::Activation::kGeluTanh ? trident::gelu_tanh(y) : y;
  }

 private:
  Tensor a_, b_;
  Enter enter_a_, enter_b_;
};

}  // namespace trident::testing
