// GPT-2 vocabulary and merge files: a small JSON reader for the flat token -> id object (so
// every error can name a line and column), the merge-list reader, and the checks that the two
// describe a byte-level BPE.
#include "data/gpt2_vocab.h"

#include <cstdio>
#include <cstring>

#include "data/byte_level_vocab.h"
#include "data/byte_unicode.h"
#include "data/read_file.h"
#include "data/utf8.h"

namespace trident::data {
namespace {

namespace fs = std::filesystem;

// Reads a JSON object whose values are all non-negative integers: {"token": id, ...}.
class VocabJsonReader {
 public:
  VocabJsonReader(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  Status read(std::vector<SymbolEntry>& entries) {
    if (auto bad = find_invalid_utf8(text_))
      return fail(bad->offset, "not valid UTF-8: " + bad->reason);
    skip_space();
    if (!consume('{')) return fail(pos_, "expected '{' at the start of the vocabulary object");
    skip_space();
    if (consume('}')) return finish();
    while (true) {
      SymbolEntry e;
      e.at = pos_;  // the key's opening quote
      if (Status s = read_string(e.key); !s.is_ok()) return s;
      skip_space();
      if (!consume(':')) return fail(pos_, "expected ':' after the key " + printable_token(e.key));
      skip_space();
      if (Status s = read_id(e.key, e.id); !s.is_ok()) return s;
      entries.push_back(std::move(e));
      skip_space();
      if (consume('}')) return finish();
      if (!consume(','))
        return fail(pos_,
                    "expected ',' or '}' after the entry for " + printable_token(entries.back().key));
      skip_space();
    }
  }

 private:
  Status fail(size_t offset, const std::string& message) const {
    return Status::invalid(text_position(name_, text_, offset) + ": " + message);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                         text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  Status finish() {
    skip_space();
    if (!at_end()) return fail(pos_, "unexpected text after the end of the vocabulary object");
    return Status::ok();
  }

  Status read_hex4(uint32_t& value) {
    value = 0;
    for (int k = 0; k < 4; ++k, ++pos_) {
      if (at_end()) return fail(pos_, "the file ends inside a \\u escape");
      const char c = text_[pos_];
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0)
        return fail(pos_, std::string("expected a hex digit in a \\u escape, found '") + c + "'");
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    return Status::ok();
  }

  Status read_string(std::string& out) {
    if (!consume('"')) return fail(pos_, "expected a string key");
    while (true) {
      if (at_end()) return fail(pos_, "the file ends inside a string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return Status::ok();
      }
      if (static_cast<unsigned char>(c) < 0x20)
        return fail(pos_, "unescaped control character in a string");
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      const size_t escape_at = pos_++;
      if (at_end()) return fail(escape_at, "the file ends inside an escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (Status s = read_hex4(cp); !s.is_ok()) return s;
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair: the low half must follow
            uint32_t low = 0;
            if (!consume('\\') || !consume('u'))
              return fail(escape_at, "high surrogate " + format_code_point(cp) +
                                         " is not followed by a \\u low surrogate");
            if (Status s = read_hex4(low); !s.is_ok()) return s;
            if (low < 0xDC00 || low > 0xDFFF)
              return fail(escape_at, "high surrogate " + format_code_point(cp) +
                                         " is followed by " + format_code_point(low) +
                                         ", not a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail(escape_at, "lone low surrogate " + format_code_point(cp));
          }
          append_utf8(out, cp);
          break;
        }
        default:
          return fail(escape_at, std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  Status read_id(const std::string& key, TokenId& id) {
    const size_t start = pos_;
    uint64_t value = 0;
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
      if (value > 0x7FFFFFFF)
        return fail(start, "the id of " + printable_token(key) + " is larger than 2^31 - 1");
    }
    const bool fraction =
        !at_end() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E');
    if (pos_ == start || fraction) {
      size_t end = pos_;
      while (end < text_.size() && !std::strchr(",} \t\r\n", text_[end])) ++end;
      return fail(start,
                  "the value of " + printable_token(key) + " must be a non-negative integer id, found '" +
                      std::string(text_.substr(start, std::min<size_t>(end - start, 40))) + "'");
    }
    id = static_cast<TokenId>(value);
    return Status::ok();
  }

  std::string_view text_;
  const std::string& name_;
  size_t pos_ = 0;
};

Status read_merges(std::string_view text, const std::string& name, std::vector<SymbolMerge>& merges) {
  if (auto bad = find_invalid_utf8(text))
    return Status::invalid(text_position(name, text, bad->offset) + ": not valid UTF-8: " + bad->reason);
  TextLines lines(text);
  std::string_view line;
  while (lines.next(line)) {
    const size_t line_no = lines.line_no();
    if (line_no == 1 && line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    if (line.empty() || space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      // A blank line is allowed only at the very end (a trailing newline leaves none).
      if (line.empty() && lines.rest().find_first_not_of("\r\n") == std::string_view::npos) break;
      return Status::invalid(name + ":" + std::to_string(line_no) +
                             ": expected a merge \"LEFT RIGHT\" (two tokens separated by one "
                             "space), found " +
                             printable_token(line));
    }
    merges.push_back(
        {std::string(line.substr(0, space)), std::string(line.substr(space + 1)), line_no});
  }
  if (merges.empty()) return Status::invalid(name + ": the file has no merges");
  return Status::ok();
}

bool is_special_name(std::string_view key) {
  return key.size() > 4 && key.starts_with("<|") && key.ends_with("|>");
}

}  // namespace

StatusOr<BpeVocab> parse_gpt2_vocab(std::string_view vocab_json, const std::string& vocab_name,
                                    std::string_view merges_txt, const std::string& merges_name) {
  std::vector<SymbolEntry> entries;
  if (Status s = VocabJsonReader(vocab_json, vocab_name).read(entries); !s.is_ok()) return s;
  std::vector<SymbolMerge> merges;
  if (Status s = read_merges(merges_txt, merges_name, merges); !s.is_ok()) return s;
  VocabRules rules;
  rules.vocab_name = vocab_name;
  rules.merges_name = merges_name;
  rules.where_entry = [&](size_t at) { return text_position(vocab_name, vocab_json, at); };
  rules.where_merge = [&](size_t line) { return merges_name + ":" + std::to_string(line); };
  rules.name_merge = [](size_t line) { return "line " + std::to_string(line); };
  rules.is_special = is_special_name;
  rules.special_description = "a special token \"<|name|>\"";
  return assemble_byte_level_vocab(entries, merges, rules);
}

StatusOr<BpeVocab> load_gpt2_vocab(const fs::path& dir) {
  // (vocabulary, merges) file names, in order of preference.
  const std::pair<const char*, const char*> kLayouts[] = {{"vocab.json", "merges.txt"},
                                                          {"encoder.json", "vocab.bpe"}};
  for (const auto& [vocab_file, merges_file] : kLayouts) {
    const fs::path vocab_path = dir / vocab_file, merges_path = dir / merges_file;
    const bool has_vocab = fs::exists(vocab_path), has_merges = fs::exists(merges_path);
    if (!has_vocab && !has_merges) continue;
    if (has_vocab != has_merges) {
      const fs::path& present = has_vocab ? vocab_path : merges_path;
      const fs::path& missing = has_vocab ? merges_path : vocab_path;
      return Status::io_error(present.string() + " exists but " + missing.string() +
                              " does not: a GPT-2 vocabulary needs both files");
    }
    StatusOr<std::string> vocab_text = read_file(vocab_path);
    if (!vocab_text.is_ok()) return vocab_text.status();
    StatusOr<std::string> merges_text = read_file(merges_path);
    if (!merges_text.is_ok()) return merges_text.status();
    return parse_gpt2_vocab(vocab_text.value(), vocab_path.string(), merges_text.value(),
                            merges_path.string());
  }
  return Status::io_error(
      "no GPT-2 vocabulary in '" + dir.string() +
      "': expected vocab.json and merges.txt (Hugging Face) or encoder.json and vocab.bpe "
      "(OpenAI); scripts/fetch-gpt2-vocab.sh DIR downloads the OpenAI pair");
}

}  // namespace trident::data
