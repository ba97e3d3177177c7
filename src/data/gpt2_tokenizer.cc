// GPT-2's tokenizer: special-token splitting, pre-tokenization, cached BPE (gpt2_tokenizer.h).
#include "data/gpt2_tokenizer.h"

#include "core/check.h"
#include "data/utf8.h"

namespace trident::data {

StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::load(const std::filesystem::path& dir) {
  StatusOr<Gpt2Vocab> vocab = load_gpt2_vocab(dir);
  if (!vocab.is_ok()) return vocab.status();
  return std::make_unique<Gpt2Tokenizer>(std::move(vocab).value());
}

Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Vocab vocab) : vocab_(std::move(vocab)), bpe_(vocab_) {
  for (const auto& [text, id] : vocab_.special_tokens)
    if (text == "<|endoftext|>") eot_id_ = id;
}

void Gpt2Tokenizer::encode_append(std::string_view text, bool allow_special,
                                  std::vector<TokenId>& out) const {
  if (std::optional<Utf8Error> bad = find_invalid_utf8(text))
    TRI_CHECK(false, "GPT-2 tokenizer: the text is not valid UTF-8 at byte offset ", bad->offset,
              ": ", bad->reason);
  if (!allow_special || vocab_.special_tokens.empty()) {
    encode_ordinary(text, out);
    return;
  }
  // The leftmost special token (the longest, if two start at the same byte) ends each stretch.
  size_t pos = 0;
  while (pos < text.size()) {
    size_t found = std::string_view::npos, length = 0;
    TokenId id = 0;
    for (const auto& [special, special_id] : vocab_.special_tokens) {
      const size_t at = text.find(special, pos);
      if (at < found || (at == found && at != std::string_view::npos && special.size() > length)) {
        found = at;
        length = special.size();
        id = special_id;
      }
    }
    if (found == std::string_view::npos) {
      encode_ordinary(text.substr(pos), out);
      return;
    }
    encode_ordinary(text.substr(pos, found - pos), out);
    out.push_back(id);
    pos = found + length;
  }
}

void Gpt2Tokenizer::encode_ordinary(std::string_view text, std::vector<TokenId>& out) const {
  pretokenizer_.split(text, [&](std::string_view piece) { encode_piece(piece, out); });
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
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

std::string Gpt2Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    TRI_CHECK_INDEX(ids[i] < vocab_.token_bytes.size(), "GPT-2 tokenizer: cannot decode id ",
                    ids[i], " at position ", i, ": the vocabulary has ", vocab_.token_bytes.size(),
                    " tokens (ids 0..", vocab_.token_bytes.size() - 1, ")");
    out += vocab_.token_bytes[ids[i]];
  }
  return out;
}

std::string_view Gpt2Tokenizer::token_bytes(TokenId id) const {
  TRI_CHECK_INDEX(id < vocab_.token_bytes.size(), "GPT-2 tokenizer: id ", id,
                  " is out of range (the vocabulary has ", vocab_.token_bytes.size(), " tokens)");
  return vocab_.token_bytes[id];
}

}  // namespace trident::data
