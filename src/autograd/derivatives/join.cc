// Differentiable concat and split. Each is the other's backward: the gradient of a concat is
// split back into the inputs' slices, and the gradients of split pieces are concatenated.
#include "autograd/functions/join.h"

#include "autograd/record.h"
#include "ops/join.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kConcat, "concat");
TRI_REGISTER_OP(kSplit, "split");

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  TRI_PROFILE_OP(kConcat);
  Tensor out = ops::concat(xs, dim);
  const OptionalTensors inputs(xs.begin(), xs.end());
  if (needs_grad(inputs)) {
    const int d = normalize_dim(dim, out.dim(), "concat");
    std::vector<int64_t> sizes;
    sizes.reserve(xs.size());
    for (const Tensor& x : xs) sizes.push_back(x.shape()[d]);
    record(kConcat, inputs, {out}, [sizes = std::move(sizes), d](const BackwardContext& c) {
      // out = [x_0, x_1, ...] along d:  d x_i = the slice of d out where x_i was copied
      std::vector<Tensor> pieces = ops::split(c.grad(), sizes, d);
      GradList grads(pieces.size());
      for (size_t i = 0; i < pieces.size(); ++i)
        if (c.needs(static_cast<int>(i))) grads[i] = std::move(pieces[i]);
      return grads;
    });
  }
  return out;
}

namespace {

std::vector<Tensor> record_split(const Tensor& x, std::vector<Tensor> pieces, int64_t dim) {
  if (needs_grad({x}))
    record(kSplit, {x}, pieces,
           [d = normalize_dim(dim, x.dim(), "split")](const BackwardContext& c) {
             // piece_k = x[start_k : start_k + size_k] along d:  dx = concat of d piece_k
             return GradList{ops::concat(c.grads, d)};
           });
  return pieces;
}

}  // namespace

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  TRI_PROFILE_OP(kSplit);
  return record_split(x, ops::split(x, sizes, dim), dim);
}

std::vector<Tensor> split_chunks(const Tensor& x, int64_t chunk, int64_t dim) {
  TRI_PROFILE_OP(kSplit);
  return record_split(x, ops::split_chunks(x, chunk, dim), dim);
}

}  // namespace trident
