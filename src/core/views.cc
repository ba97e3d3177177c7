#include "core/views.h"

namespace trident::views {

Shape infer_shape(std::span<const int64_t> shape, int64_t numel, const char* what) {
  Shape out(shape);
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TRI_CHECK(infer < 0, what, ": only one dim can be -1 in shape ", out);
      infer = i;
    } else {
      TRI_CHECK(out[i] >= 0, what, ": invalid size ", out[i], " at dim ", i, " of shape ", out);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    TRI_CHECK(known != 0 && numel % known == 0, what, ": shape ", out,
              " is invalid for a tensor of ", numel, " elements");
    out[infer] = numel / known;
  }
  TRI_CHECK(out.product() == numel, what, ": shape ", out, " is invalid for a tensor of ", numel,
            " elements");
  return out;
}

// Note [View strides]
// Which reshapes need no copy? Group the input's dims into maximal runs that are contiguous
// with respect to each other (stride[i] == stride[i+1] * size[i+1]); a new shape is viewable
// iff each output dim lies within one run. This is the algorithm of PyTorch's computeStride.
std::optional<Strides> view_strides(const Tensor& t, const Shape& shape) {
  const Shape& old_shape = t.shape();
  const Strides& old_strides = t.strides();
  Strides out = Dims::filled(shape.size(), 1);
  if (t.numel() == 0 || t.dim() == 0) return contiguous_strides(shape);
  int view_d = shape.size() - 1;
  int64_t chunk_base_stride = old_strides.size() ? old_strides.back() : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int tensor_d = old_shape.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    const bool run_ends = tensor_d == 0 ||
                          (old_shape[tensor_d - 1] != 1 &&
                           old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (run_ends) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor view(const Tensor& t, std::span<const int64_t> shape_in) {
  const Shape shape = infer_shape(shape_in, t.numel(), "view");
  auto strides = view_strides(t, shape);
  TRI_CHECK(strides.has_value(), "view: a tensor with shape ", t.shape(), " and strides ",
            t.strides(), " cannot be viewed as ", shape,
            " without a copy; use trident::reshape, which copies when it must");
  return make_view(t, shape, *strides, t.offset());
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  const int d0 = normalize_dim(dim0, t.dim(), "transpose");
  const int d1 = normalize_dim(dim1, t.dim(), "transpose");
  Shape shape = t.shape();
  Strides strides = t.strides();
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return make_view(t, shape, strides, t.offset());
}

Tensor permute(const Tensor& t, std::span<const int64_t> dims) {
  TRI_CHECK(static_cast<int>(dims.size()) == t.dim(), "permute: got ", dims.size(),
            " dims for a tensor of shape ", t.shape());
  Shape shape = t.shape();
  Strides strides = t.strides();
  bool seen[Dims::kMaxDims] = {};
  for (int i = 0; i < t.dim(); ++i) {
    const int d = normalize_dim(dims[i], t.dim(), "permute");
    TRI_CHECK(!seen[d], "permute: dim ", d, " appears twice in ", Dims(dims));
    seen[d] = true;
    shape[i] = t.shape()[d];
    strides[i] = t.strides()[d];
  }
  return make_view(t, shape, strides, t.offset());
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  const int d = normalize_dim(dim, t.dim(), "narrow");
  TRI_CHECK_INDEX(start >= 0 && length >= 0 && start + length <= t.shape()[d], "narrow: range [",
                  start, ", ", start + length, ") is out of bounds for dim ", d, " of size ",
                  t.shape()[d], " (shape ", t.shape(), ")");
  Shape shape = t.shape();
  shape[d] = length;
  const int64_t offset = length > 0 ? t.offset() + start * t.strides()[d] : t.offset();
  return make_view(t, shape, t.strides(), offset);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  const int d = normalize_dim(dim, t.dim(), "select");
  TRI_CHECK_INDEX(index >= 0 && index < t.shape()[d], "select: index ", index,
                  " is out of bounds for dim ", d, " of size ", t.shape()[d]);
  Shape shape = t.shape();
  Strides strides = t.strides();
  const int64_t offset = t.offset() + index * strides[d];
  shape.erase(d);
  strides.erase(d);
  return make_view(t, shape, strides, offset);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  TRI_CHECK(shape.size() >= t.dim(), "expand: cannot expand shape ", t.shape(), " to ", shape,
            " with fewer dims");
  const int lead = shape.size() - t.dim();
  Strides strides = Dims::filled(shape.size(), 0);
  for (int i = 0; i < t.dim(); ++i) {
    const int64_t have = t.shape()[i], want = shape[lead + i];
    TRI_CHECK(have == want || have == 1, "expand: cannot expand shape ", t.shape(), " to ", shape,
              " (dim ", lead + i, ": ", have, " vs ", want, ")");
    strides[lead + i] = have == want ? t.strides()[i] : 0;
  }
  for (int i = 0; i < shape.size(); ++i) TRI_CHECK(shape[i] >= 0, "expand: invalid shape ", shape);
  return make_view(t, shape, strides, t.offset());
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  const int d = normalize_dim(dim, t.dim() + 1, "unsqueeze");
  Shape shape = t.shape();
  Strides strides = t.strides();
  const int64_t stride = d < t.dim() ? t.strides()[d] * t.shape()[d] : 1;
  shape.insert(d, 1);
  strides.insert(d, stride);
  return make_view(t, shape, strides, t.offset());
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  const int d = normalize_dim(dim, t.dim(), "squeeze");
  TRI_CHECK(t.shape()[d] == 1, "squeeze: dim ", d, " of shape ", t.shape(), " has size ",
            t.shape()[d], ", not 1");
  Shape shape = t.shape();
  Strides strides = t.strides();
  shape.erase(d);
  strides.erase(d);
  return make_view(t, shape, strides, t.offset());
}

Tensor as_strided(const Tensor& t, const Shape& shape, const Strides& strides, int64_t offset) {
  return make_view(t, shape, strides, offset);
}

}  // namespace trident::views
