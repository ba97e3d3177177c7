// Finding special tokens' texts ("<|endoftext|>", "<s>") in a text, for the tokenizers'
// encode(text, allow_special = true): the text between them is encoded as ordinary text.
// The leftmost occurrence wins, and the longest special token when several start at one byte.
// encode() is the front every tokenizer's encode_append shares: it checks UTF-8, then encodes
// the stretches between special tokens with the tokenizer's own encoder.
// Thread safety: split() is const.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"
#include "data/tokenizer.h"
#include "data/utf8.h"

namespace trident::data {

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher() = default;
  // Empty texts are ignored.
  explicit SpecialTokenMatcher(const std::vector<std::pair<std::string, TokenId>>& specials) {
    for (const auto& special : specials)
      if (!special.first.empty()) by_length_.push_back(special);
    std::stable_sort(by_length_.begin(), by_length_.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (const auto& special : by_length_)
      first_byte_[static_cast<unsigned char>(special.first[0])] = true;
  }

  bool empty() const { return by_length_.empty(); }

  // Appends the ids of `text` to `out`: encode_ordinary(stretch, out) for ordinary text, the
  // special tokens' ids when allow_special. Throws trident::Error (kValue) naming the byte
  // offset, after "<label> tokenizer: ", for text that is not valid UTF-8.
  template <class EncodeOrdinary>
  void encode(std::string_view text, bool allow_special, std::string_view label,
              std::vector<TokenId>& out, const EncodeOrdinary& encode_ordinary) const {
    if (std::optional<Utf8Error> bad = find_invalid_utf8(text))
      TRI_CHECK(false, label, " tokenizer: the text is not valid UTF-8 at byte offset ",
                bad->offset, ": ", bad->reason);
    if (!allow_special || empty()) {
      encode_ordinary(text, out);
      return;
    }
    split(
        text, [&](std::string_view stretch) { encode_ordinary(stretch, out); },
        [&](TokenId id) { out.push_back(id); });
  }

  // Calls on_text(stretch) for the text before, between and after the special tokens (possibly
  // empty) and on_special(id) for each, in order.
  template <class OnText, class OnSpecial>
  void split(std::string_view text, const OnText& on_text, const OnSpecial& on_special) const {
    size_t stretch = 0;
    for (size_t pos = 0; pos < text.size(); ++pos) {
      if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
      for (const auto& [special, id] : by_length_) {
        if (text.compare(pos, special.size(), special) != 0) continue;
        on_text(text.substr(stretch, pos - stretch));
        on_special(id);
        stretch = pos + special.size();
        pos = stretch - 1;
        break;
      }
    }
    on_text(text.substr(stretch));
  }

 private:
  std::vector<std::pair<std::string, TokenId>> by_length_;  // longest first
  std::array<bool, 256> first_byte_{};                      // which bytes start one
};

}  // namespace trident::data
