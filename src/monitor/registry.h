// The metrics registry: counters, gauges and histograms, each a named family of series told
// apart by labels, updated by the training thread every step and read by the sinks
// (monitor/prometheus_text.h, the TensorBoard and JSONL writers) from any thread.
//
// Cheap to update: registering a series (a name and its labels) takes a lock and may
// allocate, so callers register once and keep the returned reference; set(), inc() and
// observe() are then a few relaxed atomic operations, no lock, no allocation. References
// stay valid for the registry's lifetime.
//
// Names follow Prometheus' conventions (metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]*, base units in the name: _seconds, _bytes, counters ending _total);
// the registry checks the character sets and that a name keeps one type and help text,
// the naming conventions are the caller's.
//
// Not here: exposition (prometheus_text.h), timestamps, or removing series.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace trident::monitor {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };
const char* metric_type_name(MetricType type);

// A value that only goes up (Prometheus resets are process restarts).
class Counter {
 public:
  void inc(double by = 1.0) { value_.fetch_add(by, std::memory_order_relaxed); }
  // Mirrors a monotonic count kept elsewhere (e.g. a communicator's calls so far).
  void set_total(double total) { value_.store(total, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down. Starts as NaN: "not measured yet" (Prometheus shows NaN;
// the TensorBoard writer skips it).
class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{std::numeric_limits<double>::quiet_NaN()};
};

// Observations counted into buckets with upper bounds (the last bucket is +Inf), with their
// sum and count. A reader may see a count and buckets a few observations apart (relaxed
// updates); each is exact once updates stop.
class Histogram {
 public:
  // `bounds`: strictly increasing finite upper bounds.
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

// Bucket bounds start, start*factor, ... (count of them): for durations and sizes.
std::vector<double> exponential_buckets(double start, double factor, int count);

class Registry {
 public:
  // The series `name`{labels}, created on first use. Throws trident::Error for a bad name or
  // label name, or a name registered before with another type or help text.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                       const Labels& labels = {});

  // A consistent list of the families and series (values read at the time of the call), in
  // registration order. Thread-safe with every other member.
  struct Series {
    Labels labels;
    double value = 0.0;            // counters and gauges
    Histogram::Snapshot histogram; // histograms
    std::vector<double> bounds;    // histograms
  };
  struct Family {
    std::string name, help;
    MetricType type;
    std::vector<Series> series;
  };
  std::vector<Family> snapshot() const;

 private:
  struct Entry {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct FamilyEntry {
    std::string name, help;
    MetricType type;
    std::deque<Entry> entries;
  };
  Entry& find_or_add(const std::string& name, const std::string& help, MetricType type, const Labels& labels);

  mutable std::mutex mu_;
  std::deque<FamilyEntry> families_;
};

}  // namespace trident::monitor
