// Cross-entropy front ends (see ops/loss.h): validation of shapes, dtypes and every target
// (naming the first bad one), contiguous inputs, dispatch on the logits and target dtypes.
#include "ops/loss.h"

#include <optional>
#include <type_traits>

#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/matmul.h"
#include "ops/dispatch.h"
#include "ops/linalg.h"

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
// first one that is not; returns the number of targets that are not ignored. Targets on a
// device are checked from a host copy (one integer per row).
int64_t count_targets(const Tensor& t_any, int64_t V, int64_t ignore_index, const char* what) {
  const Tensor t = core::to_device(t_any, Device::cpu());
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

// Note [Padded logits]: on a device each chunk's logits (n, V) live in rows of ld = V rounded
// up to the device's multiple (64 on a GPU), and the logits and dx GEMMs run over all ld
// columns against a copy of w padded with zero rows, so the padding columns hold exact zeros
// in logits and dlogits (the cross-entropy kernels read and write only the first V) and add
// nothing to dx. The dw GEMM likewise writes ld rows, of which dw is the first V (the rest get
// zeros): unpadded it took 3.05 ms of GPT-2 124M's bf16 step at B=16 on an H200, padded 2.12
// (the logits GEMM: 1.84). With GPT-2's V = 50257 unpadded rows are only 2-byte aligned in
// bf16, and cuBLAS runs an odd vocabulary dimension slowly even when aligned: on an H100 the
// logits GEMM at (16384 x 768) x (768 x 50257) ran at 98 TFLOP/s through PyTorch and the dx
// GEMM at 145, against 800 for a large square product (bench/gpu_ceilings.py); nanoGPT pads
// its vocabulary to 50304 for this reason. Padding here leaves the model's V (and its files) as
// they are.
int64_t round_up(int64_t V, int64_t multiple) {
  const int64_t m = std::max<int64_t>(1, multiple);
  return (V + m - 1) / m * m;
}

int64_t padded_row(int64_t V, const kernels::DeviceKernels& k) { return round_up(V, k.logits_row_multiple()); }

// w (V, C) with zero rows up to ld (Note [Padded logits]); w itself when ld == V.
Tensor zero_padded_rows(const Tensor& w, int64_t ld) {
  if (ld == w.size(0)) return w;
  Tensor padded = zeros(Shape{ld, w.size(1)}, w.dtype(), w.device());
  core::copy_(views::narrow(padded, 0, 0, w.size(0)), w);
  return padded;
}

// One chunk of linear_cross_entropy on a device: rows [r0, r0 + n) of x2 (N, C), into
// `logits` (at least n * padded_row(V, k) elements); the same steps as the host loop below.
// wp is wc with zero rows up to padded_row(V, k) (zero_padded_rows).
void chunk_on_device(const Tensor& x2, const Tensor& wc, const Tensor& wp, const Tensor& tc, const Tensor& logits,
                     const Tensor& lse, LinearCrossEntropyOutput& out, int64_t r0, int64_t n, int64_t ignore_index,
                     bool want_grad, double& total) {
  kernels::DeviceKernels& k = device_kernels_of(x2);
  const int64_t C = x2.size(1), V = wc.size(0), ld = padded_row(V, k);
  const size_t t_size = element_size(tc.dtype()), x_size = element_size(x2.dtype());
  const void* tg = static_cast<const char*>(tc.raw_data()) + r0 * t_size;
  const void* xc = static_cast<const char*>(x2.raw_data()) + r0 * C * x_size;
  // Scopes per step (core/profiler.h): what the head's time is made of, on a GPU.
  {  // logits (n, V) = x rows (n, C) @ w^T
    profiler::ProfileScope scope("linear_cross_entropy.logits_gemm", profiler::Phase::kForward);
    kernels::GemmArgs g;
    g.dtype = g.c_dtype = x2.dtype();
    g.trans_b = true;
    g.M = n, g.N = ld, g.K = C;  // the padding columns: zero rows of wp, exact zeros
    g.a = xc, g.lda = C, g.b = wp.raw_data(), g.ldb = C;
    g.c = logits.raw_data(), g.ldc = ld;
    k.gemm(g);
  }
  {
    profiler::ProfileScope scope("linear_cross_entropy.softmax", profiler::Phase::kForward);
    total +=
        k.cross_entropy_forward(x2.dtype(), tc.dtype(), lse.raw_data(), logits.raw_data(), tg, n, V, ld, ignore_index);
  }
  if (want_grad) {  // softmax - onehot in place, unscaled
    profiler::ProfileScope scope("linear_cross_entropy.dlogits", profiler::Phase::kForward);
    k.cross_entropy_backward(x2.dtype(), tc.dtype(), logits.raw_data(), logits.raw_data(), lse.raw_data(), tg, n, V,
                             ld, ignore_index, 1.0);
  }
  if (out.dx) {  // dx rows = dlogits (n, V) @ w (V, C)
    profiler::ProfileScope scope("linear_cross_entropy.dx_gemm", profiler::Phase::kForward);
    kernels::GemmArgs g;
    g.dtype = g.c_dtype = x2.dtype();
    g.M = n, g.N = C, g.K = ld;  // zero padding columns times zero rows of wp: nothing added
    g.a = logits.raw_data(), g.lda = ld, g.b = wp.raw_data(), g.ldb = C;
    g.c = static_cast<char*>(out.dx->raw_data()) + r0 * C * x_size, g.ldc = C;
    k.gemm(g);
  }
  if (out.dw) {  // dw += dlogits^T (ld, n) @ x rows (n, C), in f32 for bf16/f16
    // dw is the first V rows of an (ld, C) buffer (linear_cross_entropy): the padding rows get
    // the zero padding columns' products, and cuBLAS an aligned vocabulary dimension.
    profiler::ProfileScope scope("linear_cross_entropy.dw_gemm", profiler::Phase::kForward);
    kernels::GemmArgs g;
    g.dtype = x2.dtype(), g.c_dtype = out.dw->dtype();
    g.trans_a = true;
    g.M = ld, g.N = C, g.K = n;
    g.a = logits.raw_data(), g.lda = ld, g.b = xc, g.ldb = C;
    g.beta = 1.0, g.c = out.dw->raw_data(), g.ldc = C;
    k.gemm(g);
  }
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
  // N = N, V = V: clang before 16 cannot capture a structured binding (fuzz/ builds with clang 14).
  dispatch_floating(logits.dtype(), what, [&, N = N, V = V]<class T>() {
    logsumexp = empty(Shape{N}, dtype_of<acc_t<T>>(), logits.device());
    double total = 0.0;
    if (on_device(lc)) {
      total = device_kernels_of(lc).cross_entropy_forward(lc.dtype(), tc.dtype(), logsumexp->raw_data(),
                                                          lc.raw_data(), tc.raw_data(), N, V, V, ignore_index);
    } else {
      dispatch_index(tc.dtype(), what, [&]<class I>() {
        total = kernels::cpu::cross_entropy_forward<T, I>(
            logsumexp->data_ptr<acc_t<T>>(), lc.data_ptr<T>(), tc.data_ptr<I>(), N, V, ignore_index);
      });
    }
    // A mean over no counted rows is 0/0 = NaN, as in PyTorch.
    const double mean_or_sum =
        reduction == Reduction::kMean ? total / static_cast<double>(count) : total;
    fill_(loss, static_cast<double>(static_cast<T>(mean_or_sum)));
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
  dispatch_floating(logits.dtype(), what, [&, N = N, V = V]<class T>() {
    TRI_CHECK_TYPE(sc.dtype() == dtype_of<acc_t<T>>(), what, ": logsumexp must have dtype ",
                   dtype_of<acc_t<T>>(), " for logits of dtype ", logits.dtype(), ", got ",
                   sc.dtype());
    if (on_device(lc)) {
      device_kernels_of(lc).cross_entropy_backward(lc.dtype(), tc.dtype(), dlogits.raw_data(), lc.raw_data(),
                                                   sc.raw_data(), tc.raw_data(), N, V, V, ignore_index, scale);
      return;
    }
    dispatch_index(tc.dtype(), what, [&]<class I>() {
      kernels::cpu::cross_entropy_backward<T, I>(dlogits.data_ptr<T>(), lc.data_ptr<T>(),
                                                 sc.data_ptr<acc_t<T>>(), tc.data_ptr<I>(), N, V,
                                                 ignore_index, scale);
    });
  });
  return dlogits;
}

int64_t linear_cross_entropy_padded_vocabulary(int64_t V, bool device) {
  return round_up(V, device ? kernels::DeviceKernels::kLogitsRowMultiple : 1);
}

int64_t linear_cross_entropy_chunk_rows(int64_t V, bool device) {
  const int64_t budget = device ? int64_t{1} << 27 : int64_t{1} << 26;  // Note [Head chunks]
  int64_t R = std::max<int64_t>(64, budget / V);
  const int64_t pair = 2 * kernels::cpu::kGemmBlock;
  if (!device && R >= pair) R = R / pair * pair;
  return R;
}

LinearCrossEntropyOutput linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& targets,
                                              int64_t ignore_index, Reduction reduction, bool want_dx,
                                              bool want_dw, int64_t chunk_rows) {
  const char* what = "linear_cross_entropy";
  check_floating(x, what);
  check_same_dtype(x, w, what);
  check_same_device(x, w, what);
  TRI_CHECK(x.dim() >= 1 && w.dim() == 2 && w.size(1) == x.size(-1), what, ": expected x (..., C) and w (V, C), got ",
            x.shape(), " and ", w.shape());
  TRI_CHECK(chunk_rows >= 0, what, ": chunk_rows must be >= 0 (0: automatic), got ", chunk_rows);
  const int64_t C = x.size(-1), V = w.size(0);
  TRI_CHECK(V > 0, what, ": w ", w.shape(), " has no classes");
  const Tensor x2 = core::contiguous(as_matrix(x));  // (N, C)
  const Tensor wc = core::contiguous(w);
  const int64_t N = x2.size(0);
  Shape rows = x.shape();
  rows.resize(rows.size() - 1);
  TRI_CHECK_TYPE(is_integral(targets.dtype()), what, ": targets must hold class indices (i32, i64 or u16), got dtype ",
                 targets.dtype());
  check_same_device(x, targets, what);
  TRI_CHECK(targets.shape() == rows || (targets.dim() == 1 && targets.size(0) == N), what, ": targets of shape ",
            targets.shape(), " do not match x ", x.shape(), " (expected ", rows, " or (", N, "))");
  const Tensor tc = views::view(core::contiguous(targets), {N});
  const int64_t count = count_targets(tc, V, ignore_index, what);
  // Note [Head chunks]
  // Automatic chunks: about 64M logits on the host, 128M on a device, where each chunk's loss
  // comes back to the host (a synchronization) and memory is plentiful: GPT-2's 16k rows x
  // 50257 classes take 7 chunks there (16 on the host). On the host every chunk adds its dw product
  // into the whole (V, C) f32 dw (GPT-2: 154 MB read and written per chunk), and its dx
  // product (R, C) splits into GEMM blocks of R's rows (kernels/cpu/matmul.h): 333-row
  // chunks (16M logits) gave 3 blocks to 2 threads. Rounded to a multiple of two blocks,
  // GPT-2 124M's chunks are 1024 rows and its head took 1.16 s instead of 1.44 s in bf16 on
  // Zen 5 (2 threads), 2048 rows no less; peak memory did not grow.
  const int64_t R = chunk_rows > 0 ? chunk_rows : linear_cross_entropy_chunk_rows(V, on_device(x));
  const DType acc = x.dtype() == DType::kF64 ? DType::kF64 : DType::kF32;

  LinearCrossEntropyOutput out{empty(Shape{}, acc, x.device()), std::nullopt, std::nullopt, 0.0};
  // Per-row gradient of the summed loss; with every row ignored all gradients are zero.
  out.grad_scale = reduction == Reduction::kSum ? 1.0 : (count > 0 ? 1.0 / static_cast<double>(count) : 0.0);
  if (want_dx) out.dx = empty(Shape{N, C}, x.dtype(), x.device());
  if (want_dw) {
    // On a device, dw's rows continue up to the padded vocabulary (Note [Padded logits]); the
    // first V rows are a contiguous view of them.
    const int64_t rows_allocated = on_device(x2) ? padded_row(V, device_kernels_of(x2)) : V;
    out.dw = views::narrow(zeros(Shape{rows_allocated, C}, acc, x.device()), 0, 0, V);
  }
  const bool want_grad = want_dx || want_dw;
  double total = 0.0;
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    Tensor lse = empty(Shape{std::min(R, N)}, dtype_of<acc_t<T>>(), x.device());
    if (on_device(x2)) {  // one logits buffer for every chunk (Note [Padded logits])
      const int64_t ld = padded_row(V, device_kernels_of(x2));
      const Tensor logits = empty(Shape{std::min(R, N), ld}, x.dtype(), x.device());
      const Tensor wp = zero_padded_rows(wc, ld);
      for (int64_t r0 = 0; r0 < N; r0 += R)
        chunk_on_device(x2, wc, wp, tc, logits, lse, out, r0, std::min(R, N - r0), ignore_index, want_grad, total);
      return;
    }
    using profiler::Phase;
    using profiler::ProfileScope;
    for (int64_t r0 = 0; r0 < N; r0 += R) {
      const int64_t n = std::min(R, N - r0);
      std::optional<ProfileScope> scope(std::in_place, "linear_cross_entropy.logits_gemm", Phase::kForward);
      const Tensor logits = linear(views::narrow(x2, 0, r0, n), wc, std::nullopt);  // (n, V)
      T* lg = logits.data_ptr<T>();
      const T* xc = x2.data_ptr<T>() + r0 * C;
      scope.emplace("linear_cross_entropy.softmax", Phase::kForward);
      dispatch_index(tc.dtype(), what, [&]<class I>() {
        const I* tg = tc.data_ptr<I>() + r0;
        total += kernels::cpu::cross_entropy_forward<T, I>(lse.data_ptr<acc_t<T>>(), lg, tg, n, V, ignore_index);
        // softmax - onehot in place, unscaled: values in [-1, 1] whatever the dtype.
        if (want_grad)
          kernels::cpu::cross_entropy_backward<T, I>(lg, lg, lse.data_ptr<acc_t<T>>(), tg, n, V, ignore_index, 1.0);
      });
      scope.emplace("linear_cross_entropy.dx_gemm", Phase::kForward);
      if (want_dx)  // dx rows = dlogits (n,V) @ w (V,C)
        kernels::cpu::gemm<T>(false, false, n, C, V, 1.0f, lg, V, wc.data_ptr<T>(), C, 0.0f,
                              out.dx->data_ptr<T>() + r0 * C, C);
      scope.emplace("linear_cross_entropy.dw_gemm", Phase::kForward);
      if (want_dw) {  // dw += dlogits^T (V,n) @ x rows (n,C), in acc (fp32 for bf16/f16)
        if constexpr (std::is_same_v<T, double>) {
          kernels::cpu::gemm<T>(true, false, V, C, n, 1.0f, lg, V, xc, C, 1.0f, out.dw->data_ptr<T>(), C);
        } else {
          kernels::cpu::gemm_to_f32<T>(true, false, V, C, n, 1.0f, lg, V, xc, C, 1.0f, out.dw->data_ptr<float>(), C);
        }
      }
    }
  });
  // A mean over no counted rows is 0/0 = NaN, as in PyTorch.
  const double loss = reduction == Reduction::kMean ? total / static_cast<double>(count) : total;
  fill_(out.loss, acc == DType::kF64 ? loss : static_cast<double>(static_cast<float>(loss)));
  if (want_dx) out.dx = views::view(*out.dx, x.shape().span());
  return out;
}

}  // namespace trident::ops
