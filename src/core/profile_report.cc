#include "core/profile_report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace trident::profiler {
namespace {

// The shortest decimal that reads back as the same double; JSON has no NaN or infinity.
std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::string json_quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kRecompute: return "recompute";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kCommunication: return "communication";
    case Phase::kData: return "data";
    case Phase::kOther: return "other";
  }
  return "?";
}

double ProfileReport::self_ms() const {
  double s = 0.0;
  for (const ProfileRow& r : rows) s += r.self_ms;
  return s;
}

double ProfileReport::coverage() const { return wall_ms > 0.0 ? self_ms() / wall_ms : 0.0; }

double ProfileReport::phase_ms(Phase phase) const {
  double s = 0.0;
  for (const ProfileRow& r : rows)
    if (r.phase == phase) s += r.self_ms;
  return s;
}

const ProfileRow* ProfileReport::find(std::string_view name, Phase phase) const {
  for (const ProfileRow& r : rows)
    if (r.name == name && r.phase == phase) return &r;
  return nullptr;
}

std::string ProfileReport::table(size_t max_rows) const {
  size_t width = 24;
  const size_t shown = std::min(max_rows, rows.size());
  for (size_t i = 0; i < shown; ++i) width = std::max(width, rows[i].name.size());
  const int w = static_cast<int>(width);
  const double wall = wall_ms > 0.0 ? wall_ms : 1.0;
  std::string out;
  char line[512];
  // total < 0: left blank.
  auto add = [&](const std::string& name, const char* phase, const std::string& calls, double self, double total) {
    char total_text[32] = "";
    if (total >= 0.0) std::snprintf(total_text, sizeof total_text, "%.2f", total);
    std::snprintf(line, sizeof line, "%-*s  %-13s  %7s  %10.2f  %6.1f%%  %10s\n", w, name.c_str(), phase, calls.c_str(),
                  self, 100.0 * self / wall, total_text);
    out += line;
  };
  std::snprintf(line, sizeof line, "%-*s  %-13s  %7s  %10s  %7s  %10s\n", w, "name", "phase", "calls", "self ms", "self %",
                "total ms");
  out += line;
  out += std::string(width, '-') + "  " + std::string(13, '-') + "  " + std::string(7, '-') + "  " + std::string(10, '-') +
         "  " + std::string(7, '-') + "  " + std::string(10, '-') + "\n";
  for (size_t i = 0; i < shown; ++i) {
    const ProfileRow& r = rows[i];
    add(r.name, phase_name(r.phase), std::to_string(r.calls), r.self_ms, r.total_ms);
  }
  if (shown < rows.size()) {
    double rest = 0.0;
    int64_t calls = 0;
    for (size_t i = shown; i < rows.size(); ++i) {
      rest += rows[i].self_ms;
      calls += rows[i].calls;
    }
    char more[48];
    std::snprintf(more, sizeof more, "(%zu more rows)", rows.size() - shown);
    add(more, "", std::to_string(calls), rest, -1.0);
  }
  add("total in scopes", "", "", self_ms(), -1.0);
  add("outside any scope", "", "", std::max(0.0, wall_ms - self_ms()), -1.0);
  std::snprintf(line, sizeof line, "wall %.2f ms, coverage %.1f%% (self times / wall)\nby phase:", wall_ms,
                100.0 * coverage());
  out += line;
  bool first = true;
  for (int p = 0; p < kNumPhases; ++p) {
    const double ms = phase_ms(static_cast<Phase>(p));
    if (ms == 0.0) continue;
    std::snprintf(line, sizeof line, "%s %s %.1f ms (%.1f%%)", first ? "" : ",", phase_name(static_cast<Phase>(p)), ms,
                  100.0 * ms / wall);
    out += line;
    first = false;
  }
  out += "\n";
  return out;
}

std::string ProfileReport::json() const {
  std::string out = "{\"wall_ms\": " + number(wall_ms) + ", \"self_ms\": " + number(self_ms()) +
                    ", \"coverage\": " + number(coverage()) + ", \"phases\": {";
  for (int p = 0; p < kNumPhases; ++p)
    out += std::string(p ? ", " : "") + json_quoted(phase_name(static_cast<Phase>(p))) + ": " +
           number(phase_ms(static_cast<Phase>(p)));
  out += "}, \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ProfileRow& r = rows[i];
    out += std::string(i ? ", " : "") + "{\"name\": " + json_quoted(r.name) + ", \"phase\": " + json_quoted(phase_name(r.phase)) +
           ", \"calls\": " + std::to_string(r.calls) + ", \"self_ms\": " + number(r.self_ms) +
           ", \"total_ms\": " + number(r.total_ms) + "}";
  }
  return out + "]}";
}

}  // namespace trident::profiler
