// What the planner plans: a run's config without its layout. The model (its shapes through
// its family, models/model_shapes.h; never built), which of its parameters train and how the
// frozen ones are stored (planner/fine_tuning.h), the sequence length, the step's global batch
// of sequences, the compute dtype and the gradient buckets; the layout (planner/layout.h) is
// what the planner chooses.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/gemm_engine.h"
#include "models/model_config.h"
#include "models/model_shapes.h"
#include "planner/convention.h"
#include "planner/expert_load.h"
#include "train/train_config.h"

namespace trident::planner {

// The stages' parameters per tensor- and pipeline-parallel shape, computed from the placement
// table once and shared by every evaluation of the run's layouts (planner/placements.h).
struct StageCache;
std::shared_ptr<StageCache> new_stage_cache();

// How a run holds one parameter: trained (compute dtype, fp32 gradient, masters under mixed
// precision and AdamW's moments), frozen in the compute dtype (train.freeze, LoRA's base), or
// frozen in NF4 (QLoRA's base: quantization/nf4.h), nothing beside it.
enum class Holding : uint8_t { kTrained, kFrozen, kNf4 };

// The NVMe tier's settings (parallel.nvme_buffer_count, nvme_buffer_mb, nvme_queue_depth), for
// the layouts that keep the optimizer state there (planner/nvme_tier.h).
struct NvmeTierSpec {
  int64_t buffer_count = 4;                  // staging buffers of one unit each
  int64_t unit_elements = int64_t{1} << 23;  // of each of masters, m and v (32 MiB)
  int64_t queue_depth = 128;                 // requests with the kernel at once
};

struct RunSpec {
  models::ModelConfig model;
  models::ModelShapes shapes;  // the family's, and a LoRA run's adapters (planner/fine_tuning.h)
  // How each of shapes.parameters is held, in its order; empty: every one trains.
  std::vector<Holding> holding;
  bool nf4_double_quant = true;  // quantization.double_quant, for kNf4's bytes
  int64_t seq_len = 0;       // T
  int64_t global_batch = 0;  // sequences per optimizer step, all ranks together
  DType compute = DType::kF32;
  int64_t bucket_bytes = 0;  // parallel.bucket_mb
  // Where frameworks differ, whose way the run is planned (Note [Framework conventions]): the
  // trainer's by default, its gradients reduced in fp32 or, under grad_compression = "bf16",
  // in bf16.
  Convention convention;
  NvmeTierSpec nvme;
  // A mixture's routing as a run measured it (Note [Measured expert load]); empty: balanced.
  ExpertLoad expert_load;
  bool on_device = false;    // GPUs (train.device = "cuda", or a cluster file's): the fused head's chunks differ
  // bf16 GEMMs on this CPU widen their operands to f32 copies (no native bf16 dot products, or
  // kernels.bf16_gemm = "widen": Note [GEMM engines] in kernels/cpu/gemm_engine.h).
  bool widened_bf16 = false;
  // The CPU's GEMM engines for the run's dtypes and its threads: what oneDNN's scratchpad in the
  // fused head's logits GEMM takes (Note [oneDNN's scratchpad] in kernels/cpu/onednn_gemm.cc).
  kernels::cpu::GemmEngines gemm_engines;
  int threads = 1;
  std::shared_ptr<StageCache> stage_cache = new_stage_cache();  // shared by copies: same shapes
  bool mixed() const { return compute != DType::kF32; }
  Holding holding_of(size_t parameter) const { return holding.empty() ? Holding::kTrained : holding[parameter]; }
  // The run's ranks are devices (a GPU cluster file's, whatever train.device says): their GEMMs
  // widen nothing into the device's memory.
  void place_on_device() {
    on_device = true;
    widened_bf16 = false;
  }
  int64_t tokens_per_step() const { return global_batch * seq_len; }
};

// The run `cfg` describes (its global batch: data.batch_size x data.grad_accum_steps).
RunSpec run_spec(const train::TrainConfig& cfg);

}  // namespace trident::planner
