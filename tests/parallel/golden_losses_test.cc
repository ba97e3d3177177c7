// GPT-2's per-step training losses and evaluations on the tiny run, bit for bit, for a set of
// layouts per world size: the values the trainer gave before the model contract (issue #22),
// committed in golden_losses.inc, so a refactor of what sits between the trainer and the model
// (the contract, parallel plans as data, the strategy seam) provably changes no number. The
// layout-equivalence tests compare layouts with each other within 1e-5; this compares each with
// its own past, exactly.
//
// Bits are a CPU class's (docs/numerics.md: the build is -march=native and the GEMM engines
// follow the instruction set), so each value carries the class it was recorded on, and a CPU
// of a class without values skips, saying so. To record values (on a class without them,
// before a change that must not move the numbers; or when a change is meant to move them, saying
// why in its commit): TRIDENT_WRITE_GOLDEN=FILE mpirun -np N golden_losses_test appends rank
// 0's values for that world size and this CPU class to FILE, in golden_losses.inc's format.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "support/mpi_training_test.h"

namespace trident {
namespace {

struct Golden {
  const char* layout;
  int world;
  const char* cpu;  // cpu_class() of the machine that recorded it
  std::vector<double> losses, val;
};

// The CPU class: the instruction set (which picks kernels and GEMM engines) and the model (a
// library's blocking can follow the caches): "avx512_bf16 family 25 model 17".
std::string cpu_class() {
  std::string isa = "other";
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512bf16")) isa = "avx512_bf16";
  else if (__builtin_cpu_supports("avx512f")) isa = "avx512";
  else if (__builtin_cpu_supports("avx2")) isa = "avx2";
#endif
  std::ifstream info("/proc/cpuinfo");
  std::string line, family = "?", model = "?";
  while (std::getline(info, line) && (family == "?" || model == "?")) {
    const auto value = [&] { return line.substr(line.find(':') + 2); };
    if (line.starts_with("cpu family")) family = value();
    else if (line.starts_with("model\t") || line.starts_with("model  ")) model = value();
  }
  return isa + " family " + family + " model " + model;
}

const std::vector<Golden>& golden() {
  static const std::vector<Golden> g = {
#include "parallel/golden_losses.inc"
  };
  return g;
}

struct Layout {
  const char* name;
  void (*apply)(train::TrainConfig&);
};

// Per world size, the layouts whose numbers are pinned: every strategy and their compositions.
std::vector<Layout> layouts(int world) {
  if (world == 1)
    return {
        {"fp32_dropout", [](train::TrainConfig& c) { c.model.dropout = 0.1; }},
        {"bf16", [](train::TrainConfig& c) { c.precision.dtype = "bf16"; }},
        {"fp16_selective", [](train::TrainConfig& c) {
           c.precision.dtype = "fp16";
           c.model.activation_checkpointing = "selective";
         }},
        {"offload_bf16", [](train::TrainConfig& c) {
           c.precision.dtype = "bf16";
           c.parallel.offload_optimizer = true;
         }},
    };
  if (world == 2)
    return {
        {"dp2_dropout", [](train::TrainConfig& c) { c.model.dropout = 0.1; }},
        {"dp2_zero1_bf16", [](train::TrainConfig& c) {
           c.parallel.zero_stage = 1;
           c.precision.dtype = "bf16";
         }},
        {"dp2_zero3", [](train::TrainConfig& c) { c.parallel.zero_stage = 3; }},
        {"tp2_sp_dropout", [](train::TrainConfig& c) {
           c.parallel.tp = 2;
           c.parallel.sequence_parallel = true;
           c.model.dropout = 0.1;
         }},
        {"pp2_1f1b_bf16", [](train::TrainConfig& c) {
           c.parallel.pp = 2;
           c.parallel.pipeline_schedule = "1f1b";
           c.data.grad_accum_steps = 2;
           c.precision.dtype = "bf16";
         }},
    };
  if (world == 4)
    return {
        {"tp2_pp2_gpipe", [](train::TrainConfig& c) {
           c.parallel.tp = 2;
           c.parallel.pp = 2;
           c.parallel.pipeline_schedule = "gpipe";
           c.data.grad_accum_steps = 2;
         }},
        {"dp2_tp2_zero2_bf16", [](train::TrainConfig& c) {
           c.parallel.tp = 2;
           c.parallel.zero_stage = 2;
           c.precision.dtype = "bf16";
         }},
        {"pp2_interleaved_dp2", [](train::TrainConfig& c) {
           c.model.n_layer = 4;
           c.parallel.pp = 2;
           c.parallel.virtual_stages = 2;
           c.parallel.pipeline_schedule = "interleaved";
           c.data.grad_accum_steps = 2;
         }},
    };
  return {};
}

class GoldenLossesTest : public testing::MpiTrainingTest {};

TEST_F(GoldenLossesTest, EveryLayoutGivesItsRecordedLossesBitForBit) {
  const int world_size = world->size();
  const char* write_path = std::getenv("TRIDENT_WRITE_GOLDEN");
  std::FILE* out = nullptr;
  if (write_path != nullptr && world->rank() == 0) {
    out = std::fopen(write_path, "a");
    ASSERT_NE(out, nullptr) << "cannot open TRIDENT_WRITE_GOLDEN=" << write_path;
  }
  const std::vector<Layout> list = layouts(world_size);
  if (list.empty()) GTEST_SKIP() << "no layouts pinned for " << world_size << " ranks";
  const std::string cpu = cpu_class();
  if (write_path == nullptr) {
    std::string recorded;
    for (const Golden& g : golden())
      if (recorded.find(g.cpu) == std::string::npos) recorded += std::string(recorded.empty() ? "" : ", ") + g.cpu;
    bool have = false;
    for (const Golden& g : golden()) have = have || (cpu == g.cpu && g.world == world_size);
    if (!have)
      GTEST_SKIP() << "no losses recorded for this CPU class (" << cpu << "; recorded: " << recorded
                   << "): record them with TRIDENT_WRITE_GOLDEN before a change that must keep the numbers";
  }
  for (const Layout& l : list) {
    train::TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.train.steps = 8;
    cfg.train.eval_interval = 4;
    cfg.train.out_dir = (dir / l.name).string();
    l.apply(cfg);
    const Run r = train(cfg, world);
    if (write_path != nullptr) {  // recording: rank 0 writes, no rank compares
      if (out == nullptr) continue;
      std::fprintf(out, "    {\"%s\", %d, \"%s\",\n     {", l.name, world_size, cpu.c_str());
      for (size_t i = 0; i < r.losses.size(); ++i) std::fprintf(out, "%s%a", i ? ", " : "", r.losses[i]);
      std::fprintf(out, "},\n     {");
      for (size_t i = 0; i < r.val.size(); ++i) std::fprintf(out, "%s%a", i ? ", " : "", r.val[i]);
      std::fprintf(out, "}},\n");
      continue;
    }
    const Golden* g = nullptr;
    for (const Golden& candidate : golden())
      if (candidate.world == world_size && cpu == candidate.cpu && l.name == std::string(candidate.layout))
        g = &candidate;
    ASSERT_NE(g, nullptr) << "no recorded losses for " << l.name << " on " << world_size << " ranks";
    EXPECT_EQ(r.losses, g->losses) << l.name << " on " << world_size << " ranks";
    EXPECT_EQ(r.val, g->val) << l.name << " on " << world_size << " ranks";
  }
  if (out != nullptr) std::fclose(out);
}

}  // namespace
}  // namespace trident
