// GPT-2's tokenizer: its files and pattern on the shared byte-level BPE (gpt2_tokenizer.h).
#include "data/gpt2_tokenizer.h"

namespace trident::data {

StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::load(const std::filesystem::path& dir) {
  StatusOr<BpeVocab> vocab = load_gpt2_vocab(dir);
  if (!vocab.is_ok()) return vocab.status();
  return std::make_unique<Gpt2Tokenizer>(std::move(vocab).value());
}

Gpt2Tokenizer::Gpt2Tokenizer(BpeVocab vocab)
    : ByteLevelBpeTokenizer(std::move(vocab), ByteLevelBpeOptions{}) {}

}  // namespace trident::data
