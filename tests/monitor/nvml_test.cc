// GPU metrics through NVML (monitor/nvml.h) without a GPU: a fake libnvidia-ml
// (fake_nvml.cc, built beside this test, its path in TRIDENT_FAKE_NVML) answers the calls;
// its figures must arrive as trident_gpu_* gauges in the Prometheus text with the rank's
// labels. A missing library, one without the entry points, and a failing nvmlInit each give
// no metrics and one line naming the reason, never an error that stops a run.
#include "monitor/nvml.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "monitor/prometheus_text.h"
#include "support/scoped_env.h"

namespace trident::monitor {
namespace {

const char* fake() {
  return TRIDENT_FAKE_NVML;
}

TEST(Nvml, SamplesTheFakeLibrary) {
  auto nvml = Nvml::open(fake());
  ASSERT_TRUE(nvml.is_ok()) << nvml.status().to_string();
  auto s = nvml.value()->sample({0, ""});
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_DOUBLE_EQ(s.value().utilization_ratio, 0.40);
  EXPECT_EQ(s.value().memory_used_bytes, int64_t{1} << 30);
  EXPECT_EQ(s.value().memory_total_bytes, int64_t{80} << 30);
  ASSERT_TRUE(s.value().power_watts.has_value());
  EXPECT_DOUBLE_EQ(*s.value().power_watts, 250.5);
  s = nvml.value()->sample({0, "GPU-fake-1"});  // by UUID; no power reading on this one
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_DOUBLE_EQ(s.value().utilization_ratio, 0.41);
  EXPECT_FALSE(s.value().power_watts.has_value());
  s = nvml.value()->sample({7, ""});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(
      s.status().message().find("nvmlDeviceGetHandleByIndex_v2 failed: Invalid Argument for GPU 7"),
      std::string::npos)
      << s.status().to_string();
}

TEST(Nvml, CudaIndicesThroughCudaVisibleDevices) {
  auto id = nvml_index_of(1, nullptr);
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(id.value().index, 1u);
  id = nvml_index_of(1, "3,1");
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(id.value().index, 1u);
  id = nvml_index_of(0, "3,1");
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(id.value().index, 3u);
  id = nvml_index_of(1, "GPU-aa,GPU-bb");
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(id.value().uuid, "GPU-bb");
  id = nvml_index_of(0, "MIG-0123");
  ASSERT_FALSE(id.is_ok());
  EXPECT_NE(
      id.status().message().find("CUDA_VISIBLE_DEVICES = \"MIG-0123\" gives entry \"MIG-0123\""),
      std::string::npos)
      << id.status().to_string();
}

TEST(Nvml, GaugesArriveInThePrometheusTextWithTheRanksLabels) {
  ScopedEnv library("TRIDENT_NVML_LIBRARY", fake());
  ScopedEnv visible("CUDA_VISIBLE_DEVICES", "1,0");
  ::testing::internal::CaptureStderr();
  std::unique_ptr<GpuMetrics> gpu = GpuMetrics::open(0, "rank 3");  // CUDA 0 is NVML's GPU 1
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(gpu, nullptr) << said;
  EXPECT_EQ(said, "");
  Registry r;
  gpu->publish(r);
  const std::string text = prometheus_text(r, {{"job", "t"}, {"rank", "3"}});
  EXPECT_NE(text.find("trident_gpu_utilization_ratio{job=\"t\",rank=\"3\",gpu=\"0\"} 0.41\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("trident_gpu_memory_used_bytes{job=\"t\",rank=\"3\",gpu=\"0\"} 2147483648\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("trident_gpu_memory_total_bytes{job=\"t\",rank=\"3\",gpu=\"0\"} 85899345920\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("trident_gpu_power_watts"), std::string::npos) << text;  // GPU 1 reports none
  ScopedEnv first("CUDA_VISIBLE_DEVICES", nullptr);
  gpu = GpuMetrics::open(0, "rank 0");
  ASSERT_NE(gpu, nullptr);
  gpu->publish(r);
  EXPECT_NE(prometheus_text(r).find("trident_gpu_power_watts{gpu=\"0\"} 250.5\n"),
            std::string::npos)
      << prometheus_text(r);
}

// No library, a library without NVML's entry points, an NVML that fails to start: no
// metrics and one line saying why.
TEST(Nvml, AbsentOrBrokenLibraryGivesOneLineAndNoMetrics) {
  const std::pair<const char*, const char*> cases[] = {
      {"/nonexistent/libnvidia-ml.so.1",
       "rank 2: no GPU metrics: NVML not loaded: /nonexistent/libnvidia-ml.so.1"},
      {"libm.so.6",
       "rank 2: no GPU metrics: NVML not usable: libm.so.6 lacks nvmlInit_v2, nvmlShutdown"},
  };
  for (const auto& [path, want] : cases) {
    ScopedEnv library("TRIDENT_NVML_LIBRARY", path);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(GpuMetrics::open(0, "rank 2"), nullptr) << path;
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(said.rfind(want, 0), 0u) << said;
    EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  }
  ScopedEnv library("TRIDENT_NVML_LIBRARY", fake());
  ScopedEnv fail("FAKE_NVML_INIT_RC", "9");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(GpuMetrics::open(0, "rank 2"), nullptr);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            std::string("rank 2: no GPU metrics: NVML not usable: ") + fake() +
                ": nvmlInit_v2 failed: Driver Not Loaded\n");
}

// A GPU that stops answering: one line, then silence (no line per sample).
TEST(Nvml, ASampleThatFailsStopsTheSamples) {
  ScopedEnv library("TRIDENT_NVML_LIBRARY", fake());
  ScopedEnv visible("CUDA_VISIBLE_DEVICES", "5");  // NVML index 5: the fake has 2 GPUs
  std::unique_ptr<GpuMetrics> gpu = GpuMetrics::open(0, "rank 1");
  ASSERT_NE(gpu, nullptr);
  Registry r;
  ::testing::internal::CaptureStderr();
  gpu->publish(r);
  gpu->publish(r);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(said, "rank 1: no more GPU metrics: " + std::string(fake()) +
                      ": nvmlDeviceGetHandleByIndex_v2 failed: Invalid Argument for GPU 5\n");
  EXPECT_EQ(prometheus_text(r).find("trident_gpu"), std::string::npos);
}

}  // namespace
}  // namespace trident::monitor
