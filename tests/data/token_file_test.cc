// Token files: nanoGPT's raw little-endian uint16 layout, memory-mapped reading, atomic writes,
// and the errors for files that cannot be token files.
#include "data/token_file.h"

#include <gtest/gtest.h>

#include "data/test_data.h"

namespace trident::data {
namespace {

using testing::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(TokenFile, WritesRawLittleEndianUint16AndMapsItBack) {
  TempDir dir;
  const std::vector<uint16_t> tokens = {0, 1, 0x1234, 50256, 65535};
  const auto path = dir.path() / "train.bin";
  ASSERT_TRUE(write_token_file(path, tokens).is_ok());
  // Exactly what numpy's tokens.astype(np.uint16).tofile(path) writes: no header.
  EXPECT_EQ(testing::read_file(path), std::string("\x00\x00\x01\x00\x34\x12\x50\xC4\xFF\xFF", 10));
  auto file = TokenFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file.value()->size(), 5);
  EXPECT_EQ(std::vector<uint16_t>(file.value()->tokens().begin(), file.value()->tokens().end()),
            tokens);
  EXPECT_EQ(file.value()->name(), path.string());
}

TEST(TokenFile, RefusesFilesThatCannotHoldTokens) {
  TempDir dir;
  auto missing = TokenFile::open(dir.path() / "nope.bin");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kIO);
  EXPECT_CONTAINS(missing.status().message(), "nope.bin");

  testing::write_file(dir.path() / "empty.bin", "");
  auto empty = TokenFile::open(dir.path() / "empty.bin");
  ASSERT_FALSE(empty.is_ok());
  EXPECT_CONTAINS(empty.status().message(), (dir.path() / "empty.bin").string() + " is empty");

  testing::write_file(dir.path() / "odd.bin", "abc");
  auto odd = TokenFile::open(dir.path() / "odd.bin");
  ASSERT_FALSE(odd.is_ok());
  EXPECT_EQ(odd.status().kind(), ErrorKind::kValue);
  EXPECT_CONTAINS(odd.status().message(),
                  (dir.path() / "odd.bin").string() + " has an odd size (3 bytes)");

  auto directory = TokenFile::open(dir.path());
  EXPECT_FALSE(directory.is_ok());
}

TEST(TokenFile, WritesReplaceAtomicallyAndLeaveNoTemporaryFiles) {
  TempDir dir;
  const auto path = dir.path() / "val.bin";
  ASSERT_TRUE(write_token_file(path, std::vector<uint16_t>{1, 2, 3}).is_ok());
  auto old_mapping = TokenFile::open(path);
  ASSERT_TRUE(write_token_file(path, std::vector<uint16_t>{7, 8}).is_ok());
  // A reader holding the old file keeps seeing it whole; a new reader sees the new file.
  EXPECT_EQ(old_mapping.value()->size(), 3);
  EXPECT_EQ(old_mapping.value()->tokens()[2], 3);
  EXPECT_EQ(TokenFile::open(path).value()->size(), 2);
  int entries = 0;
  for (const auto& e : testing::fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename(), "val.bin");
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(TokenFile, AFailedWriteKeepsTheOldFileAndSaysWhy) {
  TempDir dir;
  const auto path = dir.path() / "train.bin";
  ASSERT_TRUE(write_token_file(path, std::vector<uint16_t>{1, 2, 3}).is_ok());
  // Block the temporary name with a directory so that creating it fails.
  testing::fs::create_directory(path.string() + ".tmp." + std::to_string(::getpid()));
  const Status s = write_token_file(path, std::vector<uint16_t>{9});
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::kIO);
  EXPECT_CONTAINS(s.message(), "train.bin.tmp.");
  EXPECT_EQ(TokenFile::open(path).value()->size(), 3);

  const Status no_dir =
      write_token_file(dir.path() / "missing" / "x.bin", std::vector<uint16_t>{1});
  EXPECT_FALSE(no_dir.is_ok());
  EXPECT_CONTAINS(no_dir.message(), "missing/x.bin");
  EXPECT_CONTAINS(write_token_file(dir.path() / "e.bin", {}).message(), "empty token file");
}

TEST(TokenFile, ChecksIdsAgainstAVocabularySize) {
  auto file = TokenFile::from_tokens({5, 255, 256, 3}, "bytes.bin");
  EXPECT_EQ(file->name(), "bytes.bin");
  EXPECT_TRUE(file->check_vocab_size(257).is_ok());
  const Status s = file->check_vocab_size(256);
  ASSERT_FALSE(s.is_ok());
  EXPECT_CONTAINS(s.message(),
                  "token file bytes.bin has id 256 at position 2, outside the vocabulary of 256");
}

}  // namespace
}  // namespace trident::data
