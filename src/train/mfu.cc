#include "train/mfu.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "models/causal_lm.h"
#include "models/registry.h"
#include "parallel/placement.h"
#include "train/train_config.h"

namespace trident::train {

namespace k = kernels::cpu;

k::GemmType gemm_type_of_precision(DType compute) { return compute == DType::kBF16 ? k::GemmType::kBF16 : k::GemmType::kF32; }

int64_t palm_parameter_count(const models::CausalLM& model, const std::map<std::string, int64_t>& numel) {
  const std::optional<std::string> tied = model.tied_head_weight();
  int64_t n = 0;
  for (const auto& [name, count] : numel)
    if (model.block_of(name) != models::CausalLM::kEmbedding || name == tied) n += count;
  return n;
}

int64_t palm_parameter_count(const models::CausalLM& model) {
  std::map<std::string, int64_t> numel;
  for (const auto& [name, p] : model.named_parameters()) numel[name] = p.numel();
  return palm_parameter_count(model, numel);
}

double palm_flops_per_token(int64_t palm_params, const models::ModelConfig& model, int64_t T) {
  return palm_flops_per_token(PalmCounts{palm_params, 0, 0, model.n_layer}, model, T);
}

PalmCounts palm_counts(const models::CausalLM& model, const parallel::PlacementTable& table) {
  // Blocks in forward order: the embeddings, the blocks, the head.
  const int64_t L = model.model_config().n_layer;
  auto order = [&](int64_t block) { return block == models::CausalLM::kEmbedding ? -1 : block == models::CausalLM::kHead ? L : block; };
  int64_t first_trained = L + 1;  // the earliest block with a trainable parameter
  for (const parallel::ParamPlacement& p : table.params())
    if (p.trainable) first_trained = std::min(first_trained, order(p.block));
  const std::optional<std::string> tied = model.tied_head_weight();
  PalmCounts c;
  for (const parallel::ParamPlacement& p : table.params()) {
    if (p.block == models::CausalLM::kEmbedding && p.name != tied) continue;  // gather-only (Note [MFU's N])
    // A tied embedding is the head's matrix: its backward is the head's.
    const int64_t at = p.name == tied ? L : order(p.block);
    (p.trainable ? c.trained : at >= first_trained ? c.frozen_backward : c.frozen_forward_only) += p.shape.product();
  }
  for (int64_t b = 0; b < L; ++b) c.blocks_backward += b >= first_trained ? 1 : 0;
  return c;
}

double palm_flops_per_token(const PalmCounts& c, const models::ModelConfig& model, int64_t T) {
  const double CT = static_cast<double>(model.n_embd) * static_cast<double>(T);
  return 6.0 * static_cast<double>(c.trained) + 4.0 * static_cast<double>(c.frozen_backward) +
         2.0 * static_cast<double>(c.frozen_forward_only) + 4.0 * static_cast<double>(model.n_layer) * CT +
         8.0 * static_cast<double>(c.blocks_backward) * CT;
}

nlohmann::ordered_json gemm_rates_json(const k::GemmRates& rates) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const k::GemmRate& r : rates.rates) {
    nlohmann::ordered_json shapes = nlohmann::ordered_json::array();
    for (size_t i = 0; i < rates.shapes.size(); ++i) {
      const k::GemmShape& s = rates.shapes[i];
      shapes.push_back({{"name", s.name}, {"M", s.M}, {"N", s.N}, {"K", s.K}, {"trans_a", s.trans_a},
                        {"trans_b", s.trans_b}, {"count", s.count}, {"gflops", r.shape_gflops[i]}});
    }
    out[r.engine] = {{"dtype", k::gemm_type_name(r.dtype)}, {"threaded", r.threaded}, {"gflops", r.gflops},
                     {"min_gflops", r.min_gflops}, {"max_gflops", r.max_gflops}, {"per_shape", shapes}};
  }
  return out;
}

