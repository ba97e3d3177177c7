// Differentiable losses. The cross-entropy backward rebuilds softmax from the saved logits
// and the forward's per-row logsumexp and writes dlogits in one pass per row. The fused LM
// head's gradients come out of its forward; its backward only scales them.
#include "autograd/functions/loss.h"

#include "autograd/record.h"
#include "core/copy.h"
#include "ops/elementwise.h"
#include "ops/loss.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kCrossEntropy, "cross_entropy");
TRI_REGISTER_OP(kLinearCrossEntropy, "linear_cross_entropy");

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     Reduction reduction) {
  TRI_PROFILE_OP(kCrossEntropy);
  ops::CrossEntropyOutput r = ops::cross_entropy(logits, targets, ignore_index, reduction);
  if (needs_grad({logits}))
    // Targets are class indices: no gradient flows to them, so they are not an input of the
    // node. logsumexp is internal (not an output): capturing it makes no cycle.
    record(kCrossEntropy, {logits}, {r.loss},
           [sl = SavedTensor(logits), st = SavedTensor(targets), lse = r.logsumexp, ignore_index,
            reduction](const BackwardContext& c) {
             // dL/dlogits[r, j] = g * (softmax(logits[r])_j - [j == t_r]) / count  (kMean;
             // no division for kSum), zero on ignored rows
             return GradList{ops::cross_entropy_backward(c.grad(), sl.get(), st.get(), lse,
                                                         ignore_index, reduction)};
           });
  return r.loss;
}

Tensor linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& targets, int64_t ignore_index,
                            Reduction reduction, int64_t chunk_rows) {
  TRI_PROFILE_OP(kLinearCrossEntropy);
  const bool grad = needs_grad({x, w});
  ops::LinearCrossEntropyOutput r =
      ops::linear_cross_entropy(x, w, targets, ignore_index, reduction, grad && x.requires_grad(),
                                grad && w.requires_grad(), chunk_rows);
  if (grad)
    // The forward already computed the gradients up to a factor; backward applies it.
    record(kLinearCrossEntropy, {x, w}, {r.loss},
           [dx = r.dx, dw = r.dw, scale = r.grad_scale, dtype = x.dtype()](const BackwardContext& c) {
             const double g = scale * c.grad().item();
             auto scaled = [g, dtype](const std::optional<Tensor>& d) -> std::optional<Tensor> {
               if (!d.has_value()) return std::nullopt;
               return d->dtype() == dtype ? ops::mul_scalar(*d, g) : core::cast(ops::mul_scalar(*d, g), dtype);
             };
             return GradList{c.needs(0) ? scaled(dx) : std::nullopt, c.needs(1) ? scaled(dw) : std::nullopt};
           });
  return r.loss;
}

}  // namespace trident
