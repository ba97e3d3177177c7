#include "monitor/run_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace trident::monitor {
namespace {

using Points = std::vector<std::pair<double, double>>;  // (step, value)

struct Series {
  std::string name, color;
  Points points;
};

struct Marker {
  int64_t step;
  std::string label;
  bool rollback;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// The keys of metrics.jsonl the report plots: each a number, or null (a NaN or infinity).
constexpr std::array<const char*, 11> kPlotted = {
    "loss",      "val_loss", "lr",          "grad_norm",          "tokens_per_s",
    "mfu",       "data_s",   "comm_wait_s", "forward_backward_s", "optimizer_s",
    "comm_bytes"};

// Why a line's `key` is refused: it holds `v` where `expected` (e.g. "an integer") was.
std::string wrong_type(const std::string& key, const nlohmann::json& v, const char* expected) {
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  return "key \"" + key + "\" must be " + expected + ", not " + v.type_name() + " " + shown;
}

bool is_step(const nlohmann::json& v) {  // an integer that fits int64_t
  return v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= INT64_MAX);
}

// The keys the report reads from a line of metrics.jsonl hold what it reads: "" if so, else why not.
std::string check_metrics_line(const nlohmann::json& r) {
  if (r.contains("step") && !is_step(r["step"])) return wrong_type("step", r["step"], "an integer");
  if (r.contains("rollback")) {
    const nlohmann::json& rb = r["rollback"];
    if (!rb.is_object()) return wrong_type("rollback", rb, "an object");
    for (const char* k : {"from_step", "to_step"})
      if (rb.contains(k) && !is_step(rb[k])) return wrong_type(std::string("rollback.") + k, rb[k], "an integer");
  }
  for (const char* k : kPlotted)
    if (r.contains(k) && !r[k].is_number() && !r[k].is_null()) return wrong_type(k, r[k], "a number or null");
  if (r.contains("memory_bytes")) {
    const nlohmann::json& m = r["memory_bytes"];
    if (!m.is_object()) return wrong_type("memory_bytes", m, "an object");
    for (const auto& [k, v] : m.items())
      if (!v.is_number() && !v.is_null()) return wrong_type("memory_bytes." + k, v, "a number or null");
  }
  return "";
}

// The same for a line of alerts.jsonl (its marker and its row of the table).
std::string check_alert_line(const nlohmann::json& a) {
  if (a.contains("step") && !is_step(a["step"])) return wrong_type("step", a["step"], "an integer");
  for (const char* k : {"rule", "condition", "message"})
    if (a.contains(k) && !a[k].is_string()) return wrong_type(k, a[k], "a string");
  return "";
}

// Lines read from a JSONL file; a last line without its newline (a run still writing) is
// skipped. An error names file:line for a malformed complete line: not JSON, not an object, or
// a key that `check` refuses (it says which and what it must hold).
StatusOr<std::vector<nlohmann::json>> read_jsonl(const std::string& path, bool required,
                                                 const std::function<std::string(const nlohmann::json&)>& check) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (required) return Status::io_error("cannot read " + path + " (is it a run directory with metrics.jsonl?)");
    return std::vector<nlohmann::json>{};
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::vector<nlohmann::json> rows;
  size_t at = 0;
  for (int line = 1; at < text.size(); ++line) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;  // cut mid-write
    const std::string s = text.substr(at, end - at);
    at = end + 1;
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line) + ": ";
    try {
      rows.push_back(nlohmann::json::parse(s));
    } catch (const nlohmann::json::exception& e) {
      return Status::invalid(where + "not a JSON object: " + e.what());
    }
    if (!rows.back().is_object()) return Status::invalid(where + "not a JSON object: " + s.substr(0, 40));
    if (const std::string why = check(rows.back()); !why.empty()) return Status::invalid(where + why);
  }
  return rows;
}

