#include "kernels/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <type_traits>

#include "core/allocator.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm_engine.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/onednn_gemm.h"

namespace trident::kernels::cpu {

// Note [Deterministic GEMM]
// Why not let OpenBLAS thread each call? Its OpenMP build splits the output differently for
// different thread counts and its edge micro-kernels sum in a different order, so the same
// product gives different bits with 1 and 2 threads (measured: 64x80x96 and every GPT-2
// shape differ). We want results independent of the thread count, so we split the output
// ourselves into fixed blocks of kGemmBlock rows (or columns, when N > M), whose boundaries
// depend only on the shape, and compute each block with a single-threaded BLAS call.
// OpenBLAS's OpenMP build runs single-threaded inside an active parallel region, and we
// pin it to one thread when a block runs on the calling thread. Measured on 2 cores, this
// is as fast as OpenBLAS's own threading at GPT-2 shapes (bench/matmul_bench).
// Tried on a Zen 3 (2 cores, LLaMA-125M's shapes), and why we keep this:
//  * one block per thread runs ~11% faster (each call repacks the other operand once), but
//    no alignment makes OpenBLAS's bits independent of where the blocks end: row blocks of
//    any multiple of 48 rows matched the whole call at 4096 x 768 x 768 yet not at 300 x 70 x 33,
//    and every column split differed from the whole call.
//  * BLIS (Debian's libblis, zen3 kernels) gives the same bits on any thread count by design
//    and scales 1.9x on 2 threads, but ran the blocks' shapes ~10% slower than this.

namespace {

// Runs fn with OpenMP (hence OpenBLAS) limited to the calling thread.
template <class Fn>
void on_this_thread_only(const Fn& fn) {
  if (omp_in_parallel()) return fn();
  struct Restore {  // also when fn throws (a oneDNN error), or the process stays on one thread
    int saved = omp_get_max_threads();
    ~Restore() { omp_set_num_threads(saved); }
  } restore;
  omp_set_num_threads(1);
  fn();
}

void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
              alpha, A, lda, B, ldb, beta, C, ldc);
}
void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, float beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
              alpha, A, lda, B, ldb, beta, C, ldc);
}

// Note [Even block counts]
// A product whose split extent is 3, 5 or 7 blocks of kGemmBlock leaves a thread of two idle
// for a third to a seventh of it: LLaMA-125M's q_proj and o_proj dW (768 x 768) and its k/v
// dW (256 x 768, split by columns) are 3 blocks. Those extents are split into twice as many
// blocks instead, of a multiple of 16 rows (one f32 vector). Measured on a Zen 4 (2 threads,
// oneDNN): a 768-row block of 128 costs no more per FLOP than one of 256 in f32 and 7% more in
// bf16, against the third of the product that ran on one thread. The split is still a
// function of the shape alone, so the bits stay independent of the thread count; a product of
// one block (gemm_serial's) and every extent of an even or larger count is split as before.
//
// Note [Long extents]
// Each block is its own BLAS call, which packs the whole of the other operand again: the LM
// head's forward (4096 x 32000 x 768, split by its 32000 columns) packed its 4096 x 768 input
// 125 times. An extent longer than kMaxGemmBlocks blocks is cut into kMaxGemmBlocks blocks
// instead (a multiple of 64), which still feeds 16 threads. Measured on 2 Zen 3 cores,
// alternating in one process: that forward ran 17-19% faster on OpenBLAS and 15% on oneDNN
// (f32). Extents up to 4096 (a 4096-token batch, every tiny test) keep their blocks and bits.
constexpr int64_t kMaxGemmBlocks = 16;

}  // namespace

int64_t gemm_block_extent(int64_t extent) {
  if (extent > kMaxGemmBlocks * kGemmBlock) return (extent + kMaxGemmBlocks * 64 - 1) / (kMaxGemmBlocks * 64) * 64;
  const int64_t blocks = (extent + kGemmBlock - 1) / kGemmBlock;
  if (blocks % 2 == 0 || blocks < 3 || blocks > 7) return kGemmBlock;
  return (extent + 2 * blocks * 16 - 1) / (2 * blocks * 16) * 16;
}

