// Linear layers.
//   Linear: y = x W^T + b with W (out, in), as torch.nn.Linear.
//   Conv1D: y = x W + b with W (in, out), Hugging Face's GPT-2 layout, so GPT-2 checkpoints
//           load and save without transposing. Both run as one GEMM with the bias (and an
//           activation) fused; Conv1D hands BLAS the transposed view of W (no copy).
// Both are LinearLayers: they carry a stack of LinearWrappers (nn/wrapper.h), shared by the two
// since a wrapper sees the product, not the weight's layout (the styles that split the weight
// know which layer they split: parallel/tp_styles.cc). Without a wrapper a layer is exactly its
// single-device self.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/activation.h"
#include "nn/wrapper.h"

namespace trident::nn {

// What a caller asks of a linear layer; a wrapper may ask less of the layers below it and
// finish the rest itself (a row-parallel one asks for the product without the bias and adds
// the bias once, after the ranks' partial products are summed; an adapter asks for the
// product without the activation, adds its own, then applies the activation).
struct LinearCall {
  bool bias = true;                    // add the bias (when the layer has one)
  Activation act = Activation::kNone;  // applied to the output, fused into the GEMM
};

class LinearLayer;
class LinearWrapper;

// The rest of a linear layer's stack below one wrapper (nn/wrapper.h's StackCursor).
class LinearInner : public StackCursor<LinearInner, LinearLayer, LinearWrapper> {
 public:
  using StackCursor::StackCursor;
  // act(x W + b) with the parameters `p` (in the layer's layout).
  Tensor forward(const Tensor& x, const LayerParams& p, const LinearCall& call = {}) const;
  // As an LM head: the mean cross-entropy of forward(x) against targets (ignore_index -1).
  Tensor loss(const Tensor& x, const LayerParams& p, const Tensor& targets) const;
};

// Note [Adapter factors]
// An adapter that adds a low-rank product to the layer's (LoRA's B A x) keeps its factors as
// child modules of the layer (linear layers: "lora_A", "lora_B") and names them here, with the
// side of the layer each faces: kInput reads the layer's input (its input features are the
// layer's), kOutput produces the layer's output (its output features are the layer's). That is
// all a strategy that splits the layer needs to split the factors alike, without knowing the
// adapter (parallel/tensor_parallel.cc: the factor on the split side is split with the layer, the
// other is replicated and its gradient summed over the ranks).
enum class FactorSide { kInput, kOutput };
struct AdapterFactor {
  std::string child;  // the factor's module, a child of the layer ("lora_A")
  FactorSide side;
};

class LinearWrapper : public Wrapper {
 public:
  // An adapter's factors (Note [Adapter factors]); none for other wrappers.
  virtual std::vector<AdapterFactor> factors() const { return {}; }
  virtual Tensor forward(const Tensor& x, const LayerParams& p, const LinearCall& call,
                         const LinearInner& inner) const = 0;
  // The loss of forward()'s logits: cross_entropy(forward(x)), so that a wrapper that changes
  // the output is never bypassed by the fused loss of the layers below it. A wrapper that
  // keeps the output, or has a loss of its own (the vocabulary-parallel head), overrides it.
  virtual Tensor loss(const Tensor& x, const LayerParams& p, const Tensor& targets, const LinearInner& inner) const;
};

// What Linear and Conv1D share: the wrapper stack and the own computations its bottom runs.
class LinearLayer : public WrappedModule<LinearWrapper> {
 public:
  // The single-device act(x W + b) with parameters `p`.
  virtual Tensor compute(const Tensor& x, const LayerParams& p, const LinearCall& call) const = 0;
  // As an LM head: linear_cross_entropy (the logits never exist). Only Linear is one.
  virtual Tensor compute_loss(const Tensor& x, const LayerParams& p, const Tensor& targets) const;

 protected:
  // Through the wrappers when there are any, else compute().
  Tensor run(const Tensor& x, const LayerParams& p, const LinearCall& call) const;
  // act(x w^T + b) for w (out, in), the bias as `call` asks.
  static Tensor product(const Tensor& x, const Tensor& w, const LayerParams& p, const LinearCall& call);
};

class Linear final : public LinearLayer {
 public:
  Linear(int64_t in, int64_t out, bool bias, DType dtype = DType::kF32);
  Tensor forward(const Tensor& x) const;
  // As an LM head: mean cross-entropy of forward(x) (no bias) against targets (ignore_index
  // -1), without ever holding the logits (linear_cross_entropy) unless a wrapper changes them.
  // targets x's leading shape or (N).
  Tensor loss(const Tensor& x, const Tensor& targets) const;
  const Tensor& weight() const { return weight_; }
  const std::optional<Tensor>& bias() const { return bias_; }

  Tensor compute(const Tensor& x, const LayerParams& p, const LinearCall& call) const override;
  Tensor compute_loss(const Tensor& x, const LayerParams& p, const Tensor& targets) const override;

 private:
  Tensor weight_;  // (out, in)
  std::optional<Tensor> bias_;  // (out)
};

class Conv1D final : public LinearLayer {
 public:
  Conv1D(int64_t in, int64_t out, DType dtype = DType::kF32);
  // x (..., in) -> act(x W + b) (..., out); the activation fused into the layer's GEMM.
  Tensor forward(const Tensor& x, Activation act = Activation::kNone) const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return *bias_; }

  Tensor compute(const Tensor& x, const LayerParams& p, const LinearCall& call) const override;

 private:
  Tensor weight_;  // (in, out)
  std::optional<Tensor> bias_;  // (out), always there
};

}  // namespace trident::nn
