#include "core/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/check.h"

namespace trident {

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kOther: return "other";
    case MemoryCategory::kParameter: return "parameter";
    case MemoryCategory::kGradient: return "gradient";
    case MemoryCategory::kOptimizerState: return "optimizer_state";
    case MemoryCategory::kActivation: return "activation";
    case MemoryCategory::kGatheredParameter: return "gathered_parameter";
  }
  return "?";
}

static thread_local MemoryCategory tls_category = MemoryCategory::kOther;

MemoryCategoryGuard::MemoryCategoryGuard(MemoryCategory category) : previous_(tls_category) {
  tls_category = category;
}
MemoryCategoryGuard::~MemoryCategoryGuard() { tls_category = previous_; }
MemoryCategory MemoryCategoryGuard::current() { return tls_category; }

DataPtr& DataPtr::operator=(DataPtr&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    nbytes_ = std::exchange(other.nbytes_, 0);
    device_ = other.device_;
    owner_ = std::exchange(other.owner_, nullptr);
  }
  return *this;
}

void DataPtr::reset() {
  if (ptr_ != nullptr && owner_ != nullptr) owner_->deallocate(ptr_);
  ptr_ = nullptr;
  nbytes_ = 0;
  owner_ = nullptr;
}

std::string MemoryStats::str() const {
  std::ostringstream os;
  os << "in_use=" << in_use.current << " B (peak " << in_use.peak << " B), reserved=" << reserved
     << " B (peak " << peak_reserved << " B), allocs=" << num_allocs
     << " (system " << num_system_allocs << ")";
  for (int c = 0; c < kNumMemoryCategories; ++c)
    if (by_category[c].peak > 0)
      os << ", " << memory_category_name(static_cast<MemoryCategory>(c)) << "="
         << by_category[c].current << " B (peak " << by_category[c].peak << " B)";
  return os.str();
}

namespace {

constexpr size_t kAlignment = 64;

// Note [Host allocator size classes]
// Why round sizes at all? A freed block is reused only for a request of the same class,
// so classes must be coarse enough to hit often, and fine enough to waste little:
// up to 64 KiB round to 64 B (cheap small tensors), above that to 1/8 of the power of two
// (at most 12.5% waste). Statistics count requested bytes, so rounding never distorts the
// model-state numbers that ZeRO's memory tests check.
size_t size_class(size_t n) {
  if (n == 0) n = 1;
  if (n <= 65536) return (n + 63) & ~size_t{63};
  const int msb = 63 - __builtin_clzll(n);
  const size_t step = size_t{1} << (msb - 3);
  return (n + step - 1) & ~(step - 1);
}

class CachingHostAllocator final : public Allocator {
 public:
  ~CachingHostAllocator() override {
    // Live blocks at exit belong to static tensors; only cached ones are freed.
    release_cached();
  }

  DataPtr allocate(size_t nbytes, MemoryCategory category) override {
    const size_t cls = size_class(nbytes);
    void* ptr = nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    auto& list = free_[cls];
    if (!list.empty()) {
      ptr = list.back();
      list.pop_back();
    } else {
      ptr = std::aligned_alloc(kAlignment, cls);
      if (ptr == nullptr) {
        release_cached_locked();
        ptr = std::aligned_alloc(kAlignment, cls);
      }
      TRI_CHECK_KIND(ErrorKind::kValue, ptr != nullptr, "Out of host memory allocating ", nbytes,
                     " bytes (", memory_category_name(category), "); allocator state: ",
                     stats_.str());
      stats_.reserved += static_cast<int64_t>(cls);
      stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
      ++stats_.num_system_allocs;
    }
    live_[ptr] = Block{nbytes, cls, category};
    ++stats_.num_allocs;
    add(stats_.in_use, static_cast<int64_t>(nbytes));
    add(stats_.by_category[static_cast<int>(category)], static_cast<int64_t>(nbytes));
    return DataPtr(ptr, nbytes, Device::cpu(), this);
  }

  void retag(const DataPtr& p, MemoryCategory category) override {
    std::lock_guard<std::mutex> lock(mu_);
    Block& b = find(p.get());
    add(stats_.by_category[static_cast<int>(b.category)], -static_cast<int64_t>(b.requested));
    b.category = category;
    add(stats_.by_category[static_cast<int>(category)], static_cast<int64_t>(b.requested));
  }

  MemoryCategory category_of(const DataPtr& p) override {
    std::lock_guard<std::mutex> lock(mu_);
    return find(p.get()).category;
  }

  MemoryStats stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.in_use.peak = stats_.in_use.current;
    for (auto& c : stats_.by_category) c.peak = c.current;
    stats_.peak_reserved = stats_.reserved;
  }

  void empty_cache() override { release_cached(); }

 protected:
  void deallocate(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    TRI_ASSERT(it != live_.end(), "freeing a pointer this allocator does not own");
    const Block b = it->second;
    live_.erase(it);
    add(stats_.in_use, -static_cast<int64_t>(b.requested));
    add(stats_.by_category[static_cast<int>(b.category)], -static_cast<int64_t>(b.requested));
    free_[b.size_class].push_back(ptr);
  }

 private:
  struct Block {
    size_t requested;
    size_t size_class;
    MemoryCategory category;
  };

  static void add(MemoryStats::Counter& c, int64_t delta) {
    c.current += delta;
    c.peak = std::max(c.peak, c.current);
  }

  Block& find(void* ptr) {
    auto it = live_.find(ptr);
    TRI_ASSERT(it != live_.end(), "pointer not owned by the host allocator");
    return it->second;
  }

  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }
  void release_cached_locked() {
    for (auto& [cls, list] : free_) {
      for (void* p : list) std::free(p);
      stats_.reserved -= static_cast<int64_t>(cls * list.size());
      list.clear();
    }
  }

  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, Block> live_;
  MemoryStats stats_;
};

}  // namespace

Allocator& host_allocator() {
  // Leaked on purpose: tensors in static storage may be destroyed after any static allocator.
  static CachingHostAllocator* instance = new CachingHostAllocator();
  return *instance;
}

}  // namespace trident
