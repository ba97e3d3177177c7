#include "support/emulated_device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/allocator.h"
#include "core/caching_allocator.h"
#include "core/device_ops.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/binary.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cpu/vocab_parallel_cross_entropy.h"
#include "kernels/cpu/vocab_parallel_embedding.h"
#include "kernels/device/device_kernels.h"
#include "ops/dispatch.h"

namespace trident::testing {
namespace {

namespace cpu = kernels::cpu;
using kernels::DeviceHeads;

constexpr Device kDevice{DeviceType::kPrivateUse, 0};

std::atomic<int64_t> g_memory_limit{0};

class EmulatedMemory final : public MemorySource {
 public:
  void* allocate(size_t nbytes) override { return std::aligned_alloc(64, (nbytes + 63) / 64 * 64); }
  void free(void* ptr) override { std::free(ptr); }
  Device device() const override { return kDevice; }
  int64_t limit() const override { return g_memory_limit.load(); }
};

template <class Fn>
void dispatch_all(DType d, const Fn& fn) {
  switch (d) {
    case DType::kI32: return fn.template operator()<int32_t>();
    case DType::kI64: return fn.template operator()<int64_t>();
    case DType::kU16: return fn.template operator()<uint16_t>();
    default: return ops::dispatch_floating(d, "emulated device", fn);
  }
}

template <class D, class S>
D convert(S s) {
  if constexpr (std::is_same_v<D, S>) return s;
  else if constexpr (std::is_same_v<S, bf16> || std::is_same_v<S, f16>) return static_cast<D>(static_cast<float>(s));
  else if constexpr (std::is_same_v<D, bf16> || std::is_same_v<D, f16>) return D(static_cast<float>(s));
  else return static_cast<D>(s);
}

void copy(void* dst, Device, const void* src, Device, size_t nbytes) { std::memcpy(dst, src, nbytes); }

// Asynchronous copies happen only when waited for, as late as a real device may run them: code
// that reads a destination before wait_async_copies sees its old bytes, and its test fails.
struct PendingCopy {
  void* dst;
  const void* src;
  size_t nbytes;
};
std::vector<PendingCopy>& pending_copies() {
  static auto* pending = new std::vector<PendingCopy>();  // leaked, as the allocator
  return *pending;
}
void copy_async(void* dst, Device, const void* src, Device, size_t nbytes) {
  pending_copies().push_back({dst, src, nbytes});
}
void wait_copies() {
  for (const PendingCopy& c : pending_copies()) std::memcpy(c.dst, c.src, c.nbytes);
  pending_copies().clear();
}

void fill(void* dst, DType dtype, int64_t n, double value) {
  dispatch_all(dtype, [&]<class T>() {
    T* p = static_cast<T*>(dst);
    for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(value);
  });
}

void copy_strided(void* dst, DType dst_dtype, const int64_t* ds, const void* src, DType src_dtype, const int64_t* ss,
                  const int64_t* shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  dispatch_all(dst_dtype, [&]<class D>() {
    dispatch_all(src_dtype, [&]<class S>() {
      for (int64_t i = 0; i < n; ++i) {
        int64_t rem = i, doff = 0, soff = 0;
        for (int d = ndim - 1; d >= 0; --d) {
          doff += rem % shape[d] * ds[d];
          soff += rem % shape[d] * ss[d];
          rem /= shape[d];
        }
        static_cast<D*>(dst)[doff] = convert<D>(static_cast<const S*>(src)[soff]);
      }
    });
  });
}

template <class T>
cpu::HeadsView<T> view(const DeviceHeads& h) {
  return {static_cast<T*>(const_cast<void*>(h.data)), h.batch_stride, h.head_stride, h.time_stride};
}

int64_t logits_row_multiple_setting = 1;

class EmulatedKernels final : public kernels::DeviceKernels {
 public:
  int64_t logits_row_multiple() const override { return logits_row_multiple_setting; }
  void binary(kernels::DeviceBinaryOp op, DType dtype, void* out, const Strides& os, const void* a, const Strides& as,
              const void* b, const Strides& bs, const Shape& shape) override {
    ops::dispatch_floating(dtype, "binary", [&]<class T>() {
      cpu::binary_forward<T>(static_cast<cpu::BinaryOp>(op), static_cast<T*>(out), os, static_cast<const T*>(a), as,
                             static_cast<const T*>(b), bs, shape);
    });
  }
  void scale_shift(DType dtype, void* out, const void* a, double scale, double shift, int64_t n) override {
    ops::dispatch_floating(dtype, "scale_shift", [&]<class T>() {
      cpu::scale_shift<T>(static_cast<T*>(out), static_cast<const T*>(a), scale, shift, n);
    });
  }
  void unary(kernels::DeviceUnaryOp op, DType dtype, void* out, const void* x, double param, int64_t n) override {
    using U = kernels::DeviceUnaryOp;
    ops::dispatch_floating(dtype, "unary", [&]<class T>() {
      T* o = static_cast<T*>(out);
      const T* i = static_cast<const T*>(x);
      switch (op) {
        case U::kExp: return cpu::exp_forward(o, i, n);
        case U::kLog: return cpu::log_forward(o, i, n);
        case U::kTanh: return cpu::tanh_forward(o, i, n);
        case U::kSqrt: return cpu::sqrt_forward(o, i, n);
        case U::kPow: return cpu::pow_forward(o, i, param, n);
        case U::kGeluTanh: return cpu::gelu_tanh_forward(o, i, n);
        case U::kGelu: return cpu::gelu_forward(o, i, n);
        case U::kSilu: return cpu::silu_forward(o, i, n);
      }
    });
  }
  void unary_backward(kernels::DeviceUnaryOp op, DType dtype, void* dx, const void* dy, const void* saved, double param,
                      int64_t n) override {
    using U = kernels::DeviceUnaryOp;
    ops::dispatch_floating(dtype, "unary_backward", [&]<class T>() {
      T* g = static_cast<T*>(dx);
      const T* u = static_cast<const T*>(dy);
      const T* s = static_cast<const T*>(saved);
      switch (op) {
        case U::kExp: return cpu::exp_backward(g, u, s, n);
        case U::kLog: return cpu::log_backward(g, u, s, n);
        case U::kTanh: return cpu::tanh_backward(g, u, s, n);
        case U::kSqrt: return cpu::sqrt_backward(g, u, s, n);
        case U::kPow: return cpu::pow_backward(g, u, s, param, n);
        case U::kGeluTanh: return cpu::gelu_tanh_backward(g, u, s, n);
        case U::kGelu: return cpu::gelu_backward(g, u, s, n);
        case U::kSilu: return cpu::silu_backward(g, u, s, n);
      }
    });
  }
  void dropout(DType dtype, void* out, const void* x, int64_t n, double p, uint64_t seed, uint64_t offset) override {
    ops::dispatch_floating(dtype, "dropout", [&]<class T>() {
      cpu::dropout_forward<T>(static_cast<T*>(out), static_cast<const T*>(x), n, p, seed, offset);
    });
  }
  void sum(DType dtype, void* out, const void* in, const Shape& shape, const Strides& strides, const bool* reduce_dim,
           double scale) override {
    ops::dispatch_floating(dtype, "sum", [&]<class T>() {
      cpu::sum_forward<T>(static_cast<T*>(out), static_cast<const T*>(in), shape, strides, reduce_dim, scale);
    });
  }
  void softmax(bool log, DType dtype, void* y, const void* x, int64_t outer, int64_t n, int64_t inner) override {
    ops::dispatch_floating(dtype, "softmax", [&]<class T>() {
      (log ? cpu::log_softmax_forward<T> : cpu::softmax_forward<T>)(static_cast<T*>(y), static_cast<const T*>(x), outer,
                                                                     n, inner);
    });
  }
  void softmax_backward(bool log, DType dtype, void* dx, const void* dy, const void* y, int64_t outer, int64_t n,
                        int64_t inner) override {
    ops::dispatch_floating(dtype, "softmax_backward", [&]<class T>() {
      (log ? cpu::log_softmax_backward<T> : cpu::softmax_backward<T>)(
          static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(y), outer, n, inner);
    });
  }
  double sum_of_squares(DType dtype, const void* x, int64_t n) override {
    double s = 0.0;
    ops::dispatch_floating(dtype, "sum_of_squares", [&]<class T>() {
      for (int64_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(static_cast<const T*>(x)[i]);
        s += v * v;
      }
    });
    return s;
  }
  void gemm(const kernels::GemmArgs& args) override {
    if (args.pre_gelu != nullptr) {  // the product into pre_gelu, then the GELU row by row into C
      kernels::GemmArgs product = args;
      product.c = args.pre_gelu, product.ldc = args.ld_pre_gelu, product.pre_gelu = nullptr;
      gemm(product);
      const size_t esize = element_size(args.c_dtype);
      for (int64_t r = 0; r < args.M; ++r)
        unary(kernels::DeviceUnaryOp::kGeluTanh, args.c_dtype, static_cast<char*>(args.c) + r * args.ldc * esize,
              static_cast<const char*>(args.pre_gelu) + r * args.ld_pre_gelu * esize, 0.0, args.N);
      return;
    }
    kernels::GemmArgs g = args;
    if (g.bias != nullptr) {  // as the host's linear: the bias in every row of C, then beta = 1
      const size_t row = static_cast<size_t>(g.N) * element_size(g.c_dtype);
      for (int64_t r = 0; r < g.M; ++r)
        std::memcpy(static_cast<char*>(g.c) + static_cast<size_t>(r * g.ldc) * element_size(g.c_dtype), g.bias, row);
      g.beta = 1.0;
    }
    ops::dispatch_floating(g.dtype, "gemm", [&]<class T>() {
      for (int64_t i = 0; i < g.batch; ++i) {
        const T* a = static_cast<const T*>(g.a) + i * g.stride_a;
        const T* b = static_cast<const T*>(g.b) + i * g.stride_b;
        if (g.c_dtype == g.dtype) {
          cpu::gemm<T>(g.trans_a, g.trans_b, g.M, g.N, g.K, static_cast<float>(g.alpha), a, g.lda, b, g.ldb,
                       static_cast<float>(g.beta), static_cast<T*>(g.c) + i * g.stride_c, g.ldc);
        } else if constexpr (!std::is_same_v<T, double>) {
          cpu::gemm_to_f32<T>(g.trans_a, g.trans_b, g.M, g.N, g.K, static_cast<float>(g.alpha), a, g.lda, b, g.ldb,
                              static_cast<float>(g.beta), static_cast<float*>(g.c) + i * g.stride_c, g.ldc);
        }
      }
    });
  }
  void rope(DType dtype, void* out, const void* x, int64_t B, int64_t T, int64_t H, int64_t D,
            const RopeParams& params, int64_t pos0, const int64_t* positions, bool inverse) override {
    ops::dispatch_floating(dtype, "rope", [&]<class E>() {
      cpu::rope<E>(static_cast<E*>(out), static_cast<const E*>(x), B, T, H, D, params, pos0, positions, inverse);
    });
  }
  void nf4_dequantize(DType dtype, void* out, const Nf4Data& w, int64_t begin, int64_t end) override {
    ops::dispatch_floating(dtype, "nf4_dequantize", [&]<class T>() { cpu::nf4_dequantize<T>(w, begin, end, static_cast<T*>(out)); });
  }
  void layernorm_forward(DType dtype, void* out, void* mean, void* rstd, const void* x, const void* w, const void* b,
                         int64_t N, int64_t C, double eps) override {
    ops::dispatch_floating(dtype, "layernorm", [&]<class T>() {
      cpu::layernorm_forward<T>(static_cast<T*>(out), static_cast<acc_t<T>*>(mean), static_cast<acc_t<T>*>(rstd),
                                static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), N, C, eps);
    });
  }
  void layernorm_backward(DType dtype, void* dx, void* dw, void* db, const void* dout, const void* x, const void* w,
                          const void* mean, const void* rstd, int64_t N, int64_t C) override {
    ops::dispatch_floating(dtype, "layernorm_backward", [&]<class T>() {
      cpu::layernorm_backward<T>(static_cast<T*>(dx), static_cast<T*>(dw), static_cast<T*>(db),
                                 static_cast<const T*>(dout), static_cast<const T*>(x), static_cast<const T*>(w),
                                 static_cast<const acc_t<T>*>(mean), static_cast<const acc_t<T>*>(rstd), N, C);
    });
  }
  void rmsnorm_forward(DType dtype, void* out, void* rstd, const void* x, const void* w, int64_t N, int64_t C,
                       double eps) override {
    ops::dispatch_floating(dtype, "rmsnorm", [&]<class T>() {
      cpu::rmsnorm_forward<T>(static_cast<T*>(out), static_cast<acc_t<T>*>(rstd), static_cast<const T*>(x),
                              static_cast<const T*>(w), N, C, eps);
    });
  }
  void rmsnorm_backward(DType dtype, void* dx, void* dw, const void* dout, const void* x, const void* w,
                        const void* rstd, int64_t N, int64_t C) override {
    ops::dispatch_floating(dtype, "rmsnorm_backward", [&]<class T>() {
      cpu::rmsnorm_backward<T>(static_cast<T*>(dx), static_cast<T*>(dw), static_cast<const T*>(dout),
                               static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const acc_t<T>*>(rstd), N,
                               C);
    });
  }
  void embedding_forward(DType dtype, DType index_dtype, void* out, const void* w, const void* idx, int64_t N,
                         int64_t C) override {
    ops::dispatch_floating(dtype, "embedding", [&]<class T>() {
      ops::dispatch_index(index_dtype, "embedding", [&]<class I>() {
        cpu::embedding_forward<T, I>(static_cast<T*>(out), static_cast<const T*>(w), static_cast<const I*>(idx), N, C);
      });
    });
  }
  void embedding_backward(DType dtype, DType index_dtype, void* gw, const void* gout, const void* idx, int64_t N,
                          int64_t V, int64_t C) override {
    ops::dispatch_floating(dtype, "embedding_backward", [&]<class T>() {
      ops::dispatch_index(index_dtype, "embedding_backward", [&]<class I>() {
        cpu::embedding_backward<T, I>(static_cast<T*>(gw), static_cast<const T*>(gout), static_cast<const I*>(idx), N,
                                      V, C);
      });
    });
  }
  // Rows ld apart are packed into (N, V) for the host kernels (and unpacked after), which gives
  // the same bits: each row is computed alone, and the loss sums rows in order.
  double cross_entropy_forward(DType dtype, DType index_dtype, void* lse, const void* logits, const void* targets,
                               int64_t N, int64_t V, int64_t ld, int64_t ignore_index) override {
    double total = 0.0;
    ops::dispatch_floating(dtype, "cross_entropy", [&]<class T>() {
      const std::vector<T> packed = pack_rows(static_cast<const T*>(logits), N, V, ld);
      ops::dispatch_index(index_dtype, "cross_entropy", [&]<class I>() {
        total = cpu::cross_entropy_forward<T, I>(static_cast<acc_t<T>*>(lse), packed.data(),
                                                 static_cast<const I*>(targets), N, V, ignore_index);
      });
    });
    return total;
  }
  void cross_entropy_backward(DType dtype, DType index_dtype, void* dlogits, const void* logits, const void* lse,
                              const void* targets, int64_t N, int64_t V, int64_t ld, int64_t ignore_index,
                              double scale) override {
    ops::dispatch_floating(dtype, "cross_entropy_backward", [&]<class T>() {
      std::vector<T> packed = pack_rows(static_cast<const T*>(logits), N, V, ld);
      ops::dispatch_index(index_dtype, "cross_entropy_backward", [&]<class I>() {
        cpu::cross_entropy_backward<T, I>(packed.data(), packed.data(), static_cast<const acc_t<T>*>(lse),
                                          static_cast<const I*>(targets), N, V, ignore_index, scale);
      });
      for (int64_t r = 0; r < N; ++r)
        std::copy_n(packed.data() + r * V, V, static_cast<T*>(dlogits) + r * ld);
    });
  }
  template <class T>
  static std::vector<T> pack_rows(const T* rows, int64_t N, int64_t V, int64_t ld) {
    std::vector<T> packed(static_cast<size_t>(N * V));
    for (int64_t r = 0; r < N; ++r) std::copy_n(rows + r * ld, V, packed.data() + r * V);
    return packed;
  }
  void vocab_parallel_row_max(float* row_max, const float* logits, int64_t N, int64_t V) override {
    cpu::vocab_parallel_row_max(row_max, logits, N, V);
  }
  void vocab_parallel_local_ids(int64_t* local, float* mask, const int64_t* ids, int64_t n, int64_t begin,
                                int64_t rows) override {
    cpu::vocab_parallel_local_ids(local, mask, ids, n, begin, rows);
  }
  void vocab_parallel_sums(double* sums, const float* logits, const float* row_max, const int64_t* targets, int64_t N,
                           int64_t V, int64_t begin) override {
    cpu::vocab_parallel_sums(sums, logits, row_max, targets, N, V, begin);
  }
  void vocab_parallel_backward(float* grad, const float* logits, const float* row_max, const double* sums,
                               const int64_t* targets, int64_t N, int64_t V, int64_t begin, int64_t ignore_index,
                               double scale) override {
    cpu::vocab_parallel_backward(grad, logits, row_max, sums, targets, N, V, begin, ignore_index, scale);
  }
  void attention_forward(DType dtype, DeviceHeads out, void* lse, DeviceHeads q, DeviceHeads k, DeviceHeads v,
                         const kernels::DeviceAttentionShape& s) override {
    ops::dispatch_floating(dtype, "attention", [&]<class T>() {
      cpu::attention_forward<T>(view<T>(out), static_cast<acc_t<T>*>(lse), view<const T>(q), view<const T>(k),
                                view<const T>(v), cpu::AttentionShape{s.B, s.NH, s.NKV, s.T, s.HS, s.causal, s.scale, s.window, s.doc_start, s.doc_end});
    });
  }
  void attention_backward(DType dtype, DeviceHeads dq, DeviceHeads dk, DeviceHeads dv, DeviceHeads dout, DeviceHeads q,
                          DeviceHeads k, DeviceHeads v, DeviceHeads out, const void* lse,
                          const kernels::DeviceAttentionShape& s) override {
    ops::dispatch_floating(dtype, "attention_backward", [&]<class T>() {
      cpu::attention_backward<T>(view<T>(dq), view<T>(dk), view<T>(dv), view<const T>(dout), view<const T>(q),
                                 view<const T>(k), view<const T>(v), view<const T>(out),
                                 static_cast<const acc_t<T>*>(lse),
                                 cpu::AttentionShape{s.B, s.NH, s.NKV, s.T, s.HS, s.causal, s.scale, s.window, s.doc_start, s.doc_end});
    });
  }
  void adamw_update(DType dtype, void* param, const void* grad, float* m, float* v, int64_t n,
                    const kernels::DeviceAdamWStep& s) override {
    ops::dispatch_floating(dtype, "adamw", [&]<class T>() {
      cpu::adamw_update<T>(static_cast<T*>(param), static_cast<const T*>(grad), m, v, n,
                           cpu::AdamWStep{s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.step});
    });
  }
  // The host's update tensor by tensor, each updated parameter then rounded into out[k] as
  // copy_strided rounds it.
  void adamw_update_multi(DType dtype, void* const* param, const void* const* grad, float* const* m, float* const* v,
                          void* const* out, DType out_dtype, const int64_t* n, int64_t count,
                          const kernels::DeviceAdamWStep& s) override {
    TRI_CHECK(out == nullptr || dtype == DType::kF32, "emulated adamw_update_multi: out needs f32 parameters, got ",
              dtype);
    for (int64_t k = 0; k < count; ++k) {
      adamw_update(dtype, param[k], grad[k], m[k], v[k], n[k], s);
      if (out == nullptr) continue;
      ops::dispatch_floating(out_dtype, "adamw_multi", [&]<class O>() {
        const float* p = static_cast<const float*>(param[k]);
        O* o = static_cast<O*>(out[k]);
        for (int64_t i = 0; i < n[k]; ++i) o[i] = convert<O>(p[i]);
      });
    }
  }
};

}  // namespace

void set_emulated_logits_row_multiple(int64_t multiple) { logits_row_multiple_setting = multiple; }

void set_emulated_memory_limit(int64_t bytes) { g_memory_limit.store(bytes); }

Device emulated_device() {
  static const bool registered = [] {
    static CachingAllocator* allocator = new CachingAllocator(std::make_unique<EmulatedMemory>());  // leaked: outlives tensors
    register_device_allocator(DeviceType::kPrivateUse, allocator);
    register_device_ops(DeviceType::kPrivateUse,
                        DeviceOps{&copy, &fill, &copy_strided, nullptr, &copy_async, &wait_copies});
    static EmulatedKernels kernels;
    kernels::register_device_kernels(DeviceType::kPrivateUse, &kernels);
    return true;
  }();
  (void)registered;
  return kDevice;
}

}  // namespace trident::testing
