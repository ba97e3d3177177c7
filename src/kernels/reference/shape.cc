#include "kernels/reference/shape.h"

#include "core/check.h"

namespace trident::reference {

Array reshape(const Array& x, const Shape& shape) { return Array(shape, x.data); }

Array permute(const Array& x, const std::vector<int64_t>& dims) {
  Shape shape = x.shape;
  for (int i = 0; i < x.dim(); ++i) shape[i] = x.shape[normalize_dim(dims[i], x.dim(), "permute")];
  Array out(shape);
  int64_t oi[Dims::kMaxDims], xi[Dims::kMaxDims];
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    unravel_index(flat, shape, oi);
    for (int i = 0; i < x.dim(); ++i) xi[normalize_dim(dims[i], x.dim(), "permute")] = oi[i];
    out[flat] = x[flat_index(x.shape, xi)];
  }
  return out;
}

Array transpose(const Array& x, int64_t dim0, int64_t dim1) {
  std::vector<int64_t> dims(static_cast<size_t>(x.dim()));
  for (int i = 0; i < x.dim(); ++i) dims[i] = i;
  std::swap(dims[normalize_dim(dim0, x.dim(), "transpose")], dims[normalize_dim(dim1, x.dim(), "transpose")]);
  return permute(x, dims);
}

Array narrow(const Array& x, int64_t dim, int64_t start, int64_t length) {
  const int d = normalize_dim(dim, x.dim(), "narrow");
  Shape shape = x.shape;
  shape[d] = length;
  Array out(shape);
  int64_t idx[Dims::kMaxDims];
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    unravel_index(flat, shape, idx);
    idx[d] += start;
    out[flat] = x[flat_index(x.shape, idx)];
  }
  return out;
}

Array expand(const Array& x, const Shape& shape) {
  TRI_CHECK(broadcast_shapes(x.shape, shape, "reference expand") == shape, "reference expand: ",
            x.shape, " does not expand to ", shape);
  Array out(shape);
  int64_t idx[Dims::kMaxDims], xi[Dims::kMaxDims];
  const int lead = shape.size() - x.dim();
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    unravel_index(flat, shape, idx);
    for (int i = 0; i < x.dim(); ++i) xi[i] = x.shape[i] == 1 ? 0 : idx[lead + i];
    out[flat] = x[flat_index(x.shape, xi)];
  }
  return out;
}

Array concat(const std::vector<Array>& xs, int64_t dim) {
  TRI_CHECK(!xs.empty(), "reference concat: no inputs");
  const int d = normalize_dim(dim, xs[0].dim(), "concat");
  Shape shape = xs[0].shape;
  shape[d] = 0;
  for (const Array& x : xs) shape[d] += x.shape[d];
  Array out(shape);
  int64_t idx[Dims::kMaxDims];
  int64_t base = 0;
  for (const Array& x : xs) {
    for (int64_t flat = 0; flat < x.numel(); ++flat) {
      unravel_index(flat, x.shape, idx);
      idx[d] += base;
      out[flat_index(shape, idx)] = x[flat];
    }
    base += x.shape[d];
  }
  return out;
}

}  // namespace trident::reference
