#include "core/allocator.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

// Note [Freed scratch stays mapped]
// Tensors come from the caching allocator, but kernels' scratch (std::vector: a product's
// quantized activations, packing buffers) comes from malloc, and glibc serves blocks of 128 KB
// and more with a fresh mmap() each time (or trims its heap's top back to the system when they
// are freed), so every such buffer is faulted in page by page, every time. In a VM a page fault
// is costly: a batched int8 prefill (GPT-2, 8 prompts of 128) took 540-640 ms with glibc's
// defaults and 280-340 ms with freed memory kept (Zen 5). So trident sets, once, the
// thresholds that jemalloc and tcmalloc (PyTorch's usual choices) behave like: blocks up to
// 32 MiB (glibc's most) from the heap and no trimming below 1 GiB of free top. A process that
// sets glibc's malloc tunables itself (GLIBC_TUNABLES, MALLOC_*_ environment variables) keeps
// its own.
static void keep_freed_scratch_mapped() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables != nullptr && std::strstr(tunables, "malloc") != nullptr) ||
      std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr)
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

Allocator& host_allocator() {
  // Leaked on purpose: tensors in static storage may be destroyed after any static allocator.
  static CachingAllocator* instance = [] {
    keep_freed_scratch_mapped();
    return new CachingAllocator(std::make_unique<HostMemory>());
  }();
  return *instance;
}

}  // namespace trident
