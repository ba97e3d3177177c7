// The fixture of the NVMe tiers' tests (nvme_offload_test: the optimizer state's;
// nvme_param_test: ZeRO-3's parameters'): a tier directory per rank's process (as a node-local
// disk would be), the tiers' open and already unlinked files found through /proc/self/fd, a
// byte changed in one behind the tier's back, and the message a run ends with.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "support/error_of.h"
#include "support/mpi_training_test.h"

namespace trident::testing {

class NvmeTierTest : public MpiTrainingTest {
 protected:
  // The tiny run of `arch` (llama's with one key-value head and a 48-wide MLP) writing to
  // dir/out, without evaluations.
  train::TrainConfig tier_run_config(const std::string& arch, const std::string& out) const {
    train::TrainConfig cfg = tiny_run_config(dir);
    cfg.model.arch = arch;
    if (arch == "llama") cfg.model.family_values = {{"n_kv_heads", int64_t{1}}, {"intermediate_size", int64_t{48}}};
    cfg.train.eval_interval = 0;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }
  std::filesystem::path tier_dir() const {
    const std::filesystem::path p = dir / ("nvme_rank" + std::to_string(world->rank()));
    std::filesystem::create_directories(p);
    return p;
  }
  // The run `cfg` for 12 steps, uninterrupted, against two runs checkpointed at step 6 and
  // resumed: one saved with `to_tier` applied to its config and resumed without it, one the
  // other way round; each resumes to the uninterrupted losses bit for bit.
  void expect_checkpoints_move_between_tier_and_memory(
      train::TrainConfig cfg, const std::function<void(train::TrainConfig&)>& to_tier) {
    cfg.train.steps = 12;
    const Run whole = train(cfg, world);
    ASSERT_EQ(whole.losses.size(), 12u);
    const std::vector<double> tail(whole.losses.begin() + 6, whole.losses.end());
    for (const bool first_on_tier : {true, false}) {
      train::TrainConfig first = cfg, second = cfg;
      to_tier(first_on_tier ? first : second);
      first.train.out_dir = second.train.out_dir = cfg.train.out_dir + (first_on_tier ? "_tier_then_plain"
                                                                                      : "_plain_then_tier");
      first.train.checkpoint_interval = second.train.checkpoint_interval = 6;
      ASSERT_EQ(train(first, world, 6).losses.size(), 6u);
      second.train.resume = true;
      EXPECT_EQ(train(second, world).losses, tail) << (first_on_tier ? "saved on the tier, resumed in memory"
                                                                     : "saved in memory, resumed on the tier");
    }
  }
  // /proc/self/fd/N of this process's open file under tier_dir() whose name contains `kind`
  // (any when ""); empty when there is none.
  std::filesystem::path open_tier_file(const std::string& kind = "") const {
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
      if (!ec && target.rfind(tier_dir().string(), 0) == 0 && target.find(kind) != std::string::npos)
        return e.path();
    }
    return {};
  }
  // Flips every bit of the byte at `offset` of `file`, through the page cache as another writer
  // would.
  static void flip_byte(const std::filesystem::path& file, long offset) {
    std::FILE* f = std::fopen(file.c_str(), "r+b");
    ASSERT_NE(f, nullptr) << file;
    std::fseek(f, offset, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, offset, SEEK_SET);
    std::fputc(c ^ 0xff, f);
    std::fclose(f);
  }
  // The message `trainer`'s run ends with: "" when it succeeds.
  static std::string run_error(train::Trainer& trainer) {
    return error_of([&] {
      const Status s = trainer.run();
      if (!s.is_ok()) throw std::runtime_error(s.to_string());
    });
  }
};

}  // namespace trident::testing
