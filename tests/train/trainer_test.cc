// The training loop end to end on a tiny GPT-2: losses decrease, a run resumed from a
// checkpoint continues bit-identically, a damaged checkpoint is refused, and config errors
// name the offending keys.
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/crc32c.h"
#include "checkpoint/env.h"
#include "checkpoint/safetensors.h"
#include "config/config_tree.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/kernel_switches.h"
#include "core/profiler.h"
#include "data/token_file.h"
#include "support/phrase_corpus.h"
#include "support/tiny_run.h"
#include "train/stop_request.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trident_trainer_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(testing::write_tiny_run_data(dir_).is_ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir_);
    cfg.model.dropout = 0.1;  // exercises the dropout RNG state across resume
    cfg.data.batch_size = 4;
    cfg.data.grad_accum_steps = 2;
    cfg.data.sampler = "random";
    cfg.train.out_dir = (dir_ / out).string();
    return cfg;
  }

  static std::vector<double> train(const TrainConfig& cfg, int64_t until = -1) {
    auto t = Trainer::create(cfg);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    std::vector<double> losses;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) { losses.push_back(m.loss); };
    const Status s = t.value()->run(until);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return losses;
  }

  fs::path dir_;
};

TEST_F(TrainerTest, LossDecreases) {
  const std::vector<double> losses = train(config("run"));
  ASSERT_EQ(losses.size(), 20u);
  EXPECT_LT(losses.back(), losses.front() - 0.5) << "first " << losses.front() << " last " << losses.back();
  EXPECT_TRUE(fs::exists(dir_ / "run" / "step_000020" / "DONE"));
  EXPECT_TRUE(fs::exists(dir_ / "run" / "metrics.jsonl"));
}

TEST_F(TrainerTest, ResumeIsBitIdentical) {
  const std::vector<double> straight = train(config("straight"));
  TrainConfig first = config("resumed");
  first.train.checkpoint_interval = 10;
  const std::vector<double> a = train(first, 10);  // saves step_000010 and stops
  ASSERT_TRUE(fs::exists(dir_ / "resumed" / "step_000010" / "DONE"));
  const std::vector<double> b = train(config("resumed"));  // resumes from step 10
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 10u);
  std::vector<double> joined = a;
  joined.insert(joined.end(), b.begin(), b.end());
  ASSERT_EQ(joined.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(joined[i], straight[i]) << "step " << i + 1 << " differs after resume";
}

// Note [Preemption]: a signal during a step lets the step finish; the run writes a checkpoint
// at that boundary and returns saying why; the next run resumes to the uninterrupted losses.
TEST_F(TrainerTest, AStopSignalEndsTheRunAtTheStepBoundaryWithACheckpoint) {
  const std::vector<double> straight = train(config("straight"));
  ScopedStopHandlers handlers;
  auto t = Trainer::create(config("stopped"));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  std::vector<double> a;
  t.value()->show_progress = false;
  t.value()->on_step = [&](const StepMetrics& m) {
    a.push_back(m.loss);
    if (m.step == 7) ::raise(SIGUSR1);  // arrives "during" step 7: the run stops after it
  };
  ASSERT_TRUE(t.value()->run().is_ok());
  EXPECT_EQ(t.value()->stop_reason(), "SIGUSR1 received");
  EXPECT_EQ(t.value()->step(), 7);
  EXPECT_EQ(stop_signal(), SIGUSR1);
  clear_stop_signal();
  ASSERT_TRUE(fs::exists(dir_ / "stopped" / "step_000007" / "DONE"));
  EXPECT_FALSE(fs::exists(dir_ / "stopped" / "step_000020"));
  std::vector<double> joined = a;
  for (double l : train(config("stopped"))) joined.push_back(l);
  EXPECT_EQ(joined, straight);
}

