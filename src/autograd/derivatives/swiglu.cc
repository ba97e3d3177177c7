// The SwiGLU gate's backward rule: one fused kernel for both input gradients.
#include "autograd/functions/swiglu.h"

#include "autograd/record.h"
#include "ops/swiglu.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kSwiglu, "swiglu");

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  TRI_PROFILE_OP(kSwiglu);
  Tensor out = ops::swiglu(gate, up);
  if (needs_grad({gate, up}))
    record(kSwiglu, {gate, up}, {out}, [sg = SavedTensor(gate), su = SavedTensor(up)](const BackwardContext& c) {
      // h = s u, s = silu(g):  dg = dh u silu'(g),  du = dh s  (s recomputed: Note [SwiGLU saves its inputs])
      auto [dg, du] = ops::swiglu_backward(c.grad(), sg.get(), su.get());
      return GradList{std::move(dg), std::move(du)};
    });
  return out;
}

}  // namespace trident
