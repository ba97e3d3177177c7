// LayerNorm and RMSNorm on the GPU (norm.cuh), with the math of kernels/cpu/layernorm.cc and
// rmsnorm.cc: biased variance, rstd = 1 / sqrt(var + eps), row sums in acc_t<T>, one rounding
// on store.
//
// Who owns what:
//   - forward and dx: rows are independent. A row of C <= 1024 belongs to one warp (8 rows per
//     256-thread block): the warp reduces with shuffles alone, and short rows do not leave
//     most of a block idle. A longer row belongs to a whole block (block_sum). Rows are
//     grid-strided, so any N fits a bounded grid.
//   - dweight / dbias: sums over rows, made deterministic without atomics (the GPU version of
//     Note [Deterministic parameter gradients] in kernels/cpu/row_blocks.h): pass 1 gives
//     each thread one column of one fixed chunk of rows, adding the chunk's rows in order
//     into a double partial (coalesced: adjacent threads read adjacent columns); pass 2 gives
//     each thread one column and adds the chunks' partials in chunk order. The chunking
//     depends on N only, so the bits do not depend on the launch.
// The parameter-gradient passes run before dx, so dx may alias dout or x.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/norm.cuh"

namespace trident::cuda {
namespace {

constexpr int kWarpRowThreads = 256;  // warp-per-row blocks: 8 rows each
constexpr int kMaxWarpRowC = 1024;    // longer rows get a block each
constexpr int64_t kMaxChunks = 512;   // row chunks of the parameter-gradient partials
constexpr int64_t kMinChunkRows = 4;
constexpr int kColumnThreads = 256;

// Threads of a block owning one long row: enough to keep each thread's share of the row short.
int block_row_threads(int64_t C) { return C <= 4096 ? 256 : 512; }

__device__ __forceinline__ float acc_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double acc_sqrt(double x) { return sqrt(x); }

// double -> T the way the CPU rounds it (through acc_t: float for bf16/f16).
template <class T>
__device__ __forceinline__ T from_double(double x) {
  return from_acc<T>(static_cast<acc_t<T>>(x));
}

template <bool kWarp, class T>
__global__ void layernorm_forward_kernel(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* x, const T* weight,
                                         const T* bias, int64_t N, int64_t C, acc_t<T> eps) {
  using A = acc_t<T>;
  using G = RowGroup<kWarp>;
  __shared__ A scratch[32];
  const A c = static_cast<A>(C);
  for (int64_t r = G::first_row(); r < N; r += G::row_stride()) {
    const T* xr = x + r * C;
    // Two passes (mean, then squared deviations) as on the CPU: no cancellation in E[x^2]-m^2.
    A s = 0;
    for (int64_t j = G::lane(); j < C; j += G::size()) s += to_acc(xr[j]);
    const A m = G::sum(s, scratch) / c;
    A q = 0;
    for (int64_t j = G::lane(); j < C; j += G::size()) {
      const A d = to_acc(xr[j]) - m;
      q += d * d;
    }
    const A var = G::sum(q, scratch) / c;
    const A rs = A(1) / acc_sqrt(var + eps);
    // Each element is read and written by the same thread after the sums: out may be x.
    T* yr = out + r * C;
    for (int64_t j = G::lane(); j < C; j += G::size()) {
      A y = (to_acc(xr[j]) - m) * rs;
      if (weight) y *= to_acc(weight[j]);
      if (bias) y += to_acc(bias[j]);
      yr[j] = from_acc<T>(y);
    }
    if (G::lane() == 0) {
      if (mean) mean[r] = m;
      if (rstd) rstd[r] = rs;
    }
  }
}

template <bool kWarp, class T>
__global__ void rmsnorm_forward_kernel(T* out, acc_t<T>* rstd, const T* x, const T* weight, int64_t N, int64_t C,
                                       acc_t<T> eps) {
  using A = acc_t<T>;
  using G = RowGroup<kWarp>;
  __shared__ A scratch[32];
  const A c = static_cast<A>(C);
  for (int64_t r = G::first_row(); r < N; r += G::row_stride()) {
    const T* xr = x + r * C;
    A q = 0;
    for (int64_t j = G::lane(); j < C; j += G::size()) {
      const A v = to_acc(xr[j]);
      q += v * v;
    }
    const A rs = A(1) / acc_sqrt(G::sum(q, scratch) / c + eps);
    T* yr = out + r * C;
    for (int64_t j = G::lane(); j < C; j += G::size()) {
      A y = to_acc(xr[j]) * rs;
      if (weight) y *= to_acc(weight[j]);
      yr[j] = from_acc<T>(y);
    }
    if (G::lane() == 0 && rstd) rstd[r] = rs;
  }
}

// dx of one row; kLayer: LayerNorm (mean subtracted, the dnorm mean term), else RMSNorm.
//   LayerNorm: dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
//   RMSNorm:   dx = rstd * (dnorm - norm * mean(dnorm * norm))
// with dnorm = dout * weight and norm = (x - mean) * rstd (x * rstd for RMSNorm).
template <bool kWarp, bool kLayer, class T>
__global__ void norm_dx_kernel(T* dx, const T* dout, const T* x, const T* weight, const acc_t<T>* mean,
                               const acc_t<T>* rstd, int64_t N, int64_t C) {
  using A = acc_t<T>;
  using G = RowGroup<kWarp>;
  __shared__ A scratch[32];
  const A c = static_cast<A>(C);
  for (int64_t r = G::first_row(); r < N; r += G::row_stride()) {
    const T* xr = x + r * C;
    const T* gr = dout + r * C;
    const A m = kLayer ? mean[r] : A(0), s = rstd[r];
    A dsum = 0, dnsum = 0;
    for (int64_t j = G::lane(); j < C; j += G::size()) {
      A g = to_acc(gr[j]);
      if (weight) g *= to_acc(weight[j]);
      const A nrm = kLayer ? (to_acc(xr[j]) - m) * s : to_acc(xr[j]) * s;
      if constexpr (kLayer) dsum += g;
      dnsum += g * nrm;
    }
    A dnorm_mean = 0;
    if constexpr (kLayer) dnorm_mean = G::sum(dsum, scratch) / c;
    const A dnorm_norm_mean = G::sum(dnsum, scratch) / c;
    // Same thread reads then writes each element, after the sums: dx may be dout or x.
    T* dxr = dx + r * C;
    for (int64_t j = G::lane(); j < C; j += G::size()) {
      A g = to_acc(gr[j]);
      if (weight) g *= to_acc(weight[j]);
      const A nrm = kLayer ? (to_acc(xr[j]) - m) * s : to_acc(xr[j]) * s;
      if constexpr (kLayer)
        dxr[j] = from_acc<T>(s * (g - dnorm_mean - nrm * dnorm_norm_mean));
      else
        dxr[j] = from_acc<T>(s * (g - nrm * dnorm_norm_mean));
    }
  }
}

// Note [Norm rows in registers]
// Rows of C = 32 * kVec<T> * VPL elements (bf16/f16: 256, 512, ... 2048; f32 half those) with
// 16-byte aligned operands: a warp owns a row, each lane holds VPL 16-byte vectors of it in
// registers (loaded once, 512 bytes per warp access), so the statistics' passes and the output
// read the row from memory once. The math is the scalar kernels', summed in another order.
// v[i * V + j] = row[(32 i + lane) V + j]: the column of register element e is col_of(e).
template <class T, int VPL>
__device__ __forceinline__ void load_row(float (&v)[VPL * kVec<T>], const T* row) {
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    const uint4 raw = reinterpret_cast<const uint4*>(row)[i * 32 + lane];
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int j = 0; j < V; ++j) v[i * V + j] = to_acc(e[j]);
  }
}
template <class T, int VPL>
__device__ __forceinline__ void store_row(T* row, const float (&v)[VPL * kVec<T>]) {
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < V; ++j) e[j] = from_acc<T>(v[i * V + j]);
    reinterpret_cast<uint4*>(row)[i * 32 + lane] = raw;
  }
}

