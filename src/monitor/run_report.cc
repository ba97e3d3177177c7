#include "monitor/run_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/report_expert_load.h"

namespace trident::monitor {
namespace {

using Points = std::vector<std::pair<double, double>>;  // (step, value)

struct Series {
  std::string name, color;
  Points points;
  bool dashed = false;  // the discarded steps of a rollback (Note [Discarded and replayed steps])
  bool legend = true;   // false: a further piece of a series already in the legend
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
  return check_moe_layers(r);
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

// Note [Axis ticks]
// Q: Why not four equal divisions of the data's range, as before?
// A: They gave labels such as 0.0005275 and, with 5% padding below a time near 0, -161 ms.
// Ticks are "nice" numbers instead (1, 2 or 5 times a power of ten, about five per axis, the
// way gnuplot and matplotlib's MaxNLocator choose them), the axis spans whole ticks, a range
// of values >= 0 never goes below 0, and labels carry only the digits the tick spacing needs
// (small and large values in the form 2e-4). Log axes tick at powers of ten. The x axis is the
// step (integer ticks, labelled "step").
double nice_step(double range, int target) {
  const double raw = range / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

// `v`, a multiple of `step`, with the decimals the spacing needs.
std::string tick_label(double v, double step) {
  char buf[32];
  if (std::fabs(v) < 1e-12 * std::max(1.0, step)) return "0";
  const double a = std::fabs(v);
  if (a >= 1e6 || a < 1e-3) {
    // Mantissa digits: as many as the step has below v's magnitude.
    const int digits = std::max(0, static_cast<int>(std::floor(std::log10(a)) - std::floor(std::log10(step))));
    std::snprintf(buf, sizeof buf, "%.*e", std::min(digits, 6), v);
    // 2.0e-04 -> 2e-4
    std::string t = buf;
    const size_t e = t.find('e');
    std::string mant = t.substr(0, e), ex = t.substr(e + 1);
    if (mant.find('.') != std::string::npos) {
      while (mant.back() == '0') mant.pop_back();
      if (mant.back() == '.') mant.pop_back();
    }
    const bool neg = ex[0] == '-';
    ex = ex.substr(1);
    while (ex.size() > 1 && ex[0] == '0') ex.erase(0, 1);
    return mant + "e" + (neg ? "-" : "") + ex;
  }
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 9), v);
  return buf;
}

struct Axis {
  double lo, hi;
  std::vector<double> ticks;
};

Axis linear_axis(double lo, double hi, int target) {
  if (hi <= lo) {  // one value: a range around it
    const double d = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  const bool non_negative = lo >= 0;
  const double step = nice_step(hi - lo, target);
  Axis a{std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, {}};
  if (non_negative) a.lo = std::max(0.0, a.lo);
  for (double v = a.lo; v <= a.hi + step * 1e-6; v += step) a.ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return a;
}

// A line chart of `series` against the step, with the markers as vertical lines. The SVG
// scales to the page's width (viewBox; the stylesheet's width: 100%).
std::string chart(const std::string& title, const std::vector<Series>& series, const std::vector<Marker>& markers,
                  double x_max, bool log_y = false) {
  const double W = 1000, H = 250, L = 70, R = 14, T = 26, B = 40;
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
  os << "<figure><figcaption>" << escape(title) << "</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 "
     << W << " " << H << "\" preserveAspectRatio=\"xMinYMin meet\">\n";
  os << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
     << "\" class=\"plot\"/>\n";
  if (n == 0) {
    os << "<text x=\"" << W / 2 << "\" y=\"" << H / 2 << "\" text-anchor=\"middle\">no data</text></svg></figure>\n";
    return os.str();
  }
  Axis y;
  if (log_y) {  // powers of ten (every other one past 8 decades)
    y.lo = std::floor(lo);
    y.hi = std::max(std::ceil(hi), y.lo + 1);
    const double every = y.hi - y.lo > 8 ? 2 : 1;
    for (double v = y.lo; v <= y.hi; v += every) y.ticks.push_back(v);
  } else {
    y = linear_axis(lo, hi, 5);
  }
  const Axis x = linear_axis(0, std::max(1.0, x_max), 8);
  const double x_step = std::max(1.0, x.ticks.size() > 1 ? x.ticks[1] - x.ticks[0] : 1.0);
  auto px = [&](double v) { return L + (W - L - R) * v / x.hi; };
  auto py = [&](double v) { return T + (H - T - B) * (1.0 - (v - y.lo) / (y.hi - y.lo)); };
  const double y_step = y.ticks.size() > 1 ? y.ticks[1] - y.ticks[0] : 1.0;
  for (double v : y.ticks) {
    const std::string label = log_y ? tick_label(std::pow(10.0, v), std::pow(10.0, v)) : tick_label(v, y_step);
    os << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << py(v) << "\" y2=\"" << py(v)
       << "\" class=\"grid\"/><text class=\"ytick\" x=\"" << L - 4 << "\" y=\"" << py(v) + 4
       << "\" text-anchor=\"end\">" << label << "</text>\n";
  }
  for (double v = 0; v <= x.hi + 1e-9; v += x_step)
    os << "<text class=\"xtick\" x=\"" << px(v) << "\" y=\"" << H - B + 15 << "\" text-anchor=\"middle\">"
       << tick_label(v, x_step) << "</text>\n";
  os << "<text x=\"" << L + (W - L - R) / 2 << "\" y=\"" << H - 6 << "\" text-anchor=\"middle\">step</text>\n";
  for (const Marker& m : markers)
    os << "<line x1=\"" << px(static_cast<double>(m.step)) << "\" x2=\"" << px(static_cast<double>(m.step)) << "\" y1=\""
       << T << "\" y2=\"" << H - B << "\" class=\"" << (m.rollback ? "rollback" : "alert") << "\" data-step=\""
       << m.step << "\"><title>" << escape(m.label) << "</title></line>\n";
  double legend_x = L + 8;
  for (const Series& s : series) {
    os << "<polyline class=\"series" << (s.dashed ? " discarded" : "") << "\" data-name=\"" << escape(s.name)
       << "\" data-points=\"" << s.points.size() << "\" stroke=\"" << s.color << "\" points=\"";
    for (const auto& [px_, py_] : s.points)
      if (std::isfinite(py_) && (!log_y || py_ > 0)) os << px(px_) << "," << py(log_y ? std::log10(py_) : py_) << " ";
    os << "\"/>\n";
    if (!s.legend) continue;
    // The legend's colour inline: the stylesheet's `svg text` fill would beat a fill attribute.
    os << "<text x=\"" << legend_x << "\" y=\"" << T - 8 << "\" style=\"fill:" << s.color << "\">" << escape(s.name)
       << "</text>\n";
    legend_x += 14 + 7.0 * static_cast<double>(s.name.size());
  }
  os << "</svg></figure>\n";
  return os.str();
}

// A rollback line and the step lines it discarded (Note [Discarded and replayed steps]).
struct Rollback {
  int64_t from, to;
  nlohmann::json line;  // {"from_step": ..., "to_step": ..., and whatever else the trainer says}
  std::map<int64_t, nlohmann::json> discarded;
};

// The run's wall time from elapsed_s, which restarts at 0 in each process (a resume): the
// sum of each process's last value.
struct WallTime {
  double total = 0, current = 0;
  int processes = 0;
  void add(const nlohmann::json& r) {
    if (!r.contains("elapsed_s") || !r["elapsed_s"].is_number()) return;
    const double e = r["elapsed_s"].get<double>();
    if (processes == 0 || e < current) {
      total += processes == 0 ? 0 : current;
      ++processes;
    }
    current = e;
  }
  double seconds() const { return total + current; }
};

std::string duration(double s) {
  char buf[48];
  const auto t = static_cast<int64_t>(std::llround(s));
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lldh %02lldm %02llds", static_cast<long long>(t / 3600),
                               static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%lldm %02llds", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  else std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The config of the newest complete checkpoint (step_*/config.toml with a DONE marker), as
// "section.key" -> the value's text. A small reader of the file trident writes (one `key =
// value  # doc` a line), not a TOML parser; the [[alerts]] tables are skipped. Empty when no
// checkpoint has one.
std::map<std::string, std::string> newest_config(const std::string& run_dir, std::string* from) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string best;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0 && fs::exists(e.path() / "DONE", ec) && fs::exists(e.path() / "config.toml", ec) &&
        name > best)
      best = name;
  }
  std::map<std::string, std::string> out;
  if (best.empty()) return out;
  *from = best;
  std::ifstream in(fs::path(run_dir) / best / "config.toml");
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.rfind("[[", 0) == 0) {
      section = "";  // an array of tables: not read
      continue;
    }
    if (line.rfind("[", 0) == 0) {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (section.empty() || eq == std::string::npos) continue;
    std::string v = line.substr(eq + 3);
    if (!v.empty() && v[0] == '"') v = v.substr(1, v.find('"', 1) - 1);  // the string, unquoted
    else v = v.substr(0, v.find_first_of(" #"));
    out[section + "." + line.substr(0, eq)] = v;
  }
  return out;
}

