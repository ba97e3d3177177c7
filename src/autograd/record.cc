#include "autograd/record.h"

namespace trident::autograd {

bool needs_grad(const OptionalTensors& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const std::optional<Tensor>& t : inputs)
    if (t.has_value() && t->requires_grad()) return true;
  return false;
}

void record(const OpDef& op, const OptionalTensors& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward) {
  auto node = std::make_shared<FunctionNode>(op, std::move(backward));
  node->next_edges.reserve(inputs.size());
  node->input_meta.reserve(inputs.size());
  for (const std::optional<Tensor>& t : inputs) {
    if (t.has_value()) {
      node->next_edges.push_back(gradient_edge(*t));
      node->input_meta.push_back(TensorMeta::of(*t));
    } else {
      node->next_edges.push_back(Edge{});
      node->input_meta.push_back(TensorMeta{Shape{}, DType::kF32, Device::cpu()});
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    TRI_ASSERT(is_floating(out.dtype()), "op '", op.name, "' recorded a non-floating output");
    AutogradMeta& meta = out.impl().autograd();
    TRI_ASSERT(meta.grad_fn == nullptr && !meta.requires_grad, "op '", op.name,
               "' recorded output ", i, " that already has autograd history");
    meta.grad_fn = node;
    meta.output_nr = static_cast<int>(i);
    node->output_meta.push_back(TensorMeta::of(out));
  }
}

}  // namespace trident::autograd
