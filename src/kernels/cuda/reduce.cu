// Reductions on the GPU (reduce.cuh): the strided sum (kernels/cpu/reduce.h), softmax and
// log_softmax forward/backward (kernels/cpu/softmax.h), and the sum of squares behind the
// gradient norm. Every result is deterministic: each sum has one fixed order, chosen from the
// shape alone (never from the device, the timing or atomics).
//
// Who owns what:
//   - launch_sum: dims of size 1 are dropped and neighbouring dims that are contiguous with
//     each other merged, separately among the kept and the reduced dims. An output's reduced
//     range is cut into S splits (S from the shape: enough work items to fill the GPU, a
//     bounded number of them); a work item (output, split) is owned by
//       one thread, when the innermost kept dim is contiguous (adjacent threads take adjacent
//         outputs, so loads coalesce) or there are many outputs;
//       one warp otherwise (lanes take adjacent reduced elements, which coalesces when the
//         innermost reduced dim is contiguous, and a few outputs still fill the GPU).
//     S == 1 writes the output directly; otherwise the splits' double partials are added in
//     split order by one warp per output (a fixed shuffle tree). A matrix's column sums take
//     16-byte vectors of columns instead (Note [Column sums by vectors]).
//   - softmax, inner == 1: a row of n <= 1024 per warp (8 rows per block), a longer row per
//     block; three passes over the row (max, sum of exponentials, output) as on the CPU.
//     inner > 1: one thread per (outer, column) slice walking n with stride inner (adjacent
//     threads take adjacent columns: coalesced).
//   - sum of squares: a fixed grid (from n) of grid-strided double sums, one partial per block,
//     then one block adds the partials in a fixed order; the total is copied back.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/reduce.cuh"

