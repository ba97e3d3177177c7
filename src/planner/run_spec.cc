#include "planner/run_spec.h"

#include <algorithm>

#include "core/parallel.h"
#include "models/registry.h"
#include "planner/fine_tuning.h"

namespace trident::planner {

RunSpec run_spec(const train::TrainConfig& cfg) {
  RunSpec r;
  r.model = cfg.model;
  r.shapes = models::model_family(cfg.model.arch).shapes(cfg.model);
  r.seq_len = cfg.data.seq_len;
  r.global_batch = cfg.data.batch_size * cfg.data.grad_accum_steps;
  r.compute = cfg.precision.compute_dtype();
  r.bucket_bytes = static_cast<int64_t>(cfg.parallel.bucket_mb * 1024 * 1024);
  r.convention = convention_named("trident", r.compute, cfg.parallel.grad_compression).value();
  // As parallelize() hands them to the tier (parallel/parallelize.cc).
  r.nvme.buffer_count = cfg.parallel.nvme_buffer_count;
  r.nvme.unit_elements = std::max<int64_t>(1, static_cast<int64_t>(cfg.parallel.nvme_buffer_mb * (1 << 20) / 4));
  r.nvme.queue_depth = cfg.parallel.nvme_queue_depth;
  r.on_device = cfg.train.device == "cuda";
  using kernels::cpu::GemmType;
  if (!r.on_device) {
    r.gemm_engines.f32 = kernels::cpu::gemm_engine_from(GemmType::kF32, cfg.kernels.f32_gemm, "kernels.f32_gemm");
    if (cfg.uses_bf16_gemms())
      r.gemm_engines.bf16 = kernels::cpu::gemm_engine_from(GemmType::kBF16, cfg.kernels.bf16_gemm, "kernels.bf16_gemm");
  }
  r.widened_bf16 = !r.on_device && cfg.uses_bf16_gemms() && r.gemm_engines.bf16 == kernels::cpu::GemmEngine::kOpenBlas;
  r.threads = cfg.train.threads > 0 ? static_cast<int>(cfg.train.threads) : num_threads();
  apply_fine_tuning(r, cfg);
  return r;
}

}  // namespace trident::planner
