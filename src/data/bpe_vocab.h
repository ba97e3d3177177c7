// A byte-level BPE vocabulary in the form every loader produces and the encoder consumes:
// GPT-2's vocab.json + merges.txt (data/gpt2_vocab.h), tiktoken rank files
// (data/tiktoken_ranks.h) and Hugging Face tokenizer.json (data/hf_tokenizer_json.h).
//
// The merge priority is the only thing the three disagree on in spelling: GPT-2 lists merges
// (line r makes one token), a rank file gives every token a rank (its id), tokenizer.json
// lists merges that may make the same token more than once. Each loader turns its spelling
// into merge_results: the tokens in merge priority order. See Note [tiktoken's merge rule] in
// data/bpe.h for why a priority per token (not per pair) is all the encoder needs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace trident::data {

struct BpeVocab {
  // The bytes each id stands for; for a special token, its text. Indexed by id (0..N-1).
  std::vector<std::string> token_bytes;
  // The mergeable multi-byte tokens in merge priority order (merge_results[0] merges first):
  // for GPT-2, merge_results[r] is the id made by the merge on line r of merges.txt. A token
  // that is neither a single byte, a special token nor listed here is produced only when a
  // whole piece is that token (tiktoken's shortcut, data/bpe.h).
  std::vector<TokenId> merge_results;
  // Special tokens ("<|endoftext|>") and their ids, in id order.
  std::vector<std::pair<std::string, TokenId>> special_tokens;
  // The files read, for messages: "DIR/vocab.json + DIR/merges.txt".
  std::string source;
};

}  // namespace trident::data