// A line chart of `series` against the step, with the markers as vertical lines.
std::string chart(const std::string& title, const std::vector<Series>& series, const std::vector<Marker>& markers,
                  double x_max, bool log_y = false) {
  const double W = 760, H = 230, L = 64, R = 12, T = 26, B = 28;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t n = 0;
  for (const Series& s : series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(y) && (!log_y || y > 0)) {
        const double v = log_y ? std::log10(y) : y;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        ++n;
      }
  std::ostringstream os;
  os << "<figure><figcaption>" << escape(title) << "</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\""
     << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " " << H << "\">\n";
  os << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
     << "\" class=\"plot\"/>\n";
  if (n == 0) {
    os << "<text x=\"" << W / 2 << "\" y=\"" << H / 2 << "\" text-anchor=\"middle\">no data</text></svg></figure>\n";
    return os.str();
  }
  if (hi == lo) {
    hi += 0.5;
    lo -= 0.5;
  }
  const double pad = 0.05 * (hi - lo);
  lo -= pad;
  hi += pad;
  const double xm = std::max(1.0, x_max);
  auto px = [&](double x) { return L + (W - L - R) * x / xm; };
  auto py = [&](double v) { return T + (H - T - B) * (1.0 - (v - lo) / (hi - lo)); };
  auto label = [&](double v) { return num(log_y ? std::pow(10.0, v) : v); };
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4.0;
    os << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << py(v) << "\" y2=\"" << py(v)
       << "\" class=\"grid\"/><text x=\"" << L - 4 << "\" y=\"" << py(v) + 4 << "\" text-anchor=\"end\">" << label(v)
       << "</text>\n";
  }
  for (int i = 0; i <= 4; ++i) {
    const double x = xm * i / 4.0;
    os << "<text x=\"" << px(x) << "\" y=\"" << H - 10 << "\" text-anchor=\"middle\">" << num(std::round(x))
       << "</text>\n";
  }
  for (const Marker& m : markers)
    os << "<line x1=\"" << px(static_cast<double>(m.step)) << "\" x2=\"" << px(static_cast<double>(m.step)) << "\" y1=\""
       << T << "\" y2=\"" << H - B << "\" class=\"" << (m.rollback ? "rollback" : "alert") << "\" data-step=\""
       << m.step << "\"><title>" << escape(m.label) << "</title></line>\n";
  double legend_x = L + 8;
  for (const Series& s : series) {
    os << "<polyline class=\"series\" data-name=\"" << escape(s.name) << "\" data-points=\"" << s.points.size()
       << "\" stroke=\"" << s.color << "\" points=\"";
    for (const auto& [x, y] : s.points)
      if (std::isfinite(y) && (!log_y || y > 0)) os << px(x) << "," << py(log_y ? std::log10(y) : y) << " ";
    // The legend's colour inline: the stylesheet's `svg text` fill would beat a fill attribute.
    os << "\"/>\n<text x=\"" << legend_x << "\" y=\"" << T - 8 << "\" style=\"fill:" << s.color << "\">" << escape(s.name)
       << "</text>\n";
    legend_x += 14 + 7.0 * static_cast<double>(s.name.size());
  }
  os << "</svg></figure>\n";
  return os.str();
}

}  // namespace