std::string summary_table(const std::string& run_dir, const std::map<int64_t, nlohmann::json>& steps,
                          const std::map<int64_t, nlohmann::json>& evals, const std::vector<Rollback>& rollbacks,
                          const WallTime& wall) {
  std::ostringstream os;
  auto row = [&](const std::string& k, const std::string& v) {
    os << "<tr><th>" << escape(k) << "</th><td>" << escape(v) << "</td></tr>\n";
  };
  // Final and best (lowest finite) value of `key` in `rows`: "x at step s; best y at step t".
  auto final_best = [&](const std::map<int64_t, nlohmann::json>& rows, const char* key) -> std::string {
    std::optional<std::pair<int64_t, double>> last, best;
    for (const auto& [step, r] : rows) {
      if (!r.contains(key)) continue;
      const double v = r[key].is_number() ? r[key].get<double>() : std::nan("");
      last = {step, v};
      if (std::isfinite(v) && (!best || v < best->second)) best = {step, v};
    }
    if (!last) return "";
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.4f at step %lld", last->second, static_cast<long long>(last->first));
    std::string s = buf;
    if (best) {
      std::snprintf(buf, sizeof buf, "%.4f at step %lld", best->second, static_cast<long long>(best->first));
      s += std::string("; best ") + buf;
    }
    return s;
  };
  os << "<h2>Summary</h2>\n<table class=\"summary\">\n";
  row("steps", steps.empty() ? "none" : std::to_string(steps.size()) + " (last " + std::to_string(steps.rbegin()->first) + ")");
  if (const std::string s = final_best(steps, "loss"); !s.empty()) row("train loss", s);
  if (const std::string s = final_best(evals, "val_loss"); !s.empty()) row("val loss", s);
  std::vector<double> tps, mfu;
  for (const auto& [step, r] : steps) {
    if (r.contains("tokens_per_s") && r["tokens_per_s"].is_number()) tps.push_back(r["tokens_per_s"].get<double>());
    if (r.contains("mfu") && r["mfu"].is_number()) mfu.push_back(100.0 * r["mfu"].get<double>());
  }
  char buf[96];
  if (!tps.empty()) {
    std::snprintf(buf, sizeof buf, "%.0f tokens/s", median(tps));
    row("median throughput", buf);
  }
  if (!mfu.empty()) {
    std::snprintf(buf, sizeof buf, "%.1f%%", median(mfu));
    row("median MFU", buf);
  }
  if (wall.processes > 0)
    row("wall time", duration(wall.seconds()) + " of training" +
                         (wall.processes > 1 ? " over " + std::to_string(wall.processes) + " processes (resumes)" : ""));
  int64_t discarded = 0;
  for (const Rollback& k : rollbacks) discarded += static_cast<int64_t>(k.discarded.size());
  row("rollbacks", std::to_string(rollbacks.size()) +
                       (rollbacks.empty() ? "" : " (" + std::to_string(discarded) + " steps discarded)"));
  std::string from;
  const std::map<std::string, std::string> cfg = newest_config(run_dir, &from);
  auto get = [&](const std::string& k) {
    auto it = cfg.find(k);
    return it == cfg.end() ? std::string("?") : it->second;
  };
  if (!cfg.empty()) {
    row("layout", "tp " + get("parallel.tp") + " x pp " + get("parallel.pp") + ", ZeRO stage " +
                      get("parallel.zero_stage") + ", data parallel over the other ranks; device " + get("train.device") +
                      ", " + get("precision.dtype"));
    row("model", get("model.arch") + ": " + get("model.n_layer") + " layers, " + get("model.n_head") + " heads, width " +
                     get("model.n_embd") + ", vocabulary " + get("model.vocab_size"));
    row("batch", get("data.batch_size") + " x " + get("data.seq_len") + " tokens x " + get("data.grad_accum_steps") +
                     " micro-batches per step");
    row("optimizer", get("optim.name") == "?" ? "lr " + get("optim.lr") : get("optim.name") + ", lr " + get("optim.lr"));
    row("train.steps", get("train.steps") + " (config of " + from + ")");
  } else {
    row("config", "no complete checkpoint with a config.toml in " + run_dir);
  }
  os << "</table>\n";
  return os.str();
}