namespace {

std::string shape_rate(const k::GemmRates& rates, const k::GemmRate& r, bool slowest) {
  size_t best = 0;
  for (size_t i = 1; i < r.shape_gflops.size(); ++i)
    if (slowest ? r.shape_gflops[i] < r.shape_gflops[best] : r.shape_gflops[i] > r.shape_gflops[best]) best = i;
  if (r.shape_gflops.empty()) return "-";
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s %.0f", rates.shapes[best].name.c_str(), r.shape_gflops[best]);
  return buf;
}

}  // namespace

std::string gemm_rates_table(const k::GemmRates& rates) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-22s %-5s %8s  %-28s %s\n", "engine", "dtype", "GFLOP/s", "slowest shape",
                "fastest shape");
  out += line;
  for (const k::GemmRate& r : rates.rates) {
    std::snprintf(line, sizeof line, "%-22s %-5s %8.1f  %-28s %s\n", r.engine.c_str(), k::gemm_type_name(r.dtype),
                  r.gflops, shape_rate(rates, r, true).c_str(), shape_rate(rates, r, false).c_str());
    out += line;
  }
  for (const k::GemmType t : {k::GemmType::kF32, k::GemmType::kBF16}) {
    const k::GemmRate* best = rates.fastest(t);
    if (best == nullptr) continue;
    const k::GemmRate* blocked = rates.fastest(t, /*trident_only=*/true);
    std::snprintf(line, sizeof line, "ceiling %s: %.1f GFLOP/s (%s); trident's fastest: %s %.1f (%.0f%%)\n",
                  k::gemm_type_name(t), best->gflops, best->engine.c_str(), blocked->engine.c_str(), blocked->gflops,
                  100.0 * blocked->gflops / best->gflops);
    out += line;
  }
  return out;
}

double MfuCeiling::mfu(double tokens_per_s) const {
  return total_ceiling_gflops > 0.0 ? flops_per_token * tokens_per_s / (total_ceiling_gflops * 1e9) : 0.0;
}

std::string MfuCeiling::summary() const {
  std::string engines;
  for (const k::GemmRate& r : rates.rates) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.0f", engines.empty() ? "" : ", ", r.engine.c_str(), r.gflops);
    engines += buf;
  }
  char ranks[64] = "";
  if (total_ceiling_gflops != ceiling_gflops)
    std::snprintf(ranks, sizeof ranks, " (every rank's together: %.0f)", total_ceiling_gflops);
  char line[768];
  std::snprintf(line, sizeof line,
                "MFU ceiling (%s GEMMs at the model's %zu shapes, %d threads, measured in %.1f s): %s GFLOP/s; "
                "ceiling %.0f GFLOP/s%s; MFU = (6 N + 12 L C T) FLOPs/token x tokens/s / ceiling, N the "
                "parameters but gather-only embeddings",
                k::gemm_type_name(dtype), rates.shapes.size(), rates.threads, rates.seconds, engines.c_str(),
                ceiling_gflops, ranks);
  return line;
}

MfuCeiling measure_mfu_ceiling(const TrainConfig& cfg, int64_t palm_params, int64_t batch_rows,
                               const k::GemmRateOptions& options) {
  return measure_mfu_ceiling(cfg, PalmCounts{palm_params, 0, 0, cfg.model.n_layer}, batch_rows, options);
}

MfuCeiling measure_mfu_ceiling(const TrainConfig& cfg, const PalmCounts& counts, int64_t batch_rows,
                               const k::GemmRateOptions& options) {
  MfuCeiling m;
  m.dtype = gemm_type_of_precision(cfg.precision.compute_dtype());
  const std::vector<k::GemmShape> shapes = models::model_family(cfg.model.arch).gemm_shapes(cfg.model, batch_rows, cfg.data.seq_len);
  m.rates = k::measure_gemm_rates(shapes, {m.dtype}, options);
  m.ceiling_gflops = m.total_ceiling_gflops = m.rates.ceiling_gflops(m.dtype);
  m.flops_per_token = palm_flops_per_token(counts, cfg.model, cfg.data.seq_len);
  return m;
}

}  // namespace trident::train
