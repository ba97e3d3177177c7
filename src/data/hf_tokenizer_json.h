// Hugging Face tokenizer.json files of byte-level BPE models (GPT-2, Llama 3, Qwen2 and other
// models whose tokenizers were converted from tiktoken): the vocabulary, merges, split
// pattern and added tokens, encoded by the byte-level BPE tokenizer
// (data/byte_level_bpe_tokenizer.h).
//
// Supported, and anything else is an error naming the file, the field and what is allowed:
//   model              {"type": "BPE", "vocab": {token: id}, "merges": ["a b", ...] or
//                      [["a", "b"], ...]}, with no dropout, byte_fallback false, no
//                      continuing_subword_prefix or end_of_word_suffix
//   normalizer         null
//   pre_tokenizer      ByteLevel (use_regex true: GPT-2's pattern), or Sequence [Split (Regex
//                      one of tiktoken's patterns, behavior Isolated, invert false), ByteLevel
//                      (use_regex false)]; add_prefix_space false
//   decoder            null or ByteLevel
//   added_tokens       without lstrip, rstrip or single_word; they become special tokens
//   post_processor     ignored: encode() never adds bos/eos (bos_id() names the token)
// eot_id/bos_id: the eos_token/bos_token of tokenizer_config.json beside the file, else the
// first of <|endoftext|>, <|end_of_text|>, </s> (eot) and <|begin_of_text|>, <s> (bos) that
// is an added token.
//
// Note [tokenizer.json merges as ranks]
// Hugging Face's BPE joins, at each step, the adjacent pair of lowest merge index, and only
// listed pairs. tiktoken joins the adjacent pair whose concatenation is the token of lowest
// rank (data/bpe.h). We encode by tiktoken's rule, with a token's rank the index of the first
// merge that makes it, except in files converted from tiktoken: those set ignore_merges
// (tiktoken's whole-piece shortcut), their ids are tiktoken's ranks and their merges make
// tokens in id order; there every multi-byte token ranks by its id, including the tokens no
// merge makes (no two tokens of lower rank join into them, yet tiktoken can join two parts of
// higher rank into them; cl100k has such tokens, and War and Peace needs them). So a Llama 3
// tokenizer.json gives exactly the ids of Meta's tiktoken tokenizer (the test converts cl100k
// as Hugging Face's converter does and compares with tiktoken on War and Peace); Hugging
// Face's own library can differ from tiktoken on the rare words that need such joins. For
// GPT-2's tokenizer.json the two rules agree (the test shows the GPT-2 tokenizer's ids on
// whole corpora). A BPE trained by Hugging Face could differ from its own library on rare
// words; we take the file's model to be tiktoken's.
// Thread safety: loading is a pure function of the files.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "data/byte_level_bpe_tokenizer.h"

namespace trident::data {

// Loads a tokenizer.json file (and the tokenizer_config.json beside it, if any).
// Errors: kIO for a file that cannot be read; kValue for content.
StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> load_hf_tokenizer_json(
    const std::filesystem::path& file);

// The same from the contents; `name` is used in messages, `config_json` may be empty.
StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> parse_hf_tokenizer_json(
    std::string_view json, const std::string& name, std::string_view config_json = {});

}  // namespace trident::data
