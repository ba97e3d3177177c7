#include "ops/linalg.h"

#include "core/factory.h"
#include "core/parallel.h"
#include "core/views.h"
#include "kernels/cpu/matmul.h"
#include "ops/dispatch.h"
#include "ops/pointwise.h"

namespace trident::ops {
namespace {

// A matrix operand as BLAS wants it: pointer, transposed flag and leading dim.
struct MatrixArg {
  bool trans;
  int64_t ld;
};

// How the last two dims (rows, cols) of `t` can be handed to BLAS without a copy.
std::optional<MatrixArg> blas_layout(const Tensor& t) {
  const int n = t.dim();
  const int64_t rows = t.shape()[n - 2], cols = t.shape()[n - 1];
  const int64_t rs = t.strides()[n - 2], cs = t.strides()[n - 1];
  if ((cs == 1 || cols == 1) && (rs >= std::max<int64_t>(cols, 1) || rows == 1))
    return MatrixArg{false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rs == 1 || rows == 1) && (cs >= std::max<int64_t>(rows, 1) || cols == 1))
    return MatrixArg{true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  return std::nullopt;
}

int64_t batch_offset(int64_t idx, const Shape& batch, const Strides& strides) {
  int64_t off = 0;
  for (int i = batch.size() - 1; i >= 0; --i) {
    off += (idx % batch[i]) * strides[i];
    idx /= batch[i];
  }
  return off;
}

// out (M, N) [+ batches] = op(a) op(b) on a device: one cuBLAS call, strided-batched when each
// operand's matrices are evenly spaced (always, for views made by expand and contiguous).
void device_gemm(const Tensor& out, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* a,
                 int64_t lda, const void* b, int64_t ldb, double beta, int64_t ldc, int64_t batch = 1,
                 int64_t stride_a = 0, int64_t stride_b = 0, int64_t stride_c = 0) {
  kernels::GemmArgs g;
  g.dtype = g.c_dtype = out.dtype();
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.M = M, g.N = N, g.K = K;
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb;
  g.beta = beta, g.c = out.raw_data(), g.ldc = ldc;
  g.batch = batch, g.stride_a = stride_a, g.stride_b = stride_b, g.stride_c = stride_c;
  device_kernels_of(out).gemm(g);
}

// The stride s with batch_offset(i) == i * s for every i < n, if there is one.
std::optional<int64_t> even_batch_stride(int64_t n, const Shape& batch, const Strides& strides) {
  const int64_t s = n > 1 ? batch_offset(1, batch, strides) : 0;
  for (int64_t i = 2; i < n; ++i)
    if (batch_offset(i, batch, strides) != i * s) return std::nullopt;
  return s;
}

}  // namespace

Tensor as_matrix(const Tensor& t) {
  const int64_t cols = t.shape().back(), rows = cols == 0 ? 0 : t.numel() / cols;
  const Shape shape{rows, cols};
  auto strides = views::view_strides(t, shape);
  if (strides && ((*strides)[1] == 1 || cols == 1)) return views::as_strided(t, shape, *strides, t.offset());
  return views::view(core::contiguous(t), {rows, cols});
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  check_floating(a_in, "matmul");
  check_same_dtype(a_in, b_in, "matmul");
  check_same_device(a_in, b_in, "matmul");
  TRI_CHECK(a_in.dim() >= 2 && b_in.dim() >= 2, "matmul: expected tensors with >= 2 dims, got ",
            a_in.shape(), " and ", b_in.shape(), " (unsqueeze a vector to a 1-row matrix)");
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  TRI_CHECK(b_in.size(-2) == K, "matmul: inner dims differ: ", a_in.shape(), " @ ", b_in.shape(),
            " (", K, " vs ", b_in.size(-2), ")");
  Shape a_batch = a_in.shape(), b_batch = b_in.shape();
  a_batch.resize(a_in.dim() - 2);
  b_batch.resize(b_in.dim() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul (batch dims)");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = empty(out_shape, a_in.dtype(), a_in.device());
  if (out.numel() == 0) return out;
  const int64_t nbatch = batch.product();

  // One GEMM when b is a single matrix shared by every batch: fold a's batch into M.
  bool b_shared = true;
  for (int i = 0; i < b_in.dim() - 2; ++i) b_shared = b_shared && (b_in.shape()[i] == 1 || b_in.strides()[i] == 0);
  if (b_shared && a_batch.product() == nbatch) {
    // A 2-D a may itself be a transposed view; deeper a folds its batch into rows.
    Tensor a2 = a_in.dim() == 2 ? a_in : as_matrix(a_in);
    auto la = blas_layout(a2);
    if (!la) {
      a2 = core::contiguous(a2);
      la = blas_layout(a2);
    }
    Tensor b2 = views::as_strided(b_in, Shape{K, N},
                                  Strides{b_in.strides()[b_in.dim() - 2], b_in.strides()[b_in.dim() - 1]},
                                  b_in.offset());
    auto lb = blas_layout(b2);
    if (!lb) {
      b2 = core::contiguous(b2);
      lb = blas_layout(b2);
    }
    if (on_device(out)) {
      device_gemm(out, la->trans, lb->trans, a2.size(0), N, K, a2.raw_data(), la->ld, b2.raw_data(), lb->ld, 0.0, N);
      return out;
    }
    dispatch_floating(a_in.dtype(), "matmul", [&]<class T>() {
      kernels::cpu::gemm<T>(la->trans, lb->trans, a2.size(0), N, K, 1.0f, a2.data_ptr<T>(), la->ld,
                            b2.data_ptr<T>(), lb->ld, 0.0f, out.data_ptr<T>(), N);
    });
    return out;
  }

  // Batched: broadcast both to the batch shape and run one GEMM per matrix.
  Shape a_full = batch, b_full = batch;
  a_full.push_back(M);
  a_full.push_back(K);
  b_full.push_back(K);
  b_full.push_back(N);
  Tensor a = views::expand(a_in, a_full), b = views::expand(b_in, b_full);
  auto la = blas_layout(a), lb = blas_layout(b);
  if (!la) {
    a = core::contiguous(a);
    la = blas_layout(a);
  }
  if (!lb) {
    b = core::contiguous(b);
    lb = blas_layout(b);
  }
  Strides a_bs = a.strides(), b_bs = b.strides();
  a_bs.resize(batch.size());
  b_bs.resize(batch.size());
  if (on_device(out)) {
    const auto sa = even_batch_stride(nbatch, batch, a_bs), sb = even_batch_stride(nbatch, batch, b_bs);
    const size_t esize = element_size(out.dtype());
    if (sa && sb) {
      device_gemm(out, la->trans, lb->trans, M, N, K, a.raw_data(), la->ld, b.raw_data(), lb->ld, 0.0, N, nbatch, *sa,
                  *sb, M * N);
    } else {
      for (int64_t i = 0; i < nbatch; ++i) {
        const Tensor oi = views::narrow(views::view(out, {nbatch * M, N}), 0, i * M, M);
        device_gemm(oi, la->trans, lb->trans, M, N, K,
                    static_cast<const char*>(a.raw_data()) + batch_offset(i, batch, a_bs) * esize, la->ld,
                    static_cast<const char*>(b.raw_data()) + batch_offset(i, batch, b_bs) * esize, lb->ld, 0.0, N);
      }
    }
    return out;
  }
  // Matrices of one GEMM block: one per thread in parallel; larger ones: one at a time,
  // each split across every thread. Either way the bits do not depend on the thread count
  // (Note [Deterministic GEMM] in kernels/cpu/matmul.cc).
  const bool small = M <= kernels::cpu::kGemmBlock && N <= kernels::cpu::kGemmBlock;
  dispatch_floating(a_in.dtype(), "matmul", [&]<class T>() {
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    T* po = out.data_ptr<T>();
    auto one = [&](int64_t i) {
      (small ? kernels::cpu::gemm_serial<T> : kernels::cpu::gemm<T>)(la->trans, lb->trans, M, N, K, 1.0f, pa + batch_offset(i, batch, a_bs),
                            la->ld, pb + batch_offset(i, batch, b_bs), lb->ld, 0.0f,
                            po + i * M * N, N);
    };
    if (small) {
      parallel_for(0, nbatch, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) one(i);
      });
    } else {
      for (int64_t i = 0; i < nbatch; ++i) one(i);
    }
  });
  return out;
}

