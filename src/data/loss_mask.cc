#include "data/loss_mask.h"

#include <fstream>
#include <numeric>
#include <sstream>

#include "data/token_file.h"

namespace trident::data {

std::filesystem::path loss_mask_path(const std::filesystem::path& tokens) {
  std::filesystem::path p = tokens;
  if (p.extension() == ".bin") return p.replace_extension(".mask");
  return std::filesystem::path(p.string() + ".mask");
}

Status write_loss_mask(const std::filesystem::path& path, std::span<const uint8_t> mask) {
  return write_atomically(path, {}, reinterpret_cast<const char*>(mask.data()), mask.size(), mask.empty());
}

StatusOr<std::shared_ptr<const LossMask>> LossMask::open(const std::filesystem::path& path, int64_t tokens,
                                                         const std::string& token_file) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot open the loss mask " + path.string() + " of " + token_file);
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string bytes = std::move(buf).str();
  if (static_cast<int64_t>(bytes.size()) != tokens)
    return Status::invalid("the loss mask " + path.string() + " has " + std::to_string(bytes.size()) +
                           " bytes, but its token file " + token_file + " has " + std::to_string(tokens) +
                           " tokens (one byte per token): they are from different prepares; run `trident prepare` again");
  auto mask = std::make_shared<LossMask>();
  mask->bits_.assign(bytes.begin(), bytes.end());
  mask->name_ = path.string();
  for (size_t i = 0; i < mask->bits_.size(); ++i)
    if (mask->bits_[i] > 1)
      return Status::invalid("the loss mask " + path.string() + " holds byte " + std::to_string(mask->bits_[i]) +
                             " at offset " + std::to_string(i) + ": a mask holds 0 (not trained) or 1 (trained)");
  if (mask->trained() == 0)
    return Status::invalid("the loss mask " + path.string() + " trains on no token of " + token_file);
  return std::shared_ptr<const LossMask>(std::move(mask));
}

StatusOr<std::shared_ptr<const LossMask>> LossMask::open_beside(const std::filesystem::path& token_file,
                                                                int64_t tokens) {
  const std::filesystem::path path = loss_mask_path(token_file);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::shared_ptr<const LossMask>();
  return open(path, tokens, token_file.string());
}

int64_t LossMask::trained() const { return std::accumulate(bits_.begin(), bits_.end(), int64_t{0}); }

}  // namespace trident::data
