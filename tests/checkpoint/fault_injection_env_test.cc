// Tests of the test tool: FaultInjectionEnv must really lose what a crash loses, or the crash
// tests of the checkpoint protocol prove nothing.
#include "fault_injection_env.h"

#include <gtest/gtest.h>

#include "checkpoint_test_util.h"

namespace trident::checkpoint::testing {
namespace {

void write(Env* env, const std::string& path, const std::string& data, bool sync) {
  auto file = env->new_writable_file(path).value();
  file->append(data).throw_if_error();
  if (sync) file->sync().throw_if_error();
  file->close().throw_if_error();
}

TEST(FaultInjectionEnv, CrashDropsUnsyncedDataAndUnsyncedNames) {
  ScratchDir dir;
  FaultInjectionEnv env;
  write(&env, dir / "synced", "durable", /*sync=*/true);
  write(&env, dir / "unsynced", "lost", /*sync=*/false);
  env.sync_dir(dir.path()).throw_if_error();
  {
    auto file = env.new_writable_file(dir / "partly").value();
    file->append("kept").throw_if_error();
    file->sync().throw_if_error();
    file->append(" dropped").throw_if_error();
    file->close().throw_if_error();
  }
  env.sync_dir(dir.path()).throw_if_error();
  write(&env, dir / "name_unsynced", "data synced, name not", /*sync=*/true);
  env.crash();
  EXPECT_EQ(slurp(dir / "synced"), "durable");
  EXPECT_EQ(slurp(dir / "unsynced"), "");
  EXPECT_EQ(slurp(dir / "partly"), "kept");
  EXPECT_FALSE(exists(&env, dir / "name_unsynced"));
}

TEST(FaultInjectionEnv, CrashUndoesUnsyncedRenamesRemovalsAndDirectories) {
  ScratchDir dir;
  FaultInjectionEnv env;
  write(&env, dir / "a", "A", true);
  write(&env, dir / "b", "B", true);
  write(&env, dir / "c", "C", true);
  env.create_dir(dir / "d").throw_if_error();
  write(&env, dir / "d/inner", "I", true);
  env.sync_dir(dir / "d").throw_if_error();
  env.sync_dir(dir.path()).throw_if_error();

  env.rename(dir / "a", dir / "b").throw_if_error();  // replaces b
  env.remove_file(dir / "c").throw_if_error();
  env.rename(dir / "d", dir / "e").throw_if_error();  // a directory
  env.create_dir(dir / "f").throw_if_error();
  EXPECT_EQ(slurp(dir / "b"), "A");
  EXPECT_EQ(slurp(dir / "e/inner"), "I");
  env.crash();
  EXPECT_EQ(slurp(dir / "a"), "A");
  EXPECT_EQ(slurp(dir / "b"), "B");
  EXPECT_EQ(slurp(dir / "c"), "C");
  EXPECT_EQ(slurp(dir / "d/inner"), "I");
  EXPECT_FALSE(exists(&env, dir / "e"));
  EXPECT_FALSE(exists(&env, dir / "f"));
}

TEST(FaultInjectionEnv, SyncedDirectoryChangesSurvive) {
  ScratchDir dir;
  FaultInjectionEnv env;
  write(&env, dir / "tmp", "new", true);
  env.rename(dir / "tmp", dir / "final").throw_if_error();
  env.sync_dir(dir.path()).throw_if_error();
  env.crash();
  EXPECT_EQ(slurp(dir / "final"), "new");
  EXPECT_FALSE(exists(&env, dir / "tmp"));
}

// A directory created in an unsynced parent vanishes with everything in it, even files and
// entries that were synced inside it.
TEST(FaultInjectionEnv, UnsyncedDirectoryTakesItsSyncedContentsWithIt) {
  ScratchDir dir;
  FaultInjectionEnv env;
  env.create_dir(dir / "d").throw_if_error();
  write(&env, dir / "d/f", "x", true);
  env.sync_dir(dir / "d").throw_if_error();
  env.crash();
  EXPECT_FALSE(exists(&env, dir / "d"));
}

// Renaming a directory (durably) does not make the entries inside it durable: that takes a
// sync of the directory itself, under either name.
TEST(FaultInjectionEnv, EntriesOfARenamedDirectoryNeedTheirOwnSync) {
  for (bool sync_inner : {false, true}) {
    ScratchDir dir;
    FaultInjectionEnv env;
    env.create_dir(dir / "staging").throw_if_error();
    env.sync_dir(dir.path()).throw_if_error();
    write(&env, dir / "staging/f", "data", true);
    env.rename(dir / "staging", dir / "final").throw_if_error();
    env.sync_dir(dir.path()).throw_if_error();
    if (sync_inner) env.sync_dir(dir / "final").throw_if_error();
    env.crash();
    EXPECT_TRUE(is_directory(&env, dir / "final"));
    EXPECT_EQ(exists(&env, dir / "final/f"), sync_inner);
  }
}

TEST(FaultInjectionEnv, FailFromAndFailOnly) {
  ScratchDir dir;
  FaultInjectionEnv env;
  env.fail_only(1);  // the append
  auto file = env.new_writable_file(dir / "f").value();
  EXPECT_TRUE(fails_with(file->append("x"), "injected fault at operation 1", "append"));
  EXPECT_TRUE(file->append("y").is_ok());
  env.fail_from(4);
  EXPECT_TRUE(file->sync().is_ok());                // operation 3
  EXPECT_FALSE(file->close().is_ok());              // 4
  EXPECT_FALSE(env.create_dir(dir / "d").is_ok());  // 5
  EXPECT_FALSE(exists(&env, dir / "d"));
  EXPECT_EQ(env.op_count(), 6);
  EXPECT_EQ(env.op_log()[1], "1 append to " + dir / "f");
}

}  // namespace
}  // namespace trident::checkpoint::testing
