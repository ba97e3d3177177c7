// Env: the seam between trident's durable-file code and the filesystem, after leveldb's Env.
//
// Every filesystem operation of the checkpoint layer goes through an Env, so a test can swap
// in a wrapper that fails chosen operations or forgets what was not synced when the "machine
// crashes" (tests/checkpoint/fault_injection_env.h). PosixEnv is the real implementation.
//
// Paths are plain strings ('/'-separated, as given; nothing is canonicalized). Every error is a
// Status of kind kIO naming the operation, the path(s) and the system's reason.
//
// Not here: buffering (WritableFile::append issues the writes directly; callers append large
// blocks), file locking, memory mapping (readers pread the ranges they need straight into
// tensor memory, which costs the same one copy as memcpy out of a mapping and has no
// SIGBUS-on-truncation hazard), and Windows.
//
// Thread safety: an Env may be used from many threads; a single WritableFile may not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace trident::checkpoint {

// A file opened for writing. Data reaches stable storage only once sync() returns OK.
class WritableFile {
 public:
  virtual ~WritableFile() = default;  // closes the file if close() was not called
  // Writes all of `data` at the end of the file.
  virtual Status append(std::string_view data) = 0;
  // Makes everything appended so far durable (fsync). The file's name in its directory is
  // made durable separately, by Env::sync_dir on the directory.
  virtual Status sync() = 0;
  virtual Status close() = 0;
};

// A file opened for reading at arbitrary offsets (pread).
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads exactly n bytes at `offset` into dst. Reading past the end of the file is an error
  // naming the file, the range and the file size.
  virtual Status read(uint64_t offset, size_t n, void* dst) const = 0;
  // The file's size when it was opened.
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

enum class FileType { kMissing, kFile, kDirectory, kSymlink, kOther };

class Env {
 public:
  virtual ~Env() = default;

  // Creates `path`, or truncates it if it exists, and opens it for appending.
  virtual StatusOr<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) = 0;
  virtual StatusOr<std::unique_ptr<RandomAccessFile>> new_random_access_file(
      const std::string& path) = 0;
  virtual StatusOr<uint64_t> file_size(const std::string& path) = 0;
  // What is at `path`, not following a final symbolic link (lstat).
  virtual FileType file_type(const std::string& path) = 0;
  // The names in `dir` (not "." or ".."), sorted.
  virtual StatusOr<std::vector<std::string>> list_dir(const std::string& dir) = 0;
  // Creates one directory; fails if `dir` exists or its parent does not.
  virtual Status create_dir(const std::string& dir) = 0;
  virtual Status remove_file(const std::string& path) = 0;
  // Removes an empty directory.
  virtual Status remove_dir(const std::string& dir) = 0;
  // POSIX rename: atomic; replaces an existing file at `to`; a directory may replace only an
  // empty directory. The change is durable once the directory holding both is synced.
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  // Makes the directory's entries (files created, renamed or removed in it) durable.
  virtual Status sync_dir(const std::string& dir) = 0;
};

// The process-wide PosixEnv. Never null, never destroyed.
Env* default_env();

// ---- helpers built on any Env ----

inline bool exists(Env* env, const std::string& path) {
  return env->file_type(path) != FileType::kMissing;
}
inline bool is_directory(Env* env, const std::string& path) {
  return env->file_type(path) == FileType::kDirectory;
}

// `a/b`, without doubling a '/' at the end of a.
std::string join_path(std::string_view a, std::string_view b);
// Everything before the last '/' ("." for a bare name, "/" for a file in the root).
std::string parent_dir(std::string_view path);
// Everything after the last '/'.
std::string base_name(std::string_view path);

// The whole file.
StatusOr<std::string> read_file(Env* env, const std::string& path);
// Creates `dir` and any missing parents, syncing each parent that gained an entry. An existing
// directory, or a symbolic link (to one, presumably), is accepted as it is.
Status create_dirs(Env* env, const std::string& dir);
// Removes a file, or a directory and everything under it; symbolic links are removed, never
// followed. Not atomic: callers that need a
// half-removed tree to be unrecognizable rename it to a scratch name first.
Status remove_tree(Env* env, const std::string& path);

}  // namespace trident::checkpoint
