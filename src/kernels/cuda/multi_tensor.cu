// Multi-tensor kernels (multi_tensor.cuh). The tensors are cut into chunks of kChunk elements;
// a table of the tensors' pointers and sizes and of the chunks (tensor, first element) goes to
// the GPU in one copy, and each block takes one chunk at a time (grid-strided over chunks).
// Chunk boundaries depend on the tensors' sizes only, so the sum of squares adds in the same
// order on every run.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cuda/adamw_math.cuh"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/scratch.h"

namespace trident::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 1 << 16;

// The table on the GPU: per tensor up to five pointers and its size; per chunk its tensor and
// first element.
struct Table {
  void* const* a;
  const void* const* b;
  float* const* m;
  float* const* v;
  void* const* out;
  const int64_t* n;
  const int32_t* chunk_tensor;
  const int64_t* chunk_begin;
  int64_t chunks;
};

// Builds the table in scratch memory (freed by the caller, after the kernels are queued).
class TableBuilder {
 public:
  TableBuilder(int64_t count, const int64_t* n) : count_(count) {
    for (int64_t k = 0; k < count; ++k)
      for (int64_t b = 0; b < n[k]; b += kChunk) {
        chunk_tensor_.push_back(static_cast<int32_t>(k));
        chunk_begin_.push_back(b);
      }
  }
  int64_t chunks() const { return static_cast<int64_t>(chunk_begin_.size()); }

  // Copies the arrays to the GPU; returns the table, or a table of no chunks on failure (the
  // error stays for cudaGetLastError).
  Table upload(const void* const* a, const void* const* b, float* const* m, float* const* v, void* const* out,
               const int64_t* n, void** scratch) {
    std::vector<char> bytes;
    auto put = [&](const void* src, size_t size) {
      const size_t at = (bytes.size() + 7) / 8 * 8;
      bytes.resize(at + size);
      if (size) std::memcpy(bytes.data() + at, src, size);
      return at;
    };
    const size_t ptrs = static_cast<size_t>(count_) * sizeof(void*);
    const size_t at_a = put(a, ptrs), at_b = b ? put(b, ptrs) : 0, at_m = m ? put(m, ptrs) : 0,
                 at_v = v ? put(v, ptrs) : 0, at_out = out ? put(out, ptrs) : 0,
                 at_n = put(n, static_cast<size_t>(count_) * sizeof(int64_t)),
                 at_t = put(chunk_tensor_.data(), chunk_tensor_.size() * sizeof(int32_t)),
                 at_c = put(chunk_begin_.data(), chunk_begin_.size() * sizeof(int64_t));
    Table t{};
    *scratch = nullptr;
    if (scratch_malloc(scratch, bytes.size()) != cudaSuccess ||
        cudaMemcpy(*scratch, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess)
      return t;
    char* base = static_cast<char*>(*scratch);
    t.a = reinterpret_cast<void* const*>(base + at_a);
    t.b = b ? reinterpret_cast<const void* const*>(base + at_b) : nullptr;
    t.m = m ? reinterpret_cast<float* const*>(base + at_m) : nullptr;
    t.v = v ? reinterpret_cast<float* const*>(base + at_v) : nullptr;
    t.out = out ? reinterpret_cast<void* const*>(base + at_out) : nullptr;
    t.n = reinterpret_cast<const int64_t*>(base + at_n);
    t.chunk_tensor = reinterpret_cast<const int32_t*>(base + at_t);
    t.chunk_begin = reinterpret_cast<const int64_t*>(base + at_c);
    t.chunks = chunks();
    return t;
  }

 private:
  int64_t count_;
  std::vector<int32_t> chunk_tensor_;
  std::vector<int64_t> chunk_begin_;
};

unsigned blocks_for(int64_t chunks) { return static_cast<unsigned>(chunks < 4096 ? (chunks < 1 ? 1 : chunks) : 4096); }

template <class T>
__global__ void sum_of_squares_multi_kernel(double* partial, const Table t) {
  __shared__ double scratch[32];
  for (int64_t c = blockIdx.x; c < t.chunks; c += gridDim.x) {
    const int k = t.chunk_tensor[c];
    const int64_t begin = t.chunk_begin[c], end = min(begin + kChunk, t.n[k]);
    const T* x = static_cast<const T*>(t.a[k]);
    double s = 0.0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const double v = static_cast<double>(to_acc(x[i]));
      s += v * v;
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) partial[c] = s;
  }
}

