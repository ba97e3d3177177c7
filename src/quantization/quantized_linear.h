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
#include <optional>

#include "core/tensor.h"
#include "quantization/quantized_weight.h"

namespace trident::quantization {

// x (..., in) -> (..., out): x W^T for an (out, in) weight, x W for an (in, out) one (in_out),
// plus `bias` (out) when given. The weight lives on x's device; the product is computed in x's
// dtype.
//
// Note [The bias in the quantized product]
// A layer's bias used to be a separate add over the product's output: a pass over (M, out) fp32
// values, memory-bound, 48 of them per GPT-2 forward (21 of a batched int8 prefill's 336 ms at 8
// prompts of 128 on Zen 5). A bias that takes no gradient (a quantized model's; a frozen base's)
// in f32 on the host is added by the product instead, as each thread finishes its block of the
// output, while the block is in its caches. It is the same single rounded addition per output, so
// the result is bit for bit the separate add's (a test checks both). A bias that takes a gradient,
// or on a device, or in another dtype still goes through the add op.
Tensor quantized_linear(const Tensor& x, const std::shared_ptr<const QuantizedWeight>& w, bool in_out,
                        const std::optional<Tensor>& bias = std::nullopt);

}  // namespace trident::quantization
