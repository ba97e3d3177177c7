// Builds the tokenizer a config names ("gpt2" or "byte"), finding GPT-2's vocabulary files.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "data/tokenizer.h"

namespace trident::train {

// For "gpt2", the vocabulary directory is `vocab_dir` if set, else the first of: $TRIDENT_GPT2_DIR,
// ../shared/data/gpt2, ./data/gpt2, build/data/gpt2 that holds the files. The error lists
// where it looked and how to fetch the files (scripts/fetch-gpt2-vocab.sh).
StatusOr<std::unique_ptr<data::Tokenizer>> make_tokenizer(const std::string& name, const std::string& vocab_dir);

}  // namespace trident::train
