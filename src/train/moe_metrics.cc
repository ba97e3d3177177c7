// Per-layer metrics of mixture-of-experts training: ranks' sums to text, merged, and written.
#include "train/moe_metrics.h"

#include <charconv>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace trident::train {

std::string layer_sums_to_json(const nn::AuxLayerSums& sums) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [key, values] : sums) j.push_back({key.layer, key.name, values});
  return j.dump();
}

std::vector<MoeLayerMetrics> merge_moe_layers(const std::vector<std::string>& per_rank) {
  nn::AuxLayerSums total;
  std::map<nn::AuxLayerKey, int> ranks;  // how many ranks sent each key
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const nlohmann::json j = nlohmann::json::parse(per_rank[r], nullptr, /*allow_exceptions=*/false);
    TRI_CHECK(j.is_array(), "per-layer sums of rank ", r, " are not a JSON array: '", per_rank[r], "'");
    for (const nlohmann::json& e : j) {
      TRI_CHECK(e.is_array() && e.size() == 3 && e[0].is_number_integer() && e[1].is_string() && e[2].is_array(),
                "per-layer sums of rank ", r, ": expected [layer, name, [values]], got ", e.dump());
      std::vector<double> values;
      // A non-finite sum travels as null.
      for (const nlohmann::json& v : e[2]) values.push_back(v.is_number() ? v.get<double>() : std::nan(""));
      const nn::AuxLayerKey key{e[0].get<int64_t>(), e[1].get<std::string>()};
      nn::add_layer_sums(total, key, values);
      ++ranks[key];
    }
  }
  std::map<int64_t, MoeLayerMetrics> layers;
  auto layer = [&](int64_t l) -> MoeLayerMetrics& {
    MoeLayerMetrics& m = layers[l];
    m.layer = l;
    return m;
  };
  auto count = [](double v) { return std::isfinite(v) ? std::llround(v) : int64_t{-1}; };
  for (const auto& [key, values] : total) {
    if (key.name == "moe_tokens") {
      for (double v : values) layer(key.layer).tokens.push_back(count(v));
    } else if (key.name == "moe_dropped" && values.size() == 1) {
      layer(key.layer).dropped = count(values[0]);
    } else if ((key.name == "moe_aux_loss" || key.name == "moe_z_loss") && values.size() == 2) {
      // [sum, count] over micro-batches and ranks (AuxOutputs::add_loss with a layer).
      (key.name == "moe_aux_loss" ? layer(key.layer).aux_loss : layer(key.layer).z_loss) = values[0] / values[1];
    } else if (key.name == "moe_all_to_all_bytes" && values.size() == 1) {
      layer(key.layer).all_to_all_bytes = count(values[0]);
    } else if (key.name == "moe_all_to_all_seconds" && values.size() == 1) {
      layer(key.layer).all_to_all_seconds = values[0] / static_cast<double>(ranks[key]);
    }
  }
  std::vector<MoeLayerMetrics> out;
  for (auto& [l, m] : layers) out.push_back(std::move(m));
  return out;
}

namespace {

// The shortest text that reads back as the same double; JSON has no NaN: null.
std::string number(double v) {
  char buf[32] = "null";
  if (std::isfinite(v)) *std::to_chars(buf, buf + sizeof buf - 1, v).ptr = '\0';
  return buf;
}

}  // namespace

std::string moe_layers_to_json(const std::vector<MoeLayerMetrics>& layers) {
  // By hand, in the rest of metrics.jsonl's style (", " and ": "; "layer" first).
  std::string out = "[";
  for (const MoeLayerMetrics& m : layers) {
    out += (out.size() > 1 ? ", " : "") + std::string("{\"layer\": ") + std::to_string(m.layer) + ", \"tokens\": [";
    for (size_t e = 0; e < m.tokens.size(); ++e) out += (e ? ", " : "") + std::to_string(m.tokens[e]);
    out += "], \"dropped\": " + std::to_string(m.dropped);
    if (m.aux_loss) out += ", \"aux_loss\": " + number(*m.aux_loss);
    if (m.z_loss) out += ", \"z_loss\": " + number(*m.z_loss);
    if (m.all_to_all_bytes) out += ", \"all_to_all_bytes\": " + std::to_string(*m.all_to_all_bytes);
    if (m.all_to_all_seconds) out += ", \"all_to_all_s\": " + number(*m.all_to_all_seconds);
    out += "}";
  }
  return out + "]";
}

}  // namespace trident::train
