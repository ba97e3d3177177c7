#include "planner/layout.h"

#include <sstream>

#include "core/check.h"
#include "parallel/parallelize.h"

namespace trident::planner {

std::string Layout::pipeline_schedule() const { return virtual_stages > 1 ? "interleaved" : "1f1b"; }

std::vector<std::string> Layout::overrides() const {
  std::vector<std::string> o = {
      "--parallel.tp=" + std::to_string(tp),
      "--parallel.ep=" + std::to_string(ep),
      "--parallel.pp=" + std::to_string(pp),
      "--parallel.virtual_stages=" + std::to_string(virtual_stages),
      "--parallel.pipeline_schedule=" + pipeline_schedule(),
      "--parallel.zero_stage=" + std::to_string(zero_stage),
      std::string("--parallel.offload_optimizer=") + (offload ? "true" : "false"),
      std::string("--parallel.offload_optimizer_device=") + (nvme ? "nvme" : "cpu"),
      std::string("--parallel.sequence_parallel=") + (sequence_parallel ? "true" : "false"),
      "--model.activation_checkpointing=" + checkpointing,
      "--data.batch_size=" + std::to_string(micro_batch * data_parallel()),
      "--data.grad_accum_steps=" + std::to_string(accum),
  };
  return o;
}

parallel::ParallelOptions Layout::parallel_options(const parallel::ParallelOptions& base) const {
  parallel::ParallelOptions o = base;
  o.tp = tp;
  o.ep = ep;
  o.pp = pp;
  o.virtual_stages = virtual_stages;
  o.pipeline_schedule = pipeline_schedule();
  o.pipeline_layers = "";
  o.zero_stage = zero_stage;
  o.offload_optimizer = offload;
  o.offload_optimizer_device = nvme ? "nvme" : "cpu";
  o.sequence_parallel = sequence_parallel;
  return o;
}

void Layout::apply(train::TrainConfig& cfg) const {
  cfg.parallel = parallel_options(cfg.parallel);
  cfg.model.activation_checkpointing = checkpointing;
  cfg.data.batch_size = micro_batch * data_parallel();
  cfg.data.grad_accum_steps = accum;
}

std::string Layout::str() const {
  std::ostringstream s;
  s << "dp" << dp;
  if (ep > 1) s << " ep" << ep;  // Note [The planner's ep axis]
  s << " tp" << tp << (sequence_parallel ? "+sp" : "") << " pp" << pp;
  if (virtual_stages > 1) s << "x" << virtual_stages;
  s << " zero" << zero_stage << (nvme ? "+nvme" : offload ? "+offload" : "") << " ckpt=" << checkpointing << " b" << micro_batch
    << " m" << accum;
  return s.str();
}

Layout layout_of(const train::TrainConfig& cfg, int64_t ranks) {
  Layout l;
  l.tp = cfg.parallel.tp;
  l.pp = cfg.parallel.pp;
  l.ep = cfg.parallel.ep;
  l.dp = std::max<int64_t>(1, ranks / (l.ep * l.tp * l.pp));
  l.virtual_stages = cfg.parallel.virtual_stages;
  l.zero_stage = cfg.parallel.zero_stage;
  l.offload = cfg.parallel.offload_optimizer;
  l.nvme = l.offload && cfg.parallel.offload_optimizer_device == "nvme";
  l.sequence_parallel = cfg.parallel.sequence_parallel;
  l.checkpointing = cfg.model.activation_checkpointing;
  l.micro_batch = std::max<int64_t>(1, cfg.data.batch_size / l.data_parallel());
  l.accum = cfg.data.grad_accum_steps;
  return l;
}

bool trainer_accepts(const models::ModelConfig& model, int64_t seq_len, const Layout& l, std::string* why) {
  try {
    parallel::ParallelOptions base;
    base.nvme_path = "(the run's)";  // the layout's check, not the run's directory
    parallel::check_layout(model, l.parallel_options(base), static_cast<int>(l.ranks()), seq_len);
    return true;
  } catch (const Error& e) {
    if (why != nullptr) *why = e.what();
    return false;
  }
}

}  // namespace trident::planner
