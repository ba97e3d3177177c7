#include "ops/join.h"

#include <algorithm>
#include <sstream>
#include <string>

#include "core/factory.h"
#include "core/views.h"

namespace trident::ops {
namespace {

// "[2, 3, 1]": split sizes may be more than a Shape holds, so they print on their own.
std::string list_str(const std::vector<int64_t>& values) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  os << ']';
  return os.str();
}

}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  TRI_CHECK(!xs.empty(), "concat: expected at least one tensor, got an empty list");
  const Tensor& first = xs[0];
  TRI_CHECK(first.dim() >= 1, "concat: tensor 0 is zero-dimensional (shape ", first.shape(),
            "); only tensors with at least one dim can be concatenated");
  const int d = normalize_dim(dim, first.dim(), "concat");
  Shape out_shape = first.shape();
  out_shape[d] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    TRI_CHECK_TYPE(x.dtype() == first.dtype(), "concat: tensor ", i, " has dtype ", x.dtype(),
                   " but tensor 0 has dtype ", first.dtype(), "; all inputs must have one dtype");
    TRI_CHECK(x.device() == first.device(), "concat: tensor ", i, " is on ", x.device(),
              " but tensor 0 is on ", first.device());
    TRI_CHECK(x.dim() == first.dim(), "concat: tensor ", i, " has shape ", x.shape(), " (", x.dim(),
              " dims) but tensor 0 has shape ", first.shape(), " (", first.dim(),
              " dims); all inputs must have the same rank");
    for (int k = 0; k < x.dim(); ++k)
      TRI_CHECK(k == d || x.shape()[k] == first.shape()[k], "concat: tensor ", i, " has shape ",
                x.shape(), " but tensor 0 has shape ", first.shape(),
                "; sizes must match in every dim except the concatenated dim ", d);
    out_shape[d] += x.shape()[d];
  }
  Tensor out = empty(out_shape, first.dtype(), first.device());
  int64_t start = 0;
  for (const Tensor& x : xs) {
    core::copy_(views::narrow(out, d, start, x.shape()[d]), x);
    start += x.shape()[d];
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  TRI_CHECK(x.dim() >= 1, "split: cannot split a zero-dimensional tensor (shape ", x.shape(), ")");
  const int d = normalize_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    TRI_CHECK(sizes[i] >= 0, "split: size ", sizes[i], " at position ", i, " is negative");
    total += sizes[i];
  }
  TRI_CHECK(total == x.shape()[d], "split: sizes ", list_str(sizes), " sum to ", total, " but dim ",
            d, " of the input (shape ", x.shape(), ") has size ", x.shape()[d]);
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t size : sizes) {
    out.push_back(views::narrow(x, d, start, size));
    start += size;
  }
  return out;
}

std::vector<Tensor> split_chunks(const Tensor& x, int64_t chunk, int64_t dim) {
  TRI_CHECK(x.dim() >= 1, "split: cannot split a zero-dimensional tensor (shape ", x.shape(), ")");
  const int d = normalize_dim(dim, x.dim(), "split");
  TRI_CHECK(chunk > 0, "split: chunk size must be > 0, got ", chunk);
  const int64_t total = x.shape()[d];
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < total; start += chunk)
    sizes.push_back(std::min(chunk, total - start));
  if (sizes.empty()) sizes.push_back(0);
  return ops::split(x, sizes, d);
}

}  // namespace trident::ops
