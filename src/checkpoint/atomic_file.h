// Writing one file atomically: after a crash at any moment, `path` holds either what it held
// before (or nothing) or the complete new contents, never a mix or a prefix.
//
// The protocol (leveldb's SetCurrentFile, llm.c's checkpoint writes):
//   1. write everything to a temporary sibling `dir/.<name>.tmp`;
//   2. fsync it and close it;
//   3. rename it over `path` (atomic on POSIX filesystems);
//   4. fsync `dir`, so the rename itself survives a power loss.
// The writer also counts the bytes and computes their CRC-32C as they go by, for manifests.
//
// Not here: multi-file atomicity (checkpoint_dir.h builds that from this plus a completion
// marker), and concurrent writers of one path (the last commit wins; the two temporaries
// collide, so callers must not do it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "checkpoint/env.h"
#include "core/status.h"

namespace trident::checkpoint {

class AtomicFileWriter {
 public:
  // Opens the temporary file for `path`, replacing a stale temporary left by a crash.
  static StatusOr<AtomicFileWriter> create(Env* env, std::string path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // A writer destroyed without a successful commit() removes its temporary (best effort) and
  // leaves `path` untouched.
  ~AtomicFileWriter();

  Status append(std::string_view data);
  // Steps 2-4 above. After an error the file may or may not be in place (it is complete if it
  // is: only the directory sync can fail after the rename); the error says which step failed.
  Status commit();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }      // bytes appended so far
  uint32_t crc32c() const { return crc32c_; }  // of the bytes appended so far

  // The temporary name used for `path`: `dir/.<name>.tmp`.
  static std::string temp_path_for(std::string_view path);

 private:
  AtomicFileWriter(Env* env, std::string path, std::string temp_path,
                   std::unique_ptr<WritableFile> file);
  void abandon();

  Env* env_ = nullptr;
  std::string path_;
  std::string temp_path_;
  std::unique_ptr<WritableFile> file_;  // null once committed or abandoned
  uint64_t size_ = 0;
  uint32_t crc32c_ = 0;
};

// What was written: the size and CRC-32C of a committed file.
struct WrittenFile {
  std::string path;
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

// create + append(data) + commit.
StatusOr<WrittenFile> write_file_atomically(Env* env, const std::string& path,
                                            std::string_view data);

}  // namespace trident::checkpoint