// One row per rollback: its steps, the discarded steps and their last loss, the alerts that
// fired at the step it rolled back from, and what else its line says.
std::string rollback_table(const std::vector<Rollback>& rollbacks, const std::vector<nlohmann::json>& alerts) {
  if (rollbacks.empty()) return "";
  std::ostringstream os;
  os << "<h2>Rollbacks</h2>\n<table class=\"rollbacks\"><tr><th>from step</th><th>to step</th><th>discarded "
        "steps</th><th>loss at the step rolled back from</th><th>alerts there</th><th>details</th></tr>\n";
  for (const Rollback& k : rollbacks) {
    std::string loss = "-", rules, details;
    if (auto it = k.discarded.find(k.from); it != k.discarded.end() && it->second.contains("loss"))
      loss = it->second["loss"].is_number() ? num(it->second["loss"].get<double>()) : "not finite";
    for (const nlohmann::json& a : alerts)
      if (a.value("step", int64_t{-1}) == k.from) rules += (rules.empty() ? "" : ", ") + a.value("rule", std::string("?"));
    for (const auto& [key, v] : k.line.items())
      if (key != "from_step" && key != "to_step") details += (details.empty() ? "" : "; ") + key + " " + v.dump();
    const std::string range = k.from > k.to ? std::to_string(k.to + 1) + ".." + std::to_string(k.from) : "none";
    os << "<tr class=\"rollback-row\"><td>" << k.from << "</td><td>" << k.to << "</td><td>" << range << " ("
       << k.discarded.size() << " logged)</td><td>" << escape(loss) << "</td><td>" << escape(rules) << "</td><td>"
       << escape(details) << "</td></tr>\n";
  }
  os << "</table>\n";
  return os.str();
}

