// Linear layers.
//   Linear: y = x W^T + b with W (out, in), as torch.nn.Linear.
//   Conv1D: y = x W + b with W (in, out), Hugging Face's GPT-2 layout, so GPT-2 checkpoints
//           load and save without transposing. Both run as one GEMM with the bias fused;
//           Conv1D hands BLAS the transposed view of W (no copy).
#pragma once

#include <optional>

#include <memory>

#include "core/rng.h"
#include "nn/module.h"
#include "nn/parallel_style.h"

namespace trident::nn {

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias, DType dtype = DType::kF32);
  Tensor forward(const Tensor& x) const;
  // As an LM head: mean cross-entropy of forward(x) (no bias) against targets (ignore_index
  // -1), without ever holding the logits (linear_cross_entropy). targets x's leading shape or (N).
  Tensor loss(const Tensor& x, const Tensor& targets) const;
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }
  // Set by a parallelism plan that shards this layer (nn/parallel_style.h).
  void set_style(std::shared_ptr<const LinearStyle> style) { style_ = std::move(style); }

 private:
  Tensor weight_;  // (out, in)
  std::optional<Tensor> bias_;  // (out)
  std::shared_ptr<const LinearStyle> style_;
};

class Conv1D : public Module {
 public:
  Conv1D(int64_t in, int64_t out, DType dtype = DType::kF32);
  // x (..., in) -> act(x W + b) (..., out); the activation fused into the layer's GEMM.
  Tensor forward(const Tensor& x, Activation act = Activation::kNone) const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  // Set by a parallelism plan that shards this layer (nn/parallel_style.h).
  void set_style(std::shared_ptr<const Conv1DStyle> style) { style_ = std::move(style); }

 private:
  Tensor weight_;  // (in, out)
  Tensor bias_;    // (out)
  std::shared_ptr<const Conv1DStyle> style_;
};

}  // namespace trident::nn
