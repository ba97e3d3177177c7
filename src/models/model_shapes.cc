#include "models/model_shapes.h"

#include "models/causal_lm.h"

namespace trident::models {

int64_t ParameterShape::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ParameterShape::numel_on_rank(int64_t tp) const {
  if (split_dim < 0 || tp == 1 || (split_heads > 0 && tp > split_heads)) return numel();
  const int64_t dim = shape[static_cast<size_t>(split_dim)], block = dim / split_blocks;
  return numel() / dim * split_blocks * ((block + tp - 1) / tp);
}

bool ModelShapes::is_sparse(int64_t block) const {
  for (int64_t b : sparse_layers)
    if (b == block) return true;
  return false;
}

int64_t ModelShapes::num_parameters() const {
  int64_t n = 0;
  for (const ParameterShape& p : parameters) n += p.numel();
  return n;
}

int64_t ModelShapes::parameters_on_rank(int64_t tp, int64_t begin, int64_t end, bool embedding, bool head) const {
  int64_t n = 0;
  for (const ParameterShape& p : parameters) {
    const bool here = (p.block >= begin && p.block < end) || (p.block == CausalLM::kEmbedding && embedding) ||
                      (p.block == CausalLM::kHead && head);
    if (!here) continue;
    n += p.numel_on_rank(tp);
  }
  return n;
}

int64_t matmul_flops_per_token(const std::vector<std::pair<int64_t, int64_t>>& matmuls) {
  int64_t f = 0;
  for (const auto& [in, out] : matmuls) f += 2 * in * out;
  return f;
}

}  // namespace trident::models
