// Where the data-layer tests find their inputs, and small helpers they share.
//
// GPT-2's vocabulary is looked up in this order:
//   1. $TRIDENT_GPT2_DIR, used as given (a directory without the files fails the tests)
//   2. ../shared/data/gpt2 next to the repository (the workspace's read-only copy), if it has
//      either file pair
//   3. <build>/data/gpt2, where `scripts/fetch-gpt2-vocab.sh <build>/data/gpt2` puts it
// Tests that need it skip with a message saying how to get it. Corpora (Tiny Shakespeare,
// War and Peace) are looked up in ../shared/data only.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "data/byte_unicode.h"
#include "data/gpt2_tokenizer.h"
#include "data/utf8.h"

namespace trident::data::testing {

namespace fs = std::filesystem;

inline fs::path repo_root() {
  return fs::path(__FILE__).parent_path().parent_path().parent_path();
}
inline fs::path golden_path() {
  return fs::path(__FILE__).parent_path() / "tiktoken_gpt2_golden.json";
}

// The build directory: the test binary is <build>/tests/data_test.
inline std::optional<fs::path> build_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  return exe.parent_path().parent_path();
}

inline bool has_gpt2_files(const fs::path& dir) {
  return (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) ||
         (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe"));
}

inline std::optional<fs::path> find_gpt2_dir() {
  if (const char* env = std::getenv("TRIDENT_GPT2_DIR"); env && *env) return fs::path(env);
  if (fs::path shared = repo_root().parent_path() / "shared" / "data" / "gpt2";
      has_gpt2_files(shared))
    return shared;
  if (auto build = build_dir(); build && has_gpt2_files(*build / "data" / "gpt2"))
    return *build / "data" / "gpt2";
  return std::nullopt;
}

inline std::string gpt2_missing_message() {
  return "GPT-2 vocabulary not found: set TRIDENT_GPT2_DIR, or run "
         "scripts/fetch-gpt2-vocab.sh " +
         (build_dir() ? (*build_dir() / "data" / "gpt2").string() : std::string("BUILD/data/gpt2"));
}

// The GPT-2 tokenizer, loaded once per process; null when the files are not found.
inline const Gpt2Tokenizer* shared_gpt2() {
  static const std::unique_ptr<Gpt2Tokenizer> tokenizer = []() -> std::unique_ptr<Gpt2Tokenizer> {
    std::optional<fs::path> dir = find_gpt2_dir();
    if (!dir) return nullptr;
    auto loaded = Gpt2Tokenizer::load(*dir);
    loaded.status().throw_if_error();
    return std::move(loaded).value();
  }();
  return tokenizer.get();
}

// tiktoken's rank files (cl100k_base.tiktoken, o200k_base.tiktoken) are looked up in
// $TRIDENT_TIKTOKEN_DIR, ../shared/data/tiktoken, then <build>/data/tiktoken, where
// `scripts/fetch-tiktoken-ranks.sh <build>/data/tiktoken` puts them.
inline std::optional<fs::path> find_rank_file(const std::string& encoding) {
  const std::string file = encoding + ".tiktoken";
  if (const char* env = std::getenv("TRIDENT_TIKTOKEN_DIR"); env && *env) return fs::path(env) / file;
  if (fs::path shared = repo_root().parent_path() / "shared" / "data" / "tiktoken" / file;
      fs::exists(shared))
    return shared;
  if (auto build = build_dir(); build && fs::exists(*build / "data" / "tiktoken" / file))
    return *build / "data" / "tiktoken" / file;
  return std::nullopt;
}

inline std::string rank_file_missing_message(const std::string& encoding) {
  return encoding + ".tiktoken not found: set TRIDENT_TIKTOKEN_DIR, or run "
         "scripts/fetch-tiktoken-ranks.sh " +
         (build_dir() ? (*build_dir() / "data" / "tiktoken").string() : std::string("BUILD/data/tiktoken"));
}

inline std::optional<fs::path> find_shared_file(const std::string& name) {
  const fs::path path = repo_root().parent_path() / "shared" / "data" / name;
  if (fs::exists(path)) return path;
  return std::nullopt;
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// 64-bit FNV-1a, as tests/data/tiktoken_golden.mjs computes it (printed as 16 hex digits).
class Fnv1a64 {
 public:
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ull;
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash_));
    return buf;
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

// The FNV-1a hash of a token sequence: each id as 4 little-endian bytes (as the reference
// generators compute it).
inline std::string ids_hash(const std::vector<TokenId>& ids) {
  Fnv1a64 h;
  for (TokenId id : ids) {
    const unsigned char le[4] = {
        static_cast<unsigned char>(id), static_cast<unsigned char>(id >> 8),
        static_cast<unsigned char>(id >> 16), static_cast<unsigned char>(id >> 24)};
    h.update(le, 4);
  }
  return h.hex();
}

// A string as C++ would write it, for failure messages.
inline std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

// Compares `tok` with tiktoken on every code point: `records` holds, for each Unicode scalar
// value c in order (surrogates skipped), a little-endian uint32 count and that many uint32
// ids, tiktoken's encoding of `probe` with every "{c}" replaced by c. Returns the number of
// code points whose ids differ, reporting the first 20 through `on_mismatch`, and whether the
// records were exactly used up.
template <class Tok, class OnMismatch>
std::pair<size_t, bool> count_code_point_mismatches(const Tok& tok, const std::string& probe,
                                                    const std::string& records,
                                                    const OnMismatch& on_mismatch) {
  size_t pos = 0, mismatches = 0;
  bool complete = true;
  auto read_u32 = [&] {
    uint32_t v = 0;
    if (pos + 4 <= records.size())
      std::memcpy(&v, records.data() + pos, 4);
    else
      complete = false;
    pos += 4;
    return v;
  };
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string c, text;
    append_utf8(c, cp);
    for (size_t at = 0; at < probe.size();) {
      if (probe.compare(at, 3, "{c}") == 0) {
        text += c;
        at += 3;
      } else {
        text += probe[at++];
      }
    }
    std::vector<TokenId> expected(read_u32());
    if (!complete) break;
    for (TokenId& id : expected) id = read_u32();
    if (tok.encode(text) != expected && ++mismatches <= 20) on_mismatch(cp);
  }
  return {mismatches, complete && pos == records.size()};
}