namespace trident::cuda {
namespace {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;

template <class T>
__device__ __forceinline__ double to_double(T x) {
  return static_cast<double>(to_acc(x));
}
// double -> T the way the CPU rounds it (through acc_t: float for bf16/f16).
template <class T>
__device__ __forceinline__ T from_double(double x) {
  return from_acc<T>(static_cast<acc_t<T>>(x));
}

__device__ __forceinline__ float acc_exp(float x) { return expf(x); }
__device__ __forceinline__ double acc_exp(double x) { return exp(x); }
__device__ __forceinline__ float acc_log(float x) { return logf(x); }
__device__ __forceinline__ double acc_log(double x) { return log(x); }

// ---------------------------------------------------------------------------------------------
// Strided sum.

// The kept dims (in output order) and the reduced dims, size-1 dims dropped, contiguous
// neighbours merged.
struct SumGeom {
  int kd, rd;
  int64_t kshape[kMaxDims], kstr[kMaxDims];
  int64_t rshape[kMaxDims], rstr[kMaxDims];
};

// Offset of flat index idx (row-major over shape[0, nd)).
__device__ __forceinline__ int64_t offset_of(int64_t idx, int nd, const int64_t* shape, const int64_t* strides) {
  int64_t off = 0;
  for (int i = nd - 1; i >= 0; --i) {
    const int64_t q = idx / shape[i];
    off += (idx - q * shape[i]) * strides[i];
    idx = q;
  }
  return off;
}

// Sum over the reduced flat indices [rb, re) of `base` (an output's first element). The range
// is walked in runs along the innermost reduced dim, decoding the outer reduced index once per
// run; within a run this thread takes elements first, first + step, ... (a warp: lane, 32).
template <class T>
__device__ double sum_range(const T* base, const SumGeom& g, int64_t rb, int64_t re, int first, int step) {
  double s = 0.0;
  if (g.rd == 0) {  // nothing reduced: the range is the single element 0
    if (rb < re && first == 0) s = to_double(base[0]);
    return s;
  }
  const int last = g.rd - 1;
  const int64_t rin = g.rshape[last], rst = g.rstr[last];
  int64_t outer = rb / rin, inner = rb - outer * rin;
  for (int64_t r = rb; r < re;) {
    const T* p = base + offset_of(outer, last, g.rshape, g.rstr) + inner * rst;
    const int64_t run = (rin - inner) < (re - r) ? (rin - inner) : (re - r);
    for (int64_t k = first; k < run; k += step) s += to_double(p[k * rst]);
    r += run;
    inner = 0;
    ++outer;
  }
  return s;
}

// Item (o, split) -> its partial, or the output itself when there is one split.
template <class T>
__device__ __forceinline__ void store_item(T* out, double* partial, int64_t o, int64_t split, int64_t n_out,
                                           double s, double scale) {
  if (partial)
    partial[split * n_out + o] = s;
  else
    out[o] = from_double<T>(s * scale);
}

// One thread per item; item = split * n_out + o (adjacent threads, adjacent outputs).
template <class T>
__global__ void sum_thread_kernel(T* out, double* partial, const T* in, const SumGeom g, int64_t n_out,
                                  int64_t splits, int64_t chunk, int64_t n_red, double scale) {
  const int64_t items = n_out * splits;
  for (int64_t item = global_thread(); item < items; item += grid_threads()) {
    const int64_t split = item / n_out, o = item - split * n_out;
    const int64_t rb = split * chunk, re = rb + chunk < n_red ? rb + chunk : n_red;
    const double s = sum_range(in + offset_of(o, g.kd, g.kshape, g.kstr), g, rb, re, 0, 1);
    store_item(out, partial, o, split, n_out, s, scale);
  }
}

// One warp per item.
template <class T>
__global__ void sum_warp_kernel(T* out, double* partial, const T* in, const SumGeom g, int64_t n_out,
                                int64_t splits, int64_t chunk, int64_t n_red, double scale) {
  const int lane = threadIdx.x & 31;
  const int64_t items = n_out * splits;
  const int64_t warps = grid_threads() >> 5;
  // The loop condition is the same for the whole warp: warp_sum's full mask is safe.
  for (int64_t item = global_thread() >> 5; item < items; item += warps) {
    const int64_t split = item / n_out, o = item - split * n_out;
    const int64_t rb = split * chunk, re = rb + chunk < n_red ? rb + chunk : n_red;
    const double s = warp_sum(sum_range(in + offset_of(o, g.kd, g.kshape, g.kstr), g, rb, re, lane, 32));
    if (lane == 0) store_item(out, partial, o, split, n_out, s, scale);
  }
}

// Note [Column sums by vectors]
// A matrix's column sums (in (R, n_out) with rows ld apart, summed over R: every bias
// gradient) with one thread per output read 2 bytes per row per thread: GPT-2 124M's 48 bias
// gradients took 1.96 ms of an H200's step with the splits' pass (1.20 ms this way). Here a
// block of 32 x 8 threads owns 32 vectors of kVec<T> adjacent columns and one chunk of rows:
// thread (x, y) adds rows y, y + 8, ... of the chunk for its vector's columns (16-byte loads; a
// warp reads 512 contiguous bytes of a bf16 row), then the block adds its 8 row groups in
// order. The order depends on the shape alone, as every sum here.
constexpr int kColumnVecs = 32, kColumnRowGroups = 8;

template <class T>
__global__ void __launch_bounds__(kColumnVecs* kColumnRowGroups)
    sum_columns_vector_kernel(T* out, double* partial, const T* in, int64_t n_out, int64_t ld, int64_t n_red,
                              int64_t chunk, double scale) {
  constexpr int V = kVec<T>;
  __shared__ double acc[kColumnRowGroups][V][kColumnVecs];
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kColumnVecs + threadIdx.x) * V;
  const int64_t split = blockIdx.y;
  const int64_t rb = split * chunk, re = rb + chunk < n_red ? rb + chunk : n_red;
  double s[V];
#pragma unroll
  for (int j = 0; j < V; ++j) s[j] = 0.0;
  if (col < n_out) {
#pragma unroll 4
    for (int64_t r = rb + threadIdx.y; r < re; r += kColumnRowGroups) {
      const uint4 u = *reinterpret_cast<const uint4*>(in + r * ld + col);
      const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int j = 0; j < V; ++j) s[j] += to_double(e[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) acc[threadIdx.y][j][threadIdx.x] = s[j];
  __syncthreads();
  if (threadIdx.y != 0 || col >= n_out) return;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    double t = 0.0;
#pragma unroll
    for (int y = 0; y < kColumnRowGroups; ++y) t += acc[y][j][threadIdx.x];
    store_item(out, partial, col + j, split, n_out, t, scale);
  }
}

// One warp per output: the splits' partials added in a fixed order.
template <class T>
__global__ void sum_splits_kernel(T* out, const double* partial, int64_t n_out, int64_t splits, double scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = grid_threads() >> 5;
  for (int64_t o = global_thread() >> 5; o < n_out; o += warps) {
    double s = 0.0;
    for (int64_t k = lane; k < splits; k += 32) s += partial[k * n_out + o];
    s = warp_sum(s);
    if (lane == 0) out[o] = from_double<T>(s * scale);
  }
}

template <class T>
__global__ void zero_kernel(T* out, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = from_acc<T>(acc_t<T>(0));
}

// A reduction of n_red elements per output cut into about `wanted` splits of at least
// min_chunk elements, at most 8192 (the second pass gives each output one warp: at most 256
// partials per lane), none empty.
struct Splits {
  int64_t count, chunk;
};
Splits split_reduction(int64_t wanted, int64_t n_red, int64_t min_chunk) {
  int64_t splits = wanted;
  const int64_t max_splits = (n_red + min_chunk - 1) / min_chunk;
  if (splits > max_splits) splits = max_splits;
  if (splits > 8192) splits = 8192;
  if (splits < 1) splits = 1;
  const int64_t chunk = (n_red + splits - 1) / splits;
  return {(n_red + chunk - 1) / chunk, chunk};
}

// Appends (size, stride) to a dim list, merging it into the previous dim when the two are
// contiguous with each other (prev stride == size * stride): the flat order is unchanged.
void push_dim(int64_t* shape, int64_t* strides, int& nd, int64_t size, int64_t stride) {
  if (nd > 0 && strides[nd - 1] == size * stride) {
    shape[nd - 1] *= size;
    strides[nd - 1] = stride;
    return;
  }
  shape[nd] = size;
  strides[nd] = stride;
  ++nd;
}

// ---------------------------------------------------------------------------------------------
// Softmax.


// The max skips NaN (v > m is false), as lane_max does on the CPU: a NaN entry still makes the
// row NaN through the sum of exponentials, and so do a max of +inf (exp(inf - inf)) and a row
// of only -inf (exp(-inf + inf)). -inf entries next to finite ones give exp(-inf) = 0.
template <bool kWarp, bool kLog, class T>
__global__ void softmax_rows_forward_kernel(T* y, const T* x, int64_t rows, int64_t n) {
  using A = acc_t<T>;
  using G = RowGroup<kWarp>;
  __shared__ A scratch[32];
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t i = G::lane(); i < n; i += G::size()) {
      const A v = to_acc(xr[i]);
      m = v > m ? v : m;
    }
    m = G::max(m, scratch);
    A s = 0;
    for (int64_t i = G::lane(); i < n; i += G::size()) s += acc_exp(to_acc(xr[i]) - m);
    s = G::sum(s, scratch);
    if constexpr (kLog) {
      const A log_s = acc_log(s);
      for (int64_t i = G::lane(); i < n; i += G::size()) yr[i] = from_acc<T>((to_acc(xr[i]) - m) - log_s);
    } else {
      const A inv_s = A(1) / s;
      for (int64_t i = G::lane(); i < n; i += G::size()) yr[i] = from_acc<T>(acc_exp(to_acc(xr[i]) - m) * inv_s);
    }
  }
}

