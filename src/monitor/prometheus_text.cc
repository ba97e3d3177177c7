#include "monitor/prometheus_text.h"

#include <charconv>
#include <cmath>

namespace trident::monitor {
namespace {

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (quote && c == '"') out += "\\\"";
    else out += c;
  }
  return out;
}

void put_labels(std::string& out, const Labels& a, const Labels& b, const char* le = nullptr) {
  if (a.empty() && b.empty() && le == nullptr) return;
  out += '{';
  bool first = true;
  for (const Labels* ls : {&a, &b}) {
    for (const auto& [k, v] : *ls) {
      if (!first) out += ',';
      first = false;
      out.append(k).append("=\"").append(escape(v, true)).append("\"");
    }
  }
  if (le != nullptr) {
    if (!first) out += ',';
    out.append("le=\"").append(le).append("\"");
  }
  out += '}';
}

}  // namespace

std::string prometheus_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::string prometheus_text(const Registry& registry, const Labels& const_labels) {
  // Appends piece by piece (GCC 12 warns, wrongly, on `"literal" + std::string&&`).
  std::string out;
  auto line = [&](const std::string& name, const char* suffix, const Labels& labels, const char* le,
                  const std::string& value) {
    out.append(name).append(suffix);
    put_labels(out, const_labels, labels, le);
    out.append(" ").append(value).append("\n");
  };
  for (const Registry::Family& f : registry.snapshot()) {
    if (f.series.empty()) continue;
    out.append("# HELP ").append(f.name).append(" ").append(escape(f.help, false)).append("\n");
    out.append("# TYPE ").append(f.name).append(" ").append(metric_type_name(f.type)).append("\n");
    for (const Registry::Series& s : f.series) {
      if (f.type != MetricType::kHistogram) {
        line(f.name, "", s.labels, nullptr, prometheus_number(s.value));
        continue;
      }
      for (size_t i = 0; i < s.histogram.cumulative.size(); ++i) {
        const std::string le = i < s.bounds.size() ? prometheus_number(s.bounds[i]) : "+Inf";
        line(f.name, "_bucket", s.labels, le.c_str(), std::to_string(s.histogram.cumulative[i]));
      }
      line(f.name, "_sum", s.labels, nullptr, prometheus_number(s.histogram.sum));
      line(f.name, "_count", s.labels, nullptr, std::to_string(s.histogram.count));
    }
  }
  return out;
}

}  // namespace trident::monitor