// A fresh, empty directory under the system's temp directory, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "trident_data_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_file(const fs::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

// A small byte-level BPE vocabulary in GPT-2's file formats: the 256 byte tokens with ids in
// byte order (not GPT-2's order: the loader must use the file's ids), then the token made by
// each merge, then "<|endoftext|>". Merges are given as raw bytes.
struct TinyVocab {
  std::string vocab_json;
  std::string merges_txt;
};

inline std::string json_string(std::string_view utf8) {
  std::string out = "\"";
  for (char c : utf8) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

inline TinyVocab tiny_vocab(const std::vector<std::pair<std::string, std::string>>& merges) {
  TinyVocab v;
  v.vocab_json = "{";
  int id = 0;
  for (int b = 0; b < 256; ++b)
    v.vocab_json += json_string(bytes_to_symbols(std::string(1, static_cast<char>(b)))) + ": " +
                    std::to_string(id++) + ", ";
  v.merges_txt = "#version: 0.2\n";
  for (const auto& [left, right] : merges) {
    v.vocab_json +=
        json_string(bytes_to_symbols(left + right)) + ": " + std::to_string(id++) + ", ";
    v.merges_txt += bytes_to_symbols(left) + " " + bytes_to_symbols(right) + "\n";
  }
  v.vocab_json += "\"<|endoftext|>\": " + std::to_string(id) + "}";
  return v;
}

inline BpeVocab parse_tiny(const TinyVocab& v) {
  auto parsed = parse_gpt2_vocab(v.vocab_json, "vocab.json", v.merges_txt, "merges.txt");
  parsed.status().throw_if_error();
  return std::move(parsed).value();
}

}  // namespace trident::data::testing
