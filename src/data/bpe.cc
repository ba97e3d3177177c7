// tiktoken's merge rule, twice: see Note [tiktoken's merge rule] in bpe.h.
#include "data/bpe.h"

#include <functional>
#include <queue>

#include "core/check.h"

namespace trident::data {

BytePairEncoder::BytePairEncoder(const BpeVocab& vocab) : tokens_(vocab.token_bytes.size()) {
  std::vector<bool> special(vocab.token_bytes.size(), false);
  for (const auto& [text, id] : vocab.special_tokens) special[id] = true;
  for (size_t id = 0; id < vocab.token_bytes.size(); ++id)
    if (!special[id] && !vocab.token_bytes[id].empty())  // (empty: an id that stands for nothing)
      tokens_.insert(vocab.token_bytes[id], Entry{kNoRank, static_cast<TokenId>(id)});
  for (size_t rank = 0; rank < vocab.merge_results.size(); ++rank) {
    const TokenId id = vocab.merge_results[rank];
    Entry* e = id < vocab.token_bytes.size() ? tokens_.find(vocab.token_bytes[id]) : nullptr;
    TRI_CHECK(e != nullptr && e->id == id, "BytePairEncoder: merge ", rank, " makes id ", id,
              ", which is not a mergeable token of the vocabulary");
    e->rank = static_cast<uint32_t>(rank);
  }
}

void BytePairEncoder::encode(std::string_view piece, std::vector<TokenId>& out) const {
  if (const TokenId* id = find_token(piece)) {
    out.push_back(*id);
    return;
  }
  const std::vector<size_t> bounds =
      piece.size() < kHeapMinLength ? merge_linear(piece) : merge_heap(piece);
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    const TokenId* id = find_token(piece.substr(bounds[k], bounds[k + 1] - bounds[k]));
    TRI_ASSERT(id != nullptr, "a BPE part of length ", bounds[k + 1] - bounds[k],
               " is not a token");
    out.push_back(*id);
  }
}

std::vector<size_t> BytePairEncoder::merge_linear(std::string_view piece, uint32_t rank_limit) const {
  TRI_ASSERT(!piece.empty(), "BPE of an empty piece");
  auto rank_of = [&](std::string_view bytes) {
    const uint32_t r = this->rank_of(bytes);
    return r < rank_limit ? r : kNoRank;
  };
  const size_t n = piece.size();
  // parts[i] = {start of part i, rank of joining part i with part i + 1}, then {n, kNoRank}
  // marking the end, exactly as tiktoken keeps them.
  std::vector<std::pair<size_t, uint32_t>> parts;
  parts.reserve(n + 1);
  uint32_t min_rank = kNoRank;
  size_t min_i = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    const uint32_t r = rank_of(piece.substr(i, 2));
    if (r < min_rank) {
      min_rank = r;
      min_i = i;
    }
    parts.emplace_back(i, r);
  }
  parts.emplace_back(n - 1, kNoRank);
  parts.emplace_back(n, kNoRank);

  // The rank of joining part i with the union of parts i + 1 and i + 2 (about to be joined).
  auto rank_after_join = [&](size_t i) {
    return i + 3 < parts.size()
               ? rank_of(piece.substr(parts[i].first, parts[i + 3].first - parts[i].first))
               : kNoRank;
  };
  while (min_rank != kNoRank) {
    const size_t i = min_i;
    if (i > 0) parts[i - 1].second = rank_after_join(i - 1);
    parts[i].second = rank_after_join(i);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    min_rank = kNoRank;
    for (size_t j = 0; j + 1 < parts.size(); ++j) {
      if (parts[j].second < min_rank) {
        min_rank = parts[j].second;
        min_i = j;
      }
    }
  }
  std::vector<size_t> bounds;
  bounds.reserve(parts.size());
  for (const auto& part : parts) bounds.push_back(part.first);
  return bounds;
}

std::vector<size_t> BytePairEncoder::merge_heap(std::string_view piece) const {
  TRI_ASSERT(!piece.empty(), "BPE of an empty piece");
  const size_t n = piece.size();
  // Parts form a linked list indexed by their first byte. rank[s] is the rank of joining the
  // part at s with the next one, the key under which it was last pushed; a popped entry whose
  // rank no longer matches (or whose part has been absorbed) is stale and skipped. Popping the
  // smallest (rank, start) is tiktoken's choice: lowest rank, leftmost on a tie.
  std::vector<size_t> next(n), prev(n);
  std::vector<uint32_t> rank(n, kNoRank);
  std::vector<bool> alive(n, true);
  using Candidate = std::pair<uint32_t, size_t>;  // (rank, start)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto join_rank = [&](size_t s) {
    return next[s] < n ? rank_of(piece.substr(s, next[next[s]] - s)) : kNoRank;
  };
  for (size_t s = 0; s < n; ++s) {
    next[s] = s + 1;
    prev[s] = s - 1;  // wraps for s = 0; never read there
  }
  next.push_back(n);  // next[n] = n: the end of the piece has no successor
  for (size_t s = 0; s + 1 < n; ++s) {
    rank[s] = join_rank(s);
    if (rank[s] != kNoRank) heap.emplace(rank[s], s);
  }
  while (!heap.empty()) {
    const auto [r, s] = heap.top();
    heap.pop();
    if (!alive[s] || rank[s] != r) continue;
    const size_t absorbed = next[s];
    alive[absorbed] = false;
    next[s] = next[absorbed];
    if (next[s] < n) prev[next[s]] = s;
    rank[s] = join_rank(s);
    if (rank[s] != kNoRank) heap.emplace(rank[s], s);
    if (s > 0) {
      const size_t p = prev[s];
      rank[p] = join_rank(p);
      if (rank[p] != kNoRank) heap.emplace(rank[p], p);
    }
  }
  std::vector<size_t> bounds;
  for (size_t s = 0; s < n; s = next[s]) bounds.push_back(s);
  bounds.push_back(n);
  return bounds;
}

}  // namespace trident::data
