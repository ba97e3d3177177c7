// What a family's attention layers see of a KV cache while decoding (models/causal_lm.h's
// decode()): the new tokens' positions, where each row's new queries start among its keys, and a
// place to put each layer's new keys and values that returns all of them so far. The cache
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
  // Each row's first new token's key position (B) i64 on the host: the number of keys the row
  // had cached before this step (ops::attention_decode's query_start).
  virtual const Tensor& query_start() const = 0;
  // Stores layer `layer`'s new keys and values, k and v (B, Tq, NKV, HS) tokens-first (k already
  // rotated), after each row's cached ones, and returns the layer's keys and values so far as
  // (B, NKV, T, HS) views, T the longest row's count (a shorter row's keys past its own count
  // are its future: never seen).
  virtual std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& k, const Tensor& v) = 0;
};

}  // namespace trident::models
