// Measured GEMM ceilings: GFLOP/s of every GEMM engine on this CPU at a model's shapes, for
// MFU against what this CPU can do rather than against a datasheet peak (issue #20).
//
// Per dtype it times trident's deterministic blocked GEMM on each engine (gemm_on in
// matmul.h: Note [Deterministic GEMM], Note [GEMM engines]) and, as references, each
// library's own multi-threaded GEMM on the same shapes ("...-threaded": cblas_sgemm with
// OpenBLAS's threads, oneDNN's matmul with its OpenMP threads), whose bits depend on the
// thread count, so trident never trains on them. A dtype's ceiling is the fastest of all.
// Timing only: nothing here changes a result, and no test checks a rate beyond positivity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/gemm_engine.h"

namespace trident::kernels::cpu {

// One GEMM of a training step: C (M,N) = op(A) (M,K) @ op(B) (K,N), run `count` times a step.
struct GemmShape {
  std::string name;  // what it is in the step: "mlp.c_fc forward"
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  int64_t count = 1;
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
};

// The linear layers' GEMMs of one training step of a GPT-2-style transformer, B sequences of
// T tokens: per block, c_attn (C -> 3C), attn.c_proj (C -> C), mlp.c_fc (C -> 4C) and
// mlp.c_proj (4C -> C), each L times a step; and the LM head (C -> V, tied to the token
// embedding) once. Per linear in -> out, as op(A) (M, K) @ op(B) (K, N):
//   forward  y  = x W'    M = B*T, N = out, K = in
//   backward dx = dy W'^T M = B*T, N = in,  K = out
//            dW           K = B*T, in W's stored layout (op(A) transposed: trans_a)
// where W' is the weight as an (in, out) matrix, so their FLOPs sum to 6 B T (L 12 C^2 + V C).
// The operands are transposed as trident stores them: the LM head's W is the embedding
// (V, C) = (out, in), so its forward reads W^T (trans_b), its dx reads W as stored, and its
// dW = dy^T x is (out, in): M = out, N = in. The blocks' W is stored (in, out) (Hugging Face's
// Conv1D), so their forward reads it as stored, their dx reads it transposed (trans_b), and
// their dW = x^T dy is (in, out): M = in, N = out (autograd/derivatives/linalg.cc). Not here:
// attention's own products (inside its tiles). The LM head runs as ops::linear_cross_entropy
// does on the host: its three products in chunks of head_chunk_rows rows
// (ops::linear_cross_entropy_chunk_rows: about 2^26 / V rounded down to two GEMM blocks, 1024
// for GPT-2's V = 50257; Note [Head chunks] in ops/loss.cc); 0: one product of B*T rows.
std::vector<GemmShape> transformer_gemm_shapes(int64_t L, int64_t C, int64_t V, int64_t B, int64_t T,
                                               int64_t head_chunk_rows = 0);
// The LM head's three GEMMs (C -> V, W stored (V, C)) over `rows` rows in chunks of
// `chunk_rows` (0: one chunk), as the fused loss runs them: the full chunks as one shape, a
// ragged last one as another.
void append_head_gemm_shapes(std::vector<GemmShape>& shapes, int64_t C, int64_t V, int64_t rows, int64_t chunk_rows);
// The three GEMMs (forward, dx, dW) of one linear layer in -> out applied to `rows` rows,
// `count` times a step; `in_out`: W stored (in, out) as Conv1D, else (out, in) as nn.Linear.
void append_linear_gemm_shapes(std::vector<GemmShape>& shapes, const std::string& name, int64_t in, int64_t out,
                               int64_t count, int64_t rows, bool in_out);

// One engine's rates over the shapes.
struct GemmRate {
  std::string engine;  // gemm_engine_name(), or "openblas-f32-threaded", "onednn-f32-threaded", "onednn-bf16-threaded"
  GemmType dtype = GemmType::kF32;
  bool threaded = false;  // a library's own threading: a reference, not an engine trident trains on
  double gflops = 0.0;    // FLOP-weighted: a step's GEMM FLOPs over its GEMM time (shapes weighted by count)
  double min_gflops = 0.0, max_gflops = 0.0;  // its slowest and fastest shape
  std::vector<double> shape_gflops;           // per shape, in the order of GemmRates::shapes
};

struct GemmRates {
  std::vector<GemmShape> shapes;
  std::vector<GemmRate> rates;  // per dtype, per engine, in gemm_rate_engines' order
  int threads = 0;              // the threads every engine had
  double seconds = 0.0;         // how long measuring took
  // The dtype's fastest engine by weighted rate (the threaded references included, unless
  // `trident_only`); null if the dtype was not measured.
  const GemmRate* fastest(GemmType dtype, bool trident_only = false) const;
  // The dtype's ceiling: the fastest weighted rate, in GFLOP/s (0 if not measured).
  double ceiling_gflops(GemmType dtype) const;
};

struct GemmRateOptions {
  // Each shape runs once to warm up (oneDNN creates its primitives, pages fault in), then
  // until about this long, at least once more; its rate is that of its fastest call.
  double seconds_per_shape = 0.02;
  // Caps on M and N, in blocks per thread, and on K: Note [Bounded measurement] in
  // gemm_rates.cc.
  int64_t blocks_per_thread = 2;
  int64_t max_k = 4096;
};

// The engines measured for a dtype on this CPU, in order. f32: openblas-f32, onednn-f32,
// openblas-f32-threaded, onednn-f32-threaded. bf16: widened-f32 (on the process's f32
// engine); with native bf16 also onednn-bf16 and onednn-bf16-threaded.
std::vector<std::string> gemm_rate_engines(GemmType dtype);

// Times every engine of each dtype at every shape, on the process's threads (num_threads()).
// Bounded: about engines x shapes x (warm-up + seconds_per_shape); GPT-2 124M's 15 shapes on
// 2 cores take about 4 s for both dtypes. Call it when no other GEMM runs (it uses every
// thread); it leaves the process's engines as they were.
GemmRates measure_gemm_rates(const std::vector<GemmShape>& shapes, const std::vector<GemmType>& dtypes,
                             const GemmRateOptions& options = {});

}  // namespace trident::kernels::cpu
