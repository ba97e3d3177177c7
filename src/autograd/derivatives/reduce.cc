// Differentiable reductions: the gradient of a sum broadcasts back over the reduced dims;
// a mean's is the same scaled by 1/count.
#include "autograd/functions/reduce.h"

#include "autograd/record.h"
#include "core/copy.h"
#include "core/views.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kSum, "sum");
TRI_REGISTER_OP(kMean, "mean");

namespace {

// Broadcasts a reduction's gradient back to the input shape (re-inserting dropped dims).
Tensor expand_back(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims,
                   bool keepdim, double scale) {
  Shape keep_shape = in_shape;
  if (dims.empty()) {
    for (int i = 0; i < keep_shape.size(); ++i) keep_shape[i] = 1;
  } else {
    for (int64_t d : dims) keep_shape[normalize_dim(d, in_shape.size(), "sum")] = 1;
  }
  Tensor gk = views::view(core::contiguous(g), keep_shape.span());
  Tensor out = core::clone(views::expand(gk, in_shape));
  return scale == 1.0 ? out : ops::mul_scalar(out, scale);
}

int64_t reduced_count(const Shape& shape, const std::vector<int64_t>& dims) {
  if (dims.empty()) return shape.product();
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[normalize_dim(d, shape.size(), "mean")];
  return n;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  TRI_PROFILE_OP(kSum);
  Tensor out = ops::sum(x, dims, keepdim);
  if (needs_grad({x}))
    record(kSum, {x}, {out}, [shape = x.shape(), dims, keepdim](const BackwardContext& c) {
      // d(sum x)/dx_i = 1 for every reduced element
      return GradList{expand_back(c.grad(), shape, dims, keepdim, 1.0)};
    });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  TRI_PROFILE_OP(kMean);
  Tensor out = ops::mean(x, dims, keepdim);
  if (needs_grad({x}))
    record(kMean, {x}, {out}, [shape = x.shape(), dims, keepdim](const BackwardContext& c) {
      // d(mean x)/dx_i = 1/n
      const double n = static_cast<double>(reduced_count(shape, dims));
      return GradList{expand_back(c.grad(), shape, dims, keepdim, 1.0 / n)};
    });
  return out;
}

}  // namespace trident