// train.max_runtime: a budget shorter than any step still lets every process make one step
// (a requeued job always progresses), then stops with a checkpoint; the pieces join into the
// uninterrupted run bit for bit.
TEST_F(TrainerTest, MaxRuntimeStopsWithACheckpointAndEveryProcessProgresses) {
  const std::vector<double> straight = train(config("straight"));
  TrainConfig budget = config("budget");
  budget.train.max_runtime = "0.001s";
  std::vector<double> joined;
  for (int run = 1; run <= 3; ++run) {
    auto t = Trainer::create(budget);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) { joined.push_back(m.loss); };
    ASSERT_TRUE(t.value()->run().is_ok());
    EXPECT_EQ(t.value()->stop_reason(), "train.max_runtime = \"0.001s\" would run out");
    EXPECT_EQ(t.value()->step(), run);
    EXPECT_TRUE(fs::exists(dir_ / "budget" / ("step_00000" + std::to_string(run)) / "DONE"));
  }
  budget.train.max_runtime = "1d";
  for (double l : train(budget)) joined.push_back(l);
  EXPECT_EQ(joined, straight);
}

TEST_F(TrainerTest, MaxRuntimeErrorsNameTheValueAndTheForms) {
  TrainConfig cfg = config("bad_budget");
  cfg.train.max_runtime = "3600";
  try {
    cfg.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.max_runtime = \"3600\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2h30m"), std::string::npos) << e.what();
  }
  config::ConfigTree tree;
  cfg.bind(tree);
  const Status s = tree.apply_override("train.max_runtime=90", "command line");
  EXPECT_NE(s.message().find("max_runtime = \"90\" is invalid: allowed: a duration"), std::string::npos) << s.message();
}

// No validation file (prepare --val-fraction 0): training runs, evaluating nothing.
TEST_F(TrainerTest, WithoutAValidationFileTrainingRunsWithoutEvaluation) {
  for (const std::string& val : {std::string(""), (dir_ / "no_such_val.bin").string()}) {
    TrainConfig cfg = config(val.empty() ? "no_val_empty" : "no_val_missing");
    cfg.data.val_file = val;
    auto t = Trainer::create(cfg);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_FALSE(t.value()->has_validation());
    int evals = 0, steps = 0;
    t.value()->show_progress = false;
    t.value()->on_eval = [&](int64_t, double) { ++evals; };
    t.value()->on_step = [&](const StepMetrics&) { ++steps; };
    ASSERT_TRUE(t.value()->run().is_ok());
    EXPECT_EQ(steps, 20);
    EXPECT_EQ(evals, 0);
    try {
      t.value()->evaluate();
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(val.empty() ? "data.val_file is empty" : "does not exist"),
                std::string::npos) << e.what();
    }
  }
  // A file that exists but is not a token file is still an error.
  TrainConfig cfg = config("bad_val");
  cfg.data.val_file = (dir_ / "bad_val.bin").string();
  std::ofstream(cfg.data.val_file) << "x";
  EXPECT_FALSE(Trainer::create(cfg).is_ok());
}

TEST_F(TrainerTest, ActivationCheckpointingGivesBitIdenticalLosses) {
  // Dropout on, two micro-batches per step: the rerun must redraw the same masks.
  const std::vector<double> plain = train(config("none"));
  for (const char* mode : {"selective", "full"}) {
    TrainConfig cfg = config(mode);
    cfg.model.activation_checkpointing = mode;
    const std::vector<double> losses = train(cfg);
    ASSERT_EQ(losses.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(losses[i], plain[i]) << mode << ", step " << i + 1;
  }
}

TEST_F(TrainerTest, ResumeMayChangeActivationCheckpointing) {
  const std::vector<double> straight = train(config("straight"));
  TrainConfig first = config("resumed");
  first.train.checkpoint_interval = 10;
  const std::vector<double> a = train(first, 10);
  TrainConfig second = config("resumed");
  second.model.activation_checkpointing = "full";
  const std::vector<double> b = train(second);
  ASSERT_EQ(a.size() + b.size(), straight.size());
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], straight[10 + i]) << "step " << 11 + i;
}