// AdamW on the table's parameters; with O not void, each updated parameter also goes, rounded
// to O as elementwise.cu's cast rounds (from_acc: to nearest even), into t.out[k]: mixed
// precision's masters into the model in the same pass (Note [AdamW into the model]).
template <class T, class O>
__global__ void adamw_multi_kernel(const Table t, const AdamWScalars s) {
  for (int64_t c = blockIdx.x; c < t.chunks; c += gridDim.x) {
    const int k = t.chunk_tensor[c];
    const int64_t begin = t.chunk_begin[c], end = min(begin + kChunk, t.n[k]);
    T* param = static_cast<T*>(t.a[k]);
    const T* grad = static_cast<const T*>(t.b[k]);
    if constexpr (std::is_void<O>::value) {
      for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) adamw_element(param, grad, t.m[k], t.v[k], i, s);
    } else {
      O* out = static_cast<O*>(t.out[k]);
      for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
        out[i] = from_acc<O>(to_acc(adamw_element(param, grad, t.m[k], t.v[k], i, s)));
    }
  }
}

}  // namespace

double launch_sum_of_squares_multi(int dtype, const void* const* x, const int64_t* n, int64_t count) {
  TableBuilder builder(count, n);
  if (builder.chunks() == 0) return 0.0;
  void* table_memory = nullptr;
  const Table t =
      builder.upload(const_cast<const void* const*>(x), nullptr, nullptr, nullptr, nullptr, n, &table_memory);
  double result = std::numeric_limits<double>::quiet_NaN();
  void* p = nullptr;
  if (t.chunks == 0 || scratch_malloc(&p, static_cast<size_t>(t.chunks + 1) * sizeof(double)) != cudaSuccess) {
    if (table_memory) scratch_free(table_memory);
    return result;  // the error stays for cudaGetLastError
  }
  double* total = static_cast<double*>(p);
  double* partial = total + 1;
  dispatch_floating(dtype, "sum_of_squares_multi", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_of_squares_multi_kernel<T><<<blocks_for(t.chunks), kThreads>>>(partial, t);
  });
  result = sum_partials_to_host(total, partial, t.chunks);
  scratch_free(p);
  scratch_free(table_memory);
  return result;
}

void launch_adamw_multi(int dtype, void* const* param, const void* const* grad, float* const* m, float* const* v,
                        void* const* out, int out_dtype, const int64_t* n, int64_t count, const AdamWHyper& h) {
  if (out != nullptr && (dtype != kF32 || (out_dtype != kBF16 && out_dtype != kF16)))
    bad_dtype("adamw_multi into a model (f32 parameters, bf16 or f16 out)", dtype != kF32 ? dtype : out_dtype);
  TableBuilder builder(count, n);
  if (builder.chunks() == 0) return;
  void* table_memory = nullptr;
  const Table t = builder.upload(const_cast<const void* const*>(param), grad, m, v, out, n, &table_memory);
  if (t.chunks == 0) {
    if (table_memory) scratch_free(table_memory);
    return;
  }
  const AdamWScalars s = adamw_scalars(h);
  const unsigned blocks = blocks_for(t.chunks);
  if (out == nullptr) {
    dispatch_floating(dtype, "adamw_multi", [&](auto tag) {
      using T = typename decltype(tag)::type;
      adamw_multi_kernel<T, void><<<blocks, kThreads>>>(t, s);
    });
  } else if (out_dtype == kBF16) {
    adamw_multi_kernel<float, bf16_t><<<blocks, kThreads>>>(t, s);
  } else {
    adamw_multi_kernel<float, f16_t><<<blocks, kThreads>>>(t, s);
  }
  scratch_free(table_memory);  // ordered after the kernel on stream 0
}

}  // namespace trident::cuda