namespace {

// How gemm_blocks splits a product: on the calling thread only (gemm_serial's), and the rows
// (or columns) per block (0: the shape's own, gemm_block_extent).
struct Split {
  bool serial = false;
  int64_t block = 0;
};

// The blocks of an (M, N) product: along its rows or its columns, whichever is longer, of
// `block` (0: the shape's own, gemm_block_extent) rows or columns, the last one shorter.
struct BlockSplit {
  bool by_rows;
  int64_t extent, block, blocks;
};
BlockSplit block_split(int64_t M, int64_t N, int64_t block) {
  const bool by_rows = M >= N;
  const int64_t extent = by_rows ? M : N;
  if (block <= 0) block = gemm_block_extent(extent);
  return {by_rows, extent, block, (extent + block - 1) / block};
}

// Splits C into the fixed blocks of Note [Deterministic GEMM] (and Note [Even block counts])
// and has block_gemm compute each on one thread: block_gemm(a, b, c, rows, cols) multiplies
// op(A)'s rows (or op(B)'s columns) starting at a (or b) into C's block at c.
template <class In, class Out, class BlockGemm>
void gemm_blocks(bool ta, bool tb, int64_t M, int64_t N, const In* A, int64_t lda, const In* B, int64_t ldb,
                 Out* C, int64_t ldc, Split split, const BlockGemm& block_gemm) {
  // Named variables, not a structured binding: clang before 16 cannot capture one (fuzz/ builds with clang 14).
  const BlockSplit split_c = block_split(M, N, split.block);
  const bool by_rows = split_c.by_rows;
  const int64_t extent = split_c.extent, block = split_c.block, blocks = split_c.blocks;
  auto run = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t start = b * block, len = std::min(block, extent - start);
      if (by_rows) {
        block_gemm(ta ? A + start : A + start * lda, B, C + start * ldc, len, N);  // op(A) rows are A's columns when transposed
      } else {
        block_gemm(A, tb ? B + start * ldb : B + start, C + start, M, len);
      }
    }
  };
  if (split.serial || blocks == 1 || omp_in_parallel() || num_threads() == 1) {
    on_this_thread_only([&] { run(0, blocks); });
  } else {
    parallel_for(0, blocks, 1, run);  // inside an active region: BLAS is single-threaded
  }
}

// oneDNN's matmul (f32 on AVX-512, bf16 with native bf16: gemm_engine.h), blocked the same way.
template <class In, class Out>
void gemm_onednn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const In* A, int64_t lda,
                 const In* B, int64_t ldb, float beta, Out* C, int64_t ldc, Split split) {
  gemm_blocks(ta, tb, M, N, A, lda, B, ldb, C, ldc, split,
              [&](const In* a, const In* b, Out* c, int64_t rows, int64_t cols) {
                onednn_gemm_serial<In, Out>(ta, tb, rows, cols, K, alpha, a, lda, b, ldb, beta, c, ldc);
              });
}

// f32 on its engine, f64 on OpenBLAS.
template <class T>
void gemm_native(const GemmEngines& engines, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                 const T* A, int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc, Split split) {
  if constexpr (std::is_same_v<T, float>) {
    if (engines.f32 == GemmEngine::kOneDnn)
      return gemm_onednn<float, float>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, split);
  }
  gemm_blocks(ta, tb, M, N, A, lda, B, ldb, C, ldc, split,
              [&](const T* a, const T* b, T* c, int64_t rows, int64_t cols) {
                blas(ta, tb, rows, cols, K, alpha, a, lda, b, ldb, beta, c, ldc);
              });
}

