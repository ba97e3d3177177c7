// SwiGLU's gate, fused: h = silu(g) * u (LLaMA's MLP: down(silu(gate(x)) * up(x))), and its
// backward, each one pass over the data.
//
// Shapes: every pointer has n elements, contiguous: g, u, h, dh, dg, du all (n) (the MLP's
// (B*T, I) flattened). Accumulation semantics: `=` (outputs are overwritten). T is float,
// double, bf16 or f16; the math is in acc_t<T> and each output is rounded once on store.
// In f32 and f64 the bits are those of silu then mul (kernels/cpu/pointwise.h, binary.h): the
// same products in the same order (tests/ops/swiglu_test.cc checks it). bf16/f16 skip the
// rounding of silu(g) to T in between, so there they differ from the two ops by that rounding.
// Not here: the GEMMs around it (the gate and up projections stay two nn::Linear).
#pragma once

#include <cstdint>

namespace trident::kernels::cpu {

// h = silu(g) * u.
template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n);

// dg = dh * u * silu'(g), du = dh * silu(g): silu(g) is recomputed, not saved (Note [SwiGLU
// saves its inputs] in ops/swiglu.h).
template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n);

}  // namespace trident::kernels::cpu
