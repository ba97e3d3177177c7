// Reading a whole tokenizer or text file into memory, and walking its lines, as the data
// layer's loaders do.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"

namespace trident::data {

// The bytes of `path`. Errors: kIO naming the path and the system's reason.
StatusOr<std::string> read_file(const std::filesystem::path& path);

// The lines of a text, for loaders whose errors name a line: split at '\n', with a '\r' before
// it dropped (Windows line ends); a final '\n' ends the last line rather than starting one.
class TextLines {
 public:
  explicit TextLines(std::string_view text) : text_(text) {}
  // The next line, or false at the end of the text.
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    line = text_.substr(pos_, end - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = end + 1;
    ++line_no_;
    return true;
  }
  // The 1-based number of the line next() returned last (0 before the first).
  size_t line_no() const { return line_no_; }
  // The text after that line.
  std::string_view rest() const {
    return pos_ < text_.size() ? text_.substr(pos_) : std::string_view();
  }

 private:
  std::string_view text_;
  size_t pos_ = 0, line_no_ = 0;
};

}  // namespace trident::data
