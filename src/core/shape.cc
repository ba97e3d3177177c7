#include "core/shape.h"

#include <sstream>

#include "core/check.h"

namespace trident {

Dims::Dims(std::initializer_list<int64_t> dims) : Dims(std::span<const int64_t>(dims)) {}

Dims::Dims(std::span<const int64_t> dims) {
  TRI_CHECK(dims.size() <= static_cast<size_t>(kMaxDims), "Tensors have at most ", kMaxDims,
            " dims; got ", dims.size());
  n_ = static_cast<int>(dims.size());
  std::copy(dims.begin(), dims.end(), d_);
}

Dims Dims::filled(int n, int64_t value) {
  TRI_CHECK(n >= 0 && n <= kMaxDims, "Tensors have at most ", kMaxDims, " dims; got ", n);
  Dims d;
  d.n_ = n;
  std::fill(d.d_, d.d_ + n, value);
  return d;
}

void Dims::push_back(int64_t v) {
  TRI_CHECK(n_ < kMaxDims, "Tensors have at most ", kMaxDims, " dims");
  d_[n_++] = v;
}

void Dims::resize(int n, int64_t value) {
  TRI_CHECK(n >= 0 && n <= kMaxDims, "Tensors have at most ", kMaxDims, " dims; got ", n);
  for (int i = n_; i < n; ++i) d_[i] = value;
  n_ = n;
}

void Dims::insert(int pos, int64_t v) {
  TRI_CHECK(n_ < kMaxDims, "Tensors have at most ", kMaxDims, " dims");
  TRI_ASSERT(pos >= 0 && pos <= n_, "insert position ", pos, " for ", n_, " dims");
  std::copy_backward(d_ + pos, d_ + n_, d_ + n_ + 1);
  d_[pos] = v;
  ++n_;
}

void Dims::erase(int pos) {
  TRI_ASSERT(pos >= 0 && pos < n_, "erase position ", pos, " for ", n_, " dims");
  std::copy(d_ + pos + 1, d_ + n_, d_ + pos);
  --n_;
}

int64_t Dims::product() const {
  int64_t p = 1;
  for (int i = 0; i < n_; ++i) p *= d_[i];
  return p;
}

std::string Dims::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Dims& dims) {
  os << '(';
  for (int i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  if (dims.size() == 1) os << ',';
  return os << ')';
}

Strides contiguous_strides(const Shape& shape) {
  Strides s = Dims::filled(shape.size(), 1);
  for (int i = shape.size() - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return s;
}

int normalize_dim(int64_t dim, int ndim, const char* what) {
  const int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  TRI_CHECK_INDEX(dim >= lo && dim <= hi, what, ": dim ", dim, " is out of range for a tensor with ",
                  ndim, " dims (allowed ", lo, " to ", hi, ")");
  return static_cast<int>(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what) {
  const int n = std::max(a.size(), b.size());
  Shape out = Dims::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const int ia = a.size() - n + i, ib = b.size() - n + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    TRI_CHECK(da == db || da == 1 || db == 1, what, ": shapes ", a, " and ", b,
              " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace trident
