// Reference scaled-dot-product attention: the float64 oracle for the tiled CPU kernels.
// It materializes the full (T, T) score matrix of every head, masks, takes a softmax and
// multiplies by V: written for clarity, never for speed or memory. It does not cache
// anything for a backward pass (the op suite differentiates it by finite differences).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/reference/array.h"

namespace trident::reference {

// q (B, NH, T, HS), k and v (B, NKV, T, HS) with NKV dividing NH -> out (B, NH, T, HS):
//   out[b,h] = softmax(scale * q[b,h] @ k[b,g]^T + mask) @ v[b,g],   g = h / (NH / NKV)
// mask is -inf above the diagonal (key position > query position) when causal, else 0;
// with window > 0 also where key position <= query position - window (a sliding window).
// scale defaults to 1/sqrt(HS). Matches torch.nn.functional.scaled_dot_product_attention
// (is_causal, enable_gqa) and, with a window, Hugging Face's Mistral mask.
// positions (B * T position ids of packed documents, or empty): also -inf where a document
// starts (a position id 0) after the key and at or before the query.
Array attention(const Array& q, const Array& k, const Array& v, bool causal,
                std::optional<double> scale = std::nullopt, int64_t window = 0,
                const std::vector<int64_t>& positions = {});

}  // namespace trident::reference
