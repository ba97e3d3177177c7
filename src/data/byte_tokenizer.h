// The byte-level tokenizer: id = byte value, 256 ids, no files and no special tokens.
// Any byte string is accepted (it need not be UTF-8), so it is the tokenizer for data whose
// encoding is unknown and for tests. Not here: an end-of-text token (eot_id() is empty, so
// prepared documents are concatenated without a separator).
#pragma once

#include "data/tokenizer.h"

namespace trident::data {

class ByteTokenizer final : public Tokenizer {
 public:
  void encode_append(std::string_view text, bool allow_special,
                     std::vector<TokenId>& out) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::optional<TokenId> eot_id() const override { return std::nullopt; }
  std::string name() const override { return "bytes"; }
};

}  // namespace trident::data
