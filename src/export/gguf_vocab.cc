#include "export/gguf_vocab.h"


#include "data/byte_level_bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/byte_unicode.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/utf8.h"

namespace trident::exporting {
namespace {

// GPT-2's spelling of raw bytes as text (vocab.json's keys).
std::string byte_level_text(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) data::append_utf8(out, data::byte_to_symbol(b));
  return out;
}

const char* pre_tokenizer_name(data::SplitPattern p) {
  switch (p) {
    case data::SplitPattern::kGpt2: return "gpt-2";
    case data::SplitPattern::kCl100k: return "llama-bpe";
    case data::SplitPattern::kO200k: return "gpt-4o";
  }
  return "default";
}

void pad_to(std::vector<std::string>& tokens, std::vector<int32_t>& types, std::vector<float>* scores, int64_t n) {
  for (int64_t id = static_cast<int64_t>(tokens.size()); id < n; ++id) {
    tokens.push_back("[PAD" + std::to_string(id) + "]");
    types.push_back(static_cast<int32_t>(GgufTokenType::kUnused));
    if (scores != nullptr) scores->push_back(-1000.0f);
  }
}

void add_special_ids(GgufMetadata& m, const data::Tokenizer& t) {
  if (t.bos_id()) m.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::u32(*t.bos_id()));
  if (t.eot_id()) m.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(*t.eot_id()));
}

}  // namespace

StatusOr<GgufMetadata> gguf_tokenizer_metadata(const data::Tokenizer& tokenizer, int64_t model_vocab) {
  if (tokenizer.vocab_size() > model_vocab)
    return Status::invalid("the tokenizer " + tokenizer.name() + " has " + std::to_string(tokenizer.vocab_size()) +
                           " ids, more than the model's vocab_size " + std::to_string(model_vocab));
  GgufMetadata m;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  if (const auto* bpe = dynamic_cast<const data::ByteLevelBpeTokenizer*>(&tokenizer)) {
    const data::BpeVocab& v = bpe->vocab();
    std::vector<bool> special(v.token_bytes.size(), false);
    for (const auto& [text, id] : v.special_tokens) special[id] = true;
    for (size_t id = 0; id < v.token_bytes.size(); ++id) {
      tokens.push_back(special[id] ? v.token_bytes[id] : byte_level_text(v.token_bytes[id]));
      types.push_back(static_cast<int32_t>(special[id] ? GgufTokenType::kControl : GgufTokenType::kNormal));
    }
    std::vector<std::string> merges;
    for (const auto& [left, right] : bpe->merges())
      merges.push_back(byte_level_text(v.token_bytes[left]) + " " + byte_level_text(v.token_bytes[right]));
    pad_to(tokens, types, nullptr, model_vocab);
    m.emplace_back("tokenizer.ggml.model", GgufValue::string("gpt2"));
    m.emplace_back("tokenizer.ggml.pre", GgufValue::string(pre_tokenizer_name(bpe->pattern())));
    m.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(std::move(tokens)));
    m.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(types));
    m.emplace_back("tokenizer.ggml.merges", GgufValue::strings(std::move(merges)));
    add_special_ids(m, tokenizer);
    // trident's encode() never adds a BOS token (data/tokenizer.h); llama.cpp should not either.
    m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
    return m;
  }
  if (dynamic_cast<const data::ByteTokenizer*>(&tokenizer) != nullptr) {
    // llama.cpp's SentencePiece path would turn spaces into "\u2581" before its byte fallback;
    // its BPE path with no merges leaves every byte its own token, as trident's byte tokenizer.
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(byte_level_text(std::string(1, static_cast<char>(b))));
      types.push_back(static_cast<int32_t>(GgufTokenType::kNormal));
    }
    pad_to(tokens, types, nullptr, model_vocab);
    m.emplace_back("tokenizer.ggml.model", GgufValue::string("gpt2"));
    m.emplace_back("tokenizer.ggml.pre", GgufValue::string("default"));
    m.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(std::move(tokens)));
    m.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(types));
    m.emplace_back("tokenizer.ggml.merges", GgufValue::strings({}));
    m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
    return m;
  }
  std::vector<float> scores;
  bool space_prefix = false;
  if (const auto* sp = dynamic_cast<const data::SentencePieceTokenizer*>(&tokenizer)) {
    using Kind = data::SentencePieceTokenizer::Piece::Kind;
    for (const auto& p : sp->pieces()) {
      tokens.push_back(p.text);
      scores.push_back(p.score);
      const GgufTokenType t = p.kind == Kind::kUnknown ? GgufTokenType::kUnknown
                              : p.kind == Kind::kControl ? GgufTokenType::kControl
                              : p.kind == Kind::kByte    ? GgufTokenType::kByte
                              : p.kind == Kind::kUnused  ? GgufTokenType::kUnused
                                                         : GgufTokenType::kNormal;
      types.push_back(static_cast<int32_t>(t));
    }
    space_prefix = sp->adds_dummy_prefix();
  } else {
    return Status::invalid("the tokenizer " + tokenizer.name() +
                           " has no GGUF form in trident (byte-level BPE, SentencePiece and bytes have)");
  }
  pad_to(tokens, types, &scores, model_vocab);
  m.emplace_back("tokenizer.ggml.model", GgufValue::string("llama"));
  m.emplace_back("tokenizer.ggml.pre", GgufValue::string("default"));
  m.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(std::move(tokens)));
  m.emplace_back("tokenizer.ggml.scores", GgufValue::f32s(scores));
  m.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(types));
  add_special_ids(m, tokenizer);
  m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  m.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(space_prefix));
  return m;
}

}  // namespace trident::exporting
