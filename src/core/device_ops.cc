#include "core/device_ops.h"

#include <array>

namespace trident {
namespace {

std::array<DeviceOps, 2>& table() {
  static std::array<DeviceOps, 2> ops{};
  return ops;
}

}  // namespace

void register_device_ops(DeviceType type, const DeviceOps& ops) { table()[static_cast<size_t>(type)] = ops; }

const DeviceOps* device_ops(DeviceType type) {
  const DeviceOps& ops = table()[static_cast<size_t>(type)];
  return ops.copy != nullptr ? &ops : nullptr;
}

}  // namespace trident
