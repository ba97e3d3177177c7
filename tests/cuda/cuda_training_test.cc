// Training on the GPU (issue #7): the tiny GPT-2 run with train.device = "cuda" gives the
// host's fp32 losses step for step (different kernels, same math: within 1e-4 relative),
// bf16 trains there too, and its checkpoint loads on the host; data parallelism and every ZeRO
// stage run over NCCL (a group of one on one GPU: the mesh, buckets, shards and collectives on
// the GPU) with the single-GPU run's losses. Without a GPU the tests that need one skip, and
// asking for one is a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "comm/device_communicator.h"
#include "core/check.h"
#include "data/token_file.h"
#include "kernels/cuda/cuda_device.h"
#ifdef TRIDENT_WITH_NCCL
#include "comm/nccl_communicator.h"
#endif
#include "support/tiny_run.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

class CudaTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trident_cuda_training_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(testing::write_tiny_run_data(dir_).is_ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig config(const std::string& device, const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir_);
    cfg.data.sampler = "sequential";
    cfg.train.device = device;
    cfg.train.out_dir = (dir_ / out).string();
    return cfg;
  }

  struct Run {
    std::vector<double> losses, val_losses;
  };
  static Run train(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm = nullptr) {
    Run r;
    auto t = Trainer::create(cfg, std::move(comm));
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (!t.is_ok()) return r;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) { r.losses.push_back(m.loss); };
    t.value()->on_eval = [&](int64_t, double v) { r.val_losses.push_back(v); };
    const Status s = t.value()->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return r;
  }

  fs::path dir_;
};

#define SKIP_WITHOUT_GPU() \
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason()

TEST_F(CudaTraining, AskingForAMissingGpuIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  try {
    auto t = Trainer::create(config("cuda", "run"));
    ASSERT_FALSE(t.is_ok()) << "train.device = cuda started without a GPU";
    EXPECT_NE(t.status().to_string().find("CUDA"), std::string::npos) << t.status().to_string();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device"), std::string::npos) << e.what();
  }
}

TEST_F(CudaTraining, Fp32LossesMatchTheHostStepForStep) {
  SKIP_WITHOUT_GPU();
  const Run host = train(config("cpu", "host"));
  const Run gpu = train(config("cuda", "gpu"));
  ASSERT_EQ(host.losses.size(), 20u);
  ASSERT_EQ(gpu.losses.size(), host.losses.size());
  for (size_t i = 0; i < host.losses.size(); ++i)
    EXPECT_NEAR(gpu.losses[i], host.losses[i], 1e-4 * std::abs(host.losses[i])) << "step " << i + 1;
  ASSERT_EQ(gpu.val_losses.size(), host.val_losses.size());
  for (size_t i = 0; i < host.val_losses.size(); ++i)
    EXPECT_NEAR(gpu.val_losses[i], host.val_losses[i], 1e-4 * std::abs(host.val_losses[i])) << "evaluation " << i;
}

// ZeRO-Offload: the masters and AdamW state in host memory, stepped by the CPU's AdamW; the
// GPU keeps the bf16 parameters. Same losses as keeping everything on the GPU, up to the two
// AdamW kernels' roundings.
TEST_F(CudaTraining, OffloadedOptimizerMatchesTheGpuOptimizer) {
  SKIP_WITHOUT_GPU();
  TrainConfig on_gpu = config("cuda", "gpu"), offloaded = config("cuda", "offload");
  on_gpu.precision.dtype = offloaded.precision.dtype = "bf16";
  offloaded.parallel.offload_optimizer = true;
  const Run a = train(on_gpu), b = train(offloaded);
  ASSERT_EQ(a.losses.size(), 20u);
  ASSERT_EQ(b.losses.size(), a.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_NEAR(b.losses[i], a.losses[i], 1e-3 * std::abs(a.losses[i])) << "step " << i + 1;
}

#ifdef TRIDENT_WITH_NCCL
// The trainer's mesh on NCCL (comm::communicator_for), bootstrapped here from a group of one
// instead of MPI: data parallel buckets and ZeRO's flat buffers live on the GPU and every
// collective runs there.
TEST_F(CudaTraining, DataParallelAndZeroOverNcclMatchTheSingleGpuRun) {
  SKIP_WITHOUT_GPU();
  auto nccl_group = [] {
    return comm::with_staging(std::shared_ptr<comm::Communicator>(comm::make_nccl_self_communicator()),
                              Device::cuda());
  };
  auto expect_close = [](const Run& got, const Run& ref, double rel, const std::string& what) {
    ASSERT_EQ(got.losses.size(), ref.losses.size()) << what;
    for (size_t i = 0; i < ref.losses.size(); ++i)
      EXPECT_NEAR(got.losses[i], ref.losses[i], rel * std::abs(ref.losses[i])) << what << ", step " << i + 1;
  };
  const Run single = train(config("cuda", "single"));
  ASSERT_EQ(single.losses.size(), 20u);
  for (int64_t stage : {0, 1, 2, 3}) {
    TrainConfig cfg = config("cuda", "zero" + std::to_string(stage));
    cfg.parallel.zero_stage = stage;
    cfg.parallel.bucket_mb = 0.01;
    expect_close(train(cfg, nccl_group()), single, 1e-5, "ZeRO stage " + std::to_string(stage));
  }
  // bf16: ZeRO keeps the fp32 masters' shards and gathers bf16 parameters over NCCL; against
  // one GPU with fp32 masters (MasterWeights) the losses agree to bf16's roundings.
  TrainConfig bf16 = config("cuda", "single_bf16");
  bf16.precision.dtype = "bf16";
  const Run single_bf16 = train(bf16);
  for (int64_t stage : {1, 2, 3}) {
    TrainConfig cfg = bf16;
    cfg.train.out_dir += "_zero" + std::to_string(stage);
    cfg.parallel.zero_stage = stage;
    const Run zero = train(cfg, nccl_group());
    expect_close(zero, single_bf16, 1e-3, "bf16, ZeRO stage " + std::to_string(stage));
    // ZeRO-Offload: the same shards' masters and moments in pinned host memory, stepped by the
    // CPU's AdamW (the host kernel: within fp32 rounding of the GPU's).
    cfg.parallel.offload_optimizer = true;
    cfg.train.out_dir += "_offload";
    expect_close(train(cfg, nccl_group()), zero, 1e-3, "bf16, ZeRO-Offload stage " + std::to_string(stage));
  }
}
#endif

TEST_F(CudaTraining, Bf16TrainsAndItsCheckpointLoadsOnTheHost) {
  SKIP_WITHOUT_GPU();
  TrainConfig cfg = config("cuda", "bf16");
  cfg.precision.dtype = "bf16";
  const Run gpu = train(cfg);
  ASSERT_EQ(gpu.losses.size(), 20u);
  EXPECT_LT(gpu.losses.back(), gpu.losses.front() - 0.5) << "first " << gpu.losses.front() << " last "
                                                         << gpu.losses.back();
  // The same run directory, resumed on the host with more steps: the checkpoint's tensors
  // (written from GPU memory) load there and training continues.
  TrainConfig more = cfg;
  more.train.device = "cpu";
  more.train.steps = 22;
  const Run host = train(more);
  ASSERT_EQ(host.losses.size(), 2u);
  EXPECT_NEAR(host.losses[0], gpu.losses.back(), 0.5);
}

}  // namespace
}  // namespace trident::train
