// Differentiable matrix products.
#include "autograd/functions/linalg.h"

#include "autograd/record.h"
#include "autograd/recompute.h"
#include "core/views.h"
#include "ops/linalg.h"
#include "ops/reduce.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kMatmul, "matmul");
TRI_REGISTER_OP(kLinear, "linear");

Tensor matmul(const Tensor& a, const Tensor& b) {
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

Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias) {
  Tensor out = kept_or_computed([&] { return ops::linear(x, w, bias); });
  if (needs_grad({x, w, bias}))
    record(kLinear, {x, w, bias}, {out},
           [sx = SavedTensor(x), sw = SavedTensor(w)](const BackwardContext& c) {
             // y = x W^T + b:  dx = dy W,  dW = dy^T x,  db = sum over rows of dy
             const Tensor& x = sx.get();
             const Tensor& w = sw.get();
             const Tensor g2 = ops::as_matrix(c.grad());
             GradList grads(3);
             if (c.needs(0)) grads[0] = views::view(ops::matmul(g2, w), x.shape().span());
             if (c.needs(1)) grads[1] = ops::matmul(views::transpose(g2, 0, 1), ops::as_matrix(x));
             if (c.needs(2)) grads[2] = ops::sum(g2, {0});
             return grads;
           });
  return out;
}

}  // namespace trident
