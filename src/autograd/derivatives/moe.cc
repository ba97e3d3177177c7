// The mixture-of-experts layer's grouped products and its scatter of expert outputs back to
// their tokens.
#include "autograd/functions/moe.h"

#include "autograd/record.h"
#include "ops/embedding.h"
#include "ops/grouped_linear.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kGroupedLinear, "grouped_linear");
TRI_REGISTER_OP(kScatterAddRows, "scatter_add_rows");

Tensor grouped_linear(const Tensor& x, const std::vector<Tensor>& weights, const std::vector<int64_t>& offsets) {
  TRI_PROFILE_OP(kGroupedLinear);
  Tensor out = ops::grouped_linear(x, weights, offsets);
  OptionalTensors inputs{x};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  if (needs_grad(inputs)) {
    std::vector<SavedTensor> saved_w;
    for (const Tensor& w : weights) saved_w.emplace_back(w);
    record(kGroupedLinear, inputs, {out},
           [sx = SavedTensor(x), sw = std::move(saved_w), offsets](const BackwardContext& c) {
             // y_e = x_e W_e^T:  dx_e = dy_e W_e,  dW_e = dy_e^T x_e
             GradList grads(sw.size() + 1);
             std::vector<Tensor> weights;
             for (const SavedTensor& w : sw) weights.push_back(w.get());
             if (c.needs(0)) grads[0] = ops::grouped_linear_backward_input(c.grad(), weights, offsets);
             bool any = false;
             for (size_t e = 0; e < sw.size(); ++e) any = any || c.needs(static_cast<int>(e) + 1);
             if (any) {
               std::vector<Tensor> dw = ops::grouped_linear_backward_weights(c.grad(), sx.get(), offsets);
               for (size_t e = 0; e < sw.size(); ++e)
                 if (c.needs(static_cast<int>(e) + 1)) grads[e + 1] = std::move(dw[e]);
             }
             return grads;
           });
  }
  return out;
}

Tensor scatter_add_rows(const Tensor& src, const Tensor& index, int64_t rows) {
  TRI_PROFILE_OP(kScatterAddRows);
  TRI_CHECK(src.dim() == 2 && index.dim() == 1 && index.size(0) == src.size(0), "scatter_add_rows: expected rows (M, C)",
            " and one index per row (M,), got ", src.shape(), " and ", index.shape());
  // embedding's backward is exactly this sum (deterministic, in row order).
  Tensor out = ops::embedding_backward(src, index, rows);
  if (needs_grad({src}))
    record(kScatterAddRows, {src}, {out}, [si = SavedTensor(index)](const BackwardContext& c) {
      // out[index[m]] += src[m]:  d src[m] = d out[index[m]]
      return GradList{ops::embedding(c.grad(), si.get())};
    });
  return out;
}

}  // namespace trident
