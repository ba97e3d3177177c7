#include "kernels/cpu/gemm_rates.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>

#include "core/check.h"
#include "core/half.h"
#include "core/parallel.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/onednn_gemm.h"

namespace trident::kernels::cpu {

// Note [Bounded measurement]
// Q: Why not time the step's shapes as they are?
// A: GPT-2 124M's 15 shapes on 7 engines would take tens of seconds at full size (the LM
//    head's dx alone is 2 x 4096 x 768 x 50257 = 316 GFLOP). What sets a blocked GEMM's rate
//    is the rate of its blocks (Note [Deterministic GEMM]) with every thread busy, so each
//    shape is timed smaller:
//    - M and N capped at blocks_per_thread blocks per thread (1024 for 2 threads), the
//      extent that is split into kGemmBlock blocks kept the larger, so that the product is
//      still split along the same dimension. Each thread still runs blocks_per_thread
//      blocks of kGemmBlock rows (or columns) at full K; the blocks' other extent shrinks
//      where it was larger than the cap (GPT-2 124M, 2 threads: 2304 and 3072 -> 1024,
//      and the head's 4096 rows).
//    - K capped at max_k (4096): only the LM head's dx (K = V) is shortened; past a few
//      thousand the rate hardly depends on K.
//    - An extent over 16 blocks (the head's vocabulary) is split into 16 wider blocks (Note
//      [Long extents] in matmul.cc), which pack the other operand less often. It is timed as
//      one of those wide blocks per thread (gemm_on's explicit block), the other extent
//      capped as above. Timed in 256-wide blocks instead, the head's shapes read up to ~15%
//      low on a Zen 3.
//    A shape within the caps is timed whole, with its real load imbalance (attn.c_proj's dW
//    at 124M: 3 blocks of 768 rows for 2 threads). Left out: the imbalance of a long
//    extent's last round of blocks, and a ragged last block. Each shape's rate, measured
//    so, stands for the whole shape in the FLOP-weighted rate; the threaded references run
//    the same reduced shapes.
//    Each shape runs once to warm up, then for seconds_per_shape (at least once). At 124M on
//    2 cores (Zen 5) all 7 engines take about 4 s; one dtype, what train.mfu measures, 2 s.

std::vector<GemmShape> transformer_gemm_shapes(int64_t L, int64_t C, int64_t V, int64_t B, int64_t T,
                                               int64_t head_chunk_rows) {
  TRI_CHECK(L >= 0 && C > 0 && V > 0 && B > 0 && T > 0, "transformer_gemm_shapes: expected L >= 0 and C, V, B, T > 0, "
            "got L=", L, " C=", C, " V=", V, " B=", B, " T=", T);
  struct Linear {
    const char* name;
    int64_t in, out, count;
  };
  const Linear linears[] = {{"c_attn", C, 3 * C, L}, {"attn.c_proj", C, C, L}, {"mlp.c_fc", C, 4 * C, L},
                            {"mlp.c_proj", 4 * C, C, L}};
  std::vector<GemmShape> shapes;
  // W stored (in, out), Hugging Face's Conv1D: the GEMMs read it transposed the other way.
  for (const Linear& l : linears) append_linear_gemm_shapes(shapes, l.name, l.in, l.out, l.count, B * T, true);
  append_head_gemm_shapes(shapes, C, V, B * T, head_chunk_rows);
  return shapes;
}

void append_head_gemm_shapes(std::vector<GemmShape>& shapes, int64_t C, int64_t V, int64_t rows, int64_t chunk_rows) {
  TRI_CHECK(C > 0 && V > 0 && rows > 0 && chunk_rows >= 0, "append_head_gemm_shapes: expected C, V, rows > 0 and ",
            "chunk_rows >= 0, got C=", C, " V=", V, " rows=", rows, " chunk_rows=", chunk_rows);
  const int64_t R = chunk_rows > 0 ? std::min(chunk_rows, rows) : rows;
  append_linear_gemm_shapes(shapes, "lm_head", C, V, rows / R, R, false);
  if (rows % R != 0) append_linear_gemm_shapes(shapes, "lm_head (last chunk)", C, V, 1, rows % R, false);
}

void append_linear_gemm_shapes(std::vector<GemmShape>& shapes, const std::string& name, int64_t in, int64_t out,
                               int64_t count, int64_t rows, bool in_out) {
  if (count == 0) return;
  shapes.push_back({name + " forward", rows, out, in, false, !in_out, count});
  shapes.push_back({name + " dx", rows, in, out, false, in_out, count});
  // dW in W's stored layout (autograd/derivatives/linalg.cc): x^T dy (in, out) for Conv1D.
  if (in_out) {
    shapes.push_back({name + " dW", in, out, rows, true, false, count});
  } else {
    shapes.push_back({name + " dW", out, in, rows, true, false, count});
  }
}

const GemmRate* GemmRates::fastest(GemmType dtype, bool trident_only) const {
  const GemmRate* best = nullptr;
  for (const GemmRate& r : rates)
    if (r.dtype == dtype && !(trident_only && r.threaded) && (best == nullptr || r.gflops > best->gflops)) best = &r;
  return best;
}

double GemmRates::ceiling_gflops(GemmType dtype) const {
  const GemmRate* r = fastest(dtype);
  return r != nullptr ? r->gflops : 0.0;
}

std::vector<std::string> gemm_rate_engines(GemmType dtype) {
  if (dtype == GemmType::kF32) return {"openblas-f32", "onednn-f32", "openblas-f32-threaded", "onednn-f32-threaded"};
  std::vector<std::string> e = {"widened-f32"};
  if (onednn_has_native_bf16()) e.insert(e.end(), {"onednn-bf16", "onednn-bf16-threaded"});
  return e;
}

namespace {

using Clock = std::chrono::steady_clock;

// The shape that is timed for `s`, and the rows (or columns) per block it is timed in (0: its
// own) (Note [Bounded measurement]).
struct Bounded {
  GemmShape shape;
  int64_t block = 0;
};

Bounded bounded(const GemmShape& s, int threads, const GemmRateOptions& o) {
  GemmShape m = s;
  const int64_t unit = kGemmBlock * threads;  // one block per thread
  const int64_t cap = std::max<int64_t>(o.blocks_per_thread, 1) * unit;
  auto whole_rounds = [&](int64_t x) { return (x + unit - 1) / unit * unit; };
  m.K = std::min(s.K, std::max<int64_t>(o.max_k, 1));
  const int64_t wide = gemm_block_extent(std::max(s.M, s.N));
  if (wide > kGemmBlock) {  // Note [Long extents]: one of the whole product's blocks per thread
    const int64_t split = std::min(std::max(s.M, s.N), wide * threads);
    if (s.M >= s.N) {
      m.M = split, m.N = std::min(s.N, cap);
    } else {
      m.N = split, m.M = std::min(s.M, cap);
    }
    return {m, wide};
  }
  if (s.M >= s.N) {
    m.N = std::min(s.N, cap);
    m.M = std::min(s.M, std::max(cap, whole_rounds(m.N)));  // still M >= N: split by rows
  } else {
    m.M = std::min(s.M, cap);
    m.N = std::min(s.N, std::max(cap, whole_rounds(m.M + 1)));  // still N > M: split by columns
  }
  return {m, 0};
}

template <class T>
std::unique_ptr<T[]> filled(int64_t n, uint32_t seed) {
  std::unique_ptr<T[]> p(new T[static_cast<size_t>(std::max<int64_t>(n, 1))]);
  parallel_for(0, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {  // values in [-1, 1): no zeros to skip, no denormals
      const uint32_t h = (static_cast<uint32_t>(i) ^ seed) * 2654435761u;
      p[i] = T(static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
  });
  return p;
}

// Seconds of fn's fastest call: one warm-up call, then calls until `budget` seconds have
// passed. The fastest, because a ceiling is what the CPU can do: on a shared machine a call
// can wait milliseconds for a descheduled thread, which says nothing about the engine.
double seconds_per_call(const std::function<void()>& fn, double budget) {
  fn();
  double fastest = std::numeric_limits<double>::infinity();
  const auto start = Clock::now();
  for (auto t0 = start;;) {
    fn();
    const auto t1 = Clock::now();
    fastest = std::min(fastest, std::chrono::duration<double>(t1 - t0).count());
    if (std::chrono::duration<double>(t1 - start).count() >= budget) return fastest;
    t0 = t1;
  }
}

// Runs `engine` on one bounded shape's operands (of its dtype), trident's in `block`s.
void run_engine(const std::string& engine, const GemmShape& m, int64_t block, const void* A, const void* B, void* C) {
  const int64_t lda = m.trans_a ? m.M : m.K, ldb = m.trans_b ? m.K : m.N, ldc = m.N;
  const float* af = static_cast<const float*>(A);
  const float* bf = static_cast<const float*>(B);
  float* cf = static_cast<float*>(C);
  const bf16* ah = static_cast<const bf16*>(A);
  const bf16* bh = static_cast<const bf16*>(B);
  bf16* ch = static_cast<bf16*>(C);
  const GemmEngine f32 = gemm_engine(GemmType::kF32);
  if (engine == "openblas-f32" || engine == "onednn-f32") {
    const GemmEngine e = engine == "onednn-f32" ? GemmEngine::kOneDnn : GemmEngine::kOpenBlas;
    gemm_on<float>({e, GemmEngine::kOpenBlas}, m.trans_a, m.trans_b, m.M, m.N, m.K, 1.0f, af, lda, bf, ldb, 0.0f,
                   cf, ldc, block);
  } else if (engine == "openblas-f32-threaded") {
    cblas_sgemm(CblasRowMajor, m.trans_a ? CblasTrans : CblasNoTrans, m.trans_b ? CblasTrans : CblasNoTrans, m.M, m.N,
                m.K, 1.0f, af, lda, bf, ldb, 0.0f, cf, ldc);
  } else if (engine == "onednn-f32-threaded") {
    onednn_gemm_threaded<float, float>(m.trans_a, m.trans_b, m.M, m.N, m.K, 1.0f, af, lda, bf, ldb, 0.0f, cf, ldc);
  } else if (engine == "widened-f32" || engine == "onednn-bf16") {
    const GemmEngine e = engine == "onednn-bf16" ? GemmEngine::kOneDnn : GemmEngine::kOpenBlas;
    gemm_on<bf16>({f32, e}, m.trans_a, m.trans_b, m.M, m.N, m.K, 1.0f, ah, lda, bh, ldb, 0.0f, ch, ldc, block);
  } else {
    TRI_ASSERT(engine == "onednn-bf16-threaded", "unknown GEMM rate engine ", engine);
    onednn_gemm_threaded<bf16, bf16>(m.trans_a, m.trans_b, m.M, m.N, m.K, 1.0f, ah, lda, bh, ldb, 0.0f, ch, ldc);
  }
}

}  // namespace

GemmRates measure_gemm_rates(const std::vector<GemmShape>& shapes, const std::vector<GemmType>& dtypes,
                             const GemmRateOptions& options) {
  TRI_CHECK(!omp_in_parallel(), "measure_gemm_rates: called inside a parallel region");
  const auto start = Clock::now();
  GemmRates out;
  out.shapes = shapes;
  out.threads = num_threads();
  for (const GemmType dtype : dtypes)
    for (const std::string& engine : gemm_rate_engines(dtype)) {
      GemmRate r;
      r.engine = engine;
      r.dtype = dtype;
      r.threaded = engine.ends_with("-threaded");
      out.rates.push_back(std::move(r));
    }
  // Shape by shape, so that each shape's operands are made once for all its engines.
  for (const GemmShape& shape : shapes) {
    const auto [m, block] = bounded(shape, out.threads, options);
    TRI_CHECK(m.M > 0 && m.N > 0 && m.K > 0, "measure_gemm_rates: shape '", shape.name, "' is empty (M=", shape.M,
              " N=", shape.N, " K=", shape.K, ")");
    for (const GemmType dtype : dtypes) {
      const bool f32 = dtype == GemmType::kF32;
      std::unique_ptr<float[]> af, bf, cf;
      std::unique_ptr<bf16[]> ah, bh, ch;
      if (f32) {
        af = filled<float>(m.M * m.K, 1), bf = filled<float>(m.K * m.N, 2), cf = filled<float>(m.M * m.N, 3);
      } else {
        ah = filled<bf16>(m.M * m.K, 1), bh = filled<bf16>(m.K * m.N, 2), ch = filled<bf16>(m.M * m.N, 3);
      }
      const void* A = f32 ? static_cast<const void*>(af.get()) : ah.get();
      const void* B = f32 ? static_cast<const void*>(bf.get()) : bh.get();
      void* C = f32 ? static_cast<void*>(cf.get()) : ch.get();
      for (GemmRate& r : out.rates) {
        if (r.dtype != dtype) continue;
        // &m = m, &block = block: clang before 16 cannot capture a structured binding (fuzz/ builds with clang 14).
        const double s = seconds_per_call([&, &m = m, &block = block] { run_engine(r.engine, m, block, A, B, C); },
                                          options.seconds_per_shape);
        r.shape_gflops.push_back(m.flops() / std::max(s, 1e-12) / 1e9);
      }
    }
  }
  for (GemmRate& r : out.rates) {
    double flops = 0.0, seconds = 0.0;
    r.min_gflops = std::numeric_limits<double>::infinity();
    r.max_gflops = 0.0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const double f = shapes[i].flops() * static_cast<double>(shapes[i].count), g = r.shape_gflops[i];
      flops += f;
      seconds += f / (g * 1e9);
      r.min_gflops = std::min(r.min_gflops, g);
      r.max_gflops = std::max(r.max_gflops, g);
    }
    r.gflops = seconds > 0.0 ? flops / seconds / 1e9 : 0.0;
    if (shapes.empty()) r.min_gflops = 0.0;
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace trident::kernels::cpu
