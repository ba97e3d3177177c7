// tiktoken rank files: the reader, and the encodings' patterns and special tokens
// (tiktoken_ranks.h).
#include "data/tiktoken_ranks.h"

#include <algorithm>

#include "data/byte_level_vocab.h"
#include "data/byte_string_map.h"
#include "data/read_file.h"

namespace trident::data {
namespace {

// Llama 3's special tokens in id order from 128000. See Note [Llama 3's special tokens].
std::vector<std::pair<std::string, TokenId>> llama3_special_tokens() {
  const char* named[] = {"<|begin_of_text|>",
                         "<|end_of_text|>",
                         "<|reserved_special_token_0|>",
                         "<|reserved_special_token_1|>",
                         "<|finetune_right_pad_id|>",
                         "<|reserved_special_token_2|>",
                         "<|start_header_id|>",
                         "<|end_header_id|>",
                         "<|eom_id|>",
                         "<|eot_id|>",
                         "<|python_tag|>"};
  std::vector<std::pair<std::string, TokenId>> specials;
  TokenId id = 128000;
  for (const char* name : named) specials.emplace_back(name, id++);
  for (int reserved = 3; id < 128256; ++reserved)
    specials.emplace_back("<|reserved_special_token_" + std::to_string(reserved) + "|>", id++);
  return specials;
}

std::vector<TiktokenEncoding> make_encodings() {
  std::vector<TiktokenEncoding> encodings;
  // tiktoken_ext/openai_public.py.
  encodings.push_back({"cl100k_base",
                       100256,
                       SplitPattern::kCl100k,
                       {{"<|endoftext|>", 100257},
                        {"<|fim_prefix|>", 100258},
                        {"<|fim_middle|>", 100259},
                        {"<|fim_suffix|>", 100260},
                        {"<|endofprompt|>", 100276}},
                       "<|endoftext|>",
                       ""});
  encodings.push_back({"o200k_base",
                       199998,
                       SplitPattern::kO200k,
                       {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}},
                       "<|endoftext|>",
                       ""});
  // Meta's llama3 tokenizer.py: cl100k's pattern.
  encodings.push_back({"llama3", 128000, SplitPattern::kCl100k, llama3_special_tokens(),
                       "<|end_of_text|>", "<|begin_of_text|>"});
  return encodings;
}

// The value of one base64 digit (standard alphabet), or -1.
int base64_digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding, as tiktoken writes it; nullopt if `text` is not.
std::optional<std::string> decode_base64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  std::string out;
  uint32_t bits = 0;
  int nbits = 0;
  for (size_t i = 0; i + padding < text.size(); ++i) {
    const int d = base64_digit(text[i]);
    if (d < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(d);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out.push_back(static_cast<char>((bits >> nbits) & 0xFF));
    }
  }
  // The bits left over must be zero (a canonical encoding).
  if ((bits & ((1u << nbits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace

std::span<const TiktokenEncoding> tiktoken_encodings() {
  static const std::vector<TiktokenEncoding> encodings = make_encodings();
  return encodings;
}

const TiktokenEncoding* find_tiktoken_encoding(std::string_view name) {
  for (const TiktokenEncoding& e : tiktoken_encodings())
    if (e.name == name) return &e;
  return nullptr;
}

StatusOr<BpeVocab> parse_tiktoken_ranks(std::string_view text, const std::string& name) {
  BpeVocab vocab;
  // Ranks are the ids 0..N-1 of N lines: one past the lines is refused before it sizes the
  // tables (a rank of 999999999 allocated gigabytes), and, every line holding one rank (a blank
  // line is an error), distinct ranks below the line count leave no gap.
  const size_t max_lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) +
                           (text.empty() || text.back() == '\n' ? 0 : 1);
  std::vector<size_t> line_of_rank;  // 0: not seen
  ByteStringMap<size_t> line_of_token;
  TextLines lines(text);
  std::string_view line;
  while (lines.next(line)) {
    const size_t line_no = lines.line_no();
    const std::string at = name + ":" + std::to_string(line_no) + ": ";
    const size_t space = line.find(' ');
    if (line.empty() || space == std::string_view::npos ||
        line.find(' ', space + 1) != std::string_view::npos)
      return Status::invalid(at +
                             "expected \"BASE64 RANK\" (a token's bytes in base64, one "
                             "space, its rank), found " +
                             printable_token(line));
    const std::optional<std::string> bytes = decode_base64(line.substr(0, space));
    if (!bytes)
      return Status::invalid(at + printable_token(line.substr(0, space)) +
                             " is not standard base64 (A-Z a-z 0-9 + /, padded with = to a "
                             "multiple of 4)");
    const std::string_view rank_text = line.substr(space + 1);
    uint64_t rank = 0;
    bool digits = !rank_text.empty() && rank_text.size() <= 9;
    for (char c : rank_text) {
      digits = digits && c >= '0' && c <= '9';
      rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!digits)
      return Status::invalid(at + "the rank " + printable_token(rank_text) +
                             " is not a non-negative integer below 10^9");
    if (rank >= max_lines)
      return Status::invalid(at + "the rank " + std::to_string(rank) + " of " + printable_token(*bytes) +
                             " is out of range: ranks are ids and must be 0..N-1, and a file of " +
                             std::to_string(max_lines) + " lines has ranks below " + std::to_string(max_lines));
    if (rank >= line_of_rank.size()) line_of_rank.resize(rank + 1, 0);
    if (line_of_rank[rank] != 0)
      return Status::invalid(at + "rank " + std::to_string(rank) + " is also the rank on line " +
                             std::to_string(line_of_rank[rank]));
    line_of_rank[rank] = line_no;
    if (auto [first, inserted] = line_of_token.insert(*bytes, line_no); !inserted)
      return Status::invalid(at + "the token " + printable_token(*bytes) +
                             " is also listed on line " + std::to_string(*first));
    if (vocab.token_bytes.size() <= rank) vocab.token_bytes.resize(rank + 1);
    vocab.token_bytes[rank] = *bytes;
  }
  if (lines.line_no() == 0) return Status::invalid(name + ": the rank file is empty");
  for (int b = 0; b < 256; ++b)
    if (line_of_token.find(std::string(1, static_cast<char>(b))) == nullptr)
      return Status::invalid(name + ": there is no token for the byte " + std::to_string(b) +
                             ": a byte-level BPE rank file has a token for each of the 256 bytes");
  for (size_t rank = 0; rank < vocab.token_bytes.size(); ++rank)
    if (vocab.token_bytes[rank].size() > 1)
      vocab.merge_results.push_back(static_cast<TokenId>(rank));
  vocab.source = name;
  return vocab;
}

StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> load_tiktoken_ranks(
    const std::filesystem::path& file, std::string_view encoding) {
  StatusOr<std::string> text = read_file(file);
  if (!text.is_ok()) return text.status();
  StatusOr<BpeVocab> parsed = parse_tiktoken_ranks(text.value(), file.string());
  if (!parsed.is_ok()) return parsed.status();
  BpeVocab vocab = std::move(parsed).value();
  const size_t ranks = vocab.token_bytes.size();

  std::string known;
  for (const TiktokenEncoding& e : tiktoken_encodings())
    known +=
        (known.empty() ? "" : ", ") + e.name + " (" + std::to_string(e.mergeable_ranks) + " ranks)";
  const TiktokenEncoding* enc = nullptr;
  if (!encoding.empty()) {
    enc = find_tiktoken_encoding(encoding);
    if (enc == nullptr)
      return Status::invalid("unknown tiktoken encoding '" + std::string(encoding) + "' for " +
                             file.string() + " (known: " + known + ")");
  } else {
    enc = find_tiktoken_encoding(file.stem().string());
    for (const TiktokenEncoding& e : tiktoken_encodings())
      if (enc == nullptr && e.mergeable_ranks == ranks) enc = &e;
    if (enc == nullptr)
      return Status::invalid(file.string() + ": a rank file of " + std::to_string(ranks) +
                             " tokens is none of the encodings trident knows (" + known +
                             "), whose split patterns and special tokens it would need");
  }
  if (enc->mergeable_ranks != ranks)
    return Status::invalid(file.string() + ": " + enc->name + " has " +
                           std::to_string(enc->mergeable_ranks) + " ranks, but the file has " +
                           std::to_string(ranks));

  // Special tokens take their ids after the ranks; ids in between (cl100k's 100261..100275)
  // stand for nothing (empty bytes, which decode refuses).
  for (const auto& [text_of, id] : enc->special_tokens) {
    if (vocab.token_bytes.size() <= id) vocab.token_bytes.resize(id + 1);
    vocab.token_bytes[id] = text_of;
    vocab.special_tokens.emplace_back(text_of, id);
  }
  ByteLevelBpeOptions options;
  options.pattern = enc->pattern;
  options.kind = enc->name;
  options.label = enc->name;
  options.eot_text = enc->eot_text;
  options.bos_text = enc->bos_text;
  return std::make_unique<ByteLevelBpeTokenizer>(std::move(vocab), std::move(options));
}

}  // namespace trident::data
