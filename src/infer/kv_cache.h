// The KV cache of generation: every layer's keys and values of `slots` sequences, each up to
// `capacity` tokens, kept where the model's weights are (models/kv_cache_access.h is what the
// model sees of it). A step runs the rows of consecutive slots [first, first + rows) with the
// same number of new tokens each: begin_step says which, the model's decode() appends each
// layer's keys and values, end_step counts them. Slot storage is (slots, NKV, capacity, HS) per
// layer, so a step's keys are a strided view (no copy) and a row shorter than the longest one
// just has future keys past its end (ops::attention_decode never shows them).
//
// Not yet vLLM's paging: each slot reserves `capacity` tokens. Storage starts zeroed: keys and
// values past a row's end are read by the tiles that hold its last keys (masked, times 0), and
// must be finite.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "models/kv_cache_access.h"

namespace trident::infer {

struct KvCacheShape {
  int64_t layers = 0, kv_heads = 0, head_size = 0;
  DType dtype = DType::kF32;
  Device device = Device::cpu();
};

class KvCache final : public models::KvCacheAccess {
 public:
  KvCache(const KvCacheShape& shape, int64_t slots, int64_t capacity);

  int64_t slots() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t capacity() const { return capacity_; }
  int64_t length(int64_t slot) const { return lengths_.at(static_cast<size_t>(slot)); }
  // The storage's bytes, keys and values of every layer.
  int64_t bytes() const;

  // A step over slots [first, first + rows), `new_tokens` each. Throws, naming the slot, when
  // one would pass the capacity.
  void begin_step(int64_t first, int64_t rows, int64_t new_tokens);
  // The step's rows have their new tokens cached.
  void end_step();
  // Slot `slot` holds nothing.
  void reset(int64_t slot);
  // Slot `from`'s sequence moves to slot `to` (compacting the running batch); `from` is empty.
  void move(int64_t from, int64_t to);

  // models::KvCacheAccess, for the step begun.
  const Tensor& positions() const override { return positions_; }
  const Tensor& query_start() const override { return query_start_; }
  std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& k, const Tensor& v) override;

 private:
  KvCacheShape shape_;
  int64_t capacity_;
  std::vector<Tensor> keys_, values_;  // per layer, (slots, NKV, capacity, HS)
  std::vector<int64_t> lengths_;       // tokens cached per slot
  int64_t first_ = 0, rows_ = 0, new_tokens_ = 0;
  Tensor positions_, query_start_;
};

}  // namespace trident::infer
