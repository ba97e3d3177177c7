#include "core/allocator.h"

#include <cstdlib>
#include <sstream>
#include <utility>

#include "core/caching_allocator.h"
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

// Host memory, 64-byte aligned (a cache line; AVX-512 loads).
class HostMemory final : public MemorySource {
 public:
  void* allocate(size_t nbytes) override { return std::aligned_alloc(64, nbytes); }
  void free(void* ptr) override { std::free(ptr); }
  Device device() const override { return Device::cpu(); }
};

std::array<Allocator*, kNumDeviceTypes>& device_allocators() {
  static std::array<Allocator*, kNumDeviceTypes> table{};
  return table;
}

}  // namespace

void register_device_allocator(DeviceType type, Allocator* allocator) {
  device_allocators()[static_cast<size_t>(type)] = allocator;
}

Allocator* device_allocator(DeviceType type) {
  return type == DeviceType::kCPU ? &host_allocator() : device_allocators()[static_cast<size_t>(type)];
}

namespace {
Allocator*& pinned_slot() {
  static Allocator* pinned = nullptr;
  return pinned;
}
}  // namespace

void register_pinned_host_allocator(Allocator* allocator) { pinned_slot() = allocator; }

Allocator& pinned_host_allocator() { return pinned_slot() != nullptr ? *pinned_slot() : host_allocator(); }

Allocator& host_allocator() {
  // Leaked on purpose: tensors in static storage may be destroyed after any static allocator.
  static CachingAllocator* instance = new CachingAllocator(std::make_unique<HostMemory>());
  return *instance;
}

}  // namespace trident