// LayerNorm (kLayer) or RMSNorm forward of register rows.
template <bool kLayer, class T, int VPL>
__global__ void norm_forward_vec_kernel(T* out, float* mean, float* rstd, const T* x, const T* weight,
                                        const T* bias, int64_t N, float eps) {
  constexpr int E = VPL * kVec<T>;
  constexpr int64_t C = 32 * E;
  float w[E], b[E];
  if (weight) load_row<T, VPL>(w, weight);
  if (bias) load_row<T, VPL>(b, bias);
  for (int64_t r = RowGroup<true>::first_row(); r < N; r += RowGroup<true>::row_stride()) {
    float v[E];
    load_row<T, VPL>(v, x + r * C);
    float m = 0.f;
    if constexpr (kLayer) {
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < E; ++e) s += v[e];
      m = warp_sum(s) / static_cast<float>(C);
    }
    float q = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float d = v[e] - m;
      q += d * d;
    }
    const float rs = 1.f / sqrtf(warp_sum(q) / static_cast<float>(C) + eps);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      float y = (v[e] - m) * rs;
      if (weight) y *= w[e];
      if (bias) y += b[e];
      v[e] = y;
    }
    store_row<T, VPL>(out + r * C, v);
    if ((threadIdx.x & 31) == 0) {
      if (kLayer && mean) mean[r] = m;
      if (rstd) rstd[r] = rs;
    }
  }
}