Status write_run_report(const std::string& run_dir, const std::string& out_html) {
  auto metrics = read_jsonl(run_dir + "/metrics.jsonl", true, check_metrics_line);
  if (!metrics.is_ok()) return metrics.status();
  auto alerts = read_jsonl(run_dir + "/alerts.jsonl", false, check_alert_line);
  if (!alerts.is_ok()) return alerts.status();
  // The last line of each step (a rollback logs re-trained steps again).
  std::map<int64_t, nlohmann::json> steps, evals;
  std::vector<Marker> markers;
  for (const nlohmann::json& r : metrics.value()) {
    if (r.contains("rollback")) {
      const auto& rb = r["rollback"];
      markers.push_back({rb.value("from_step", int64_t{0}),
                         "rollback from step " + std::to_string(rb.value("from_step", int64_t{0})) + " to " +
                             std::to_string(rb.value("to_step", int64_t{0})),
                         true});
      continue;
    }
    if (!r.contains("step")) continue;
    (r.contains("val_loss") ? evals : steps)[r["step"].get<int64_t>()] = r;
  }
  for (const nlohmann::json& a : alerts.value())
    if (a.contains("step"))
      markers.push_back({a["step"].get<int64_t>(), a.value("message", std::string("alert")), false});
  double x_max = 1;
  for (const auto& [s, r] : steps) x_max = std::max(x_max, static_cast<double>(s));
  for (const auto& [s, r] : evals) x_max = std::max(x_max, static_cast<double>(s));
  auto series = [&](const std::map<int64_t, nlohmann::json>& rows, const char* key, const char* name,
                    const char* color, double scale = 1.0) {
    Series s{name, color, {}};
    for (const auto& [step, r] : rows)
      if (r.contains(key) && r[key].is_number())
        s.points.emplace_back(static_cast<double>(step), scale * r[key].get<double>());
    return s;
  };
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>trident run report: " << escape(run_dir)
       << "</title>\n<style>\nbody{font:14px sans-serif;margin:24px;color:#222}figure{margin:0 0 18px 0}"
          "figcaption{font-weight:bold;margin-bottom:2px}svg text{font:11px sans-serif;fill:#444}"
          ".plot{fill:#fafafa;stroke:#bbb}.grid{stroke:#e4e4e4}.series{fill:none;stroke-width:1.5}"
          ".alert{stroke:#d62728;stroke-dasharray:4 3;stroke-width:1.5}.rollback{stroke:#9467bd;stroke-width:2}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\n</style></head>"
          "<body>\n<h1>trident run report</h1>\n<p>"
       << escape(run_dir) << ": " << steps.size() << " steps, " << evals.size() << " evaluations, "
       << alerts.value().size() << " alerts. Dashed red lines: alerts; purple: rollbacks (hover for details).</p>\n";
  html << chart("Loss", {series(steps, "loss", "train loss", "#1f77b4"), series(evals, "val_loss", "val loss", "#ff7f0e")},
                markers, x_max);
  html << chart("Learning rate", {series(steps, "lr", "lr", "#2ca02c")}, markers, x_max);
  html << chart("Gradient norm (log scale)", {series(steps, "grad_norm", "grad norm", "#8c564b")}, markers, x_max, true);
  html << chart("Throughput", {series(steps, "tokens_per_s", "tokens/s", "#17becf")}, markers, x_max);
  if (std::any_of(steps.begin(), steps.end(), [](const auto& p) { return p.second.contains("mfu"); }))
    html << chart("MFU (%)", {series(steps, "mfu", "MFU", "#bcbd22", 100.0)}, markers, x_max);
  html << chart("Step time split (ms)",
                {series(steps, "data_s", "data", "#7f7f7f", 1e3),
                 series(steps, "forward_backward_s", "forward+backward", "#1f77b4", 1e3),
                 series(steps, "comm_wait_s", "communication wait", "#d62728", 1e3),
                 series(steps, "optimizer_s", "optimizer", "#2ca02c", 1e3)},
                markers, x_max);
  if (std::any_of(steps.begin(), steps.end(), [](const auto& p) { return p.second.contains("comm_bytes"); }))
    html << chart("Communication per step (MB)", {series(steps, "comm_bytes", "bytes", "#9467bd", 1e-6)}, markers,
                  x_max);
  // Memory (rank 0's allocator and process, metrics.jsonl's memory_bytes): a line per category
  // that ever held bytes, then the in-use peak, the reserved bytes and the resident memory.
  if (std::any_of(steps.begin(), steps.end(), [](const auto& p) { return p.second.contains("memory_bytes"); })) {
    auto memory = [&](const char* key, const char* name, const char* color) {
      Series s{name, color, {}};
      for (const auto& [step, r] : steps)
        if (r.contains("memory_bytes") && r["memory_bytes"].contains(key) && r["memory_bytes"][key].is_number())
          s.points.emplace_back(static_cast<double>(step), 1e-6 * r["memory_bytes"][key].get<double>());
      return s;
    };
    // (key in metrics.jsonl, legend, colour): a category keeps its colour from run to run.
    const std::array<std::array<const char*, 3>, 6> kCategories = {{{"other", "other", "#7f7f7f"},
                                                                    {"parameter", "parameter", "#1f77b4"},
                                                                    {"gradient", "gradient", "#ff7f0e"},
                                                                    {"optimizer_state", "optimizer", "#2ca02c"},
                                                                    {"activation", "activation", "#d62728"},
                                                                    {"gathered_parameter", "gathered", "#9467bd"}}};
    std::vector<Series> lines;
    for (const auto& [key, name, color] : kCategories) {
      Series s = memory(key, name, color);
      if (std::any_of(s.points.begin(), s.points.end(), [](const auto& p) { return p.second > 0; }))
        lines.push_back(std::move(s));
    }
    lines.push_back(memory("peak", "peak", "#8c564b"));
    lines.push_back(memory("reserved", "reserved", "#e377c2"));
    lines.push_back(memory("rss", "RSS", "#17becf"));
    html << chart("Memory by category (MB, after each step)", lines, markers, x_max);
  }
  html << "<h2>Alerts</h2>\n";
  if (alerts.value().empty()) {
    html << "<p>none</p>\n";
  } else {
    html << "<table><tr><th>step</th><th>rule</th><th>condition</th><th>message</th></tr>\n";
    for (const nlohmann::json& a : alerts.value())
      html << "<tr class=\"alert-row\"><td>" << a.value("step", int64_t{0}) << "</td><td>"
           << escape(a.value("rule", std::string())) << "</td><td>" << escape(a.value("condition", std::string()))
           << "</td><td>" << escape(a.value("message", std::string())) << "</td></tr>\n";
    html << "</table>\n";
  }
  html << "</body></html>\n";
  std::ofstream out(out_html, std::ios::binary | std::ios::trunc);
  if (!out) return Status::io_error("cannot write the report to " + out_html);
  const std::string text = html.str();
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Status::io_error("cannot write the report to " + out_html);
  return Status::ok();
}

}  // namespace trident::monitor
