#include "train/tokenizer_factory.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/gpt2_tokenizer.h"

namespace trident::train {

StatusOr<std::unique_ptr<data::Tokenizer>> make_tokenizer(const std::string& name, const std::string& vocab_dir) {
  if (name == "byte") return std::unique_ptr<data::Tokenizer>(std::make_unique<data::ByteTokenizer>());
  if (name != "gpt2") return Status::invalid("unknown tokenizer '" + name + "' (allowed: gpt2, byte)");
  std::vector<std::string> candidates;
  if (!vocab_dir.empty()) {
    candidates.push_back(vocab_dir);
  } else {
    if (const char* env = std::getenv("TRIDENT_GPT2_DIR")) candidates.push_back(env);
    candidates.insert(candidates.end(), {"../shared/data/gpt2", "data/gpt2", "build/data/gpt2"});
  }
  std::string looked;
  for (const std::string& dir : candidates) {
    namespace fs = std::filesystem;
    const bool has_hf = fs::exists(fs::path(dir) / "vocab.json") && fs::exists(fs::path(dir) / "merges.txt");
    const bool has_openai = fs::exists(fs::path(dir) / "encoder.json") && fs::exists(fs::path(dir) / "vocab.bpe");
    if (has_hf || has_openai || !vocab_dir.empty()) {
      auto tok = data::Gpt2Tokenizer::load(dir);
      if (!tok.is_ok()) return tok.status();
      return std::unique_ptr<data::Tokenizer>(std::move(tok).value());
    }
    looked += (looked.empty() ? "" : ", ") + dir;
  }
  return Status::io_error("GPT-2 vocabulary not found (looked in: " + looked +
                          "); set data.vocab_dir, or fetch it with scripts/fetch-gpt2-vocab.sh data/gpt2");
}

}  // namespace trident::train
