#include "serve/text_stream.h"

#include <algorithm>

namespace trident::serve {

size_t complete_utf8_prefix(const std::string& s) {
  // Look back at most 3 bytes for the lead byte of the last character.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back < len ? n - back : n;
  }
  return n;
}

std::string TextStream::add(int64_t token) {
  if (stopped_) return "";
  ids_.push_back(static_cast<data::TokenId>(token));
  return ready(false);
}

std::string TextStream::finish() {
  if (stopped_) return "";
  return ready(true);
}

std::string TextStream::ready(bool final) {
  std::string text = data::decode_continuation(tokenizer_, context_, ids_);
  // A stop string ends the text where it begins.
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, text.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    text.resize(cut);
  }
  size_t ok = text.size();
  if (!stopped_ && !final) {
    ok = complete_utf8_prefix(text);
    // Hold back a tail that could be the start of a stop string.
    for (const std::string& s : stop_)
      for (size_t k = std::min(s.size() - 1, ok); k > 0; --k)
        if (text.compare(ok - k, k, s, 0, k) == 0) {
          ok = std::min(ok, ok - k);
          break;
        }
  }
  // Decoding more tokens may change earlier text (a tokenizer's cleanup); send only what extends
  // what was sent.
  if (ok < sent_.size() || text.compare(0, sent_.size(), sent_) != 0) return "";
  std::string delta = text.substr(sent_.size(), ok - sent_.size());
  sent_ += delta;
  return delta;
}

}  // namespace trident::serve
