// RMSNorm kernels (see rmsnorm.h): rows are independent in the forward and in dx; dweight
// sums over rows block by block, as layernorm.cc does (Note [Deterministic parameter
// gradients] in row_blocks.h). Row sums are lane sums (Note [Lane sums] in row_reduce.h).
#include "kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/row_blocks.h"
#include "kernels/cpu/row_reduce.h"

namespace trident::kernels::cpu {
namespace {

template <bool kWeight, class T>
void forward_rows(T* out, acc_t<T>* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                  acc_t<T> eps) {
  using Acc = acc_t<T>;
  const Acc c = static_cast<Acc>(C);
  parallel_for(0, N, row_grain(C), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + r * C;
      auto square = [xr](int64_t j) {
        const Acc v = static_cast<Acc>(xr[j]);
        return v * v;
      };
      const Acc mean_square = lane_sum<Acc>(C, square) / c;
      const Acc s = Acc(1) / std::sqrt(mean_square + eps);
      T* yr = out + r * C;
      for (int64_t j = 0; j < C; ++j) {
        Acc y = static_cast<Acc>(xr[j]) * s;
        if constexpr (kWeight) y *= static_cast<Acc>(weight[j]);
        yr[j] = static_cast<T>(y);
      }
      rstd[r] = s;
    }
  });
}

template <bool kWeight, class T>
void backward_rows(T* dx, T* dweight, const T* dout, const T* x, const T* weight,
                   const acc_t<T>* rstd, int64_t N, int64_t C) {
  using Acc = acc_t<T>;
  const Acc c = static_cast<Acc>(C);
  if (N == 0) {  // no rows: the weight gradient is an empty sum
    if (dweight) std::fill(dweight, dweight + C, static_cast<T>(0.0));
    return;
  }
  // Row blocks and their partial sums: Note [Deterministic parameter gradients] (row_blocks.h).
  const RowBlocks row_block = row_blocks(N);
  const int64_t block_rows = row_block.rows, blocks = row_block.count;
  DataPtr scratch;
  double* partial_w = nullptr;
  if (dweight) {
    scratch = host_allocator().allocate(static_cast<size_t>(blocks * C) * sizeof(double));
    partial_w = static_cast<double*>(scratch.get());
  }

  parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t b = bb; b < be; ++b) {
      double* pw = partial_w ? partial_w + b * C : nullptr;
      if (pw) std::fill(pw, pw + C, 0.0);
      for (int64_t r = b * block_rows; r < std::min(N, (b + 1) * block_rows); ++r) {
        const T* xr = x + r * C;
        const T* gr = dout + r * C;
        const Acc s = rstd[r];
        auto norm = [xr, s](int64_t j) { return static_cast<Acc>(xr[j]) * s; };
        if (dx) {
          // dnorm = dout * weight;  dx = rstd * (dnorm - norm * mean(dnorm * norm))
          auto dnorm = [gr, weight](int64_t j) {
            Acc g = static_cast<Acc>(gr[j]);
            if constexpr (kWeight) g *= static_cast<Acc>(weight[j]);
            return g;
          };
          const Acc dnorm_norm_mean =
              lane_sum<Acc>(C, [&](int64_t j) { return dnorm(j) * norm(j); }) / c;
          T* dxr = dx + r * C;
          for (int64_t j = 0; j < C; ++j)
            dxr[j] = static_cast<T>(s * (dnorm(j) - norm(j) * dnorm_norm_mean));
        }
        if (pw)
          for (int64_t j = 0; j < C; ++j)
            pw[j] += static_cast<double>(static_cast<Acc>(gr[j]) * norm(j));
      }
    }
  });
  if (dweight) sum_blocks(dweight, partial_w, blocks, C);
}

}  // namespace

template <class T>
void rmsnorm_forward(T* out, acc_t<T>* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                     double eps) {
  const auto e = static_cast<acc_t<T>>(eps);
  if (weight)
    forward_rows<true>(out, rstd, x, weight, N, C, e);
  else
    forward_rows<false>(out, rstd, x, weight, N, C, e);
}

template <class T>
void rmsnorm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight,
                      const acc_t<T>* rstd, int64_t N, int64_t C) {
  if (weight)
    backward_rows<true>(dx, dweight, dout, x, weight, rstd, N, C);
  else
    backward_rows<false>(dx, dweight, dout, x, weight, rstd, N, C);
}

#define TRI_INSTANTIATE_RMSNORM(T)                                                               \
  template void rmsnorm_forward<T>(T*, acc_t<T>*, const T*, const T*, int64_t, int64_t, double); \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const acc_t<T>*,       \
                                    int64_t, int64_t);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE_RMSNORM)
#undef TRI_INSTANTIATE_RMSNORM

}  // namespace trident::kernels::cpu
