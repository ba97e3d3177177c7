// Differentiable losses. The cross-entropy backward rebuilds softmax from the saved logits
// and the forward's per-row logsumexp and writes dlogits in one pass per row.
#include "autograd/functions/loss.h"

#include "autograd/record.h"
#include "ops/loss.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kCrossEntropy, "cross_entropy");

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     Reduction reduction) {
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

}  // namespace trident
