// The product of an input with a frozen quantized weight (quantization/quantized_weight.h, any
// scheme), differentiable in the input: QLoRA's base layer (bitsandbytes' Linear4bit) and
// inference's int8/int4 layers. On the host the weight is dequantized inside the product
// (quantization/quantized_matmul.h), or the scheme's fused kernel runs; on a device it is
// dequantized whole, one layer at a time, into the input's dtype (as bitsandbytes does), then
// one GEMM (a scheme whose weights are the host's only refuses a device, naming itself). The
// weight gets no gradient. Backward rule: in quantized_linear.cc (op "quantized_linear", in the
// op suite).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "quantization/quantized_weight.h"

namespace trident::quantization {

// x (..., in) -> (..., out): x W^T for an (out, in) weight, x W for an (in, out) one (in_out);
// no bias. The weight lives on x's device; the product is computed in x's dtype.
Tensor quantized_linear(const Tensor& x, const std::shared_ptr<const QuantizedWeight>& w, bool in_out);

}  // namespace trident::quantization
