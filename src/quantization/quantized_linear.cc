#include "quantization/quantized_linear.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/record.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"
#include "ops/dispatch.h"
#include "ops/linalg.h"
#include "quantization/quantized_matmul.h"

namespace trident::quantization {
namespace {

using autograd::BackwardContext;
using autograd::GradList;

TRI_REGISTER_OP(kQuantizedLinear, "quantized_linear");

// The weight as the product reads it: (in, out), a view of the dequantized weight (a device's).
Tensor dequantized_in_out(const QuantizedWeight& w, DType dtype, bool in_out) {
  Tensor d = core::cast(w.dequantize(), dtype);
  return in_out ? d : views::transpose(d, 0, 1);
}

// a (..., k) @ W-side operand: forward with `forward` (plus `bias`, an f32 host tensor or
// nullptr), the input gradient otherwise.
Tensor product(const Tensor& a, const QuantizedWeight& w, bool in_out, bool forward, const Tensor* bias = nullptr) {
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  const int64_t in = in_out ? rows : cols, out = in_out ? cols : rows;
  const int64_t k = forward ? in : out, n = forward ? out : in;
  std::vector<int64_t> shape = a.shape().vec();
  shape.back() = n;
  if (!a.device().is_cpu()) {
    const Tensor wt = dequantized_in_out(w, a.dtype(), in_out);  // (in, out)
    return ops::matmul(a, forward ? wt : views::transpose(wt, 0, 1));
  }
  const Tensor ac = core::contiguous(a);
  Tensor y = empty(Shape(shape), a.dtype());
  const int64_t M = k == 0 ? 0 : a.numel() / k;
  if (y.numel() == 0) return y;
  if (k == 0) return zeros(Shape(shape), a.dtype());
  ops::dispatch_floating(a.dtype(), "quantized_linear", [&]<class T>() {
    if (forward)
      quantized_matmul<T>(ac.data_ptr<T>(), M, w, in_out, y.data_ptr<T>(), bias ? bias->data_ptr<T>() : nullptr);
    else quantized_matmul_input_grad<T>(ac.data_ptr<T>(), M, w, in_out, y.data_ptr<T>());
  });
  return y;
}

}  // namespace

Tensor quantized_linear(const Tensor& x, const std::shared_ptr<const QuantizedWeight>& w, bool in_out,
                        const std::optional<Tensor>& bias) {
  TRI_PROFILE_OP(kQuantizedLinear);
  TRI_CHECK(w != nullptr && w->shape().size() == 2, "quantized_linear: the weight is not a quantized matrix");
  check_floating(x, "quantized_linear");
  const int64_t in = in_out ? w->shape()[0] : w->shape()[1];
  TRI_CHECK(x.dim() >= 1 && x.size(-1) == in, "quantized_linear: x ", x.shape(), " does not end in the weight's ", in,
            " input features (weight ", w->shape(), in_out ? ", (in, out)" : ", (out, in)", ")");
  TRI_CHECK(x.device() == w->device(), "quantized_linear: x is on ", x.device().str(), ", the weight on ", w->device().str());
  // A bias that takes no gradient, in f32 on the host, is added inside the product (Note [The
  // bias in the quantized product]); any other by the add op, which records its own gradient.
  const bool fuse = bias && x.dtype() == DType::kF32 && x.device().is_cpu() && bias->dtype() == DType::kF32 &&
                    bias->device().is_cpu() && bias->dim() == 1 && bias->is_contiguous() &&
                    !autograd::needs_grad({*bias});
  if (bias) {
    const int64_t out = in_out ? w->shape()[1] : w->shape()[0];
    TRI_CHECK(bias->dim() == 1 && bias->size(0) == out, "quantized_linear: the bias ", bias->shape(), " is not the ",
              out, " output features");
  }
  // (The bias's addition does not change x's gradient: recorded on the product either way.)
  const Tensor y = product(x, *w, in_out, true, fuse ? &*bias : nullptr);
  if (autograd::needs_grad({x}))
    autograd::record(kQuantizedLinear, {x}, {y}, [w, in_out](const BackwardContext& c) {
      return GradList{product(c.grad(), *w, in_out, false)};  // dx = dy W (out, in), dy W^T (in, out)
    });
  return bias && !fuse ? trident::add(y, *bias) : y;
}

}  // namespace trident::quantization
