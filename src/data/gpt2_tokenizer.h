// GPT-2's byte-level BPE tokenizer, producing exactly the ids of tiktoken's `gpt2` encoding:
// GPT-2's files (data/gpt2_vocab.h) with GPT-2's split pattern, encoded by the byte-level BPE
// tokenizer every byte-level vocabulary shares (data/byte_level_bpe_tokenizer.h).
// Thread safety: as ByteLevelBpeTokenizer (every method may be called from many threads).
#pragma once

#include <filesystem>
#include <memory>

#include "core/status.h"
#include "data/byte_level_bpe_tokenizer.h"
#include "data/gpt2_vocab.h"

namespace trident::data {

class Gpt2Tokenizer final : public ByteLevelBpeTokenizer {
 public:
  // Loads vocab.json + merges.txt or encoder.json + vocab.bpe from `dir` (data/gpt2_vocab.h).
  static StatusOr<std::unique_ptr<Gpt2Tokenizer>> load(const std::filesystem::path& dir);
  explicit Gpt2Tokenizer(BpeVocab vocab);
};

}  // namespace trident::data