//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - exp(y) * sum(dy)
template <bool kWarp, bool kLog, class T>
__global__ void softmax_rows_backward_kernel(T* dx, const T* dy, const T* y, int64_t rows, int64_t n) {
  using A = acc_t<T>;
  using G = RowGroup<kWarp>;
  __shared__ A scratch[32];
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* gr = dy + r * n;
    const T* yr = y + r * n;
    T* dr = dx + r * n;
    A s = 0;
    for (int64_t i = G::lane(); i < n; i += G::size())
      s += kLog ? to_acc(gr[i]) : to_acc(gr[i]) * to_acc(yr[i]);
    s = G::sum(s, scratch);
    for (int64_t i = G::lane(); i < n; i += G::size()) {
      const A g = to_acc(gr[i]), v = to_acc(yr[i]);
      dr[i] = from_acc<T>(kLog ? g - acc_exp(v) * s : v * (g - s));
    }
  }
}

// inner > 1: thread per slice (o, j); its elements are base + k * inner.
template <bool kLog, class T>
__global__ void softmax_columns_forward_kernel(T* y, const T* x, int64_t outer, int64_t n, int64_t inner) {
  using A = acc_t<T>;
  const int64_t slices = outer * inner;
  for (int64_t w = global_thread(); w < slices; w += grid_threads()) {
    const int64_t o = w / inner, j = w - o * inner;
    const T* xb = x + o * n * inner + j;
    T* yb = y + o * n * inner + j;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t k = 0; k < n; ++k) {
      const A v = to_acc(xb[k * inner]);
      m = v > m ? v : m;
    }
    A s = 0;
    for (int64_t k = 0; k < n; ++k) s += acc_exp(to_acc(xb[k * inner]) - m);
    if constexpr (kLog) {
      const A log_s = acc_log(s);
      for (int64_t k = 0; k < n; ++k) yb[k * inner] = from_acc<T>((to_acc(xb[k * inner]) - m) - log_s);
    } else {
      const A inv_s = A(1) / s;
      for (int64_t k = 0; k < n; ++k) yb[k * inner] = from_acc<T>(acc_exp(to_acc(xb[k * inner]) - m) * inv_s);
    }
  }
}

