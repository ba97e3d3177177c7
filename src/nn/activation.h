// The activation a linear layer can apply to its own output, so that the layer runs both as
// one op (one GEMM with a GELU epilogue on a device: autograd/functions/linalg.h).
#pragma once

namespace trident::nn {

enum class Activation {
  kNone,
  kGeluTanh,  // GELU, tanh approximation (GPT-2's)
};

}  // namespace trident::nn
