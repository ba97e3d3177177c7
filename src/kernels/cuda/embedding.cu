// Embedding gather and its gradient on the GPU (embedding.cuh), with the contract of
// kernels/cpu/embedding.h.
//
// Forward: one block per token row (rows grid-strided), its threads copying the row's columns,
// in 16-byte vectors when the source and destination rows are equally aligned.
//
// Backward, deterministic (the GPU version of Note [Deterministic embedding backward] in
// kernels/cpu/embedding.cc, scheme (b)): a scatter-add with atomics would make the bits depend
// on the order the adds land in. Instead:
//   1. zero grad_weight (rows no token uses stay 0);
//   2. a stable radix sort (cub) of (index, token position) pairs by index lists each row's
//      tokens contiguously, in increasing position;
//   3. one block per sorted position; the block at the first position of a row's run owns that
//      row (the others return at once): its threads take the columns, each summing the run's
//      tokens in increasing position, in acc_t from zero, and storing once.
// This is the CPU's order of additions exactly, so f32/f64 results match the CPU bit for bit,
// and bf16/f16 rows are rounded once. A very frequent token makes its row's block long, but the
// other rows' blocks run beside it.
#include <cuda_runtime.h>

#include <cstdint>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/embedding.cuh"

namespace trident::cuda {
namespace {

using Key = uint32_t;  // a row index (V < 2^32)
using Pos = int64_t;   // a token position

// Threads for a row of `units` items: whole warps, at most 256.
int row_threads(int64_t units) {
  int64_t t = (units + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > 256) t = 256;
  return static_cast<int>(t);
}

template <class T, class I>
__global__ void embedding_forward_kernel(T* out, const T* weight, const I* indices, int64_t N, int64_t C) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* src = weight + static_cast<int64_t>(indices[n]) * C;
    T* dst = out + n * C;
    const uintptr_t s = reinterpret_cast<uintptr_t>(src), d = reinterpret_cast<uintptr_t>(dst);
    if (((s | d) & 15) == 0) {
      // Both rows 16-byte aligned: vectors, then the scalar tail.
      const int64_t nvec = C / kVec<T>;
      const uint4* vs = reinterpret_cast<const uint4*>(src);
      uint4* vd = reinterpret_cast<uint4*>(dst);
      for (int64_t k = threadIdx.x; k < nvec; k += blockDim.x) vd[k] = vs[k];
      for (int64_t j = nvec * kVec<T> + threadIdx.x; j < C; j += blockDim.x) dst[j] = src[j];
    } else {
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x) dst[j] = src[j];
    }
  }
}

template <class I>
__global__ void sort_input_kernel(Key* keys, Pos* pos, const I* indices, int64_t N) {
  for (int64_t n = global_thread(); n < N; n += grid_threads()) {
    keys[n] = static_cast<Key>(indices[n]);
    pos[n] = n;
  }
}

// Step 3 above: keys/pos are the sorted (index, position) pairs.
template <class T>
__global__ void embedding_rows_kernel(T* grad_weight, const T* grad_out, const Key* keys, const Pos* pos,
                                      int64_t N, int64_t C) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const Key v = keys[i];
    if (i > 0 && keys[i - 1] == v) continue;  // not the first of its run: the run's first block owns the row
    int64_t end = i + 1;
    while (end < N && keys[end] == v) ++end;
    T* dst = grad_weight + static_cast<int64_t>(v) * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      A acc = A(0);
      for (int64_t t = i; t < end; ++t) acc += to_acc(grad_out[pos[t] * C + c]);
      dst[c] = from_acc<T>(acc);
    }
  }
}

// Bytes rounded up to cub's (and any vector load's) alignment.
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void launch_embedding_forward(int dtype, int index_dtype, void* out, const void* weight, const void* indices,
                              int64_t N, int64_t C) {
  if (N == 0 || C == 0) return;
  dispatch_floating(dtype, "embedding_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(index_dtype, "embedding_forward", [&](auto itag) {
      using I = typename decltype(itag)::type;
      embedding_forward_kernel<T, I><<<grid_for(N, 1), row_threads((C + kVec<T> - 1) / kVec<T>)>>>(
          static_cast<T*>(out), static_cast<const T*>(weight), static_cast<const I*>(indices), N, C);
    });
  });
}

void launch_embedding_backward(int dtype, int index_dtype, void* grad_weight, const void* grad_out,
                               const void* indices, int64_t N, int64_t V, int64_t C) {
  if (V == 0 || C == 0) return;  // nothing to write
  dispatch_floating(dtype, "embedding_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // +0.0 is all-zero bits in every floating type.
    cudaMemsetAsync(grad_weight, 0, static_cast<size_t>(V * C) * sizeof(T), 0);
    if (N == 0) return;

    // Sort only the bits an index can have.
    int end_bit = 1;
    while (end_bit < 32 && (static_cast<uint64_t>(V - 1) >> end_bit) != 0) ++end_bit;
    size_t temp_bytes = 0;
    if (cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const Key*>(nullptr),
                                        static_cast<Key*>(nullptr), static_cast<const Pos*>(nullptr),
                                        static_cast<Pos*>(nullptr), N, 0, end_bit, 0) != cudaSuccess)
      return;  // the error stays for the caller's cudaGetLastError
    const size_t key_bytes = aligned(static_cast<size_t>(N) * sizeof(Key));
    const size_t pos_bytes = aligned(static_cast<size_t>(N) * sizeof(Pos));
    void* scratch = nullptr;
    if (scratch_malloc(&scratch, 2 * key_bytes + 2 * pos_bytes + aligned(temp_bytes)) != cudaSuccess) return;
    char* p = static_cast<char*>(scratch);
    Key* keys_in = reinterpret_cast<Key*>(p);
    Key* keys_out = reinterpret_cast<Key*>(p + key_bytes);
    Pos* pos_in = reinterpret_cast<Pos*>(p + 2 * key_bytes);
    Pos* pos_out = reinterpret_cast<Pos*>(p + 2 * key_bytes + pos_bytes);
    void* temp = p + 2 * key_bytes + 2 * pos_bytes;

    dispatch_index(index_dtype, "embedding_backward", [&](auto itag) {
      using I = typename decltype(itag)::type;
      sort_input_kernel<I><<<grid_for(N, 256), 256>>>(keys_in, pos_in, static_cast<const I*>(indices), N);
    });
    // Radix sort is stable: equal indices keep increasing positions.
    if (cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, pos_in, pos_out, N, 0, end_bit, 0) ==
        cudaSuccess)
      embedding_rows_kernel<T><<<grid_for(N, 1), row_threads(C)>>>(
          static_cast<T*>(grad_weight), static_cast<const T*>(grad_out), keys_out, pos_out, N, C);
    scratch_free(scratch);
  });
}

}  // namespace trident::cuda
