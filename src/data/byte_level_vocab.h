// Assembling and checking a byte-level BPE vocabulary written in GPT-2's byte symbols
// (data/byte_unicode.h), whichever file it came from: GPT-2's vocab.json + merges.txt
// (data/gpt2_vocab.h) or a Hugging Face tokenizer.json (data/hf_tokenizer_json.h). The readers
// parse their syntax; this checks the meaning, with messages that name where each entry was
// written (the reader says how to name it: "vocab.json:12:3", "tokenizer.json: model.merges[7]").
//
// Checks: keys and ids unique, ids exactly 0..N-1, a token for each of the 256 bytes, each
// merge joining two tokens into a third one, every other token a special token, every
// non-special token spelled in byte symbols.
// Not here: file syntax, encoding.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "data/bpe_vocab.h"

namespace trident::data {

struct SymbolEntry {
  std::string key;  // as written (UTF-8, JSON escapes resolved)
  TokenId id;
  size_t at;  // the reader's position of the entry, passed back to VocabRules::where_entry
};

struct SymbolMerge {
  std::string left, right;  // as written, in byte symbols
  size_t at;                // the reader's position of the merge, for VocabRules::where_merge
};

struct VocabRules {
  std::string vocab_name, merges_name;  // for messages ("DIR/vocab.json")
  // "FILE:LINE:COL" (or a JSON path) of the entry or merge whose `at` is given.
  std::function<std::string(size_t at)> where_entry, where_merge;
  // A merge named inside a sentence: "line 7", "model.merges[7]".
  std::function<std::string(size_t at)> name_merge;
  // Whether a token that is neither a byte nor made by a merge is a special token (kept as
  // its text). GPT-2: "<|name|>"; tokenizer.json: one of its added_tokens.
  std::function<bool(std::string_view key)> is_special;
  // What a special token looks like, for the message when is_special says no.
  std::string special_description;
  // tokenizer.json files converted from tiktoken list every way to make a token as a merge;
  // the first one gives the token its priority. GPT-2's merges.txt makes each token once.
  bool allow_repeated_merges = false;
  // Whether a token that is neither a byte, made by a merge nor special is kept (it is then
  // produced only when a whole piece is that token: tiktoken's shortcut, Hugging Face's
  // ignore_merges). tokenizer.json files converted from tiktoken have such tokens when no two
  // tokens of lower rank make them.
  bool allow_unmerged_tokens = false;
  // Whether special tokens may take ids past N - 1, leaving unused ids (cl100k's added tokens
  // 100257..100276 skip 100261..100275). The vocabulary size is then the largest id + 1, below
  // N + kMaxSpecialIdGaps.
  bool allow_special_id_gaps = false;
};

// How many unused ids special tokens may leave (cl100k leaves 15): an id far past the
// vocabulary is refused, rather than making a table of that many ids.
inline constexpr size_t kMaxSpecialIdGaps = 1024;

// The vocabulary of `entries` (any order) and `merges` (priority order).
StatusOr<BpeVocab> assemble_byte_level_vocab(const std::vector<SymbolEntry>& entries,
                                             const std::vector<SymbolMerge>& merges,
                                             const VocabRules& rules);

// "name:line:column" (both 1-based; the column counts bytes) of byte `offset` of `text`.
std::string text_position(const std::string& name, std::string_view text, size_t offset);

// A token as it appears in messages: quoted, control characters escaped, long ones cut.
std::string printable_token(std::string_view s);

}  // namespace trident::data