// The expert-load panel (monitor/report_expert_load.h), when metrics.jsonl has "moe_layers":
// a heatmap per mixture-of-experts layer, then a line per layer of the busiest expert's share,
// the dropped choices, the load-balancing loss and, under expert parallelism, the exchanges' time.
std::string expert_load_panel(const std::map<int64_t, nlohmann::json>& steps, const std::vector<Marker>& markers,
                              double x_max) {
  const std::vector<ExpertLoad> loads = expert_loads(steps);
  if (loads.empty()) return "";
  static const std::array<const char*, 10> kColours = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  std::ostringstream os;
  os << "<h2 id=\"expert-load\">Expert load</h2>\n<p>Per mixture-of-experts layer, the routing choices each expert "
        "got in each step (before any were dropped), over every rank.</p>\n";
  for (const ExpertLoad& l : loads) os << expert_load_heatmap(l, x_max);
  std::vector<Series> share, dropped, balance, exchange;
  for (size_t i = 0; i < loads.size(); ++i) {
    const std::string name = "layer " + std::to_string(loads[i].layer);
    const char* colour = kColours[i % kColours.size()];
    Points pct;
    for (const auto& [x, v] : loads[i].max_share) pct.emplace_back(x, 100.0 * v);
    share.push_back({name, colour, std::move(pct)});
    dropped.push_back({name, colour, loads[i].dropped});
    if (!loads[i].aux_loss.empty()) balance.push_back({name, colour, loads[i].aux_loss});
    if (!loads[i].all_to_all_ms.empty()) exchange.push_back({name, colour, loads[i].all_to_all_ms});
  }
  os << chart("Busiest expert's share of the choices (%)", share, markers, x_max);
  // A dropless run (no capacity) drops nothing: a sentence instead of a flat line.
  const bool any_dropped = std::any_of(loads.begin(), loads.end(), [](const ExpertLoad& l) {
    return std::any_of(l.dropped.begin(), l.dropped.end(), [](const auto& p) { return p.second > 0; });
  });
  if (any_dropped) os << chart("Dropped choices per step", dropped, markers, x_max);
  else os << "<p class=\"no-drops\">No routing choice was dropped (no capacity, or none reached).</p>\n";
  if (!balance.empty()) os << chart("Load-balancing loss per layer (even load: k)", balance, markers, x_max);
  if (!exchange.empty()) os << chart("Expert-parallel all_to_all time per step (ms, mean over ranks)", exchange, markers, x_max);
  return os.str();
}

}  // namespace

