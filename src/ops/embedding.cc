#include "ops/embedding.h"

#include "core/factory.h"
#include "kernels/cpu/embedding.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

// Checks the index tensor's dtype and rank and every value against [0, V). `indices` is
// contiguous, so the flat position of a bad value unravels to its multi-index. Indices on a
// device are checked from a host copy (B x T integers per step: cheap next to the gather).
void check_indices(const Tensor& indices_any, int64_t V, const char* what) {
  const Tensor indices = core::to_device(indices_any, Device::cpu());
  TRI_CHECK_TYPE(is_integral(indices.dtype()), what, ": indices must be i32, i64 or u16, got ",
                 indices.dtype());
  TRI_CHECK(indices.dim() < Dims::kMaxDims, what, ": indices ", indices.shape(), " have ",
            indices.dim(), " dims; at most ", Dims::kMaxDims - 1,
            " are supported (the output adds one)");
  dispatch_index(indices.dtype(), what, [&]<class I>() {
    const I* p = indices.data_ptr<I>();
    for (int64_t n = 0; n < indices.numel(); ++n) {
      const int64_t value = static_cast<int64_t>(p[n]);
      if (value >= 0 && value < V) [[likely]]
        continue;
      Shape position = Dims::filled(indices.dim(), 0);
      int64_t rem = n;
      for (int d = indices.dim() - 1; d >= 0; --d) {
        position[d] = rem % indices.shape()[d];
        rem /= indices.shape()[d];
      }
      TRI_CHECK_INDEX(false, what, ": index ", value, " at position ", position,
                      " of indices with shape ", indices.shape(),
                      " is out of range for a weight with ", V, " rows (allowed: 0 <= index < ", V,
                      ")");
    }
  });
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices_in) {
  check_floating(weight, "embedding");
  check_same_device(weight, indices_in, "embedding");
  TRI_CHECK(weight.dim() == 2, "embedding: weight must be 2-D (num_embeddings, dim), got shape ",
            weight.shape());
  const int64_t V = weight.size(0), C = weight.size(1);
  const Tensor indices = core::contiguous(indices_in);
  check_indices(indices, V, "embedding");
  Shape out_shape = indices.shape();
  out_shape.push_back(C);
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  const Tensor w = core::contiguous(weight);
  if (on_device(w)) {
    device_kernels_of(w).embedding_forward(w.dtype(), indices.dtype(), out.raw_data(), w.raw_data(),
                                           indices.raw_data(), indices.numel(), C);
    return out;
  }
  dispatch_floating(w.dtype(), "embedding", [&]<class T>() {
    dispatch_index(indices.dtype(), "embedding", [&]<class I>() {
      kernels::cpu::embedding_forward<T, I>(out.data_ptr<T>(), w.data_ptr<T>(),
                                            indices.data_ptr<I>(), indices.numel(), C);
    });
  });
  return out;
}

Tensor embedding_backward(const Tensor& grad_out_in, const Tensor& indices_in,
                          int64_t num_weights) {
  check_floating(grad_out_in, "embedding_backward");
  check_same_device(grad_out_in, indices_in, "embedding_backward");
  TRI_CHECK(num_weights >= 0, "embedding_backward: num_weights must be >= 0, got ", num_weights);
  const Tensor indices = core::contiguous(indices_in);
  check_indices(indices, num_weights, "embedding_backward");
  const Shape& gs = grad_out_in.shape();
  bool shape_ok = grad_out_in.dim() == indices.dim() + 1;
  for (int d = 0; shape_ok && d < indices.dim(); ++d) shape_ok = gs[d] == indices.shape()[d];
  TRI_CHECK(shape_ok, "embedding_backward: grad_out ", gs, " must be indices' shape ",
            indices.shape(), " plus one trailing dim");
  const int64_t C = gs.back();
  const Tensor grad_out = core::contiguous(grad_out_in);
  Tensor grad_weight = empty(Shape{num_weights, C}, grad_out.dtype(), grad_out.device());
  if (on_device(grad_out)) {
    device_kernels_of(grad_out).embedding_backward(grad_out.dtype(), indices.dtype(), grad_weight.raw_data(),
                                                   grad_out.raw_data(), indices.raw_data(), indices.numel(),
                                                   num_weights, C);
    return grad_weight;
  }
  dispatch_floating(grad_out.dtype(), "embedding_backward", [&]<class T>() {
    dispatch_index(indices.dtype(), "embedding_backward", [&]<class I>() {
      kernels::cpu::embedding_backward<T, I>(grad_weight.data_ptr<T>(), grad_out.data_ptr<T>(),
                                             indices.data_ptr<I>(), indices.numel(), num_weights,
                                             C);
    });
  });
  return grad_weight;
}

}  // namespace trident::ops
