// RoPE (see rope.cuh): one thread per (row, pair) in a grid-stride loop; each computes its
// own angle in double (the H100 has fp64 to spare for a memory-bound kernel), so no table
// crosses from the host. A thread reads and writes only its own pair: in place is safe.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/rope.cuh"

namespace trident::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void rope_kernel(T* out, const T* x, int64_t rows, int64_t T_len, int64_t H, int64_t half, RopeParams params,
                            int64_t pos0, const int64_t* positions, bool inverse) {
  using A = acc_t<T>;
  const int64_t D = 2 * half, n = rows * half;
  for (int64_t k = global_thread(); k < n; k += grid_threads()) {
    const int64_t r = k / half, i = k % half;
    // Rows are (b, t, h) flattened, so r / H is b*T + t.
    const int64_t p = positions != nullptr ? positions[r / H] : pos0 + (r / H) % T_len;
    const double angle = static_cast<double>(p) * rope_inv_freq(params, i, D);
    double s, c;
    sincos(angle, &s, &c);
    const A ca = static_cast<A>(c), sa = static_cast<A>(inverse ? -s : s);
    const T* xr = x + r * D;
    T* o = out + r * D;
    const A a = to_acc(xr[i]), b = to_acc(xr[i + half]);
    o[i] = from_acc<T>(a * ca - b * sa);
    o[i + half] = from_acc<T>(b * ca + a * sa);
  }
}

}  // namespace

void launch_rope(int dtype, void* out, const void* x, int64_t B, int64_t T, int64_t H, int64_t D,
                 const RopeParams& params, int64_t pos0, const int64_t* positions, bool inverse) {
  const int64_t rows = B * T * H, half = D / 2;
  if (rows == 0 || half == 0) return;
  dispatch_floating(dtype, "rope", [&](auto tag) {
    using E = typename decltype(tag)::type;
    rope_kernel<E><<<grid_for(rows * half, kThreads), kThreads>>>(static_cast<E*>(out), static_cast<const E*>(x), rows,
                                                                  T, H, half, params, pos0, positions, inverse);
  });
}

}  // namespace trident::cuda
