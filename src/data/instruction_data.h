// Instruction and chat data for fine-tuning: JSONL files, one example per line, either
//   {"prompt": "...", "completion": "..."}     the prompt, then the completion, then the
//                                              tokenizer's end-of-text token (when it has one)
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
//                                              rendered by a chat template (data/chat_template.h)
// tokenized into one stream with a loss mask beside it (data/loss_mask.h): only the completion
// and the assistant's turns (their end-of-turn included) are trained on. Blank lines are
// skipped; every other line must be one of the two, and an error names the file, the line and
// the field (not JSON, a missing or mistyped field, an unknown role, a conversation with no
// assistant message, an empty completion).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/tokenizer.h"

namespace trident::data {

struct InstructionTokens {
  std::vector<TokenId> ids;
  std::vector<uint8_t> mask;          // 1: trained
  std::vector<int64_t> example_ends;  // the token index after each example
  int64_t bytes = 0;                  // input bytes read
};

// Reads `files` in order; `chat_template` renders "messages" examples (one of
// chat_template_names()).
StatusOr<InstructionTokens> tokenize_instruction_files(const Tokenizer& tokenizer,
                                                       const std::vector<std::filesystem::path>& files,
                                                       const std::string& chat_template);

}  // namespace trident::data
