#include "data/decode_continuation.h"

#include <vector>

namespace trident::data {

std::string decode_continuation(const Tokenizer& tokenizer, std::span<const TokenId> context,
                                std::span<const TokenId> ids) {
  if (context.empty() || ids.empty()) return tokenizer.decode(ids);
  const std::span<const TokenId> tail = context.last(std::min(context.size(), kContinuationContextTokens));
  std::vector<TokenId> joint(tail.begin(), tail.end());
  joint.insert(joint.end(), ids.begin(), ids.end());
  const std::string before = tokenizer.decode(tail), all = tokenizer.decode(joint);
  if (!all.starts_with(before)) return tokenizer.decode(ids);
  return all.substr(before.size());
}

}  // namespace trident::data
