// Builds the tokenizer a config or command line names (data.tokenizer / --tokenizer), finding
// its files:
//   byte                        256 ids, one per byte; no files
//   gpt2                        GPT-2's vocab.json + merges.txt (or encoder.json + vocab.bpe) in
//                               `vocab`, else $TRIDENT_GPT2_DIR, ../shared/data/gpt2, data/gpt2,
//                               build/data/gpt2
//   cl100k_base, o200k_base     NAME.tiktoken in `vocab` (a directory or the file itself), else
//                               $TRIDENT_TIKTOKEN_DIR, ../shared/data/tiktoken, data/tiktoken,
//                               build/data/tiktoken (scripts/fetch-tiktoken-ranks.sh fetches them)
//   llama3, tiktoken, hf,       the file or model directory in `vocab`, read as that kind
//   sentencepiece
//   PATH (a file or directory)  detected from the files, as Hugging Face's AutoTokenizer users
//                               expect of a model directory: tokenizer.json (byte-level BPE),
//                               else tokenizer.model (a tiktoken rank file such as Llama 3's, or
//                               a SentencePiece model such as Llama 2's), else GPT-2's file
//                               pair, else a single *.tiktoken file
// Errors name the file or directory, what was looked for, and what is allowed.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "data/tokenizer.h"

namespace trident::train {

// What --tokenizer and data.tokenizer accept, for help texts.
extern const char* const kTokenizerHelp;

StatusOr<std::unique_ptr<data::Tokenizer>> make_tokenizer(const std::string& spec,
                                                          const std::string& vocab);

}  // namespace trident::train
