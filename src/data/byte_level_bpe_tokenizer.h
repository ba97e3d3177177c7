// Byte-level BPE tokenizers, producing exactly the ids of tiktoken's encodings: GPT-2
// (data/gpt2_tokenizer.h), tiktoken rank files such as cl100k_base, o200k_base and Llama 3's
// tokenizer.model (data/tiktoken_ranks.h), and Hugging Face tokenizer.json files of byte-level
// BPE models (data/hf_tokenizer_json.h). The loaders differ; encoding is this one class.
//
// encode(text, allow_special):
//   1. The text must be valid UTF-8 (tiktoken encodes Python str); otherwise trident::Error
//      (kValue) names the byte offset of the first invalid sequence.
//   2. With allow_special, occurrences of the special tokens' text ("<|endoftext|>") become
//      their ids and the text between them is encoded separately (as tiktoken's
//      encode(text, allowed_special="all")). Without, they are ordinary text (tiktoken's
//      encode_ordinary).
//   3. Each stretch is split by the encoding's pattern (data/pretokenize.h) and each piece is
//      encoded by tiktoken's merge rule (data/bpe.h). Pieces that are not a single token are
//      cached (a bounded map shared by all calls), since words repeat.
// decode(ids) returns the bytes of the tokens, so decode(encode(text)) == text.
//
// Not here: reading files, normalization (none of these encodings normalizes).
// Thread safety: encode and decode may be called from many threads at once (the cache is
// guarded by a mutex).
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "data/bpe.h"
#include "data/bpe_vocab.h"
#include "data/byte_string_map.h"
#include "data/pretokenize.h"
#include "data/special_tokens.h"
#include "data/tokenizer.h"

namespace trident::data {

struct ByteLevelBpeOptions {
  SplitPattern pattern = SplitPattern::kGpt2;
  // What it is, for name(): "gpt2", "cl100k_base", "tokenizer.json"; and in error messages
  // ("GPT-2 tokenizer: ...").
  std::string kind = "gpt2";
  std::string label = "GPT-2";
  // The special tokens' texts that eot_id() and bos_id() name, if the vocabulary has them.
  std::string eot_text = "<|endoftext|>";
  std::string bos_text;
};

class ByteLevelBpeTokenizer : public Tokenizer {
 public:
  ByteLevelBpeTokenizer(BpeVocab vocab, ByteLevelBpeOptions options);

  void encode_append(std::string_view text, bool allow_special,
                     std::vector<TokenId>& out) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.token_bytes.size()); }
  std::optional<TokenId> eot_id() const override { return eot_id_; }
  std::optional<TokenId> bos_id() const override { return bos_id_; }
  std::string name() const override { return options_.kind + " (" + vocab_.source + ")"; }

  // The bytes of one token (for a special token, its text).
  std::string_view token_bytes(TokenId id) const;
  const std::vector<std::pair<std::string, TokenId>>& special_tokens() const {
    return vocab_.special_tokens;
  }
  SplitPattern pattern() const { return options_.pattern; }
  const BpeVocab& vocab() const { return vocab_; }
  // The merges in priority order, each as the two tokens it joins: for GPT-2's files the lines
  // of merges.txt; for a rank file the two parts tiktoken's rule leaves of each mergeable token
  // when only lower ranks may join (as Hugging Face's converters write a tiktoken vocabulary's
  // merges). What GGUF's tokenizer.ggml.merges holds. A token whose bytes no lower merges split
  // into exactly two tokens is left out (it is only ever produced whole: data/bpe.h).
  std::vector<std::pair<TokenId, TokenId>> merges() const;

 private:
  // Pieces longer than this are not cached; the cache is emptied when it holds this many.
  static constexpr size_t kMaxCachedPieceLength = 128;
  static constexpr size_t kMaxCacheEntries = 1 << 16;

  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
  std::optional<TokenId> special_id(std::string_view text) const;

  BpeVocab vocab_;
  ByteLevelBpeOptions options_;
  std::optional<TokenId> eot_id_, bos_id_;
  BytePairEncoder bpe_;
  Pretokenizer pretokenizer_;
  SpecialTokenMatcher specials_;

  // The cache: piece -> its ids, stored as a range of cache_ids_.
  struct IdRange {
    uint32_t first, count;
  };
  mutable std::mutex cache_mutex_;
  mutable ByteStringMap<IdRange> cache_;
  mutable std::vector<TokenId> cache_ids_;
};

}  // namespace trident::data
