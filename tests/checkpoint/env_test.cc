#include "checkpoint/env.h"

#include <gtest/gtest.h>

#include "checkpoint_test_util.h"

namespace trident::checkpoint {
namespace {

using testing::fails_with;
using testing::ScratchDir;

TEST(PosixEnv, WriteReadRenameListRemove) {
  ScratchDir dir;
  Env* env = default_env();
  {
    auto file = env->new_writable_file(dir / "a").value();
    ASSERT_TRUE(file->append("hello ").is_ok());
    ASSERT_TRUE(file->append("world").is_ok());
    ASSERT_TRUE(file->sync().is_ok());
    ASSERT_TRUE(file->close().is_ok());
  }
  EXPECT_EQ(read_file(env, dir / "a").value(), "hello world");
  EXPECT_EQ(env->file_size(dir / "a").value(), 11u);
  EXPECT_EQ(env->file_type(dir / "a"), FileType::kFile);

  auto reader = env->new_random_access_file(dir / "a").value();
  char buf[5];
  ASSERT_TRUE(reader->read(6, 5, buf).is_ok());
  EXPECT_EQ(std::string(buf, 5), "world");
  EXPECT_TRUE(fails_with(reader->read(8, 5, buf), dir / "a", "[8, 13)", "past the end"));

  ASSERT_TRUE(env->create_dir(dir / "sub").is_ok());
  EXPECT_TRUE(is_directory(env, dir / "sub"));
  EXPECT_TRUE(fails_with(env->create_dir(dir / "sub"), "create directory", dir / "sub"));
  ASSERT_TRUE(env->rename(dir / "a", dir / "b").is_ok());
  EXPECT_FALSE(exists(env, dir / "a"));
  EXPECT_EQ(env->list_dir(dir.path()).value(), (std::vector<std::string>{"b", "sub"}));
  ASSERT_TRUE(env->sync_dir(dir.path()).is_ok());
  ASSERT_TRUE(env->remove_file(dir / "b").is_ok());
  ASSERT_TRUE(env->remove_dir(dir / "sub").is_ok());
  EXPECT_TRUE(env->list_dir(dir.path()).value().empty());
}

TEST(PosixEnv, ErrorsNameThePathAndTheReason) {
  ScratchDir dir;
  Env* env = default_env();
  const std::string missing = dir / "missing";
  EXPECT_TRUE(fails_with(env->new_random_access_file(missing).status(), missing,
                         "No such file or directory"));
  EXPECT_TRUE(fails_with(env->file_size(missing).status(), missing));
  EXPECT_TRUE(fails_with(env->new_writable_file(missing + "/x").status(), missing + "/x"));
  EXPECT_TRUE(fails_with(env->rename(missing, dir / "y"), missing, dir / "y"));
  EXPECT_TRUE(fails_with(env->list_dir(missing).status(), missing));
  EXPECT_EQ(env->new_random_access_file(missing).status().kind(), ErrorKind::kIO);
}

TEST(EnvHelpers, PathsDirsAndTrees) {
  EXPECT_EQ(join_path("a", "b"), "a/b");
  EXPECT_EQ(join_path("a/", "b"), "a/b");
  EXPECT_EQ(parent_dir("a/b/c"), "a/b");
  EXPECT_EQ(parent_dir("c"), ".");
  EXPECT_EQ(parent_dir("/c"), "/");
  EXPECT_EQ(base_name("a/b/c"), "c");

  ScratchDir dir;
  Env* env = default_env();
  ASSERT_TRUE(create_dirs(env, dir / "x/y/z").is_ok());
  EXPECT_TRUE(is_directory(env, dir / "x/y/z"));
  ASSERT_TRUE(create_dirs(env, dir / "x/y/z").is_ok());  // already there
  testing::spit(dir / "x/y/file", "data");
  EXPECT_TRUE(fails_with(create_dirs(env, dir / "x/y/file"), "a file with that name exists"));
  // remove_tree removes a symbolic link, never what it points to.
  std::filesystem::create_directory_symlink(dir / "x/y/z", dir / "x/link");
  ASSERT_TRUE(remove_tree(env, dir / "x").is_ok());
  EXPECT_FALSE(exists(env, dir / "x"));
}

}  // namespace
}  // namespace trident::checkpoint
