// 4-bit NormalFloat (NF4) weights, as QLoRA (Dettmers et al. 2023) stores a frozen base: the
// weight, flattened in its stored order, is cut into blocks of 64; each block keeps its absolute
// maximum (absmax) and each element the index of the nearest of NF4's 16 values (quantiles of
// N(0, 1), scaled to [-1, 1]) to element / absmax. Double quantization stores the blocks'
// absmax values themselves in 8 bits, with one fp32 scale per 256 blocks, so that a parameter
// costs 4 + 8/64 + 32/16384 bits, about 0.516 bytes (0.5625 bytes without it).
//
// Note [Idempotent NF4]
// Quantizing a dequantized weight gives the same codes, so the same values, bit for bit: the
// element equal to a block's absmax gets code +-1, which dequantizes to the block's scale
// exactly, so the dequantized block's absmax is that scale; likewise the block whose absmax is
// its group's largest gets the 8-bit code 255, so the group's scale comes back exactly. That is
// why the scales' second quantization is linear and unsigned (absmax / group max, rounded to
// 1/255) rather than QLoRA's signed 8-bit float of absmax minus its mean: the mean of the
// dequantized values is not the mean of the originals, and a requantization drifts. The cost
// is the resolution of small scales: a block whose absmax is a tenth of its group's largest is
// stored to 2% (QLoRA's map: ~1%), against NF4's own error of 5-10% per element. A checkpoint
// holds the dequantized weight, and any reader of it (sample, eval, export, a resume) gets
// exactly the values the run computed with.
//
// Storage (core/nf4_layout.h): tensors of trident's dtypes, so that they are counted in the
// memory categories and move to a device as any tensor does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/nf4_layout.h"
#include "core/tensor.h"
#include "quantization/quantized_weight.h"

namespace trident::quantization {

class Nf4Weight final : public QuantizedWeight {
 public:
  // Quantizes `w` (any floating dtype, read in its stored order on the host; a device tensor is
  // copied there first). The result lives on the host (to() moves it). Throws naming `name`
  // when an element is not finite.
  static Nf4Weight quantize(const Tensor& w, bool double_quant, const std::string& name = "weight");
  // The tensors stored() has for a weight of `numel` elements.
  static std::vector<StoredSpec> layout(int64_t numel, bool double_quant);
  // From tensors of layout()'s dtypes and shapes, in its order (a file's; the caller checked them).
  static Nf4Weight from_stored(const Shape& shape, DType dtype, bool double_quant, const std::vector<Tensor>& stored);

  std::string scheme() const override { return "nf4"; }
  bool double_quant() const { return double_quant_; }
  Device device() const override { return codes_.device(); }
  // The bytes the codes and scales hold.
  int64_t bytes() const override;
  // What bytes() is for a weight of `numel` elements, without quantizing one (the planner's
  // QLoRA base, planner/memory_model.h).
  static int64_t bytes_for(int64_t numel, bool double_quant);
  // The addresses the kernels read (core/nf4_layout.h).
  Nf4Data data() const;
  std::shared_ptr<const QuantizedWeight> to(Device device) const override;
  // On device() (ops/nf4.h).
  void dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const override;
  std::vector<std::pair<std::string, Tensor>> stored() const override;

 private:
  Nf4Weight(Shape shape, DType dtype, Tensor codes) : QuantizedWeight(std::move(shape), dtype), codes_(std::move(codes)) {}
  bool double_quant_ = true;
  Tensor codes_;                        // u16, four 4-bit codes each
  std::optional<Tensor> absmax_codes_;  // double_quant: u16, two 8-bit codes each
  std::optional<Tensor> group_scales_;  // double_quant: f32, one per kNf4ScaleGroup blocks
  std::optional<Tensor> absmax_;        // !double_quant: f32, one per block
};

}  // namespace trident::quantization
