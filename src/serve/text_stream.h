// The text of a generation as its tokens arrive, for a server's answers: what may be sent now
// and where a stop string ends it. A token can end in the middle of a UTF-8 character (byte-level
// tokenizers split them), and the text sent must never hold part of a stop string that the next
// token could complete, so the undecided tail is held back until it is decided: OpenAI's and
// vLLM's streams never show a stop string or a broken character.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/decode_continuation.h"
#include "data/tokenizer.h"

namespace trident::serve {

class TextStream {
 public:
  // `context`: the prompt's tokens, whose last few are decoded before the generated ones (Note
  // [Decoding a continuation] in data/decode_continuation.h).
  TextStream(const data::Tokenizer& tokenizer, std::vector<std::string> stop, std::span<const int64_t> context = {})
      : tokenizer_(tokenizer), stop_(std::move(stop)) {
    for (size_t i = context.size() - std::min(context.size(), data::kContinuationContextTokens); i < context.size(); ++i)
      context_.push_back(static_cast<data::TokenId>(context[i]));
  }

  // Adds a token; returns the text that may be sent now (possibly empty). After a stop string
  // appears, stopped() is true and nothing more is returned.
  std::string add(int64_t token);
  // The generation has ended: the rest of the text (a broken last character as U+FFFD).
  std::string finish();
  bool stopped() const { return stopped_; }
  // Everything sent so far.
  const std::string& sent() const { return sent_; }
  int64_t tokens() const { return static_cast<int64_t>(ids_.size()); }

 private:
  std::string ready(bool final);

  const data::Tokenizer& tokenizer_;
  std::vector<std::string> stop_;
  std::vector<data::TokenId> context_;
  std::vector<data::TokenId> ids_;
  std::string sent_;
  bool stopped_ = false;
};

// The length of the longest prefix of `s` that does not end inside a UTF-8 character.
size_t complete_utf8_prefix(const std::string& s);

}  // namespace trident::serve
