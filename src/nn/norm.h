// Normalization layers over the last dim: LayerNorm (weight 1, bias 0 at init) and RMSNorm.
#pragma once

#include <memory>

#include "nn/module.h"
#include "nn/parallel_style.h"

namespace trident::nn {

class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::kF32);
  Tensor forward(const Tensor& x) const;
  // Set by a parallelism plan (nn/parallel_style.h).
  void set_style(std::shared_ptr<const LayerNormStyle> style) { style_ = std::move(style); }

 private:
  Tensor weight_, bias_;  // (dim)
  double eps_;
  std::shared_ptr<const LayerNormStyle> style_;
};

class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::kF32);
  Tensor forward(const Tensor& x) const;
  // Set by a parallelism plan (nn/parallel_style.h).
  void set_style(std::shared_ptr<const RMSNormStyle> style) { style_ = std::move(style); }

 private:
  Tensor weight_;  // (dim)
  double eps_;
  std::shared_ptr<const RMSNormStyle> style_;
};

}  // namespace trident::nn
