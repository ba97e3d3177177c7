#include "kernels/cpu/onednn_int8_gemm.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>

#include "core/check.h"
#include "kernels/cpu/onednn_gemm.h"

namespace trident::kernels::cpu {

namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

dnnl::engine& int8_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The matmul of an (M, K) s8 A with row stride lda, the weight in `weights` (oneDNN's layout,
// or `any` to let it choose), into an (M, N) f32 C with row stride ldc.
dnnl::matmul::primitive_desc matmul_desc(int64_t M, int64_t K, int64_t lda, const dnnl::memory::desc& weights,
                                         int64_t N, int64_t ldc) {
  const dnnl::memory::desc a(dims{M, K}, dt::s8, dims{lda, 1});
  const dnnl::memory::desc c(dims{M, N}, dt::f32, dims{ldc, 1});
  try {
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, weights, c), int8_engine());
  } catch (const dnnl::error& e) {
    TRI_CHECK(false, "oneDNN has no int8 matmul for M=", M, " N=", N, " K=", K, " on this CPU (ISA ",
              onednn_cpu_isa(), "): ", e.what());
  }
  return {};
}

// Note [oneDNN's int8 weight layout]
// The weight is reordered once, into the layout oneDNN picks for a 256-row product (on AMX,
// BA16a64b4a); the same descriptor serves every M here (oneDNN 2.6 picks the same one for 1 to
// 2048 rows on Sapphire/Emerald Rapids). Where it did not, the primitive for that M is built
// on the stored layout anyway, so the weight is never reordered per call.
constexpr int64_t kLayoutRows = 256;

struct Key {
  int64_t M, N, K, lda, ldc;
  int threads;
  bool operator<(const Key& o) const {
    return std::tie(M, N, K, lda, ldc, threads) < std::tie(o.M, o.N, o.K, o.lda, o.ldc, o.threads);
  }
};

}  // namespace

struct OnednnInt8Weights::Impl {
  dnnl::memory::desc desc;
  dnnl::memory memory;
};

OnednnInt8Weights::OnednnInt8Weights(const int8_t* W, int64_t N, int64_t K, int64_t ldw, const float* scale)
    : N_(N), K_(K), scales_(scale, scale + N), impl_(std::make_unique<Impl>()) {
  TRI_CHECK(N > 0 && K > 0 && ldw >= K, "OnednnInt8Weights: N=", N, " K=", K, " ldw=", ldw,
            " (need N, K > 0 and ldw >= K)");
  const dnnl::memory::desc any(dims{K, N}, dt::s8, dnnl::memory::format_tag::any);
  impl_->desc = matmul_desc(kLayoutRows, K, K, any, N, N).weights_desc();
  impl_->memory = dnnl::memory(impl_->desc, int8_engine());
  // W (N, K) row-major is (K, N) with strides (1, K); dense first (oneDNN 2.6 has no reorder
  // from some padded rows, K = 3 with stride 4 among them).
  std::vector<int8_t> dense(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) std::copy(W + n * ldw, W + n * ldw + K, dense.begin() + n * K);
  const dnnl::memory::desc plain(dims{K, N}, dt::s8, dims{1, K});
  dnnl::memory source(plain, int8_engine(), dense.data());
  dnnl::stream stream(int8_engine());
  try {
    dnnl::reorder(source, impl_->memory).execute(stream, source, impl_->memory);
  } catch (const dnnl::error& e) {
    TRI_CHECK(false, "oneDNN cannot reorder an int8 weight of (", N, ", ", K, ") with row stride ", ldw,
              " into its matmul's layout on this CPU (ISA ", onednn_cpu_isa(), "): ", e.what());
  }
  stream.wait();
}

OnednnInt8Weights::~OnednnInt8Weights() = default;
OnednnInt8Weights::OnednnInt8Weights(OnednnInt8Weights&&) noexcept = default;
OnednnInt8Weights& OnednnInt8Weights::operator=(OnednnInt8Weights&&) noexcept = default;

int64_t OnednnInt8Weights::nbytes() const { return static_cast<int64_t>(impl_->desc.get_size()); }

void onednn_int8_gemm(int64_t M, const int8_t* A, int64_t lda, const float* a_scale, const OnednnInt8Weights& w,
                      const float* bias, float* C, int64_t ldc) {
  const int64_t N = w.N(), K = w.K();
  TRI_CHECK(M >= 0 && lda >= K && ldc >= N, "onednn_int8_gemm: M=", M, " lda=", lda, " ldc=", ldc,
            " for a weight of (", N, ", ", K, ") (need M >= 0, lda >= K, ldc >= N)");
  TRI_CHECK(!omp_in_parallel(), "onednn_int8_gemm: called inside a parallel region");
  if (M == 0) return;
  // One primitive per shape and thread count (creating one takes tens of microseconds), per
  // calling thread; bounded, as generation meets a new M for each batch size.
  thread_local std::map<Key, dnnl::matmul> cache;
  const Key key{M, N, K, lda, ldc, omp_get_max_threads()};
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= 256) cache.clear();
    it = cache.emplace(key, dnnl::matmul(matmul_desc(M, K, lda, w.impl().desc, N, ldc))).first;
  }
  dnnl::engine& engine = int8_engine();
  const dnnl::memory a(dnnl::memory::desc(dims{M, K}, dt::s8, dims{lda, 1}), engine, const_cast<int8_t*>(A));
  const dnnl::memory c(dnnl::memory::desc(dims{M, N}, dt::f32, dims{ldc, 1}), engine, C);
  thread_local dnnl::stream stream(engine);
  it->second.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, w.impl().memory}, {DNNL_ARG_DST, c}});
  stream.wait();
  int8_gemm_epilogue(M, N, a_scale, w.scales(), bias, C, ldc);
}

}  // namespace trident::kernels::cpu
