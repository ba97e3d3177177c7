#include "checkpoint/atomic_file.h"

#include <gtest/gtest.h>

#include "core/crc32c.h"
#include "checkpoint_test_util.h"
#include "fault_injection_env.h"

namespace trident::checkpoint {
namespace {

using testing::FaultInjectionEnv;
using testing::ScratchDir;

TEST(AtomicFile, CommitReplacesAndLeavesNoTemporary) {
  ScratchDir dir;
  Env* env = default_env();
  const std::string path = dir / "f.json";
  testing::spit(path, "old");
  auto written = write_file_atomically(env, path, "new contents").value();
  EXPECT_EQ(testing::slurp(path), "new contents");
  EXPECT_EQ(written.size, 12u);
  EXPECT_EQ(written.crc32c, core::crc32c("new contents"));
  EXPECT_EQ(env->list_dir(dir.path()).value(), std::vector<std::string>{"f.json"});
  EXPECT_EQ(AtomicFileWriter::temp_path_for("a/b/f.json"), "a/b/.f.json.tmp");
  EXPECT_EQ(AtomicFileWriter::temp_path_for("f.json"), ".f.json.tmp");
}

TEST(AtomicFile, AbandonedWriterLeavesTheOldFile) {
  ScratchDir dir;
  Env* env = default_env();
  const std::string path = dir / "f";
  testing::spit(path, "old");
  {
    auto writer = AtomicFileWriter::create(env, path).value();
    ASSERT_TRUE(writer.append("half of the new").is_ok());
    EXPECT_TRUE(exists(env, AtomicFileWriter::temp_path_for(path)));
  }  // destroyed without commit
  EXPECT_EQ(testing::slurp(path), "old");
  EXPECT_EQ(env->list_dir(dir.path()).value(), std::vector<std::string>{"f"});
}

// A crash (power loss) after any operation of write_file_atomically leaves the old contents
// or the new ones, never a mix, a prefix or no file; and the failed call reports an error.
TEST(AtomicFile, CrashAtEveryStepLeavesOldOrNew) {
  const std::string old_contents = "old contents", new_contents = "the new contents";
  int64_t ops = 0;
  {
    ScratchDir dir;
    FaultInjectionEnv env;
    testing::spit(dir / "f", old_contents);
    ASSERT_TRUE(write_file_atomically(&env, dir / "f", new_contents).is_ok());
    ops = env.op_count();
  }
  ASSERT_EQ(ops, 6);  // open, append, sync, close, rename, sync_dir
  for (int64_t k = 0; k <= ops; ++k) {
    for (bool power_loss : {false, true}) {
      SCOPED_TRACE("crash at operation " + std::to_string(k) + (power_loss ? ", power lost" : ""));
      ScratchDir dir;
      FaultInjectionEnv env;
      testing::spit(dir / "f", old_contents);
      env.fail_from(k);
      const bool ok = write_file_atomically(&env, dir / "f", new_contents).is_ok();
      EXPECT_EQ(ok, k == ops);
      env.clear_faults();
      if (power_loss) env.crash();
      const std::string now = testing::slurp(dir / "f");
      EXPECT_TRUE(now == old_contents || now == new_contents) << now;
      // Once the call has succeeded, the new contents survive a power loss.
      if (ok) {
        EXPECT_EQ(now, new_contents);
      }
    }
  }
}

TEST(AtomicFile, TransientFailureReportsTheStepAndKeepsTheOldFile) {
  ScratchDir dir;
  FaultInjectionEnv env;
  testing::spit(dir / "f", "old");
  env.fail_first("rename");
  Status s = write_file_atomically(&env, dir / "f", "new").status();
  EXPECT_TRUE(testing::fails_with(s, "injected fault", "rename"));
  EXPECT_EQ(testing::slurp(dir / "f"), "old");
  EXPECT_EQ(env.list_dir(dir.path()).value(), std::vector<std::string>{"f"});  // temp removed
}

}  // namespace
}  // namespace trident::checkpoint
