#include "core/device_ops.h"

#include <array>

namespace trident {
namespace {

std::array<DeviceOps, kNumDeviceTypes>& table() {
  static std::array<DeviceOps, kNumDeviceTypes> ops{};
  return ops;
}

}  // namespace

void register_device_ops(DeviceType type, const DeviceOps& ops) { table()[static_cast<size_t>(type)] = ops; }

void synchronize(Device device) {
  if (device.is_cpu()) return;
  const DeviceOps* ops = device_ops(device.type);
  if (ops != nullptr && ops->synchronize != nullptr) ops->synchronize();
}

void profiler_range(Device device, bool start) {
  if (device.is_cpu()) return;
  const DeviceOps* ops = device_ops(device.type);
  if (ops != nullptr && ops->profiler_range != nullptr) ops->profiler_range(start);
}

const DeviceOps* device_ops(DeviceType type) {
  const DeviceOps& ops = table()[static_cast<size_t>(type)];
  return ops.copy != nullptr ? &ops : nullptr;
}

}  // namespace trident