Status write_run_report(const std::string& run_dir, const std::string& out_html) {
  auto metrics = read_jsonl(run_dir + "/metrics.jsonl", true, check_metrics_line);
  if (!metrics.is_ok()) return metrics.status();
  auto alerts = read_jsonl(run_dir + "/alerts.jsonl", false, check_alert_line);
  if (!alerts.is_ok()) return alerts.status();
  // Note [Discarded and replayed steps]
  // A rollback line follows the steps it discarded (Note [Rollback and skip]): those lines
  // move from the run's trajectory to the rollback's own, drawn dashed in grey, and the steps
  // logged after it (the replayed ones, on other batches) are the trajectory. So every step of
  // the run appears once in the curves, and a rollback's lost work stays visible beside it.
  std::map<int64_t, nlohmann::json> steps, evals;
  std::vector<Rollback> rollbacks;
  std::vector<Marker> markers;
  WallTime wall;
  for (const nlohmann::json& r : metrics.value()) {
    wall.add(r);
    if (r.contains("rollback")) {
      const auto& rb = r["rollback"];
      Rollback k{rb.value("from_step", int64_t{0}), rb.value("to_step", int64_t{0}), rb, {}};
      for (auto it = steps.upper_bound(k.to); it != steps.end();) {
        k.discarded.insert(*it);
        it = steps.erase(it);
      }
      evals.erase(evals.upper_bound(k.to), evals.end());
      markers.push_back({k.from, "rollback from step " + std::to_string(k.from) + " to " + std::to_string(k.to), true});
      rollbacks.push_back(std::move(k));
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
  for (const Rollback& k : rollbacks) x_max = std::max(x_max, static_cast<double>(k.from));
  auto series = [&](const std::map<int64_t, nlohmann::json>& rows, const char* key, const char* name,
                    const char* color, double scale = 1.0) {
    Series s{name, color, {}};
    for (const auto& [step, r] : rows)
      if (r.contains(key) && r[key].is_number())
        s.points.emplace_back(static_cast<double>(step), scale * r[key].get<double>());
    return s;
  };
  // The trajectory's series, then each rollback's discarded steps of the same key.
  auto with_discarded = [&](std::vector<Series> lines, const char* key, double scale = 1.0) {
    for (size_t i = 0; i < rollbacks.size(); ++i) {
      Series d = series(rollbacks[i].discarded, key, "discarded steps", "#9a9a9a", scale);
      d.dashed = true;
      d.legend = i == 0;
      lines.push_back(std::move(d));
    }
    return lines;
  };
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>trident run report: " << escape(run_dir)
       << "</title>\n<style>\nbody{font:14px sans-serif;margin:24px;color:#222}figure{margin:0 0 18px 0}"
          "figcaption{font-weight:bold;margin-bottom:2px}svg{width:100%;height:auto;display:block}"
          "svg text{font:12px sans-serif;fill:#444}"
          ".plot{fill:#fafafa;stroke:#bbb}.grid{stroke:#e4e4e4}.series{fill:none;stroke-width:1.5}"
          ".discarded{stroke-dasharray:5 3}"
          ".alert{stroke:#d62728;stroke-dasharray:4 3;stroke-width:1.5}.rollback{stroke:#9467bd;stroke-width:2}"
          "table{border-collapse:collapse;margin-bottom:16px}td,th{border:1px solid #ccc;padding:3px 8px;"
          "text-align:left}table.summary th{background:#f4f4f4}\n</style></head>"
          "<body>\n<h1>trident run report</h1>\n<p>"
       << escape(run_dir) << ": " << steps.size() << " steps, " << evals.size() << " evaluations, "
       << alerts.value().size() << " alerts, " << rollbacks.size()
       << " rollbacks. Dashed red lines: alerts; purple: rollbacks (hover for details); dashed grey: steps a "
          "rollback discarded.</p>\n";
  html << summary_table(run_dir, steps, evals, rollbacks, wall);
  html << rollback_table(rollbacks, alerts.value());
  html << chart("Loss",
                with_discarded({series(steps, "loss", "train loss", "#1f77b4"),
                                series(evals, "val_loss", "val loss", "#ff7f0e")}, "loss"),
                markers, x_max);
  html << chart("Learning rate", {series(steps, "lr", "lr", "#2ca02c")}, markers, x_max);
  html << chart("Gradient norm (log scale)", {series(steps, "grad_norm", "grad norm", "#8c564b")}, markers, x_max, true);
  html << chart("Throughput (tokens/s)", {series(steps, "tokens_per_s", "tokens/s", "#17becf")}, markers, x_max);
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
  html << expert_load_panel(steps, markers, x_max);
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
