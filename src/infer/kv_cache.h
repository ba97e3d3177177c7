// The KV cache of generation: every layer's keys and values of `slots` sequences, kept where the
// model's weights are (models/kv_cache_access.h is what the model sees of it), in blocks of
// kBlockTokens tokens from one pool that all sequences share (vLLM's paged cache): a sequence
// holds the blocks its tokens fill, not the longest sequence's length, and a block given back
// serves any sequence next, so sequences of different lengths share the pool without
// fragmentation (at most one part-filled block each). Pool storage is (blocks, NKV,
// kBlockTokens, HS) per layer; ops::attention_decode reads it through each row's block table.
//
// A step runs the rows of consecutive slots [first, first + rows) with the same number of new
// tokens each: begin_step says which (and finds their new tokens' blocks), the model's decode()
// attends through attend(), end_step counts them.
//
// Note [Reserved blocks]
// A sequence is admitted with the most tokens it may reach (its prompt plus max_tokens, at most
// the capacity) and reserves the blocks that many need at once; it takes them from the pool
// only as it fills them, and admission refuses a sequence whose reservation the pool's
// unreserved blocks cannot cover. So a running sequence never finds the pool empty: nothing is
// preempted or recomputed (vLLM preempts instead, admitting more and sometimes redoing work).
// The cost: a sequence that stops early held a reservation it did not use.
//
// Note [The sliding window's ring]
// With a sliding window of W keys (Mistral), a query at position p reads keys p - W + 1 .. p
// only, so at each step the blocks wholly before the first new query's window go back to the
// pool (their table entries become -1, which the kernel never reads: Note [Paged keys and
// values]). A sequence then holds at most ceil((W - 1) / kBlockTokens) + 1 blocks while
// decoding, whatever its length: a ring of blocks, and its reservation is that much.
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
  static constexpr int64_t kBlockTokens = 64;  // one key tile of the attention kernels

  // `slots` sequences at once of up to `capacity` positions each, in a pool of `pool_tokens`
  // tokens (rounded up to whole blocks; 0: enough for every slot's longest sequence at once);
  // `window` > 0: the model's sliding window (Note [The sliding window's ring]).
  KvCache(const KvCacheShape& shape, int64_t slots, int64_t capacity, int64_t pool_tokens = 0, int64_t window = 0);

  int64_t slots() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t capacity() const { return capacity_; }
  int64_t length(int64_t slot) const { return lengths_.at(static_cast<size_t>(slot)); }
  int64_t blocks() const { return blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Blocks held by sequences / reserved for them (Note [Reserved blocks]).
  int64_t used_blocks() const { return blocks_ - free_blocks(); }
  int64_t reserved_blocks() const { return reserved_total_; }
  // The storage's bytes, keys and values of every layer.
  int64_t bytes() const;
  int64_t bytes_per_token() const;

  // The most blocks a sequence of `tokens` positions whose first step reads `first_step`
  // tokens (its prompt) holds at once.
  int64_t blocks_for(int64_t tokens, int64_t first_step) const;
  // Reserves for slot `slot` (empty) a sequence of up to `tokens` positions whose prompt is
  // `first_step` tokens; false, reserving nothing, when the unreserved blocks are too few.
  bool reserve(int64_t slot, int64_t tokens, int64_t first_step);

  // A step over slots [first, first + rows), `new_tokens` each. Throws, naming the slot, when
  // one would pass the capacity or its reservation.
  void begin_step(int64_t first, int64_t rows, int64_t new_tokens);
  // The step's rows have their new tokens cached.
  void end_step();
  // Slot `slot` holds nothing: its blocks and reservation go back to the pool.
  void reset(int64_t slot);
  // Slot `from`'s sequence moves to slot `to` (empty; compacting the running batch); `from` is
  // empty after. Moves the block list, not the keys.
  void move(int64_t from, int64_t to);

  // models::KvCacheAccess, for the step begun.
  const Tensor& positions() const override { return positions_; }
  Tensor attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) override;

 private:
  int64_t& table(int64_t slot, int64_t i);
  // Slot `slot`'s blocks wholly before position `first_key` go back to the pool.
  void drop_before(int64_t slot, int64_t first_key);
  void store(int64_t layer, const Tensor& k, const Tensor& v);

  KvCacheShape shape_;
  int64_t capacity_, window_, blocks_, blocks_per_row_;
  std::vector<Tensor> keys_, values_;  // per layer, (blocks, NKV, kBlockTokens, HS)
  Tensor table_;                       // (slots, blocks_per_row_) i64 on the host; -1: none
  std::vector<int64_t> free_;          // blocks no sequence holds
  std::vector<int64_t> lengths_;       // tokens cached per slot
  std::vector<int64_t> reserved_;      // blocks reserved per slot
  std::vector<int64_t> held_;          // blocks held per slot
  int64_t reserved_total_ = 0;
  int64_t first_ = 0, rows_ = 0, new_tokens_ = 0, longest_ = 0;
  Tensor positions_, query_start_;
};

}  // namespace trident::infer
