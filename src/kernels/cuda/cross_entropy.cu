// Cross-entropy fused with log-softmax on the GPU (cross_entropy.cuh), with the math of
// kernels/cpu/cross_entropy.cc: logsumexp in acc_t<T>, row losses summed in double.
//
// Who owns what: one block per row (rows grid-strided), since V is large (50k-150k): each
// thread walks the row with a block-wide stride in 16-byte vector loads (after a scalar head
// up to the first 16-byte boundary, and a scalar tail), keeping its own online max and sum of
// exponentials, which the block then combines (block_max, then the sums rescaled to the
// block's max, block_sum). The forward reads the row once.
// The loss: each row writes its loss (0 when ignored) to a double scratch array; one block of
// 1024 threads then adds them in a fixed order (deterministic) and the total is copied back.
// The backward computes each element's gradient in the thread that read it, target included,
// so dlogits may be logits (every element is read before it is written, by its writer).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cuda/cross_entropy.cuh"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/reduce.cuh"

namespace trident::cuda {
namespace {


int row_threads(int64_t V) { return V <= 1024 ? 128 : (V <= 16384 ? 256 : 512); }

__device__ __forceinline__ float acc_exp(float x) { return expf(x); }
__device__ __forceinline__ double acc_exp(double x) { return exp(x); }
__device__ __forceinline__ float acc_log(float x) { return logf(x); }
__device__ __forceinline__ double acc_log(double x) { return log(x); }

// The scalar head before the first 16-byte boundary of p (the whole row when the head would
// pass n).
template <class T>
__device__ __forceinline__ int64_t vec_head(const T* p, int64_t n) {
  const int64_t head = static_cast<int64_t>(((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15) / sizeof(T));
  return head < n ? head : n;
}

// f(j, value) for every element j of row[0, n) this thread owns (block-wide stride).
template <class T, class F>
__device__ __forceinline__ void for_each_in_row(const T* row, int64_t n, F&& f) {
  const int64_t head = vec_head(row, n);
  for (int64_t j = threadIdx.x; j < head; j += blockDim.x) f(j, to_acc(row[j]));
  const int64_t nvec = (n - head) / kVec<T>;
  const uint4* vrow = reinterpret_cast<const uint4*>(row + head);
  for (int64_t k = threadIdx.x; k < nvec; k += blockDim.x) {
    uint4 u = vrow[k];
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int q = 0; q < kVec<T>; ++q) f(head + k * kVec<T> + q, to_acc(e[q]));
  }
  for (int64_t j = head + nvec * kVec<T> + threadIdx.x; j < n; j += blockDim.x) f(j, to_acc(row[j]));
}

// out[j] = f(j, in[j]) for this thread's elements; vectorized when in and out are equally
// aligned (always so in place). Each element is read and written by the same thread.
template <class T, class F>
__device__ __forceinline__ void map_row(T* out, const T* in, int64_t n, F&& f) {
  const bool coaligned = ((reinterpret_cast<uintptr_t>(in) ^ reinterpret_cast<uintptr_t>(out)) & 15) == 0;
  const int64_t head = coaligned ? vec_head(in, n) : n;
  for (int64_t j = threadIdx.x; j < head; j += blockDim.x) out[j] = from_acc<T>(f(j, to_acc(in[j])));
  if (!coaligned) return;
  const int64_t nvec = (n - head) / kVec<T>;
  const uint4* vin = reinterpret_cast<const uint4*>(in + head);
  uint4* vout = reinterpret_cast<uint4*>(out + head);
  for (int64_t k = threadIdx.x; k < nvec; k += blockDim.x) {
    uint4 u = vin[k];
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int q = 0; q < kVec<T>; ++q) e[q] = from_acc<T>(f(head + k * kVec<T> + q, to_acc(e[q])));
    vout[k] = u;
  }
  for (int64_t j = head + nvec * kVec<T> + threadIdx.x; j < n; j += blockDim.x)
    out[j] = from_acc<T>(f(j, to_acc(in[j])));
}

template <class T, class I>
__global__ void cross_entropy_forward_kernel(acc_t<T>* logsumexp, double* row_loss, const T* logits,
                                             const I* targets, int64_t N, int64_t V, int64_t ld,
                                             int64_t ignore_index) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]);
    if (target == ignore_index) {  // the same for the whole block: no barrier is skipped by part of it
      if (threadIdx.x == 0) {
        logsumexp[r] = A(0);
        row_loss[r] = 0.0;
      }
      continue;
    }
    const T* row = logits + r * ld;
    // Online max / sum of exp(v - max). -inf entries (masked logits) are skipped: exp(-inf - m)
    // is 0 for any finite m, and skipping them keeps a thread whose entries are all -inf from
    // forming exp(-inf - -inf) = NaN. NaN and +inf entries still make the row NaN, as on the CPU.
    A m = kNegInf, s = A(0);
    for_each_in_row(row, V, [&](int64_t, A v) {
      if (v == kNegInf) return;
      if (v > m) {
        s *= acc_exp(m - v);
        m = v;
      }
      s += acc_exp(v - m);
    });
    const A row_max = block_max(m, scratch);
    // A thread with no terms (s == 0, m == -inf) adds nothing, even when row_max is -inf too.
    const A row_sum = block_sum(s == A(0) ? A(0) : s * acc_exp(m - row_max), scratch);
    if (threadIdx.x == 0) {
      const A lse = row_max + acc_log(row_sum);
      logsumexp[r] = lse;
      row_loss[r] = static_cast<double>(lse - to_acc(row[target]));
    }
  }
}