// Copies a stored matrix (rows x cols, row stride ld) into a dense f32 one, in the same
// layout: contiguous reads and writes that vectorize (bf16 -> f32 is a shift). Transposes
// stay BLAS's job.
template <class T>
void widen(float* dst, const T* src, int64_t rows, int64_t cols, int64_t ld) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* in = src + r * ld;
      float* out = dst + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<float>(in[c]);
    }
  });
}

DataPtr scratch(int64_t floats) {
  return host_allocator().allocate(static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float),
                                   MemoryCategory::kActivation);
}

// BLAS requires leading dims >= the stored row length even when a dim is 1.
void normalize_leading_dims(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t& lda, int64_t& ldb,
                            int64_t& ldc) {
  lda = std::max<int64_t>(lda, std::max<int64_t>(trans_a ? M : K, 1));
  ldb = std::max<int64_t>(ldb, std::max<int64_t>(trans_b ? K : N, 1));
  ldc = std::max<int64_t>(ldc, std::max<int64_t>(N, 1));
}

// bf16/f16 operands widened to f32 (in their stored layout), multiplied with f32
// accumulation into the float C.
template <class T>
void gemm_widened(const GemmEngines& engines, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const T* A, int64_t lda, const T* B, int64_t ldb, float beta, float* C, int64_t ldc, Split split) {
  // As stored: op(A) is (M,K), stored (K,M) when transposed; likewise B.
  const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  DataPtr a = scratch(M * K), b = scratch(K * N);
  float* af = static_cast<float*>(a.get());
  float* bf = static_cast<float*>(b.get());
  widen(af, A, trans_a ? K : M, a_cols, lda);
  widen(bf, B, trans_b ? N : K, b_cols, ldb);
  gemm_native<float>(engines, trans_a, trans_b, M, N, K, alpha, af, std::max<int64_t>(a_cols, 1), bf,
                     std::max<int64_t>(b_cols, 1), beta, C, ldc, split);
}

// The process's engines that a GEMM of T reads, and only those: a bad TRIDENT_CPU_BF16_GEMM
// must not break f32 GEMMs, nor a bad f32 one bf16 GEMMs on oneDNN (f64 reads neither).
template <class T>
GemmEngines process_engines() {
  GemmEngines e;
  if constexpr (std::is_same_v<T, bf16>) e.bf16 = gemm_engine(GemmType::kBF16);
  if constexpr (!std::is_same_v<T, double>) {
    if (e.bf16 != GemmEngine::kOneDnn) e.f32 = gemm_engine(GemmType::kF32);  // widened bf16 runs on it
  }
  return e;
}

template <class T>
void gemm_any(const GemmEngines& engines, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const T* A, int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc, Split split) {
  if (M == 0 || N == 0) return;
  normalize_leading_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    gemm_native<T>(engines, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, split);
  } else {
    if constexpr (std::is_same_v<T, bf16>) {
      if (engines.bf16 == GemmEngine::kOneDnn) {
        return gemm_onednn<bf16, bf16>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, split);
      }
    }
    // bf16/f16 storage: an f32 product, rounded to T once.
    DataPtr c = scratch(M * N);
    float* cf = static_cast<float*>(c.get());
    if (beta != 0.0f) widen(cf, C, M, N, ldc);
    gemm_widened(engines, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, cf, N, split);
    parallel_for(0, M, std::max<int64_t>(1, 8192 / N), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r)
        for (int64_t j = 0; j < N; ++j) C[r * ldc + j] = T(cf[r * N + j]);
    });
  }
}

