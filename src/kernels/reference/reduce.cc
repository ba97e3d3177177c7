#include "kernels/reference/reduce.h"

namespace trident::reference {

namespace {
Array reduce(const Array& x, const std::vector<int64_t>& dims, bool keepdim, bool mean) {
  bool red[Dims::kMaxDims] = {};
  for (int i = 0; i < x.dim(); ++i) red[i] = dims.empty();
  for (int64_t d : dims) red[normalize_dim(d, x.dim(), "reference reduce")] = true;
  Shape keep = x.shape, drop;
  int64_t count = 1;
  for (int i = 0; i < x.dim(); ++i) {
    if (red[i]) {
      keep[i] = 1;
      count *= x.shape[i];
    } else {
      drop.push_back(x.shape[i]);
    }
  }
  Array out(keep);
  int64_t idx[Dims::kMaxDims];
  for (int64_t flat = 0; flat < x.numel(); ++flat) {
    unravel_index(flat, x.shape, idx);
    for (int i = 0; i < x.dim(); ++i)
      if (red[i]) idx[i] = 0;
    out[flat_index(keep, idx)] += x[flat];
  }
  if (mean)
    for (double& v : out.data) v /= static_cast<double>(count);
  if (!keepdim) out.shape = drop;
  return out;
}
}  // namespace

Array sum(const Array& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(x, dims, keepdim, false);
}
Array mean(const Array& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(x, dims, keepdim, true);
}

}  // namespace trident::reference
