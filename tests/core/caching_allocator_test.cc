// The caching allocator's pool logic, over a fake memory source that counts what it hands
// out and can run out: the steady state makes no system allocations, blocks are reused only
// by the stream they were allocated for, running out frees the cache and retries, and a real
// out-of-memory names the request and the allocator's state.
#include "core/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"

namespace trident {
namespace {

class FakeMemory final : public MemorySource {
 public:
  explicit FakeMemory(size_t capacity, int* live) : capacity_(capacity), live_(live) {}
  void* allocate(size_t nbytes) override {
    if (used_ + nbytes > capacity_) return nullptr;
    used_ += nbytes;
    ++*live_;
    sizes_.push_back(nbytes);
    return std::malloc(nbytes);
  }
  void free(void* ptr) override {
    --*live_;
    std::free(ptr);
    used_ -= sizes_.back();  // every test frees blocks of one size
    sizes_.pop_back();
  }
  Device device() const override { return Device::cuda(0); }

 private:
  size_t capacity_, used_ = 0;
  int* live_;
  std::vector<size_t> sizes_;
};

TEST(CachingAllocator, TheSteadyStateMakesNoSystemAllocations) {
  int live = 0;
  CachingAllocator a(std::make_unique<FakeMemory>(1 << 20, &live));
  for (int step = 0; step < 5; ++step) {
    std::vector<DataPtr> blocks;
    for (size_t n : {1000, 1000, 70000, 4096}) blocks.push_back(a.allocate(n, MemoryCategory::kActivation));
  }
  EXPECT_EQ(a.stats().num_system_allocs, 4);
  EXPECT_EQ(a.stats().num_allocs, 20);
  EXPECT_EQ(a.stats().in_use.current, 0);
  EXPECT_EQ(a.stats().category(MemoryCategory::kActivation).peak, 1000 + 1000 + 70000 + 4096);
  a.empty_cache();
  EXPECT_EQ(live, 0);
  EXPECT_EQ(a.stats().reserved, 0);
}

TEST(CachingAllocator, BlocksAreReusedOnlyByTheirStream) {
  int live = 0;
  CachingAllocator a(std::make_unique<FakeMemory>(1 << 20, &live));
  void* first = nullptr;
  {
    StreamGuard s(1);
    DataPtr p = a.allocate(512, MemoryCategory::kOther);
    first = p.get();
  }
  {
    StreamGuard s(2);  // another stream may still be using nothing of stream 1's, but must not share
    DataPtr p = a.allocate(512, MemoryCategory::kOther);
    EXPECT_NE(p.get(), first);
    EXPECT_EQ(a.stats().num_system_allocs, 2);
  }
  StreamGuard s(1);
  DataPtr again = a.allocate(512, MemoryCategory::kOther);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(a.stats().num_system_allocs, 2);
}

TEST(CachingAllocator, RunningOutFreesTheCacheAndRetries) {
  int live = 0;
  CachingAllocator a(std::make_unique<FakeMemory>(3 * 4096, &live));
  { DataPtr cached = a.allocate(4096 * 2, MemoryCategory::kOther); }  // freed to the cache
  DataPtr big = a.allocate(4096 * 3, MemoryCategory::kParameter);  // fits only without the cached block
  EXPECT_NE(big.get(), nullptr);
  EXPECT_EQ(live, 1);
}

TEST(CachingAllocator, OutOfMemoryNamesTheRequestAndTheState) {
  int live = 0;
  CachingAllocator a(std::make_unique<FakeMemory>(4096, &live));
  DataPtr held = a.allocate(4096, MemoryCategory::kGradient);
  try {
    a.allocate(100, MemoryCategory::kActivation);
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Out of cuda:0 memory allocating 100 bytes (activation)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gradient=4096 B"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace trident
