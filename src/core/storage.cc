#include "core/storage.h"

#include "core/check.h"

namespace trident {

Storage allocate_storage(size_t nbytes, Device device, MemoryCategory category) {
  TRI_CHECK_NOT_IMPLEMENTED(device.is_cpu(), "Device ", device,
                            " is not available in this build (CPU only)");
  return std::make_shared<StorageImpl>(host_allocator().allocate(nbytes, category));
}

Storage allocate_storage(size_t nbytes, Device device) {
  return allocate_storage(nbytes, device, MemoryCategoryGuard::current());
}

}  // namespace trident
