// The SentencePiece library behind the Tokenizer interface (sentencepiece_tokenizer.h).
#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "core/check.h"
#include "data/read_file.h"

namespace trident::data {

StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::load(
    const std::filesystem::path& file) {
  StatusOr<std::string> bytes = read_file(file);
  if (!bytes.is_ok()) return bytes.status();
  return from_serialized(bytes.value(), file.string());
}

StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::from_serialized(
    std::string_view model, const std::string& name) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const auto status = processor->LoadFromSerializedProto(model); !status.ok())
    return Status::invalid(name + ": not a SentencePiece model the library can load (" +
                           status.ToString() + ")");
  if (processor->GetPieceSize() <= 0)
    return Status::invalid(name + ": the SentencePiece model has no pieces");
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(std::move(processor), name));
}

SentencePieceTokenizer::SentencePieceTokenizer(
    std::unique_ptr<sentencepiece::SentencePieceProcessor> processor, std::string source)
    : processor_(std::move(processor)), source_(std::move(source)) {
  std::vector<std::pair<std::string, TokenId>> controls;
  for (int id = 0; id < processor_->GetPieceSize(); ++id)
    if (processor_->IsControl(id))
      controls.emplace_back(processor_->IdToPiece(id), static_cast<TokenId>(id));
  controls_ = SpecialTokenMatcher(controls);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::encode_ordinary(std::string_view text,
                                             std::vector<TokenId>& out) const {
  if (text.empty()) return;
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  TRI_CHECK(status.ok(), "sentencepiece tokenizer (", source_, "): ", status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}

void SentencePieceTokenizer::encode_append(std::string_view text, bool allow_special,
                                           std::vector<TokenId>& out) const {
  controls_.encode(
      text, allow_special, "sentencepiece", out,
      [&](std::string_view stretch, std::vector<TokenId>& ids) { encode_ordinary(stretch, ids); });
}

std::string SentencePieceTokenizer::decode(std::span<const TokenId> ids) const {
  const int64_t n = vocab_size();
  std::vector<int> as_int(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    TRI_CHECK_INDEX(ids[i] < static_cast<uint64_t>(n), "sentencepiece tokenizer: cannot decode id ",
                    ids[i], " at position ", i, ": the vocabulary has ", n, " pieces (ids 0..",
                    n - 1, ")");
    as_int[i] = static_cast<int>(ids[i]);
  }
  std::string text;
  const auto status = processor_->Decode(as_int, &text);
  TRI_CHECK(status.ok(), "sentencepiece tokenizer (", source_, "): ", status.ToString());
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const {
  return processor_->GetPieceSize();
}

std::optional<TokenId> SentencePieceTokenizer::eot_id() const {
  const int id = processor_->eos_id();
  return id >= 0 ? std::optional<TokenId>(static_cast<TokenId>(id)) : std::nullopt;
}

std::optional<TokenId> SentencePieceTokenizer::bos_id() const {
  const int id = processor_->bos_id();
  return id >= 0 ? std::optional<TokenId>(static_cast<TokenId>(id)) : std::nullopt;
}

std::vector<SentencePieceTokenizer::Piece> SentencePieceTokenizer::pieces() const {
  std::vector<Piece> out(static_cast<size_t>(processor_->GetPieceSize()));
  for (int id = 0; id < processor_->GetPieceSize(); ++id) {
    Piece& p = out[static_cast<size_t>(id)];
    p.text = processor_->IdToPiece(id);
    p.score = processor_->GetScore(id);
    p.kind = processor_->IsUnknown(id) ? Piece::Kind::kUnknown
             : processor_->IsControl(id) ? Piece::Kind::kControl
             : processor_->IsByte(id)    ? Piece::Kind::kByte
             : processor_->IsUnused(id)  ? Piece::Kind::kUnused
                                         : Piece::Kind::kNormal;
  }
  return out;
}

bool SentencePieceTokenizer::adds_dummy_prefix() const {
  std::vector<std::string> pieces;
  if (!processor_->Encode("a", &pieces).ok() || pieces.empty()) return false;
  return pieces.front().starts_with("\xe2\x96\x81");
}

}  // namespace trident::data
