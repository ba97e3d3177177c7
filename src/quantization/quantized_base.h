// A frozen base in NF4, applied to a model from outside it (QLoRA): every frozen linear layer
// (nn::Linear, GPT-2's Conv1D) but the skipped ones gets its weight quantized
// (quantization/nf4.h) and a wrapper of the weight-view kind (quantization/quantized_view.h)
// that computes the layer's product from the NF4 weight; the weight's own memory is released. The model, its adapters and the parallel styles above the view see a plain layer.
//
// Note [Where a quantized base comes from]
// Quantize after the weights are final for this rank: loaded (train.init_from), split (tensor
// parallelism) and cast (precision), so that each rank quantizes exactly the shard it computes
// with. The parameter stays in the module tree with its shape (a checkpoint, the placement
// table and the parameter count still see it), but its storage is empty: reading it fails its
// size check. A checkpoint writes dequantized() in its place, exactly the values the run
// computed with; a resume or a rollback rebuilds the quantized base from where it came from
// (init_from, or the seeded initialization) and checks it against the checkpoint's values
// rather than requantizing them (train/trainer_checkpoint.cc).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "quantization/nf4.h"
#include "quantization/quantization_options.h"

namespace trident::quantization {

struct QuantizedLayer {
  std::string param;  // the weight's name ("h.0.attn.c_attn.weight")
  std::shared_ptr<const QuantizedWeight> weight;
};

class QuantizedBase {
 public:
  explicit QuantizedBase(std::vector<QuantizedLayer> layers) : layers_(std::move(layers)) {}
  bool contains(const std::string& param) const;
  // The weight's values as the run computes with them, in its dtype and shape, on its device.
  Tensor dequantized(const std::string& param) const;
  const std::vector<QuantizedLayer>& layers() const { return layers_; }
  // Weights quantized, and the bytes their codes and scales hold.
  int64_t params() const;
  int64_t bytes() const;

 private:
  std::vector<QuantizedLayer> layers_;
};

// Quantizes every frozen linear layer of `model` whose weight `here` admits (the parameters this
// rank holds) and options.skip_modules does not name; adds the views and releases the weights.
// Throws naming the item or layer when a skip item matches no layer, when no layer is frozen
// (the base trains: use [lora] or train.freeze), or when a weight's memory is shared with other
// tensors.
QuantizedBase quantize_base(nn::Module& model, const QuantizationOptions& options,
                            const std::function<bool(const std::string& param)>& here);

}  // namespace trident::quantization
