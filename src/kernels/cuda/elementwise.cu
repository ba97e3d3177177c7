// Elementwise kernels (see elementwise.cuh). One thread per element in a grid-stride loop;
// strided views unravel the flat index through at most kMaxDims (size, stride) pairs passed
// by value, which the caller has already coalesced, so the common contiguous case is one dim.
// Math in acc_t<T> with CUDA's libdevice functions (a few ulp), rounded once on store.
#include <cmath>
#include <type_traits>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/elementwise.cuh"

namespace trident::cuda {
namespace {

// A strided view's geometry, small enough to pass by value to a kernel.
struct Geometry {
  int ndim;
  int64_t shape[kMaxDims];
  int64_t stride[3][kMaxDims];  // up to three operands (out, a, b)
};

Geometry make_geometry(const int64_t* shape, int ndim, const int64_t* s0, const int64_t* s1, const int64_t* s2) {
  Geometry g{};
  g.ndim = ndim;
  for (int i = 0; i < ndim; ++i) {
    g.shape[i] = shape[i];
    g.stride[0][i] = s0 ? s0[i] : 0;
    g.stride[1][i] = s1 ? s1[i] : 0;
    g.stride[2][i] = s2 ? s2[i] : 0;
  }
  return g;
}

int64_t numel(const int64_t* shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

// Element offsets of flat index i in each of `Operands` views. I is uint32_t where every
// flat index fits: a 64-bit division is a long subroutine on the GPU, a 32-bit one a few
// instructions.
template <int Operands, class I>
__device__ __forceinline__ void offsets(const Geometry& g, I i, int64_t* off) {
  for (int k = 0; k < Operands; ++k) off[k] = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const I size = static_cast<I>(g.shape[d]);
    const int64_t idx = static_cast<int64_t>(i % size);
    i /= size;
    for (int k = 0; k < Operands; ++k) off[k] += idx * g.stride[k][d];
  }
}
// Runs body(i) for every flat index below n, with 32-bit index math where n allows.
template <class Body>
__device__ __forceinline__ void for_each_index(int64_t n, Body body) {
  if (n <= static_cast<int64_t>(UINT32_MAX)) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) body(static_cast<uint32_t>(i));
  } else {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) body(i);
  }
}

template <class D, class S>
__device__ __forceinline__ D convert(S s) {
  // Through acc_t (float or double): exact for every integer dtype's values that matter and for
  // every float conversion except double -> bf16/f16 (rounded twice only via f32; as on the host).
  if constexpr (std::is_same<D, S>::value) {
    return s;
  } else if constexpr (std::is_same<S, bf16_t>::value || std::is_same<S, f16_t>::value) {
    const float f = to_acc<S>(s);
    if constexpr (std::is_same<D, bf16_t>::value || std::is_same<D, f16_t>::value) return from_acc<D>(f);
    else return static_cast<D>(f);
  } else if constexpr (std::is_same<D, bf16_t>::value || std::is_same<D, f16_t>::value) {
    return from_acc<D>(static_cast<float>(s));
  } else {
    return static_cast<D>(s);
  }
}

template <class D, class S>
__global__ void copy_strided_kernel(D* dst, const S* src, Geometry g, int64_t n) {
  for_each_index(n, [&](auto i) {
    int64_t off[2];
    offsets<2>(g, i, off);
    dst[off[0]] = convert<D>(src[off[1]]);
  });
}

template <class D, class S>
__global__ void copy_contiguous_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = convert<D>(src[i]);
}

// Four consecutive elements, as one access of 4 sizeof(T) bytes.
template <class T>
struct alignas(4 * sizeof(T)) Four {
  T v[4];
};
// A contiguous conversion (master weights and gradients: f32 <-> bf16), four elements per
// thread and access; dst and src aligned to their four-element size.
template <class D, class S>
__global__ void convert_contiguous_kernel(D* dst, const S* src, int64_t n) {
  const int64_t n4 = n / 4;
  for (int64_t i = global_thread(); i < n4; i += grid_threads()) {
    const Four<S> x = reinterpret_cast<const Four<S>*>(src)[i];
    Four<D> y;
#pragma unroll
    for (int j = 0; j < 4; ++j) y.v[j] = convert<D>(x.v[j]);
    reinterpret_cast<Four<D>*>(dst)[i] = y;
  }
  for (int64_t i = n4 * 4 + global_thread(); i < n; i += grid_threads()) dst[i] = convert<D>(src[i]);
}

