// Where a tensor's storage lives: the host, a CUDA GPU (kernels/cuda), or a backend that is not
// part of trident (kPrivateUse, as PyTorch's PrivateUse1): the tests register an emulated device
// there, so every device code path runs on machines without a GPU.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace trident {

enum class DeviceType : uint8_t { kCPU, kCUDA, kPrivateUse };
inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // GPU ordinal; always 0 on the CPU

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  static Device private_use(int index = 0) { return {DeviceType::kPrivateUse, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const {
    if (is_cpu()) return "cpu";
    return (is_cuda() ? "cuda:" : "privateuse:") + std::to_string(index);
  }
  friend bool operator==(const Device&, const Device&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace trident
