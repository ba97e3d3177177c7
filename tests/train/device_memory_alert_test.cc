// memory_high on a device (issue #23): the rule compares the device allocator's reserved bytes
// with the limit its memory reports (MemoryStats::limit: a GPU's size or
// TRIDENT_CUDA_MEMORY_LIMIT_MB), shown on the emulated device (support/emulated_device.h),
// whose limit a test sets. Under a limit the model overflows, the rule fires once, at step
// 1, naming the device allocator of rank 0; under a limit far above it, it stays quiet; and
// metrics.jsonl and the registry carry the limit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/prometheus_text.h"
#include "support/emulated_device.h"
#include "support/tiny_run.h"
#include "train/run_monitor.h"
#include "train/trainer.h"

namespace trident {
namespace {

std::vector<nlohmann::json> lines(const std::filesystem::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream f(file);
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

class DeviceMemoryAlert : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_);
    const Status s = testing::write_tiny_run_data(dir_);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  void TearDown() override {
    testing::set_emulated_memory_limit(0);
    std::filesystem::remove_all(dir_);
  }
  // Runs 3 steps on the emulated device under `limit` bytes; returns the out_dir.
  std::filesystem::path run(int64_t limit, const std::string& name, std::string* prometheus) {
    testing::set_emulated_memory_limit(limit);
    train::TrainConfig cfg = testing::tiny_run_config(dir_);
    cfg.train.steps = 3;
    cfg.train.eval_interval = 0;
    cfg.train.out_dir = (dir_ / name).string();
    monitor::AlertRule rule;
    rule.name = "memory";
    rule.condition = "memory_high";
    rule.memory_fraction = 0.999;  // no host is that full; the device under a small limit is
    rule.actions = "log";
    cfg.alerts = {rule};
    auto t = train::Trainer::create(cfg, nullptr, testing::emulated_device());
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (!t.is_ok()) return {};
    t.value()->show_progress = false;
    const Status s = t.value()->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    *prometheus = monitor::prometheus_text(t.value()->monitor()->registry());
    return cfg.train.out_dir;
  }
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() /
                               ("trident_device_memory_" + std::to_string(::getpid()));
};

TEST_F(DeviceMemoryAlert, FiresAboveTheDeviceLimitOnly) {
  std::string text;
  const std::filesystem::path small = run(64 << 10, "small", &text);
  std::vector<nlohmann::json> events = lines(small / "alerts.jsonl");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["rule"], "memory");
  EXPECT_EQ(events[0]["step"], 1);
  EXPECT_EQ(events[0]["metric"], "device_memory_reserved_ratio");
  EXPECT_GT(events[0]["value"].get<double>(), 1.0);  // a tiny GPT-2 and AdamW hold more than 64 KiB
  EXPECT_NE(events[0]["message"].get<std::string>().find("the device allocator of rank 0 holds"),
            std::string::npos)
      << events[0];
  EXPECT_NE(text.find("trident_memory_limit_bytes{device=\"privateuse:0\"} 65536\n"),
            std::string::npos)
      << text;
  for (const nlohmann::json& m : lines(small / "metrics.jsonl"))
    if (m.contains("loss")) {
      EXPECT_EQ(m["memory_bytes"]["limit"], 65536) << m;
      EXPECT_GT(m["memory_bytes"]["reserved"].get<int64_t>(), 65536) << m;
    }
  const std::filesystem::path large = run(int64_t{1} << 40, "large", &text);
  EXPECT_TRUE(lines(large / "alerts.jsonl").empty());
}

}  // namespace
}  // namespace trident