// One block: total[0] = the n row losses added in a fixed order (per-thread strided sums,
// then the block's fixed tree).
template <class T, class I>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const acc_t<T>* logsumexp,
                                              const I* targets, int64_t N, int64_t V, int64_t ld,
                                              int64_t ignore_index, acc_t<T> scale) {
  using A = acc_t<T>;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    T* d = dlogits + r * ld;
    const int64_t target = static_cast<int64_t>(targets[r]);
    if (target == ignore_index) {
      const T zero = from_acc<T>(A(0));
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x) d[j] = zero;
      continue;
    }
    const A lse = logsumexp[r];
    // The target's entry is formed from its own logit in the same pass (not corrected after),
    // so it is rounded once and no thread reads an entry another thread may have written.
    map_row(d, logits + r * ld, V, [&](int64_t j, A v) {
      const A p = acc_exp(v - lse);
      return (j == target ? p - A(1) : p) * scale;
    });
  }
}

}  // namespace

double launch_cross_entropy_forward(int dtype, int index_dtype, void* logsumexp, const void* logits,
                                    const void* targets, int64_t N, int64_t V, int64_t ld, int64_t ignore_index) {
  if (N == 0) return 0.0;
  // Scratch: the total, then N row losses.
  void* p = nullptr;
  if (scratch_malloc(&p, static_cast<size_t>(N + 1) * sizeof(double)) != cudaSuccess)
    return std::numeric_limits<double>::quiet_NaN();  // the error stays for cudaGetLastError
  double* total = static_cast<double*>(p);
  double* row_loss = total + 1;
  dispatch_floating(dtype, "cross_entropy_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(index_dtype, "cross_entropy_forward", [&](auto itag) {
      using I = typename decltype(itag)::type;
      cross_entropy_forward_kernel<T, I><<<grid_for(N, 1), row_threads(V)>>>(
          static_cast<acc_t<T>*>(logsumexp), row_loss, static_cast<const T*>(logits),
          static_cast<const I*>(targets), N, V, ld, ignore_index);
    });
  });
  const double result = sum_partials_to_host(total, row_loss, N);
  scratch_free(p);
  return result;
}

void launch_cross_entropy_backward(int dtype, int index_dtype, void* dlogits, const void* logits,
                                   const void* logsumexp, const void* targets, int64_t N, int64_t V, int64_t ld,
                                   int64_t ignore_index, double scale) {
  if (N == 0 || V == 0) return;
  dispatch_floating(dtype, "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    dispatch_index(index_dtype, "cross_entropy_backward", [&](auto itag) {
      using I = typename decltype(itag)::type;
      cross_entropy_backward_kernel<T, I><<<grid_for(N, 1), row_threads(V)>>>(
          static_cast<T*>(dlogits), static_cast<const T*>(logits), static_cast<const A*>(logsumexp),
          static_cast<const I*>(targets), N, V, ld, ignore_index, static_cast<A>(scale));
    });
  });
}

}  // namespace trident::cuda
