// Cross-entropy front ends (see ops/loss.h): validation of shapes, dtypes and every target
// (naming the first bad one), contiguous inputs, dispatch on the logits and target dtypes.
#include "ops/loss.h"

#include <optional>

#include "core/factory.h"
#include "kernels/cpu/cross_entropy.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

struct Rows {
  int64_t N;  // rows of logits
  int64_t V;  // classes
};

// Checks logits (..., V) and targets (...) or (N); returns the row count and V.
Rows check_logits_and_targets(const Tensor& logits, const Tensor& targets, const char* what) {
  check_floating(logits, what);
  TRI_CHECK(logits.dim() >= 1, what, ": expected logits of shape (..., V), got a 0-dim tensor");
  const int64_t V = logits.size(-1);
  TRI_CHECK(V > 0, what, ": logits ", logits.shape(), " have no classes (last dim is 0)");
  const int64_t N = logits.numel() / V;
  TRI_CHECK_TYPE(is_integral(targets.dtype()), what,
                 ": targets must hold class indices (i32, i64 or u16), got dtype ",
                 targets.dtype());
  check_same_device(logits, targets, what);
  Shape rows = logits.shape();
  rows.resize(rows.size() - 1);
  TRI_CHECK(targets.shape() == rows || (targets.dim() == 1 && targets.size(0) == N), what,
            ": targets of shape ", targets.shape(), " do not match logits ", logits.shape(),
            " (expected targets of shape ", rows, ", or (", N, ") for the flattened rows)");
  return {N, V};
}

// The multi-index of flat (row-major) position `flat` in `shape`, e.g. (1, 3).
Shape position_of(int64_t flat, const Shape& shape) {
  Shape index = shape;
  for (int i = shape.size() - 1; i >= 0; --i) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

// Checks that every target (t: contiguous) is in [0, V) or equals ignore_index, naming the
// first one that is not; returns the number of targets that are not ignored.
int64_t count_targets(const Tensor& t, int64_t V, int64_t ignore_index, const char* what) {
  int64_t count = 0;
  dispatch_index(t.dtype(), what, [&]<class I>() {
    const I* p = t.data_ptr<I>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t target = static_cast<int64_t>(p[i]);
      if (target == ignore_index) continue;
      TRI_CHECK_INDEX(target >= 0 && target < V, what, ": target ", target, " at position ",
                      position_of(i, t.shape()), " of targets ", t.shape(), " is out of range for ",
                      V, " classes (expected 0 <= target < ", V,
                      ", or ignore_index = ", ignore_index, ")");
      ++count;
    }
  });
  return count;
}

}  // namespace

CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 Reduction reduction) {
  const char* what = "cross_entropy";
  const auto [N, V] = check_logits_and_targets(logits, targets, what);
  const Tensor lc = core::contiguous(logits), tc = core::contiguous(targets);
  const int64_t count = count_targets(tc, V, ignore_index, what);
  Tensor loss = empty(Shape{}, logits.dtype(), logits.device());
  std::optional<Tensor> logsumexp;
  dispatch_floating(logits.dtype(), what, [&]<class T>() {
    logsumexp = empty(Shape{N}, dtype_of<acc_t<T>>(), logits.device());
    double total = 0.0;
    dispatch_index(tc.dtype(), what, [&]<class I>() {
      total = kernels::cpu::cross_entropy_forward<T, I>(
          logsumexp->data_ptr<acc_t<T>>(), lc.data_ptr<T>(), tc.data_ptr<I>(), N, V, ignore_index);
    });
    // A mean over no counted rows is 0/0 = NaN, as in PyTorch.
    const double mean_or_sum =
        reduction == Reduction::kMean ? total / static_cast<double>(count) : total;
    loss.data_ptr<T>()[0] = static_cast<T>(mean_or_sum);
  });
  return {loss, *logsumexp};
}

Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                              const Tensor& logsumexp, int64_t ignore_index, Reduction reduction) {
  const char* what = "cross_entropy_backward";
  const auto [N, V] = check_logits_and_targets(logits, targets, what);
  check_same_dtype(logits, dloss, what);
  check_same_device(logits, dloss, what);
  check_same_device(logits, logsumexp, what);
  TRI_CHECK(dloss.dim() == 0, what, ": the loss gradient must be a 0-dim tensor, got shape ",
            dloss.shape());
  TRI_CHECK(logsumexp.shape() == Shape{N}, what, ": logsumexp must be the forward's (", N,
            ") rows, got shape ", logsumexp.shape());
  const Tensor lc = core::contiguous(logits), tc = core::contiguous(targets);
  const int64_t count = count_targets(tc, V, ignore_index, what);
  // Per-row gradient scale of the summed loss. With every row ignored nothing is scaled
  // (all gradients are zero), so the 1/0 of an empty mean never appears.
  const double g = dloss.item();
  const double scale =
      reduction == Reduction::kSum ? g : (count > 0 ? g / static_cast<double>(count) : 0.0);
  const Tensor sc = core::contiguous(logsumexp);
  Tensor dlogits = empty(logits.shape(), logits.dtype(), logits.device());
  dispatch_floating(logits.dtype(), what, [&]<class T>() {
    TRI_CHECK_TYPE(sc.dtype() == dtype_of<acc_t<T>>(), what, ": logsumexp must have dtype ",
                   dtype_of<acc_t<T>>(), " for logits of dtype ", logits.dtype(), ", got ",
                   sc.dtype());
    dispatch_index(tc.dtype(), what, [&]<class I>() {
      kernels::cpu::cross_entropy_backward<T, I>(dlogits.data_ptr<T>(), lc.data_ptr<T>(),
                                                 sc.data_ptr<acc_t<T>>(), tc.data_ptr<I>(), N, V,
                                                 ignore_index, scale);
    });
  });
  return dlogits;
}

}  // namespace trident::ops
