// SentencePiece models (Llama 2, Mistral, Gemma: tokenizer.model), encoded by the SentencePiece
// library itself (sentencepiece::SentencePieceProcessor, Debian's libsentencepiece), so the
// ids are the library's. Not a re-implementation: this adapts the library to the Tokenizer
// interface.
//
// encode(text, allow_special): the text must be valid UTF-8 (an error names the byte offset).
// Without allow_special it is one call of the library's Encode (which adds the model's dummy
// prefix "▁" when the model says so, as Llama's does). With allow_special, the texts of the
// model's control pieces ("<s>", "</s>") become their ids and the text between them is encoded
// separately (each stretch gets the dummy prefix, as Hugging Face's legacy Llama tokenizer
// does). User-defined pieces are matched by the library in any case.
// decode(ids): the library's Decode (byte-fallback pieces become their bytes, the dummy
// prefix of the first piece is dropped, control pieces decode to nothing).
// Round trips: decode(encode(text)) == text when the model does not normalize (Llama's
// normalizer is "identity" and it keeps extra whitespace); a model that applies NFKC or
// collapses spaces changes the text as the library does.
// eot_id: the model's eos (</s>); bos_id: its bos (<s>); either absent when the model has
// none. encode() never adds them.
// Thread safety: encode and decode may be called from many threads (the library's methods
// are const).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/special_tokens.h"
#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace trident::data {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads a model file. Errors: kIO when it cannot be read; kValue when the library rejects
  // it (the message names the file and gives the library's reason).
  static StatusOr<std::unique_ptr<SentencePieceTokenizer>> load(const std::filesystem::path& file);
  // The same from a serialized ModelProto; `name` is used in messages.
  static StatusOr<std::unique_ptr<SentencePieceTokenizer>> from_serialized(std::string_view model,
                                                                           const std::string& name);
  ~SentencePieceTokenizer() override;

  void encode_append(std::string_view text, bool allow_special,
                     std::vector<TokenId>& out) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  int64_t vocab_size() const override;
  std::optional<TokenId> eot_id() const override;
  std::optional<TokenId> bos_id() const override;
  std::string name() const override { return "sentencepiece (" + source_ + ")"; }

  // The model's pieces by id, with their scores and kinds: what GGUF's "llama" vocabulary lists
  // (tokenizer.ggml.tokens, scores and token_type).
  struct Piece {
    enum class Kind : uint8_t { kNormal, kUnknown, kControl, kUnused, kByte };
    std::string text;
    float score = 0.0f;
    Kind kind = Kind::kNormal;
  };
  std::vector<Piece> pieces() const;
  // Whether encoding puts "\u2581" before the text (the normalizer's add_dummy_prefix; Llama's does).
  bool adds_dummy_prefix() const;

 private:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor,
                         std::string source);
  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string source_;
  SpecialTokenMatcher controls_;  // the control pieces' texts
};

}  // namespace trident::data
