// A quantized weight: one interface for every scheme (NF4, GGUF's Q8_0 and Q4_0, and any later
// one), so that the view that computes a layer's product from it (quantization/quantized_view.h),
// the generic tiled product (quantization/quantized_matmul.h), the byte counts and the files
// (loading/quantized_dir.h) are written once, not per scheme.
//
// A scheme provides: quantization from a float weight (its own factory, listed in
// quantization/scheme.h), dequantization of a range of the flattened weight, its bytes, the
// tensors that hold it (for files), and optionally its own product kernel for the cases it is
// fast at (decode's few rows: Q8_0's and Q4_0's fused matrix-vector products). Everything else
// falls back to the generic product, which dequantizes a tile of rows at a time into the
// input's dtype and calls the GEMM.
//
// Not here: which layers are quantized (quantization/quantize_layers.h, QLoRA's
// quantized_base.h) and how a directory of them is written and read (loading/).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace trident::quantization {

// One tensor a scheme stores, and what it must be: a file's tensor "<parameter>.<role>" is checked
// against it before the weight is rebuilt from it.
struct StoredSpec {
  std::string role;  // "codes", "scales", ...
  DType dtype;
  Shape shape;
};

class QuantizedWeight {
 public:
  virtual ~QuantizedWeight() = default;

  // The scheme's name as quantization/scheme.h lists it ("nf4", "int8", "int4").
  virtual std::string scheme() const = 0;
  // The shape and dtype quantized from: dequantize() returns them.
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.product(); }
  virtual Device device() const = 0;
  // The bytes its codes and scales hold.
  virtual int64_t bytes() const = 0;

  // Elements [begin, end) of the flattened weight into `out` (end - begin contiguous elements of
  // the floating `dtype`, on device()). Throws naming the range when it is outside the weight.
  virtual void dequantize_into(int64_t begin, int64_t end, DType dtype, void* out) const = 0;
  Tensor dequantize(int64_t begin, int64_t end, DType dtype) const;
  // The whole weight in dtype() and shape(), on device().
  Tensor dequantize() const;

  // A copy whose tensors live on `device` (a scheme whose kernels are the host's refuses
  // others, naming the scheme).
  virtual std::shared_ptr<const QuantizedWeight> to(Device device) const = 0;

  // The tensors that hold it, by role ("codes", "scales", ...), in a fixed order: what a file
  // stores under "<parameter>.<role>" (Note [Quantized directories] in loading/quantized_dir.h).
  // The scheme's layout() says what each must be for a given shape.
  virtual std::vector<std::pair<std::string, Tensor>> stored() const = 0;

  // y (M, rows) = x (M, cols) W^T (+ bias (rows), in dtype, when not null) for this weight as an
  // (rows, cols) matrix, by the scheme's own kernel, when it has one for `dtype` and M; false
  // (nothing written) sends the caller to the generic tiled product. x and y are row-major and
  // contiguous, on the host. The bias is one rounded addition per output, as a separate add.
  virtual bool fused_product(DType dtype, const void* x, int64_t M, void* y, const void* bias) const;

 protected:
  QuantizedWeight(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {}
  // Checks 0 <= begin <= end <= numel() (naming the scheme).
  void check_range(int64_t begin, int64_t end) const;

 private:
  Shape shape_;
  DType dtype_;
};

}  // namespace trident::quantization