template <class A>
__device__ __forceinline__ A apply_binary(int op, A a, A b) {
  switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    default: return a / b;
  }
}

template <class T>
__global__ void binary_kernel(int op, T* out, const T* a, const T* b, Geometry g, int64_t n) {
  for_each_index(n, [&](auto i) {
    int64_t off[3];
    offsets<3>(g, i, off);
    out[off[0]] = from_acc<T>(apply_binary(op, to_acc(a[off[1]]), to_acc(b[off[2]])));
  });
}

// Contiguous, 16-byte aligned operands: kVec<T> elements per thread and access.
template <class T>
__global__ void binary_vector_kernel(int op, T* out, const T* a, const T* b, int64_t n) {
  constexpr int V = kVec<T>;
  const int64_t nv = n / V;
  for (int64_t i = global_thread(); i < nv; i += grid_threads()) {
    const uint4 x = reinterpret_cast<const uint4*>(a)[i], y = reinterpret_cast<const uint4*>(b)[i];
    uint4 z;
    const T* xs = reinterpret_cast<const T*>(&x);
    const T* ys = reinterpret_cast<const T*>(&y);
    T* zs = reinterpret_cast<T*>(&z);
#pragma unroll
    for (int j = 0; j < V; ++j) zs[j] = from_acc<T>(apply_binary(op, to_acc(xs[j]), to_acc(ys[j])));
    reinterpret_cast<uint4*>(out)[i] = z;
  }
  for (int64_t i = nv * V + global_thread(); i < n; i += grid_threads())
    out[i] = from_acc<T>(apply_binary(op, to_acc(a[i]), to_acc(b[i])));
}

template <class T>
__global__ void scale_shift_kernel(T* out, const T* a, acc_t<T> scale, acc_t<T> shift, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = from_acc<T>(to_acc(a[i]) * scale + shift);
}

// Scalar math in float or double.
__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }
__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ double log_(double x) { return log(x); }
__device__ __forceinline__ float tanh_(float x) { return tanhf(x); }
__device__ __forceinline__ double tanh_(double x) { return tanh(x); }
__device__ __forceinline__ float sqrt_(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrt_(double x) { return sqrt(x); }
__device__ __forceinline__ float normcdf_(float x) { return normcdff(x); }
__device__ __forceinline__ double normcdf_(double x) { return normcdf(x); }

template <class A>
__device__ __forceinline__ A sigmoid(A x) {
  return A(1) / (A(1) + exp_(-x));
}

// Note [GELU tanh as a sigmoid] in kernels/cpu/pointwise.h: 0.5 x (1 + tanh(u)) = x sigmoid(2u).
constexpr double kGeluTanhScale = 2 * 0.797884560802865406;
constexpr double kGeluTanhCubic = 0.044715;

template <class A>
__device__ __forceinline__ A unary_forward(int op, A x, double param) {
  switch (op) {
    case 0: return exp_(x);
    case 1: return log_(x);
    case 2: return tanh_(x);
    case 3: return sqrt_(x);
    case 4: return static_cast<A>(pow(static_cast<double>(x), param));
    case 5: return x * sigmoid(A(kGeluTanhScale) * (x + A(kGeluTanhCubic) * x * x * x));
    case 6: return x * normcdf_(x);
    default: return x * sigmoid(x);
  }
}

// dy * f'(.) from `saved`: the output y for exp, tanh and sqrt, the input x otherwise.
template <class A>
__device__ __forceinline__ A unary_derivative(int op, A dy, A s, double param) {
  switch (op) {
    case 0: return dy * s;
    case 1: return dy / s;
    case 2: return dy * (A(1) - s * s);
    case 3: return dy / (A(2) * s);
    case 4:
      if (param == 0.0) return A(0);  // x^0 is constant, even where x^-1 is not finite
      return static_cast<A>(static_cast<double>(dy) * param * pow(static_cast<double>(s), param - 1.0));
    case 5: {
      const A x2 = s * s;
      const A u2 = A(kGeluTanhScale) * (s + A(kGeluTanhCubic) * x2 * s);
      const A sg = sigmoid(u2), one_minus = sigmoid(-u2);
      const A du2 = A(kGeluTanhScale) * (A(1) + A(3 * kGeluTanhCubic) * x2);
      return dy * (sg + s * sg * one_minus * du2);
    }
    case 6: return dy * (normcdf_(s) + s * A(0.398942280401432678) * exp_(A(-0.5) * s * s));
    default: return dy * sigmoid(s) * (A(1) + s * sigmoid(-s));
  }
}

template <class T>
__global__ void unary_kernel(int op, T* out, const T* x, double param, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    out[i] = from_acc<T>(unary_forward(op, to_acc(x[i]), param));
}

// The same for 16-byte aligned tensors, kVec<T> elements per access (unary_backward_vector_kernel).
template <class T>
__global__ void unary_vector_kernel(int op, T* out, const T* x, double param, int64_t n) {
  constexpr int V = kVec<T>;
  const int64_t nv = n / V;
  for (int64_t i = global_thread(); i < nv; i += grid_threads()) {
    uint4 u = reinterpret_cast<const uint4*>(x)[i];
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int j = 0; j < V; ++j) e[j] = from_acc<T>(unary_forward(op, to_acc(e[j]), param));
    reinterpret_cast<uint4*>(out)[i] = u;
  }
  for (int64_t i = nv * V + global_thread(); i < n; i += grid_threads())
    out[i] = from_acc<T>(unary_forward(op, to_acc(x[i]), param));
}