// dx of register rows (the formulas of norm_dx_kernel).
template <bool kLayer, class T, int VPL>
__global__ void norm_dx_vec_kernel(T* dx, const T* dout, const T* x, const T* weight, const float* mean,
                                   const float* rstd, int64_t N) {
  constexpr int E = VPL * kVec<T>;
  constexpr int64_t C = 32 * E;
  float w[E];
  if (weight) load_row<T, VPL>(w, weight);
  for (int64_t r = RowGroup<true>::first_row(); r < N; r += RowGroup<true>::row_stride()) {
    float xv[E], g[E];
    load_row<T, VPL>(xv, x + r * C);
    load_row<T, VPL>(g, dout + r * C);
    const float m = kLayer ? mean[r] : 0.f, s = rstd[r];
    float dsum = 0.f, dnsum = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (weight) g[e] *= w[e];
      xv[e] = (xv[e] - m) * s;  // the normalized row
      dsum += g[e];
      dnsum += g[e] * xv[e];
    }
    const float dnorm_mean = kLayer ? warp_sum(dsum) / static_cast<float>(C) : 0.f;
    const float dnorm_norm_mean = warp_sum(dnsum) / static_cast<float>(C);
#pragma unroll
    for (int e = 0; e < E; ++e) g[e] = s * (g[e] - dnorm_mean - xv[e] * dnorm_norm_mean);
    store_row<T, VPL>(dx + r * C, g);
  }
}

// Calls fn(integral_constant<VPL>) when rows of C elements of T qualify for the register
// kernels and every pointer given is 16-byte aligned (null ones are not used); else false.
template <class T, class Fn>
bool dispatch_register_rows(int64_t C, std::initializer_list<const void*> pointers, Fn&& fn) {
  if constexpr (std::is_same<acc_t<T>, float>::value) {
    if (C <= 0 || C % (32 * kVec<T>) != 0) return false;
    for (const void* p : pointers)
      if (p && !aligned16(p)) return false;
    switch (C / (32 * kVec<T>)) {
      case 1: fn(std::integral_constant<int, 1>{}); return true;
      case 2: fn(std::integral_constant<int, 2>{}); return true;
      case 3: fn(std::integral_constant<int, 3>{}); return true;
      case 4: fn(std::integral_constant<int, 4>{}); return true;
      case 6: fn(std::integral_constant<int, 6>{}); return true;
      case 8: fn(std::integral_constant<int, 8>{}); return true;
      default: return false;
    }
  } else {
    return false;
  }
}

// Pass 1 of the parameter gradients: thread (column j, chunk blockIdx.y) adds the chunk's rows
// in order: pw += dout * norm (product in acc_t, as on the CPU), pb += dout. Either may be null.
template <bool kLayer, class T>
__global__ void norm_param_partials_kernel(double* pw, double* pb, const T* dout, const T* x,
                                           const acc_t<T>* mean, const acc_t<T>* rstd, int64_t N, int64_t C,
                                           int64_t chunk_rows) {
  using A = acc_t<T>;
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= C) return;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < N ? r0 + chunk_rows : N;
  double aw = 0.0, ab = 0.0;
  for (int64_t r = r0; r < r1; ++r) {
    const A g = to_acc(dout[r * C + j]);
    if (pw) {
      const A nrm = kLayer ? (to_acc(x[r * C + j]) - mean[r]) * rstd[r] : to_acc(x[r * C + j]) * rstd[r];
      aw += static_cast<double>(g * nrm);
    }
    if (pb) ab += static_cast<double>(g);
  }
  if (pw) pw[chunk * C + j] = aw;
  if (pb) pb[chunk * C + j] = ab;
}

