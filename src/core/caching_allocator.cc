#include "core/caching_allocator.h"

#include <new>

#include <algorithm>
#include <cstdlib>

#include "core/check.h"

namespace trident {

static thread_local uint64_t tls_stream = 0;

StreamGuard::StreamGuard(uint64_t stream) : previous_(tls_stream) { tls_stream = stream; }
StreamGuard::~StreamGuard() { tls_stream = previous_; }
uint64_t StreamGuard::current() { return tls_stream; }

// Note [Allocator size classes]
// Why round sizes at all? A freed block is reused only for a request of the same class,
// so classes must be coarse enough to hit often, and fine enough to waste little:
// up to 64 KiB round to 64 B (cheap small tensors), above that to 1/8 of the power of two
// (at most 12.5% waste). Statistics count requested bytes, so rounding never distorts the
// model-state numbers that ZeRO's memory tests check.
size_t allocator_size_class(size_t n) {
  if (n == 0) n = 1;
  if (n <= 65536) return (n + 63) & ~size_t{63};
  const int msb = 63 - __builtin_clzll(n);
  const size_t step = size_t{1} << (msb - 3);
  return (n + step - 1) & ~(step - 1);
}

CachingAllocator::CachingAllocator(std::unique_ptr<MemorySource> source) : source_(std::move(source)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

DataPtr CachingAllocator::allocate(size_t nbytes, MemoryCategory category) {
  const size_t cls = allocator_size_class(nbytes);
  const uint64_t stream = StreamGuard::current();
  void* ptr = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.find({stream, cls});
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
  } else {
    ptr = source_->allocate(cls);
    if (ptr == nullptr) {  // give the cache back and try once more
      release_cached_locked();
      ptr = source_->allocate(cls);
    }
    TRI_CHECK_KIND(ErrorKind::kValue, ptr != nullptr, "Out of ", source_->device(), " memory allocating ", nbytes,
                   " bytes (", memory_category_name(category), "); allocator state: ", stats_.str());
    stats_.reserved += static_cast<int64_t>(cls);
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    ++stats_.num_system_allocs;
  }
  live_[ptr] = Block{nbytes, cls, category, stream};
  ++stats_.num_allocs;
  add(stats_.in_use, static_cast<int64_t>(nbytes));
  add(stats_.by_category[static_cast<int>(category)], static_cast<int64_t>(nbytes));
  return DataPtr(ptr, nbytes, source_->device(), this);
}

void CachingAllocator::retag(const DataPtr& p, MemoryCategory category) {
  std::lock_guard<std::mutex> lock(mu_);
  Block& b = find(p.get());
  add(stats_.by_category[static_cast<int>(b.category)], -static_cast<int64_t>(b.requested));
  b.category = category;
  add(stats_.by_category[static_cast<int>(category)], static_cast<int64_t>(b.requested));
}

MemoryCategory CachingAllocator::category_of(const DataPtr& p) {
  std::lock_guard<std::mutex> lock(mu_);
  return find(p.get()).category;
}

MemoryStats CachingAllocator::stats() {
  MemoryStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  s.limit = source_->limit();
  return s;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.in_use.peak = stats_.in_use.current;
  for (auto& c : stats_.by_category) c.peak = c.current;
  stats_.peak_reserved = stats_.reserved;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

void CachingAllocator::deallocate(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  TRI_ASSERT(it != live_.end(), "freeing a pointer this allocator does not own");
  const Block b = it->second;
  live_.erase(it);
  add(stats_.in_use, -static_cast<int64_t>(b.requested));
  add(stats_.by_category[static_cast<int>(b.category)], -static_cast<int64_t>(b.requested));
  // deallocate runs in destructors, also while an out-of-memory error unwinds: growing the
  // free list may itself fail then, and a throw here would terminate the process. The block
  // goes back to its source instead of the cache.
  try {
    free_[{b.stream, b.size_class}].push_back(ptr);
  } catch (const std::bad_alloc&) {
    source_->free(ptr);
    stats_.reserved -= static_cast<int64_t>(b.size_class);
  }
}

void CachingAllocator::add(MemoryStats::Counter& c, int64_t delta) {
  c.current += delta;
  c.peak = std::max(c.peak, c.current);
}

CachingAllocator::Block& CachingAllocator::find(void* ptr) {
  auto it = live_.find(ptr);
  TRI_ASSERT(it != live_.end(), "pointer not owned by this allocator");
  return it->second;
}

void CachingAllocator::release_cached_locked() {
  for (auto& [key, list] : free_) {
    for (void* p : list) source_->free(p);
    stats_.reserved -= static_cast<int64_t>(key.second * list.size());
    list.clear();
  }
}

}  // namespace trident
