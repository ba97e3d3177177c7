#include "models/gpt2/gemm_shapes.h"

namespace trident::models::gpt2 {

std::vector<kernels::cpu::GemmShape> gemm_shapes(const GPT2Config& cfg, int64_t B, int64_t T) {
  return kernels::cpu::transformer_gemm_shapes(cfg.n_layer, cfg.n_embd, cfg.vocab_size, B, T);
}

}  // namespace trident::models::gpt2