// Pass 2: grad[j] = the chunks' partials of column j, rounded once. A warp per column: lane l
// adds chunks l, l + 32, ... in order, then the lanes' sums meet in warp_sum's fixed tree, so
// the bits depend on the chunking alone. (A thread per column left C threads, a few dozen
// warps, each waiting on hundreds of dependent loads.) chunks == 0 (no rows) writes zeros.
template <class T>
__global__ void sum_chunks_kernel(T* grad, const double* partial, int64_t chunks, int64_t C) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = grid_threads() >> 5;
  for (int64_t j = global_thread() >> 5; j < C; j += warps) {
    double s = 0.0;
    for (int64_t p = lane; p < chunks; p += 32) s += partial[p * C + j];
    s = warp_sum(s);
    if (lane == 0) grad[j] = from_double<T>(s);
  }
}

// dweight (and dbias when kLayer) into the given outputs, either of which may be null.
template <bool kLayer, class T>
void launch_param_grads(T* dweight, T* dbias, const T* dout, const T* x, const acc_t<T>* mean,
                        const acc_t<T>* rstd, int64_t N, int64_t C) {
  if ((!dweight && !dbias) || C == 0) return;
  int64_t chunk_rows = 0, chunks = 0;
  if (N > 0) {
    chunk_rows = (N + kMaxChunks - 1) / kMaxChunks;
    if (chunk_rows < kMinChunkRows) chunk_rows = kMinChunkRows;
    chunks = (N + chunk_rows - 1) / chunk_rows;
  }
  const int64_t n_partials = (dweight ? 1 : 0) + (dbias ? 1 : 0);
  double* scratch = nullptr;
  if (chunks > 0) {
    void* p = nullptr;
    // On failure the error is left for the caller's cudaGetLastError; launch nothing.
    if (scratch_malloc(&p, static_cast<size_t>(n_partials * chunks * C) * sizeof(double)) != cudaSuccess)
      return;
    scratch = static_cast<double*>(p);
  }
  double* pw = dweight ? scratch : nullptr;
  double* pb = dbias ? scratch + (dweight ? chunks * C : 0) : nullptr;
  if (chunks > 0) {
    const dim3 grid(static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads), static_cast<unsigned>(chunks));
    norm_param_partials_kernel<kLayer, T><<<grid, kColumnThreads>>>(pw, pb, dout, x, mean, rstd, N, C, chunk_rows);
  }
  if (dweight) sum_chunks_kernel<T><<<grid_for(C * 32, kColumnThreads), kColumnThreads>>>(dweight, pw, chunks, C);
  if (dbias) sum_chunks_kernel<T><<<grid_for(C * 32, kColumnThreads), kColumnThreads>>>(dbias, pb, chunks, C);
  if (scratch) scratch_free(scratch);
}

template <bool kLayer, class T>
void launch_dx(T* dx, const T* dout, const T* x, const T* weight, const acc_t<T>* mean, const acc_t<T>* rstd,
               int64_t N, int64_t C) {
  if (!dx || N == 0 || C == 0) return;
  const bool vec = dispatch_register_rows<T>(C, {dx, dout, x, weight}, [&](auto vpl) {
    norm_dx_vec_kernel<kLayer, T, decltype(vpl)::value>
        <<<grid_for(N, kWarpRowThreads / 32), kWarpRowThreads>>>(dx, dout, x, weight, mean, rstd, N);
  });
  if (vec) return;
  if (C <= kMaxWarpRowC)
    norm_dx_kernel<true, kLayer, T>
        <<<grid_for(N, kWarpRowThreads / 32), kWarpRowThreads>>>(dx, dout, x, weight, mean, rstd, N, C);
  else
    norm_dx_kernel<false, kLayer, T>
        <<<grid_for(N, 1), block_row_threads(C)>>>(dx, dout, x, weight, mean, rstd, N, C);
}

}  // namespace

