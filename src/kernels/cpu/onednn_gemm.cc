#include "kernels/cpu/onednn_gemm.h"

#include <omp.h>

#include <bit>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>

#include "core/allocator.h"
#include "core/check.h"
#include "core/half.h"

namespace trident::kernels::cpu {

namespace {

using dt = dnnl::memory::data_type;

template <class T>
constexpr dt dnnl_type() {
  if constexpr (std::is_same_v<T, float>) return dt::f32;
  else return dt::bf16;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One primitive per shape, leading dims, scalars and types: creating one takes tens of
// microseconds, and a training step repeats a few dozen shapes.
struct Key {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  uint32_t alpha_bits, beta_bits;
  dt in, out;
  int threads;  // 0: a block of the deterministic GEMM; else onednn_gemm_threaded's thread count
  bool operator<(const Key& o) const {
    return std::tie(ta, tb, M, N, K, lda, ldb, ldc, alpha_bits, beta_bits, in, out, threads) <
           std::tie(o.ta, o.tb, o.M, o.N, o.K, o.lda, o.ldb, o.ldc, o.alpha_bits, o.beta_bits, o.in, o.out, o.threads);
  }
};

struct Entry {
  dnnl::matmul matmul;
  dnnl::memory::desc a, b, c, scratchpad;
};

// oneDNN threads with OpenMP; the product must run on the calling thread only, both so the
// block split of Note [Deterministic GEMM] alone decides the summation order, and so blocks
// already running in parallel do not nest. Primitives are also created under this guard, so
// oneDNN tunes them for one thread.
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

std::string shape_text(const Key& k) {
  return std::string(k.ta ? "A^T" : "A") + " @ " + (k.tb ? "B^T" : "B") + " with M=" + std::to_string(k.M) +
         " N=" + std::to_string(k.N) + " K=" + std::to_string(k.K);
}

std::shared_ptr<const Entry> create(const Key& k) {
  using dims = dnnl::memory::dims;
  // op(A) is (M,K): stored (K,M) when transposed, so its row index steps by 1. Likewise B.
  dnnl::memory::desc a(dims{k.M, k.K}, k.in, k.ta ? dims{1, k.lda} : dims{k.lda, 1});
  dnnl::memory::desc b(dims{k.K, k.N}, k.in, k.tb ? dims{1, k.ldb} : dims{k.ldb, 1});
  dnnl::memory::desc c(dims{k.M, k.N}, k.out, dims{k.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per call: blocks run concurrently
  const float alpha = std::bit_cast<float>(k.alpha_bits), beta = std::bit_cast<float>(k.beta_bits);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops post;
    post.append_sum(beta);
    attr.set_post_ops(post);
  }
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
    return std::make_shared<const Entry>(Entry{dnnl::matmul(pd), a, b, c, pd.scratchpad_desc()});
  } catch (const dnnl::error& e) {
    TRI_CHECK(false, "oneDNN has no matmul for ", shape_text(k), " in ", k.in == dt::bf16 ? "bf16" : "f32",
              " on this CPU (ISA ", onednn_cpu_isa(), "): ", e.what(),
              "; bf16 needs AVX512_BF16 or AMX (kernels.bf16_gemm = \"widen\" or TRIDENT_CPU_BF16_GEMM=widen "
              "multiplies in f32; kernels.f32_gemm = \"openblas\" for f32)");
  }
  return nullptr;
}

// Per thread, so that small GEMMs inside parallel loops (attention's) never take a lock; a
// shape first met on each thread is created once per thread (oneDNN's own primitive cache
// makes the second creation cheap).
std::shared_ptr<const Entry> entry_for(const Key& k) {
  thread_local std::map<Key, std::shared_ptr<const Entry>> cache;
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  // Training repeats a few dozen shapes; generation grows T every token. Stay bounded (oneDNN
  // keeps its own cache of recent primitives behind this one).
  if (cache.size() >= 256) cache.clear();
  return cache.emplace(k, create(k)).first->second;
}

}  // namespace

bool onednn_has_native_bf16() {
  // dnnl's ISA values are bit sets: every ISA with native bf16 contains avx512_core_bf16's bits.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

bool onednn_has_avx512() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & avx512) == avx512;
}

std::string onednn_cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

namespace {

// The product on the calling thread only (threads 0, under OneThread), or on oneDNN's OpenMP
// threads (threads: the process's setting, so a primitive tuned for another count is not reused).
template <class In, class Out>
void onednn_gemm(int threads, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const In* A,
                 int64_t lda, const In* B, int64_t ldb, float beta, Out* C, int64_t ldc) {
  static_assert(std::is_same_v<In, float> || std::is_same_v<In, bf16>, "oneDNN GEMM operands: f32 or bf16");
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, In>, "oneDNN GEMM result: f32 or the operands' type");
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C = beta * C (oneDNN's matmul wants K > 0)
    for (int64_t r = 0; r < M; ++r)
      for (int64_t j = 0; j < N; ++j) C[r * ldc + j] = Out(beta == 0.0f ? 0.0f : beta * static_cast<float>(C[r * ldc + j]));
    return;
  }
  const Key key{trans_a, trans_b, M, N, K, lda, ldb, ldc, std::bit_cast<uint32_t>(alpha), std::bit_cast<uint32_t>(beta),
                dnnl_type<In>(), dnnl_type<Out>(), threads};
  std::optional<OneThread> one_thread;
  if (threads == 0) one_thread.emplace();
  const std::shared_ptr<const Entry> entry = entry_for(key);
  dnnl::engine& engine = cpu_engine();
  dnnl::memory a(entry->a, engine, const_cast<In*>(A));
  dnnl::memory b(entry->b, engine, const_cast<In*>(B));
  dnnl::memory c(entry->c, engine, C);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  DataPtr scratch;
  if (const size_t scratch_bytes = entry->scratchpad.get_size(); scratch_bytes > 0) {
    scratch = host_allocator().allocate(scratch_bytes, MemoryCategory::kActivation);
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(entry->scratchpad, engine, scratch.get()));
  }
  thread_local dnnl::stream stream(engine);
  entry->matmul.execute(stream, args);
  stream.wait();
}

}  // namespace

