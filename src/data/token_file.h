// Token files: nanoGPT's train.bin / val.bin convention, so data prepared there works here
// and the other way round. A file is the token ids as raw little-endian uint16, with no header;
// its size is 2 x the number of tokens.
//
// Note [uint32 token files]
// Vocabularies past 65,536 ids (Llama 3's 128,256, Qwen2's 151,936) need 4-byte ids. Such a
// file starts with a 16-byte header, the 8 ASCII bytes "TRITOK32" and the token count as a
// little-endian uint64, then the ids as little-endian uint32. A file is read as uint32 only
// when it starts with the header and its size is 16 + 4 x the count; any other file is
// nanoGPT's uint16. So a uint16 file is never read as uint32 (its first four ids would have to
// spell the magic and its size match), and a uint32 file whose header is cut or altered is an
// error naming what does not add up, never ids read at the wrong width. prepare writes uint32
// exactly when the tokenizer's vocabulary does not fit in 16 bits.
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
  static std::shared_ptr<const TokenFile> from_tokens32(std::vector<uint32_t> tokens,
                                                        std::string name = "<memory>");

  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  // The ids of a uint16 file (throws for a uint32 one: read() serves both).
  std::span<const uint16_t> tokens() const;
  // Ids [start, start + n) into out.
  void read(int64_t start, int64_t n, int64_t* out) const;
  int64_t size() const { return size_; }
  int bytes_per_token() const { return wide_ ? 4 : 2; }
  // The path (or the in-memory name), for messages.
  const std::string& name() const { return name_; }

  // kValue naming the file, the first offending position and id if an id is >= vocab_size
  // (a file prepared with another tokenizer). Reads the whole file.
  Status check_vocab_size(int64_t vocab_size) const;
  // Refuses a uint16 file that holds uint32 ids without trident's header (Note [Headerless
  // uint32 files] in token_file.cc); open() calls it.
  Status check_not_headerless_uint32() const;

 private:
  TokenFile(const void* data, bool wide, int64_t size, std::string name, void* mapping, size_t mapping_bytes,
            std::vector<uint16_t> owned, std::vector<uint32_t> owned32);
  int64_t id(int64_t i) const { return wide_ ? data32_[i] : data_[i]; }

  const uint16_t* data_ = nullptr;   // uint16 ids
  const uint32_t* data32_ = nullptr; // uint32 ids (after the header)
  bool wide_ = false;
  int64_t size_;
  std::string name_;
  void* mapping_;  // the mmap'ed region, or null for in-memory tokens
  size_t mapping_bytes_;
  std::vector<uint16_t> owned_;  // in-memory tokens
  std::vector<uint32_t> owned32_;
};

// Writes `tokens` to `path` atomically (leveldb's way): to a temporary file in the same
// directory, fsync, rename over `path`, fsync the directory. Readers see the old file or the
// new one, never part of one; after a crash the temporary file may be left behind, never a
// torn `path`. Errors (kIO) name the file and the failing call.
Status write_token_file(const std::filesystem::path& path, std::span<const uint16_t> tokens);
// The same for 4-byte ids, with the header of Note [uint32 token files].
Status write_token_file32(const std::filesystem::path& path, std::span<const uint32_t> tokens);
// `header` then `bytes` bytes of `data` to `path` as write_token_file writes (`empty`: refuse
// an empty file, naming it). What the loss mask beside a token file is written with too.
Status write_atomically(const std::filesystem::path& path, std::string_view header, const char* data, size_t bytes,
                        bool empty);

// The 16-byte header of a uint32 token file starts with these 8 bytes.
inline constexpr char kTokenFile32Magic[8] = {'T', 'R', 'I', 'T', 'O', 'K', '3', '2'};
inline constexpr size_t kTokenFile32Header = 16;

}  // namespace trident::data
