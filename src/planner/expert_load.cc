#include "planner/expert_load.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace trident::planner {

double ExpertLoad::imbalance(int64_t layer, int64_t ep) const {
  const auto it = computed_.find({layer, ep});
  return it != computed_.end() ? it->second : compute(layer, ep);
}

void ExpertLoad::precompute(int64_t experts) {
  computed_.clear();
  for (const auto& entry : layers)
    for (int64_t ep = 1; ep <= experts; ++ep)
      if (experts % ep == 0) computed_[{entry.first, ep}] = compute(entry.first, ep);
}

double ExpertLoad::compute(int64_t layer, int64_t ep) const {
  const auto it = layers.find(layer);
  if (ep <= 1 || it == layers.end()) return 1.0;
  double sum = 0.0;
  int64_t steps = 0;
  for (const std::vector<int64_t>& counts : it->second) {
    const int64_t E = static_cast<int64_t>(counts.size()), per_rank = E / ep;
    if (per_rank == 0 || E % ep != 0) return 1.0;  // an ep the experts do not divide is no layout
    int64_t total = 0, busiest = 0;
    for (int64_t r = 0; r < ep; ++r) {
      int64_t rows = 0;
      for (int64_t e = r * per_rank; e < (r + 1) * per_rank; ++e) rows += counts[static_cast<size_t>(e)];
      total += rows;
      busiest = std::max(busiest, rows);
    }
    if (total <= 0) continue;
    sum += static_cast<double>(busiest) * static_cast<double>(ep) / static_cast<double>(total);
    ++steps;
  }
  return steps > 0 ? sum / static_cast<double>(steps) : 1.0;
}

StatusOr<ExpertLoad> read_expert_load(const std::string& file, const models::ModelShapes& shapes) {
  std::ifstream in(file);
  if (!in) return Status::invalid("--expert-load " + file + ": cannot be read (a run's metrics.jsonl)");
  ExpertLoad load;
  std::vector<std::string> lines;
  for (std::string text; std::getline(in, text);) lines.push_back(std::move(text));
  size_t last = lines.size();  // the last line that holds anything
  while (last > 0 && lines[last - 1].find_first_not_of(" \t\r") == std::string::npos) --last;
  for (size_t i = 0; i < last; ++i) {
    const std::string& text = lines[i];
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "--expert-load " + file + ", line " + std::to_string(i + 1);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() && i + 1 == last && text.front() == '{') continue;  // cut short by a stopped run
    if (j.is_discarded() || !j.is_object()) return Status::invalid(where + ": not a JSON object (metrics.jsonl has one a line)");
    if (!j.contains("moe_layers")) continue;
    const nlohmann::json& layers = j.at("moe_layers");
    if (!layers.is_array()) return Status::invalid(where + ": \"moe_layers\" is not an array");
    for (const nlohmann::json& l : layers) {
      if (!l.is_object() || !l.contains("layer") || !l.at("layer").is_number_integer() || !l.contains("tokens") ||
          !l.at("tokens").is_array())
        return Status::invalid(where + ": a \"moe_layers\" entry needs an integer \"layer\" and a \"tokens\" array, got " +
                               l.dump());
      const int64_t layer = l.at("layer").get<int64_t>();
      if (!shapes.is_sparse(layer))
        return Status::invalid(where + ": layer " + std::to_string(layer) +
                               " is not a mixture-of-experts layer of the planned model (its " +
                               std::to_string(shapes.sparse_blocks) + " sparse layers): a run of another model?");
      std::vector<int64_t> counts;
      for (const nlohmann::json& c : l.at("tokens")) {
        if (!c.is_number_integer() || c.get<int64_t>() < 0)
          return Status::invalid(where + ": layer " + std::to_string(layer) + "'s \"tokens\" must be counts >= 0, got " +
                                 l.at("tokens").dump());
        counts.push_back(c.get<int64_t>());
      }
      if (static_cast<int64_t>(counts.size()) != shapes.experts)
        return Status::invalid(where + ": layer " + std::to_string(layer) + " counts " + std::to_string(counts.size()) +
                               " experts, the planned model has " + std::to_string(shapes.experts));
      load.layers[layer].push_back(std::move(counts));
    }
  }
  if (load.empty())
    return Status::invalid("--expert-load " + file +
                           ": no line has \"moe_layers\" (the per-expert counts a mixture of experts' run writes)");
  load.precompute(shapes.experts);
  return load;
}

}  // namespace trident::planner
