// CachingAllocator: the allocator of every device, over a raw memory source (the host's
// aligned_alloc, cudaMalloc): freed blocks are kept in per-size-class pools and handed out
// again, so a training loop's steady state makes no system allocations (Note [Allocator
// size classes]). Statistics per memory category; out of memory, it frees the cache and
// retries once, then throws naming the request and the allocator's whole state.
//
// Streams: each block remembers the stream it was allocated for, and a freed block is reused
// only for the same stream (PyTorch's CUDA caching allocator's rule), so a kernel still
// running on one stream never sees its memory handed to another. The stream is a per-thread
// setting (StreamGuard); on the host it is always 0.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace trident {

// Where a caching allocator gets and returns memory.
class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // nullptr when the memory is exhausted.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual Device device() const = 0;
  // The bytes this source will hand out in all, when it knows (a device's memory, or a cap
  // such as TRIDENT_CUDA_MEMORY_LIMIT_MB); 0: no known limit (host memory: see /proc). The
  // memory_high rule compares the allocator's reserved bytes with it.
  virtual int64_t limit() const { return 0; }
};

// The stream this thread's allocations are for, while alive (nested guards restore).
class StreamGuard {
 public:
  explicit StreamGuard(uint64_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;
  static uint64_t current();

 private:
  uint64_t previous_;
};

// The size a request is rounded to: up to 64 KiB to 64 B, above to 1/8 of its power of two.
size_t allocator_size_class(size_t nbytes);

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(std::unique_ptr<MemorySource> source);
  // Live blocks at exit belong to static tensors; only cached ones are freed.
  ~CachingAllocator() override;

  DataPtr allocate(size_t nbytes, MemoryCategory category) override;
  void retag(const DataPtr& p, MemoryCategory category) override;
  MemoryCategory category_of(const DataPtr& p) override;
  MemoryStats stats() override;
  void reset_peak_stats() override;
  void empty_cache() override;

 protected:
  void deallocate(void* ptr) override;

 private:
  struct Block {
    size_t requested;
    size_t size_class;
    MemoryCategory category;
    uint64_t stream;
  };
  static void add(MemoryStats::Counter& c, int64_t delta);
  Block& find(void* ptr);
  void release_cached_locked();

  std::unique_ptr<MemorySource> source_;
  std::mutex mu_;
  std::map<std::pair<uint64_t, size_t>, std::vector<void*>> free_;  // (stream, size class) -> blocks
  std::unordered_map<void*, Block> live_;
  MemoryStats stats_;
};

}  // namespace trident
