// The byte-level tokenizer (see byte_tokenizer.h).
#include "data/byte_tokenizer.h"

#include "core/check.h"

namespace trident::data {

void ByteTokenizer::encode_append(std::string_view text, bool /*allow_special*/,
                                  std::vector<TokenId>& out) const {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  out.insert(out.end(), bytes, bytes + text.size());
}

std::string ByteTokenizer::decode(std::span<const TokenId> ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    TRI_CHECK_INDEX(ids[i] < 256, "ByteTokenizer::decode: id ", ids[i], " at position ", i,
                    " is not a byte (allowed: 0..255)");
    out[i] = static_cast<char>(ids[i]);
  }
  return out;
}

}  // namespace trident::data
