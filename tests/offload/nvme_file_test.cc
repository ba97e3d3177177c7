// The NVMe tier's file (offload/nvme_file.h): extents written and read back with many requests in
// flight (io_uring and the synchronous fallback, O_DIRECT and buffered) give the bytes written;
// a byte changed on disk, a truncated file, a disk too small and a directory that does not exist
// are errors naming the file (or the key), the offset and the cause; the file is scratch: out of
// its directory once open.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "offload/nvme_file.h"
#include "support/error_of.h"

namespace trident::offload {
namespace {

namespace fs = std::filesystem;

class NvmeFileTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("nvme_file_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  NvmeFileOptions options() const {
    NvmeFileOptions o;
    o.io_uring = std::get<0>(GetParam());
    o.direct = std::get<1>(GetParam());
    o.queue_depth = 4;
    o.request_bytes = 8 * kNvmeAlignment;  // extents of several requests
    return o;
  }
  static void fill(const AlignedBuffer& b, uint32_t seed) {
    std::mt19937 rng(seed);
    auto* p = static_cast<uint32_t*>(b.data());
    for (int64_t i = 0; i < b.bytes() / 4; ++i) p[i] = rng();
  }
  fs::path dir;
};

TEST_P(NvmeFileTest, ExtentsComeBackAsWrittenWithManyRequestsInFlight) {
  const int64_t extent = 37 * kNvmeAlignment;  // 4.6 requests of 8 blocks each
  const int n = 6;
  auto file = NvmeFile::create(dir / "rank0.tier", n * extent, options(), "parallel.nvme_path");
  EXPECT_TRUE(fs::is_empty(dir)) << "the tier's file is removed from its directory once open: a crash leaves nothing";
  if (options().io_uring && !file->asynchronous()) std::cout << "io_uring is not available here: requests ran one at a time\n";
  std::vector<AlignedBuffer> out, in;
  std::vector<NvmeFile::Ticket> writes, reads;
  for (int i = 0; i < n; ++i) {
    out.emplace_back(extent);
    fill(out.back(), static_cast<uint32_t>(i + 1));
    writes.push_back(file->write(i * extent, out.back().data(), extent));  // all in flight at once
  }
  for (int i = n - 1; i >= 0; --i) file->wait(writes[static_cast<size_t>(i)]);  // in any order
  for (int i = 0; i < n; ++i) {
    in.emplace_back(extent);
    reads.push_back(file->read(i * extent, in.back().data(), extent));
  }
  file->wait_all();
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(std::memcmp(in[static_cast<size_t>(i)].data(), out[static_cast<size_t>(i)].data(), extent), 0) << i;
  EXPECT_EQ(file->bytes_written(), n * extent);
  EXPECT_EQ(file->bytes_read(), n * extent);
  // Rewritten in place (the optimizer's state each step): the new bytes, the new checksum.
  fill(out[2], 99);
  file->wait(file->write(2 * extent, out[2].data(), extent));
  file->wait(file->read(2 * extent, in[2].data(), extent));
  EXPECT_EQ(std::memcmp(in[2].data(), out[2].data(), extent), 0);
  // Polled, requests complete without a wait; wait() then reports them.
  const NvmeFile::Ticket t = file->write(0, out[0].data(), extent);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!file->done(t) && std::chrono::steady_clock::now() < deadline) {
    file->poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(file->done(t));
  file->wait(t);
}

TEST_P(NvmeFileTest, AByteChangedOnDiskIsAnErrorNamingTheFileAndOffset) {
  const int64_t extent = 4 * kNvmeAlignment;
  auto file = NvmeFile::create(dir / "rank1.tier", 2 * extent, options(), "parallel.nvme_path");
  AlignedBuffer a(extent), b(extent);
  fill(a, 7);
  file->wait(file->write(extent, a.data(), extent));
  {  // another writer flips a byte of the second extent
    const int fd = ::open(("/proc/self/fd/" + std::to_string(file->fd())).c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const char x = 0x5a;
    ASSERT_EQ(::pwrite(fd, &x, 1, extent + 1234), 1);
    ::fsync(fd);
    ::close(fd);
  }
  const std::string e = testing::error_of([&] { file->wait(file->read(extent, b.data(), extent)); });
  EXPECT_NE(e.find(file->path().string()), std::string::npos) << e;
  EXPECT_NE(e.find("at offset " + std::to_string(extent)), std::string::npos) << e;
  EXPECT_NE(e.find("CRC-32C"), std::string::npos) << e;
}

TEST_P(NvmeFileTest, AReadPastATruncatedFileIsAnErrorNamingTheFileAndOffset) {
  const int64_t extent = 2 * kNvmeAlignment;
  auto file = NvmeFile::create(dir / "rank2.tier", 3 * extent, options(), "parallel.nvme_path");
  AlignedBuffer a(extent);
  fill(a, 3);
  file->wait(file->write(2 * extent, a.data(), extent));
  ASSERT_EQ(::ftruncate(file->fd(), extent), 0);  // the disk lost the file's end
  const std::string e = testing::error_of([&] { file->wait(file->read(2 * extent, a.data(), extent)); });
  EXPECT_NE(e.find(file->path().string()), std::string::npos) << e;
  EXPECT_NE(e.find("reading " + std::to_string(extent) + " bytes at offset " + std::to_string(2 * extent)),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("end of file"), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(Modes, NvmeFileTest, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "io_uring" : "sync") +
                                  (std::get<1>(info.param) ? "_direct" : "_buffered");
                         });

TEST(NvmeFileErrors, ADiskTooSmallIsAnErrorBeforeTheFirstStep) {
  const fs::path dir = fs::temp_directory_path();
  const int64_t huge = int64_t{1} << 60;  // an exbibyte: no disk here has it
  const std::string e = testing::error_of([&] {
    (void)NvmeFile::create(dir / "too_big.tier", huge, NvmeFileOptions{}, "parallel.nvme_path");
  });
  EXPECT_NE(e.find("parallel.nvme_path"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot allocate " + std::to_string(huge) + " bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("bytes free"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir / "too_big.tier"));
}

TEST(NvmeFileErrors, AMissingDirectoryNamesTheKey) {
  const std::string e = testing::error_of([] {
    (void)NvmeFile::create("/nonexistent/trident/rank0.tier", kNvmeAlignment, NvmeFileOptions{}, "parallel.nvme_path");
  });
  EXPECT_NE(e.find("parallel.nvme_path = '/nonexistent/trident' is not a directory"), std::string::npos) << e;
}

TEST(NvmeFileErrors, AnExtentNeverWrittenCannotBeRead) {
  const fs::path dir = fs::temp_directory_path();
  auto file = NvmeFile::create(dir / ("unwritten_" + std::to_string(::getpid()) + ".tier"), 2 * kNvmeAlignment,
                               NvmeFileOptions{}, "parallel.nvme_path");
  AlignedBuffer b(kNvmeAlignment);
  const std::string e = testing::error_of([&] { (void)file->read(kNvmeAlignment, b.data(), kNvmeAlignment); });
  EXPECT_NE(e.find("never written"), std::string::npos) << e;
}

}  // namespace
}  // namespace trident::offload
