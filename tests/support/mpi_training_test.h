// The fixture of the distributed training tests (run under mpirun): one scratch directory for
// the whole job, named from rank 0's pid and the test, holding the phrase corpus as
// train.bin / val.bin; runs of the trainer that record their losses; and the 1e-5 relative
// comparison of per-step losses against the single-process run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/factory.h"
#include "data/token_file.h"
#include "support/emulated_device.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

namespace trident::testing {

class MpiTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world = std::shared_ptr<comm::Communicator>(comm::MpiRuntime::world());
    Tensor pid = full({1}, static_cast<double>(::getpid()), DType::kI64);
    world->broadcast(pid, 0);
    dir = std::filesystem::temp_directory_path() /
          ("trident_mpi_test_" + std::to_string(static_cast<int64_t>(pid.item())) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    if (world->rank() == 0) {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      ASSERT_TRUE(write_tiny_run_data(dir).is_ok());
    }
    world->barrier();
  }
  void TearDown() override {
    world->barrier();
    if (world->rank() == 0) std::filesystem::remove_all(dir);
  }

  struct Run {
    std::vector<double> losses, val;
  };
  static Run train(const train::TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm, int64_t until = -1,
                   std::optional<Device> device = std::nullopt) {
    auto t = train::Trainer::create(cfg, std::move(comm), device);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    Run r;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const train::StepMetrics& m) { r.losses.push_back(m.loss); };
    t.value()->on_eval = [&](int64_t, double v) { r.val.push_back(v); };
    const Status s = t.value()->run(until);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return r;
  }

  // The run of `cfg` with the model on the emulated device gives the host run's losses and
  // evaluations bit for bit (its kernels are the host's).
  void expect_device_run_equals_host(train::TrainConfig cfg, const std::string& what) {
    const Run host = train(cfg, world);
    cfg.train.out_dir += "_on_device";
    const Run on_device = train(cfg, world, -1, emulated_device());
    ASSERT_EQ(host.losses.size(), static_cast<size_t>(cfg.train.steps)) << what;
    EXPECT_EQ(on_device.losses, host.losses) << what;
    EXPECT_EQ(on_device.val, host.val) << what;
  }

  // Every step's metrics of a run.
  static std::vector<train::StepMetrics> train_steps(const train::TrainConfig& cfg,
                                                     std::shared_ptr<comm::Communicator> comm) {
    auto t = train::Trainer::create(cfg, std::move(comm));
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    std::vector<train::StepMetrics> steps;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const train::StepMetrics& m) { steps.push_back(m); };
    const Status s = t.value()->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return steps;
  }

  // The tensor-parallel group's collectives during one step of `cfg` (eval_interval set past it).
  static comm::CommStats tp_stats_of_one_step(train::TrainConfig cfg, std::shared_ptr<comm::Communicator> comm) {
    cfg.train.eval_interval = 1000;
    auto t = train::Trainer::create(cfg, std::move(comm));
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (!t.is_ok()) return {};
    t.value()->show_progress = false;
    comm::Communicator& group = t.value()->mesh()->tp();
    group.reset_stats();
    const Status s = t.value()->run(1);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return group.stats();
  }

  // fp16 with a loss scale far too large (2^40): the first steps overflow and are skipped
  // while the scale backs off (hysteresis 1, by 1/64), then the run trains. AdamW is blind to a
  // gradient's scale but for eps: a large eps makes an update that forgot to divide out the
  // loss scale visible in the losses.
  static void force_fp16_overflows(train::TrainConfig& cfg) {
    cfg.precision.dtype = "fp16";
    cfg.precision.initial_loss_scale = 1099511627776.0;
    cfg.precision.hysteresis = 1;
    cfg.precision.backoff_factor = 1.0 / 64;
    cfg.optim.eps = 1e-2;
    cfg.train.steps = 8;
  }
  // The skips, scales and losses of `got` are those of the single-process run `ref`.
  static void expect_same_skips(const std::vector<train::StepMetrics>& got, const std::vector<train::StepMetrics>& ref,
                                const std::string& what) {
    ASSERT_EQ(got.size(), ref.size()) << what;
    int64_t skipped = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i].skipped, ref[i].skipped) << what << ", step " << i + 1;
      EXPECT_EQ(*got[i].loss_scale, *ref[i].loss_scale) << what << ", step " << i + 1;
      EXPECT_EQ(got[i].skipped_steps, ref[i].skipped_steps) << what << ", step " << i + 1;
      EXPECT_NEAR(got[i].loss, ref[i].loss, 1e-3 * std::abs(ref[i].loss)) << what << ", step " << i + 1;
      if (!ref[i].skipped) {
        EXPECT_NEAR(got[i].grad_norm, ref[i].grad_norm, 1e-2 * ref[i].grad_norm) << what << ", step " << i + 1;
      }
      skipped += ref[i].skipped ? 1 : 0;
    }
    EXPECT_GE(skipped, 1) << what << ": the test needs overflowing steps";
    EXPECT_LT(skipped, static_cast<int64_t>(ref.size())) << what << ": and steps that train";
    EXPECT_TRUE(got.front().skipped) << what;
    EXPECT_FALSE(got.back().skipped) << what;
  }

  static void expect_close(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_LE(std::abs(a[i] - b[i]), 1e-5 * std::abs(b[i])) << what << ", step " << i + 1 << ": " << a[i]
                                                             << " vs " << b[i];
  }

  std::shared_ptr<comm::Communicator> world;
  std::filesystem::path dir;
};

}  // namespace trident::testing