// A checkpoint keeps its GEMM engines in its config; resuming on other ones works but is not
// bit for bit, and the trainer says so, naming the key and both values.
TEST_F(TrainerTest, ResumingOnOtherGemmEnginesSaysSo) {
  TrainConfig first = config("engines");
  first.kernels.f32_gemm = "openblas";
  first.train.checkpoint_interval = 10;
  train(first, 10);
  TrainConfig same = config("engines");
  same.kernels.f32_gemm = "openblas";
  auto t = Trainer::create(same);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t.value()->step(), 10);
  EXPECT_EQ(t.value()->engines_note(), "");
  TrainConfig other = config("engines");
  other.kernels.f32_gemm = "onednn";  // oneDNN has an f32 matmul on every x86-64 CPU
  t = Trainer::create(other);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  const std::string& note = t.value()->engines_note();
  EXPECT_NE(note.find("kernels.f32_gemm was \"openblas\", now \"onednn\""), std::string::npos) << note;
  EXPECT_NE(note.find("not bit for bit"), std::string::npos) << note;
  // The kernel switches that change numbers are compared too.
  TrainConfig switched = config("engines");
  switched.kernels.f32_gemm = "openblas";
  switched.kernels.cpu_avx512 = !first.kernels.cpu_avx512;
  t = Trainer::create(switched);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  const std::string& switch_note = t.value()->engines_note();
  EXPECT_NE(switch_note.find("kernels.cpu_avx512 was \"true\", now \"false\""), std::string::npos) << switch_note;
  set_kernel_switch(KernelSwitch::kCpuAvx512, true);  // the process's default again for the tests after
}

// ZeRO-Offload in one process: fp32 masters and AdamW state held apart from the model (in host
// memory; here the model is on the host too) give the plain run's losses bit for bit, also
// across a checkpoint and resume; and with bf16 it is the mixed-precision run exactly.
TEST_F(TrainerTest, OffloadedOptimizerGivesThePlainLossesAndResumes) {
  const std::vector<double> plain = train(config("plain"));
  TrainConfig off = config("offload");
  off.parallel.offload_optimizer = true;
  EXPECT_EQ(train(off), plain);
  TrainConfig first = config("offload_resumed");
  first.parallel.offload_optimizer = true;
  first.train.checkpoint_interval = 10;
  std::vector<double> joined = train(first, 10);
  const std::vector<double> rest = train(first);
  joined.insert(joined.end(), rest.begin(), rest.end());
  EXPECT_EQ(joined, plain);
  TrainConfig bf16 = config("bf16"), bf16_off = config("bf16_offload");
  bf16.precision.dtype = bf16_off.precision.dtype = "bf16";
  bf16_off.parallel.offload_optimizer = true;
  EXPECT_EQ(train(bf16_off), train(bf16));

  // The masters really are a separate fp32 copy: optimizer state holds 12 bytes per
  // parameter (master, exp_avg, exp_avg_sq) against plain AdamW's 8.
  auto state_bytes_per_param = [&](const TrainConfig& cfg) {
    const int64_t before = host_allocator().stats().category(MemoryCategory::kOptimizerState).current;
    auto t = Trainer::create(cfg);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    t.value()->show_progress = false;
    EXPECT_TRUE(t.value()->run(1).is_ok());
    const int64_t held = host_allocator().stats().category(MemoryCategory::kOptimizerState).current - before;
    return static_cast<double>(held) / static_cast<double>(t.value()->num_model_parameters());
  };
  TrainConfig once = config("bytes_plain"), once_off = config("bytes_offload");
  once.train.steps = once_off.train.steps = 1;
  once_off.parallel.offload_optimizer = true;
  EXPECT_NEAR(state_bytes_per_param(once), 8.0, 0.01);
  EXPECT_NEAR(state_bytes_per_param(once_off), 12.0, 0.01);
}

