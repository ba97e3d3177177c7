// Differentiable elementwise arithmetic: forward through ops/elementwise, and the backward
// rule of each op next to it. Gradients of broadcast operands are summed back to their shape.
#include "autograd/functions/elementwise.h"

#include "autograd/record.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kAdd, "add");
TRI_REGISTER_OP(kSub, "sub");
TRI_REGISTER_OP(kMul, "mul");
TRI_REGISTER_OP(kDiv, "div");
TRI_REGISTER_OP(kAffine, "affine");

Tensor add(const Tensor& a, const Tensor& b) {
  TRI_PROFILE_OP(kAdd);
  Tensor out = ops::add(a, b);
  if (needs_grad({a, b}))
    record(kAdd, {a, b}, {out}, [sa = a.shape(), sb = b.shape()](const BackwardContext& c) {
      // d(a+b)/da = 1, d(a+b)/db = 1
      return GradList{ops::sum_to(c.grad(), sa), ops::sum_to(c.grad(), sb)};
    });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  TRI_PROFILE_OP(kSub);
  Tensor out = ops::sub(a, b);
  if (needs_grad({a, b}))
    record(kSub, {a, b}, {out}, [sa = a.shape(), sb = b.shape()](const BackwardContext& c) {
      // d(a-b)/da = 1, d(a-b)/db = -1
      GradList g(2);
      if (c.needs(0)) g[0] = ops::sum_to(c.grad(), sa);
      if (c.needs(1)) g[1] = ops::sum_to(ops::neg(c.grad()), sb);
      return g;
    });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  TRI_PROFILE_OP(kMul);
  Tensor out = ops::mul(a, b);
  if (needs_grad({a, b}))
    record(kMul, {a, b}, {out}, [sa = SavedTensor(a), sb = SavedTensor(b)](const BackwardContext& c) {
      // d(a*b)/da = b, d(a*b)/db = a
      const Tensor& a = sa.get();
      const Tensor& b = sb.get();
      GradList g(2);
      if (c.needs(0)) g[0] = ops::sum_to(ops::mul(c.grad(), b), a.shape());
      if (c.needs(1)) g[1] = ops::sum_to(ops::mul(c.grad(), a), b.shape());
      return g;
    });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  TRI_PROFILE_OP(kDiv);
  Tensor out = ops::div(a, b);
  if (needs_grad({a, b}))
    record(kDiv, {a, b}, {out}, [sa = SavedTensor(a), sb = SavedTensor(b)](const BackwardContext& c) {
      // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
      const Tensor& a = sa.get();
      const Tensor& b = sb.get();
      GradList g(2);
      const Tensor ga = ops::div(c.grad(), b);
      if (c.needs(0)) g[0] = ops::sum_to(ga, a.shape());
      if (c.needs(1)) g[1] = ops::sum_to(ops::neg(ops::div(ops::mul(ga, a), b)), b.shape());
      return g;
    });
  return out;
}

Tensor affine(const Tensor& a, double scale, double shift) {
  TRI_PROFILE_OP(kAffine);
  Tensor out = ops::affine(a, scale, shift);
  if (needs_grad({a}))
    record(kAffine, {a}, {out}, [scale](const BackwardContext& c) {
      // d(a*s + t)/da = s
      return GradList{ops::mul_scalar(c.grad(), scale)};
    });
  return out;
}

}  // namespace trident
