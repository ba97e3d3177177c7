// The checkpoint write protocol under crashes and I/O errors (FaultInjectionEnv): for every
// operation of a save, make the process die there (and, separately, also lose power, dropping
// everything not synced), then check what is on disk.
//   - the previous checkpoint still loads, fully verified, with its contents;
//   - the new one either loads with its contents or does not exist (it never half-exists);
//   - the save reported failure unless it got to the end;
//   - a retry succeeds, and pruning leaves exactly the new checkpoint.
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint_test_util.h"
#include "fault_injection_env.h"

namespace trident::checkpoint {
namespace {

using testing::Contents;
using testing::FaultInjectionEnv;
using testing::sample_contents;
using testing::save;
using testing::ScratchDir;

const std::string kOld = "step_000001";
const std::string kNew = "step_000002";

// How many mutating operations a save of `kNew` next to `kOld` takes.
int64_t save_operation_count() {
  ScratchDir dir;
  FaultInjectionEnv env;
  save(&env, dir.path(), kOld, sample_contents(1)).status().throw_if_error();
  const int64_t before = env.op_count();
  save(&env, dir.path(), kNew, sample_contents(2)).status().throw_if_error();
  return env.op_count() - before;
}

// Checks the invariants after a failed or interrupted save; returns whether kNew exists.
bool check_after_crash(Env* env, const std::string& root, const Contents& old_contents,
                       const Contents& new_contents, const std::vector<std::string>& log) {
  SCOPED_TRACE("operations: " + [&] {
    std::string s;
    for (const std::string& line : log) s += "\n  " + line;
    return s;
  }());
  auto old_ckpt = CheckpointReader::open(env, join_path(root, kOld));
  EXPECT_TRUE(old_ckpt.is_ok()) << old_ckpt.status().to_string();
  if (old_ckpt.is_ok()) testing::expect_contents(old_ckpt.value(), old_contents);

  const bool new_exists = exists(env, join_path(root, kNew));
  if (new_exists) {
    auto new_ckpt = CheckpointReader::open(env, join_path(root, kNew));
    EXPECT_TRUE(new_ckpt.is_ok()) << new_ckpt.status().to_string();
    if (new_ckpt.is_ok()) testing::expect_contents(new_ckpt.value(), new_contents);
  }
  EXPECT_EQ(find_latest_checkpoint(env, root).value(), join_path(root, new_exists ? kNew : kOld));
  return new_exists;
}

class CheckpointCrash : public ::testing::TestWithParam<bool> {};

TEST_P(CheckpointCrash, EveryOperationOfASave) {
  const bool power_loss = GetParam();
  const int64_t ops = save_operation_count();
  const Contents old_contents = sample_contents(1), new_contents = sample_contents(2);
  int64_t new_survived = 0;
  for (int64_t k = 0; k <= ops; ++k) {
    SCOPED_TRACE("process dies at operation " + std::to_string(k) + " of " + std::to_string(ops) +
                 (power_loss ? ", then the power fails" : ""));
    ScratchDir dir;
    const std::string root = dir / "run";
    FaultInjectionEnv env;
    ASSERT_TRUE(save(&env, root, kOld, old_contents).is_ok());
    env.forget_history();
    const int64_t start = env.op_count();
    env.fail_from(start + k);
    const bool saved = save(&env, root, kNew, new_contents).is_ok();
    EXPECT_EQ(saved, k == ops);
    env.clear_faults();
    if (power_loss) env.crash();

    const std::vector<std::string> log(env.op_log().begin() + start, env.op_log().end());
    const bool new_exists = check_after_crash(&env, root, old_contents, new_contents, log);
    if (saved) {
      EXPECT_TRUE(new_exists) << "a successful save must survive a power loss";
    }
    new_survived += new_exists;

    // Recovery: the run saves again (the stale staging directory is replaced) and prunes.
    if (!new_exists) {
      ASSERT_TRUE(save(&env, root, kNew, new_contents).is_ok());
    }
    ASSERT_TRUE(prune_checkpoints(&env, root, 1).is_ok());
    EXPECT_EQ(env.list_dir(root).value(), std::vector<std::string>{kNew});
    testing::expect_contents(CheckpointReader::open(&env, join_path(root, kNew)).value(),
                             new_contents);
  }
  // The new checkpoint exists exactly when the directory rename happened (and, after a power
  // loss, was synced): the last one or two operations.
  EXPECT_EQ(new_survived, power_loss ? 1 : 2);
}

INSTANTIATE_TEST_SUITE_P(ProcessDeathOrPowerLoss, CheckpointCrash, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "PowerLoss" : "ProcessDeath";
                         });

// A single failing operation (a transient error: ENOSPC, EIO) fails the save with a message
// naming the operation, and the writer cleans up after itself.
TEST(CheckpointTransientError, EveryOperationOfASave) {
  const int64_t ops = save_operation_count();
  const Contents old_contents = sample_contents(1), new_contents = sample_contents(2);
  for (int64_t k = 0; k < ops; ++k) {
    SCOPED_TRACE("operation " + std::to_string(k) + " of " + std::to_string(ops) + " fails");
    ScratchDir dir;
    const std::string root = dir / "run";
    FaultInjectionEnv env;
    ASSERT_TRUE(save(&env, root, kOld, old_contents).is_ok());
    const int64_t start = env.op_count();
    env.fail_only(start + k);
    Status s = save(&env, root, kNew, new_contents).status();
    ASSERT_FALSE(s.is_ok());
    EXPECT_TRUE(testing::fails_with(s, "injected fault at operation " + std::to_string(start + k)));
    const std::vector<std::string> log(env.op_log().begin() + start, env.op_log().end());
    const bool new_exists = check_after_crash(&env, root, old_contents, new_contents, log);
    // Only the final directory sync comes after the rename.
    EXPECT_EQ(new_exists, k == ops - 1);
    std::vector<std::string> expected = {kOld};
    if (new_exists) expected.push_back(kNew);
    EXPECT_EQ(env.list_dir(root).value(), expected) << "staging directory left behind";
  }
}

}  // namespace
}  // namespace trident::checkpoint
