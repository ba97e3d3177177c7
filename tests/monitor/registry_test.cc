#include "monitor/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "core/check.h"
#include "monitor/prometheus_text.h"

namespace trident::monitor {
namespace {

TEST(Registry, SeriesAreFoundAgainByNameAndLabels) {
  Registry r;
  Gauge& a = r.gauge("trident_loss", "training loss", {{"kind", "train"}});
  Gauge& b = r.gauge("trident_loss", "training loss", {{"kind", "train"}});
  Gauge& c = r.gauge("trident_loss", "training loss", {{"kind", "val"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_TRUE(std::isnan(a.value()));  // not measured yet
  a.set(2.5);
  c.set(3.0);
  const auto snap = r.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].series.size(), 2u);
  EXPECT_EQ(snap[0].series[0].value, 2.5);
  EXPECT_EQ(snap[0].series[1].value, 3.0);
}

TEST(Registry, RejectsBadNamesAndTypeChanges) {
  Registry r;
  EXPECT_THROW(r.gauge("1loss", "x"), Error);
  EXPECT_THROW(r.gauge("loss-x", "x"), Error);
  EXPECT_THROW(r.gauge("loss", "x", {{"bad-label", "v"}}), Error);
  EXPECT_THROW(r.gauge("loss", "x", {{"__reserved", "v"}}), Error);
  r.counter("trident_steps_total", "steps");
  EXPECT_THROW(r.gauge("trident_steps_total", "steps"), Error);
  EXPECT_THROW(r.counter("trident_steps_total", "other help"), Error);
}

TEST(Registry, CountersAddFromManyThreads) {
  Registry r;
  Counter& c = r.counter("trident_events_total", "events");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&c] {
      for (int i = 0; i < 10000; ++i) c.inc();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000.0);
}

TEST(Histogram, BucketsAreCumulativeWithLessOrEqualBounds) {
  Histogram h({0.1, 1.0, 10.0});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0}) h.observe(v);
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 56.65);
  EXPECT_THROW(Histogram({1.0, 1.0}), Error);
  EXPECT_EQ(exponential_buckets(1e-3, 10, 3), (std::vector<double>{1e-3, 1e-2, 1e-1}));
}

TEST(PrometheusText, HelpTypeLabelsAndHistograms) {
  Registry r;
  r.gauge("trident_loss", "Training loss.\nMean over ranks").set(1.25);
  r.counter("trident_comm_calls_total", "collective calls", {{"op", "all_reduce"}}).inc(3);
  r.gauge("trident_val_loss", "val loss");  // NaN until set
  r.gauge("trident_name", "label escaping", {{"path", "a\"b\\c\nd"}}).set(-std::numeric_limits<double>::infinity());
  Histogram& h = r.histogram("trident_step_seconds", "step time", {0.5, 1});
  h.observe(0.25);
  h.observe(2);
  const std::string text = prometheus_text(r, {{"job", "j"}, {"rank", "1"}});
  EXPECT_EQ(text,
            "# HELP trident_loss Training loss.\\nMean over ranks\n"
            "# TYPE trident_loss gauge\n"
            "trident_loss{job=\"j\",rank=\"1\"} 1.25\n"
            "# HELP trident_comm_calls_total collective calls\n"
            "# TYPE trident_comm_calls_total counter\n"
            "trident_comm_calls_total{job=\"j\",rank=\"1\",op=\"all_reduce\"} 3\n"
            "# HELP trident_val_loss val loss\n"
            "# TYPE trident_val_loss gauge\n"
            "trident_val_loss{job=\"j\",rank=\"1\"} NaN\n"
            "# HELP trident_name label escaping\n"
            "# TYPE trident_name gauge\n"
            "trident_name{job=\"j\",rank=\"1\",path=\"a\\\"b\\\\c\\nd\"} -Inf\n"
            "# HELP trident_step_seconds step time\n"
            "# TYPE trident_step_seconds histogram\n"
            "trident_step_seconds_bucket{job=\"j\",rank=\"1\",le=\"0.5\"} 1\n"
            "trident_step_seconds_bucket{job=\"j\",rank=\"1\",le=\"1\"} 1\n"
            "trident_step_seconds_bucket{job=\"j\",rank=\"1\",le=\"+Inf\"} 2\n"
            "trident_step_seconds_sum{job=\"j\",rank=\"1\"} 2.25\n"
            "trident_step_seconds_count{job=\"j\",rank=\"1\"} 2\n");
}

}  // namespace
}  // namespace trident::monitor
