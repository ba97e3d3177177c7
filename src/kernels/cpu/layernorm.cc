// LayerNorm kernels (see layernorm.h): rows are independent in the forward and in dx; the
// parameter gradients sum over rows block by block.
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>

#include "core/allocator.h"
#include "core/parallel.h"

namespace trident::kernels::cpu {
namespace {

// Note [Lane sums]
// A row sum written as `s += x[j]` does not vectorize: that would reassociate floating-point
// additions, which the compiler may not do without -ffast-math. Summing into kLanes
// independent accumulators (lane k takes the elements j with j % kLanes == k) and adding the
// lanes in order at the end is one fixed order that compiles to kLanes-wide vector adds. The
// order depends only on the row length, never on threads or alignment. (rmsnorm.cc and
// cross_entropy.cc use the same helper.)
constexpr int kLanes = 16;

template <class Acc, class Term>
inline Acc lane_sum(int64_t n, const Term& term) {
  Acc lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] += term(j + k);
  for (int k = 0; j + k < n; ++k) lane[k] += term(j + k);
  Acc sum = 0;
  for (int k = 0; k < kLanes; ++k) sum += lane[k];
  return sum;
}

// Rows per parallel chunk: enough elements that a chunk outweighs its scheduling.
int64_t row_grain(int64_t C) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1));
}

// Note [Deterministic parameter gradients]
// dweight and dbias are sums over all N rows. The rows are cut into blocks whose size depends
// only on N (at least kMinBlockRows rows, at most kMaxBlocks blocks). One thread handles a
// whole block: it computes dx for the block's rows and adds their contributions, in row
// order, to the block's own slot of a scratch buffer. The slots are then added in block
// order. No atomics and no per-thread buffers, so the bits do not depend on the thread count,
// and the scratch is at most kMaxBlocks x C doubles per gradient.
constexpr int64_t kMinBlockRows = 8;
constexpr int64_t kMaxBlocks = 64;

template <bool kWeight, bool kBias, class T>
void forward_rows(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* x, const T* weight,
                  const T* bias, int64_t N, int64_t C, acc_t<T> eps) {
  using Acc = acc_t<T>;
  const Acc c = static_cast<Acc>(C);
  parallel_for(0, N, row_grain(C), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + r * C;
      const Acc m = lane_sum<Acc>(C, [xr](int64_t j) { return static_cast<Acc>(xr[j]); }) / c;
      auto squared_deviation = [xr, m](int64_t j) {
        const Acc d = static_cast<Acc>(xr[j]) - m;
        return d * d;
      };
      const Acc var = lane_sum<Acc>(C, squared_deviation) / c;
      const Acc s = Acc(1) / std::sqrt(var + eps);
      T* yr = out + r * C;
      for (int64_t j = 0; j < C; ++j) {
        Acc y = (static_cast<Acc>(xr[j]) - m) * s;
        if constexpr (kWeight) y *= static_cast<Acc>(weight[j]);
        if constexpr (kBias) y += static_cast<Acc>(bias[j]);
        yr[j] = static_cast<T>(y);
      }
      mean[r] = m;
      rstd[r] = s;
    }
  });
}

// Adds the per-block partials (blocks x C, block-major) in block order into grad (C).
template <class T>
void sum_blocks(T* grad, double* partial, int64_t blocks, int64_t C) {
  parallel_for(0, C, 4096, [&](int64_t cb, int64_t ce) {
    for (int64_t b = 1; b < blocks; ++b) {
      const double* p = partial + b * C;
      for (int64_t j = cb; j < ce; ++j) partial[j] += p[j];
    }
    for (int64_t j = cb; j < ce; ++j) grad[j] = static_cast<T>(partial[j]);
  });
}

