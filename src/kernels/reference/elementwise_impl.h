// Template definition of broadcast_binary (included by elementwise.h).
#pragma once

#include "core/check.h"

namespace trident::reference {

template <class Fn>
Array broadcast_binary(const Array& a, const Array& b, Fn fn) {
  const Shape shape = broadcast_shapes(a.shape, b.shape, "reference");
  Array out(shape);
  const int n = shape.size();
  int64_t idx[Dims::kMaxDims], ia[Dims::kMaxDims], ib[Dims::kMaxDims];
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    unravel_index(flat, shape, idx);
    // Broadcast: a dim of size 1 always reads index 0; missing leading dims are dropped.
    for (int i = 0; i < a.dim(); ++i) ia[i] = a.shape[i] == 1 ? 0 : idx[n - a.dim() + i];
    for (int i = 0; i < b.dim(); ++i) ib[i] = b.shape[i] == 1 ? 0 : idx[n - b.dim() + i];
    out[flat] = fn(a[flat_index(a.shape, ia)], b[flat_index(b.shape, ib)]);
  }
  return out;
}

}  // namespace trident::reference
