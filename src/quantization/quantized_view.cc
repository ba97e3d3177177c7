#include "quantization/quantized_view.h"

#include "autograd/functions.h"
#include "core/check.h"
#include "quantization/quantized_linear.h"

namespace trident::quantization {
namespace {

constexpr const char* kViewName = "quantized";

// See Note [The quantized view].
class QuantizedView final : public nn::LinearWrapper {
 public:
  QuantizedView(std::shared_ptr<const QuantizedWeight> q, Tensor weight, bool in_out, std::string param)
      : q_(std::move(q)), weight_(std::move(weight)), in_out_(in_out), param_(std::move(param)) {}
  nn::WrapperKind kind() const override { return nn::WrapperKind::kWeightView; }
  std::string name() const override { return kViewName; }
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner&) const override {
    TRI_CHECK(p.weight.is_same(weight_), "'", param_, "' is stored in ", q_->scheme(),
              ", but a wrapper above its view handed the layer another weight");
    const Tensor y = quantized_linear(x, q_, in_out_, call.bias ? p.bias : std::nullopt);
    return call.act == nn::Activation::kGeluTanh ? trident::gelu_tanh(y) : y;
  }

 private:
  std::shared_ptr<const QuantizedWeight> q_;
  Tensor weight_;
  bool in_out_;
  std::string param_;
};

// A tied head's product from its quantized copy; lookups go on to the table (Note [What stays in
// full precision]). Innermost, like QuantizedView: nothing below it but the table's own lookup.
class QuantizedHeadView final : public nn::EmbeddingWrapper {
 public:
  QuantizedHeadView(std::shared_ptr<const QuantizedWeight> q, std::string param)
      : q_(std::move(q)), param_(std::move(param)) {}
  nn::WrapperKind kind() const override { return nn::WrapperKind::kWeightView; }
  std::string name() const override { return kViewName; }
  Tensor lookup(const Tensor& ids, const nn::LayerParams& p, const nn::EmbeddingInner& inner) const override {
    return inner.lookup(ids, p);
  }
  Tensor logits(const Tensor& h, const nn::LayerParams& p, const nn::EmbeddingInner&) const override {
    TRI_CHECK(p.weight.size(0) == q_->shape()[0] && p.weight.size(1) == q_->shape()[1], "'", param_, "' is stored in ",
              q_->scheme(), " as ", q_->shape(), ", but a wrapper above its view handed the table ", p.weight.shape());
    return quantized_linear(h, q_, false);
  }

 private:
  std::shared_ptr<const QuantizedWeight> q_;
  std::string param_;
};

}  // namespace

void add_quantized_head(nn::Embedding& table, std::shared_ptr<const QuantizedWeight> q, const std::string& param) {
  for (const std::string& name : table.wrapper_names())
    TRI_CHECK(name != kViewName, "'", param, "' is quantized already");
  const Tensor& w = table.weight();
  TRI_CHECK(q->shape() == w.shape(), "'", param, "' is ", w.shape(), " (the table it is tied to), its quantized weight ",
            q->shape());
  table.add_wrapper(std::make_shared<QuantizedHeadView>(std::move(q), param));
}

void add_quantized_view(nn::LinearLayer& layer, std::shared_ptr<const QuantizedWeight> q, Tensor weight, bool in_out,
                        const std::string& param) {
  for (const std::string& name : layer.wrapper_names())
    TRI_CHECK(name != kViewName, "'", param, "' is quantized already");
  const bool conv1d = dynamic_cast<const nn::Conv1D*>(&layer) != nullptr;  // its weight is (in, out)
  const int64_t in = weight.size(conv1d ? 0 : 1), out = weight.size(conv1d ? 1 : 0);
  const Shape want = in_out ? Shape{in, out} : Shape{out, in};
  TRI_CHECK(q->shape() == want, "'", param, "' is ", weight.shape(), ", its quantized weight ", q->shape(),
            " (expected ", want, ")");
  layer.add_wrapper(std::make_shared<QuantizedView>(std::move(q), std::move(weight), in_out, param));
}

}  // namespace trident::quantization
