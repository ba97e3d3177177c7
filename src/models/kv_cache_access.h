// What a family's attention layers see of a KV cache while decoding (models/causal_lm.h's
// decode()): the new tokens' positions, and a place to put each layer's new keys and values that
// attends over all of them so far. The cache
// itself (its memory, its slots, the batch's rows) is inference's (src/infer/kv_cache.h); a
// family knows only this.
#pragma once

#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace trident::models {

class KvCacheAccess {
 public:
  virtual ~KvCacheAccess() = default;
  // The new tokens' positions (B, Tq) i64 on the model's device (rotary or learned).
  virtual const Tensor& positions() const = 0;
  // Stores layer `layer`'s new keys and values, k and v (B, Tq, NKV, HS) tokens-first (k already
  // rotated), after each row's cached ones, and returns the attention of the new queries q
  // (B, NH, Tq, HS) over all of the row's keys so far under the causal mask (and a sliding
  // window of `window` keys, 0 for none), as ops::attention_decode computes it: (B, NH, Tq, HS)
  // stored tokens-first (ops::AttentionOutputLayout::kTokensFirst).
  virtual Tensor attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) = 0;
};

}  // namespace trident::models