template <bool kLog, class T>
__global__ void softmax_columns_backward_kernel(T* dx, const T* dy, const T* y, int64_t outer, int64_t n,
                                                int64_t inner) {
  using A = acc_t<T>;
  const int64_t slices = outer * inner;
  for (int64_t w = global_thread(); w < slices; w += grid_threads()) {
    const int64_t o = w / inner, j = w - o * inner;
    const int64_t base = o * n * inner + j;
    const T* gb = dy + base;
    const T* yb = y + base;
    T* db = dx + base;
    A s = 0;
    for (int64_t k = 0; k < n; ++k)
      s += kLog ? to_acc(gb[k * inner]) : to_acc(gb[k * inner]) * to_acc(yb[k * inner]);
    for (int64_t k = 0; k < n; ++k) {
      const A g = to_acc(gb[k * inner]), v = to_acc(yb[k * inner]);
      db[k * inner] = from_acc<T>(kLog ? g - acc_exp(v) * s : v * (g - s));
    }
  }
}

int softmax_block_threads(int64_t n) { return n <= 4096 ? 256 : 512; }

// ---------------------------------------------------------------------------------------------
// Sum of squares.

template <class T>
__global__ void sum_of_squares_kernel(double* partial, const T* x, int64_t n) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const double v = to_double(x[i]);
    s += v * v;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block: total = the partials added in a fixed order.
__global__ void sum_partials_kernel(double* total, const double* partial, int64_t n) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) total[0] = s;
}

}  // namespace

void launch_sum(int dtype, void* out, const void* in, const int64_t* shape, const int64_t* strides,
                const bool* reduce_dim, int ndim, double scale) {
  SumGeom g{};
  int64_t n_out = 1, n_red = 1;
  for (int i = 0; i < ndim; ++i) {
    if (reduce_dim[i])
      n_red *= shape[i];
    else
      n_out *= shape[i];
  }
  if (n_out == 0) return;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 1) continue;  // size-1 dims change nothing
    if (reduce_dim[i])
      push_dim(g.rshape, g.rstr, g.rd, shape[i], strides[i]);
    else
      push_dim(g.kshape, g.kstr, g.kd, shape[i], strides[i]);
  }
  dispatch_floating(dtype, "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    if (n_red == 0) {  // empty sums: exactly 0, whatever the scale
      zero_kernel<T><<<grid_for(n_out, kThreads), kThreads>>>(o, n_out);
      return;
    }
    // launch(partial): with several splits each (split, output) writes a double partial, which
    // the second pass adds in split order; with one, partial is null and the outputs are written.
    auto with_partials = [&](int64_t splits, auto&& launch) {
      double* partial = nullptr;
      if (splits > 1) {
        void* p = nullptr;
        if (scratch_malloc(&p, static_cast<size_t>(splits * n_out) * sizeof(double)) != cudaSuccess)
          return;  // the error stays for the caller's cudaGetLastError
        partial = static_cast<double*>(p);
      }
      launch(partial);
      if (partial) {
        sum_splits_kernel<T><<<grid_for(n_out, kThreads / 32), kThreads>>>(o, partial, n_out, splits, scale);
        scratch_free(partial);
      }
    };
    // Column sums of a matrix whose rows hold whole aligned vectors (Note [Column sums by
    // vectors]): splits give about 2048 blocks, at least 64 rows each.
    if (g.kd == 1 && g.kstr[0] == 1 && g.rd == 1 && n_out % kVec<T> == 0 && g.rstr[0] % kVec<T> == 0 &&
        aligned16(x)) {
      const int64_t col_blocks = (n_out / kVec<T> + kColumnVecs - 1) / kColumnVecs;
      const Splits sp = split_reduction((2048 + col_blocks - 1) / col_blocks, n_red, 64);
      with_partials(sp.count, [&](double* partial) {
        const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(sp.count));
        sum_columns_vector_kernel<T><<<grid, dim3(kColumnVecs, kColumnRowGroups)>>>(o, partial, x, n_out, g.rstr[0],
                                                                                  n_red, sp.chunk, scale);
      });
      return;
    }
    const bool kept_contiguous = g.kd > 0 && g.kstr[g.kd - 1] == 1;
    const bool reduced_contiguous = g.rd > 0 && g.rstr[g.rd - 1] == 1;
    const bool per_thread = (kept_contiguous && n_out >= 32) || (!reduced_contiguous && n_out >= 4096);
    // Splits: enough items to fill the GPU (per thread: 2^18 threads, at least 32 elements
    // each; per warp: 2^13 warps, at least 256 elements each).
    const int64_t target = per_thread ? (int64_t{1} << 18) : (int64_t{1} << 13);
    const Splits sp = split_reduction((target + n_out - 1) / n_out, n_red, per_thread ? 32 : 256);
    with_partials(sp.count, [&](double* partial) {
      const int64_t items = n_out * sp.count;
      if (per_thread)
        sum_thread_kernel<T><<<grid_for(items, kThreads), kThreads>>>(o, partial, x, g, n_out, sp.count, sp.chunk,
                                                                     n_red, scale);
      else
        sum_warp_kernel<T><<<grid_for(items, kThreads / 32), kThreads>>>(o, partial, x, g, n_out, sp.count, sp.chunk,
                                                                        n_red, scale);
    });
  });
}

