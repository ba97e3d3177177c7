// The CUDA devices this process sees. Never throws: a machine without a GPU or driver simply
// has none, and says why.
#pragma once

#include <string>

namespace trident::cuda {

int device_count();
bool is_available();
// Why is_available() is false ("cudaGetDeviceCount: no CUDA-capable device is detected"),
// or empty.
std::string unavailable_reason();

}  // namespace trident::cuda
