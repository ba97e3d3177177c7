// LayerNorm kernels (see layernorm.h): rows are independent in the forward and in dx; the
// parameter gradients sum over rows block by block (Note [Deterministic parameter gradients]
// in row_blocks.h). Row sums are lane sums (Note [Lane sums] in row_reduce.h).
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/row_blocks.h"
#include "kernels/cpu/row_reduce.h"

namespace trident::kernels::cpu {
namespace {

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
  // Row blocks and their partial sums: Note [Deterministic parameter gradients] (row_blocks.h).
  const RowBlocks row_block = row_blocks(N);
  const int64_t block_rows = row_block.rows, blocks = row_block.count;
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
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE_LAYERNORM)
#undef TRI_INSTANTIATE_LAYERNORM

}  // namespace trident::kernels::cpu
