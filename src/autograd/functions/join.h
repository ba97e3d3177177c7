// Differentiable concatenation and splitting along one dim (torch.cat, torch.split). See
// ops/join.h for shapes and what is validated.
//   concat: a copy; each input's gradient is the slice of the output gradient it was copied
//     to (a view of it, no copy).
//   split: views of x, no copy; recorded as one node with one output per piece, whose
//     backward joins the pieces' gradients back into x's shape (pieces that received no
//     gradient contribute zeros).
// Backward rules: autograd/derivatives/join.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace trident {

Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
// Pieces of the given sizes along dim (they must sum to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// Pieces of `chunk` elements along dim, the last one shorter if chunk does not divide it.
std::vector<Tensor> split_chunks(const Tensor& x, int64_t chunk, int64_t dim);

}  // namespace trident
