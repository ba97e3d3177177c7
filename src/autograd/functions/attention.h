// Differentiable fused scaled-dot-product attention. See ops/attention.h for the shapes,
// the supported layouts and what is not supported; backward rule in
// autograd/derivatives/attention.cc.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "ops/attention.h"

namespace trident {

using ops::AttentionOutputLayout;

// q (B, NH, T, HS), k and v (B, NKV, T, HS), NKV dividing NH -> (B, NH, T, HS):
// softmax(scale * q k^T + causal mask) v per head, query head h reading kv head
// h / (NH / NKV); scale defaults to 1/sqrt(HS). Like torch's
// scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True).
// layout kTokensFirst returns the same values stored as (B, T, NH, HS), so that
// transpose(out, 1, 2) then a reshape to (B, T, NH * HS) copies nothing
// (Note [Attention output layout] in ops/attention.h). window > 0 (causal only): each query
// sees only the last `window` keys, itself included (Mistral's sliding window). documents
// (causal only; ops/documents.h): each query sees only its own document's keys.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = true,
                 std::optional<double> scale = std::nullopt,
                 AttentionOutputLayout layout = AttentionOutputLayout::kHeadsFirst, int64_t window = 0,
                 const ops::Documents* documents = nullptr);

}  // namespace trident
