// Loss masks: which tokens of a token file are trained on (instruction and chat data: the
// completion's and the assistant's tokens, end-of-turn included; not the prompt's). One byte
// per token, 1 = trained, 0 = not, in a file beside the token file (train.bin -> train.mask),
// written by `trident prepare` with the pair and published with it (data/prepare.h). A sampler
// given one sets the target of every window position whose token is 0 in the mask to -1, the
// ignore index cross-entropy skips (data/sampler.h), so a masked token is read as input and
// never scored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace trident::data {

// The mask file of token file `tokens` (".bin" -> ".mask", else ".mask" appended).
std::filesystem::path loss_mask_path(const std::filesystem::path& tokens);

// Writes `mask` (0 or 1 per token) atomically.
Status write_loss_mask(const std::filesystem::path& path, std::span<const uint8_t> mask);

class LossMask {
 public:
  // Reads `path`, which must hold one byte, 0 or 1, for each of `tokens` tokens of token file
  // `token_file`; errors name both files, the sizes or the first other byte and its offset.
  static StatusOr<std::shared_ptr<const LossMask>> open(const std::filesystem::path& path, int64_t tokens,
                                                        const std::string& token_file);
  // The mask beside `token_file` (loss_mask_path), or null when there is none.
  static StatusOr<std::shared_ptr<const LossMask>> open_beside(const std::filesystem::path& token_file,
                                                               int64_t tokens);
  bool trains(int64_t i) const { return bits_[static_cast<size_t>(i)] != 0; }
  int64_t size() const { return static_cast<int64_t>(bits_.size()); }
  // Tokens trained on.
  int64_t trained() const;
  const std::string& name() const { return name_; }

 private:
  std::vector<uint8_t> bits_;
  std::string name_;
};

}  // namespace trident::data
