#include "core/allocator.h"

#include <gtest/gtest.h>

#include "core/factory.h"

namespace trident {
namespace {

TEST(HostAllocator, AlignsAndCountsRequestedBytes) {
  Allocator& a = host_allocator();
  const MemoryStats before = a.stats();
  {
    DataPtr p = a.allocate(1000, MemoryCategory::kParameter);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u);
    const MemoryStats during = a.stats();
    EXPECT_EQ(during.in_use.current - before.in_use.current, 1000);
    EXPECT_EQ(during.category(MemoryCategory::kParameter).current -
                  before.category(MemoryCategory::kParameter).current,
              1000);
    EXPECT_EQ(during.num_allocs - before.num_allocs, 1);
  }
  EXPECT_EQ(a.stats().in_use.current, before.in_use.current);
}

TEST(HostAllocator, ReusesFreedBlocks) {
  Allocator& a = host_allocator();
  void* first;
  {
    DataPtr p = a.allocate(123457);
    first = p.get();
  }
  const int64_t system_before = a.stats().num_system_allocs;
  DataPtr q = a.allocate(123400);  // same size class
  EXPECT_EQ(q.get(), first);
  EXPECT_EQ(a.stats().num_system_allocs, system_before);
}

TEST(HostAllocator, CategoryGuardAndRetag) {
  Allocator& a = host_allocator();
  const int64_t grads = a.stats().category(MemoryCategory::kGradient).current;
  const int64_t acts = a.stats().category(MemoryCategory::kActivation).current;
  {
    MemoryCategoryGuard guard(MemoryCategory::kActivation);
    Tensor t = empty({256});  // 1024 bytes
    EXPECT_EQ(a.stats().category(MemoryCategory::kActivation).current - acts, 1024);
    a.retag(t.storage()->data_ptr(), MemoryCategory::kGradient);
    EXPECT_EQ(a.stats().category(MemoryCategory::kActivation).current, acts);
    EXPECT_EQ(a.stats().category(MemoryCategory::kGradient).current - grads, 1024);
    EXPECT_EQ(a.category_of(t.storage()->data_ptr()), MemoryCategory::kGradient);
  }
  EXPECT_EQ(a.stats().category(MemoryCategory::kGradient).current, grads);
  EXPECT_EQ(MemoryCategoryGuard::current(), MemoryCategory::kOther);
}

TEST(HostAllocator, PeakAndEmptyCache) {
  Allocator& a = host_allocator();
  a.reset_peak_stats();
  const int64_t base = a.stats().in_use.current;
  { Tensor t = empty({1 << 20}); }
  EXPECT_GE(a.stats().in_use.peak - base, 4 << 20);
  a.empty_cache();
  const MemoryStats s = a.stats();
  EXPECT_GE(s.reserved, s.in_use.current);
}

}  // namespace
}  // namespace trident
