// The names of the wrapper kinds (nn/wrapper.h); the stack itself is header-only templates.
#include "nn/wrapper.h"

namespace trident::nn {

const char* wrapper_kind_name(WrapperKind kind) {
  switch (kind) {
    case WrapperKind::kParallelism: return "parallelism";
    case WrapperKind::kAdapter: return "adapter";
    case WrapperKind::kWeightView: return "weight view";
  }
  return "?";
}

}  // namespace trident::nn
