// Which experts each token goes to, and in what order the experts see their tokens: the
// host-side decision of a mixture-of-experts layer (moe/sparse_moe.h), from the router's
// probabilities. No autograd: the choice is discrete; the gradient reaches the router through
// the chosen probabilities (the routing weights), as in every top-k router.
//
// Note [Top-k and capacity]
// Each token takes its k most probable experts (ties: the lower expert index, as a stable
// sort would). Dropless (capacity 0, MegaBlocks' and Hugging Face's default): every choice is
// kept and an expert gets as many rows as tokens chose it. With a capacity (GShard and Switch:
// capacity = ceil(capacity_factor x tokens x k / experts)) an expert keeps its first
// `capacity` choices in token order (Megatron-Core's "position" drop policy) and drops the
// rest: a dropped choice contributes nothing, so a token whose every choice was dropped
// passes through the block's residual alone. The load statistics (`routed`) count choices
// before dropping: the load-balancing loss sees what the router asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trident::moe {

struct Routing {
  int64_t tokens = 0, experts = 0, k = 0;
  // Slot s = n * k + j is token n's j-th choice (most probable first).
  std::vector<int64_t> expert_of_slot;  // (tokens * k)
  // The kept slots sorted by expert (stable: token order within an expert): row r of the
  // experts' input is token slot_of_row[r] / k.
  std::vector<int64_t> slot_of_row;
  // Expert e's rows are [offsets[e], offsets[e + 1]) (experts + 1 entries).
  std::vector<int64_t> offsets;
  std::vector<int64_t> routed;  // (experts): choices per expert before dropping
  int64_t dropped = 0;          // choices dropped by the capacity

  int64_t rows() const { return static_cast<int64_t>(slot_of_row.size()); }
  int64_t kept(int64_t e) const { return offsets[static_cast<size_t>(e + 1)] - offsets[static_cast<size_t>(e)]; }
};

// The capacity of each expert for `tokens` tokens choosing k of `experts` experts:
// ceil(factor x tokens x k / experts); 0 (no limit) when factor is 0.
int64_t expert_capacity(double capacity_factor, int64_t tokens, int64_t k, int64_t experts);

// Routes `tokens` rows of `probs` (row-major, tokens x experts) to their top-k experts
// (Note [Top-k and capacity]); capacity 0: dropless. Throws for k outside [1, experts]. A NaN
// probability ranks below every number (ties to the lower index): the choice stays the same
// on every rank and the NaN reaches the loss, where the trainer's non-finite handling sees it
// (a rank that threw here would leave the others waiting in their collectives).
Routing route_top_k(const float* probs, int64_t tokens, int64_t experts, int64_t k, int64_t capacity);

}  // namespace trident::moe