// Mixed precision: bf16 and fp16 (default loss scale) train the tiny model like fp32 does.
TEST_F(TrainerTest, Bf16AndFp16TrainCloseToFp32) {
  const std::vector<double> fp32 = train(config("fp32"));
  for (const char* dtype : {"bf16", "fp16"}) {
    TrainConfig cfg = config(dtype);
    cfg.precision.dtype = dtype;
    std::vector<double> losses;
    auto t = Trainer::create(cfg);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    t.value()->show_progress = false;
    int64_t skipped = 0;
    t.value()->on_step = [&](const StepMetrics& m) {
      losses.push_back(m.loss);
      skipped = m.skipped_steps;
    };
    ASSERT_TRUE(t.value()->run().is_ok());
    EXPECT_EQ(t.value()->model().parameter("h.0.attn.c_attn.weight").dtype(),
              std::string(dtype) == "bf16" ? DType::kBF16 : DType::kF16);
    EXPECT_EQ(skipped, 0) << dtype;
    ASSERT_EQ(losses.size(), fp32.size());
    for (size_t i = 0; i < fp32.size(); ++i)
      EXPECT_NEAR(losses[i], fp32[i], 0.03 * fp32[i]) << dtype << ", step " << i + 1;
    EXPECT_LT(losses.back(), losses.front() - 0.5) << dtype;
  }
}

TEST_F(TrainerTest, MixedPrecisionCheckpointsHoldFp32MastersAndResumeBitIdentically) {
  TrainConfig straight_cfg = config("straight");
  straight_cfg.precision.dtype = "bf16";
  const std::vector<double> straight = train(straight_cfg);
  TrainConfig first = config("resumed");
  first.precision.dtype = "bf16";
  first.train.checkpoint_interval = 10;
  const std::vector<double> a = train(first, 10);
  const std::vector<double> b = train(first);
  ASSERT_EQ(a.size() + b.size(), straight.size());
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], straight[10 + i]) << "step " << 11 + i;
  auto reader = checkpoint::SafetensorsReader::open(checkpoint::default_env(),
                                                    (dir_ / "resumed" / "step_000020" / "model.safetensors").string());
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  auto w = reader.value().load("h.0.attn.c_attn.weight");
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w.value().dtype(), DType::kF32);
}

// fp16 with a loss scale far too large: every gradient overflows, so the steps are skipped
// (weights unchanged), counted, and the scale backs off once the hysteresis is used up.
TEST_F(TrainerTest, Fp16OverflowSkipsTheStepAndBacksOffTheScale) {
  TrainConfig cfg = config("overflow");
  cfg.precision.dtype = "fp16";
  cfg.precision.initial_loss_scale = 1099511627776.0;  // 2^40
  cfg.precision.hysteresis = 2;
  cfg.precision.backoff_factor = 0.5;
  cfg.train.steps = 3;
  auto t = Trainer::create(cfg);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  t.value()->show_progress = false;
  const Tensor before = core::clone(t.value()->model().parameter("h.1.mlp.c_fc.weight"));
  std::vector<StepMetrics> steps;
  t.value()->on_step = [&](const StepMetrics& m) { steps.push_back(m); };
  ASSERT_TRUE(t.value()->run().is_ok());
  ASSERT_EQ(steps.size(), 3u);
  const double s0 = 1099511627776.0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(steps[i].skipped) << "step " << i + 1;
    EXPECT_EQ(steps[i].skipped_steps, static_cast<int64_t>(i + 1));
    EXPECT_TRUE(std::isfinite(steps[i].loss));
  }
  // Hysteresis 2: the first overflow is tolerated, the second and later ones halve the scale.
  EXPECT_EQ(*steps[0].loss_scale, s0);
  EXPECT_EQ(*steps[1].loss_scale, s0);
  EXPECT_EQ(*steps[2].loss_scale, s0 / 2);
  const Tensor after = t.value()->model().parameter("h.1.mlp.c_fc.weight");
  EXPECT_EQ(to_vector<float>(core::cast(after, DType::kF32)), to_vector<float>(core::cast(before, DType::kF32)));
}

