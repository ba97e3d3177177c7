// Optimizer primitives (no autograd): in-place parameter updates and gradient norms.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/adamw.h"

namespace trident::ops {

// One AdamW update of `param` (contiguous) from `grad`; m and v are f32 state of the same
// shape. Bumps param's version.
void adamw_update_(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                   const kernels::cpu::AdamWStep& step);

// AdamW on many parameters with one step (one weight decay), each as adamw_update_: on a
// device one launch per (device, dtype) (DeviceKernels::adamw_update_multi), on the host one
// parameter after another.
void adamw_update_multi_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& ms, const std::vector<Tensor>& vs,
                         const kernels::cpu::AdamWStep& step);
// The same, each updated parameter also copied into outs[k] (its shape, any dtype: a cast,
// rounding to nearest even), as core::copy_(outs[k], params[k]) after the update would, bit for
// bit: mixed precision's fp32 masters stepped and rounded into the bf16/f16 model. On a device,
// an f32 parameter going into a contiguous bf16 or f16 tensor on its device is written by the
// update's own launch (one pass over the masters instead of a cast kernel per tensor).
void adamw_update_multi_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& ms, const std::vector<Tensor>& vs,
                         const kernels::cpu::AdamWStep& step, const std::vector<Tensor>& outs);

// Sum of squares of every element of every tensor, accumulated in double in a fixed order
// (independent of the thread count); device tensors in one launch and one synchronization per
// (device, dtype).
double sum_of_squares(const std::vector<Tensor>& tensors);

// t *= scale in place (any floating dtype, contiguous).
void scale_(const Tensor& t, double scale);

}  // namespace trident::ops
