// Tensor: a view (shape, strides, offset, dtype) onto shared Storage, plus autograd data.
//
// A Tensor always refers to a valid view: every constructor checks that each element it can
// address lies inside its storage, so there is no "undefined" or half-built tensor. Where a
// tensor may be absent (a gradient not yet computed, an optional bias) the type is
// std::optional<Tensor>. Copying a Tensor copies the handle: both refer to the same view.
//
// This layer knows nothing about differentiation. It stores the autograd fields (leaf flag,
// .grad, the node that produced the tensor, hooks) as plain data; their meaning lives in
// src/autograd. The differentiable operations are free functions in namespace trident
// (autograd/functions.h); the alias-making primitives they build on are in core/views.h.
//
// Thread safety: a Tensor may be read from many threads; writes need external ordering.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace trident {

namespace autograd {
class Node;  // defined in src/autograd/node.h
}

class TensorImpl;

class Tensor {
 public:
  // Wraps a validated impl. Use the factories in core/factory.h to create tensors.
  explicit Tensor(std::shared_ptr<TensorImpl> impl);

  const Shape& shape() const;
  const Strides& strides() const;
  int64_t offset() const;  // in elements
  DType dtype() const;
  Device device() const;
  int dim() const { return shape().size(); }
  int64_t size(int64_t dim) const;     // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype()); }
  bool is_contiguous() const;

  const Storage& storage() const;
  bool shares_storage_with(const Tensor& other) const { return storage() == other.storage(); }
  // Address of element 0 of this view. data_ptr<T>() checks that T matches the dtype.
  void* raw_data() const;
  template <class T>
  T* data_ptr() const {
    TRI_CHECK_TYPE(dtype_of<T>() == dtype(), "data_ptr<", dtype_name(dtype_of<T>()),
                   ">() on a tensor of dtype ", dtype());
    return static_cast<T*>(raw_data());
  }
  // The value of a one-element tensor, converted to double.
  double item() const;

  // In-place writes call this so saved-for-backward copies can detect modification.
  void bump_version() const;
  uint64_t version() const;

  // ---- autograd data (semantics in src/autograd) ----
  // True for a leaf the user marked, or for any result of a recorded operation.
  bool requires_grad() const;
  // Marks a leaf (a tensor not produced by a recorded op) as requiring a gradient.
  // Only floating dtypes can require gradients.
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  const std::optional<Tensor>& grad() const;
  std::optional<Tensor>& mutable_grad();
  void zero_grad() { mutable_grad().reset(); }
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  // Points this leaf at `src`'s data (storage, geometry, dtype), as PyTorch's
  // `param.data = src`: every holder of this tensor (module, optimizer, hooks) sees it, e.g.
  // to switch a model's parameters to bf16. Only for a tensor with no grad_fn; its .grad is
  // dropped when the dtype or shape changes.
  void set_data(const Tensor& src);

  // One-line description: "Tensor(shape=(2, 3), dtype=f32, device=cpu)".
  std::string str() const;
  // The values, row by row (for debugging and small tensors), at most max_elements.
  std::string to_string(int64_t max_elements = 64) const;

  TensorImpl& impl() const { return *impl_; }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

using TensorList = std::vector<Tensor>;

// Called when a leaf's gradient for this backward pass is final (all uses accumulated).
using GradReadyHook = std::function<void(const Tensor& leaf)>;

struct AutogradMeta {
  bool requires_grad = false;                  // leaf flag, set by the user
  std::optional<Tensor> grad;                  // accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;     // producer of a non-leaf
  int output_nr = 0;                           // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;  // a leaf's AccumulateGrad node, if alive
  std::vector<GradReadyHook> grad_ready_hooks;
};

class TensorImpl {
 public:
  // Checks that the view fits in the storage: throws naming shape, strides, offset and size.
  TensorImpl(Storage storage, Shape shape, Strides strides, int64_t offset, DType dtype);

  const Storage& storage() const { return storage_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  AutogradMeta& autograd() { return autograd_; }
  const AutogradMeta& autograd() const { return autograd_; }
  // Takes `src`'s storage and geometry; keeps this impl's autograd data (Tensor::set_data).
  void set_data(const TensorImpl& src);

 private:
  Storage storage_;
  Shape shape_;
  Strides strides_;
  int64_t offset_;
  int64_t numel_;
  DType dtype_;
  AutogradMeta autograd_;
};

// A new tensor viewing the same storage with the given geometry (validated).
Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset);
// Same view of the same storage, with no autograd history (PyTorch's detach()).
Tensor detach(const Tensor& t);

// Validation helpers shared by the ops: throw errors that name `what` and the offending values.
void check_same_dtype(const Tensor& a, const Tensor& b, const char* what);
void check_same_device(const Tensor& a, const Tensor& b, const char* what);
void check_floating(const Tensor& t, const char* what);
void check_dim(const Tensor& t, int ndim, const char* what);

}  // namespace trident
