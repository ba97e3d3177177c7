// The text that tokens add after a context (a prompt's tokens): what `sample` prints after the
// prompt and what `serve` answers.
//
// Note [Decoding a continuation]
// decode(ids) of a continuation alone is not always the text it adds: a SentencePiece model
// (Llama 2, Mistral) drops the space that the first piece of a text stands for ("\u2581world"
// decodes as "world" at the start), so a completion of "Hello" would read "world" where the model
// wrote " world". As vLLM's incremental detokenizer does, the continuation is decoded after the
// context's last few tokens and the context's own text is cut off: decode(tail + ids) past
// decode(tail). For byte-level tokenizers decoding is concatenation, so this is decode(ids). When
// the context's text is not a prefix of the joint text (a normalizing model), decode(ids) is
// returned as before.
#pragma once

#include <span>
#include <string>

#include "data/tokenizer.h"

namespace trident::data {

// How many of the context's last tokens are decoded before the continuation.
inline constexpr size_t kContinuationContextTokens = 5;

std::string decode_continuation(const Tokenizer& tokenizer, std::span<const TokenId> context,
                                std::span<const TokenId> ids);

}  // namespace trident::data
