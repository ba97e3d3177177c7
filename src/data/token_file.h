// Token files: nanoGPT's train.bin / val.bin convention, so data prepared there works here
// and the other way round. A file is the token ids as raw little-endian uint16, with no header;
// its size is 2 x the number of tokens.
//
// TokenFile is a read-only view of one, memory-mapped (the OS pages it in on demand and shares
// it between processes), or of tokens held in memory. write_token_file writes one atomically.
// Not here: tokenizing text (data/prepare.h), batching (data/sampler.h).
//
// Note [Little-endian only]
// The ids are used in place from the mapping, which is only right on a little-endian machine;
// every machine trident builds for is one, and the static_assert in token_file.cc says so
// should that change.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace trident::data {

class TokenFile {
 public:
  // Maps `path` read-only. Errors name the file: kIO if it is missing or unreadable, kValue if
  // it is empty or its size is odd (not a whole number of 2-byte ids).
  static StatusOr<std::shared_ptr<const TokenFile>> open(const std::filesystem::path& path);
  // Tokens held in memory; `name` stands for the file in messages.
  static std::shared_ptr<const TokenFile> from_tokens(std::vector<uint16_t> tokens,
                                                      std::string name = "<memory>");

  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  std::span<const uint16_t> tokens() const { return {data_, static_cast<size_t>(size_)}; }
  int64_t size() const { return size_; }
  // The path (or the in-memory name), for messages.
  const std::string& name() const { return name_; }

  // kValue naming the file, the first offending position and id if an id is >= vocab_size
  // (a file prepared with another tokenizer). Reads the whole file.
  Status check_vocab_size(int64_t vocab_size) const;

 private:
  TokenFile(const uint16_t* data, int64_t size, std::string name, void* mapping,
            size_t mapping_bytes, std::vector<uint16_t> owned);

  const uint16_t* data_;
  int64_t size_;
  std::string name_;
  void* mapping_;  // the mmap'ed region, or null for in-memory tokens
  size_t mapping_bytes_;
  std::vector<uint16_t> owned_;  // in-memory tokens
};

// Writes `tokens` to `path` atomically (leveldb's way): to a temporary file in the same
// directory, fsync, rename over `path`, fsync the directory. Readers see the old file or the
// new one, never part of one; after a crash the temporary file may be left behind, never a
// torn `path`. Errors (kIO) name the file and the failing call.
Status write_token_file(const std::filesystem::path& path, std::span<const uint16_t> tokens);

}  // namespace trident::data
