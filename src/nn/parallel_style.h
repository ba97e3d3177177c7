// Parallel styles: how a plan applied from outside the model (parallel/tensor_parallel.h)
// runs a layer whose parameters it has sharded, as torchtitan's ParallelStyle
// (ColwiseParallel, RowwiseParallel, ...). A layer with a style calls it, with its parameters
// (now this rank's shards), instead of its single-device computation. Models never set or
// see styles; without one a layer is exactly its single-device self.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "nn/activation.h"

namespace trident::nn {

class Conv1DStyle {
 public:
  virtual ~Conv1DStyle() = default;
  // The layer's y = act(x W + b), with W (in, out) and b (out) this rank's shards.
  virtual Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act) const = 0;
};

// nn::Linear (torch.nn.Linear's (out, in) weight; the bias optional).
class LinearStyle {
 public:
  virtual ~LinearStyle() = default;
  // y = x W^T + b.
  virtual Tensor forward(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) const = 0;
  // As an LM head: mean cross-entropy of x W^T against targets (ignore_index -1), fused.
  virtual Tensor loss(const Tensor& x, const Tensor& weight, const Tensor& targets) const = 0;
};

class LayerNormStyle {
 public:
  virtual ~LayerNormStyle() = default;
  virtual Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) const = 0;
};

class RMSNormStyle {
 public:
  virtual ~RMSNormStyle() = default;
  virtual Tensor forward(const Tensor& x, const Tensor& weight, double eps) const = 0;
};

class EmbeddingStyle {
 public:
  virtual ~EmbeddingStyle() = default;
  // Rows of the table for integer ids: (...) -> (..., dim).
  virtual Tensor lookup(const Tensor& ids, const Tensor& weight) const = 0;
  // The table as a tied output head: logits h W^T over the whole vocabulary.
  virtual Tensor logits(const Tensor& h, const Tensor& weight) const = 0;
  // Mean cross-entropy of the head's logits against targets (ignore_index -1), fused.
  virtual Tensor loss(const Tensor& h, const Tensor& weight, const Tensor& targets) const = 0;
};

}  // namespace trident::nn