// train.profile_step = N profiles step N (train/step_profile.h): rank 0's JSON beside the
// checkpoints, the rows of every phase the step has; the run goes on as without it.
TEST_F(TrainerTest, ProfileStepWritesTheJson) {
  TrainConfig cfg = config("profiled");
  cfg.train.steps = 3;
  cfg.train.profile_step = 2;
  auto t = Trainer::create(cfg);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  t.value()->show_progress = false;
  ASSERT_TRUE(t.value()->run().is_ok());
  EXPECT_FALSE(profiler::enabled());
  const fs::path path = dir_ / "profiled" / "profile_step2.json";
  ASSERT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(dir_ / "profiled" / "profile_step1.json"));
  EXPECT_FALSE(fs::exists(dir_ / "profiled" / "profile_step3.json"));
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["step"], 2);
  EXPECT_EQ(j["rank"], 0);
  EXPECT_EQ(j["world_size"], 1);
  // No threshold on the coverage (a tiny step takes milliseconds: one preemption between
  // scopes moves it anywhere); what holds whatever the timing: self times are disjoint parts
  // of the wall time, and a row's total time (its outermost frames) fits in it too.
  const double wall_ms = j["wall_ms"].get<double>();
  const double eps = 1e-9 * std::max(1.0, wall_ms);
  EXPECT_GT(wall_ms, 0.0);
  EXPECT_GT(j["self_ms"].get<double>(), 0.0);
  EXPECT_LE(j["self_ms"].get<double>(), wall_ms + eps);
  EXPECT_GT(j["coverage"].get<double>(), 0.0);
  EXPECT_LE(j["coverage"].get<double>(), 1.0 + 1e-9);
  std::set<std::pair<std::string, std::string>> rows;
  for (const auto& row : j["rows"]) {
    rows.insert({row["name"].get<std::string>(), row["phase"].get<std::string>()});
    EXPECT_GE(row["calls"].get<int64_t>(), 1) << row.dump();
    EXPECT_GE(row["self_ms"].get<double>(), 0.0) << row.dump();
    EXPECT_LE(row["self_ms"].get<double>(), row["total_ms"].get<double>() + eps) << row.dump();
    EXPECT_LE(row["total_ms"].get<double>(), wall_ms + eps) << row.dump();
  }
  // One step: a batch per micro-batch, one clip and one optimizer step.
  for (const auto& row : j["rows"]) {
    const std::string name = row["name"].get<std::string>();
    if (name == "data.next_batch") {
      EXPECT_EQ(row["calls"].get<int64_t>(), cfg.data.grad_accum_steps) << row.dump();
    }
    if (name == "adamw.step" || name == "clip_grad_norm" || name == "zero_grad") {
      EXPECT_EQ(row["calls"].get<int64_t>(), 1) << row.dump();
    }
  }
  for (const auto& expected : std::vector<std::pair<std::string, std::string>>{
           {"data.next_batch", "data"}, {"layernorm", "forward"}, {"layernorm", "backward"},
           {"adamw.step", "optimizer"}, {"clip_grad_norm", "optimizer"}, {"zero_grad", "optimizer"}})
    EXPECT_TRUE(rows.count(expected)) << expected.first << " (" << expected.second << ")\n" << j.dump(1);
  // The profiled step is a step like the others: the run goes on, and the file holds one step.
  EXPECT_TRUE(fs::exists(dir_ / "profiled" / "step_000003" / "DONE"));
}

TEST_F(TrainerTest, ABadProfileStepIsAnErrorNamingTheKey) {
  for (const int64_t bad : {int64_t{-1}, int64_t{4}}) {
    TrainConfig cfg = config("bad_profile_step");
    cfg.train.steps = 3;
    cfg.train.profile_step = bad;
    try {
      (void)Trainer::create(cfg);
      FAIL() << "train.profile_step = " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("train.profile_step = " + std::to_string(bad)), std::string::npos)
          << e.what();
      if (bad > 0) {
        EXPECT_NE(std::string(e.what()).find("train.steps (3)"), std::string::npos) << e.what();
      }
    }
  }
  // From a config file or the command line, the key's range check says so before any run.
  TrainConfig cfg = config("bad_profile_step");
  config::ConfigTree tree;
  cfg.bind(tree);
  const Status s = tree.set("train.profile_step", int64_t{-2}, "--train.profile_step");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("profile_step = -2 is invalid"), std::string::npos) << s.to_string();
}

