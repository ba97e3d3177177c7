#include "kernels/device/device_kernels.h"

#include <array>

#include "core/check.h"

namespace trident::kernels {
namespace {

std::array<DeviceKernels*, kNumDeviceTypes>& table() {
  static std::array<DeviceKernels*, kNumDeviceTypes> kernels{};
  return kernels;
}

}  // namespace

void register_device_kernels(DeviceType type, DeviceKernels* kernels) { table()[static_cast<size_t>(type)] = kernels; }

DeviceKernels& device_kernels(Device device) {
  DeviceKernels* k = table()[static_cast<size_t>(device.type)];
  TRI_CHECK_NOT_IMPLEMENTED(k != nullptr, "no compute kernels for device ", device,
                            " in this build (the CUDA backend is built with -DTRIDENT_CUDA=ON)");
  return *k;
}

}  // namespace trident::kernels
