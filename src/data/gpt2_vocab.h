// Loading GPT-2's byte-level BPE files: the vocabulary (token -> id) and the merge list.
//
// Two spellings of the same data are accepted, from one directory:
//   Hugging Face: vocab.json + merges.txt      OpenAI: encoder.json + vocab.bpe
// The Hugging Face pair is used when both are present. The vocabulary is a flat JSON object
// from token (written in GPT-2's byte symbols, data/byte_unicode.h) to id; the merge file has
// an optional "#version" first line, then one merge "A B" per line, highest priority first.
//
// Loading validates that the files describe a byte-level BPE and returns a Status naming the
// file, line, column and offending value otherwise: malformed JSON, ids that are negative,
// repeated or not 0..N-1, a token outside the 256 byte symbols, a byte without its token, a
// merge naming a token that is not in the vocabulary or making one that is not, a merge made
// twice, a vocabulary entry that is neither a byte, a merge result nor a special token
// "<|name|>".
// Not here: the encoding algorithm (data/bpe.h, data/gpt2_tokenizer.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/bpe_vocab.h"
#include "data/tokenizer.h"

namespace trident::data {

// Reads the vocabulary and merges from `dir` (see the header comment for the formats).
// Errors: kIO when no pair of files is present or a file cannot be read; kValue for content.
StatusOr<BpeVocab> load_gpt2_vocab(const std::filesystem::path& dir);

// The same, from the two files' contents; the names are used in messages only.
StatusOr<BpeVocab> parse_gpt2_vocab(std::string_view vocab_json, const std::string& vocab_name,
                                     std::string_view merges_txt, const std::string& merges_name);

}  // namespace trident::data
