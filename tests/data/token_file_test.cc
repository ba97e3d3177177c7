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

// Note [uint32 token files]: a header, then little-endian uint32 ids; read back by width, and a
// header that does not add up is an error, never ids of the wrong width.
TEST(TokenFile, Uint32FilesCarryAHeaderAndReadBackTheirIds) {
  TempDir dir;
  const std::vector<uint32_t> tokens = {0, 65536, 128255, 151935, 7};
  const auto path = dir.path() / "wide.bin";
  ASSERT_TRUE(write_token_file32(path, tokens).is_ok());
  const std::string bytes = testing::read_file(path);
  ASSERT_EQ(bytes.size(), 16u + 4u * 5u);
  EXPECT_EQ(bytes.substr(0, 16), std::string("TRITOK32\x05\x00\x00\x00\x00\x00\x00\x00", 16));
  EXPECT_EQ(bytes.substr(20, 4), std::string("\x00\x00\x01\x00", 4));  // 65536, little-endian
  auto file = TokenFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file.value()->size(), 5);
  EXPECT_EQ(file.value()->bytes_per_token(), 4);
  std::vector<int64_t> ids(5);
  file.value()->read(0, 5, ids.data());
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 65536, 128255, 151935, 7}));
  EXPECT_ANY_THROW(file.value()->tokens());  // the uint16 view of a uint32 file
  // Cut by 4 bytes: the count no longer matches.
  testing::write_file(dir.path() / "cut.bin", bytes.substr(0, bytes.size() - 4));
  auto cut = TokenFile::open(dir.path() / "cut.bin");
  ASSERT_FALSE(cut.is_ok());
  EXPECT_CONTAINS(cut.status().message(), "starts with the uint32 header (TRITOK32) for 5 ids but holds 32 bytes");
  // A uint16 file stays uint16 (and in memory, either width reads through read()).
  const std::vector<uint16_t> narrow = {84, 82, 73, 84};  // "TRIT" as bytes, not the whole magic
  ASSERT_TRUE(write_token_file(dir.path() / "narrow.bin", narrow).is_ok());
  auto n = TokenFile::open(dir.path() / "narrow.bin");
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(n.value()->bytes_per_token(), 2);
  EXPECT_EQ(n.value()->size(), 4);
  auto memory = TokenFile::from_tokens32({1, 100000});
  int64_t second = 0;
  memory->read(1, 1, &second);
  EXPECT_EQ(second, 100000);
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

// uint32 ids written without the header read as uint16 pairs with a zero high half: every other
// id 0, which trained without complaint (Note [Headerless uint32 files]).
TEST(TokenFile, RefusesUint32IdsWrittenWithoutTheHeader) {
  TempDir dir;
  std::vector<uint32_t> ids(2000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>(1 + i % 300);
  testing::write_file(dir.path() / "raw32.bin",
                      std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint32_t)));
  auto raw = TokenFile::open(dir.path() / "raw32.bin");
  ASSERT_FALSE(raw.is_ok());
  EXPECT_CONTAINS(raw.status().message(), "raw32.bin looks like uint32 ids without trident's header");
  // The same ids as uint16, and a uint16 file whose odd positions are 0 only for a while, are fine.
  std::vector<uint16_t> narrow(ids.begin(), ids.end());
  ASSERT_TRUE(write_token_file(dir.path() / "u16.bin", narrow).is_ok());
  EXPECT_TRUE(TokenFile::open(dir.path() / "u16.bin").is_ok());
  std::vector<uint16_t> zeros(2000, 0);
  for (size_t i = 0; i < zeros.size(); i += 2) zeros[i] = 5;
  zeros[1021] = 9;
  ASSERT_TRUE(write_token_file(dir.path() / "some_zeros.bin", zeros).is_ok());
  EXPECT_TRUE(TokenFile::open(dir.path() / "some_zeros.bin").is_ok());
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
