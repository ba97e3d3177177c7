// GPT-2 vocabulary and merge files: a small JSON reader for the flat token -> id object (so
// every error can name a line and column), the merge-list reader, and the checks that the two
// describe a byte-level BPE.
#include "data/gpt2_vocab.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "data/byte_unicode.h"
#include "data/utf8.h"

namespace trident::data {
namespace {

namespace fs = std::filesystem;

// "name:line:column" (both 1-based; the column counts bytes) of byte `offset` of `text`.
std::string where(const std::string& name, std::string_view text, size_t offset) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return name + ":" + std::to_string(line) + ":" + std::to_string(offset - line_start + 1);
}

// A token as it appears in messages: quoted, control characters escaped, long ones cut.
std::string printable(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

struct VocabEntry {
  std::string key;  // as written (UTF-8, escapes resolved)
  TokenId id;
  size_t offset;  // of the key's opening quote, for messages
};

// Reads a JSON object whose values are all non-negative integers: {"token": id, ...}.
class VocabJsonReader {
 public:
  VocabJsonReader(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  Status read(std::vector<VocabEntry>& entries) {
    if (auto bad = find_invalid_utf8(text_))
      return fail(bad->offset, "not valid UTF-8: " + bad->reason);
    skip_space();
    if (!consume('{')) return fail(pos_, "expected '{' at the start of the vocabulary object");
    skip_space();
    if (consume('}')) return finish();
    while (true) {
      VocabEntry e;
      e.offset = pos_;
      if (Status s = read_string(e.key); !s.is_ok()) return s;
      skip_space();
      if (!consume(':')) return fail(pos_, "expected ':' after the key " + printable(e.key));
      skip_space();
      if (Status s = read_id(e.key, e.id); !s.is_ok()) return s;
      entries.push_back(std::move(e));
      skip_space();
      if (consume('}')) return finish();
      if (!consume(','))
        return fail(pos_,
                    "expected ',' or '}' after the entry for " + printable(entries.back().key));
      skip_space();
    }
  }

 private:
  Status fail(size_t offset, const std::string& message) const {
    return Status::invalid(where(name_, text_, offset) + ": " + message);
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
        return fail(start, "the id of " + printable(key) + " is larger than 2^31 - 1");
    }
    const bool fraction =
        !at_end() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E');
    if (pos_ == start || fraction) {
      size_t end = pos_;
      while (end < text_.size() && !std::strchr(",} \t\r\n", text_[end])) ++end;
      return fail(start,
                  "the value of " + printable(key) + " must be a non-negative integer id, found '" +
                      std::string(text_.substr(start, std::min<size_t>(end - start, 40))) + "'");
    }
    id = static_cast<TokenId>(value);
    return Status::ok();
  }

  std::string_view text_;
  const std::string& name_;
  size_t pos_ = 0;
};

struct MergeLine {
  std::string left, right;  // as written, in byte symbols
  size_t line;              // 1-based
};

Status read_merges(std::string_view text, const std::string& name, std::vector<MergeLine>& merges) {
  if (auto bad = find_invalid_utf8(text))
    return Status::invalid(where(name, text, bad->offset) + ": not valid UTF-8: " + bad->reason);
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no == 1 && line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    if (line.empty() || space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      // A blank line is allowed only at the very end (a trailing newline leaves none).
      if (line.empty() && text.find_first_not_of("\r\n", pos) == std::string_view::npos) break;
      return Status::invalid(name + ":" + std::to_string(line_no) +
                             ": expected a merge \"LEFT RIGHT\" (two tokens separated by one "
                             "space), found " +
                             printable(line));
    }
    merges.push_back(
        {std::string(line.substr(0, space)), std::string(line.substr(space + 1)), line_no});
  }
  if (merges.empty()) return Status::invalid(name + ": the file has no merges");
  return Status::ok();
}

StatusOr<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot open '" + path.string() + "': " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::io_error("error reading '" + path.string() + "'");
  return buf.str();
}

bool is_special_name(std::string_view key) {
  return key.size() > 4 && key.starts_with("<|") && key.ends_with("|>");
}

}  // namespace