template <class T>
__global__ void unary_backward_kernel(int op, T* dx, const T* dy, const T* saved, double param, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dx[i] = from_acc<T>(unary_derivative(op, to_acc(dy[i]), to_acc(saved[i]), param));
}

// The same for 16-byte aligned contiguous tensors, kVec<T> elements per access (the MLP's
// GELU backward on 16384 x 3072 bf16: 2.59 ms for 12 layers on an H200 element by element,
// 1.4 TB/s). Each element's arithmetic is unary_backward_kernel's: the same bits.
template <class T>
__global__ void unary_backward_vector_kernel(int op, T* dx, const T* dy, const T* saved, double param, int64_t n) {
  constexpr int V = kVec<T>;
  const int64_t nv = n / V;
  for (int64_t i = global_thread(); i < nv; i += grid_threads()) {
    const uint4 g = reinterpret_cast<const uint4*>(dy)[i], x = reinterpret_cast<const uint4*>(saved)[i];
    uint4 z;
    const T* gs = reinterpret_cast<const T*>(&g);
    const T* xs = reinterpret_cast<const T*>(&x);
    T* zs = reinterpret_cast<T*>(&z);
#pragma unroll
    for (int j = 0; j < V; ++j) zs[j] = from_acc<T>(unary_derivative(op, to_acc(gs[j]), to_acc(xs[j]), param));
    reinterpret_cast<uint4*>(dx)[i] = z;
  }
  for (int64_t i = nv * V + global_thread(); i < n; i += grid_threads())
    dx[i] = from_acc<T>(unary_derivative(op, to_acc(dy[i]), to_acc(saved[i]), param));
}

// Philox4x32-10, word for word core/rng.cc's, so a dropout mask is the same on every device.
__device__ __forceinline__ void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  const uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// Note [Dropout mask] in kernels/cpu/dropout.h: element i keeps iff
// (philox(seed, offset + i/4)[i%4] >> 8) >= ceil(p * 2^24). One thread per counter (4 elements).
template <class T>
__global__ void dropout_kernel(T* out, const T* x, int64_t n, uint32_t threshold, acc_t<T> scale, uint64_t seed,
                               uint64_t offset) {
  const int64_t counters = (n + 3) / 4;
  for (int64_t c = global_thread(); c < counters; c += grid_threads()) {
    uint32_t bits[4];
    philox4x32(seed, offset + static_cast<uint64_t>(c), bits);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * c + j;
      if (i >= n) break;
      const acc_t<T> multiplier = static_cast<acc_t<T>>((bits[j] >> 8) >= threshold) * scale;
      out[i] = from_acc<T>(to_acc(x[i]) * multiplier);
    }
  }
}

