// Embedding: a lookup table (num, dim); forward gathers rows for integer indices.
#pragma once

#include "nn/module.h"

namespace trident::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, DType dtype = DType::kF32);
  Tensor forward(const Tensor& indices) const;  // (...) -> (..., dim)
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;  // (num, dim)
};

}  // namespace trident::nn
