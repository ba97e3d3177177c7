#include "monitor/registry.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace trident::monitor {
namespace {

bool valid_name(const std::string& s, bool colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

}  // namespace

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    TRI_CHECK(std::isfinite(bounds_[i]) && (i == 0 || bounds_[i] > bounds_[i - 1]),
              "histogram bucket bounds must be finite and strictly increasing; bound ", i, " is ", bounds_[i]);
  }
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double v) {
  // The first bucket whose bound is >= v (Prometheus' "le"); NaN lands in +Inf.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;  // the buckets' total, so +Inf == count in every snapshot
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  TRI_CHECK(start > 0 && factor > 1 && count >= 1, "exponential_buckets(start ", start, ", factor ", factor,
            ", count ", count, "): need start > 0, factor > 1, count >= 1");
  std::vector<double> b;
  for (int i = 0; i < count; ++i) b.push_back(start * std::pow(factor, i));
  return b;
}

Registry::Entry& Registry::find_or_add(const std::string& name, const std::string& help, MetricType type,
                                       const Labels& labels) {
  TRI_CHECK(valid_name(name, /*colon=*/true), "metric name '", name,
            "' is invalid: allowed: [a-zA-Z_:][a-zA-Z0-9_:]* (Prometheus' metric names)");
  for (const auto& [key, value] : labels) {
    TRI_CHECK(valid_name(key, /*colon=*/false) && !key.starts_with("__"), "label name '", key, "' of metric '", name,
              "' is invalid: allowed: [a-zA-Z_][a-zA-Z0-9_]*, not starting with __");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto fam = std::find_if(families_.begin(), families_.end(), [&](const FamilyEntry& f) { return f.name == name; });
  if (fam == families_.end()) {
    families_.push_back({name, help, type, {}});
    fam = std::prev(families_.end());
  }
  TRI_CHECK(fam->type == type, "metric '", name, "' is a ", metric_type_name(fam->type), ", not a ",
            metric_type_name(type));
  TRI_CHECK(fam->help == help, "metric '", name, "' was registered with another help text ('", fam->help, "' vs '",
            help, "')");
  for (Entry& e : fam->entries)
    if (e.labels == labels) return e;
  fam->entries.push_back({labels, nullptr, nullptr, nullptr});
  return fam->entries.back();
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  Entry& e = find_or_add(name, help, MetricType::kCounter, labels);
  std::lock_guard<std::mutex> lock(mu_);
  if (!e.counter) e.counter = std::make_unique<Counter>();
  return *e.counter;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  Entry& e = find_or_add(name, help, MetricType::kGauge, labels);
  std::lock_guard<std::mutex> lock(mu_);
  if (!e.gauge) e.gauge = std::make_unique<Gauge>();
  return *e.gauge;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                               const Labels& labels) {
  Entry& e = find_or_add(name, help, MetricType::kHistogram, labels);
  std::lock_guard<std::mutex> lock(mu_);
  if (!e.histogram) e.histogram = std::make_unique<Histogram>(bounds);
  TRI_CHECK(e.histogram->bounds() == bounds, "histogram '", name, "' was registered with other bucket bounds");
  return *e.histogram;
}

std::vector<Registry::Family> Registry::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Family> out;
  for (const FamilyEntry& f : families_) {
    Family fam{f.name, f.help, f.type, {}};
    for (const Entry& e : f.entries) {
      Series s;
      s.labels = e.labels;
      if (e.counter) s.value = e.counter->value();
      if (e.gauge) s.value = e.gauge->value();
      if (e.histogram) {
        s.histogram = e.histogram->snapshot();
        s.bounds = e.histogram->bounds();
      }
      if (e.counter || e.gauge || e.histogram) fam.series.push_back(std::move(s));
    }
    out.push_back(std::move(fam));
  }
  return out;
}

}  // namespace trident::monitor
