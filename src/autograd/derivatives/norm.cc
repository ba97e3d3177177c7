// Differentiable normalizations: forward through ops/norm, which also returns the per-row
// statistics; the backward rules hand them, with the saved input and weight, to the fused
// backward kernels (one pass per row; no recomputation of mean or rstd).
#include "autograd/functions/norm.h"

#include "autograd/record.h"
#include "ops/norm.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kLayerNorm, "layernorm");
TRI_REGISTER_OP(kRMSNorm, "rmsnorm");

namespace {
std::optional<SavedTensor> save_if_present(const std::optional<Tensor>& t) {
  if (!t) return std::nullopt;
  return SavedTensor(*t);
}
std::optional<Tensor> get_if_present(const std::optional<SavedTensor>& s) {
  if (!s) return std::nullopt;
  return s->get();
}
}  // namespace

Tensor layernorm(const Tensor& x, const std::optional<Tensor>& weight,
                 const std::optional<Tensor>& bias, double eps) {
  TRI_PROFILE_OP(kLayerNorm);
  ops::LayerNormOutput r = ops::layernorm(x, weight, bias, eps);
  if (needs_grad({x, weight, bias}))
    // mean and rstd are internal tensors (not outputs of this node): capturing them makes no
    // reference cycle, and nothing else can modify them.
    record(kLayerNorm, {x, weight, bias}, {r.out},
           [sx = SavedTensor(x), sw = save_if_present(weight), mean = r.mean,
            rstd = r.rstd](const BackwardContext& c) {
             // n = (x - mean) * rstd, dn = dy * w:
             //   dx = rstd * (dn - mean(dn) - n * mean(dn * n)),  dw = sum_rows dy * n,
             //   db = sum_rows dy
             ops::LayerNormGrads g =
                 ops::layernorm_backward(c.grad(), sx.get(), get_if_present(sw), mean, rstd,
                                         c.needs(0), c.needs(1), c.needs(2));
             return GradList{g.dx, g.dweight, g.dbias};
           });
  return r.out;
}

Tensor rmsnorm(const Tensor& x, const std::optional<Tensor>& weight, double eps) {
  TRI_PROFILE_OP(kRMSNorm);
  ops::RMSNormOutput r = ops::rmsnorm(x, weight, eps);
  if (needs_grad({x, weight}))
    record(kRMSNorm, {x, weight}, {r.out},
           [sx = SavedTensor(x), sw = save_if_present(weight),
            rstd = r.rstd](const BackwardContext& c) {
             // n = x * rstd, dn = dy * w:  dx = rstd * (dn - n * mean(dn * n)),
             //   dw = sum_rows dy * n
             ops::RMSNormGrads g = ops::rmsnorm_backward(c.grad(), sx.get(), get_if_present(sw),
                                                         rstd, c.needs(0), c.needs(1));
             return GradList{g.dx, g.dweight};
           });
  return r.out;
}

}  // namespace trident
