// MFU on the CPU (issue #20): a step's model FLOPs per second, by PaLM's count, over the
// fastest GEMM rate this CPU measured for the run's dtype at the model's own shapes
// (kernels/cpu/gemm_rates.h): a ceiling this machine reaches, not a datasheet's peak.
// Measuring takes seconds, so it is opt-in (train.mfu, `trident gemm-rates`).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "kernels/cpu/gemm_rates.h"
#include "core/dtype.h"
#include "models/model_config.h"

namespace trident::models {
class CausalLM;
}
namespace trident::parallel {
class PlacementTable;
}

namespace trident::train {

struct TrainConfig;

// The GEMM type a compute dtype's matmuls run as on the CPU (PrecisionOptions::compute_dtype()):
// bf16 for bf16, f32 for f32 and f16 (f16 is always widened to f32: Note [GEMM engines]).
kernels::cpu::GemmType gemm_type_of_precision(DType compute);

// Note [MFU's N]
// PaLM's 6 N counts 2 FLOPs per parameter per token forward and 4 backward: true of a weight a
// token is multiplied by, not of an embedding table a token only gathers a row of. So N here is
// every parameter but those tables: an untied token embedding (LLaMA's embed_tokens: its
// matmul is the separate lm_head, which counts) and a learned position embedding (GPT-2's wpe).
// A tied token embedding (GPT-2's wte) is the LM head's matrix and counts, once. Norm weights
// and biases count (PaLM's N does; they are under 0.1% here). Counting every parameter
// overstated LLaMA-125M's FLOPs by 6 x 24.6M per token, 15% (an MFU of 122% on a 2-core Zen 4).
//
// N of Note [MFU's N] from each parameter's element count by name (single-device counts under
// tensor parallelism); the model says which are embeddings (block_of == kEmbedding) and which
// one is tied to its head (tied_head_weight).
int64_t palm_parameter_count(const models::CausalLM& model, const std::map<std::string, int64_t>& numel);
// The same from model.named_parameters() (a single-device model).
int64_t palm_parameter_count(const models::CausalLM& model);

// Note [MFU of a partly frozen model]
// PaLM's 6 per parameter and token is 2 forward, 2 for the gradient of the input and 2 for the
// gradient of the weight. A frozen weight (train.freeze, an adapter's base) has no weight
// gradient: 4, and 2 when no trainable parameter lies before it either (autograd then stops
// before it: nothing upstream needs the input's gradient). Attention's 12 L C T likewise is
// 4 L C T forward and 8 per block the backward reaches. "Before" is by block (the embeddings
// first, the head last); a trainable parameter makes its own block's backward count, an
// approximation inside that one block. With everything trainable the count is PaLM's.
struct PalmCounts {
  int64_t trained = 0;                // N of Note [MFU's N]: trainable
  int64_t frozen_backward = 0;        // frozen, the backward passes through them
  int64_t frozen_forward_only = 0;    // frozen, no backward reaches them
  int64_t blocks_backward = 0;        // blocks the backward reaches
};
// The counts of `model` with `table`'s trainable parameters (logical sizes), or (without a
// table) everything trainable.
PalmCounts palm_counts(const models::CausalLM& model, const parallel::PlacementTable& table);
double palm_flops_per_token(const PalmCounts& counts, const models::ModelConfig& model, int64_t T);

// Model FLOPs per token of a training step, PaLM's count (Chowdhery et al. 2022, appendix B):
// 6 N + 12 L C T, N from palm_parameter_count (Note [MFU's N]); 12 L C T is attention's two
// products (QK^T and AV over all T keys, causal masking not subtracted: PaLM's convention),
// forward and backward. Recomputation (activation checkpointing) is not counted.
double palm_flops_per_token(int64_t palm_params, const models::ModelConfig& model, int64_t T);

// {engine: {"dtype": "f32"|"bf16", "threaded": bool, "gflops": weighted, "min_gflops",
// "max_gflops", "per_shape": [{"name", "M", "N", "K", "trans_a", "trans_b", "count",
// "gflops"}]}}, engines in measured order.
nlohmann::ordered_json gemm_rates_json(const kernels::cpu::GemmRates& rates);
// A table: per engine its dtype, weighted GFLOP/s and its slowest and fastest shape; then
// each measured dtype's ceiling.
std::string gemm_rates_table(const kernels::cpu::GemmRates& rates);

// A run's measured ceiling, and its steps' MFU against it.
struct MfuCeiling {
  kernels::cpu::GemmType dtype = kernels::cpu::GemmType::kF32;
  kernels::cpu::GemmRates rates;   // the run's dtype's engines, measured by this process
  double ceiling_gflops = 0.0;     // this process's: the fastest of them
  double total_ceiling_gflops = 0.0;  // every rank's together (each measures its own); one rank: ceiling_gflops
  double flops_per_token = 0.0;    // palm_flops_per_token of the run's model
  // A step's MFU at `tokens_per_s` (the tokens of every rank), a fraction.
  double mfu(double tokens_per_s) const;
  // One line: the engines' rates, the ceiling and what MFU counts.
  std::string summary() const;
};

// Measures the ceiling of cfg's precision dtype at cfg.model's GEMM shapes, for `batch_rows`
// sequences of data.seq_len tokens (a rank's micro-batch), on this process's threads.
// palm_params: palm_parameter_count of the model.
MfuCeiling measure_mfu_ceiling(const TrainConfig& cfg, int64_t palm_params, int64_t batch_rows,
                               const kernels::cpu::GemmRateOptions& options = {});
// The same for a model with frozen parameters (Note [MFU of a partly frozen model]).
MfuCeiling measure_mfu_ceiling(const TrainConfig& cfg, const PalmCounts& counts, int64_t batch_rows,
                               const kernels::cpu::GemmRateOptions& options = {});

}  // namespace trident::train
