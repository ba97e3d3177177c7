// Memory: DataPtr (a uniquely owned allocation with its deleter and device) and the caching
// host allocator every CPU tensor is allocated from.
//
// The caching allocator keeps freed blocks in size-class free lists and hands them out again,
// so a training step in steady state makes no calls to the system allocator (and touches no
// fresh pages). Blocks are 64-byte aligned. It keeps statistics that later layers read:
// bytes in use (requested sizes), peak, bytes reserved from the system, allocation count,
// and the same per MemoryCategory (parameter, gradient, optimizer state, activation, other).
//
// Thread safety: all functions may be called from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"

namespace trident {

// kGatheredParameter: full copies of sharded parameters that ZeRO-3 gathers for one layer's
// forward or backward and frees after it (not a model state: the shards are kParameter).
enum class MemoryCategory : uint8_t { kOther, kParameter, kGradient, kOptimizerState, kActivation, kGatheredParameter };
inline constexpr int kNumMemoryCategories = 6;
const char* memory_category_name(MemoryCategory category);

// Allocations made on this thread while a guard is alive are tagged with its category
// (unless an explicit category is given). Guards nest.
class MemoryCategoryGuard {
 public:
  explicit MemoryCategoryGuard(MemoryCategory category);
  ~MemoryCategoryGuard();
  MemoryCategoryGuard(const MemoryCategoryGuard&) = delete;
  MemoryCategoryGuard& operator=(const MemoryCategoryGuard&) = delete;
  static MemoryCategory current();

 private:
  MemoryCategory previous_;
};

class Allocator;

// A uniquely owned allocation: pointer, size, device, and the allocator that frees it.
class DataPtr {
 public:
  DataPtr() = default;
  DataPtr(void* ptr, size_t nbytes, Device device, Allocator* owner)
      : ptr_(ptr), nbytes_(nbytes), device_(device), owner_(owner) {}
  DataPtr(DataPtr&& other) noexcept { *this = std::move(other); }
  DataPtr& operator=(DataPtr&& other) noexcept;
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { reset(); }

  void* get() const { return ptr_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  Allocator* owner() const { return owner_; }
  void reset();

 private:
  void* ptr_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* owner_ = nullptr;
};

struct MemoryStats {
  struct Counter {
    int64_t current = 0;
    int64_t peak = 0;
  };
  Counter in_use;                                            // requested bytes of live blocks
  std::array<Counter, kNumMemoryCategories> by_category;     // in_use split by category
  int64_t reserved = 0;        // bytes held from the system: live + cached blocks
  int64_t peak_reserved = 0;
  int64_t limit = 0;           // bytes the memory source will hand out in all (0: not known)
  int64_t num_allocs = 0;      // calls to allocate()
  int64_t num_system_allocs = 0;  // allocations that missed the cache
  const Counter& category(MemoryCategory c) const { return by_category[static_cast<int>(c)]; }
  std::string str() const;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws trident::Error (naming the size and the allocator's state) when out of memory.
  virtual DataPtr allocate(size_t nbytes, MemoryCategory category) = 0;
  DataPtr allocate(size_t nbytes) { return allocate(nbytes, MemoryCategoryGuard::current()); }
  // Moves a live allocation's bytes to another category (e.g. a backward temporary that
  // becomes a parameter's .grad).
  virtual void retag(const DataPtr& ptr, MemoryCategory category) = 0;
  virtual MemoryCategory category_of(const DataPtr& ptr) = 0;
  virtual MemoryStats stats() = 0;
  virtual void reset_peak_stats() = 0;
  // Returns cached blocks to the system.
  virtual void empty_cache() = 0;

 protected:
  friend class DataPtr;
  virtual void deallocate(void* ptr) = 0;
};

// The process-wide caching allocator for host memory (core/caching_allocator.h).
Allocator& host_allocator();
// The allocator of a device type: the host's, or the one its backend registered (the CUDA
// backend registers its own, kernels/cuda); nullptr when this build has none.
Allocator* device_allocator(DeviceType type);
void register_device_allocator(DeviceType type, Allocator* allocator);
// Page-locked host memory, which devices copy to and from at full speed and asynchronously:
// registered by a device backend (CUDA: cudaHostAlloc); the plain host allocator when none is.
Allocator& pinned_host_allocator();
void register_pinned_host_allocator(Allocator* allocator);

}  // namespace trident