constexpr int kThreads = 256;

int dtype_bytes(int dtype) {
  switch (dtype) {
    case kF64:
    case kI64: return 8;
    case kF32:
    case kI32: return 4;
    case kBF16:
    case kF16:
    case kU16: return 2;
    default: return 0;
  }
}

// A same-dtype copy whose rows (the last dim) are contiguous on both sides and whose every
// row starts 16-byte aligned, as a copy of 16-byte vectors: the split backward's concatenation
// of q, k and v gradients, the head's slices. False (nothing launched) for any other.
bool copy_as_vectors(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
                     const int64_t* shape, int ndim, int elem_bytes) {
  if (elem_bytes <= 0 || 16 % elem_bytes != 0) return false;
  const int64_t v = 16 / elem_bytes;
  const int last = ndim - 1;
  if ((shape[last] > 1 && (dst_strides[last] != 1 || src_strides[last] != 1)) || shape[last] % v != 0 ||
      !aligned16(dst) || !aligned16(src))
    return false;
  int64_t vshape[kMaxDims], vdst[kMaxDims], vsrc[kMaxDims];
  for (int d = 0; d < ndim; ++d) {
    if (d != last && (dst_strides[d] % v != 0 || src_strides[d] % v != 0)) return false;
    vshape[d] = shape[d];
    vdst[d] = d == last ? 1 : dst_strides[d] / v;
    vsrc[d] = d == last ? 1 : src_strides[d] / v;
  }
  vshape[last] = shape[last] / v;
  const int64_t n = numel(vshape, ndim);
  if (n == 0) return true;
  auto* d16 = static_cast<uint4*>(dst);
  const auto* s16 = static_cast<const uint4*>(src);
  if (ndim == 1) {
    copy_contiguous_kernel<uint4, uint4><<<grid_for(n, kThreads), kThreads>>>(d16, s16, n);
  } else {
    const Geometry g = make_geometry(vshape, ndim, vdst, vsrc, nullptr);
    copy_strided_kernel<uint4, uint4><<<grid_for(n, kThreads), kThreads>>>(d16, s16, g, n);
  }
  return true;
}

}  // namespace

void launch_copy_strided(void* dst, int dst_dtype, const int64_t* dst_strides, const void* src, int src_dtype,
                         const int64_t* src_strides, const int64_t* shape, int ndim) {
  const int64_t n = numel(shape, ndim);
  if (n == 0) return;
  if (ndim > kMaxDims) {
    std::fprintf(stderr, "trident: CUDA copy: %d dims after coalescing (at most %d)\n", ndim, kMaxDims);
    std::abort();
  }
  const bool contiguous = ndim == 0 || (ndim == 1 && dst_strides[0] == 1 && src_strides[0] == 1);
  // core/dtype.h's element_size needs C++20 (core/half.h); nvcc compiles these as C++17.
  const int elem_bytes = dtype_bytes(dst_dtype);
  if (dst_dtype == src_dtype && ndim >= 1 &&
      copy_as_vectors(dst, dst_strides, src, src_strides, shape, ndim, elem_bytes))
    return;
  dispatch_all(dst_dtype, "copy", [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch_all(src_dtype, "copy", [&](auto stag) {
      using S = typename decltype(stag)::type;
      const bool four = reinterpret_cast<uintptr_t>(dst) % (4 * sizeof(D)) == 0 &&
                        reinterpret_cast<uintptr_t>(src) % (4 * sizeof(S)) == 0;
      if (contiguous && four && 4 * sizeof(D) <= 16 && 4 * sizeof(S) <= 16) {
        convert_contiguous_kernel<D, S><<<grid_for(n / 4 + 1, kThreads), kThreads>>>(
            static_cast<D*>(dst), static_cast<const S*>(src), n);
      } else if (contiguous) {
        copy_contiguous_kernel<D, S><<<grid_for(n, kThreads), kThreads>>>(static_cast<D*>(dst),
                                                                          static_cast<const S*>(src), n);
      } else {
        const Geometry g = make_geometry(shape, ndim, dst_strides, src_strides, nullptr);
        copy_strided_kernel<D, S><<<grid_for(n, kThreads), kThreads>>>(static_cast<D*>(dst),
                                                                        static_cast<const S*>(src), g, n);
      }
    });
  });
}

