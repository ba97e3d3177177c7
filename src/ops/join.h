// Joining tensors along a dim and splitting one apart (no autograd).
//   concat(xs, dim): one new contiguous tensor holding the inputs one after another along
//     dim (torch.cat). Inputs: at least one, same dtype (any, index types included), device
//     and rank >= 1, equal sizes except along dim, any layout. A copy (core::copy_).
//   split(x, sizes, dim): views of x, consecutive along dim, of the given sizes, which must
//     be >= 0 and sum to x.size(dim) (torch.split with a list). No copy.
//   split_chunks(x, chunk, dim): views of `chunk` elements along dim each, the last one shorter if
//     chunk does not divide the size (torch.split with an int). A size-0 dim gives one
//     empty view.
// dim may be negative (counted from the end).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace trident::ops {

Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
std::vector<Tensor> split_chunks(const Tensor& x, int64_t chunk, int64_t dim);

}  // namespace trident::ops