StatusOr<Gpt2Vocab> parse_gpt2_vocab(std::string_view vocab_json, const std::string& vocab_name,
                                     std::string_view merges_txt, const std::string& merges_name) {
  std::vector<VocabEntry> entries;
  if (Status s = VocabJsonReader(vocab_json, vocab_name).read(entries); !s.is_ok()) return s;
  std::vector<MergeLine> merges;
  if (Status s = read_merges(merges_txt, merges_name, merges); !s.is_ok()) return s;

  // Keys and ids must both be unique, and the ids must be exactly 0..N-1.
  const size_t n = entries.size();
  std::unordered_map<std::string_view, size_t> entry_of_key;
  std::vector<int64_t> entry_of_id(n, -1);
  entry_of_key.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const VocabEntry& e = entries[i];
    auto [it, inserted] = entry_of_key.emplace(e.key, i);
    if (!inserted)
      return Status::invalid(where(vocab_name, vocab_json, e.offset) + ": the token " +
                             printable(e.key) + " appears twice (first at " +
                             where(vocab_name, vocab_json, entries[it->second].offset) + ")");
    if (e.id >= n)
      return Status::invalid(where(vocab_name, vocab_json, e.offset) + ": the id " +
                             std::to_string(e.id) + " of " + printable(e.key) +
                             " is out of range: a vocabulary of " + std::to_string(n) +
                             " tokens must use the ids 0.." + std::to_string(n - 1));
    if (entry_of_id[e.id] >= 0)
      return Status::invalid(where(vocab_name, vocab_json, e.offset) + ": the id " +
                             std::to_string(e.id) + " of " + printable(e.key) +
                             " is already the id of " + printable(entries[entry_of_id[e.id]].key));
    entry_of_id[e.id] = static_cast<int64_t>(i);
  }

  // Every byte needs its own token.
  enum class Kind : uint8_t { kUnknown, kByte, kMerge };
  std::vector<Kind> kind(n, Kind::kUnknown);
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(symbol, byte_to_symbol(static_cast<uint8_t>(b)));
    auto it = entry_of_key.find(symbol);
    if (it == entry_of_key.end()) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "byte 0x%02X (written %s, %s)", b, symbol.c_str(),
                    format_code_point(byte_to_symbol(static_cast<uint8_t>(b))).c_str());
      return Status::invalid(vocab_name + ": there is no token for " + buf +
                             ": a GPT-2 byte-level vocabulary has a token for each of the 256 "
                             "bytes");
    }
    kind[it->second] = Kind::kByte;
  }

  // Each merge joins two tokens of the vocabulary into a third one, made by no other merge.
  Gpt2Vocab vocab;
  vocab.merge_results.reserve(merges.size());
  std::vector<size_t> merge_line_of_entry(n, 0);
  for (const MergeLine& m : merges) {
    const std::string at = merges_name + ":" + std::to_string(m.line) + ": ";
    for (const std::string* part : {&m.left, &m.right})
      if (!entry_of_key.contains(*part))
        return Status::invalid(at + "the merge " + printable(m.left) + " + " + printable(m.right) +
                               " names " + printable(*part) + ", which is not in " + vocab_name);
    const std::string joined = m.left + m.right;
    auto it = entry_of_key.find(joined);
    if (it == entry_of_key.end())
      return Status::invalid(at + "the merge " + printable(m.left) + " + " + printable(m.right) +
                             " makes " + printable(joined) + ", which is not in " + vocab_name);
    // (joined has two or more symbols, so it is never a single byte's token.)
    const size_t e = it->second;
    if (kind[e] == Kind::kMerge)
      return Status::invalid(at + "the merge " + printable(m.left) + " + " + printable(m.right) +
                             " makes " + printable(joined) + ", which line " +
                             std::to_string(merge_line_of_entry[e]) + " already makes");
    kind[e] = Kind::kMerge;
    merge_line_of_entry[e] = m.line;
    vocab.merge_results.push_back(entries[e].id);
  }

  // What is left must be a special token; everything else is spelled in byte symbols.
  vocab.token_bytes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const VocabEntry& e = entries[i];
    if (kind[i] == Kind::kUnknown) {
      if (!is_special_name(e.key))
        return Status::invalid(where(vocab_name, vocab_json, e.offset) + ": the token " +
                               printable(e.key) + " (id " + std::to_string(e.id) +
                               ") is neither a byte, the result of a merge in " + merges_name +
                               ", nor a special token \"<|name|>\": this is not a GPT-2 "
                               "byte-level BPE vocabulary");
      vocab.token_bytes[e.id] = e.key;
      vocab.special_tokens.emplace_back(e.key, e.id);
      continue;
    }
    std::optional<std::string> bytes = symbols_to_bytes(e.key);
    if (!bytes)
      return Status::invalid(where(vocab_name, vocab_json, e.offset) + ": the token " +
                             printable(e.key) + " contains " +
                             format_code_point(*first_non_symbol(e.key)) +
                             ", which is not one of GPT-2's 256 byte symbols: this is not a "
                             "GPT-2 byte-level BPE vocabulary");
    vocab.token_bytes[e.id] = std::move(*bytes);
  }
  std::sort(vocab.special_tokens.begin(), vocab.special_tokens.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  vocab.source = vocab_name + " + " + merges_name;
  return vocab;
}

StatusOr<Gpt2Vocab> load_gpt2_vocab(const fs::path& dir) {
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
