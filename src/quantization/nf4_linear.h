// The product of an input with a frozen NF4 weight, differentiable in the input: QLoRA's base
// layer (bitsandbytes' Linear4bit). The weight is dequantized inside the product both ways:
// on the host tile by tile (quantization/nf4_matmul.h), on a device whole, one layer at a time,
// into the input's dtype (as bitsandbytes does), then one GEMM. The weight gets no gradient.
// Backward rule: in nf4_linear.cc (op "nf4_linear", in the op suite).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "quantization/nf4.h"

namespace trident::quantization {

// x (..., in) -> (..., out): x W^T for an (out, in) weight, x W for an (in, out) one (in_out);
// no bias. The weight lives on x's device; the product is computed in x's dtype.
Tensor nf4_linear(const Tensor& x, const std::shared_ptr<const Nf4Weight>& w, bool in_out);

}  // namespace trident::quantization