TEST(DynamicLossScaler, BacksOffAfterHysteresisAndGrowsAfterTheInterval) {
  optim::PrecisionOptions o;
  o.dtype = "fp16";
  o.initial_loss_scale = 1024;
  o.hysteresis = 2;
  o.growth_interval = 3;
  o.min_loss_scale = 256;
  optim::DynamicLossScaler s(o);
  EXPECT_FALSE(s.update(true));  // tolerated by hysteresis
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_FALSE(s.update(true));  // hysteresis stays used up until a growth
  EXPECT_EQ(s.scale(), 256);
  EXPECT_FALSE(s.update(true));  // floor
  EXPECT_EQ(s.scale(), 256);
  EXPECT_EQ(s.skipped_steps(), 4);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 256);
  EXPECT_TRUE(s.update(false));  // third good step in a row
  EXPECT_EQ(s.scale(), 512);
  EXPECT_FALSE(s.update(true));  // hysteresis restored by the growth
  EXPECT_EQ(s.scale(), 512);
}

TEST_F(TrainerTest, TruncatedCheckpointIsRefused) {
  TrainConfig cfg = config("trunc");
  cfg.train.steps = 2;
  train(cfg);
  const fs::path model = dir_ / "trunc" / "step_000002" / "model.safetensors";
  ASSERT_TRUE(fs::exists(model));
  fs::resize_file(model, fs::file_size(model) / 2);
  cfg.train.steps = 4;
  auto t = Trainer::create(cfg);  // resume finds the damaged checkpoint
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("model.safetensors"), std::string::npos) << t.status().message();
}

TEST_F(TrainerTest, ResumeRefusesADifferentModel) {
  TrainConfig cfg = config("arch");
  cfg.train.steps = 1;
  train(cfg);
  cfg.model.n_embd = 64;
  cfg.train.steps = 2;
  auto t = Trainer::create(cfg);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("model.n_embd: checkpoint 32, config 64"), std::string::npos)
      << t.status().message();
}

TEST_F(TrainerTest, ConfigErrorsNameTheKeys) {
  TrainConfig cfg = config("bad");
  cfg.data.seq_len = 32;  // > block_size 16
  try {
    cfg.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.seq_len (32)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.block_size (16)"), std::string::npos) << e.what();
  }
  // B x T past int64 wrapped to a small batch that the sampler overran (a crash, not an error).
  cfg = config("bad");
  cfg.data.batch_size = int64_t{1} << 59;
  try {
    cfg.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.batch_size (576460752303423488) x data.seq_len (16)"), std::string::npos)
        << e.what();
  }
  cfg = config("bad");
  cfg.data.train_file = (dir_ / "missing.bin").string();
  auto t = Trainer::create(cfg);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("missing.bin"), std::string::npos) << t.status().message();
}

TEST_F(TrainerTest, TokenIdsBeyondTheVocabularyAreRefused) {
  TrainConfig cfg = config("vocab");
  cfg.model.vocab_size = 32;  // the data holds ids up to 60
  auto t = Trainer::create(cfg);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("32"), std::string::npos) << t.status().message();
}

// Resume passes over a step directory whose write was cut short (no DONE marker), and says so:
// the run going on from an older step, or from step 0, is no surprise.
TEST_F(TrainerTest, ResumeNamesTheIncompleteCheckpointsItPassesOver) {
  TrainConfig cfg = config("incomplete");
  cfg.train.steps = 2;
  cfg.train.checkpoint_interval = 1;
  cfg.train.checkpoint_keep = 5;
  train(cfg);
  const fs::path out = dir_ / "incomplete";
  auto t = Trainer::create(cfg);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t.value()->resume_note(), "resuming " + (out / "step_000002").string());
  fs::remove(out / "step_000002" / "DONE");
  t = Trainer::create(cfg);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t.value()->resume_note(), out.string() + ": skipped step_000002 (incomplete: no DONE marker); resuming " +
                                          (out / "step_000001").string());
  EXPECT_EQ(t.value()->step(), 1);
  fs::remove(out / "step_000001" / "DONE");
  t = Trainer::create(cfg);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t.value()->resume_note(),
            out.string() + ": skipped step_000001, step_000002 (incomplete: no DONE marker); starting from step 0");
}