template <bool kWeight, class T>
void backward_rows(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,
                   const acc_t<T>* mean, const acc_t<T>* rstd, int64_t N, int64_t C) {
  using Acc = acc_t<T>;
  const Acc c = static_cast<Acc>(C);
  if (N == 0) {  // no rows: the parameter gradients are empty sums
    if (dweight) std::fill(dweight, dweight + C, static_cast<T>(0.0));
    if (dbias) std::fill(dbias, dbias + C, static_cast<T>(0.0));
    return;
  }
  // Row blocks and their partial sums: Note [Deterministic parameter gradients].
  const int64_t block_rows = std::max(kMinBlockRows, (N + kMaxBlocks - 1) / kMaxBlocks);
  const int64_t blocks = (N + block_rows - 1) / block_rows;
  const int64_t n_partials = (dweight ? 1 : 0) + (dbias ? 1 : 0);
  DataPtr scratch;
  double* partial_w = nullptr;
  double* partial_b = nullptr;
  if (n_partials > 0) {
    scratch =
        host_allocator().allocate(static_cast<size_t>(n_partials * blocks * C) * sizeof(double));
    double* p = static_cast<double*>(scratch.get());
    if (dweight) {
      partial_w = p;
      p += blocks * C;
    }
    if (dbias) partial_b = p;
  }

  parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t b = bb; b < be; ++b) {
      double* pw = partial_w ? partial_w + b * C : nullptr;
      double* pb = partial_b ? partial_b + b * C : nullptr;
      if (pw) std::fill(pw, pw + C, 0.0);
      if (pb) std::fill(pb, pb + C, 0.0);
      for (int64_t r = b * block_rows; r < std::min(N, (b + 1) * block_rows); ++r) {
        const T* xr = x + r * C;
        const T* gr = dout + r * C;
        const Acc m = mean[r], s = rstd[r];
        auto norm = [xr, m, s](int64_t j) { return (static_cast<Acc>(xr[j]) - m) * s; };
        if (dx) {
          // dnorm = dout * weight;  dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
          auto dnorm = [gr, weight](int64_t j) {
            Acc g = static_cast<Acc>(gr[j]);
            if constexpr (kWeight) g *= static_cast<Acc>(weight[j]);
            return g;
          };
          const Acc dnorm_mean = lane_sum<Acc>(C, dnorm) / c;
          const Acc dnorm_norm_mean =
              lane_sum<Acc>(C, [&](int64_t j) { return dnorm(j) * norm(j); }) / c;
          T* dxr = dx + r * C;
          for (int64_t j = 0; j < C; ++j)
            dxr[j] = static_cast<T>(s * (dnorm(j) - dnorm_mean - norm(j) * dnorm_norm_mean));
        }
        if (pw)
          for (int64_t j = 0; j < C; ++j)
            pw[j] += static_cast<double>(static_cast<Acc>(gr[j]) * norm(j));
        if (pb)
          for (int64_t j = 0; j < C; ++j) pb[j] += static_cast<double>(static_cast<Acc>(gr[j]));
      }
    }
  });
  if (dweight) sum_blocks(dweight, partial_w, blocks, C);
  if (dbias) sum_blocks(dbias, partial_b, blocks, C);
}

}  // namespace

template <class T>
void layernorm_forward(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* x, const T* weight,
                       const T* bias, int64_t N, int64_t C, double eps) {
  const auto e = static_cast<acc_t<T>>(eps);
  if (weight && bias)
    forward_rows<true, true>(out, mean, rstd, x, weight, bias, N, C, e);
  else if (weight)
    forward_rows<true, false>(out, mean, rstd, x, weight, bias, N, C, e);
  else if (bias)
    forward_rows<false, true>(out, mean, rstd, x, weight, bias, N, C, e);
  else
    forward_rows<false, false>(out, mean, rstd, x, weight, bias, N, C, e);
}

template <class T>
void layernorm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,
                        const acc_t<T>* mean, const acc_t<T>* rstd, int64_t N, int64_t C) {
  if (weight)
    backward_rows<true>(dx, dweight, dbias, dout, x, weight, mean, rstd, N, C);
  else
    backward_rows<false>(dx, dweight, dbias, dout, x, weight, mean, rstd, N, C);
}

#define TRI_INSTANTIATE_LAYERNORM(T)                                                             \
  template void layernorm_forward<T>(T*, acc_t<T>*, acc_t<T>*, const T*, const T*, const T*,     \
                                     int64_t, int64_t, double);                                  \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const acc_t<T>*, \
                                      const acc_t<T>*, int64_t, int64_t);
TRI_INSTANTIATE_LAYERNORM(float)
TRI_INSTANTIATE_LAYERNORM(double)
TRI_INSTANTIATE_LAYERNORM(bf16)
TRI_INSTANTIATE_LAYERNORM(f16)
#undef TRI_INSTANTIATE_LAYERNORM

}  // namespace trident::kernels::cpu
