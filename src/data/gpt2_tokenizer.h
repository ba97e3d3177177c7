// GPT-2's byte-level BPE tokenizer, producing exactly the ids of tiktoken's `gpt2` encoding.
//
// encode(text, allow_special):
//   1. The text must be valid UTF-8 (tiktoken encodes Python str); otherwise trident::Error
//      (kValue) names the byte offset of the first invalid sequence.
//   2. With allow_special, occurrences of the special tokens' text ("<|endoftext|>", id 50256)
//      become their ids and the text between them is encoded separately (as tiktoken's
//      encode(text, allowed_special="all")). Without, they are ordinary text (tiktoken's
//      encode_ordinary).
//   3. Each stretch is split by GPT-2's pattern (data/pretokenize.h) and each piece is encoded
//      by tiktoken's merge rule (data/bpe.h). Pieces that are not a single token are cached
//      (a bounded map shared by all calls), since words repeat.
// decode(ids) returns the bytes of the tokens, so decode(encode(text)) == text.
//
// Not here: reading the files (data/gpt2_vocab.h), other BPE vocabularies' patterns
// (cl100k, o200k), normalization.
// Thread safety: encode and decode may be called from many threads at once (the cache is
// guarded by a mutex).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>

#include "core/status.h"
#include "data/bpe.h"
#include "data/byte_string_map.h"
#include "data/gpt2_vocab.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace trident::data {

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // Loads vocab.json + merges.txt or encoder.json + vocab.bpe from `dir` (data/gpt2_vocab.h).
  static StatusOr<std::unique_ptr<Gpt2Tokenizer>> load(const std::filesystem::path& dir);
  explicit Gpt2Tokenizer(Gpt2Vocab vocab);

  void encode_append(std::string_view text, bool allow_special,
                     std::vector<TokenId>& out) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.token_bytes.size()); }
  std::optional<TokenId> eot_id() const override { return eot_id_; }
  std::string name() const override { return "gpt2 (" + vocab_.source + ")"; }

  // The bytes of one token (for a special token, its text).
  std::string_view token_bytes(TokenId id) const;

 private:
  // Pieces longer than this are not cached; the cache is emptied when it holds this many.
  static constexpr size_t kMaxCachedPieceLength = 128;
  static constexpr size_t kMaxCacheEntries = 1 << 16;

  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;

  Gpt2Vocab vocab_;
  std::optional<TokenId> eot_id_;
  BytePairEncoder bpe_;
  Gpt2Pretokenizer pretokenizer_;

  // The cache: piece -> its ids, stored as a range of cache_ids_.
  struct IdRange {
    uint32_t first, count;
  };
  mutable std::mutex cache_mutex_;
  mutable ByteStringMap<IdRange> cache_;
  mutable std::vector<TokenId> cache_ids_;
};

}  // namespace trident::data
