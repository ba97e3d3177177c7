// Storage: one allocation shared by every view of it, plus a version counter that in-place
// writes bump (autograd uses it to detect a saved tensor modified before backward).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/allocator.h"

namespace trident {

class StorageImpl {
 public:
  explicit StorageImpl(DataPtr data) : data_(std::move(data)) {}
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_.get(); }
  size_t nbytes() const { return data_.nbytes(); }
  Device device() const { return data_.device(); }
  const DataPtr& data_ptr() const { return data_; }
  // For handing this allocation to another storage (Module::to): leaves this one empty.
  DataPtr& mutable_data_ptr() { return data_; }
  // Swaps in another allocation (an empty DataPtr frees it) while every view keeps this
  // storage: ZeRO-3 drops a layer's gathered parameters between uses and gathers them again
  // into a new allocation, under the same tensors that autograd saved (PyTorch's
  // storage().resize_(0) in FSDP). A view of a released storage fails its size check.
  void reset_data(DataPtr data) { data_ = std::move(data); }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  DataPtr data_;
  std::atomic<uint64_t> version_{0};
};

using Storage = std::shared_ptr<StorageImpl>;

// Allocates storage for nbytes on `device` from that device's allocator.
Storage allocate_storage(size_t nbytes, Device device, MemoryCategory category);
Storage allocate_storage(size_t nbytes, Device device);

}  // namespace trident
