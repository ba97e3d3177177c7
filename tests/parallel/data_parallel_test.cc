// Data parallelism under mpirun (1, 2 and 4 ranks, label mpi): the per-step losses of a
// data-parallel run equal the single-process run's on the same seed, init and global batch,
// with and without gradient accumulation and for several bucket sizes; the gradients travel
// as one all-reduce of P elements per step; checkpoints written by rank 0 resume on all ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "comm/mpi_communicator.h"
#include "core/factory.h"
#include "data/token_file.h"
#include "support/phrase_corpus.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world = std::shared_ptr<comm::Communicator>(comm::MpiRuntime::world());
    // One directory for the whole job: rank 0's pid, broadcast.
    Tensor pid = full({1}, static_cast<double>(::getpid()), DType::kI64);
    world->broadcast(pid, 0);
    dir = fs::temp_directory_path() / ("trident_dp_test_" + std::to_string(static_cast<int64_t>(pid.item())) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    if (world->rank() == 0) {
      fs::remove_all(dir);
      fs::create_directories(dir);
      const std::vector<uint16_t> tokens = testing::phrase_corpus();
      ASSERT_TRUE(data::write_token_file(dir / "train.bin", tokens).is_ok());
      ASSERT_TRUE(data::write_token_file(dir / "val.bin", std::vector<uint16_t>(tokens.begin(), tokens.begin() + 3000))
                      .is_ok());
    }
    world->barrier();
  }
  void TearDown() override {
    world->barrier();
    if (world->rank() == 0) fs::remove_all(dir);
  }

  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);  // global batch 8: 8, 4 or 2 rows per rank
    cfg.data.sampler = "sequential";
    cfg.optim.lr = 3e-3;
    cfg.lr_schedule.warmup_steps = 3;
    cfg.train.steps = 20;
    cfg.train.eval_interval = 10;
    cfg.train.eval_batches = 2;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }

  struct Run {
    std::vector<double> losses, val;
  };
  static Run train(const TrainConfig& cfg, std::shared_ptr<comm::Communicator> comm, int64_t until = -1,
                   Trainer** keep = nullptr) {
    auto t = Trainer::create(cfg, std::move(comm));
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    Run r;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) { r.losses.push_back(m.loss); };
    t.value()->on_eval = [&](int64_t, double v) { r.val.push_back(v); };
    const Status s = t.value()->run(until);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return r;
  }

  static void expect_close(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_LE(std::abs(a[i] - b[i]), 1e-5 * std::abs(b[i])) << what << ", step " << i + 1 << ": " << a[i]
                                                             << " vs " << b[i];
  }

  std::shared_ptr<comm::Communicator> world;
  fs::path dir;
};

TEST_F(DataParallelTest, LossesEqualTheSingleProcessRun) {
  for (int64_t accum : {1, 2}) {
    for (double bucket_mb : {25.0, 0.01}) {  // one bucket; several
      TrainConfig cfg = config("dp_" + std::to_string(accum) + "_" + std::to_string(bucket_mb));
      cfg.data.grad_accum_steps = accum;
      cfg.parallel.bucket_mb = bucket_mb;
      cfg.train.checkpoint_interval = 1000;
      TrainConfig single = cfg;
      single.train.out_dir += "_single_rank" + std::to_string(world->rank());
      const Run ref = train(single, nullptr);
      const Run dp = train(cfg, world);
      const std::string what = std::to_string(world->size()) + " ranks, accum " + std::to_string(accum) +
                               ", bucket " + std::to_string(bucket_mb) + " MiB";
      expect_close(dp.losses, ref.losses, what + " (train loss)");
      expect_close(dp.val, ref.val, what + " (val loss)");
    }
  }
}

TEST_F(DataParallelTest, OneAllReduceOfThePArametersPerStep) {
  TrainConfig cfg = config("comm");
  cfg.train.steps = 3;
  cfg.train.eval_interval = 1000;
  cfg.train.eval_batches = 1;
  auto t = Trainer::create(cfg, world);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  t.value()->show_progress = false;
  const int64_t P = t.value()->model().num_parameters();
  world->reset_stats();
  ASSERT_TRUE(t.value()->run(2).is_ok());
  if (world->size() == 1) return;  // one process: nothing to communicate
  // Two steps: 2 P gradient elements, plus one scalar (the step's mean loss) per step.
  const int64_t elements = world->stats().of(comm::CommOp::kAllReduce).elements;
  EXPECT_GE(elements, 2 * P);
  EXPECT_LE(static_cast<double>(elements), 1.05 * 2.0 * static_cast<double>(P));
  EXPECT_EQ(world->stats().of(comm::CommOp::kAllGather).calls, 0);
}

TEST_F(DataParallelTest, Rank0CheckpointsResumeOnEveryRank) {
  TrainConfig cfg = config("resume");
  const Run straight = train(cfg, world);
  TrainConfig first = config("resumed");
  first.train.checkpoint_interval = 10;
  const Run a = train(first, world, 10);
  const Run b = train(config("resumed"), world);
  std::vector<double> joined = a.losses;
  joined.insert(joined.end(), b.losses.begin(), b.losses.end());
  ASSERT_EQ(joined.size(), straight.losses.size());
  for (size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i], straight.losses[i]) << "step " << i + 1;
}

TEST_F(DataParallelTest, AGlobalBatchThatDoesNotSplitIsAClearError) {
  if (world->size() == 1) GTEST_SKIP();
  TrainConfig cfg = config("bad");
  cfg.data.batch_size = 4 * world->size() + 1;
  try {
    auto t = Trainer::create(cfg, world);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.batch_size (" + std::to_string(cfg.data.batch_size) + ")"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trident::train
