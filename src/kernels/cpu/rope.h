// Rotary position embedding (RoPE; Su et al. 2021) as LLaMA and Hugging Face apply it, in the
// "rotate half" layout: on x (B, T, H, D) row-major, the token at sequence index t has position
// p = pos0 + t, and each pair (i, i + D/2) for i < D/2 turns by the angle p * inv_freq(i)
// (core/rope_params.h: theta^(-2i/D), or Llama 3's rescaled frequencies):
//   out[i]       = x[i] cos - x[i + D/2] sin
//   out[i + D/2] = x[i + D/2] cos + x[i] sin
// `inverse` turns by minus the angle: the backward (a rotation's transpose is its inverse).
// `positions` (B, T) (null: p = pos0 + t): the token at (b, t) has position positions[b*T + t]
// instead, >= 0 (packed documents restart their positions: Note [Document masks] in
// kernels/cpu/attention.h).
//
// Angles and their cos/sin are computed in double and rounded once to acc_t<T>, so positions
// in the hundreds of thousands keep their accuracy (Hugging Face forms p * inv_freq in fp32,
// which loses ~1e-4 rad at p = 4096). The products run in acc_t<T> and round once on store.
// Accumulation semantics: `=`; out may equal x. Rows are contiguous (the front end copies).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/rope_params.h"

namespace trident::kernels::cpu {

template <class T>
void rope(T* out, const T* x, int64_t B, int64_t T_len, int64_t H, int64_t D, const RopeParams& params, int64_t pos0,
          const int64_t* positions, bool inverse);

}  // namespace trident::kernels::cpu
