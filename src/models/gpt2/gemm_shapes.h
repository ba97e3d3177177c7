// The GEMMs of one GPT-2 training step, for measuring this CPU's GEMM rates at the model's
// shapes (kernels/cpu/gemm_rates.h) and the MFU against them.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm_rates.h"
#include "models/gpt2/config.h"

namespace trident::models::gpt2 {

// The linears' forward and backward GEMMs of a step on B sequences of T tokens (the LM head
// is tied to the token embedding, and runs in the fused loss's host chunks):
// transformer_gemm_shapes(L, C, V, B, T, ops::linear_cross_entropy_chunk_rows(V)).
std::vector<kernels::cpu::GemmShape> gemm_shapes(const GPT2Config& cfg, int64_t B, int64_t T);

}  // namespace trident::models::gpt2
