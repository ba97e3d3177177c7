// The expert-load panel of `trident report` (monitor/run_report.h), from metrics.jsonl's
// "moe_layers" (train/moe_metrics.h): per mixture-of-experts layer, a heatmap of each expert's
// share of the routing choices over the steps, and the series the report draws as line charts
// beside it (the busiest expert's share, the dropped choices, the load-balancing loss, the
// expert-parallel exchanges' time per step).
//
// Not here: reading the file and the line charts (run_report.cc), what the counts mean (Note
// [Tokens per expert] in train/moe_metrics.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trident::monitor {

// One layer's load over the steps.
struct ExpertLoad {
  using Points = std::vector<std::pair<double, double>>;  // (step, value)
  int64_t layer = 0;
  std::vector<std::pair<int64_t, std::vector<int64_t>>> tokens;  // (step, tokens per expert)
  Points max_share;     // the busiest expert's share of the layer's choices
  Points dropped;       // choices the capacity dropped
  Points aux_loss;      // the layer's load-balancing loss
  Points all_to_all_ms; // expert parallelism: a rank's time in the layer's exchanges
};

// Why a metrics.jsonl line's "moe_layers" cannot be read ("" when it can, or has none): it
// must be an array of objects with an integer "layer", "tokens" an array of integers,
// "dropped" an integer, "aux_loss", "z_loss", "all_to_all_bytes" and "all_to_all_s" numbers (or
// null), when present.
std::string check_moe_layers(const nlohmann::json& line);

// The layers of `steps` (step -> metrics.jsonl line) that carry "moe_layers", by layer.
std::vector<ExpertLoad> expert_loads(const std::map<int64_t, nlohmann::json>& steps);

// The heatmap of one layer: a row per expert, a column per step (or per group of steps when
// there are more than fit: their choices added), on the same step axis as the line charts up
// to `x_max`; each cell's colour its expert's share against an even 1/E, its tokens in a
// data-tokens attribute and a hover title. Below it, the last step's counts in words.
std::string expert_load_heatmap(const ExpertLoad& load, double x_max);

}  // namespace trident::monitor
