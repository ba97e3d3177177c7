#include "ops/elementwise.h"

#include "core/factory.h"
#include "core/views.h"
#include "kernels/cpu/binary.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

using kernels::cpu::BinaryOp;

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "add";
    case BinaryOp::kSub: return "sub";
    case BinaryOp::kMul: return "mul";
    case BinaryOp::kDiv: return "div";
  }
  return "?";
}

void check_binary(const Tensor& a, const Tensor& b, const char* what) {
  check_floating(a, what);
  check_same_dtype(a, b, what);
  check_same_device(a, b, what);
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* what = op_name(op);
  check_binary(a, b, what);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), what);
  const Tensor ea = views::expand(a, shape), eb = views::expand(b, shape);
  Tensor out = empty(shape, a.dtype(), a.device());
  if (on_device(a)) {
    device_kernels_of(a).binary(static_cast<kernels::DeviceBinaryOp>(op), a.dtype(), out.raw_data(), out.strides(),
                                ea.raw_data(), ea.strides(), eb.raw_data(), eb.strides(), shape);
    return out;
  }
  dispatch_floating(a.dtype(), what, [&]<class T>() {
    kernels::cpu::binary_forward<T>(op, out.data_ptr<T>(), out.strides(), ea.data_ptr<T>(),
                                    ea.strides(), eb.data_ptr<T>(), eb.strides(), shape);
  });
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kAdd, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kSub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kDiv, a, b); }

void add_(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "add_");
  for (int i = 0; i < a.dim(); ++i)
    TRI_CHECK(a.strides()[i] != 0 || a.shape()[i] <= 1, "add_: the destination ", a.str(),
              " has overlapping (broadcast) elements");
  const Tensor eb = views::expand(b, a.shape());
  if (on_device(a)) {
    device_kernels_of(a).binary(kernels::DeviceBinaryOp::kAdd, a.dtype(), a.raw_data(), a.strides(), a.raw_data(),
                                a.strides(), eb.raw_data(), eb.strides(), a.shape());
  } else {
    dispatch_floating(a.dtype(), "add_", [&]<class T>() {
      kernels::cpu::binary_forward<T>(BinaryOp::kAdd, a.data_ptr<T>(), a.strides(), a.data_ptr<T>(),
                                      a.strides(), eb.data_ptr<T>(), eb.strides(), a.shape());
    });
  }
  a.bump_version();
}

Tensor affine(const Tensor& a, double scale, double shift) {
  check_floating(a, "affine");
  const Tensor x = core::contiguous(a);
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  if (on_device(a)) {
    device_kernels_of(a).scale_shift(a.dtype(), out.raw_data(), x.raw_data(), scale, shift, x.numel());
    return out;
  }
  dispatch_floating(a.dtype(), "affine", [&]<class T>() {
    kernels::cpu::scale_shift<T>(out.data_ptr<T>(), x.data_ptr<T>(), scale, shift, x.numel());
  });
  return out;
}

}  // namespace trident::ops
