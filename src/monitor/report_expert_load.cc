// The expert-load panel of `trident report`: metrics.jsonl's "moe_layers" checked, gathered per
// layer and drawn as a heatmap per layer.
#include "monitor/report_expert_load.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

namespace trident::monitor {
namespace {

std::string why(const std::string& key, const nlohmann::json& v, const char* expected) {
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  return "key \"" + key + "\" must be " + expected + ", not " + v.type_name() + " " + shown;
}

// Note [Expert-load colours]
// Q: What does a cell's colour say?
// A: Its expert's share of the layer's choices against an even share 1/E (r = share x E): white
// for an expert no token chose, the middle blue for an even load (r = 1), the darkest for twice
// an even share or more. A balanced layer is one even band, a collapse a dark row among white
// ones, whatever E is (Switch and GShard judge load the same way, against 1/E).
std::string cell_colour(double r) {
  const double t = std::clamp(r / 2.0, 0.0, 1.0);
  // White (#ffffff) to mid blue (#4292c6) to dark blue (#08306b), linear in each half.
  const double a[3] = {255, 255, 255}, b[3] = {66, 146, 198}, c[3] = {8, 48, 107};
  char buf[8];
  int rgb[3];
  for (int i = 0; i < 3; ++i)
    rgb[i] = static_cast<int>(std::lround(t < 0.5 ? a[i] + (b[i] - a[i]) * t * 2 : b[i] + (c[i] - b[i]) * (t - 0.5) * 2));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

std::string percent(double v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * v);
  return buf;
}

}  // namespace

std::string check_moe_layers(const nlohmann::json& line) {
  if (!line.contains("moe_layers")) return "";
  const nlohmann::json& layers = line["moe_layers"];
  if (!layers.is_array()) return why("moe_layers", layers, "an array");
  for (const nlohmann::json& l : layers) {
    if (!l.is_object()) return why("moe_layers[]", l, "an object");
    if (!l.contains("layer") || !l["layer"].is_number_integer())
      return why("moe_layers[].layer", l.value("layer", nlohmann::json()), "an integer");
    const std::string at = "moe_layers[layer " + std::to_string(l["layer"].get<int64_t>()) + "].";
    if (!l.contains("tokens") || !l["tokens"].is_array()) return why(at + "tokens", l.value("tokens", nlohmann::json()), "an array");
    for (const nlohmann::json& t : l["tokens"])
      if (!t.is_number_integer()) return why(at + "tokens[]", t, "an integer");
    if (l.contains("dropped") && !l["dropped"].is_number_integer()) return why(at + "dropped", l["dropped"], "an integer");
    for (const char* k : {"aux_loss", "z_loss", "all_to_all_bytes", "all_to_all_s"})
      if (l.contains(k) && !l[k].is_number() && !l[k].is_null()) return why(at + k, l[k], "a number or null");
  }
  return "";
}

std::vector<ExpertLoad> expert_loads(const std::map<int64_t, nlohmann::json>& steps) {
  std::map<int64_t, ExpertLoad> by_layer;
  for (const auto& [step, r] : steps) {
    if (!r.contains("moe_layers")) continue;
    const double x = static_cast<double>(step);
    for (const nlohmann::json& l : r["moe_layers"]) {
      ExpertLoad& load = by_layer[l["layer"].get<int64_t>()];
      load.layer = l["layer"].get<int64_t>();
      std::vector<int64_t> tokens = l["tokens"].get<std::vector<int64_t>>();
      const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
      if (total > 0)
        load.max_share.emplace_back(x, static_cast<double>(*std::max_element(tokens.begin(), tokens.end())) /
                                           static_cast<double>(total));
      load.dropped.emplace_back(x, static_cast<double>(l.value("dropped", int64_t{0})));
      if (l.contains("aux_loss") && l["aux_loss"].is_number()) load.aux_loss.emplace_back(x, l["aux_loss"].get<double>());
      if (l.contains("all_to_all_s") && l["all_to_all_s"].is_number())
        load.all_to_all_ms.emplace_back(x, 1e3 * l["all_to_all_s"].get<double>());
      load.tokens.emplace_back(step, std::move(tokens));
    }
  }
  std::vector<ExpertLoad> out;
  for (auto& [layer, load] : by_layer) out.push_back(std::move(load));
  return out;
}

std::string expert_load_heatmap(const ExpertLoad& load, double x_max) {
  size_t experts = 0;
  for (const auto& [step, t] : load.tokens) experts = std::max(experts, t.size());
  // The geometry of run_report.cc's line charts, so that the steps line up below one another.
  const double W = 1000, L = 70, R = 14, T = 8, B = 40;
  const double row = experts > 32 ? 6.0 : 14.0, H = T + B + row * static_cast<double>(std::max<size_t>(experts, 1));
  auto px = [&](double v) { return L + (W - L - R) * v / std::max(1.0, x_max); };
  // Columns: one per step, or groups of consecutive logged steps when more than fit.
  const size_t n = load.tokens.size(), per = std::max<size_t>(1, (n + 249) / 250);
  std::ostringstream os;
  os << "<figure class=\"expert-load\" data-layer=\"" << load.layer << "\" data-experts=\"" << experts
     << "\" data-columns=\"" << (n + per - 1) / per << "\"><figcaption>Layer " << load.layer
     << ": tokens per expert (share of the layer's choices; white none, blue even 1/" << experts
     << ", dark twice that or more)</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << W << " "
     << H << "\" preserveAspectRatio=\"xMinYMin meet\">\n";
  os << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
     << "\" class=\"plot\"/>\n";
  for (size_t e = 0; e < experts; ++e)
    if (experts <= 32 || e % 4 == 0)
      os << "<text class=\"expert\" x=\"" << L - 4 << "\" y=\"" << T + row * (static_cast<double>(e) + 0.5) + 4
         << "\" text-anchor=\"end\">expert " << e << "</text>\n";
  for (size_t c = 0; c < n; c += per) {
    const size_t end = std::min(n, c + per);
    // The group's steps: (the step before its first, its last], as a line chart's segment.
    const int64_t first = c == 0 ? 0 : load.tokens[c - 1].first, last = load.tokens[end - 1].first;
    std::vector<int64_t> sum(experts, 0);
    for (size_t i = c; i < end; ++i)
      for (size_t e = 0; e < load.tokens[i].second.size(); ++e) sum[e] += load.tokens[i].second[e];
    const int64_t total = std::accumulate(sum.begin(), sum.end(), int64_t{0});
    const double x0 = px(static_cast<double>(first)), x1 = px(static_cast<double>(last));
    os << "<g class=\"column\" data-step=\"" << last << "\">";
    for (size_t e = 0; e < experts; ++e) {
      const double share = total > 0 ? static_cast<double>(sum[e]) / static_cast<double>(total) : 0.0;
      os << "<rect x=\"" << x0 << "\" y=\"" << T + row * static_cast<double>(e) << "\" width=\"" << std::max(0.5, x1 - x0)
         << "\" height=\"" << row << "\" fill=\"" << cell_colour(share * static_cast<double>(experts))
         << "\" data-tokens=\"" << sum[e] << "\"><title>step" << (per > 1 ? "s " + std::to_string(first + 1) + ".." : " ")
         << last << ", expert " << e << ": " << sum[e] << " tokens (" << percent(share) << ")</title></rect>";
    }
    os << "</g>\n";
  }
  // Step ticks at 1, 2 or 5 times a power of ten, about eight, as the line charts' (Note [Axis ticks]).
  const double raw = std::max(1.0, x_max) / 8, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double tick = std::max(1.0, (raw / mag <= 1 ? 1 : raw / mag <= 2 ? 2 : raw / mag <= 5 ? 5 : 10) * mag);
  for (double v = 0; v <= std::max(1.0, x_max) + 1e-9; v += tick)
    os << "<text class=\"xtick\" x=\"" << px(v) << "\" y=\"" << H - B + 15 << "\" text-anchor=\"middle\">"
       << static_cast<int64_t>(std::llround(v)) << "</text>\n";
  os << "<text x=\"" << L + (W - L - R) / 2 << "\" y=\"" << H - 6 << "\" text-anchor=\"middle\">step</text>\n";
  os << "</svg>";
  if (!load.tokens.empty()) {
    const auto& [step, tokens] = load.tokens.back();
    os << "<p class=\"expert-load-last\">step " << step << ": tokens per expert [";
    for (size_t e = 0; e < tokens.size(); ++e) os << (e ? ", " : "") << tokens[e];
    os << "]";
    if (!load.max_share.empty() && load.max_share.back().first == static_cast<double>(step))
      os << "; the busiest expert took " << percent(load.max_share.back().second) << " (even: "
         << percent(1.0 / static_cast<double>(std::max<size_t>(tokens.size(), 1))) << ")";
    if (!load.dropped.empty()) os << "; dropped " << static_cast<int64_t>(load.dropped.back().second);
    os << "</p>";
  }
  os << "</figure>\n";
  return os.str();
}

}  // namespace trident::monitor
