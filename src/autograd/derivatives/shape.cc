// Differentiable shape and layout operations. Each forward makes a view (or, for reshape
// of an incompatible layout, a copy); each backward maps the gradient back to the input's
// geometry.
#include "autograd/functions/shape.h"

#include <vector>

#include "autograd/record.h"
#include "core/factory.h"
#include "core/views.h"
#include "ops/reduce.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kReshape, "reshape");
TRI_REGISTER_OP(kTranspose, "transpose");
TRI_REGISTER_OP(kPermute, "permute");
TRI_REGISTER_OP(kNarrow, "narrow");
TRI_REGISTER_OP(kExpand, "expand");
TRI_REGISTER_OP(kContiguous, "contiguous");
TRI_REGISTER_OP(kTo, "to");

namespace {

// The gradient of any op that only changes the shape: the same values in the input's shape.
Tensor reshape_grad(const Tensor& g, const Shape& shape) {
  return views::view(core::contiguous(g), shape.span());
}

Tensor record_reshape(const Tensor& x, Tensor out) {
  if (needs_grad({x}))
    record(kReshape, {x}, {out}, [shape = x.shape()](const BackwardContext& c) {
      return GradList{reshape_grad(c.grad(), shape)};
    });
  return out;
}

}  // namespace

Tensor reshape(const Tensor& x, std::span<const int64_t> shape_in) {
  TRI_PROFILE_OP(kReshape);
  const Shape shape = views::infer_shape(shape_in, x.numel(), "reshape");
  auto strides = views::view_strides(x, shape);
  Tensor out = strides ? make_view(x, shape, *strides, x.offset())
                       : views::view(core::clone(x), shape.span());
  return record_reshape(x, out);
}

Tensor view(const Tensor& x, std::span<const int64_t> shape) {
  TRI_PROFILE_OP(kReshape);
  return record_reshape(x, views::view(x, shape));
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  TRI_PROFILE_OP(kReshape);
  return record_reshape(x, views::unsqueeze(x, dim));
}
Tensor squeeze(const Tensor& x, int64_t dim) {
  TRI_PROFILE_OP(kReshape);
  return record_reshape(x, views::squeeze(x, dim));
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  TRI_PROFILE_OP(kTranspose);
  Tensor out = views::transpose(x, dim0, dim1);
  if (needs_grad({x}))
    record(kTranspose, {x}, {out}, [dim0, dim1](const BackwardContext& c) {
      // A transpose is its own inverse.
      return GradList{views::transpose(c.grad(), dim0, dim1)};
    });
  return out;
}

Tensor permute(const Tensor& x, std::span<const int64_t> dims) {
  TRI_PROFILE_OP(kPermute);
  Tensor out = views::permute(x, dims);
  if (needs_grad({x})) {
    // The inverse permutation: inverse[dims[i]] = i.
    std::vector<int64_t> inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i)
      inverse[static_cast<size_t>(normalize_dim(dims[i], x.dim(), "permute"))] = static_cast<int64_t>(i);
    record(kPermute, {x}, {out}, [inverse](const BackwardContext& c) {
      return GradList{views::permute(c.grad(), inverse)};
    });
  }
  return out;
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  TRI_PROFILE_OP(kNarrow);
  Tensor out = views::narrow(x, dim, start, length);
  if (needs_grad({x}))
    record(kNarrow, {x}, {out}, [shape = x.shape(), dim, start, length](const BackwardContext& c) {
      // The gradient is zero outside the narrowed range.
      Tensor g = zeros(shape, c.grad().dtype(), c.grad().device());
      core::copy_(views::narrow(g, dim, start, length), c.grad());
      return GradList{g};
    });
  return out;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  TRI_PROFILE_OP(kExpand);
  Tensor out = views::expand(x, shape);
  if (needs_grad({x}))
    record(kExpand, {x}, {out}, [in_shape = x.shape()](const BackwardContext& c) {
      // Every broadcast copy contributes: sum them.
      return GradList{ops::sum_to(c.grad(), in_shape)};
    });
  return out;
}

Tensor contiguous(const Tensor& x) {
  TRI_PROFILE_OP(kContiguous);
  Tensor out = x.is_contiguous() ? detach(x) : core::clone(x);
  if (needs_grad({x}))
    record(kContiguous, {x}, {out}, [](const BackwardContext& c) { return GradList{c.grad()}; });
  return out;
}

Tensor to(const Tensor& x, DType dtype) {
  TRI_PROFILE_OP(kTo);
  check_floating(x, "to");
  TRI_CHECK_TYPE(is_floating(dtype), "to: target dtype ", dtype, " is not floating; use "
                 "core::cast for index tensors");
  Tensor out = x.dtype() == dtype ? detach(x) : core::cast(x, dtype);
  if (needs_grad({x}))
    record(kTo, {x}, {out}, [from = x.dtype()](const BackwardContext& c) {
      return GradList{core::cast(c.grad(), from)};
    });
  return out;
}

}  // namespace trident
