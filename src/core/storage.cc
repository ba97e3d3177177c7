#include "core/storage.h"

#include "core/check.h"

namespace trident {

Storage allocate_storage(size_t nbytes, Device device, MemoryCategory category) {
  Allocator* allocator = device_allocator(device.type);
  TRI_CHECK_NOT_IMPLEMENTED(allocator != nullptr, "Device ", device,
                            " is not available in this build (no backend registered an allocator for it)");
  return std::make_shared<StorageImpl>(allocator->allocate(nbytes, category));
}

Storage allocate_storage(size_t nbytes, Device device) {
  return allocate_storage(nbytes, device, MemoryCategoryGuard::current());
}

}  // namespace trident