// A decode step's product (few rows) on gemv.h's kernels: bandwidth-bound, where an engine's
// blocking and packing only cost. Returns whether it took the product.
template <class T>
bool small_product(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A, int64_t lda,
                   const T* B, int64_t ldb, float beta, T* C, int64_t ldc, bool serial) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16>) {
    if (!gemv_applies(trans_a, M, K) || N == 0) return false;
    normalize_leading_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
    gemv<T>(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, serial);
    return true;
  }
  return false;
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc) {
  if (small_product(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false)) return;
  gemm_any(process_engines<T>(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Split{});
}

template <class T>
void gemm_on(const GemmEngines& engines, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const T* A, int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc, int64_t block) {
  TRI_CHECK(block >= 0, "gemm_on: block must be >= 0 (0: the shape's own), got ", block);
  gemm_any(engines, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Split{.block = block});
}

template <class T>
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                 const T* A, int64_t lda, const T* B, int64_t ldb, float beta, T* C, int64_t ldc) {
  if (small_product(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, true)) return;
  gemm_any(process_engines<T>(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Split{.serial = true});
}

template <class T>
void gemm_to_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A,
                 int64_t lda, const T* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  normalize_leading_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  const GemmEngines engines = process_engines<T>();
  if constexpr (std::is_same_v<T, float>) {
    gemm_native<float>(engines, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Split{});
  } else {
    if constexpr (std::is_same_v<T, bf16>) {
      if (engines.bf16 == GemmEngine::kOneDnn) {
        return gemm_onednn<bf16, float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Split{});
      }
    }
    gemm_widened(engines, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Split{});
  }
}

template <class T>
int64_t gemm_engine_scratch_bytes(const GemmEngines& engines, int threads, bool trans_a, bool trans_b, int64_t M,
                                  int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, float beta) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>, "gemm_engine_scratch_bytes: float or bf16");
  if (M == 0 || N == 0 || engines.of(std::is_same_v<T, float> ? GemmType::kF32 : GemmType::kBF16) != GemmEngine::kOneDnn)
    return 0;
  normalize_leading_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  // gemm_blocks' split, each thread running one block at a time: the larger scratch of a full
  // block and the last one (a shorter block may take another of oneDNN's kernels).
  const BlockSplit split_c = block_split(M, N, 0);  // not a structured binding: see gemm_blocks
  const bool by_rows = split_c.by_rows;
  const int64_t extent = split_c.extent, block = split_c.block, blocks = split_c.blocks;
  const int64_t last = extent - (blocks - 1) * block;
  auto scratch = [&](int64_t len) {
    return onednn_gemm_serial_scratchpad_bytes<T, T>(trans_a, trans_b, by_rows ? len : M, by_rows ? N : len, K, lda, ldb,
                                                     ldc, 1.0f, beta);
  };
  return std::max(scratch(std::min(block, extent)), scratch(last)) * std::min<int64_t>(blocks, std::max(threads, 1));
}

template int64_t gemm_engine_scratch_bytes<float>(const GemmEngines&, int, bool, bool, int64_t, int64_t, int64_t,
                                                  int64_t, int64_t, int64_t, float);
template int64_t gemm_engine_scratch_bytes<bf16>(const GemmEngines&, int, bool, bool, int64_t, int64_t, int64_t,
                                                 int64_t, int64_t, int64_t, float);

template void gemm_to_f32<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                 int64_t, float, float*, int64_t);
template void gemm_to_f32<bf16>(bool, bool, int64_t, int64_t, int64_t, float, const bf16*, int64_t, const bf16*,
                                int64_t, float, float*, int64_t);
template void gemm_to_f32<f16>(bool, bool, int64_t, int64_t, int64_t, float, const f16*, int64_t, const f16*,
                               int64_t, float, float*, int64_t);

#define TRI_INSTANTIATE(T)                                                                      \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, float, const T*, int64_t,        \
                        const T*, int64_t, float, T*, int64_t);                                 \
  template void gemm_serial<T>(bool, bool, int64_t, int64_t, int64_t, float, const T*, int64_t, \
                               const T*, int64_t, float, T*, int64_t);                          \
  template void gemm_on<T>(const GemmEngines&, bool, bool, int64_t, int64_t, int64_t, float,    \
                           const T*, int64_t, const T*, int64_t, float, T*, int64_t, int64_t);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
