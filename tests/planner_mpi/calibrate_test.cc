// `trident calibrate` across ranks (Note [Ranks measured together] in planner/calibration_timer.cc):
// every rate is the slowest rank's median over a count of calls the ranks agree on, so every
// rank ends with the same cluster file, to the digit; and every rate it writes is a rate.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "planner/calibrate.h"
#include "support/mpi_training_test.h"

namespace trident::train {
namespace {

class CalibrateTest : public testing::MpiTrainingTest {};

TEST_F(CalibrateTest, EveryRankWritesTheSameRates) {
  TrainConfig cfg = testing::tiny_run_config(dir);
  cfg.train.threads = 1;
  planner::CalibrationOptions options;
  options.seconds_per_measure = 0.02;  // a few calls of each: the agreement, not the rates
  const planner::Cluster c = planner::calibrate(cfg, world, options);

  const planner::DeviceSpec& d = c.device;
  for (const auto& [name, value] : std::vector<std::pair<std::string, double>>{
           {"peak_tflops_fp32", d.peak_tflops_fp32},
           {"peak_tflops_bf16", d.peak_tflops_bf16},
           {"attention_efficiency", d.attention_efficiency},
           {"memory_bandwidth_gbs", d.memory_bandwidth_gbs},
           {"vocab_loss_ns_per_logit", d.vocab_loss_ns_per_logit},
           {"fused_loss_ns_per_logit", d.fused_loss_ns_per_logit}}) {
    EXPECT_TRUE(std::isfinite(value) && value > 0.0) << name << " = " << value;
  }
  EXPECT_GE(d.gemm_half_k, 0.0);
  EXPECT_GE(d.gemm_half_rows, 0.0);
  if (world->size() > 1) {
    EXPECT_GT(c.intra.bandwidth_gbs, 0.0);
    EXPECT_GE(c.intra.latency_us, 0.0);
  }

  // The cluster file's text, byte by byte, against rank 0's.
  const std::string mine = c.to_toml();
  Tensor length = full({1}, static_cast<double>(mine.size()), DType::kI64);
  world->broadcast(length, 0);
  ASSERT_EQ(static_cast<int64_t>(length.item()), static_cast<int64_t>(mine.size()))
      << "rank " << world->rank() << " wrote a file of another length:\n" << mine;
  Tensor bytes = zeros({static_cast<int64_t>(mine.size())}, DType::kI64);
  for (size_t i = 0; i < mine.size(); ++i) bytes.data_ptr<int64_t>()[i] = static_cast<unsigned char>(mine[i]);
  world->broadcast(bytes, 0);
  std::string first(mine.size(), ' ');
  for (size_t i = 0; i < mine.size(); ++i) first[i] = static_cast<char>(bytes.data_ptr<int64_t>()[i]);
  EXPECT_EQ(first, mine) << "rank " << world->rank() << " calibrated other rates than rank 0";
}

}  // namespace
}  // namespace trident::train
