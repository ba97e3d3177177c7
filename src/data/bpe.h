// Byte-pair encoding of one pre-tokenized piece, by tiktoken's rule.
//
// Note [tiktoken's merge rule]
// tiktoken (src/lib.rs, byte_pair_merge) does not look merges up as pairs of tokens. It starts
// from the piece's single bytes and repeatedly joins the two adjacent parts whose
// concatenation is a token of lowest merge rank, taking the leftmost on a tie, until no
// adjacent concatenation is a token. Before that, a piece that is itself a token is encoded
// as that one token without merging. For GPT-2's files this gives the same ids as the original
// encoder.py (which merges listed pairs); we follow tiktoken because it is the reference.
// The rank of a token is its place in BpeVocab::merge_results (data/bpe_vocab.h): for GPT-2 the
// line of the merge that makes it, for a tiktoken rank file the order of the ranks (there
// id == rank), for tokenizer.json the first merge that makes it. Only the order matters. The ids
// returned are the vocabulary's ids for the final parts (for GPT-2, id = 256 + rank).
// A tokenizer.json's own BPE (Hugging Face tokenizers) joins listed pairs, not tokens; see
// Note [tokenizer.json merges as ranks] in data/hf_tokenizer_json.h.
//
// Two implementations of the rule: merge_linear (tiktoken's: rescans the parts after each
// merge, O(n m) for n bytes and m merges, fastest for the short pieces of natural text) and
// merge_heap (a priority queue of candidate joins, O(n log n); used for long pieces, where
// the linear one is quadratic, e.g. a megabyte of one repeated letter).
// Not here: caching (data/gpt2_tokenizer.cc), special tokens, pre-tokenization.
// Thread safety: const methods may be called from many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/byte_string_map.h"
#include "data/bpe_vocab.h"

namespace trident::data {

class BytePairEncoder {
 public:
  // Pieces at least this long (in bytes) use merge_heap.
  static constexpr size_t kHeapMinLength = 64;

  // Indexes every token of `vocab` except the special tokens.
  explicit BytePairEncoder(const BpeVocab& vocab);

  // Appends the ids of `piece` (non-empty bytes) to `out`.
  void encode(std::string_view piece, std::vector<TokenId>& out) const;

  // The id of the token whose bytes are exactly `bytes`, if there is one.
  const TokenId* find_token(std::string_view bytes) const {
    const Entry* e = tokens_.find(bytes);
    return e == nullptr ? nullptr : &e->id;
  }

  // The boundaries of the parts the merge rule leaves: 0 = b_0 < b_1 < ... < b_k = size.
  // merge_linear with `rank_limit` joins only tokens of rank below it: for a mergeable token of
  // rank r, merge_linear(its bytes, r) leaves the two parts whose merge makes it (how a rank
  // file's merges are written out as pairs: ByteLevelBpeTokenizer::merges).
  std::vector<size_t> merge_linear(std::string_view piece, uint32_t rank_limit = UINT32_MAX) const;
  std::vector<size_t> merge_heap(std::string_view piece) const;

 private:
  static constexpr uint32_t kNoRank = UINT32_MAX;
  struct Entry {
    uint32_t rank;  // kNoRank for single bytes (they are never the join of two parts)
    TokenId id;
  };
  uint32_t rank_of(std::string_view bytes) const {
    const Entry* e = tokens_.find(bytes);
    return e == nullptr ? kNoRank : e->rank;
  }

  ByteStringMap<Entry> tokens_;
};

}  // namespace trident::data