void launch_binary(int op, int dtype, void* out, const int64_t* out_strides, const void* a, const int64_t* a_strides,
                   const void* b, const int64_t* b_strides, const int64_t* shape, int ndim) {
  const int64_t n = numel(shape, ndim);
  if (n == 0) return;
  if (ndim > kMaxDims) {
    std::fprintf(stderr, "trident: CUDA binary: %d dims (at most %d)\n", ndim, kMaxDims);
    std::abort();
  }
  const bool contiguous =
      ndim == 0 || (ndim == 1 && out_strides[0] == 1 && a_strides[0] == 1 && b_strides[0] == 1);
  if (contiguous && aligned16(out) && aligned16(a) && aligned16(b)) {
    dispatch_floating(dtype, "binary", [&](auto tag) {
      using T = typename decltype(tag)::type;
      binary_vector_kernel<T><<<grid_for(n / kVec<T> + 1, kThreads), kThreads>>>(
          op, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n);
    });
    return;
  }
  const Geometry g = make_geometry(shape, ndim, out_strides, a_strides, b_strides);
  dispatch_floating(dtype, "binary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_kernel<T><<<grid_for(n, kThreads), kThreads>>>(op, static_cast<T*>(out), static_cast<const T*>(a),
                                                          static_cast<const T*>(b), g, n);
  });
}

void launch_scale_shift(int dtype, void* out, const void* a, double scale, double shift, int64_t n) {
  if (n == 0) return;
  dispatch_floating(dtype, "scale_shift", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scale_shift_kernel<T><<<grid_for(n, kThreads), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(a),
                                                               static_cast<acc_t<T>>(scale),
                                                               static_cast<acc_t<T>>(shift), n);
  });
}

void launch_unary(int op, int dtype, void* out, const void* x, double param, int64_t n) {
  if (n == 0) return;
  dispatch_floating(dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (aligned16(out) && aligned16(x)) {
      unary_vector_kernel<T><<<grid_for(n / kVec<T> + 1, kThreads), kThreads>>>(op, static_cast<T*>(out),
                                                                                static_cast<const T*>(x), param, n);
      return;
    }
    unary_kernel<T><<<grid_for(n, kThreads), kThreads>>>(op, static_cast<T*>(out), static_cast<const T*>(x), param, n);
  });
}

void launch_unary_backward(int op, int dtype, void* dx, const void* dy, const void* saved, double param, int64_t n) {
  if (n == 0) return;
  dispatch_floating(dtype, "unary_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (aligned16(dx) && aligned16(dy) && aligned16(saved)) {
      unary_backward_vector_kernel<T><<<grid_for(n / kVec<T> + 1, kThreads), kThreads>>>(
          op, static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(saved), param, n);
      return;
    }
    unary_backward_kernel<T><<<grid_for(n, kThreads), kThreads>>>(op, static_cast<T*>(dx), static_cast<const T*>(dy),
                                                                  static_cast<const T*>(saved), param, n);
  });
}

void launch_dropout(int dtype, void* out, const void* x, int64_t n, double p, uint64_t seed, uint64_t offset) {
  if (n == 0) return;
  const uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 0x1p24));
  dispatch_floating(dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t counters = (n + 3) / 4;
    dropout_kernel<T><<<grid_for(counters, kThreads), kThreads>>>(
        static_cast<T*>(out), static_cast<const T*>(x), n, threshold, static_cast<acc_t<T>>(1.0 / (1.0 - p)), seed,
        offset);
  });
}

}  // namespace trident::cuda
