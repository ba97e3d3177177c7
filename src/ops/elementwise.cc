#include "ops/elementwise.h"

#include <algorithm>

#include "core/copy.h"
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

// Note [Mixed-dtype add_]
// Gradients are folded into f32 sums as they arrive (ZeRO's flat buffers, the masters of mixed
// precision, a pipeline's tied copy). Casting a whole bf16 gradient to f32 first and adding
// that held a full f32 copy of the largest parameter at once: 51 MB for tiny GPT-2's
// embedding under ZeRO-1, where it set the first pipeline stage's activation peak (the
// planner's 11.7% gap, bf16 dp2 pp2x2), and 2.1 GB for an 8B LLaMA's. Converting slices of
// b along dim 0 (at most kMixedAddSliceElements each) bounds that to 4 MiB, with the bits of
// add_(a, cast(b, a.dtype())): both are elementwise.
void add_mixed(const Tensor& a, const Tensor& b) {
  check_floating(a, "add_");
  check_floating(b, "add_");
  check_same_device(a, b, "add_");
  const Tensor eb = views::expand(b, a.shape());
  if (a.dim() == 0 || a.numel() <= kMixedAddSliceElements) return add_(a, core::cast(eb, a.dtype()));
  const int64_t rows = a.shape()[0];  // > 0: a has more elements than a slice
  const int64_t step = std::max<int64_t>(1, kMixedAddSliceElements / (a.numel() / rows));
  for (int64_t r = 0; r < rows; r += step) {
    const int64_t n = std::min(step, rows - r);
    add_(views::narrow(a, 0, r, n), core::cast(views::narrow(eb, 0, r, n), a.dtype()));
  }
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kAdd, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kSub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kDiv, a, b); }

void add_(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) return add_mixed(a, b);
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
