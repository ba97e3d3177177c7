// The tokenizer interface: text (bytes) to token ids and back.
//
// Implementations: ByteTokenizer (data/byte_tokenizer.h: 256 ids, one per byte, no files),
// ByteLevelBpeTokenizer (data/byte_level_bpe_tokenizer.h: GPT-2, tiktoken rank files such as
// cl100k_base, o200k_base and Llama 3's, Hugging Face tokenizer.json; identical to tiktoken) and
// SentencePieceTokenizer (data/sentencepiece_tokenizer.h: Llama 2, Mistral; the library's ids).
// All are lossless, decode(encode(text)) == text for every text they accept, except where a
// SentencePiece model normalizes (its header says when).
// Thread safety: every method is const and may be called from many threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trident::data {

using TokenId = uint32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` to `out`. With allow_special, the text of a special token
  // ("<|endoftext|>") becomes that token's id; without, it is encoded as ordinary text.
  // Throws trident::Error (kValue) for text the tokenizer cannot encode; the message names
  // the byte offset (Gpt2Tokenizer: invalid UTF-8).
  virtual void encode_append(std::string_view text, bool allow_special,
                             std::vector<TokenId>& out) const = 0;
  std::vector<TokenId> encode(std::string_view text, bool allow_special = false) const {
    std::vector<TokenId> ids;
    encode_append(text, allow_special, ids);
    return ids;
  }

  // The bytes the ids stand for, concatenated (not necessarily valid UTF-8 when the ids are a
  // slice of a longer sequence). Throws trident::Error (kIndex) for an id >= vocab_size(),
  // naming the id and its position.
  virtual std::string decode(std::span<const TokenId> ids) const = 0;

  // Ids are 0..vocab_size()-1.
  virtual int64_t vocab_size() const = 0;
  // The token that separates documents (GPT-2's "<|endoftext|>"), if the tokenizer has one.
  virtual std::optional<TokenId> eot_id() const = 0;
  // The token a model expects at the start of a text (Llama's "<s>", Llama 3's
  // "<|begin_of_text|>"), if the tokenizer names one. encode() never adds it.
  virtual std::optional<TokenId> bos_id() const { return std::nullopt; }
  // What it is, for logs: "bytes", "gpt2 (DIR/vocab.json + DIR/merges.txt)".
  virtual std::string name() const = 0;
};

}  // namespace trident::data