void launch_layernorm_forward(int dtype, void* out, void* mean, void* rstd, const void* x, const void* weight,
                              const void* bias, int64_t N, int64_t C, double eps) {
  // C == 0 still runs (N rows of 0/0 statistics, NaN, as on the CPU); N == 0 launches nothing.
  if (N == 0) return;
  dispatch_floating(dtype, "layernorm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    T* o = static_cast<T*>(out);
    A* m = static_cast<A*>(mean);
    A* s = static_cast<A*>(rstd);
    const T* xp = static_cast<const T*>(x);
    const T* w = static_cast<const T*>(weight);
    const T* b = static_cast<const T*>(bias);
    const A e = static_cast<A>(eps);
    const bool vec = dispatch_register_rows<T>(C, {o, xp, w, b}, [&](auto vpl) {
      norm_forward_vec_kernel<true, T, decltype(vpl)::value>
          <<<grid_for(N, kWarpRowThreads / 32), kWarpRowThreads>>>(o, m, s, xp, w, b, N, e);
    });
    if (vec) return;
    if (C <= kMaxWarpRowC)
      layernorm_forward_kernel<true, T><<<grid_for(N, kWarpRowThreads / 32), kWarpRowThreads>>>(o, m, s, xp, w, b, N, C, e);
    else
      layernorm_forward_kernel<false, T><<<grid_for(N, 1), block_row_threads(C)>>>(o, m, s, xp, w, b, N, C, e);
  });
}

void launch_layernorm_backward(int dtype, void* dx, void* dweight, void* dbias, const void* dout, const void* x,
                               const void* weight, const void* mean, const void* rstd, int64_t N, int64_t C) {
  dispatch_floating(dtype, "layernorm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(dout);
    const T* xp = static_cast<const T*>(x);
    const A* m = static_cast<const A*>(mean);
    const A* s = static_cast<const A*>(rstd);
    // Parameter gradients first: they read dout and x, which dx may overwrite.
    launch_param_grads<true, T>(static_cast<T*>(dweight), static_cast<T*>(dbias), g, xp, m, s, N, C);
    launch_dx<true, T>(static_cast<T*>(dx), g, xp, static_cast<const T*>(weight), m, s, N, C);
  });
}

void launch_rmsnorm_forward(int dtype, void* out, void* rstd, const void* x, const void* weight, int64_t N,
                            int64_t C, double eps) {
  if (N == 0) return;
  dispatch_floating(dtype, "rmsnorm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    T* o = static_cast<T*>(out);
    A* s = static_cast<A*>(rstd);
    const T* xp = static_cast<const T*>(x);
    const T* w = static_cast<const T*>(weight);
    const A e = static_cast<A>(eps);
    const bool vec = dispatch_register_rows<T>(C, {o, xp, w}, [&](auto vpl) {
      norm_forward_vec_kernel<false, T, decltype(vpl)::value>
          <<<grid_for(N, kWarpRowThreads / 32), kWarpRowThreads>>>(o, nullptr, s, xp, w, nullptr, N, e);
    });
    if (vec) return;
    if (C <= kMaxWarpRowC)
      rmsnorm_forward_kernel<true, T><<<grid_for(N, kWarpRowThreads / 32), kWarpRowThreads>>>(o, s, xp, w, N, C, e);
    else
      rmsnorm_forward_kernel<false, T><<<grid_for(N, 1), block_row_threads(C)>>>(o, s, xp, w, N, C, e);
  });
}

void launch_rmsnorm_backward(int dtype, void* dx, void* dweight, const void* dout, const void* x,
                             const void* weight, const void* rstd, int64_t N, int64_t C) {
  dispatch_floating(dtype, "rmsnorm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(dout);
    const T* xp = static_cast<const T*>(x);
    const A* s = static_cast<const A*>(rstd);
    launch_param_grads<false, T>(static_cast<T*>(dweight), nullptr, g, xp, nullptr, s, N, C);
    launch_dx<false, T>(static_cast<T*>(dx), g, xp, static_cast<const T*>(weight), nullptr, s, N, C);
  });
}

}  // namespace trident::cuda
