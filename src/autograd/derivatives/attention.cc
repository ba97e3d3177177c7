// Differentiable attention: the forward caches the logsumexp of each score row, and the
// backward recomputes the probabilities from it tile by tile (kernels/cpu/attention.h).
#include "autograd/functions/attention.h"

#include "autograd/record.h"
#include "ops/attention.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kAttention, "attention");

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                 std::optional<double> scale, AttentionOutputLayout layout, int64_t window,
                 const ops::Documents* documents) {
  TRI_PROFILE_OP(kAttention);
  ops::AttentionForward f = ops::attention(q, k, v, causal, scale, layout, window, documents);
  // The backward may run after the caller's documents are gone (a pipeline's later micro-batch):
  // it keeps its own handles.
  std::optional<ops::Documents> docs;
  if (documents != nullptr) docs = *documents;
  if (needs_grad({q, k, v}))
    record(kAttention, {q, k, v}, {f.out},
           [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v),
            so = SavedTensor::output(f.out), lse = f.lse, causal, scale, window, docs](const BackwardContext& c) {
             // O = P V with P = softmax(scale Q K^T + mask):  dV = P^T dO,  dP = dO V^T,
             // dS = P (dP - rowsum(dO O)),  dQ = scale dS K,  dK = scale dS^T Q
             // (dK, dV summed over the query heads sharing a kv head).
             ops::AttentionGrads g = ops::attention_backward(c.grad(), sq.get(), sk.get(), sv.get(),
                                                             so.get(), lse, causal, scale, window,
                                                             docs ? &*docs : nullptr);
             return GradList{c.needs(0) ? std::optional<Tensor>(g.dq) : std::nullopt,
                             c.needs(1) ? std::optional<Tensor>(g.dk) : std::nullopt,
                             c.needs(2) ? std::optional<Tensor>(g.dv) : std::nullopt};
           });
  return f.out;
}

}  // namespace trident
