// Differentiable embedding lookup: forward through ops/embedding, backward the scatter-add.
#include "autograd/functions/embedding.h"

#include "autograd/record.h"
#include "ops/embedding.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kEmbedding, "embedding");

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  TRI_PROFILE_OP(kEmbedding);
  Tensor out = ops::embedding(weight, indices);
  // The indices are integers and never need a gradient: only the weight is an input of the
  // node, and the indices are saved (checked against in-place modification).
  if (needs_grad({weight}))
    record(kEmbedding, {weight}, {out},
           [si = SavedTensor(indices), num_weights = weight.size(0)](const BackwardContext& c) {
             // out[n] = weight[indices[n]]:  d weight[v] = sum of d out[n], indices[n] == v
             return GradList{ops::embedding_backward(c.grad(), si.get(), num_weights)};
           });
  return out;
}

}  // namespace trident