// Note [oneDNN's scratchpad]
// oneDNN 2.6's brgemm matmul (its fast one) takes only a C whose rows are dense. A block of a
// product split by columns (Note [Deterministic GEMM] in matmul.cc) writes into C with the
// whole product's row stride, so oneDNN runs its older gemm-based matmul there, which makes a
// bf16 C's f32 product in the scratchpad first: M x N x 4 bytes per block, per thread. The
// fused head's logits GEMM is such a product, split into 16 blocks of the vocabulary (Note
// [Long extents]): GPT-2's is 1024 rows x 3200 columns, 13 MB per thread, and the memory
// model counts it (found on a Zen 5: tiny GPT-2 in bf16 was 13.1 MB above the predicted
// activations). An f32 C needs none. The brgemm path is no faster here: on one Zen 5 core, GPT-2
// 124M's logits in blocks of 4096 x 3200 ran at 444-470 GFLOP/s strided and 458-478 as dense
// 256-row products copied into place (LLaMA-125M's 2048-column blocks: 449-465 and 458-466).
template <class In, class Out>
int64_t onednn_gemm_serial_scratchpad_bytes(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda,
                                            int64_t ldb, int64_t ldc, float alpha, float beta) {
  if (M == 0 || N == 0 || K == 0) return 0;
  const Key key{trans_a, trans_b, M, N, K, lda, ldb, ldc, std::bit_cast<uint32_t>(alpha), std::bit_cast<uint32_t>(beta),
                dnnl_type<In>(), dnnl_type<Out>(), 0};
  OneThread one_thread;  // created as onednn_gemm_serial creates it
  return static_cast<int64_t>(entry_for(key)->scratchpad.get_size());
}

template <class In, class Out>
void onednn_gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const In* A,
                        int64_t lda, const In* B, int64_t ldb, float beta, Out* C, int64_t ldc) {
  onednn_gemm<In, Out>(0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class In, class Out>
void onednn_gemm_threaded(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const In* A,
                          int64_t lda, const In* B, int64_t ldb, float beta, Out* C, int64_t ldc) {
  TRI_CHECK(!omp_in_parallel(), "onednn_gemm_threaded: called inside a parallel region");
  onednn_gemm<In, Out>(omp_get_max_threads(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                       ldc);
}

template void onednn_gemm_threaded<float, float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                                 const float*, int64_t, float, float*, int64_t);
template void onednn_gemm_threaded<bf16, bf16>(bool, bool, int64_t, int64_t, int64_t, float, const bf16*, int64_t,
                                               const bf16*, int64_t, float, bf16*, int64_t);
template int64_t onednn_gemm_serial_scratchpad_bytes<float, float>(bool, bool, int64_t, int64_t, int64_t, int64_t,
                                                                   int64_t, int64_t, float, float);
template int64_t onednn_gemm_serial_scratchpad_bytes<bf16, bf16>(bool, bool, int64_t, int64_t, int64_t, int64_t,
                                                                 int64_t, int64_t, float, float);
template void onednn_gemm_serial<float, float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                               const float*, int64_t, float, float*, int64_t);
template void onednn_gemm_serial<bf16, float>(bool, bool, int64_t, int64_t, int64_t, float, const bf16*, int64_t,
                                              const bf16*, int64_t, float, float*, int64_t);
template void onednn_gemm_serial<bf16, bf16>(bool, bool, int64_t, int64_t, int64_t, float, const bf16*, int64_t,
                                             const bf16*, int64_t, float, bf16*, int64_t);

}  // namespace trident::kernels::cpu
