#include "ops/vocab_parallel.h"

#include <vector>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "ops/dispatch.h"
#include "kernels/cpu/vocab_parallel_cross_entropy.h"
#include "kernels/cpu/vocab_parallel_embedding.h"

namespace trident::ops {
namespace {

void check_rows(const Tensor& logits, const Tensor& other, const Shape& expected, DType dtype, const char* name,
                const char* what) {
  TRI_CHECK(other.shape() == expected && other.dtype() == dtype, what, ": ", name, " must be ", dtype, " of shape ",
            expected, " for logits ", logits.shape(), ", got ", other.dtype(), " ", other.shape());
  TRI_CHECK(other.device() == logits.device(), what, ": ", name, " is on ", other.device(), ", the logits on ",
            logits.device());
}

Tensor f32_logits(const Tensor& logits, const char* what) {
  TRI_CHECK(logits.dim() == 2, what, ": logits must be (N, V_local), got shape ", logits.shape());
  return core::contiguous(core::cast(logits, DType::kF32));
}

Tensor i64_targets(const Tensor& logits, const Tensor& targets, const char* what) {
  TRI_CHECK(targets.numel() == logits.size(0), what, ": ", targets.numel(), " targets for ", logits.size(0), " rows");
  TRI_CHECK(targets.device() == logits.device(), what, ": targets are on ", targets.device(), ", the logits on ",
            logits.device());
  return core::contiguous(core::cast(core::contiguous(targets), DType::kI64));
}

}  // namespace

LocalIds vocab_parallel_local_ids(const Tensor& ids, int64_t begin, int64_t rows) {
  TRI_CHECK(rows >= 0, "vocab_parallel_local_ids: rows must be >= 0, got ", rows);
  const Tensor all = core::contiguous(core::cast(ids, DType::kI64));
  std::vector<int64_t> mask_shape = all.shape().vec();
  mask_shape.push_back(1);
  LocalIds out{empty(all.shape(), DType::kI64, all.device()), empty(Shape(mask_shape), DType::kF32, all.device())};
  if (on_device(all)) {
    device_kernels_of(all).vocab_parallel_local_ids(out.local.data_ptr<int64_t>(), out.mask.data_ptr<float>(),
                                                    all.data_ptr<int64_t>(), all.numel(), begin, rows);
  } else {
    kernels::cpu::vocab_parallel_local_ids(out.local.data_ptr<int64_t>(), out.mask.data_ptr<float>(),
                                           all.data_ptr<int64_t>(), all.numel(), begin, rows);
  }
  return out;
}

Tensor vocab_parallel_row_max(const Tensor& logits) {
  const Tensor l = f32_logits(logits, "vocab_parallel_row_max");
  const int64_t N = l.size(0), V = l.size(1);
  Tensor out = empty({N}, DType::kF32, l.device());
  if (on_device(l)) {
    device_kernels_of(l).vocab_parallel_row_max(out.data_ptr<float>(), l.data_ptr<float>(), N, V);
  } else {
    kernels::cpu::vocab_parallel_row_max(out.data_ptr<float>(), l.data_ptr<float>(), N, V);
  }
  return out;
}

Tensor vocab_parallel_sums(const Tensor& logits, const Tensor& row_max, const Tensor& targets, int64_t begin) {
  const char* what = "vocab_parallel_sums";
  const Tensor l = f32_logits(logits, what), t = i64_targets(l, targets, what);
  const int64_t N = l.size(0), V = l.size(1);
  check_rows(l, row_max, Shape{N}, DType::kF32, "row_max", what);
  const Tensor m = core::contiguous(row_max);
  Tensor out = empty({2, N}, DType::kF64, l.device());
  if (on_device(l)) {
    device_kernels_of(l).vocab_parallel_sums(out.data_ptr<double>(), l.data_ptr<float>(), m.data_ptr<float>(),
                                             t.data_ptr<int64_t>(), N, V, begin);
  } else {
    kernels::cpu::vocab_parallel_sums(out.data_ptr<double>(), l.data_ptr<float>(), m.data_ptr<float>(),
                                      t.data_ptr<int64_t>(), N, V, begin);
  }
  return out;
}

Tensor vocab_parallel_backward(const Tensor& logits, const Tensor& row_max, const Tensor& sums, const Tensor& targets,
                               int64_t begin, int64_t ignore_index, double scale) {
  const char* what = "vocab_parallel_backward";
  const Tensor l = f32_logits(logits, what), t = i64_targets(l, targets, what);
  const int64_t N = l.size(0), V = l.size(1);
  check_rows(l, row_max, Shape{N}, DType::kF32, "row_max", what);
  check_rows(l, sums, Shape{2, N}, DType::kF64, "sums", what);
  const Tensor m = core::contiguous(row_max), s = core::contiguous(sums);
  Tensor grad = empty({N, V}, DType::kF32, l.device());
  if (on_device(l)) {
    device_kernels_of(l).vocab_parallel_backward(grad.data_ptr<float>(), l.data_ptr<float>(), m.data_ptr<float>(),
                                                 s.data_ptr<double>(), t.data_ptr<int64_t>(), N, V, begin,
                                                 ignore_index, scale);
  } else {
    kernels::cpu::vocab_parallel_backward(grad.data_ptr<float>(), l.data_ptr<float>(), m.data_ptr<float>(),
                                          s.data_ptr<double>(), t.data_ptr<int64_t>(), N, V, begin, ignore_index,
                                          scale);
  }
  return grad;
}

}  // namespace trident::ops