// A validation file shorter than one window is found at start, not at the first evaluation,
// which came after the last step and lost the run.
TEST_F(TrainerTest, AValidationFileShorterThanOneWindowIsRefusedAtStart) {
  TrainConfig cfg = config("short_val");
  cfg.data.val_file = (dir_ / "short_val.bin").string();
  ASSERT_TRUE(data::write_token_file(cfg.data.val_file, std::vector<uint16_t>(10, 7)).is_ok());
  auto t = Trainer::create(cfg);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("short_val.bin' has 10 tokens, fewer than one window of data.seq_len + 1 = 17"),
            std::string::npos)
      << t.status().message();
}

// Rewrites `file` of checkpoint `dir` and its checksums, as a hand edit that knows the format
// would: what is left to refuse it is the trainer's own check of the values.
void rewrite_checkpoint_file(const fs::path& dir, const std::string& file, const std::string& contents) {
  std::ofstream(dir / file, std::ios::binary | std::ios::trunc) << contents;
  std::ifstream in(dir / "manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(in);
  for (nlohmann::json& f : manifest["files"]) {
    if (f["name"] != file) continue;
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", core::crc32c(contents));
    f["size"] = contents.size();
    f["crc32c"] = crc;
  }
  const std::string text = manifest.dump(1);
  std::ofstream(dir / "manifest.json", std::ios::binary | std::ios::trunc) << text;
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", core::crc32c(text));
  const nlohmann::json done = {{"format", "trident-checkpoint-done"}, {"version", 1}, {"manifest_size", text.size()},
                               {"manifest_crc32c", crc}};
  std::ofstream(dir / "DONE", std::ios::binary | std::ios::trunc) << done.dump();
}

// The step counters decide where a resumed run goes on: a negative one trained "step -3" with an
// lr of -inf, a fractional one was taken as an integer.
TEST_F(TrainerTest, ResumeRefusesStepCountsThatAreNotCounts) {
  TrainConfig cfg = config("steps");
  cfg.train.steps = 2;
  train(cfg);
  const fs::path ckpt = dir_ / "steps" / "step_000002";
  std::ifstream in(ckpt / "trainer_state.json");
  const nlohmann::json state = nlohmann::json::parse(in);
  ASSERT_TRUE(Trainer::create(cfg).is_ok());  // the rewrite alone changes nothing
  rewrite_checkpoint_file(ckpt, "trainer_state.json", state.dump());
  ASSERT_TRUE(Trainer::create(cfg).is_ok());
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {-5, "\"step\" = -5 is invalid: a step count is an integer >= 0"},
      {1.5, "\"step\" = 1.5 is invalid"},
      {"2", "\"step\" = \"2\" is invalid"},
      {1, "\"optimizer_step\" = 2 is past \"step\" = 1"},
  };
  for (const auto& [value, expected] : cases) {
    nlohmann::json bad = state;
    bad["step"] = value;
    rewrite_checkpoint_file(ckpt, "trainer_state.json", bad.dump());
    auto t = Trainer::create(cfg);
    ASSERT_FALSE(t.is_ok()) << value.dump();
    EXPECT_NE(t.status().message().find(expected), std::string::npos) << t.status().message();
  }
  nlohmann::json missing = state;
  missing.erase("optimizer_step");
  rewrite_checkpoint_file(ckpt, "trainer_state.json", missing.dump());
  auto t = Trainer::create(cfg);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("trainer_state.json has no \"optimizer_step\""), std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace trident::train
