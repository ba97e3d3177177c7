// Byte-level BPE: special-token splitting, pre-tokenization, cached BPE
// (byte_level_bpe_tokenizer.h).
#include "data/byte_level_bpe_tokenizer.h"

#include "core/check.h"

namespace trident::data {

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(BpeVocab vocab, ByteLevelBpeOptions options)
    : vocab_(std::move(vocab)),
      options_(std::move(options)),
      bpe_(vocab_),
      pretokenizer_(options_.pattern) {
  eot_id_ = special_id(options_.eot_text);
  bos_id_ = special_id(options_.bos_text);
  specials_ = SpecialTokenMatcher(vocab_.special_tokens);
}

std::optional<TokenId> ByteLevelBpeTokenizer::special_id(std::string_view text) const {
  for (const auto& [special, id] : vocab_.special_tokens)
    if (!text.empty() && special == text) return id;
  return std::nullopt;
}

void ByteLevelBpeTokenizer::encode_append(std::string_view text, bool allow_special,
                                          std::vector<TokenId>& out) const {
  specials_.encode(
      text, allow_special, options_.label, out,
      [&](std::string_view stretch, std::vector<TokenId>& ids) { encode_ordinary(stretch, ids); });
}

void ByteLevelBpeTokenizer::encode_ordinary(std::string_view text,
                                            std::vector<TokenId>& out) const {
  pretokenizer_.split(text, [&](std::string_view piece) { encode_piece(piece, out); });
}

void ByteLevelBpeTokenizer::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (const TokenId* id = bpe_.find_token(piece)) {
    out.push_back(*id);
    return;
  }
  const bool cacheable = piece.size() <= kMaxCachedPieceLength;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (const IdRange* r = cache_.find(piece)) {
      out.insert(out.end(), cache_ids_.begin() + r->first,
                 cache_ids_.begin() + r->first + r->count);
      return;
    }
  }
  const size_t first = out.size();
  bpe_.encode(piece, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) {
      cache_.clear();
      cache_ids_.clear();
    }
    const IdRange range{static_cast<uint32_t>(cache_ids_.size()),
                        static_cast<uint32_t>(out.size() - first)};
    if (cache_.insert(piece, range).second)
      cache_ids_.insert(cache_ids_.end(), out.begin() + static_cast<std::ptrdiff_t>(first),
                        out.end());
  }
}

std::string ByteLevelBpeTokenizer::decode(std::span<const TokenId> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    TRI_CHECK_INDEX(ids[i] < vocab_.token_bytes.size(), options_.label,
                    " tokenizer: cannot decode id ", ids[i], " at position ", i,
                    ": the vocabulary has ", vocab_.token_bytes.size(), " tokens (ids 0..",
                    vocab_.token_bytes.size() - 1, ")");
    const std::string& bytes = vocab_.token_bytes[ids[i]];
    TRI_CHECK_INDEX(!bytes.empty(), options_.label, " tokenizer: cannot decode id ", ids[i],
                    " at position ", i, ": no token has that id (the vocabulary leaves it unused)");
    out += bytes;
  }
  return out;
}

std::string_view ByteLevelBpeTokenizer::token_bytes(TokenId id) const {
  TRI_CHECK_INDEX(id < vocab_.token_bytes.size(), options_.label, " tokenizer: id ", id,
                  " is out of range (the vocabulary has ", vocab_.token_bytes.size(), " tokens)");
  return vocab_.token_bytes[id];
}

std::vector<std::pair<TokenId, TokenId>> ByteLevelBpeTokenizer::merges() const {
  std::vector<std::pair<TokenId, TokenId>> pairs;
  pairs.reserve(vocab_.merge_results.size());
  for (size_t rank = 0; rank < vocab_.merge_results.size(); ++rank) {
    const std::string& bytes = vocab_.token_bytes[vocab_.merge_results[rank]];
    if (bytes.size() < 2) continue;
    const std::vector<size_t> bounds = bpe_.merge_linear(bytes, static_cast<uint32_t>(rank));
    if (bounds.size() != 3) continue;
    const TokenId* left = bpe_.find_token(std::string_view(bytes).substr(0, bounds[1]));
    const TokenId* right = bpe_.find_token(std::string_view(bytes).substr(bounds[1]));
    if (left != nullptr && right != nullptr) pairs.emplace_back(*left, *right);
  }
  return pairs;
}

}  // namespace trident::data
