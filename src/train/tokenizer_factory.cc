// The tokenizer a name or path stands for (tokenizer_factory.h).
#include "train/tokenizer_factory.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_tokenizer_json.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tiktoken_ranks.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;
using TokenizerOr = StatusOr<std::unique_ptr<data::Tokenizer>>;

const char* const kKinds =
    "byte, gpt2, cl100k_base, o200k_base, llama3, tiktoken, hf, sentencepiece";

template <class T>
TokenizerOr upcast(StatusOr<std::unique_ptr<T>> loaded) {
  if (!loaded.is_ok()) return loaded.status();
  return std::unique_ptr<data::Tokenizer>(std::move(loaded).value());
}

bool has_gpt2_files(const fs::path& dir) {
  return (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) ||
         (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe"));
}

// Whether the file's first line is "BASE64 RANK" (a tiktoken rank file, not a SentencePiece
// model, whose first bytes are a protobuf field tag).
bool looks_like_rank_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || line.size() > 4096) return false;
  const size_t space = line.find(' ');
  if (space == 0 || space == std::string::npos || space + 1 == line.size()) return false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    const bool ok =
        i < space
            ? (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')
            : (i == space || (c >= '0' && c <= '9') || (c == '\r' && i + 1 == line.size()));
    if (!ok) return false;
  }
  return true;
}

// A tokenizer file whose kind is `kind` ("tiktoken", "hf", "sentencepiece", "llama3").
TokenizerOr load_file_as(const std::string& kind, const fs::path& file) {
  if (kind == "hf") return upcast(data::load_hf_tokenizer_json(file));
  if (kind == "sentencepiece") return upcast(data::SentencePieceTokenizer::load(file));
  return upcast(data::load_tiktoken_ranks(file, kind == "llama3" ? "llama3" : ""));
}

// A file's kind from its name, then its first line.
std::string detect_file(const fs::path& file) {
  if (file.filename() == "tokenizer.json" || file.extension() == ".json") return "hf";
  if (file.extension() == ".tiktoken" || looks_like_rank_file(file)) return "tiktoken";
  return "sentencepiece";
}

// A path (file or directory) as a tokenizer; `kind` forces how a file is read ("" detects).
TokenizerOr load_path(const fs::path& path, const std::string& kind) {
  if (!fs::exists(path))
    return Status::io_error("tokenizer path '" + path.string() + "' does not exist (expected " +
                            "a tokenizer file or a model directory, or one of: " + kKinds + ")");
  if (!fs::is_directory(path)) {
    // One of GPT-2's files stands for its directory.
    const std::string name = path.filename().string();
    if (kind.empty() && (name == "vocab.json" || name == "merges.txt" || name == "encoder.json" ||
                         name == "vocab.bpe"))
      return upcast(data::Gpt2Tokenizer::load(path.parent_path()));
    return load_file_as(kind.empty() ? detect_file(path) : kind, path);
  }
  if (kind.empty() || kind == "hf")
    if (fs::exists(path / "tokenizer.json")) return load_file_as("hf", path / "tokenizer.json");
  if (kind.empty() || kind == "tiktoken" || kind == "llama3" || kind == "sentencepiece")
    if (fs::exists(path / "tokenizer.model"))
      return load_file_as(kind.empty() ? detect_file(path / "tokenizer.model") : kind,
                          path / "tokenizer.model");
  if ((kind.empty() || kind == "gpt2") && has_gpt2_files(path))
    return upcast(data::Gpt2Tokenizer::load(path));
  if (kind.empty() || kind == "tiktoken") {
    std::vector<fs::path> rank_files;
    for (const auto& entry : fs::directory_iterator(path))
      if (entry.path().extension() == ".tiktoken") rank_files.push_back(entry.path());
    if (rank_files.size() == 1) return load_file_as("tiktoken", rank_files[0]);
  }
  return Status::io_error(
      "no tokenizer" + (kind.empty() ? std::string() : " of kind " + kind) + " in '" +
      path.string() +
      "': expected tokenizer.json (Hugging Face, byte-level BPE), tokenizer.model "
      "(SentencePiece, or Llama 3's tiktoken ranks), vocab.json + merges.txt "
      "(GPT-2), or one *.tiktoken rank file");
}

// The first of `candidates` where `found` holds, else an error listing them.
StatusOr<fs::path> search(const std::vector<std::string>& candidates,
                          const std::function<bool(const fs::path&)>& found,
                          const std::string& what, const std::string& how_to_get) {
  std::string looked;
  for (const std::string& dir : candidates) {
    if (found(dir)) return fs::path(dir);
    looked += (looked.empty() ? "" : ", ") + dir;
  }
  return Status::io_error(what + " not found (looked in: " + looked + "); " + how_to_get);
}

std::vector<std::string> search_dirs(const char* env_var, const std::string& sub) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv(env_var); env && *env) dirs.push_back(env);
  dirs.insert(dirs.end(), {"../shared/data/" + sub, "data/" + sub, "build/data/" + sub});
  return dirs;
}

}  // namespace

const char* const kTokenizerHelp =
    "byte, gpt2, cl100k_base, o200k_base, or a tokenizer file / model directory (tokenizer.json, "
    "tokenizer.model, *.tiktoken; llama3, tiktoken, hf, sentencepiece read --vocab as that kind)";

TokenizerOr make_tokenizer(const std::string& spec, const std::string& vocab) {
  if (spec == "byte")
    return std::unique_ptr<data::Tokenizer>(std::make_unique<data::ByteTokenizer>());
  if (spec == "gpt2") {
    if (!vocab.empty()) return upcast(data::Gpt2Tokenizer::load(vocab));
    StatusOr<fs::path> dir =
        search(search_dirs("TRIDENT_GPT2_DIR", "gpt2"), has_gpt2_files, "GPT-2 vocabulary",
               "set data.vocab_dir, or fetch it with scripts/fetch-gpt2-vocab.sh data/gpt2");
    if (!dir.is_ok()) return dir.status();
    return upcast(data::Gpt2Tokenizer::load(dir.value()));
  }
  if (const data::TiktokenEncoding* enc = data::find_tiktoken_encoding(spec);
      enc && spec != "llama3") {
    const std::string file = enc->name + ".tiktoken";
    if (!vocab.empty())
      return upcast(data::load_tiktoken_ranks(
          fs::is_directory(vocab) ? fs::path(vocab) / file : fs::path(vocab), enc->name));
    StatusOr<fs::path> dir = search(
        search_dirs("TRIDENT_TIKTOKEN_DIR", "tiktoken"),
        [&](const fs::path& d) { return fs::exists(d / file); }, file,
        "set data.vocab_dir, or fetch it with scripts/fetch-tiktoken-ranks.sh data/tiktoken");
    if (!dir.is_ok()) return dir.status();
    return upcast(data::load_tiktoken_ranks(dir.value() / file, enc->name));
  }
  if (spec == "llama3" || spec == "tiktoken" || spec == "hf" || spec == "sentencepiece") {
    if (vocab.empty())
      return Status::invalid("tokenizer '" + spec +
                             "' reads its file from data.vocab_dir / --vocab, which is empty "
                             "(give the tokenizer file or its model directory)");
    return load_path(vocab, spec);
  }
  // Anything else must be a path.
  if (spec.find('/') == std::string::npos && spec.find('.') == std::string::npos &&
      !fs::exists(spec))
    return Status::invalid("unknown tokenizer '" + spec + "' (allowed: " + kKinds +
                           ", or a tokenizer file or model directory)");
  return load_path(spec, "");
}

}  // namespace trident::train
