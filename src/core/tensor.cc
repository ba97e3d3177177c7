#include "core/tensor.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/copy.h"

namespace trident {

TensorImpl::TensorImpl(Storage storage, Shape shape, Strides strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      shape_(shape),
      strides_(strides),
      offset_(offset),
      numel_(shape.product()),
      dtype_(dtype) {
  TRI_ASSERT(storage_ != nullptr, "tensor without storage");
  TRI_CHECK(shape_.size() == strides_.size(), "Tensor shape ", shape_, " and strides ", strides_,
            " have different lengths");
  TRI_CHECK(offset_ >= 0, "Tensor offset must be >= 0, got ", offset_);
  int64_t last = offset_;
  for (int i = 0; i < shape_.size(); ++i) {
    TRI_CHECK(shape_[i] >= 0, "Tensor shape ", shape_, " has a negative size at dim ", i);
    TRI_CHECK(strides_[i] >= 0, "Tensor strides ", strides_, " have a negative stride at dim ", i,
              " (negative strides are not supported)");
    if (shape_[i] > 0) last += (shape_[i] - 1) * strides_[i];
  }
  const int64_t capacity = static_cast<int64_t>(storage_->nbytes() / element_size(dtype_));
  TRI_CHECK(numel_ == 0 || last < capacity, "View with shape ", shape_, ", strides ", strides_,
            " and offset ", offset_, " reaches element ", last, " but the storage holds only ",
            capacity, " elements of ", dtype_);
}

void TensorImpl::set_data(const TensorImpl& src) {
  storage_ = src.storage_;
  shape_ = src.shape_;
  strides_ = src.strides_;
  offset_ = src.offset_;
  numel_ = src.numel_;
  dtype_ = src.dtype_;
}

Tensor::Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {
  TRI_ASSERT(impl_ != nullptr, "Tensor built from a null impl");
}

const Shape& Tensor::shape() const { return impl_->shape(); }
const Strides& Tensor::strides() const { return impl_->strides(); }
int64_t Tensor::offset() const { return impl_->offset(); }
DType Tensor::dtype() const { return impl_->dtype(); }
Device Tensor::device() const { return impl_->storage()->device(); }
int64_t Tensor::numel() const { return impl_->numel(); }
const Storage& Tensor::storage() const { return impl_->storage(); }

int64_t Tensor::size(int64_t d) const { return shape()[normalize_dim(d, dim(), "Tensor::size")]; }
int64_t Tensor::stride(int64_t d) const {
  return strides()[normalize_dim(d, dim(), "Tensor::stride")];
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(storage()->data()) + offset() * element_size(dtype());
}

double Tensor::item() const {
  TRI_CHECK(numel() == 1, "item() needs a tensor with one element; got shape ", shape());
  if (!device().is_cpu()) return core::to_device(*this, Device::cpu()).item();
  Tensor c = core::cast(*this, DType::kF64);
  return *c.data_ptr<double>();
}

void Tensor::bump_version() const { storage()->bump_version(); }
uint64_t Tensor::version() const { return storage()->version(); }

bool Tensor::requires_grad() const {
  return impl_->autograd().requires_grad || impl_->autograd().grad_fn != nullptr;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  TRI_CHECK(is_leaf(), "set_requires_grad can only change leaf tensors; this tensor is the "
                       "result of a recorded operation (use detach() first)");
  TRI_CHECK_TYPE(!requires_grad || is_floating(dtype()),
                 "Only floating tensors can require gradients; got dtype ", dtype());
  impl_->autograd().requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const { return impl_->autograd().grad_fn == nullptr; }
const std::optional<Tensor>& Tensor::grad() const { return impl_->autograd().grad; }
std::optional<Tensor>& Tensor::mutable_grad() { return impl_->autograd().grad; }
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const { return impl_->autograd().grad_fn; }

void Tensor::set_data(const Tensor& src) {
  TRI_CHECK(grad_fn() == nullptr, "set_data: ", str(), " was produced by a recorded op; only a leaf's data can be replaced");
  TRI_CHECK(!requires_grad() || is_floating(src.dtype()), "set_data: a tensor that requires grad needs floating data, got ",
            src.dtype());
  if (grad().has_value() && (src.dtype() != dtype() || !(src.shape() == shape()))) mutable_grad().reset();
  impl_->set_data(src.impl());
}

std::string Tensor::str() const {
  std::ostringstream os;
  os << "Tensor(shape=" << shape() << ", dtype=" << dtype() << ", device=" << device();
  if (requires_grad()) os << ", requires_grad";
  os << ")";
  return os.str();
}

std::string Tensor::to_string(int64_t max_elements) const {
  Tensor c = core::cast(*this, DType::kF64);
  const double* p = c.data_ptr<double>();
  std::ostringstream os;
  os << str() << "\n[";
  const int64_t n = std::min(numel(), max_elements);
  const int64_t row = dim() > 0 && size(-1) > 0 ? size(-1) : 1;
  os << std::setprecision(6);
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) os << (i % row == 0 ? "\n " : ", ");
    os << p[i];
  }
  if (n < numel()) os << ", ... (" << numel() - n << " more)";
  os << "]";
  return os.str();
}

Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), shape, strides, offset, base.dtype()));
}

Tensor detach(const Tensor& t) { return make_view(t, t.shape(), t.strides(), t.offset()); }

void check_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  TRI_CHECK_TYPE(a.dtype() == b.dtype(), what, ": expected tensors of the same dtype, got ",
                 a.dtype(), " and ", b.dtype(), " (cast one with trident::to)");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* what) {
  TRI_CHECK(a.device() == b.device(), what, ": expected tensors on the same device, got ",
            a.device(), " and ", b.device());
}

void check_floating(const Tensor& t, const char* what) {
  TRI_CHECK_TYPE(is_floating(t.dtype()), what, ": expected a floating tensor (f32, f64, bf16, f16), got ",
                 t.dtype());
}

void check_dim(const Tensor& t, int ndim, const char* what) {
  TRI_CHECK(t.dim() == ndim, what, ": expected a ", ndim, "-dim tensor, got shape ", t.shape());
}

}  // namespace trident
