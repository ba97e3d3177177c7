// A tokenizer as GGUF's tokenizer.ggml.* metadata, so that llama.cpp tokenizes and detokenizes
// as trident does (llama.cpp's src/llama-vocab.cpp reads these keys):
//   byte-level BPE (GPT-2, tiktoken rank files, tokenizer.json): model "gpt2", the tokens in
//     GPT-2's byte-to-unicode spelling, the merges as "left right", and the pre-tokenizer by
//     its split pattern: "gpt-2" (GPT-2's), "llama-bpe" (cl100k's, which Llama 3 uses),
//     "gpt-4o" (o200k's);
//   SentencePiece (Llama 2, Mistral): model "llama", the pieces with their scores and kinds;
//   bytes (trident's byte tokenizer): model "gpt2" with the 256 bytes as tokens and no merges,
//     so every byte is its own token (llama.cpp's SentencePiece path would first turn spaces
//     into "\u2581").
// A model whose embedding has more rows than the tokenizer has ids (a vocabulary padded to a
// multiple of 64) gets "[PAD<id>]" tokens of type UNUSED for the rest, as llama.cpp's converter
// writes them: llama.cpp requires one token per row.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "data/tokenizer.h"
#include "export/gguf_file.h"

namespace trident::exporting {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class GgufTokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The tokenizer.ggml.* keys for `tokenizer` and a model of `model_vocab` ids (>= its ids).
StatusOr<GgufMetadata> gguf_tokenizer_metadata(const data::Tokenizer& tokenizer, int64_t model_vocab);

}  // namespace trident::exporting
