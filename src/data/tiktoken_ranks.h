// tiktoken's BPE rank files and the encodings built on them: OpenAI's cl100k_base and
// o200k_base, and Meta's Llama 3, whose tokenizer.model is such a file.
//
// A rank file has one line per mergeable token, "BASE64 RANK": the token's bytes in standard
// base64 and its rank, which is also its id (tiktoken's load_tiktoken_bpe). The file carries
// neither the split pattern nor the special tokens; those come with the encoding's name
// (tiktoken's registry, Meta's tokenizer.py), so a file is matched to an encoding by its name
// (cl100k_base.tiktoken) or, failing that, by its number of ranks (128,000: Llama 3).
//
// Note [Llama 3's special tokens]
// Llama 3's 256 special tokens are not in tokenizer.model: Meta's tokenizer.py appends them
// at ids 128000..128255. We use the Llama 3.1 names (models/llama3_1/tokenizer.py), which
// Llama 3.2 and 3.3 keep; Llama 3.0 called 128004, 128005, 128008 and 128010 reserved tokens
// instead. The ids that matter for training and chat agree in all of them:
// <|begin_of_text|> 128000 (bos_id), <|end_of_text|> 128001 (eot_id: the end of a document in
// pretraining), <|start_header_id|> 128006, <|end_header_id|> 128007, <|eot_id|> 128009.
//
// Errors name the file and line: a line that is not "BASE64 RANK", invalid base64, ranks that
// repeat or are not 0..N-1, a token listed twice, a byte without its token, a count of ranks
// that is not the encoding's.
// Not here: encoding (data/byte_level_bpe_tokenizer.h).
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/bpe_vocab.h"
#include "data/byte_level_bpe_tokenizer.h"
#include "data/pretokenize.h"

namespace trident::data {

struct TiktokenEncoding {
  std::string name;        // "cl100k_base", "o200k_base", "llama3"
  size_t mergeable_ranks;  // lines of its rank file
  SplitPattern pattern;
  std::vector<std::pair<std::string, TokenId>> special_tokens;
  std::string eot_text, bos_text;
};

// The encodings trident knows: cl100k_base, o200k_base, llama3.
std::span<const TiktokenEncoding> tiktoken_encodings();
// The encoding called `name`, or null.
const TiktokenEncoding* find_tiktoken_encoding(std::string_view name);

// The mergeable tokens of a rank file's contents (token_bytes[rank], every multi-byte token
// in merge_results, no special tokens yet); `name` is used in messages.
StatusOr<BpeVocab> parse_tiktoken_ranks(std::string_view text, const std::string& name);

// Loads a rank file as `encoding` (a name from tiktoken_encodings()), or, when `encoding` is
// empty, as the encoding its file name or its number of ranks says. Errors: kIO for a file
// that cannot be read; kValue for content or an encoding that does not fit the file.
StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> load_tiktoken_ranks(
    const std::filesystem::path& file, std::string_view encoding = {});

}  // namespace trident::data
