// Differentiable matrix products, and a linear layer fused with its GELU.
#include "autograd/functions/linalg.h"

#include "autograd/record.h"
#include "autograd/recompute.h"
#include "core/views.h"
#include "ops/linalg.h"
#include "ops/pointwise.h"
#include "ops/reduce.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kMatmul, "matmul");
TRI_REGISTER_OP(kLinear, "linear");
TRI_REGISTER_OP(kLinearGeluTanh, "linear_gelu_tanh");

Tensor matmul(const Tensor& a, const Tensor& b) {
  TRI_PROFILE_OP(kMatmul);
  Tensor out = kept_or_computed([&] { return ops::matmul(a, b); });  // Note: autograd/recompute.h
  if (needs_grad({a, b}))
    record(kMatmul, {a, b}, {out}, [sa = SavedTensor(a), sb = SavedTensor(b)](const BackwardContext& c) {
      // C = A @ B:  dA = dC @ B^T,  dB = A^T @ dC  (summed over broadcast batch dims)
      const Tensor& a = sa.get();
      const Tensor& b = sb.get();
      const Tensor& g = c.grad();
      GradList grads(2);
      if (c.needs(0)) grads[0] = ops::sum_to(ops::matmul(g, views::transpose(b, -1, -2)), a.shape());
      if (c.needs(1)) {
        if (b.dim() == 2) {
          // One matrix shared by every batch: a single GEMM over the folded rows,
          // (K, rows) @ (rows, N), instead of a per-batch product summed afterwards.
          const Tensor a2 = ops::as_matrix(a), g2 = ops::as_matrix(g);
          grads[1] = ops::matmul(views::transpose(a2, 0, 1), g2);
        } else {
          grads[1] = ops::sum_to(ops::matmul(views::transpose(a, -1, -2), g), b.shape());
        }
      }
      return grads;
    });
  return out;
}

namespace {

// Note [A frozen weight's input]
// x is needed only for W's gradient. A product with a frozen weight (LoRA's and QLoRA's base, a
// train.freeze'd layer) keeps x's shape instead of x, so that the activation is freed as soon as
// nothing else reads it: on a 125M LLaMA with adapters on q, k, v and o, the MLP's inputs
// (0.5 GiB of 2.9 at 4 x 1024 tokens) no longer live until the backward.
class SavedInput {
 public:
  SavedInput(const Tensor& x, const Tensor& w)
      : shape_(x.shape()), x_(w.requires_grad() ? std::optional<SavedTensor>(x) : std::nullopt) {}
  const Shape& shape() const { return shape_; }
  const Tensor& get() const {
    TRI_CHECK(x_.has_value(), "linear: the weight's gradient was asked for, but it was frozen in the forward");
    return x_->get();
  }

 private:
  Shape shape_;
  std::optional<SavedTensor> x_;
};

// y = x W^T + b:  dx = dy W,  dW = dy^T x,  db = sum over rows of dy.
GradList linear_grads(const BackwardContext& c, const SavedInput& sx, const Tensor& w, const Tensor& dy) {
  const Tensor g2 = ops::as_matrix(dy);
  GradList grads(3);
  if (c.needs(0)) grads[0] = views::view(ops::matmul(g2, w), sx.shape().span());
  if (c.needs(1)) {
    const Tensor x2 = ops::as_matrix(sx.get());
    // W the transpose of a contiguous (in, out) tensor (Conv1D's weight): dW computed in that
    // layout, x^T dy, reaches the parameter contiguous and AccumulateGrad takes it over,
    // where the (out, in) product would be copied through a transposed view.
    const bool stored_transposed = w.dim() == 2 && w.size(0) > 1 && w.strides()[0] == 1 && w.strides()[1] == w.size(0);
    grads[1] = stored_transposed ? views::transpose(ops::matmul(views::transpose(x2, 0, 1), g2), 0, 1)
                                 : ops::matmul(views::transpose(g2, 0, 1), x2);
  }
  if (c.needs(2)) grads[2] = ops::sum(g2, {0});
  return grads;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias) {
  TRI_PROFILE_OP(kLinear);
  Tensor out = kept_or_computed([&] { return ops::linear(x, w, bias); });
  if (needs_grad({x, w, bias}))
    record(kLinear, {x, w, bias}, {out}, [sx = SavedInput(x, w), sw = SavedTensor(w)](const BackwardContext& c) {
      return linear_grads(c, sx, sw.get(), c.grad());
    });
  return out;
}

Tensor linear_gelu_tanh(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias) {
  TRI_PROFILE_OP(kLinearGeluTanh);
  // A selective checkpoint keeps the product (the GELU's input) and reruns only the GELU, as
  // it would for linear followed by gelu_tanh.
  std::optional<Tensor> out;
  const Tensor pre = kept_or_computed([&] {
    ops::LinearGelu r = ops::linear_gelu_tanh(x, w, bias);
    out = std::move(r.out);
    return r.pre_gelu;
  });
  if (!out) out = ops::gelu_tanh(pre);
  if (needs_grad({x, w, bias}))
    record(kLinearGeluTanh, {x, w, bias}, {*out},
           [sx = SavedInput(x, w), sw = SavedTensor(w), spre = SavedTensor(pre)](const BackwardContext& c) {
             // y = gelu(p), p = x W^T + b:  dp = dy gelu'(p), then linear's rule with dp.
             return linear_grads(c, sx, sw.get(), ops::gelu_tanh_backward(c.grad(), spre.get()));
           });
  return *out;
}

}  // namespace trident
