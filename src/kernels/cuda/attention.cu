// Fused attention on the GPU (contract in attention.cuh; the CPU twin is kernels/cpu/attention.h).
// FlashAttention-2: no kernel ever holds a (T, T) score matrix. The forward streams key tiles
// past a query tile with an online softmax (Note [Online softmax] in
// kernels/cpu/attention_forward.cc) and caches only the logsumexp of every score row; the
// backward recomputes P = e^(scale q.k - lse) tile by tile.
//
// Two implementations of the same math:
//  * tensor cores (bf16/f16, HS a multiple of 16 up to 128, 16-byte aligned rows, sm_80+):
//    mma.sync m16n8k16 products with f32 accumulators (Note [mma.sync fragments] in
//    attention_tensor_core.cu), operands read from shared memory by ldmatrix, tiles staged
//    with cp.async (the next key or query tile loads while the current one is multiplied), HS
//    padded with zeros to D = 32, 64 or 128 (fewer instantiations; 64 and 128 are exact).
//    Blocks of 4 warps; every warp owns 16 rows of each product, so warps never share an
//    accumulator, and scores, probabilities and their gradients never leave registers.
//  * generic SIMT (every dtype and head size; f64 math for f64): lanes own keys for the
//    q.k dot products (no shuffles per score) and head dims for the P V style sums; rows
//    are register-blocked (several query rows per key load). Selected for everything else,
//    or by TRIDENT_ATTENTION_GENERIC=1 to compare the two on the same inputs.
//
// Masks: causal, a sliding window and packed documents (Notes [Sliding window] and [Document
// masks] in kernels/cpu/attention.h; the rules are Shape's in attention_common.cuh). Every
// kernel skips the tiles wholly outside its rows' runs of keys (documents of the block's batch
// row) and masks only the tiles a window or document boundary cuts.
//
// Forward: one block per (batch, query head, query tile). Under the causal mask the grid
// runs the longest tiles (last ones) first, so the short ones fill the tail.
//   Tensor cores: 64 queries x 64-key tiles. A lane holds two rows' scores of every 8-key
//   block of the tile, so row maxima and sums take two shuffles within its group of four
//   lanes; P is rounded to T in registers, as in FA2, and is the A operand of O += P V as it
//   stands. O is rescaled by alpha in registers.
// Backward: delta = rowsum(dout * out) first (double sums, as on the CPU), into a
// scratch (scratch_malloc), then two passes with no atomics, so results are deterministic:
//   dk/dv pass: one block per (batch, kv head, key tile) looping over the group's query heads
//     and the query tiles that see its keys (the transposed scores S^T = K Q^T, so that
//     dV += P^T dO and dK += dS^T Q accumulate in the block's own rows); sums over a group
//     need no second pass.
//   dq pass: one block per (batch, query head, query tile) looping over key tiles:
//     dQ += dS K. It recomputes S and dP (7 tile products per pair instead of 5), the price
//     of not accumulating dq with atomics.
// dS = P * (dP - delta) is the gradient of the scaled scores, so dQ and dK take the factor
// `scale` once, when they are stored.
//
// Files: attention_common.cuh (what the paths share), attention_generic.cu,
// attention_tensor_core.cu; this file picks the path and computes the backward's delta.
#include "kernels/cuda/attention.cuh"

#include <cuda_runtime.h>

#include <type_traits>

#include "core/kernel_switches.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/scratch.h"

