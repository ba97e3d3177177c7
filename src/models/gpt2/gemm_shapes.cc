#include "models/gpt2/gemm_shapes.h"

#include "ops/loss.h"

namespace trident::models::gpt2 {

std::vector<kernels::cpu::GemmShape> gemm_shapes(const GPT2Config& cfg, int64_t B, int64_t T) {
  return kernels::cpu::transformer_gemm_shapes(cfg.n_layer, cfg.n_embd, cfg.vocab_size, B, T,
                                              ops::linear_cross_entropy_chunk_rows(cfg.vocab_size, false));
}

}  // namespace trident::models::gpt2
