// Normalization layers over the last dim: LayerNorm (weight 1, bias 0 at init) and RMSNorm.
// Both are NormLayers and carry a stack of NormWrappers (nn/wrapper.h), shared by the two: a
// wrapper sees the weight and the bias when there is one. Without a wrapper a norm is exactly
// its single-device self.
#pragma once

#include "nn/wrapper.h"

namespace trident::nn {

class NormLayer;
class NormWrapper;

// The rest of a norm's stack below one wrapper (nn/wrapper.h's StackCursor).
class NormInner : public StackCursor<NormInner, NormLayer, NormWrapper> {
 public:
  using StackCursor::StackCursor;
  Tensor forward(const Tensor& x, const LayerParams& p) const;
};

class NormWrapper : public Wrapper {
 public:
  virtual Tensor forward(const Tensor& x, const LayerParams& p, const NormInner& inner) const = 0;
};

class NormLayer : public WrappedModule<NormWrapper> {
 public:
  // The single-device normalization with parameters `p` (LayerNorm's bias in p.bias).
  virtual Tensor compute(const Tensor& x, const LayerParams& p) const = 0;

 protected:
  // Through the wrappers when there are any, else compute().
  Tensor run(const Tensor& x, const LayerParams& p) const;
};

class LayerNorm final : public NormLayer {
 public:
  LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::kF32);
  Tensor forward(const Tensor& x) const { return run(x, {weight_, bias_}); }
  Tensor compute(const Tensor& x, const LayerParams& p) const override;

 private:
  Tensor weight_;               // (dim)
  std::optional<Tensor> bias_;  // (dim), always there
  double eps_;
};

class RMSNorm final : public NormLayer {
 public:
  RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::kF32);
  Tensor forward(const Tensor& x) const { return run(x, {weight_}); }
  Tensor compute(const Tensor& x, const LayerParams& p) const override;

 private:
  Tensor weight_;  // (dim)
  double eps_;
};

}  // namespace trident::nn