namespace trident::cuda {
namespace {

using namespace attention_detail;

// kernels.attention_generic (TRIDENT_ATTENTION_GENERIC=1): the generic kernels everywhere.
bool force_generic() { return kernel_switch(KernelSwitch::kAttentionGeneric); }

DeviceInfo device_info() {
  int dev = 0, major = 0, smem = 48 << 10;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  return {major, smem};
}

// delta (B, NH, T) = rowsum(dout * out), FlashAttention-2's D_i. Summed in double and rounded
// once (why: the comment on row_dot in kernels/cpu/attention_backward.cc). One warp per row.
template <class T>
__global__ void row_dot_kernel(acc_t<T>* delta, View<const T> dout, View<const T> out, Shape s,
                               int64_t rows) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = grid_threads() >> 5;
  for (int64_t row = global_thread() >> 5; row < rows; row += warps) {
    const int64_t bh = row / s.T, t = row % s.T;
    const T* g = dout.row(bh / s.NH, bh % s.NH, t);
    const T* o = out.row(bh / s.NH, bh % s.NH, t);
    double sum = 0;
    for (int d = lane; d < s.HS; d += 32)
      sum += static_cast<double>(to_acc(g[d])) * static_cast<double>(to_acc(o[d]));
    sum = warp_sum(sum);
    if (lane == 0) delta[row] = static_cast<acc_t<T>>(sum);
  }
}

// The same for 16-byte aligned bf16/f16 rows with HS a multiple of 8: a row belongs to L lanes
// (HS / 8 rounded up to a power of two, at most 32), each taking 8-element vectors, so a warp
// reads whole rows at a time (one warp per row of 64 read 2 bytes per lane: 0.65 ms for GPT-2
// 124M's 12 layers at B=16 on an H200, 5 times the bytes' time). Each product is exact in
// double, so the order (per lane, then the lanes' tree) changes nothing but rare roundings.
template <class T, int L>
__global__ void row_dot_vector_kernel(acc_t<T>* delta, View<const T> dout, View<const T> out, Shape s,
                                      int64_t rows) {
  constexpr int kRowsPerWarp = 32 / L;
  const int lane = threadIdx.x & 31, sub = lane % L;
  const int64_t warps = grid_threads() >> 5, nvec = s.HS / 8;
  // The loop condition is the same for the whole warp, so every lane reaches the shuffles.
  for (int64_t first = (global_thread() >> 5) * kRowsPerWarp; first < rows; first += warps * kRowsPerWarp) {
    const int64_t row = first + lane / L;
    double sum = 0;
    if (row < rows) {
      const int64_t bh = row / s.T, t = row % s.T;
      const uint4* g = reinterpret_cast<const uint4*>(dout.row(bh / s.NH, bh % s.NH, t));
      const uint4* o = reinterpret_cast<const uint4*>(out.row(bh / s.NH, bh % s.NH, t));
      for (int64_t v = sub; v < nvec; v += L) {
        const uint4 a = g[v], b = o[v];
        const T* x = reinterpret_cast<const T*>(&a);
        const T* y = reinterpret_cast<const T*>(&b);
#pragma unroll
        for (int j = 0; j < 8; ++j) sum += static_cast<double>(to_acc(x[j])) * static_cast<double>(to_acc(y[j]));
      }
    }
#pragma unroll
    for (int m = L / 2; m > 0; m >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (row < rows && sub == 0) delta[row] = static_cast<acc_t<T>>(sum);
  }
}

// row_dot_kernel or, where it applies, row_dot_vector_kernel.
template <class T>
void launch_row_dot(acc_t<T>* delta, const Heads& dout, const Heads& out, const Shape& s, int64_t rows,
                    const AttentionDims& d) {
  if constexpr (kHalfLike<T>) {
    if (d.HS % 8 == 0 && rows_aligned(dout, d.B, d.NH, d.T) && rows_aligned(out, d.B, d.NH, d.T)) {
      const int64_t nvec = d.HS / 8;
      auto go = [&](auto lanes) {
        constexpr int L = decltype(lanes)::value;
        row_dot_vector_kernel<T, L><<<grid_for((rows + 32 / L - 1) / (32 / L) * 32, 256), 256>>>(
            delta, view_of<const T>(dout), view_of<const T>(out), s, rows);
      };
      if (nvec <= 4) return go(std::integral_constant<int, 4>{});
      if (nvec <= 8) return go(std::integral_constant<int, 8>{});
      if (nvec <= 16) return go(std::integral_constant<int, 16>{});
      return go(std::integral_constant<int, 32>{});
    }
  }
  row_dot_kernel<T><<<grid_for(rows * 32, 256), 256>>>(delta, view_of<const T>(dout), view_of<const T>(out), s, rows);
}

}  // namespace

void launch_attention_forward(int dtype, Heads out, void* lse, Heads q, Heads k, Heads v,
                              const AttentionDims& d) {
  if (d.B * d.NH * d.T == 0 || d.HS <= 0) return;
  const Shape s = shape_of(d);
  const DeviceInfo dev = device_info();
  dispatch_floating(dtype, "attention forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kHalfLike<T>) {
      if (!force_generic() && tensor_core_shape(dtype, d, dev) && rows_aligned(out, d.B, d.NH, d.T) &&
          rows_aligned(q, d.B, d.NH, d.T) && rows_aligned(k, d.B, d.NKV, d.T) &&
          rows_aligned(v, d.B, d.NKV, d.T))
        return tensor_core_forward(dtype, out, static_cast<float*>(lse), q, k, v, s, d.scale);
    }
    generic_forward(dtype, out, lse, q, k, v, s, d.scale, dev.max_smem);
  });
}

void launch_attention_backward(int dtype, Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k,
                               Heads v, Heads out, const void* lse, const AttentionDims& d) {
  if (d.B * d.NH * d.T == 0 || d.HS <= 0) return;
  const Shape s = shape_of(d);
  const DeviceInfo dev = device_info();
  dispatch_floating(dtype, "attention backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const int64_t rows = d.B * d.NH * d.T;
    A* delta = nullptr;
    // On failure the error stays for the caller's cudaGetLastError(); nothing is launched.
    if (scratch_malloc(reinterpret_cast<void**>(&delta), static_cast<size_t>(rows) * sizeof(A)) !=
        cudaSuccess)
      return;
    launch_row_dot<T>(delta, dout, out, s, rows, d);
    const A* lse_a = static_cast<const A*>(lse);
    bool done = false;
    if constexpr (kHalfLike<T>) {
      if (!force_generic() && tensor_core_shape(dtype, d, dev) && rows_aligned(dq, d.B, d.NH, d.T) &&
          rows_aligned(dk, d.B, d.NKV, d.T) && rows_aligned(dv, d.B, d.NKV, d.T) &&
          rows_aligned(dout, d.B, d.NH, d.T) && rows_aligned(q, d.B, d.NH, d.T) &&
          rows_aligned(k, d.B, d.NKV, d.T) && rows_aligned(v, d.B, d.NKV, d.T)) {
        tensor_core_backward(dtype, dq, dk, dv, dout, q, k, v, lse_a, delta, s, d.scale);
        done = true;
      }
    }
    if (!done) generic_backward(dtype, dq, dk, dv, dout, q, k, v, lse_a, delta, s, d.scale, dev.max_smem);
    scratch_free(delta);
  });
}

}  // namespace trident::cuda