void launch_softmax_forward(bool log, int dtype, void* y, const void* x, int64_t outer, int64_t n, int64_t inner) {
  if (outer == 0 || n == 0 || inner == 0) return;
  dispatch_floating(dtype, "softmax_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* yp = static_cast<T*>(y);
    const T* xp = static_cast<const T*>(x);
    auto launch = [&](auto log_tag) {
      constexpr bool kLog = decltype(log_tag)::value;
      if (inner > 1)
        softmax_columns_forward_kernel<kLog, T>
            <<<grid_for(outer * inner, kThreads), kThreads>>>(yp, xp, outer, n, inner);
      else if (n <= 1024)
        softmax_rows_forward_kernel<true, kLog, T><<<grid_for(outer, kThreads / 32), kThreads>>>(yp, xp, outer, n);
      else
        softmax_rows_forward_kernel<false, kLog, T><<<grid_for(outer, 1), softmax_block_threads(n)>>>(yp, xp, outer, n);
    };
    if (log)
      launch(std::true_type{});
    else
      launch(std::false_type{});
  });
}

void launch_softmax_backward(bool log, int dtype, void* dx, const void* dy, const void* y, int64_t outer, int64_t n,
                             int64_t inner) {
  if (outer == 0 || n == 0 || inner == 0) return;
  dispatch_floating(dtype, "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dxp = static_cast<T*>(dx);
    const T* dyp = static_cast<const T*>(dy);
    const T* yp = static_cast<const T*>(y);
    auto launch = [&](auto log_tag) {
      constexpr bool kLog = decltype(log_tag)::value;
      if (inner > 1)
        softmax_columns_backward_kernel<kLog, T>
            <<<grid_for(outer * inner, kThreads), kThreads>>>(dxp, dyp, yp, outer, n, inner);
      else if (n <= 1024)
        softmax_rows_backward_kernel<true, kLog, T>
            <<<grid_for(outer, kThreads / 32), kThreads>>>(dxp, dyp, yp, outer, n);
      else
        softmax_rows_backward_kernel<false, kLog, T>
            <<<grid_for(outer, 1), softmax_block_threads(n)>>>(dxp, dyp, yp, outer, n);
    };
    if (log)
      launch(std::true_type{});
    else
      launch(std::false_type{});
  });
}

double launch_sum_of_squares(int dtype, const void* x, int64_t n) {
  if (n <= 0) return 0.0;
  // Blocks from n alone (about 16 elements per thread, at most 1024 blocks): a fixed order.
  int64_t blocks = (n + kThreads * 16 - 1) / (kThreads * 16);
  if (blocks > 1024) blocks = 1024;
  void* p = nullptr;
  if (scratch_malloc(&p, static_cast<size_t>(blocks + 1) * sizeof(double)) != cudaSuccess)
    return std::numeric_limits<double>::quiet_NaN();  // the error stays for cudaGetLastError
  double* total = static_cast<double*>(p);
  double* partial = total + 1;
  dispatch_floating(dtype, "sum_of_squares", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_of_squares_kernel<T><<<static_cast<unsigned>(blocks), kThreads>>>(partial, static_cast<const T*>(x), n);
  });
  const double result = sum_partials_to_host(total, partial, blocks);
  scratch_free(p);
  return result;
}

double sum_partials_to_host(double* total, const double* partial, int64_t n) {
  sum_partials_kernel<<<1, 1024>>>(total, partial, n);
  double result = std::numeric_limits<double>::quiet_NaN();
  // cudaMemcpy waits for the kernels before it (default stream).
  if (cudaMemcpy(&result, total, sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess)
    result = std::numeric_limits<double>::quiet_NaN();
  return result;
}

}  // namespace trident::cuda