namespace {

// x (..., in) @ w^T + bias into a new tensor; with `pre_gelu`, the result is GELU'd (tanh
// approximation) and *pre_gelu receives the values before it. `what` names the op in errors.
Tensor linear_impl(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                   std::optional<Tensor>* pre_gelu, const char* what) {
  check_floating(x, what);
  check_same_dtype(x, w, what);
  check_same_device(x, w, what);
  TRI_CHECK(x.dim() >= 1 && w.dim() == 2, what, ": expected input (..., in) and weight (out, in), got ", x.shape(),
            " and ", w.shape());
  const int64_t in = w.size(1), out_features = w.size(0);
  TRI_CHECK(x.size(-1) == in, what, ": input ", x.shape(), " has ", x.size(-1), " features but weight ", w.shape(),
            " expects ", in);
  if (bias) {
    const std::string bias_what = std::string(what) + " (bias)";
    check_same_dtype(x, *bias, bias_what.c_str());
    check_same_device(x, *bias, bias_what.c_str());
    TRI_CHECK(bias->dim() == 1 && bias->size(0) == out_features, what, ": bias ", bias->shape(),
              " must have shape (", out_features, ",) to match weight ", w.shape());
  }
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = out_features;
  if (pre_gelu) pre_gelu->emplace(empty(out_shape, x.dtype(), x.device()));
  // On the host the product goes to pre_gelu, and the GELU allocates its output after the GEMM.
  const bool host_gelu = pre_gelu && !on_device(x);
  Tensor out = host_gelu ? **pre_gelu : empty(out_shape, x.dtype(), x.device());
  if (out.numel() == 0) return host_gelu ? gelu_tanh(out) : out;
  const Tensor x2 = as_matrix(x);
  const int64_t rows = x2.size(0);
  // w^T as a BLAS operand: w (out, in) row-major is op(B) = B^T with B = w.
  Tensor wt = views::transpose(w, 0, 1);
  auto lw = blas_layout(wt);
  if (!lw) {
    wt = views::transpose(core::contiguous(w), 0, 1);
    lw = blas_layout(wt);
  }
  if (on_device(out)) {
    // cuBLAS needs a leading dim >= the row length: rows broadcast with stride 0 are copied.
    // The bias (and GELU) go to the GEMM's epilogue: cuBLASLt applies them while the tile is
    // in registers, and writes the GELU's input beside its output.
    const Tensor xd = rows > 1 && x2.stride(0) < std::max<int64_t>(in, 1) ? core::contiguous(x2) : x2;
    const std::optional<Tensor> bd = bias ? std::optional<Tensor>(core::contiguous(*bias)) : std::nullopt;
    kernels::GemmArgs g;
    g.dtype = g.c_dtype = out.dtype();
    g.trans_b = lw->trans;
    g.M = rows, g.N = out_features, g.K = in;
    g.a = xd.raw_data(), g.lda = std::max<int64_t>(xd.stride(0), in);
    g.b = wt.raw_data(), g.ldb = lw->ld;
    g.c = out.raw_data(), g.ldc = out_features;
    g.bias = bd ? bd->raw_data() : nullptr;
    if (pre_gelu) g.pre_gelu = (*pre_gelu)->raw_data(), g.ld_pre_gelu = out_features;
    device_kernels_of(out).gemm(g);
    return out;
  }
  // The host: one GEMM with the bias as its initial C, then the GELU over it.
  float beta = 0.0f;
  if (bias) {
    core::copy_(views::view(out, {rows, out_features}), *bias);  // broadcast bias over the rows
    beta = 1.0f;
  }
  dispatch_floating(x.dtype(), what, [&]<class T>() {
    kernels::cpu::gemm<T>(false, lw->trans, rows, out_features, in, 1.0f, x2.data_ptr<T>(), x2.stride(0),
                          wt.data_ptr<T>(), lw->ld, beta, out.data_ptr<T>(), out_features);
  });
  return host_gelu ? gelu_tanh(out) : out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias) {
  return linear_impl(x, w, bias, nullptr, "linear");
}

LinearGelu linear_gelu_tanh(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias) {
  std::optional<Tensor> pre_gelu;
  Tensor out = linear_impl(x, w, bias, &pre_gelu, "linear_gelu_tanh");
  return LinearGelu{std::move(out), std::move(*pre_gelu)};
}

}  // namespace trident::ops
